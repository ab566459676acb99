"dtensor.mesh"() {sym_name = "a", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
"dtensor.mesh"() {sym_name = "b", shape = array<i64: 4>, axis_names = ["y"]} : () -> ()
func.func @two(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}
