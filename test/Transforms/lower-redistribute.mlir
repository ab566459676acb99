// RUN: dtensor-opt %s --split-input-file --dtensor-lower-redistribute --dtensor-verify | FileCheck %s
// RUN: dtensor-opt %s --split-input-file --dtensor-lower-redistribute="strategy=greedy" --dtensor-verify | FileCheck %s --check-prefix=GREEDY
// RUN: dtensor-opt %s --split-input-file --pass-pipeline='builtin.module(dtensor-lower-redistribute{report=true})' | FileCheck %s --check-prefix=REPORT

// [S0, S1] -> [S1, S0] on 2x4: gather one axis, all_to_all the other, split
// back; never through the replicated tensor.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @transpose_layout(
// CHECK-SAME: %[[A:.*]]: tensor<32x8xf32>
// CHECK: %[[G:.*]] = "dtensor.all_gather"(%[[A]]) {gather_dim = 0 : i64, mesh = @mesh, mesh_axes = array<i64: 0>} : (tensor<32x8xf32>) -> tensor<64x8xf32>
// CHECK: %[[T:.*]] = "dtensor.all_to_all"(%[[G]]) {gather_dim = 1 : i64, mesh = @mesh, mesh_axes = array<i64: 1>, shard_dim = 0 : i64} : (tensor<64x8xf32>) -> tensor<16x32xf32>
// CHECK: %[[S:.*]] = "dtensor.local_split"(%[[T]]) {mesh = @mesh, mesh_axes = array<i64: 0>, shard_dim = 1 : i64} : (tensor<16x32xf32>) -> tensor<16x16xf32>
// CHECK-NOT: dtensor.redistribute
// CHECK: return %[[S]]
// REPORT: "dtensor.local_split"{{.*}}dtensor.plan_cost = "3 steps, forward 15.036 us, backward 15.036 us"
func.func @transpose_layout(%a: tensor<32x8xf32>) -> tensor<16x16xf32> {
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S0, S1]">, dst = #dtensor.layout<@mesh, "[S1, S0]">, global_shape = array<i64: 64, 32>}
      : (tensor<32x8xf32>) -> tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}

// -----

// [S0, S1] -> [R, R] on 2x2 (a case mlir-opt's shard-partition miscompiles):
// two all_gathers.
"dtensor.mesh"() {sym_name = "grid", shape = array<i64: 2, 2>, axis_names = ["x", "y"]} : () -> ()
// CHECK-LABEL: func.func @replicate(
// CHECK: "dtensor.all_gather"(%{{.*}}) {gather_dim = 0 : i64, mesh = @grid, mesh_axes = array<i64: 0>} : (tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK: "dtensor.all_gather"(%{{.*}}) {gather_dim = 1 : i64, mesh = @grid, mesh_axes = array<i64: 1>} : (tensor<8x4xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: return
func.func @replicate(%a: tensor<4x4xf32>) -> tensor<8x8xf32> {
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@grid, "[S0, S1]">, dst = #dtensor.layout<@grid, "[R, R]">, global_shape = array<i64: 8, 8>}
      : (tensor<4x4xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// A Partial value that a consumer wants sharded: one reduce_scatter, not an
// all_reduce and a slice.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @partial_to_shard(
// CHECK: "dtensor.reduce_scatter"(%{{.*}}) {mesh = @mesh, mesh_axes = array<i64: 0>, reduce = "sum", shard_dim = 0 : i64} : (tensor<64x32xf32>) -> tensor<16x32xf32>
// CHECK-NOT: all_reduce
// CHECK: return
func.func @partial_to_shard(%a: tensor<64x32xf32>) -> tensor<16x32xf32> {
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[R, R] Psum(0)">, dst = #dtensor.layout<@mesh, "[S0, R]">, global_shape = array<i64: 64, 32>}
      : (tensor<64x32xf32>) -> tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}

// -----

// Equal layouts: the redistribute disappears.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @identity(
// CHECK-SAME: %[[A:.*]]: tensor<3x5xf32>
// CHECK-NEXT: return %[[A]]
func.func @identity(%a: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S0, R]">, dst = #dtensor.layout<@mesh, "[S0, R]">, global_shape = array<i64: 10, 5>}
      : (tensor<3x5xf32>) -> tensor<3x5xf32>
  return %r : tensor<3x5xf32>
}

// -----

// Uneven: 10 rows in 8 chunks of 2 do not nest in 2 chunks of 5, so the plan
// gathers both axes at once and splits (padded types: 2 -> 10 -> 5).
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @uneven(
// CHECK: "dtensor.all_gather"(%{{.*}}) {gather_dim = 0 : i64, mesh = @mesh, mesh_axes = array<i64: 0, 1>} : (tensor<2x8xf32>) -> tensor<10x8xf32>
// CHECK: "dtensor.local_split"(%{{.*}}) {mesh = @mesh, mesh_axes = array<i64: 0>, shard_dim = 0 : i64} : (tensor<10x8xf32>) -> tensor<5x8xf32>
func.func @uneven(%a: tensor<2x8xf32>) -> tensor<5x8xf32> {
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S01, R]">, dst = #dtensor.layout<@mesh, "[S0, R]">, global_shape = array<i64: 10, 8>}
      : (tensor<2x8xf32>) -> tensor<5x8xf32>
  return %r : tensor<5x8xf32>
}

// -----

// The link model of the mesh drives the choice: with a slow dp axis the
// Partial over both axes is reduced over tp first, where the data is big,
// and over dp last, on a quarter of it.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"],
                  latency_us = array<f64: 10.0, 1.0>, bandwidth_gbps = array<f64: 10.0, 300.0>} : () -> ()
