// The Megatron MLP without a mesh or layouts: a single-device program that
// dtensor-auto-shard{mesh=...}, dtensor-run --auto and Python's auto=
// split over a mesh they declare (auto-shard.test).
func.func @megatron(%x: tensor<16x64xf32>,
                    %w1: tensor<64x256xf32>,
                    %w2: tensor<256x64xf32>)
    -> (tensor<16x64xf32>) {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x256xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
