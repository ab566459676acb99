// dtensor-autodiff: @f_grad returns @f's results, then the gradient of the
// scalar result by each chosen argument, laid out as the argument; the
// reverse sweep follows the forward ops (test/autodiff checks the values).
// RUN: dtensor-opt %s --dtensor-autodiff="function=f wrt=0,1" | FileCheck %s
// CHECK-LABEL: func.func @f(
// CHECK-LABEL: func.func @f_grad(
// CHECK-SAME: -> (tensor<f32>, tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}, tensor<4x2xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">})
// The forward matmul, then the seed (ones), then the adjoints.
// CHECK: linalg.matmul
// CHECK: arith.constant 1.000000e+00 : f32
// CHECK: linalg.generic
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<8x4xf32>, tensor<4x2xf32>
// An argument by which nothing varies gets a zero gradient.
// RUN: dtensor-opt %s --dtensor-autodiff="function=f wrt=2 suffix=_d" | FileCheck %s --check-prefix=ZERO
// ZERO-LABEL: func.func @f_d(
// ZERO: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<3xf32>)
// ZERO: return %{{.*}}, %[[Z]] : tensor<f32>, tensor<3xf32>
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @f(%x: tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
             %w: tensor<4x2xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">},
             %unused: tensor<3xf32>) -> tensor<f32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x2xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<8x2xf32>) -> tensor<8x2xf32>
  %y = linalg.matmul ins(%x, %w : tensor<8x4xf32>, tensor<4x2xf32>) outs(%i : tensor<8x2xf32>) -> tensor<8x2xf32>
  %e2 = tensor.empty() : tensor<f32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%y : tensor<8x2xf32>) outs(%i2 : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
