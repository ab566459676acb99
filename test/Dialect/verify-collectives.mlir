// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --dtensor-verify
// Every error the verifier reports about per-device collectives and
// dtensor.mesh_index. The mesh is 2x4 (axes dp=0, tp=1).

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @unknown_mesh(%a: tensor<4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{unknown mesh '@other'}}
  %b = "dtensor.all_gather"(%a) {mesh = @other, mesh_axes = array<i64: 1>, gather_dim = 0 : i64} : (tensor<4xf32>) -> tensor<16xf32>
  return %b : tensor<16xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @nested_ref(%a: tensor<4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'mesh' must be a flat symbol reference such as @mesh}}
  %b = "dtensor.all_gather"(%a) {mesh = @mesh::@inner, mesh_axes = array<i64: 1>, gather_dim = 0 : i64} : (tensor<4xf32>) -> tensor<16xf32>
  return %b : tensor<16xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @axes_type(%a: tensor<4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'mesh_axes' must be an array<i64: ...> of mesh axes}}
  %b = "dtensor.all_gather"(%a) {mesh = @mesh, mesh_axes = array<i32: 1>, gather_dim = 0 : i64} : (tensor<4xf32>) -> tensor<16xf32>
  return %b : tensor<16xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @axes_empty(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'mesh_axes' must list 1 to 2 distinct axes of the mesh, not 0}}
  %b = "dtensor.all_reduce"(%a) {mesh = @mesh, mesh_axes = array<i64>, reduce = "sum"} : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @axes_range(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{mesh axis 2 is out of range: the mesh has axes 0 to 1}}
  %b = "dtensor.all_reduce"(%a) {mesh = @mesh, mesh_axes = array<i64: 2>, reduce = "sum"} : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @axes_twice(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{mesh axis 1 is listed twice in 'mesh_axes'}}
  %b = "dtensor.all_reduce"(%a) {mesh = @mesh, mesh_axes = array<i64: 1, 1>, reduce = "sum"} : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @reduce_kind(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'reduce' must be one of "sum", "max", "min", "avg", "prod"}}
  %b = "dtensor.all_reduce"(%a) {mesh = @mesh, mesh_axes = array<i64: 0>, reduce = "mean"} : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @dynamic(%a: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{the operand must be a statically shaped tensor}}
  %b = "dtensor.all_reduce"(%a) {mesh = @mesh, mesh_axes = array<i64: 0>, reduce = "max"} : (tensor<?xf32>) -> tensor<?xf32>
  return %b : tensor<?xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @element(%a: tensor<4xf32>) -> tensor<16xf16> {
  // expected-error @+1 {{operand and result must have the same rank and element type}}
  %b = "dtensor.all_gather"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, gather_dim = 0 : i64} : (tensor<4xf32>) -> tensor<16xf16>
  return %b : tensor<16xf16>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @dim_range(%a: tensor<4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'gather_dim' is 1, out of range for a rank-1 tensor (valid: 0 to 0)}}
  %b = "dtensor.all_gather"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, gather_dim = 1 : i64} : (tensor<4xf32>) -> tensor<16xf32>
  return %b : tensor<16xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @gather_size(%a: tensor<4xf32>) -> tensor<20xf32> {
  // expected-error @+1 {{result dim 0 (20) gathered over 4 devices needs an operand dim of 5, not 4}}
  %b = "dtensor.all_gather"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, gather_dim = 0 : i64} : (tensor<4xf32>) -> tensor<20xf32>
  return %b : tensor<20xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @other_dim(%a: tensor<4x3xf32>) -> tensor<16x2xf32> {
  // expected-error @+1 {{operand and result differ in dim 1 (3 vs 2), which this collective does not change}}
  %b = "dtensor.all_gather"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, gather_dim = 0 : i64} : (tensor<4x3xf32>) -> tensor<16x2xf32>
  return %b : tensor<16x2xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @scatter_size(%a: tensor<10xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{operand dim 0 (10) split over 8 devices gives a result dim of 2, not 1}}
  %b = "dtensor.reduce_scatter"(%a) {mesh = @mesh, mesh_axes = array<i64: 0, 1>, shard_dim = 0 : i64, reduce = "sum"} : (tensor<10xf32>) -> tensor<1xf32>
  return %b : tensor<1xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @scatter_reduce(%a: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'reduce' must be one of}}
  %b = "dtensor.reduce_scatter"(%a) {mesh = @mesh, mesh_axes = array<i64: 0>, shard_dim = 0 : i64, reduce = ""} : (tensor<8xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @all_to_all_same(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'gather_dim' and 'shard_dim' must differ}}
  %b = "dtensor.all_to_all"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, gather_dim = 0 : i64, shard_dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @all_to_all_shard(%a: tensor<4x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{operand dim 1 (8) split over 4 devices gives a result dim of 2, not 8}}
  %b = "dtensor.all_to_all"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, gather_dim = 0 : i64, shard_dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<16x8xf32>
  return %b : tensor<16x8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @split_dim(%a: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shard_dim' is -1, out of range for a rank-1 tensor}}
  %b = "dtensor.local_split"(%a) {mesh = @mesh, mesh_axes = array<i64: 0>, shard_dim = -1 : i64} : (tensor<8xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @root(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'root' 4 is not a position in the group (valid: 0 to 3)}}
  %b = "dtensor.broadcast"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, root = 4 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @pairs_odd(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'pairs' must be an array<i64: src0, dst0, src1, dst1, ...> of group positions}}
  %b = "dtensor.permute"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, pairs = array<i64: 0, 1, 2>} : (tensor<8xf32>) -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @pairs_range(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{pair 1: position 2 is not in the group (valid: 0 to 1)}}
  %b = "dtensor.permute"(%a) {mesh = @mesh, mesh_axes = array<i64: 0>, pairs = array<i64: 0, 1, 1, 2>} : (tensor<8xf32>) -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @pairs_source(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{pair 1: position 0 is a source twice}}
  %b = "dtensor.permute"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, pairs = array<i64: 0, 1, 0, 2>} : (tensor<8xf32>) -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @pairs_target(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{pair 1: position 3 is a target twice}}
  %b = "dtensor.permute"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, pairs = array<i64: 0, 3, 1, 3>} : (tensor<8xf32>) -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @index_count() -> index {
  // expected-error @+1 {{returns 1 indices but the mesh has 2 axes}}
  %i = "dtensor.mesh_index"() {mesh = @mesh} : () -> index
  return %i : index
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @index_axes() -> (index, index) {
  // expected-error @+1 {{returns 2 indices but the 'mesh_axes' list has 1 axes}}
  %i:2 = "dtensor.mesh_index"() {mesh = @mesh, mesh_axes = array<i64: 1>} : () -> (index, index)
  return %i#0, %i#1 : index, index
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @index_unknown() -> index {
  // expected-error @+1 {{unknown mesh '@nope'}}
  %i = "dtensor.mesh_index"() {mesh = @nope} : () -> index
  return %i : index
}

// -----

// A collective naming an invalid mesh reports the mesh's own error too.
// expected-error @+1 {{mesh axis 0 has size 0}}
"dtensor.mesh"() {sym_name = "bad", shape = array<i64: 0>, axis_names = ["x"]} : () -> ()
func.func @bad_mesh(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{mesh '@bad' is invalid: mesh axis 0 has size 0}}
  %b = "dtensor.all_reduce"(%a) {mesh = @bad, mesh_axes = array<i64: 0>, reduce = "sum"} : (tensor<8xf32>) -> tensor<8xf32>
  return %b : tensor<8xf32>
}
