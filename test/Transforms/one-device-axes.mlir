// RUN: dtensor-opt %s --dtensor-spmd | FileCheck %s
// RUN: dtensor-run -n 1 %s | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
//
// A program written for a larger mesh, run on a mesh of one device: every
// collective of its plans is over axes of size 1, the identity, and none is
// emitted (the Megatron MLP's all_reduce over tp disappears).
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 1>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @mlp
// CHECK-NOT: "dtensor.{{[a-z_]+}}"(
// CHECK: return
func.func @mlp(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">},
               %w1: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(tp)]">},
               %w2: tensor<256x64xf32> {dtensor.layout = #dtensor.layout<@m, "[S(tp), R]">})
    -> (tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x256xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
