// dtensor-run --profile: every op of the per-device program that costs time
// is timed on each rank: the table names each op (the BLAS contraction
// calls, the fused tanh loop, the all_reduce's start and wait) with its
// shapes and source line, and counts one call per rank and run (2 ranks x
// 3 runs), then sums each kind (two contractions: 12 calls); the Chrome
// trace has a track per rank. A run on mpi is refused.
// RUN: dtensor-run -n 2 --repeat 2 --profile %t.json %s | FileCheck %s
// RUN: FileCheck %s --check-prefix=TRACE < %t.json
// RUN: not dtensor-run -n 2 --backend mpi --profile %t.json %s 2>&1 | FileCheck %s --check-prefix=MPI
// CHECK: every rank's result equals the single-device run
// CHECK: profile: 2 ranks, summed over them (trace: {{.*}}.json)
// CHECK: total ms calls mean us share op
// CHECK-DAG: {{^ *[0-9.]+ +6 +[0-9.]+ +[0-9.]+%}} call dtrt_mlir_contract_f32_f32_f32 {{.*}} at {{.*}}profile.mlir:[[# @LINE + 21]]:8
// CHECK-DAG: {{^ *[0-9.]+ +6 +[0-9.]+ +[0-9.]+%}} linalg.generic memref<16x128xf32>{{.*}} at {{.*}}profile.mlir:[[# @LINE + 21]]:8
// CHECK-DAG: {{^ *[0-9.]+ +6 +[0-9.]+ +[0-9.]+%}} call dtrt_mlir_collective_start_f32
// CHECK-DAG: {{^ *[0-9.]+ +6 +[0-9.]+ +[0-9.]+%}} call dtrt_mlir_wait_f32
// CHECK: by kind:
// CHECK-DAG: {{^ *[0-9.]+ +12 +[0-9.]+ +[0-9.]+%}} dtrt_mlir_contract_f32_f32_f32{{$}}
// CHECK-DAG: {{^ *[0-9.]+ +6 +[0-9.]+ +[0-9.]+%}} linalg.generic{{$}}
// TRACE: "traceEvents"
// TRACE-DAG: "args": {"name": "rank 0"}
// TRACE-DAG: "args": {"name": "rank 1"}
// TRACE-DAG: {"name": "dtrt_mlir_contract_f32_f32_f32", "ph": "X", "pid": 1,
// TRACE-DAG: {"name": "linalg.generic", "ph": "X", "pid": 0,
// MPI: --profile times a PROG.mlir run on the shm backend
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 2>, axis_names = ["tp"]} : () -> ()
func.func @mlp(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">},
               %w1: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">},
               %w2: tensor<256x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">})
    -> (tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x256xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<16x256xf32>) outs(%e1 : tensor<16x256xf32>) {
  ^bb0(%v: f32, %o: f32):
    %t = math.tanh %v : f32
    linalg.yield %t : f32
  } -> tensor<16x256xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%a, %w2 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
