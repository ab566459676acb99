// RUN: dtensor-opt %s --dtensor-import-shard --split-input-file | FileCheck %s
// dtensor-import-shard: shard.grid -> dtensor.mesh, shard.shard ->
// dtensor.annotate with the layout of split_axes.

// CHECK: "dtensor.mesh"() {axis_names = ["a0", "a1"], shape = array<i64: 2, 4>, sym_name = "grid"}
// CHECK-LABEL: func.func @f(
// CHECK: %[[A:.*]] = "dtensor.annotate"(%arg0) {layout = #dtensor.layout<@grid, "[S0, R]">}
// CHECK: %[[B:.*]] = "dtensor.annotate"(%arg1) {layout = #dtensor.layout<@grid, "[R, S10]">}
// CHECK: %[[C:.*]] = "dtensor.annotate"(%arg2) {layout = #dtensor.layout<@grid, "[R, R, R]">}
// CHECK: return %[[A]], %[[B]]
// CHECK-NOT: shard.
shard.grid @grid(shape = 2x4)
func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %t: tensor<2x3x4xf32>) -> (tensor<8x16xf32>, tensor<16x32xf32>) {
  %s0 = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %x1 = shard.shard %x to %s0 : tensor<8x16xf32>
  %s1 = shard.sharding @grid split_axes = [[], [1, 0]] : !shard.sharding
  %w1 = shard.shard %w to %s1 annotate_for_users : tensor<16x32xf32>
  %s2 = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %t1 = shard.shard %t to %s2 : tensor<2x3x4xf32>
  return %x1, %w1 : tensor<8x16xf32>, tensor<16x32xf32>
}
