// A two-layer MLP's loss (the sum of squares of its output) on a
// data-parallel mesh of 2, without layouts: dtensor-autodiff makes its
// Adam step, dtensor-auto-shard lays it out (auto-shard.test).
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["dp"]} : () -> ()
func.func @loss(%w1: tensor<64x64xf32> {dtensor.name = "w1"},
                %w2: tensor<64x64xf32> {dtensor.name = "w2"},
                %x: tensor<256x64xf32> {dtensor.name = "x"}) -> tensor<f32> {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<256x64xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<256x64xf32>) -> tensor<256x64xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<256x64xf32>, tensor<64x64xf32>) outs(%i1 : tensor<256x64xf32>) -> tensor<256x64xf32>
  %e2 = tensor.empty() : tensor<256x64xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<256x64xf32>) -> tensor<256x64xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<256x64xf32>, tensor<64x64xf32>) outs(%i2 : tensor<256x64xf32>) -> tensor<256x64xf32>
  %e3 = tensor.empty() : tensor<f32>
  %i3 = linalg.fill ins(%z : f32) outs(%e3 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%y : tensor<256x64xf32>) outs(%i3 : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.mulf %a, %a : f32
    %r = arith.addf %acc, %s : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