// CHECK-LABEL: func.func @links(
// CHECK: "dtensor.reduce_scatter"(%{{.*}}) {mesh = @mesh, mesh_axes = array<i64: 1>, reduce = "sum", shard_dim = 0 : i64} : (tensor<1024x1024xf32>) -> tensor<256x1024xf32>
// CHECK: "dtensor.all_reduce"(%{{.*}}) {mesh = @mesh, mesh_axes = array<i64: 0>, reduce = "sum"} : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
func.func @links(%a: tensor<1024x1024xf32>) -> tensor<256x1024xf32> {
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[R, R] Psum(0, 1)">, dst = #dtensor.layout<@mesh, "[S1, R]">, global_shape = array<i64: 1024, 1024>}
      : (tensor<1024x1024xf32>) -> tensor<256x1024xf32>
  return %r : tensor<256x1024xf32>
}

// -----

// strategy=greedy follows the seed's walk: fewer steps, but a first
// all_to_all over all 8 devices on the slow link (38 us against 8 us).
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>, axis_names = ["dp", "tp"],
                  latency_us = array<f64: 5.0, 1.0>, bandwidth_gbps = array<f64: 25.0, 300.0>} : () -> ()
// CHECK-LABEL: func.func @greedy_differs(
// CHECK: "dtensor.all_gather"(%{{.*}}) {gather_dim = 0 : i64, mesh = @mesh, mesh_axes = array<i64: 1>}
// CHECK: "dtensor.all_to_all"(%{{.*}}) {gather_dim = 0 : i64, mesh = @mesh, mesh_axes = array<i64: 0>, shard_dim = 1 : i64}
// CHECK: "dtensor.local_split"(%{{.*}}) {mesh = @mesh, mesh_axes = array<i64: 1>, shard_dim = 0 : i64}
// GREEDY-LABEL: func.func @greedy_differs(
// GREEDY: "dtensor.all_to_all"(%{{.*}}) {gather_dim = 0 : i64, mesh = @mesh, mesh_axes = array<i64: 0, 1>, shard_dim = 1 : i64} : (tensor<8x32xf32>) -> tensor<64x4xf32>
// GREEDY: "dtensor.all_to_all"(%{{.*}}) {gather_dim = 1 : i64, mesh = @mesh, mesh_axes = array<i64: 1>, shard_dim = 0 : i64} : (tensor<64x4xf32>) -> tensor<16x16xf32>
// GREEDY-NEXT: return
// REPORT-LABEL: func.func @greedy_differs(
// REPORT: dtensor.plan_cost = "3 steps, forward 7.097 us, backward 7.097 us"
func.func @greedy_differs(%a: tensor<8x32xf32>) -> tensor<16x16xf32> {
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S01, R]">, dst = #dtensor.layout<@mesh, "[S1, S0]">, global_shape = array<i64: 64, 32>}
      : (tensor<8x32xf32>) -> tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}

// -----

// A Partial the source lacks is made locally: after the gather, each device
// keeps the value where its tp coordinate is 0 and zeros elsewhere (a
// select, no collective).
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @create_partial
func.func @create_partial(%a: tensor<2x8xf32>) -> tensor<8x8xf32> {
  // CHECK: %[[G:.*]] = "dtensor.all_gather"(%arg0)
  // CHECK: %[[I:.*]] = "dtensor.mesh_index"() {mesh = @mesh, mesh_axes = array<i64: 0>}
  // CHECK: %[[F:.*]] = arith.cmpi eq, %[[I]]
  // CHECK: arith.select %[[F]], %[[G]], %{{.*}} : tensor<8x8xf32>
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S0, R]">, dst = #dtensor.layout<@mesh, "[R, R] Psum(0)">, global_shape = array<i64: 8, 8>}
      : (tensor<2x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}
