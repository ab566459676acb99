// RUN: dtensor-run -n 4 %s | FileCheck %s
// RUN: dtensor-opt --dtensor-spmd %s | FileCheck %s --check-prefix=IR
// CHECK-COUNT-4: result elements, equal to the single-device run
// CHECK: every rank's result equals the single-device run
// A constant that is not a splat, used sharded (rows unevenly, 5 over 2
// blocks of 3 and 2): it stays whole and each device takes its block with
// a local_split (no communication).
// IR: %[[C:.*]] = arith.constant dense<{{.*}}> : tensor<5x4xf32>
// IR: %[[A:.*]] = "dtensor.local_split"(%[[C]]) {mesh = @m, mesh_axes = array<i64: 1>, shard_dim = 1 : i64} : (tensor<5x4xf32>) -> tensor<5x2xf32>
// IR: "dtensor.local_split"(%[[A]]) {mesh = @m, mesh_axes = array<i64: 0>, shard_dim = 0 : i64} : (tensor<5x2xf32>) -> tensor<3x2xf32>
// IR-NOT: dtensor.all_
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["dp", "tp"]} : () -> ()
func.func @bias(%x: tensor<5x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S(dp), S(tp)]">})
    -> (tensor<5x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S(dp), S(tp)]">}) {
  %c = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0],
                             [13.0, 14.0, 15.0, 16.0], [17.0, 18.0, 19.0, 20.0]]> : tensor<5x4xf32>
  %e = tensor.empty() : tensor<5x4xf32>
  %y = linalg.add ins(%x, %c : tensor<5x4xf32>, tensor<5x4xf32>) outs(%e : tensor<5x4xf32>) -> tensor<5x4xf32>
  return %y : tensor<5x4xf32>
}
