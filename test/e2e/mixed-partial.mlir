// RUN: dtensor-opt %s --dtensor-spmd | FileCheck %s
// RUN: dtensor-run -n 4 %s | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
// A value pending an average over dp and a sum over tp (mixed Partial
// kinds commute when both are linear): each axis is reduced with its own
// kind, here a reduce_scatter to rows over tp, then an all_reduce over dp
// (on 2 devices one exchange: cheaper than scattering and gathering back).
// CHECK: "dtensor.reduce_scatter"(%arg0) {{.*}}mesh_axes = array<i64: 1>, reduce = "sum"
// CHECK: "dtensor.all_reduce"({{.*}}mesh_axes = array<i64: 0>, reduce = "avg"
// CHECK-NOT: "dtensor.all_gather"
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["dp", "tp"]} : () -> ()
func.func @mixed(%x: tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R] Pavg(0) Psum(1)">})
    -> (tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S(tp), R]">}) {
  return %x : tensor<8x4xf32>
}
