// A per-device program with a permute (a ring along axis 1 of a 2x4 mesh),
// input of lower-to-runtime.test.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @ring(%a: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %p = "dtensor.permute"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, pairs = array<i64: 0, 1, 1, 2, 2, 3, 3, 0>}
      : (tensor<3x4xf64>) -> tensor<3x4xf64>
  return %p : tensor<3x4xf64>
}
