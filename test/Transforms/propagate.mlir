// RUN: dtensor-opt %s --split-input-file --allow-unregistered-dialect --dtensor-propagate --dtensor-verify | FileCheck %s

// Megatron MLP on a 1-D mesh: column- then row-sharded weights. The hidden
// tensors are column-sharded, the relu needs nothing, the second matmul's
// result is Partial(sum) and the return resolves it (one all_reduce).
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @megatron(
func.func @megatron(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">},
                    %w1: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">},
                    %w2: tensor<256x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">})
    -> (tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  // CHECK: tensor.empty() {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}
  %e1 = tensor.empty() : tensor<16x256xf32>
  // CHECK: linalg.fill {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  // CHECK: linalg.matmul {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">, dtensor.loop_axes = [array<i64>, array<i64: 0>, array<i64>], dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, R]">, #dtensor.layout<@tp, "[R, S0]">, #dtensor.layout<@tp, "[R, S0]">]}
  %h = linalg.matmul ins(%x, %w1 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  // CHECK: linalg.generic {{.*}}dtensor.layout = #dtensor.layout<@tp, "[R, S0]">{{.*}}dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, S0]">, #dtensor.layout<@tp, "[R, S0]">]
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<16x256xf32>) outs(%e1 : tensor<16x256xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %z : f32
    linalg.yield %m : f32
  } -> tensor<16x256xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  // CHECK: linalg.matmul {dtensor.layout = #dtensor.layout<@tp, "[R, R] Psum(0)">, dtensor.loop_axes = [array<i64>, array<i64>, array<i64: 0>], dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, S0]">, #dtensor.layout<@tp, "[S0, R]">, #dtensor.layout<@tp, "[R, R] Psum(0)">]}
  %y = linalg.matmul ins(%r, %w2 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  // CHECK: return {dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, R]">]}
  return %y : tensor<16x64xf32>
}

// -----

// 2-D data x tensor parallel MLP: rows over dp everywhere; the Partial is
// over tp only.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @mlp_2d(
func.func @mlp_2d(%x: tensor<64x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">},
                  %w1: tensor<512x1024xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S(tp)]">},
                  %w2: tensor<1024x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(tp), R]">})
    -> (tensor<64x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">}) {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64x1024xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<64x1024xf32>) -> tensor<64x1024xf32>
  // CHECK: linalg.matmul {dtensor.layout = #dtensor.layout<@mesh, "[S0, S1]">
  %h = linalg.matmul ins(%x, %w1 : tensor<64x512xf32>, tensor<512x1024xf32>) outs(%i1 : tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %e2 = tensor.empty() : tensor<64x512xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<64x512xf32>) -> tensor<64x512xf32>
  // CHECK: linalg.matmul {dtensor.layout = #dtensor.layout<@mesh, "[S0, R] Psum(1)">, dtensor.loop_axes = [array<i64: 0>, array<i64>, array<i64: 1>]
  %y = linalg.matmul ins(%h, %w2 : tensor<64x1024xf32>, tensor<1024x512xf32>) outs(%i2 : tensor<64x512xf32>) -> tensor<64x512xf32>
  // CHECK: return {dtensor.operand_layouts = [#dtensor.layout<@mesh, "[S0, R]">]}
  return %y : tensor<64x512xf32>
}

// -----

// Sequence-parallel output: the Partial result is wanted sharded on rows,
// which the planner turns into one reduce_scatter; the weights are not
// gathered.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @seq_parallel(
func.func @seq_parallel(%h: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S(tp)]">},
                        %w: tensor<256x32xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(tp), R]">})
    -> (tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(tp), R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x32xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<64x32xf32>) -> tensor<64x32xf32>
  // CHECK: linalg.matmul {dtensor.layout = #dtensor.layout<@mesh, "[R, R] Psum(0)">{{.*}}dtensor.operand_layouts = [#dtensor.layout<@mesh, "[R, S0]">, #dtensor.layout<@mesh, "[S0, R]">,
  %y = linalg.matmul ins(%h, %w : tensor<64x256xf32>, tensor<256x32xf32>) outs(%i : tensor<64x32xf32>) -> tensor<64x32xf32>
  // CHECK: return {dtensor.operand_layouts = [#dtensor.layout<@mesh, "[S0, R]">]}
  return %y : tensor<64x32xf32>
}

