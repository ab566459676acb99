// Data-parallel layer normalization on 4 devices: the batch is split, the
// features are whole, gamma and beta are replicated; no collective at
// all. Run it with
//   build/bin/dtensor-run -n 4 examples/layernorm.mlir
"dtensor.mesh"() {sym_name = "dp", shape = array<i64: 4>, axis_names = ["dp"]} : () -> ()
#row = affine_map<(b, d) -> (b, d)>
#red = affine_map<(b, d) -> (b)>
#feat = affine_map<(b, d) -> (d)>
func.func @layernorm(%x: tensor<32x64xf32> {dtensor.layout = #dtensor.layout<@dp, "[S(dp), R]">},
                     %gamma: tensor<64xf32> {dtensor.layout = #dtensor.layout<@dp, "[R]">},
                     %beta: tensor<64xf32> {dtensor.layout = #dtensor.layout<@dp, "[R]">})
    -> (tensor<32x64xf32> {dtensor.layout = #dtensor.layout<@dp, "[S(dp), R]">}) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 64.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e = tensor.empty() : tensor<32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<32xf32>) -> tensor<32xf32>
  // mean = sum(x) / n
  %sum = linalg.generic {indexing_maps = [#row, #red], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<32x64xf32>) outs(%z : tensor<32xf32>) {
    ^bb0(%v: f32, %acc: f32):
      %s = arith.addf %v, %acc : f32
      linalg.yield %s : f32
  } -> tensor<32xf32>
  // var = sum((x - mean)^2) / n
  %sq = linalg.generic {indexing_maps = [#row, #red, #red], iterator_types = ["parallel", "reduction"]}
      ins(%x, %sum : tensor<32x64xf32>, tensor<32xf32>) outs(%z : tensor<32xf32>) {
    ^bb0(%v: f32, %s: f32, %acc: f32):
      %mean = arith.divf %s, %n : f32
      %d = arith.subf %v, %mean : f32
      %d2 = arith.mulf %d, %d : f32
      %r = arith.addf %d2, %acc : f32
      linalg.yield %r : f32
  } -> tensor<32xf32>
  // y = (x - mean) / sqrt(var + eps) * gamma + beta
  %ey = tensor.empty() : tensor<32x64xf32>
  %y = linalg.generic {indexing_maps = [#row, #red, #red, #feat, #feat, #row],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum, %sq, %gamma, %beta : tensor<32x64xf32>, tensor<32xf32>, tensor<32xf32>, tensor<64xf32>, tensor<64xf32>)
      outs(%ey : tensor<32x64xf32>) {
    ^bb0(%v: f32, %s: f32, %q: f32, %g: f32, %b: f32, %o: f32):
      %mean = arith.divf %s, %n : f32
      %var = arith.divf %q, %n : f32
      %ve = arith.addf %var, %eps : f32
      %inv = math.rsqrt %ve : f32
      %d = arith.subf %v, %mean : f32
      %xn = arith.mulf %d, %inv : f32
      %sc = arith.mulf %xn, %g : f32
      %r = arith.addf %sc, %b : f32
      linalg.yield %r : f32
  } -> tensor<32x64xf32>
  return %y : tensor<32x64xf32>
}
