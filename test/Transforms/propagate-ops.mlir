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
