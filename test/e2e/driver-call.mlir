// RUN: dtensor-opt %s --dtensor-spmd | FileCheck %s --check-prefix=SPMD
// RUN: dtensor-run -n 2 --entry main %s | FileCheck %s
// A driver without layouts of its own calling an annotated function is
// partitioned too (its mesh comes from the callee): dtensor-spmd skipped
// it, and the call passed global types to the partitioned callee.
// SPMD-LABEL: func.func @main(
// SPMD-SAME: tensor<4x4xf32> {dtensor.global_shape = array<i64: 8, 4>
// SPMD: call @f(%{{.*}}) : (tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: every rank's result equals the single-device run
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @f(%a: tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) -> tensor<8x4xf32> {
  %c = arith.addf %a, %a : tensor<8x4xf32>
  return %c : tensor<8x4xf32>
}
func.func @main(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %r = func.call @f(%x) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
