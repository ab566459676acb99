// dtensor and upstream passes mixed, as pass flags and as a pipeline, with
// nested (func.func) and option-carrying elements.
// RUN: dtensor-opt %s --dtensor-verify --canonicalize | FileCheck %s
// RUN: dtensor-opt %s --pass-pipeline='builtin.module(dtensor-verify, func.func(cse), canonicalize{max-iterations=2})' | FileCheck %s
// RUN: dtensor-opt %s --pass-pipeline 'builtin.module(func.func(canonicalize))' | FileCheck %s
// RUN: dtensor-opt %s --pass-pipeline='dtensor-verify,canonicalize' | FileCheck %s
// RUN: not dtensor-opt %s --pass-pipeline='func.func(cse)x' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: invalid pass pipeline

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 4>, axis_names = ["x"]} : () -> ()
// CHECK-LABEL: func.func @f(
// CHECK-NEXT: return %arg0 : tensor<8xf32>
func.func @f(%a: tensor<8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0]">}) -> tensor<8xf32> {
  %c = arith.constant 0 : i32
  %d = arith.addi %c, %c : i32
  return %a : tensor<8xf32>
}
