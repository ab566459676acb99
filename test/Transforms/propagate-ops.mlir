// RUN: dtensor-opt %s --split-input-file --allow-unregistered-dialect --dtensor-propagate --dtensor-verify | FileCheck %s
// RUN: not dtensor-opt %s --split-input-file --allow-unregistered-dialect --dtensor-propagate="strict=true" 2>&1 | FileCheck %s --check-prefix=STRICT

// Slices, concat and pad keep the dims they leave whole sharded; a dim they
// cut, join or pad is replicated.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @tensor_ops(
func.func @tensor_ops(%a: tensor<8x16xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, S1]">},
                      %b: tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">}) -> tensor<8x18xf32> {
  // CHECK: tensor.extract_slice {{.*}}{dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.operand_layouts = [#dtensor.layout<@mesh, "[S0, R]">]}
  // STRICT: error: 'tensor.extract_slice' op operand 0 (%arg0) has layout [S0, S1] (from argument 0 of @tensor_ops) but this op needs [S0, R]
  %s = tensor.extract_slice %a[0, 4] [8, 8] [1, 1] : tensor<8x16xf32> to tensor<8x8xf32>
  // CHECK: tensor.concat {{.*}}{dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.operand_layouts = [#dtensor.layout<@mesh, "[S0, R]">, #dtensor.layout<@mesh, "[S0, R]">]}
  %c = tensor.concat dim(1) %s, %s : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
  // CHECK: tensor.insert_slice {{.*}}{dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.operand_layouts = [#dtensor.layout<@mesh, "[S0, R]">, #dtensor.layout<@mesh, "[S0, R]">]}
  %i = tensor.insert_slice %b into %c[0, 0] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x16xf32>
  %z = arith.constant 0.0 : f32
  // CHECK: tensor.pad
  // CHECK: } {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">, dtensor.operand_layouts = [#dtensor.layout<@mesh, "[S0, R]">]}
  %p = tensor.pad %i low[0, 1] high[0, 1] {
  ^bb0(%x: index, %y: index):
    tensor.yield %z : f32
  } : tensor<8x16xf32> to tensor<8x18xf32>
  return %p : tensor<8x18xf32>
}

// -----

// An op of another dialect with an einsum rule: j is a reduction (sum).
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @einsum(
func.func @einsum(%x: tensor<8x32xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">},
                  %w: tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}) -> tensor<8x16xf32> {
  // CHECK: "test.mm"(%arg0, %arg1) {dtensor.layout = #dtensor.layout<@tp, "[R, R] Psum(0)">, dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, S0]">, #dtensor.layout<@tp, "[R, S0]">], dtensor.rule = "ij,kj->ik"}
  %y = "test.mm"(%x, %w) {dtensor.rule = "ij,kj->ik"} : (tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
  // And a max: the result of a max-reduction rule is Partial(max).
  // CHECK: "test.rowmax"(%arg0) {dtensor.layout = #dtensor.layout<@tp, "[R] Pmax(0)">
  %m = "test.rowmax"(%x) {dtensor.rule = "ij->i:max"} : (tensor<8x32xf32>) -> tensor<8xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Reshapes: a sharded flat dim splits its axes over the dims it becomes
// where the sizes allow (8 = 2 x 4 on dp=2, tp=4), and back; 6 = 3 x 2
// cannot take tp=4, so that one is replicated.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @reshapes(
func.func @reshapes(%a: tensor<8x16xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S01, R]">},
                    %b: tensor<2x4x16xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, S1, R]">},
                    %c: tensor<6x16xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S1, R]">})
    -> (tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<3x2x16xf32>) {
  // CHECK: tensor.expand_shape {{.*}}{dtensor.layout = #dtensor.layout<@mesh, "[S0, S1, R]">, dtensor.operand_layouts = [#dtensor.layout<@mesh, "[S01, R]">]}
  %e = tensor.expand_shape %a [[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xf32> into tensor<2x4x16xf32>
  // CHECK: tensor.collapse_shape {{.*}}{dtensor.layout = #dtensor.layout<@mesh, "[S01, R]">, dtensor.operand_layouts = [#dtensor.layout<@mesh, "[S0, S1, R]">]}
  %f = tensor.collapse_shape %b [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  // CHECK: tensor.expand_shape {{.*}}{dtensor.layout = #dtensor.layout<@mesh, "[R, R, R]">, dtensor.operand_layouts = [#dtensor.layout<@mesh, "[R, R]">]}
  %g = tensor.expand_shape %c [[0, 1], [2]] output_shape [3, 2, 16] : tensor<6x16xf32> into tensor<3x2x16xf32>
  return %e, %f, %g : tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<3x2x16xf32>
}

// -----

// More linalg families through their indexing maps: transpose moves the
// sharded dim, broadcast adds a replicated one, matvec reduces, and a
// convolution keeps its batch and channel factors (the window dims, whose
// maps are sums, are replicated).
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @families(
func.func @families(%a: tensor<8x16xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, S1]">},
                    %v: tensor<16xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S1]">},
                    %img: tensor<4x10x10x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R, R, R]">},
                    %ker: tensor<3x3x8x16xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, R, R, S1]">})
    -> (tensor<16x8xf32>, tensor<8x16x4xf32>, tensor<8xf32>, tensor<4x8x8x16xf32>) {
  %z = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<16x8xf32>
  // CHECK: linalg.transpose {{.*}}dtensor.layout = #dtensor.layout<@mesh, "[S1, S0]">
  %t = linalg.transpose ins(%a : tensor<8x16xf32>) outs(%et : tensor<16x8xf32>) permutation = [1, 0]
  %eb = tensor.empty() : tensor<8x16x4xf32>
  // CHECK: linalg.broadcast {{.*}}dtensor.layout = #dtensor.layout<@mesh, "[S0, S1, R]">
  %b = linalg.broadcast ins(%a : tensor<8x16xf32>) outs(%eb : tensor<8x16x4xf32>) dimensions = [2]
  %ev = tensor.empty() : tensor<8xf32>
  %fv = linalg.fill ins(%z : f32) outs(%ev : tensor<8xf32>) -> tensor<8xf32>
  // CHECK: linalg.matvec {dtensor.layout = #dtensor.layout<@mesh, "[S0] Psum(1)">
  %mv = linalg.matvec ins(%a, %v : tensor<8x16xf32>, tensor<16xf32>) outs(%fv : tensor<8xf32>) -> tensor<8xf32>
  %ec = tensor.empty() : tensor<4x8x8x16xf32>
  %fc = linalg.fill ins(%z : f32) outs(%ec : tensor<4x8x8x16xf32>) -> tensor<4x8x8x16xf32>
  // CHECK: linalg.conv_2d_nhwc_hwcf {{.*}}dtensor.layout = #dtensor.layout<@mesh, "[S0, R, R, S1]">, dtensor.loop_axes = [array<i64: 0>, array<i64>, array<i64>, array<i64: 1>, array<i64>, array<i64>, array<i64>], dtensor.operand_layouts = [#dtensor.layout<@mesh, "[S0, R, R, R]">, #dtensor.layout<@mesh, "[R, R, R, S1]">
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%img, %ker : tensor<4x10x10x8xf32>, tensor<3x3x8x16xf32>) outs(%fc : tensor<4x8x8x16xf32>) -> tensor<4x8x8x16xf32>
  return %t, %b, %mv, %c : tensor<16x8xf32>, tensor<8x16x4xf32>, tensor<8xf32>, tensor<4x8x8x16xf32>
}

