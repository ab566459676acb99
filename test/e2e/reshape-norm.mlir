// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK: every rank's result equals the single-device run
// Rows over dp, a reshape that splits the sharded dim's axes, and a
// row normalization (a reduction over an unsharded dim).
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["dp", "tp"]} : () -> ()
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @norm(%x: tensor<8x16xf32> {dtensor.layout = #dtensor.layout<@m, "[S01, R]">})
    -> (tensor<2x4x16xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, S1, R]">}) {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %sq = linalg.reduce ins(%x : tensor<8x16xf32>) outs(%i1 : tensor<8xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %m = arith.mulf %in, %in : f32
      %r = arith.addf %m, %acc : f32
      linalg.yield %r : f32
    }
  %e2 = tensor.empty() : tensor<8x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sq : tensor<8x16xf32>, tensor<8xf32>) outs(%e2 : tensor<8x16xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %d = arith.addf %s, %one : f32
    %q = math.rsqrt %d : f32
    %r = arith.mulf %v, %q : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %r = tensor.expand_shape %y [[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xf32> into tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}
