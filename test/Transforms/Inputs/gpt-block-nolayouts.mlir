// A GPT block without layouts (gpt-block-sp.mlir's program, its argument
// layouts taken off; the result stays split by rows): auto-shard.test.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @gpt(%x: tensor<16x32xf32>,
    %wq: tensor<32x32xf32>, %wk: tensor<32x32xf32>, %wv: tensor<32x32xf32>,
    %wo: tensor<32x32xf32>, %w1: tensor<32x64xf32>,
    %w2: tensor<64x32xf32>) -> (tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) {
  %zero = arith.constant 0.0 : f32
  %ln1_e1 = tensor.empty() : tensor<16xf32>
  %ln1_s0 = linalg.fill ins(%zero : f32) outs(%ln1_e1 : tensor<16xf32>) -> tensor<16xf32>
  %ln1_sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<16x32xf32>) outs(%ln1_s0 : tensor<16xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %a, %v : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  %ln1_var = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x, %ln1_sum : tensor<16x32xf32>, tensor<16xf32>) outs(%ln1_s0 : tensor<16xf32>) {
  ^bb0(%v: f32, %s: f32, %a: f32):
    %n = arith.constant 32.0 : f32
    %m = arith.divf %s, %n : f32
    %c = arith.subf %v, %m : f32
    %q = arith.mulf %c, %c : f32
    %o = arith.addf %a, %q : f32
    linalg.yield %o : f32
  } -> tensor<16xf32>
  %ln1_e2 = tensor.empty() : tensor<16x32xf32>
  %h1 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x, %ln1_sum, %ln1_var : tensor<16x32xf32>, tensor<16xf32>, tensor<16xf32>) outs(%ln1_e2 : tensor<16x32xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %o: f32):
    %n = arith.constant 32.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %n : f32
    %w = arith.divf %q, %n : f32
    %we = arith.addf %w, %eps : f32
    %rs = math.rsqrt %we : f32
    %c = arith.subf %v, %m : f32
    %t1 = arith.mulf %c, %rs : f32
    linalg.yield %t1 : f32
  } -> tensor<16x32xf32>
  %qp_e = tensor.empty() : tensor<16x32xf32>
  %qp_z = linalg.fill ins(%zero : f32) outs(%qp_e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %qp = linalg.matmul ins(%h1, %wq : tensor<16x32xf32>, tensor<32x32xf32>) outs(%qp_z : tensor<16x32xf32>) -> tensor<16x32xf32>
  %qp4 = tensor.expand_shape %qp [[0, 1], [2, 3]] output_shape [2, 8, 4, 8] : tensor<16x32xf32> into tensor<2x8x4x8xf32>
  %kp_e = tensor.empty() : tensor<16x32xf32>
  %kp_z = linalg.fill ins(%zero : f32) outs(%kp_e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %kp = linalg.matmul ins(%h1, %wk : tensor<16x32xf32>, tensor<32x32xf32>) outs(%kp_z : tensor<16x32xf32>) -> tensor<16x32xf32>
  %kp4 = tensor.expand_shape %kp [[0, 1], [2, 3]] output_shape [2, 8, 4, 8] : tensor<16x32xf32> into tensor<2x8x4x8xf32>
  %vp_e = tensor.empty() : tensor<16x32xf32>
  %vp_z = linalg.fill ins(%zero : f32) outs(%vp_e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %vp = linalg.matmul ins(%h1, %wv : tensor<16x32xf32>, tensor<32x32xf32>) outs(%vp_z : tensor<16x32xf32>) -> tensor<16x32xf32>
  %vp4 = tensor.expand_shape %vp [[0, 1], [2, 3]] output_shape [2, 8, 4, 8] : tensor<16x32xf32> into tensor<2x8x4x8xf32>
  %se = tensor.empty() : tensor<2x4x8x8xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(b, n, i, j, d) -> (b, i, n, d)>, affine_map<(b, n, i, j, d) -> (b, j, n, d)>, affine_map<(b, n, i, j, d) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%qp4, %kp4 : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>) outs(%sz : tensor<2x4x8x8xf32>) {
  ^bb0(%x0: f32, %y0: f32, %o: f32):
    %p = arith.mulf %x0, %y0 : f32
    %a = arith.addf %o, %p : f32
    linalg.yield %a : f32
  } -> tensor<2x4x8x8xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(b, n, i, j) -> (b, n, i, j)>, affine_map<(b, n, i, j) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sc : tensor<2x4x8x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %scale = arith.constant 0.35355339059327373 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %future = arith.cmpi ugt, %j, %i : index
    %sv = arith.mulf %v, %scale : f32
    %r = arith.select %future, %ninf, %sv : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x8xf32>
  %pr = linalg.softmax dimension(3) ins(%masked : tensor<2x4x8x8xf32>) outs(%se : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %ce = tensor.empty() : tensor<2x8x4x8xf32>
  %cz = linalg.fill ins(%zero : f32) outs(%ce : tensor<2x8x4x8xf32>) -> tensor<2x8x4x8xf32>
  %ctx4 = linalg.generic {indexing_maps = [affine_map<(b, n, i, d, j) -> (b, n, i, j)>, affine_map<(b, n, i, d, j) -> (b, j, n, d)>, affine_map<(b, n, i, d, j) -> (b, i, n, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%pr, %vp4 : tensor<2x4x8x8xf32>, tensor<2x8x4x8xf32>) outs(%cz : tensor<2x8x4x8xf32>) {
  ^bb0(%x0: f32, %y0: f32, %o: f32):
    %p = arith.mulf %x0, %y0 : f32
    %a = arith.addf %o, %p : f32
    linalg.yield %a : f32
  } -> tensor<2x8x4x8xf32>
  %ctx = tensor.collapse_shape %ctx4 [[0, 1], [2, 3]] : tensor<2x8x4x8xf32> into tensor<16x32xf32>
  %att_e = tensor.empty() : tensor<16x32xf32>
  %att_z = linalg.fill ins(%zero : f32) outs(%att_e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %att = linalg.matmul ins(%ctx, %wo : tensor<16x32xf32>, tensor<32x32xf32>) outs(%att_z : tensor<16x32xf32>) -> tensor<16x32xf32>
  %x1 = arith.addf %x, %att : tensor<16x32xf32>
  %ln2_e1 = tensor.empty() : tensor<16xf32>
  %ln2_s0 = linalg.fill ins(%zero : f32) outs(%ln2_e1 : tensor<16xf32>) -> tensor<16xf32>
  %ln2_sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x1 : tensor<16x32xf32>) outs(%ln2_s0 : tensor<16xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %a, %v : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  %ln2_var = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x1, %ln2_sum : tensor<16x32xf32>, tensor<16xf32>) outs(%ln2_s0 : tensor<16xf32>) {
  ^bb0(%v: f32, %s: f32, %a: f32):
    %n = arith.constant 32.0 : f32
    %m = arith.divf %s, %n : f32
    %c = arith.subf %v, %m : f32
    %q = arith.mulf %c, %c : f32
    %o = arith.addf %a, %q : f32
    linalg.yield %o : f32
  } -> tensor<16xf32>
  %ln2_e2 = tensor.empty() : tensor<16x32xf32>
  %h2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x1, %ln2_sum, %ln2_var : tensor<16x32xf32>, tensor<16xf32>, tensor<16xf32>) outs(%ln2_e2 : tensor<16x32xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %o: f32):
    %n = arith.constant 32.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %n : f32
    %w = arith.divf %q, %n : f32
    %we = arith.addf %w, %eps : f32
    %rs = math.rsqrt %we : f32
    %c = arith.subf %v, %m : f32
    %t1 = arith.mulf %c, %rs : f32
    linalg.yield %t1 : f32
  } -> tensor<16x32xf32>
  %u_e = tensor.empty() : tensor<16x64xf32>
  %u_z = linalg.fill ins(%zero : f32) outs(%u_e : tensor<16x64xf32>) -> tensor<16x64xf32>
  %u = linalg.matmul ins(%h2, %w1 : tensor<16x32xf32>, tensor<32x64xf32>) outs(%u_z : tensor<16x64xf32>) -> tensor<16x64xf32>
  %ge = tensor.empty() : tensor<16x64xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%u : tensor<16x64xf32>) outs(%ge : tensor<16x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %c0 = arith.constant 0.5 : f32
    %c1 = arith.constant 1.0 : f32
    %c2 = arith.constant 0.7978845608 : f32
    %c3 = arith.constant 0.044715 : f32
    %v3 = arith.mulf %v, %v : f32
    %v4 = arith.mulf %v3, %v : f32
    %v5 = arith.mulf %v4, %c3 : f32
    %v6 = arith.addf %v, %v5 : f32
    %v7 = arith.mulf %v6, %c2 : f32
    %v8 = math.tanh %v7 : f32
    %v9 = arith.addf %v8, %c1 : f32
    %va = arith.mulf %v, %c0 : f32
    %vb = arith.mulf %va, %v9 : f32
    linalg.yield %vb : f32
  } -> tensor<16x64xf32>
  %dn_e = tensor.empty() : tensor<16x32xf32>
  %dn_z = linalg.fill ins(%zero : f32) outs(%dn_e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %dn = linalg.matmul ins(%g, %w2 : tensor<16x64xf32>, tensor<64x32xf32>) outs(%dn_z : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = arith.addf %x1, %dn : tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}