// -----

// Partial flows through linear ops: the sum of two Partials, and scaling by
// a non-Partial value, stay Partial; exp is not linear, so it resolves.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @partial_flow(
func.func @partial_flow(%a: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R] Psum(1)">},
                        %b: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R] Psum(1)">},
                        %s: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">}) -> tensor<8x8xf32> {
  // CHECK: arith.addf {{.*}}dtensor.layout = #dtensor.layout<@mesh, "[S0, R] Psum(1)">
  %c = arith.addf %a, %b : tensor<8x8xf32>
  // CHECK: arith.mulf {{.*}}dtensor.layout = #dtensor.layout<@mesh, "[S0, R] Psum(1)">, dtensor.operand_layouts = [#dtensor.layout<@mesh, "[S0, R] Psum(1)">, #dtensor.layout<@mesh, "[S0, R]">]
  %d = arith.mulf %c, %s : tensor<8x8xf32>
  // CHECK: math.exp {{.*}}dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.operand_layouts = [#dtensor.layout<@mesh, "[S0, R]">]
  %e = math.exp %d : tensor<8x8xf32>
  return %e : tensor<8x8xf32>
}

// -----

// A max reduction over a sharded dim gives Partial(max) (the rows are long:
// gathering them would cost more than reducing 8 maxima).
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @row_max(
// CHECK-SAME: -> (tensor<8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0]">})
func.func @row_max(%x: tensor<8x1048576xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), S(tp)]">}) -> tensor<8xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<8xf32>
  %i = linalg.fill ins(%ninf : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  // CHECK: linalg.reduce {{.*}}dtensor.layout = #dtensor.layout<@mesh, "[S0] Pmax(1)">, dtensor.loop_axes = [array<i64: 0>, array<i64: 1>]
  %m = linalg.reduce ins(%x : tensor<8x1048576xf32>) outs(%i : tensor<8xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.maximumf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %m : tensor<8xf32>
}

// -----

// Unannotated arguments take the layout their users need.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @free_args(
// CHECK-SAME: %arg0: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S1, S0]">}, %arg1: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S1, S0]">}
func.func @free_args(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> (tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S1, S0]">}) {
  %c = arith.addf %a, %b : tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

// An op without a rule is replicated, and says why.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @unknown(
func.func @unknown(%a: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, S1]">}) -> tensor<4x8xf32> {
  // CHECK: "test.custom"(%arg0) {dtensor.layout = #dtensor.layout<@mesh, "[R, R]">, dtensor.operand_layouts = [#dtensor.layout<@mesh, "[R, R]">], dtensor.why = "an op with no sharding rule: from an op with no sharding rule, so replicated; operand 0 (%arg0): redistribute [S0, S1] -> [R, R]"}
  %s = "test.custom"(%a) : (tensor<8x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Priorities: the stronger (lower) constraint decides the matmul; the weaker
// annotation's value is redistributed from it.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @priorities(
func.func @priorities(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x16xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  // CHECK: linalg.matmul {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">
  %h = linalg.matmul ins(%x, %w : tensor<16x16xf32>, tensor<16x16xf32>) outs(%i : tensor<16x16xf32>) -> tensor<16x16xf32>
  %a = "dtensor.annotate"(%h) {layout = #dtensor.layout<@tp, "[S0, R]">, priority = 3 : i64} : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %b = "dtensor.annotate"(%h) {layout = #dtensor.layout<@tp, "[R, S0]">, priority = 0 : i64} : (tensor<16x16xf32>) -> tensor<16x16xf32>
  return %a, %b : tensor<16x16xf32>, tensor<16x16xf32>
}
