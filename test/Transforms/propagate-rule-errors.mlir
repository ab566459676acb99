// RUN: dtensor-opt %s --split-input-file --allow-unregistered-dialect --verify-diagnostics --dtensor-propagate

"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @malformed(%x: tensor<8x32xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}) -> tensor<8xf32> {
  // expected-error @+1 {{'test.op' op its sharding rule "iJ->i" is malformed: unexpected 'J'}}
  %y = "test.op"(%x) {dtensor.rule = "iJ->i"} : (tensor<8x32xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @arity(%x: tensor<8x32xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}) -> tensor<8xf32> {
  // expected-error @+1 {{its sharding rule "ij,jk->i" names 2 inputs and 1 outputs, but the op has 1 tensor operands and 1 tensor results}}
  %y = "test.op"(%x) {dtensor.rule = "ij,jk->i"} : (tensor<8x32xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @rank(%x: tensor<8x32xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}) -> tensor<8xf32> {
  // expected-error @+1 {{its sharding rule gives input 0 3 dims, but operand 0 has rank 2}}
  %y = "test.op"(%x) {dtensor.rule = "ijk->i"} : (tensor<8x32xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @kind(%x: tensor<8x32xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}) -> tensor<8xf32> {
  // expected-error @+1 {{expected a reduce kind after ':'}}
  %y = "test.op"(%x) {dtensor.rule = "ij->i:mean"} : (tensor<8x32xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @not_string(%x: tensor<8x32xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}) -> tensor<8xf32> {
  // expected-error @+1 {{its 'dtensor.rule' must be a string}}
  %y = "test.op"(%x) {dtensor.rule = 3 : i64} : (tensor<8x32xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
