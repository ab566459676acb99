// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect --dtensor-verify
// Layout errors on function arguments and results, on ops, and in
// dtensor.annotate / dtensor.redistribute.

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// expected-error @+1 {{dtensor.layout of argument 0: unknown mesh '@nope'}}
func.func @unknown_mesh(%a: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@nope, "[S0, R]">}) {
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// expected-error @+1 {{malformed sharding spec "[S0, Q]" (column 6)}}
func.func @bad_spec(%a: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, Q]">}) {
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// expected-error @+1 {{mesh axis 2 (sharding dim 0) is out of range}}
func.func @axis_range(%a: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S2, R]">}) {
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// expected-error @+1 {{unknown mesh axis 'pp'}}
func.func @axis_name(%a: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(pp), R]">}) {
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// expected-error @+1 {{mesh axis 0 (dp) shards both dim 0 and dim 1; each mesh axis may shard one dim once}}
func.func @axis_twice(%a: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, S0]">}) {
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// expected-error @+1 {{mesh axis 0 (dp) both shards dim 0 and is Partial(sum)}}
func.func @shard_and_partial(%a: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R] Psum(0)">}) {
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// expected-error @+1 {{dtensor.layout of result 0: the sharding spec has 3 dims but the tensor has rank 2}}
func.func @rank(%a: tensor<8x8xf32>) -> (tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R, R]">}) {
  return %a : tensor<8x8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// expected-error @+1 {{dim 0 is dynamic; sharded tensors need static shapes}}
func.func @dynamic(%a: tensor<?x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">}) {
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// expected-error @+1 {{unsupported element type (valid: f32, f64, f16, bf16, i1, i8, i16, i32, i64)}}
func.func @element(%a: tensor<8x8xcomplex<f32>> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">}) {
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// expected-error @+1 {{a layout applies to a ranked tensor, not this type}}
func.func @not_tensor(%a: f32 {dtensor.layout = #dtensor.layout<@mesh, "[]">}) {
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// expected-error @+1 {{dim 0 has size 0; sharded tensors need static dims of size >= 1}}
func.func @empty_dim(%a: tensor<0x8xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">}) {
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @op_layout_count() {
  // expected-error @+1 {{has 2 results, so its 'dtensor.layout' must be an array of 2 layouts}}
  %a:2 = "test.two"() {dtensor.layout = #dtensor.layout<@mesh, "[S0]">} : () -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @op_layout_kind() {
  // expected-error @+1 {{'dtensor.layout' must be a #dtensor.layout (one result) or an array of 1 entries, one per result}}
  %a = arith.constant {dtensor.layout = "S0"} dense<1.0> : tensor<8xf32>
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @op_layout_array() {
  // expected-error @+1 {{'test.two' op dtensor.layout of result 1: the sharding spec has 2 dims}}
  %a:2 = "test.two"() {dtensor.layout = [#dtensor.layout<@mesh, "[S0]">, #dtensor.layout<@mesh, "[S0, R]">]} : () -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @annotate_layout(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'dtensor.annotate' op layout: unknown mesh '@other'}}
  %b = "dtensor.annotate"(%a) {layout = #dtensor.layout<@other, "[S0, R]">} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %b : tensor<8x8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @annotate_priority(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'priority' must be a non-negative integer}}
  %b = "dtensor.annotate"(%a) {layout = #dtensor.layout<@mesh, "[S0, R]">, priority = -1 : i64} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %b : tensor<8x8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @annotate_type(%a: tensor<8x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{expected 'tensor<8x8xf32>' but got 'tensor<8x4xf32>'}}
  %b = "dtensor.annotate"(%a) {layout = #dtensor.layout<@mesh, "[S0, R]">} : (tensor<8x8xf32>) -> tensor<8x4xf32>
  return %b : tensor<8x4xf32>
}

// -----

"dtensor.mesh"() {sym_name = "a", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
"dtensor.mesh"() {sym_name = "b", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @redistribute_meshes(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'src' and 'dst' must be layouts on the same mesh}}
  %b = "dtensor.redistribute"(%a) {src = #dtensor.layout<@a, "[S0]">, dst = #dtensor.layout<@b, "[R]">} : (tensor<8xf32>) -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @redistribute_types(%a: tensor<8x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{input and result types must be equal (global shapes); after partitioning add 'global_shape'}}
  %b = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[R, R]">, dst = #dtensor.layout<@mesh, "[S0, R]">} : (tensor<8x8xf32>) -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @redistribute_dst(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'dtensor.redistribute' op dst: the sharding spec has 1 dims but the tensor has rank 2}}
  %b = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[R, R]">, dst = #dtensor.layout<@mesh, "[S0]">} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %b : tensor<8x8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @redistribute_global_rank(%a: tensor<5x8xf32>) -> tensor<10x2xf32> {
  // expected-error @+1 {{'global_shape' must be an array<i64: ...> with one entry per dim}}
  %b = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S0, R]">, dst = #dtensor.layout<@mesh, "[R, S1]">, global_shape = array<i64: 10>} : (tensor<5x8xf32>) -> tensor<10x2xf32>
  return %b : tensor<10x2xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @redistribute_element(%a: tensor<5x8xf32>) -> tensor<10x2xf16> {
  // expected-error @+1 {{input and result element types differ}}
  %b = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S0, R]">, dst = #dtensor.layout<@mesh, "[R, S1]">, global_shape = array<i64: 10, 8>} : (tensor<5x8xf32>) -> tensor<10x2xf16>
  return %b : tensor<10x2xf16>
}

// -----

// 10 rows over tp=4 are chunks of 3, 3, 3, 1: every device holds 3 (padded).
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @redistribute_local(%a: tensor<5x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{result type tensor<2x8xf32> does not match the local shape 3x8 of 'dst' on the global shape}}
  %b = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S0, R]">, dst = #dtensor.layout<@mesh, "[S1, R]">, global_shape = array<i64: 10, 8>} : (tensor<5x8xf32>) -> tensor<2x8xf32>
  return %b : tensor<2x8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @redistribute_src_local(%a: tensor<4x8xf32>) -> tensor<3x8xf32> {
  // expected-error @+1 {{input type tensor<4x8xf32> does not match the local shape 5x8 of 'src'}}
  %b = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S0, R]">, dst = #dtensor.layout<@mesh, "[S1, R]">, global_shape = array<i64: 10, 8>} : (tensor<4x8xf32>) -> tensor<3x8xf32>
  return %b : tensor<3x8xf32>
}

// -----

// Per-operand layouts, as dtensor-propagate writes them: unit for a
// non-tensor operand, and each layout must fit its operand.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
func.func @operand_layouts(%x: f32, %t: tensor<8x8xf32>) {
  %ok = "test.use"(%x, %t) {dtensor.operand_layouts = [unit, #dtensor.layout<@mesh, "[S0, R]">]} : (f32, tensor<8x8xf32>) -> tensor<8x8xf32>
  // expected-error @+1 {{'test.use' op dtensor.operand_layouts of operand 1: the sharding spec has 1 dims}}
  %bad = "test.use"(%x, %t) {dtensor.operand_layouts = [unit, #dtensor.layout<@mesh, "[S0]">]} : (f32, tensor<8x8xf32>) -> tensor<8x8xf32>
  // expected-error @+1 {{'dtensor.operand_layouts' must be an array of 2 entries, one per operand}}
  %short = "test.use"(%x, %t) {dtensor.operand_layouts = [unit]} : (f32, tensor<8x8xf32>) -> tensor<8x8xf32>
  // expected-error @+1 {{dtensor.operand_layouts of operand 0: a layout applies to a ranked tensor}}
  %scalar = "test.use"(%x, %t) {dtensor.operand_layouts = [#dtensor.layout<@mesh, "[]">, unit]} : (f32, tensor<8x8xf32>) -> tensor<8x8xf32>
  %mixed:2 = "test.two"() {dtensor.layout = [unit, #dtensor.layout<@mesh, "[S1]">]} : () -> (index, tensor<8xf32>)
  return
}