// -----

// Two reductions with the same types but different combiners and dims:
// each gets its own rule (the rule cache keys on dims and skips bodies).
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["x"]} : () -> ()
// CHECK-LABEL: func.func @combiners
// CHECK: linalg.reduce {{.*}}dimensions = [0]  {dtensor.layout = #dtensor.layout<@m, "[R] Pmax(0)">
// CHECK: linalg.reduce {{.*}}dimensions = [0]  {dtensor.layout = #dtensor.layout<@m, "[R] Psum(0)">
// CHECK: linalg.reduce {{.*}}dimensions = [1]  {dtensor.layout = #dtensor.layout<@m, "[S0]">
func.func @combiners(%x: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">})
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %m = linalg.reduce ins(%x : tensor<8x8xf32>) outs(%i : tensor<8xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %r = arith.maximumf %in, %acc : f32
      linalg.yield %r : f32
    }
  %s = linalg.reduce ins(%x : tensor<8x8xf32>) outs(%i : tensor<8xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %t = linalg.reduce ins(%x : tensor<8x8xf32>) outs(%i : tensor<8xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %ma = "dtensor.annotate"(%m) {layout = #dtensor.layout<@m, "[R] Pmax(0)">} : (tensor<8xf32>) -> tensor<8xf32>
  %sa = "dtensor.annotate"(%s) {layout = #dtensor.layout<@m, "[R] Psum(0)">} : (tensor<8xf32>) -> tensor<8xf32>
  return %ma, %sa, %t : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// linalg.softmax keeps every dim but the one it normalizes along: a row
// softmax of row-sharded data stays sharded (no gather), also when
// dtensor-propagate runs alone (dtensor-spmd decomposes softmax first).
// CHECK-LABEL: func.func @softmax_rows
// CHECK: linalg.softmax {dtensor.layout = #dtensor.layout<@m, "[S0, R]">, dtensor.operand_layouts = [#dtensor.layout<@m, "[S0, R]">, #dtensor.layout<@m, "[S0, R]">]} dimension(1)
// CHECK: linalg.softmax {dtensor.layout = #dtensor.layout<@m, "[R, R]">, dtensor.operand_layouts = [#dtensor.layout<@m, "[R, R]">, #dtensor.layout<@m, "[R, R]">]} dimension(0)
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["d"]} : () -> ()
func.func @softmax_rows(%x: tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">})
    -> (tensor<16x32xf32>, tensor<16x32xf32>) {
  %e = tensor.empty() : tensor<16x32xf32>
  %s = linalg.softmax dimension(1) ins(%x : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %c = linalg.softmax dimension(0) ins(%x : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  return %s, %c : tensor<16x32xf32>, tensor<16x32xf32>
}
