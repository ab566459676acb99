// dtensor.all_reduce lowers to a start, right after its input is made, and
// a wait, right before its result's first use: the independent tanh in
// between runs while the all_reduce is in flight. (Other collectives still
// block.)
// RUN: dtensor-opt %s --dtensor-spmd --dtensor-lower-to-runtime | FileCheck %s
// CHECK-LABEL: func.func @overlap(
// CHECK: %[[A:.*]] = linalg.matmul ins(%arg0, %arg1
// CHECK: %[[REQ:.*]] = call @dtrt_mlir_all_reduce_start_f32(
// CHECK: math.tanh %arg2
// CHECK: call @dtrt_mlir_wait_f32(%[[REQ]],
// CHECK: linalg.generic
// CHECK: return
// RUN: dtensor-run -n 2 %s | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @overlap(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S0]">},
                   %w: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
                   %y: tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">})
    -> (tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %a = linalg.matmul ins(%x, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %b = math.tanh %y : tensor<16x32xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%a, %b : tensor<16x32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  return %c : tensor<16x32xf32>
}
