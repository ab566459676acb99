// The tutorial's single-device program (docs/tutorial.md): a two-layer MLP
// with nothing about devices in it except argument names.
func.func @mlp(%x: tensor<32x128xf32> {dtensor.name = "x"},
               %w1: tensor<128x512xf32> {dtensor.name = "layer.w_up"},
               %w2: tensor<512x128xf32> {dtensor.name = "layer.w_down"}) -> tensor<32x128xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<32x512xf32>
  %i1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<32x512xf32>) -> tensor<32x512xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<32x128xf32>, tensor<128x512xf32>) outs(%i1 : tensor<32x512xf32>) -> tensor<32x512xf32>
  %e2 = tensor.empty() : tensor<32x128xf32>
  %i2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<32x128xf32>) -> tensor<32x128xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<32x512xf32>, tensor<512x128xf32>) outs(%i2 : tensor<32x128xf32>) -> tensor<32x128xf32>
  return %y : tensor<32x128xf32>
}
