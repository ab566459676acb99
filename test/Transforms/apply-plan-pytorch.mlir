// dtensor-apply-plan's styles mean PyTorch's (docs/plans.md): weights
// stored as nn.Linear stores them, [out, in] (x @ W^T), unless the plan
// says "storage": "in_out"; a fused q, k, v weight split as 3 interleaved
// groups (veScale's InterleavedShard, so each device keeps whole heads of
// q, k and v); an embedding split by vocabulary.
// RUN: dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/pytorch.json" | FileCheck %s
// CHECK-LABEL: func.func @block(
// CHECK-SAME: %{{.*}}: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.name = "embed"}
// CHECK-SAME: %{{.*}}: tensor<96x32xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0i3, R]">, dtensor.name = "l0.qkv"}
// CHECK-SAME: %{{.*}}: tensor<128x32xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.name = "l0.w_up"}
// CHECK-SAME: %{{.*}}: tensor<128xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0]">, dtensor.name = "l0.b_up"}
// CHECK-SAME: %{{.*}}: tensor<32x128xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S0]">, dtensor.name = "l0.w_down"}
// CHECK-SAME: %{{.*}}: tensor<32xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R]">, dtensor.name = "l0.b_down"}
//
// The Megatron MLP in this storage runs with one all_reduce, equal to the
// single-device run.
// RUN: dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/pytorch.json" -o %t.mlir
// RUN: dtensor-opt %t.mlir --dtensor-spmd | FileCheck %s --check-prefix=SPMD
// SPMD-LABEL: func.func @block(
// SPMD-NOT: "dtensor.all_gather"
// SPMD-COUNT-1: "dtensor.all_reduce"
// SPMD-NOT: "dtensor.all_reduce"
// RUN: dtensor-run -n 2 %t.mlir | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
//
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/bad-storage.json" 2>&1 | FileCheck %s --check-prefix=STORAGE
// STORAGE: error: plan '{{.*}}bad-storage.json': "storage" must be "out_in" (weights as nn.Linear stores them, [out, in]: the default) or "in_out" ([in, out], x @ W)
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/interleave-rowwise.json" 2>&1 | FileCheck %s --check-prefix=INTERLEAVE
// INTERLEAVE: error: plan '{{.*}}interleave-rowwise.json': rule 1 ('*.w_down'): "interleave" is the colwise style's number of fused groups (fused q, k, v: 3), from 2 to 64
// RUN: not dtensor-opt %s --dtensor-apply-plan="plan=%S/Inputs/plans/colwise-scalar.json" 2>&1 | FileCheck %s --check-prefix=SCALAR
// SCALAR: error: plan '{{.*}}colwise-scalar.json': rule 1 ('scale') splits dim 0, but argument 'scale' of @block has 0 dims
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2>, axis_names = ["tp"]} : () -> ()
func.func @block(%embed: tensor<64x32xf32> {dtensor.name = "embed"},
                 %qkv: tensor<96x32xf32> {dtensor.name = "l0.qkv"},
                 %w_up: tensor<128x32xf32> {dtensor.name = "l0.w_up"},
                 %b_up: tensor<128xf32> {dtensor.name = "l0.b_up"},
                 %w_down: tensor<32x128xf32> {dtensor.name = "l0.w_down"},
                 %b_down: tensor<32xf32> {dtensor.name = "l0.b_down"},
                 %scale: tensor<f32> {dtensor.name = "scale"},
                 %x: tensor<16x32xf32> {dtensor.name = "x"}) -> (tensor<16x32xf32>, tensor<16x96xf32>) {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x128xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<16x128xf32>) -> tensor<16x128xf32>
  // x @ w_up^T + b_up, gelu-free: an MLP of nn.Linear weights.
  %h = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w_up : tensor<16x32xf32>, tensor<128x32xf32>) outs(%i1 : tensor<16x128xf32>) {
  ^bb0(%ma: f32, %mb: f32, %mo: f32):
    %mp = arith.mulf %ma, %mb : f32
    %ms = arith.addf %mo, %mp : f32
    linalg.yield %ms : f32
  } -> tensor<16x128xf32>
  %hb = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%h, %b_up : tensor<16x128xf32>, tensor<128xf32>) outs(%e1 : tensor<16x128xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %r = math.tanh %s : f32
    linalg.yield %r : f32
  } -> tensor<16x128xf32>
  %e2 = tensor.empty() : tensor<16x32xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%hb, %w_down : tensor<16x128xf32>, tensor<32x128xf32>) outs(%i2 : tensor<16x32xf32>) {
  ^bb0(%ma: f32, %mb: f32, %mo: f32):
    %mp = arith.mulf %ma, %mb : f32
    %ms = arith.addf %mo, %mp : f32
    linalg.yield %ms : f32
  } -> tensor<16x32xf32>
  %yb = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%y, %b_down : tensor<16x32xf32>, tensor<32xf32>) outs(%e2 : tensor<16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  %e3 = tensor.empty() : tensor<16x96xf32>
  %i3 = linalg.fill ins(%z : f32) outs(%e3 : tensor<16x96xf32>) -> tensor<16x96xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %qkv : tensor<16x32xf32>, tensor<96x32xf32>) outs(%i3 : tensor<16x96xf32>) {
  ^bb0(%ma: f32, %mb: f32, %mo: f32):
    %mp = arith.mulf %ma, %mb : f32
    %ms = arith.addf %mo, %mp : f32
    linalg.yield %ms : f32
  } -> tensor<16x96xf32>
  return %yb, %q : tensor<16x32xf32>, tensor<16x96xf32>
}
