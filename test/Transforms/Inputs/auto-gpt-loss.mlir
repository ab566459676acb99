"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["dp"]} : () -> ()
func.func @loss(%p_transformer_wte_weight: tensor<256x128xf32> {dtensor.name = "transformer.wte.weight"}, %p_transformer_wpe_weight: tensor<16x128xf32> {dtensor.name = "transformer.wpe.weight"}, %p_transformer_h_0_ln_1_weight: tensor<128xf32> {dtensor.name = "transformer.h.0.ln_1.weight"}, %p_transformer_h_0_ln_1_bias: tensor<128xf32> {dtensor.name = "transformer.h.0.ln_1.bias"}, %p_transformer_h_0_attn_q_weight: tensor<128x128xf32> {dtensor.name = "transformer.h.0.attn.q.weight"}, %p_transformer_h_0_attn_k_weight: tensor<128x128xf32> {dtensor.name = "transformer.h.0.attn.k.weight"}, %p_transformer_h_0_attn_v_weight: tensor<128x128xf32> {dtensor.name = "transformer.h.0.attn.v.weight"}, %p_transformer_h_0_attn_c_proj_weight: tensor<128x128xf32> {dtensor.name = "transformer.h.0.attn.c_proj.weight"}, %p_transformer_h_0_ln_2_weight: tensor<128xf32> {dtensor.name = "transformer.h.0.ln_2.weight"}, %p_transformer_h_0_ln_2_bias: tensor<128xf32> {dtensor.name = "transformer.h.0.ln_2.bias"}, %p_transformer_h_0_mlp_c_fc_weight: tensor<128x512xf32> {dtensor.name = "transformer.h.0.mlp.c_fc.weight"}, %p_transformer_h_0_mlp_c_proj_weight: tensor<512x128xf32> {dtensor.name = "transformer.h.0.mlp.c_proj.weight"}, %p_transformer_h_1_ln_1_weight: tensor<128xf32> {dtensor.name = "transformer.h.1.ln_1.weight"}, %p_transformer_h_1_ln_1_bias: tensor<128xf32> {dtensor.name = "transformer.h.1.ln_1.bias"}, %p_transformer_h_1_attn_q_weight: tensor<128x128xf32> {dtensor.name = "transformer.h.1.attn.q.weight"}, %p_transformer_h_1_attn_k_weight: tensor<128x128xf32> {dtensor.name = "transformer.h.1.attn.k.weight"}, %p_transformer_h_1_attn_v_weight: tensor<128x128xf32> {dtensor.name = "transformer.h.1.attn.v.weight"}, %p_transformer_h_1_attn_c_proj_weight: tensor<128x128xf32> {dtensor.name = "transformer.h.1.attn.c_proj.weight"}, %p_transformer_h_1_ln_2_weight: tensor<128xf32> {dtensor.name = "transformer.h.1.ln_2.weight"}, %p_transformer_h_1_ln_2_bias: tensor<128xf32> {dtensor.name = "transformer.h.1.ln_2.bias"}, %p_transformer_h_1_mlp_c_fc_weight: tensor<128x512xf32> {dtensor.name = "transformer.h.1.mlp.c_fc.weight"}, %p_transformer_h_1_mlp_c_proj_weight: tensor<512x128xf32> {dtensor.name = "transformer.h.1.mlp.c_proj.weight"}, %p_transformer_ln_f_weight: tensor<128xf32> {dtensor.name = "transformer.ln_f.weight"}, %p_transformer_ln_f_bias: tensor<128xf32> {dtensor.name = "transformer.ln_f.bias"}, %tokens: tensor<4x16xi64> {dtensor.name = "tokens"}, %targets: tensor<4x16xi64> {dtensor.name = "targets"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %emb_e = tensor.empty() : tensor<4x16x128xf32>
  %emb = linalg.generic {indexing_maps = [affine_map<(b, t, c) -> (b, t)>, affine_map<(b, t, c) -> (t, c)>, affine_map<(b, t, c) -> (b, t, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%tokens, %p_transformer_wpe_weight : tensor<4x16xi64>, tensor<16x128xf32>) outs(%emb_e : tensor<4x16x128xf32>) {
  ^bb0(%id: i64, %pos: f32, %o: f32):
    %i = arith.index_cast %id : i64 to index
    %c = linalg.index 2 : index
    %tok = tensor.extract %p_transformer_wte_weight[%i, %c] : tensor<256x128xf32>
    %s = arith.addf %tok, %pos : f32
    linalg.yield %s : f32
  } -> tensor<4x16x128xf32>
  %xemb = tensor.collapse_shape %emb [[0, 1], [2]] : tensor<4x16x128xf32> into tensor<64x128xf32>
  %b0_ln1_e1 = tensor.empty() : tensor<64xf32>
  %b0_ln1_s0 = linalg.fill ins(%zero : f32) outs(%b0_ln1_e1 : tensor<64xf32>) -> tensor<64xf32>
  %b0_ln1_sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%xemb : tensor<64x128xf32>) outs(%b0_ln1_s0 : tensor<64xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %a, %v : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %b0_ln1_var = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%xemb, %b0_ln1_sum : tensor<64x128xf32>, tensor<64xf32>) outs(%b0_ln1_s0 : tensor<64xf32>) {
  ^bb0(%v: f32, %s: f32, %a: f32):
    %n = arith.constant 128.0 : f32
    %m = arith.divf %s, %n : f32
    %c = arith.subf %v, %m : f32
    %q = arith.mulf %c, %c : f32
    %o = arith.addf %a, %q : f32
    linalg.yield %o : f32
  } -> tensor<64xf32>
  %b0_ln1_e2 = tensor.empty() : tensor<64x128xf32>
  %b0_h1 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%xemb, %b0_ln1_sum, %b0_ln1_var, %p_transformer_h_0_ln_1_weight, %p_transformer_h_0_ln_1_bias : tensor<64x128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<128xf32>, tensor<128xf32>) outs(%b0_ln1_e2 : tensor<64x128xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %gg: f32, %bb: f32, %o: f32):
    %n = arith.constant 128.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %n : f32
    %w = arith.divf %q, %n : f32
    %we = arith.addf %w, %eps : f32
    %rs = math.rsqrt %we : f32
    %c = arith.subf %v, %m : f32
    %t1 = arith.mulf %c, %rs : f32
    %t2 = arith.mulf %t1, %gg : f32
    %t3 = arith.addf %t2, %bb : f32
    linalg.yield %t3 : f32
  } -> tensor<64x128xf32>
  %b0_q_e = tensor.empty() : tensor<64x128xf32>
  %b0_q_z = linalg.fill ins(%zero : f32) outs(%b0_q_e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b0_q = linalg.matmul ins(%b0_h1, %p_transformer_h_0_attn_q_weight : tensor<64x128xf32>, tensor<128x128xf32>) outs(%b0_q_z : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b0_q4 = tensor.expand_shape %b0_q [[0, 1], [2, 3]] output_shape [4, 16, 4, 32] : tensor<64x128xf32> into tensor<4x16x4x32xf32>
  %b0_k_e = tensor.empty() : tensor<64x128xf32>
  %b0_k_z = linalg.fill ins(%zero : f32) outs(%b0_k_e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b0_k = linalg.matmul ins(%b0_h1, %p_transformer_h_0_attn_k_weight : tensor<64x128xf32>, tensor<128x128xf32>) outs(%b0_k_z : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b0_k4 = tensor.expand_shape %b0_k [[0, 1], [2, 3]] output_shape [4, 16, 4, 32] : tensor<64x128xf32> into tensor<4x16x4x32xf32>
  %b0_v_e = tensor.empty() : tensor<64x128xf32>
  %b0_v_z = linalg.fill ins(%zero : f32) outs(%b0_v_e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b0_v = linalg.matmul ins(%b0_h1, %p_transformer_h_0_attn_v_weight : tensor<64x128xf32>, tensor<128x128xf32>) outs(%b0_v_z : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b0_v4 = tensor.expand_shape %b0_v [[0, 1], [2, 3]] output_shape [4, 16, 4, 32] : tensor<64x128xf32> into tensor<4x16x4x32xf32>
  %b0_se = tensor.empty() : tensor<4x4x16x16xf32>
  %b0_sz = linalg.fill ins(%zero : f32) outs(%b0_se : tensor<4x4x16x16xf32>) -> tensor<4x4x16x16xf32>
  %b0_sc = linalg.generic {indexing_maps = [affine_map<(b, n, i, j, d) -> (b, i, n, d)>, affine_map<(b, n, i, j, d) -> (b, j, n, d)>, affine_map<(b, n, i, j, d) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%b0_q4, %b0_k4 : tensor<4x16x4x32xf32>, tensor<4x16x4x32xf32>) outs(%b0_sz : tensor<4x4x16x16xf32>) {
  ^bb0(%x0: f32, %y0: f32, %o: f32):
    %p = arith.mulf %x0, %y0 : f32
    %a = arith.addf %o, %p : f32
    linalg.yield %a : f32
  } -> tensor<4x4x16x16xf32>
  %b0_masked = linalg.generic {indexing_maps = [affine_map<(b, n, i, j) -> (b, n, i, j)>, affine_map<(b, n, i, j) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%b0_sc : tensor<4x4x16x16xf32>) outs(%b0_se : tensor<4x4x16x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %scale = arith.constant 0.17677669529663687 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %future = arith.cmpi ugt, %j, %i : index
    %sv = arith.mulf %v, %scale : f32
    %r = arith.select %future, %ninf, %sv : f32
    linalg.yield %r : f32
  } -> tensor<4x4x16x16xf32>
  %b0_pr = linalg.softmax dimension(3) ins(%b0_masked : tensor<4x4x16x16xf32>) outs(%b0_se : tensor<4x4x16x16xf32>) -> tensor<4x4x16x16xf32>
  %b0_ce = tensor.empty() : tensor<4x16x4x32xf32>
  %b0_cz = linalg.fill ins(%zero : f32) outs(%b0_ce : tensor<4x16x4x32xf32>) -> tensor<4x16x4x32xf32>
  %b0_ctx4 = linalg.generic {indexing_maps = [affine_map<(b, n, i, d, j) -> (b, n, i, j)>, affine_map<(b, n, i, d, j) -> (b, j, n, d)>, affine_map<(b, n, i, d, j) -> (b, i, n, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%b0_pr, %b0_v4 : tensor<4x4x16x16xf32>, tensor<4x16x4x32xf32>) outs(%b0_cz : tensor<4x16x4x32xf32>) {
  ^bb0(%x0: f32, %y0: f32, %o: f32):
    %p = arith.mulf %x0, %y0 : f32
    %a = arith.addf %o, %p : f32
    linalg.yield %a : f32
  } -> tensor<4x16x4x32xf32>
  %b0_ctx = tensor.collapse_shape %b0_ctx4 [[0, 1], [2, 3]] : tensor<4x16x4x32xf32> into tensor<64x128xf32>
  %b0_att_e = tensor.empty() : tensor<64x128xf32>
  %b0_att_z = linalg.fill ins(%zero : f32) outs(%b0_att_e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b0_att = linalg.matmul ins(%b0_ctx, %p_transformer_h_0_attn_c_proj_weight : tensor<64x128xf32>, tensor<128x128xf32>) outs(%b0_att_z : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b0_x1 = arith.addf %xemb, %b0_att : tensor<64x128xf32>
  %b0_ln2_e1 = tensor.empty() : tensor<64xf32>
  %b0_ln2_s0 = linalg.fill ins(%zero : f32) outs(%b0_ln2_e1 : tensor<64xf32>) -> tensor<64xf32>
  %b0_ln2_sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%b0_x1 : tensor<64x128xf32>) outs(%b0_ln2_s0 : tensor<64xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %a, %v : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %b0_ln2_var = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%b0_x1, %b0_ln2_sum : tensor<64x128xf32>, tensor<64xf32>) outs(%b0_ln2_s0 : tensor<64xf32>) {
  ^bb0(%v: f32, %s: f32, %a: f32):
    %n = arith.constant 128.0 : f32
    %m = arith.divf %s, %n : f32
    %c = arith.subf %v, %m : f32
    %q = arith.mulf %c, %c : f32
    %o = arith.addf %a, %q : f32
    linalg.yield %o : f32
  } -> tensor<64xf32>
  %b0_ln2_e2 = tensor.empty() : tensor<64x128xf32>
  %b0_h2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%b0_x1, %b0_ln2_sum, %b0_ln2_var, %p_transformer_h_0_ln_2_weight, %p_transformer_h_0_ln_2_bias : tensor<64x128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<128xf32>, tensor<128xf32>) outs(%b0_ln2_e2 : tensor<64x128xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %gg: f32, %bb: f32, %o: f32):
    %n = arith.constant 128.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %n : f32
    %w = arith.divf %q, %n : f32
    %we = arith.addf %w, %eps : f32
    %rs = math.rsqrt %we : f32
    %c = arith.subf %v, %m : f32
    %t1 = arith.mulf %c, %rs : f32
    %t2 = arith.mulf %t1, %gg : f32
    %t3 = arith.addf %t2, %bb : f32
    linalg.yield %t3 : f32
  } -> tensor<64x128xf32>
  %b0_u_e = tensor.empty() : tensor<64x512xf32>
  %b0_u_z = linalg.fill ins(%zero : f32) outs(%b0_u_e : tensor<64x512xf32>) -> tensor<64x512xf32>
  %b0_u = linalg.matmul ins(%b0_h2, %p_transformer_h_0_mlp_c_fc_weight : tensor<64x128xf32>, tensor<128x512xf32>) outs(%b0_u_z : tensor<64x512xf32>) -> tensor<64x512xf32>
  %b0_ge = tensor.empty() : tensor<64x512xf32>
  %b0_g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%b0_u : tensor<64x512xf32>) outs(%b0_ge : tensor<64x512xf32>) {
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
  } -> tensor<64x512xf32>
  %b0_dn_e = tensor.empty() : tensor<64x128xf32>
  %b0_dn_z = linalg.fill ins(%zero : f32) outs(%b0_dn_e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b0_dn = linalg.matmul ins(%b0_g, %p_transformer_h_0_mlp_c_proj_weight : tensor<64x512xf32>, tensor<512x128xf32>) outs(%b0_dn_z : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b0_y = arith.addf %b0_x1, %b0_dn : tensor<64x128xf32>
  %b1_ln1_e1 = tensor.empty() : tensor<64xf32>
  %b1_ln1_s0 = linalg.fill ins(%zero : f32) outs(%b1_ln1_e1 : tensor<64xf32>) -> tensor<64xf32>
  %b1_ln1_sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%b0_y : tensor<64x128xf32>) outs(%b1_ln1_s0 : tensor<64xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %a, %v : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %b1_ln1_var = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%b0_y, %b1_ln1_sum : tensor<64x128xf32>, tensor<64xf32>) outs(%b1_ln1_s0 : tensor<64xf32>) {
  ^bb0(%v: f32, %s: f32, %a: f32):
    %n = arith.constant 128.0 : f32
    %m = arith.divf %s, %n : f32
    %c = arith.subf %v, %m : f32
    %q = arith.mulf %c, %c : f32
    %o = arith.addf %a, %q : f32
    linalg.yield %o : f32
  } -> tensor<64xf32>
  %b1_ln1_e2 = tensor.empty() : tensor<64x128xf32>
  %b1_h1 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%b0_y, %b1_ln1_sum, %b1_ln1_var, %p_transformer_h_1_ln_1_weight, %p_transformer_h_1_ln_1_bias : tensor<64x128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<128xf32>, tensor<128xf32>) outs(%b1_ln1_e2 : tensor<64x128xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %gg: f32, %bb: f32, %o: f32):
    %n = arith.constant 128.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %n : f32
    %w = arith.divf %q, %n : f32
    %we = arith.addf %w, %eps : f32
    %rs = math.rsqrt %we : f32
    %c = arith.subf %v, %m : f32
    %t1 = arith.mulf %c, %rs : f32
    %t2 = arith.mulf %t1, %gg : f32
    %t3 = arith.addf %t2, %bb : f32
    linalg.yield %t3 : f32
  } -> tensor<64x128xf32>
  %b1_q_e = tensor.empty() : tensor<64x128xf32>
  %b1_q_z = linalg.fill ins(%zero : f32) outs(%b1_q_e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b1_q = linalg.matmul ins(%b1_h1, %p_transformer_h_1_attn_q_weight : tensor<64x128xf32>, tensor<128x128xf32>) outs(%b1_q_z : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b1_q4 = tensor.expand_shape %b1_q [[0, 1], [2, 3]] output_shape [4, 16, 4, 32] : tensor<64x128xf32> into tensor<4x16x4x32xf32>
  %b1_k_e = tensor.empty() : tensor<64x128xf32>
  %b1_k_z = linalg.fill ins(%zero : f32) outs(%b1_k_e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b1_k = linalg.matmul ins(%b1_h1, %p_transformer_h_1_attn_k_weight : tensor<64x128xf32>, tensor<128x128xf32>) outs(%b1_k_z : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b1_k4 = tensor.expand_shape %b1_k [[0, 1], [2, 3]] output_shape [4, 16, 4, 32] : tensor<64x128xf32> into tensor<4x16x4x32xf32>
  %b1_v_e = tensor.empty() : tensor<64x128xf32>
  %b1_v_z = linalg.fill ins(%zero : f32) outs(%b1_v_e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b1_v = linalg.matmul ins(%b1_h1, %p_transformer_h_1_attn_v_weight : tensor<64x128xf32>, tensor<128x128xf32>) outs(%b1_v_z : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b1_v4 = tensor.expand_shape %b1_v [[0, 1], [2, 3]] output_shape [4, 16, 4, 32] : tensor<64x128xf32> into tensor<4x16x4x32xf32>
  %b1_se = tensor.empty() : tensor<4x4x16x16xf32>
  %b1_sz = linalg.fill ins(%zero : f32) outs(%b1_se : tensor<4x4x16x16xf32>) -> tensor<4x4x16x16xf32>
  %b1_sc = linalg.generic {indexing_maps = [affine_map<(b, n, i, j, d) -> (b, i, n, d)>, affine_map<(b, n, i, j, d) -> (b, j, n, d)>, affine_map<(b, n, i, j, d) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%b1_q4, %b1_k4 : tensor<4x16x4x32xf32>, tensor<4x16x4x32xf32>) outs(%b1_sz : tensor<4x4x16x16xf32>) {
  ^bb0(%x0: f32, %y0: f32, %o: f32):
    %p = arith.mulf %x0, %y0 : f32
    %a = arith.addf %o, %p : f32
    linalg.yield %a : f32
  } -> tensor<4x4x16x16xf32>
  %b1_masked = linalg.generic {indexing_maps = [affine_map<(b, n, i, j) -> (b, n, i, j)>, affine_map<(b, n, i, j) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%b1_sc : tensor<4x4x16x16xf32>) outs(%b1_se : tensor<4x4x16x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %scale = arith.constant 0.17677669529663687 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %future = arith.cmpi ugt, %j, %i : index
    %sv = arith.mulf %v, %scale : f32
    %r = arith.select %future, %ninf, %sv : f32
    linalg.yield %r : f32
  } -> tensor<4x4x16x16xf32>
  %b1_pr = linalg.softmax dimension(3) ins(%b1_masked : tensor<4x4x16x16xf32>) outs(%b1_se : tensor<4x4x16x16xf32>) -> tensor<4x4x16x16xf32>
  %b1_ce = tensor.empty() : tensor<4x16x4x32xf32>
  %b1_cz = linalg.fill ins(%zero : f32) outs(%b1_ce : tensor<4x16x4x32xf32>) -> tensor<4x16x4x32xf32>
  %b1_ctx4 = linalg.generic {indexing_maps = [affine_map<(b, n, i, d, j) -> (b, n, i, j)>, affine_map<(b, n, i, d, j) -> (b, j, n, d)>, affine_map<(b, n, i, d, j) -> (b, i, n, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%b1_pr, %b1_v4 : tensor<4x4x16x16xf32>, tensor<4x16x4x32xf32>) outs(%b1_cz : tensor<4x16x4x32xf32>) {
  ^bb0(%x0: f32, %y0: f32, %o: f32):
    %p = arith.mulf %x0, %y0 : f32
    %a = arith.addf %o, %p : f32
    linalg.yield %a : f32
  } -> tensor<4x16x4x32xf32>
  %b1_ctx = tensor.collapse_shape %b1_ctx4 [[0, 1], [2, 3]] : tensor<4x16x4x32xf32> into tensor<64x128xf32>
  %b1_att_e = tensor.empty() : tensor<64x128xf32>
  %b1_att_z = linalg.fill ins(%zero : f32) outs(%b1_att_e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b1_att = linalg.matmul ins(%b1_ctx, %p_transformer_h_1_attn_c_proj_weight : tensor<64x128xf32>, tensor<128x128xf32>) outs(%b1_att_z : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b1_x1 = arith.addf %b0_y, %b1_att : tensor<64x128xf32>
  %b1_ln2_e1 = tensor.empty() : tensor<64xf32>
  %b1_ln2_s0 = linalg.fill ins(%zero : f32) outs(%b1_ln2_e1 : tensor<64xf32>) -> tensor<64xf32>
  %b1_ln2_sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%b1_x1 : tensor<64x128xf32>) outs(%b1_ln2_s0 : tensor<64xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %a, %v : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %b1_ln2_var = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%b1_x1, %b1_ln2_sum : tensor<64x128xf32>, tensor<64xf32>) outs(%b1_ln2_s0 : tensor<64xf32>) {
  ^bb0(%v: f32, %s: f32, %a: f32):
    %n = arith.constant 128.0 : f32
    %m = arith.divf %s, %n : f32
    %c = arith.subf %v, %m : f32
    %q = arith.mulf %c, %c : f32
    %o = arith.addf %a, %q : f32
    linalg.yield %o : f32
  } -> tensor<64xf32>
  %b1_ln2_e2 = tensor.empty() : tensor<64x128xf32>
  %b1_h2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%b1_x1, %b1_ln2_sum, %b1_ln2_var, %p_transformer_h_1_ln_2_weight, %p_transformer_h_1_ln_2_bias : tensor<64x128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<128xf32>, tensor<128xf32>) outs(%b1_ln2_e2 : tensor<64x128xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %gg: f32, %bb: f32, %o: f32):
    %n = arith.constant 128.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %n : f32
    %w = arith.divf %q, %n : f32
    %we = arith.addf %w, %eps : f32
    %rs = math.rsqrt %we : f32
    %c = arith.subf %v, %m : f32
    %t1 = arith.mulf %c, %rs : f32
    %t2 = arith.mulf %t1, %gg : f32
    %t3 = arith.addf %t2, %bb : f32
    linalg.yield %t3 : f32
  } -> tensor<64x128xf32>
  %b1_u_e = tensor.empty() : tensor<64x512xf32>
  %b1_u_z = linalg.fill ins(%zero : f32) outs(%b1_u_e : tensor<64x512xf32>) -> tensor<64x512xf32>
  %b1_u = linalg.matmul ins(%b1_h2, %p_transformer_h_1_mlp_c_fc_weight : tensor<64x128xf32>, tensor<128x512xf32>) outs(%b1_u_z : tensor<64x512xf32>) -> tensor<64x512xf32>
  %b1_ge = tensor.empty() : tensor<64x512xf32>
  %b1_g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%b1_u : tensor<64x512xf32>) outs(%b1_ge : tensor<64x512xf32>) {
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
  } -> tensor<64x512xf32>
  %b1_dn_e = tensor.empty() : tensor<64x128xf32>
  %b1_dn_z = linalg.fill ins(%zero : f32) outs(%b1_dn_e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b1_dn = linalg.matmul ins(%b1_g, %p_transformer_h_1_mlp_c_proj_weight : tensor<64x512xf32>, tensor<512x128xf32>) outs(%b1_dn_z : tensor<64x128xf32>) -> tensor<64x128xf32>
  %b1_y = arith.addf %b1_x1, %b1_dn : tensor<64x128xf32>
  %lnf_e1 = tensor.empty() : tensor<64xf32>
  %lnf_s0 = linalg.fill ins(%zero : f32) outs(%lnf_e1 : tensor<64xf32>) -> tensor<64xf32>
  %lnf_sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%b1_y : tensor<64x128xf32>) outs(%lnf_s0 : tensor<64xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %a, %v : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %lnf_var = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%b1_y, %lnf_sum : tensor<64x128xf32>, tensor<64xf32>) outs(%lnf_s0 : tensor<64xf32>) {
  ^bb0(%v: f32, %s: f32, %a: f32):
    %n = arith.constant 128.0 : f32
    %m = arith.divf %s, %n : f32
    %c = arith.subf %v, %m : f32
    %q = arith.mulf %c, %c : f32
    %o = arith.addf %a, %q : f32
    linalg.yield %o : f32
  } -> tensor<64xf32>
  %lnf_e2 = tensor.empty() : tensor<64x128xf32>
  %hf = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%b1_y, %lnf_sum, %lnf_var, %p_transformer_ln_f_weight, %p_transformer_ln_f_bias : tensor<64x128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<128xf32>, tensor<128xf32>) outs(%lnf_e2 : tensor<64x128xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %gg: f32, %bb: f32, %o: f32):
    %n = arith.constant 128.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %n : f32
    %w = arith.divf %q, %n : f32
    %we = arith.addf %w, %eps : f32
    %rs = math.rsqrt %we : f32
    %c = arith.subf %v, %m : f32
    %t1 = arith.mulf %c, %rs : f32
    %t2 = arith.mulf %t1, %gg : f32
    %t3 = arith.addf %t2, %bb : f32
    linalg.yield %t3 : f32
  } -> tensor<64x128xf32>
  %lg_e = tensor.empty() : tensor<64x256xf32>
  %lg_z = linalg.fill ins(%zero : f32) outs(%lg_e : tensor<64x256xf32>) -> tensor<64x256xf32>
  %logits = linalg.generic {indexing_maps = [affine_map<(n, v, c) -> (n, c)>, affine_map<(n, v, c) -> (v, c)>, affine_map<(n, v, c) -> (n, v)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%hf, %p_transformer_wte_weight : tensor<64x128xf32>, tensor<256x128xf32>) outs(%lg_z : tensor<64x256xf32>) {
  ^bb0(%x0: f32, %y0: f32, %o: f32):
    %p = arith.mulf %x0, %y0 : f32
    %a = arith.addf %o, %p : f32
    linalg.yield %a : f32
  } -> tensor<64x256xf32>
  %tg = tensor.collapse_shape %targets [[0, 1]] : tensor<4x16xi64> into tensor<64xi64>
  %ninf = arith.constant 0xFF800000 : f32
  %ce_e = tensor.empty() : tensor<64xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%ce_e : tensor<64xf32>) -> tensor<64xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n)>], iterator_types = ["parallel", "reduction"]} ins(%logits : tensor<64x256xf32>) outs(%mi : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %si = linalg.fill ins(%zero : f32) outs(%ce_e : tensor<64xf32>) -> tensor<64xf32>
  %se = linalg.generic {indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n)>, affine_map<(n, v) -> (n)>], iterator_types = ["parallel", "reduction"]} ins(%logits, %mx : tensor<64x256xf32>, tensor<64xf32>) outs(%si : tensor<64xf32>) {
  ^bb0(%a: f32, %m: f32, %acc: f32):
    %d = arith.subf %a, %m : f32
    %e = math.exp %d : f32
    %r = arith.addf %acc, %e : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %nll = linalg.generic {indexing_maps = [affine_map<(n) -> (n)>, affine_map<(n) -> (n)>, affine_map<(n) -> (n)>, affine_map<(n) -> (n)>], iterator_types = ["parallel"]} ins(%se, %mx, %tg : tensor<64xf32>, tensor<64xf32>, tensor<64xi64>) outs(%ce_e : tensor<64xf32>) {
  ^bb0(%s: f32, %m: f32, %t: i64, %o: f32):
    %lg = math.log %s : f32
    %lse = arith.addf %lg, %m : f32
    %n = linalg.index 0 : index
    %k = arith.index_cast %t : i64 to index
    %pick = tensor.extract %logits[%n, %k] : tensor<64x256xf32>
    %r = arith.subf %lse, %pick : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %l_e = tensor.empty() : tensor<f32>
  %l_z = linalg.fill ins(%zero : f32) outs(%l_e : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [affine_map<(n) -> (n)>, affine_map<(n) -> ()>], iterator_types = ["reduction"]} ins(%nll : tensor<64xf32>) outs(%l_z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %mean_e = tensor.empty() : tensor<f32>
  %mean = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%loss : tensor<f32>) outs(%mean_e : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.constant 64.0 : f32
    %r = arith.divf %a, %n : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %mean : tensor<f32>
}
