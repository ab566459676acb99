// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --dtensor-partition

// Partitioning a program that was not propagated: the op whose operand has
// no layout is named.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @unpropagated(%x: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}) -> tensor<16x16xf32> {
  %e = tensor.empty() : tensor<16x16xf32>
  // expected-error @+1 {{'arith.addf' op operand 1 has no layout; run dtensor-propagate before dtensor-partition}}
  %y = arith.addf %x, %e {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">, dtensor.operand_layouts = [#dtensor.layout<@tp, "[S0, R]">, #dtensor.layout<@tp, "[S0, R]">]} : tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}
