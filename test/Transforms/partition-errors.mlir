// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --dtensor-partition

// Partitioning a program that was not propagated: the first op without a
// layout is named.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @unpropagated(%x: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}) -> tensor<16x16xf32> {
  // expected-error @+1 {{'tensor.empty' op has no result layout: it was not propagated; run dtensor-propagate before dtensor-partition}}
  %e = tensor.empty() : tensor<16x16xf32>
  %y = arith.addf %x, %e : tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}

// -----

// An op with its result layout but not the layouts its operands need.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @no_operand_layouts(%x: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}) -> tensor<16x16xf32> {
  // expected-error @+1 {{'arith.addf' op has no operand layout: it was not propagated}}
  %y = arith.addf %x, %x {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">} : tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}

// -----

// A return that was not propagated: without its operand layouts the
// function would return an [S0, R] block where it declares [R, S0].
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["x"]} : () -> ()
func.func @return_unpropagated(%a: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">})
    -> (tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S0]">}) {
  // expected-error @+1 {{'func.return' op has no operand layout: it was not propagated}}
  return %a : tensor<16x16xf32>
}

// -----

// An operand whose value has no layout (its argument has none).
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @operand_without_layout(%x: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}, %w: tensor<16x16xf32>) -> tensor<16x16xf32> {
  // expected-error @+1 {{'arith.addf' op operand 1 has no layout; run dtensor-propagate before dtensor-partition}}
  %y = arith.addf %x, %w {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">, dtensor.operand_layouts = [#dtensor.layout<@tp, "[S0, R]">, #dtensor.layout<@tp, "[S0, R]">]} : tensor<16x16xf32>
  return {dtensor.operand_layouts = [#dtensor.layout<@tp, "[S0, R]">]} %y : tensor<16x16xf32>
}

// -----

// A program partitioned already (its signature has the global shapes of
// the calling convention): partitioning it again would split its blocks.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// expected-error @+1 {{'func.func' op is already partitioned (argument 0 has a dtensor.global_shape: its type is a device's block)}}
func.func @twice(%x: tensor<4x16xf32> {dtensor.global_shape = array<i64: 16, 16>, dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}) -> tensor<4x16xf32> {
  return %x : tensor<4x16xf32>
}
