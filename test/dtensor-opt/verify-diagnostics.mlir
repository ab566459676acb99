// --verify-diagnostics: every expectation form, met, exits 0.
// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --dtensor-verify

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 4>, axis_names = ["x"]} : () -> ()
// expected-error @below {{unknown mesh '@nope'}}
"dtensor.mesh_index"() {mesh = @nope} : () -> (index)
// expected-error @+2 {{unknown mesh '@other'}}
// A line in between.
"dtensor.mesh_index"() {mesh = @other} : () -> (index)
"dtensor.mesh_index"() {mesh = @again} : () -> (index)
// expected-error @above {{unknown mesh '@again'}}
"dtensor.mesh_index"() {mesh = @fourth} : () -> (index)
// expected-error @-1 {{unknown mesh}}
"dtensor.mesh_index"() {mesh = @fifth} : () -> (index) // expected-error {{'dtensor.mesh_index' op unknown mesh '@fifth'}}

// -----

// A second chunk: its expectations are checked against its own diagnostics.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 4>, axis_names = ["x"]} : () -> ()
func.func @f(%a: tensor<3xf32>) -> tensor<12xf32> {
  // expected-error @+1 {{'gather_dim' is 1, out of range for a rank-1 tensor (valid: 0 to 0)}}
  %b = "dtensor.all_gather"(%a) {mesh = @mesh, mesh_axes = array<i64: 0>, gather_dim = 1 : i64} : (tensor<3xf32>) -> tensor<12xf32>
  return %b : tensor<12xf32>
}
