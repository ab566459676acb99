// Input of apply-plan.mlir: a module with its own mesh; `w` already
// annotated the way the plan says, `v` annotated otherwise.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @f(%x: tensor<8x8xf32> {dtensor.name = "x"},
             %w: tensor<8x8xf32> {dtensor.name = "w", dtensor.layout = #dtensor.layout<@tp, "[R, R]">}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}
func.func @g(%v: tensor<8xf32> {dtensor.name = "wv", dtensor.layout = #dtensor.layout<@tp, "[S0]">}) -> tensor<8xf32> {
  return %v : tensor<8xf32>
}
