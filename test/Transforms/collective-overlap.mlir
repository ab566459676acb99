// Each collective lowers to a start, right after its input is made, and a
// wait, right before its result's first use: the independent ops in
// between run while it is in flight. Here an all_reduce; below, an FSDP
// step's all_gather of a weight and reduce_scatter of its gradient.
// RUN: dtensor-opt %s --dtensor-spmd --dtensor-lower-to-runtime | FileCheck %s
// CHECK-LABEL: func.func @overlap(
// CHECK: %[[A:.*]] = linalg.matmul ins(%arg0, %arg1
// CHECK: %[[REQ:.*]] = call @dtrt_mlir_collective_start_f32(
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

// The weight's all_gather starts right after dtrt_mlir_init (its input is
// an argument). dtensor-schedule-collectives puts the gradient's
// contraction first (the reduce_scatter needs it) and the ops no
// collective needs after: the contraction runs while the all_gather is in
// flight, the tanh while both are, and the exp (which the program has after
// the gradient) while the reduce_scatter is.
// RUN: dtensor-opt %s --dtensor-spmd --dtensor-lower-to-runtime | FileCheck %s --check-prefix=FSDP
// RUN: dtensor-run -n 2 --entry fsdp %s | FileCheck %s --check-prefix=OK
// RUN: env DTENSOR_OVERLAP=0 dtensor-run -n 2 --entry fsdp %s | FileCheck %s --check-prefix=OK
// FSDP-LABEL: func.func @fsdp(
// FSDP: call @dtrt_mlir_init(
// FSDP: bufferization.to_buffer %arg1
// FSDP: %[[AG_KIND:.*]] = arith.constant 0 : i64
// FSDP: %[[AG:.*]] = call @dtrt_mlir_collective_start_f32(%[[AG_KIND]],
// FSDP: linalg.generic
// FSDP: %[[RS_KIND:.*]] = arith.constant 2 : i64
// FSDP: %[[RS:.*]] = call @dtrt_mlir_collective_start_f32(%[[RS_KIND]],
// FSDP: math.tanh %arg3
// FSDP: call @dtrt_mlir_wait_f32(%[[AG]],
// FSDP: linalg.matmul
// FSDP: math.exp
// FSDP: call @dtrt_mlir_wait_f32(%[[RS]],
// FSDP: return
func.func @fsdp(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
                %w: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
                %d: tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
                %v: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">})
    -> (tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
        tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
        tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  %t = math.tanh %v : tensor<8x8xf32>
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%x, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %ge = tensor.empty() : tensor<64x32xf32>
  %gf = linalg.fill ins(%z : f32) outs(%ge : tensor<64x32xf32>) -> tensor<64x32xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(k, n, b) -> (b, k)>, affine_map<(k, n, b) -> (b, n)>, affine_map<(k, n, b) -> (k, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %d : tensor<16x64xf32>, tensor<16x32xf32>) outs(%gf : tensor<64x32xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<64x32xf32>
  %t2 = math.exp %t : tensor<8x8xf32>
  return %y, %g, %t2 : tensor<16x32xf32>, tensor<64x32xf32>, tensor<8x8xf32>
}
