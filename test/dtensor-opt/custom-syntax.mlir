// The dtensor dialect has only the generic syntax (IRDL); the parser
// rejects custom syntax without a reason, so dtensor-opt names the op.
// RUN: not dtensor-opt %s 2>&1 | FileCheck %s
// CHECK: custom-syntax.mlir:[[@LINE+4]]:8: error: 'dtensor.annotate' is written in custom syntax, which the dtensor dialect (defined with IRDL) does not have; write it in the generic form "dtensor.annotate"(operands) {attributes} : (types) -> types
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>} : () -> ()
// "dtensor.x" in a comment and #dtensor.layout in an attribute do not count.
func.func @f(%y: tensor<4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0]">}) -> tensor<4xf32> {
  %s = dtensor.annotate %y {layout = #dtensor.layout<@m, "[R]">} : tensor<4xf32>
  return %s : tensor<4xf32>
}
