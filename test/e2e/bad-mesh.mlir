// RUN: not dtensor-run -n 2 %s 2>&1 | FileCheck %s
// A mesh that does not read is named with the reason (dtensor-run said
// "run it with -n 0").
// CHECK: its dtensor.mesh is not valid: mesh axis name '' is not valid
// CHECK-NOT: -n 0
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = [""]} : () -> ()
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
