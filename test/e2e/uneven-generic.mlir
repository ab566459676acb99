// RUN: dtensor-run -n 8 %s | FileCheck %s
// CHECK-COUNT-8: result elements, equal to the single-device run
// CHECK: every rank's result equals the single-device run
// A reduction whose body is not linear (sum of exp) over a dim of 10 cut
// into 8 shards over both mesh axes: blocks 2, 2, 2, 2, 2, 0, 0, 0. Masking
// the padding with zeros would count exp(0) = 1 per padded element; the
// partitioned op instead runs over each device's real extent only.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @sumexp(%x: tensor<4x10xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(dp,tp)]">})
    -> (tensor<4xf32> {dtensor.layout = #dtensor.layout<@m, "[R]">}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x10xf32>) outs(%z : tensor<4xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %ex = math.exp %in : f32
      %a = arith.addf %ex, %acc : f32
      linalg.yield %a : f32
  } -> tensor<4xf32>
  // Pinned Partial, so the reduction runs sharded (at this size the cost
  // model would rather gather the input).
  %p = "dtensor.annotate"(%s) {layout = #dtensor.layout<@m, "[R] Psum(dp,tp)">} : (tensor<4xf32>) -> tensor<4xf32>
  return %p : tensor<4xf32>
}
