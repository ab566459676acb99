// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK: every rank's result equals the single-device run
// A Partial made from sharded data (gather, then kept at tp coordinate 0
// with zeros elsewhere) and resolved again to rows over dp: the numbers
// are the single-device run's.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["dp", "tp"]} : () -> ()
func.func @create(%x: tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S(tp), R]">}) -> tensor<8x4xf32> {
  %p = "dtensor.redistribute"(%x) {src = #dtensor.layout<@m, "[S(tp), R]">, dst = #dtensor.layout<@m, "[R, R] Psum(tp)">} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %r = "dtensor.redistribute"(%p) {src = #dtensor.layout<@m, "[R, R] Psum(tp)">, dst = #dtensor.layout<@m, "[S(dp), R]">} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
