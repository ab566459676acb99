// RUN: dtensor-opt %s --dtensor-propagate="why=true" | FileCheck %s
// why=true: an op whose strategy costs communication also says what that
// costs and the cheapest strategy it did not take, with its cost.
//
// The MLP's second matmul: a Partial result the return reduces (about 31
// µs modelled) against all replicated (gathering the hidden value and the
// weight, about 40 µs).
// CHECK-LABEL: func.func @mlp
// CHECK: linalg.matmul {{.*}}dtensor.why = "linalg: from the layout wanted at {{.*}}; chosen: {{[0-9.]+}} us modelled; cheapest alternative: operand 0 [R, R], operand 1 [R, R], operand 2 [R, R], result 0 [R, R], {{[0-9.]+}} us"
// An op that costs nothing says nothing more.
// CHECK-LABEL: func.func @free
// CHECK-NOT: cheapest alternative
// CHECK: return
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @mlp(%x: tensor<64x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">},
               %w1: tensor<512x256xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S(tp)]">},
               %w2: tensor<256x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(tp), R]">})
    -> (tensor<64x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">}) {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64x256xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<64x256xf32>) -> tensor<64x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<64x512xf32>, tensor<512x256xf32>) outs(%i1 : tensor<64x256xf32>) -> tensor<64x256xf32>
  %e2 = tensor.empty() : tensor<64x512xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<64x512xf32>) -> tensor<64x512xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<64x256xf32>, tensor<256x512xf32>) outs(%i2 : tensor<64x512xf32>) -> tensor<64x512xf32>
  return %y : tensor<64x512xf32>
}
func.func @free(%x: tensor<64x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">})
    -> (tensor<64x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">}) {
  %e = tensor.empty() : tensor<64x512xf32>
  %y = linalg.add ins(%x, %x : tensor<64x512xf32>, tensor<64x512xf32>) outs(%e : tensor<64x512xf32>) -> tensor<64x512xf32>
  return %y : tensor<64x512xf32>
}
