// A per-device program: @blk has an all_reduce and a local_split (no
// communication); @main calls it twice, @twice calls @main.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @blk(%a: tensor<16x32xf32>) -> tensor<16x16xf32> {
  %r = "dtensor.all_reduce"(%a) {mesh = @m, mesh_axes = array<i64: 0>, reduce = "sum"} : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %s = "dtensor.local_split"(%r) {mesh = @m, mesh_axes = array<i64: 0>, shard_dim = 1 : i64} : (tensor<16x32xf32>) -> tensor<16x16xf32>
  return %s : tensor<16x16xf32>
}
func.func @main(%a: tensor<16x32xf32>) -> tensor<16x16xf32> {
  %x = func.call @blk(%a) : (tensor<16x32xf32>) -> tensor<16x16xf32>
  %y = func.call @blk(%a) : (tensor<16x32xf32>) -> tensor<16x16xf32>
  %z = arith.addf %x, %y : tensor<16x16xf32>
  return %z : tensor<16x16xf32>
}
func.func @twice(%a: tensor<16x32xf32>) -> tensor<16x16xf32> {
  %x = func.call @main(%a) : (tensor<16x32xf32>) -> tensor<16x16xf32>
  return %x : tensor<16x16xf32>
}
