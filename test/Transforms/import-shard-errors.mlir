// RUN: dtensor-opt %s --dtensor-import-shard --split-input-file --verify-diagnostics

shard.grid @grid(shape = 4)
func.func @halo(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{shard.sharding with halo sizes, explicit shard offsets or dynamic sizes has no dtensor layout; only split_axes are imported}}
  %s = shard.sharding @grid split_axes = [[0]] halo_sizes = [1, 1] : !shard.sharding
  %x1 = shard.shard %x to %s : tensor<8xf32>
  return %x1 : tensor<8xf32>
}

// -----

shard.grid @grid(shape = 4)
func.func @offsets(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{shard.sharding with halo sizes, explicit shard offsets or dynamic sizes has no dtensor layout}}
  %s = shard.sharding @grid split_axes = [[0]] sharded_dims_offsets = [0, 1, 3, 6, 8] : !shard.sharding
  %x1 = shard.shard %x to %s : tensor<8xf32>
  return %x1 : tensor<8xf32>
}

// -----

// expected-error @+1 {{shard.grid @dyn: a grid of dynamic or more than 8 axes has no dtensor mesh}}
shard.grid @dyn(shape = 2x?)
func.func @dynamic(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// The result is checked like every dtensor pass's input: dtensor IR that
// was already there and is wrong is reported, not passed on.
// expected-error @+1 {{'dtensor.mesh' op a mesh has 1 to 8 axes, not 0}}
"dtensor.mesh"() {sym_name = "bad", shape = array<i64>, axis_names = []} : () -> ()
shard.grid @grid(shape = 4)
func.func @imported(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %x1 = shard.shard %x to %s : tensor<8xf32>
  return %x1 : tensor<8xf32>
}

// -----

// Other shard ops are named, not left in the per-device program; an unused
// get_sharding reads nothing and goes.
shard.grid @grid(shape = 2)
func.func @other(%a: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %b = shard.shard %a to %s : tensor<8x4xf32>
  %unused = shard.get_sharding %b : tensor<8x4xf32> -> !shard.sharding
  // expected-error @+1 {{'shard.all_reduce' op is not imported: dtensor-import-shard takes shard.grid, shard.sharding and shard.shard}}
  %c = shard.all_reduce %b on @grid grid_axes = [0] : tensor<8x4xf32> -> tensor<8x4xf32>
  return %c : tensor<8x4xf32>
}
