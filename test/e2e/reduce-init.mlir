// RUN: dtensor-run -n 4 %s | FileCheck %s
// RUN: dtensor-opt --dtensor-spmd %s | FileCheck %s --check-prefix=IR
// CHECK: every rank's result equals the single-device run
// A contraction accumulating into an argument (C + A B) with the
// contraction dim sharded: the result is Partial(sum), so the init C may
// be counted once only. It is kept at mesh coordinate 0 of the reduced
// axis and is zero elsewhere (a local Replicate -> Partial step), then one
// all_reduce resolves the sum.
// IR: %[[C:.*]] = "dtensor.mesh_index"() {mesh = @m, mesh_axes = array<i64: 1>} : () -> index
// IR: %[[FIRST:.*]] = arith.cmpi eq, %[[C]], %c0 : index
// IR: %[[KEPT:.*]] = arith.select %[[FIRST]], %arg2, %cst{{.*}} : tensor<8x16xf32>
// IR: linalg.matmul ins(%arg0, %arg1 : tensor<8x8xf32>, tensor<8x16xf32>) outs(%[[KEPT]] : tensor<8x16xf32>)
// IR: "dtensor.all_reduce"{{.*}}mesh_axes = array<i64: 1>, reduce = "sum"
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["dp", "tp"]} : () -> ()
func.func @accumulate(%a: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@m, "[S(dp), S(tp)]">},
                      %b: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@m, "[S(tp), R]">},
                      %c: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@m, "[S(dp), R]">})
    -> (tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@m, "[S(dp), R]">}) {
  %y = linalg.matmul ins(%a, %b : tensor<16x16xf32>, tensor<16x16xf32>) outs(%c : tensor<16x16xf32>) -> tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}
