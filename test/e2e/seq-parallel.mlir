// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK: every rank's result equals the single-device run
// Sequence-parallel output: the Partial result is reduce-scattered.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @seq(%h: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S(tp)]">},
               %w: tensor<256x32xf32> {dtensor.layout = #dtensor.layout<@tp, "[S(tp), R]">})
    -> (tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@tp, "[S(tp), R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x32xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<64x32xf32>) -> tensor<64x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<64x256xf32>, tensor<256x32xf32>) outs(%i : tensor<64x32xf32>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}
