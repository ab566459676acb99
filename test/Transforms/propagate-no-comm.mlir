// Programs that need no communication at all: strict mode accepts them.
// RUN: dtensor-opt %s --split-input-file --dtensor-propagate=strict=true --dtensor-verify | FileCheck %s

// Data-parallel layernorm (without the affine part): rows over dp; the row
// statistics are reductions over an unsharded dim.
"dtensor.mesh"() {sym_name = "dp", shape = array<i64: 8>, axis_names = ["dp"]} : () -> ()
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func @layernorm(
// CHECK-SAME: -> (tensor<64x128xf32> {dtensor.layout = #dtensor.layout<@dp, "[S0, R]">})
func.func @layernorm(%x: tensor<64x128xf32> {dtensor.layout = #dtensor.layout<@dp, "[S0, R]">}) -> tensor<64x128xf32> {
  %z = arith.constant 0.0 : f32
  %n = arith.constant 128.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e1 = tensor.empty() : tensor<64xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
  // CHECK: linalg.reduce {{.*}}dtensor.layout = #dtensor.layout<@dp, "[S0]">
  %sum = linalg.reduce ins(%x : tensor<64x128xf32>) outs(%i1 : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %e2 = tensor.empty() : tensor<64x128xf32>
  // CHECK: linalg.generic {{.*}}dtensor.layout = #dtensor.layout<@dp, "[S0, R]">{{.*}}dtensor.operand_layouts = [#dtensor.layout<@dp, "[S0, R]">, #dtensor.layout<@dp, "[S0]">, #dtensor.layout<@dp, "[S0, R]">]
  %c = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : tensor<64x128xf32>, tensor<64xf32>) outs(%e2 : tensor<64x128xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %mean = arith.divf %s, %n : f32
    %d = arith.subf %v, %mean : f32
    linalg.yield %d : f32
  } -> tensor<64x128xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
  %sq = linalg.reduce ins(%c : tensor<64x128xf32>) outs(%i2 : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %m = arith.mulf %in, %in : f32
      %r = arith.addf %m, %acc : f32
      linalg.yield %r : f32
    }
  // CHECK: linalg.generic {{.*}}dtensor.layout = #dtensor.layout<@dp, "[S0, R]">
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %sq : tensor<64x128xf32>, tensor<64xf32>) outs(%e2 : tensor<64x128xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %var = arith.divf %s, %n : f32
    %ve = arith.addf %var, %eps : f32
    %rs = math.rsqrt %ve : f32
    %r = arith.mulf %v, %rs : f32
    linalg.yield %r : f32
  } -> tensor<64x128xf32>
  return %y : tensor<64x128xf32>
}

// -----

// Attention with heads sharded: q, k, v are [heads, seq, dim] with heads
// over tp; scores, softmax and the output stay head-sharded.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @attention(
// CHECK-SAME: -> (tensor<8x32x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R, R]">})
func.func @attention(%q: tensor<8x32x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R, R]">},
                     %k: tensor<8x32x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R, R]">},
                     %v: tensor<8x32x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R, R]">}) -> tensor<8x32x16xf32> {
  %z = arith.constant 0.0 : f32
  %es = tensor.empty() : tensor<8x32x32xf32>
  %is = linalg.fill ins(%z : f32) outs(%es : tensor<8x32x32xf32>) -> tensor<8x32x32xf32>
  // CHECK: linalg.generic {{.*}}dtensor.layout = #dtensor.layout<@tp, "[S0, R, R]">, dtensor.loop_axes = [array<i64: 0>, array<i64>, array<i64>, array<i64>]
  %s = linalg.generic {indexing_maps = [affine_map<(h, s, t, d) -> (h, s, d)>, affine_map<(h, s, t, d) -> (h, t, d)>, affine_map<(h, s, t, d) -> (h, s, t)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<8x32x16xf32>, tensor<8x32x16xf32>) outs(%is : tensor<8x32x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<8x32x32xf32>
  // CHECK: math.exp {{.*}}dtensor.layout = #dtensor.layout<@tp, "[S0, R, R]">
  %p = math.exp %s : tensor<8x32x32xf32>
  %eo = tensor.empty() : tensor<8x32x16xf32>
  %io = linalg.fill ins(%z : f32) outs(%eo : tensor<8x32x16xf32>) -> tensor<8x32x16xf32>
  // CHECK: linalg.generic {{.*}}dtensor.layout = #dtensor.layout<@tp, "[S0, R, R]">
  %o = linalg.generic {indexing_maps = [affine_map<(h, s, d, t) -> (h, s, t)>, affine_map<(h, s, d, t) -> (h, t, d)>, affine_map<(h, s, d, t) -> (h, s, d)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<8x32x32xf32>, tensor<8x32x16xf32>) outs(%io : tensor<8x32x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<8x32x16xf32>
  return %o : tensor<8x32x16xf32>
}
