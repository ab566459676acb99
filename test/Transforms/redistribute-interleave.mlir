// RUN: dtensor-opt %s --split-input-file --dtensor-spmd | FileCheck %s
// RUN: head -n 26 %s > %t2.mlir && dtensor-run -n 2 %t2.mlir | FileCheck %s --check-prefix=OK
// RUN: tail -n 18 %s > %t4.mlir && dtensor-run -n 4 %t4.mlir | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
//
// Redistributing interleaved shards (S(tp)i3: 3 equal groups, each split
// over tp). Every device's block is the block of the tensor viewed with the
// dim cut into [3, 8] and the inner dim split, so the plan runs in that
// view: expand_shape of the local block, the collectives, collapse_shape.
// Other conversions go through a waypoint without interleave.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @gather
// CHECK: %[[E:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2]] output_shape [8, 3, 4] : tensor<8x12xf32> into tensor<8x3x4xf32>
// CHECK: %[[G:.*]] = "dtensor.all_gather"(%[[E]]) {gather_dim = 2 : i64, mesh = @m, mesh_axes = array<i64: 0>} : (tensor<8x3x4xf32>) -> tensor<8x3x8xf32>
// CHECK: tensor.collapse_shape %[[G]] {{\[\[}}0], [1, 2]] : tensor<8x3x8xf32> into tensor<8x24xf32>
// CHECK-LABEL: func.func @rows
// CHECK: tensor.expand_shape
// CHECK: "dtensor.all_to_all"
// CHECK-SAME: (tensor<8x3x4xf32>) -> tensor<4x3x8xf32>
// CHECK: tensor.collapse_shape
func.func @gather(%w: tensor<8x24xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(tp)i3]">}) -> (tensor<8x24xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">}) {
  return %w : tensor<8x24xf32>
}
func.func @rows(%w: tensor<8x24xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(tp)i3]">}) -> (tensor<8x24xf32> {dtensor.layout = #dtensor.layout<@m, "[S(tp), R]">}) {
  return %w : tensor<8x24xf32>
}

// -----

// On a 2x2 mesh: to a plain layout on other dims, to another number of
// groups, and to groups split by both axes.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @mixed
// CHECK: tensor.expand_shape %arg0 {{\[\[}}0], [1, 2], [3]] output_shape [6, 3, 4, 4]
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2], [3]] output_shape [12, 2, 12, 4]
// CHECK: "dtensor.local_split"(%{{.*}}) {mesh = @m, mesh_axes = array<i64: 1, 0>, shard_dim = 2 : i64} : (tensor<12x3x8x4xf32>) -> tensor<12x3x2x4xf32>
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2], [3]] : tensor<12x2x6x4xf32> into tensor<12x12x4xf32>
func.func @mixed(%w: tensor<12x24x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S(dp), S(tp)i3, R]">})
    -> (tensor<12x24x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S(tp), R, S(dp)]">},
        tensor<12x24x4xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(dp)i2, R]">},
        tensor<12x24x4xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(tp,dp)i3, R]">}) {
  %e = tensor.empty() : tensor<12x24x4xf32>
  %t = linalg.exp ins(%w : tensor<12x24x4xf32>) outs(%e : tensor<12x24x4xf32>) -> tensor<12x24x4xf32>
  return %t, %t, %t : tensor<12x24x4xf32>, tensor<12x24x4xf32>, tensor<12x24x4xf32>
}
