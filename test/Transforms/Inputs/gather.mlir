// Input of lower-to-runtime.test: a block split by rows returned whole (one
// all_gather).
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @g(%x: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">})
    -> (tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">}) {
  return %x : tensor<8x8xf32>
}
