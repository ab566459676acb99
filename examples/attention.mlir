// Multi-head self-attention with the heads split over 4 devices (Megatron
// style): the per-head projections, scores, softmax and values stay on
// their device; the output projection sums over heads, one all_reduce.
// x: [seq, model], wq/wk/wv: [heads, model, head_dim], wo: [heads,
// head_dim, model]. Run it with
//   build/bin/dtensor-run -n 4 examples/attention.mlir
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
#x_shd = affine_map<(h, s, d, k) -> (s, d)>
#w_hdk = affine_map<(h, s, d, k) -> (h, d, k)>
#o_hsk = affine_map<(h, s, d, k) -> (h, s, k)>
#q_hsk = affine_map<(h, s, t, k) -> (h, s, k)>
#k_htk = affine_map<(h, s, t, k) -> (h, t, k)>
#o_hst = affine_map<(h, s, t, k) -> (h, s, t)>
#a_hst = affine_map<(h, s, t) -> (h, s, t)>
#r_hs = affine_map<(h, s, t) -> (h, s)>
#p_hst = affine_map<(h, s, k, t) -> (h, s, t)>
#v_htk = affine_map<(h, s, k, t) -> (h, t, k)>
#c_hsk = affine_map<(h, s, k, t) -> (h, s, k)>
#c_in = affine_map<(s, d, h, k) -> (h, s, k)>
#wo_in = affine_map<(s, d, h, k) -> (h, k, d)>
#y_out = affine_map<(s, d, h, k) -> (s, d)>
func.func @attention(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">},
                     %wq: tensor<8x64x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S(tp), R, R]">},
                     %wk: tensor<8x64x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S(tp), R, R]">},
                     %wv: tensor<8x64x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S(tp), R, R]">},
                     %wo: tensor<8x16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[S(tp), R, R]">})
    -> (tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">}) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.25 : f32
  // Per-head projections: [h, s, k] = sum_d x[s, d] * w[h, d, k].
  %e_hsk = tensor.empty() : tensor<8x16x16xf32>
  %z_hsk = linalg.fill ins(%zero : f32) outs(%e_hsk : tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %q = linalg.generic {indexing_maps = [#x_shd, #w_hdk, #o_hsk],
                       iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
      ins(%x, %wq : tensor<16x64xf32>, tensor<8x64x16xf32>) outs(%z_hsk : tensor<8x16x16xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %c, %m : f32
      linalg.yield %r : f32
  } -> tensor<8x16x16xf32>
  %k = linalg.generic {indexing_maps = [#x_shd, #w_hdk, #o_hsk],
                       iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
      ins(%x, %wk : tensor<16x64xf32>, tensor<8x64x16xf32>) outs(%z_hsk : tensor<8x16x16xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %c, %m : f32
      linalg.yield %r : f32
  } -> tensor<8x16x16xf32>
  %v = linalg.generic {indexing_maps = [#x_shd, #w_hdk, #o_hsk],
                       iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
      ins(%x, %wv : tensor<16x64xf32>, tensor<8x64x16xf32>) outs(%z_hsk : tensor<8x16x16xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %c, %m : f32
      linalg.yield %r : f32
  } -> tensor<8x16x16xf32>
  // Scores: [h, s, t] = scale * sum_k q[h, s, k] * k[h, t, k].
  %e_hst = tensor.empty() : tensor<8x16x16xf32>
  %z_hst = linalg.fill ins(%zero : f32) outs(%e_hst : tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %sc = linalg.generic {indexing_maps = [#q_hsk, #k_htk, #o_hst],
                        iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<8x16x16xf32>, tensor<8x16x16xf32>) outs(%z_hst : tensor<8x16x16xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %m = arith.mulf %a, %b : f32
      %ms = arith.mulf %m, %scale : f32
      %r = arith.addf %c, %ms : f32
      linalg.yield %r : f32
  } -> tensor<8x16x16xf32>
  // Softmax over t: max, exp(x - max), sum, divide.
  %e_hs = tensor.empty() : tensor<8x16xf32>
  %ninf_hs = linalg.fill ins(%ninf : f32) outs(%e_hs : tensor<8x16xf32>) -> tensor<8x16xf32>
  %mx = linalg.generic {indexing_maps = [#a_hst, #r_hs], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%sc : tensor<8x16x16xf32>) outs(%ninf_hs : tensor<8x16xf32>) {
    ^bb0(%a: f32, %c: f32):
      %r = arith.maximumf %a, %c : f32
      linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %ex = linalg.generic {indexing_maps = [#a_hst, #r_hs, #a_hst], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%sc, %mx : tensor<8x16x16xf32>, tensor<8x16xf32>) outs(%e_hst : tensor<8x16x16xf32>) {
    ^bb0(%a: f32, %m: f32, %o: f32):
      %d = arith.subf %a, %m : f32
      %r = math.exp %d : f32
      linalg.yield %r : f32
  } -> tensor<8x16x16xf32>
  %z_hs = linalg.fill ins(%zero : f32) outs(%e_hs : tensor<8x16xf32>) -> tensor<8x16xf32>
  %den = linalg.generic {indexing_maps = [#a_hst, #r_hs], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ex : tensor<8x16x16xf32>) outs(%z_hs : tensor<8x16xf32>) {
    ^bb0(%a: f32, %c: f32):
      %r = arith.addf %a, %c : f32
      linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %pr = linalg.generic {indexing_maps = [#a_hst, #r_hs, #a_hst], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%ex, %den : tensor<8x16x16xf32>, tensor<8x16xf32>) outs(%e_hst : tensor<8x16x16xf32>) {
    ^bb0(%a: f32, %s: f32, %o: f32):
      %r = arith.divf %a, %s : f32
      linalg.yield %r : f32
  } -> tensor<8x16x16xf32>
  // Context: [h, s, k] = sum_t p[h, s, t] * v[h, t, k].
  %ctx = linalg.generic {indexing_maps = [#p_hst, #v_htk, #c_hsk],
                         iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%pr, %v : tensor<8x16x16xf32>, tensor<8x16x16xf32>) outs(%z_hsk : tensor<8x16x16xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %c, %m : f32
      linalg.yield %r : f32
  } -> tensor<8x16x16xf32>
  // Output projection, summed over heads (split: Partial, one all_reduce).
  %e_sd = tensor.empty() : tensor<16x64xf32>
  %z_sd = linalg.fill ins(%zero : f32) outs(%e_sd : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.generic {indexing_maps = [#c_in, #wo_in, #y_out],
                       iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%ctx, %wo : tensor<8x16x16xf32>, tensor<8x16x64xf32>) outs(%z_sd : tensor<16x64xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %c, %m : f32
      linalg.yield %r : f32
  } -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
