// RUN: dtensor-run -n 2 %s | FileCheck %s
// CHECK: every rank's result equals the single-device run
// A result that is a view of an argument (a slice): compiled functions
// return contiguous row-major blocks (identity layouts at the function
// boundary), so the single-device reference, whose result would otherwise be
// a strided view, reads the same as the partitioned run. Found by the random
// programs: before, a slice's result was read as if contiguous.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @main(%a0: tensor<12x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S0]">})
    -> (tensor<11x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) {
  %s = tensor.extract_slice %a0[1, 4] [11, 4] [1, 1] : tensor<12x8xf32> to tensor<11x4xf32>
  return %s : tensor<11x4xf32>
}
