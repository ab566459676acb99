// A two-layer MLP whose hidden bias is a fill read as an input: the
// compiled program holds it while its user runs, automatic sharding's
// model counts values that only initialize as nothing (auto-shard.test,
// RETRY).
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["x"]} : () -> ()
func.func @mlp(%x: tensor<16x64xf32>, %w1: tensor<64x256xf32>, %w2: tensor<256x64xf32>) -> tensor<16x64xf32> {
  %half = arith.constant 0.5 : f32
  %eb = tensor.empty() : tensor<256xf32>
  %bias = linalg.fill ins(%half : f32) outs(%eb : tensor<256xf32>) -> tensor<256xf32>
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x256xf32>
  %f1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%f1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %hb = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%h, %bias : tensor<16x256xf32>, tensor<256xf32>) outs(%e1 : tensor<16x256xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = math.tanh %s : f32
    linalg.yield %t : f32
  } -> tensor<16x256xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %f2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%hb, %w2 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%f2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
