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

// -----

// A sharded sum whose init is not zero cannot be made Partial locally yet.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @init(%x: tensor<8x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}, %i: tensor<8xf32> {dtensor.layout = #dtensor.layout<@tp, "[R]">}) -> tensor<8xf32> {
  // expected-error @+1 {{operand 1 must be Partial(sum) on mesh axis 0 for a sharded reduction, and only a fill with the neutral element is partitioned so far}}
  %s = linalg.reduce ins(%x : tensor<8x16xf32>) outs(%i : tensor<8xf32>) dimensions = [1] {dtensor.layout = #dtensor.layout<@tp, "[R] Psum(0)">, dtensor.loop_axes = [array<i64>, array<i64: 0>], dtensor.operand_layouts = [#dtensor.layout<@tp, "[R, S0]">, #dtensor.layout<@tp, "[R] Psum(0)">]}
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %s : tensor<8xf32>
}
