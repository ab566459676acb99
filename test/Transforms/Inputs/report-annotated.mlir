// A global program whose only layout is an annotation (report.test).
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @annotated(%x: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %a = "dtensor.annotate"(%x) {layout = #dtensor.layout<@tp, "[S0, R]">} : (tensor<16x16xf32>) -> tensor<16x16xf32>
  return %a : tensor<16x16xf32>
}
