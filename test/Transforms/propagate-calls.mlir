// RUN: dtensor-opt %s --split-input-file --dtensor-propagate --dtensor-verify | FileCheck %s

// Interprocedural: the callee is propagated at its first call, with the
// layouts of the call's operands; the second call must match its signature
// (its first operand is gathered).
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @layer(
// CHECK-SAME: %arg0: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">}, %arg1: tensor<64x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}) -> (tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">})
func.func @layer(%x: tensor<16x64xf32>, %w: tensor<64x64xf32>) -> tensor<16x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x64xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
  // CHECK: linalg.matmul {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">
  %h = linalg.matmul ins(%x, %w : tensor<16x64xf32>, tensor<64x64xf32>) outs(%i : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %h : tensor<16x64xf32>
}
// CHECK-LABEL: func.func @model(
func.func @model(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">},
                 %w1: tensor<64x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">},
                 %w2: tensor<64x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}) -> tensor<16x64xf32> {
  // CHECK: call @layer(%arg0, %arg1) {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">, dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, R]">, #dtensor.layout<@tp, "[R, S0]">]}
  %a = func.call @layer(%x, %w1) : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  // CHECK: call @layer(%0, %arg2) {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">, dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, R]">, #dtensor.layout<@tp, "[R, S0]">]}
  %b = func.call @layer(%a, %w2) : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  return %b : tensor<16x64xf32>
}

// -----

// A callee with its own layouts keeps them; a declaration's signature is
// used as declared; a recursive call uses the signature as it stands.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func private @extern(%x: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}) -> (tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">})
// CHECK-LABEL: func.func @rec(
func.func @rec(%x: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}) -> (tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}) {
  // CHECK: call @extern(%arg0) {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">, dtensor.operand_layouts = [#dtensor.layout<@tp, "[S0, R]">]}
  %a = func.call @extern(%x) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  // CHECK: call @rec(%0) {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">, dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, S0]">]}
  %b = func.call @rec(%a) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %b : tensor<8x8xf32>
}
