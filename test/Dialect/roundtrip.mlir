// RUN: dtensor-opt %s --dtensor-verify | dtensor-opt --dtensor-verify | FileCheck %s
// RUN: dtensor-opt %s --mlir-print-op-generic | dtensor-opt --dtensor-verify | FileCheck %s
// Every dtensor op and attribute survives print -> parse -> print, in both
// the pretty and the generic form.

// CHECK: "dtensor.mesh"() {axis_names = ["dp", "tp"], bandwidth_gbps = array<f64: 2.500000e+01, 3.000000e+02>, device_ids = array<i64: 7, 6, 5, 4, 3, 2, 1, 0>, latency_us = array<f64: 5.000000e+00, 1.000000e+00>, shape = array<i64: 2, 4>, sym_name = "mesh"} : () -> ()
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>,
                  axis_names = ["dp", "tp"],
                  latency_us = array<f64: 5.0, 1.0>,
                  bandwidth_gbps = array<f64: 25.0, 300.0>,
                  device_ids = array<i64: 7, 6, 5, 4, 3, 2, 1, 0>} : () -> ()
// CHECK: "dtensor.mesh"() {axis_names = ["x", "y", "z"], shape = array<i64: 2, 2, 2>, sym_name = "cube"} : () -> ()
"dtensor.mesh"() {sym_name = "cube", shape = array<i64: 2, 2, 2>, axis_names = ["x", "y", "z"]} : () -> ()

// An annotated single-device program (global shapes).
// CHECK-LABEL: func.func @annotated(
// CHECK-SAME: %arg0: tensor<64x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">}
// CHECK-SAME: %arg1: tensor<512x1024xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S(tp)]">}
// CHECK-SAME: -> (tensor<64x1024xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, S1]">})
func.func @annotated(%x: tensor<64x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">},
                     %w: tensor<512x1024xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S(tp)]">})
    -> (tensor<64x1024xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, S1]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x1024xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<64x1024xf32>) -> tensor<64x1024xf32>
  // CHECK: linalg.matmul {dtensor.layout = #dtensor.layout<@mesh, "[S0, S1]">}
  %h = linalg.matmul {dtensor.layout = #dtensor.layout<@mesh, "[S0, S1]">}
         ins(%x, %w : tensor<64x512xf32>, tensor<512x1024xf32>)
         outs(%i : tensor<64x1024xf32>) -> tensor<64x1024xf32>
  // CHECK: "dtensor.annotate"(%{{.*}}) {layout = #dtensor.layout<@mesh, "[S0, S1]">, priority = 2 : i64} : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %a = "dtensor.annotate"(%h) {layout = #dtensor.layout<@mesh, "[S0, S1]">, priority = 2 : i64}
      : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  // CHECK: "dtensor.annotate"(%{{.*}}) {layout = #dtensor.layout<@cube, "[S01, R] Psum(2)">} : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %b = "dtensor.annotate"(%a) {layout = #dtensor.layout<@cube, "[S01, R] Psum(2)">}
      : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  // CHECK: "dtensor.redistribute"(%{{.*}}) {dst = #dtensor.layout<@cube, "[S10, R]">, src = #dtensor.layout<@cube, "[S01, R] Psum(2)">} : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %c = "dtensor.redistribute"(%b) {src = #dtensor.layout<@cube, "[S01, R] Psum(2)">, dst = #dtensor.layout<@cube, "[S10, R]">}
      : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  return %c : tensor<64x1024xf32>
}

// A per-device program on uneven shards: 10x8 global on [S1, S0] has padded
// local blocks of 3x4 (rows 3,3,3,1 over tp; columns 4,4 over dp).
// CHECK-LABEL: func.func @per_device(
func.func @per_device(%a: tensor<3x4xf32>) -> (tensor<10x8xf32>, index, index) {
  // CHECK: "dtensor.redistribute"(%{{.*}}) {dst = #dtensor.layout<@mesh, "[S0, R]">, global_shape = array<i64: 10, 8>, src = #dtensor.layout<@mesh, "[S1, S0]">} : (tensor<3x4xf32>) -> tensor<5x8xf32>
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S1, S0]">, dst = #dtensor.layout<@mesh, "[S0, R]">, global_shape = array<i64: 10, 8>}
      : (tensor<3x4xf32>) -> tensor<5x8xf32>
  // CHECK: "dtensor.all_gather"(%{{.*}}) {gather_dim = 0 : i64, mesh = @mesh, mesh_axes = array<i64: 1>} : (tensor<3x4xf32>) -> tensor<12x4xf32>
  %g0 = "dtensor.all_gather"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, gather_dim = 0 : i64} : (tensor<3x4xf32>) -> tensor<12x4xf32>
  // CHECK: "dtensor.all_gather"(%{{.*}}) {gather_dim = 1 : i64, mesh = @mesh, mesh_axes = array<i64: 0>} : (tensor<3x4xf32>) -> tensor<3x8xf32>
  %g1 = "dtensor.all_gather"(%a) {mesh = @mesh, mesh_axes = array<i64: 0>, gather_dim = 1 : i64} : (tensor<3x4xf32>) -> tensor<3x8xf32>
  // CHECK: "dtensor.all_reduce"(%{{.*}}) {mesh = @mesh, mesh_axes = array<i64: 0, 1>, reduce = "max"} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %s = "dtensor.all_reduce"(%a) {mesh = @mesh, mesh_axes = array<i64: 0, 1>, reduce = "max"} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  // CHECK: "dtensor.reduce_scatter"(%{{.*}}) {mesh = @mesh, mesh_axes = array<i64: 1>, reduce = "sum", shard_dim = 0 : i64} : (tensor<3x4xf32>) -> tensor<1x4xf32>
  %rs = "dtensor.reduce_scatter"(%s) {mesh = @mesh, mesh_axes = array<i64: 1>, shard_dim = 0 : i64, reduce = "sum"} : (tensor<3x4xf32>) -> tensor<1x4xf32>
  // CHECK: "dtensor.all_to_all"(%{{.*}}) {gather_dim = 0 : i64, mesh = @mesh, mesh_axes = array<i64: 1>, shard_dim = 1 : i64} : (tensor<3x4xf32>) -> tensor<12x1xf32>
  %t = "dtensor.all_to_all"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, gather_dim = 0 : i64, shard_dim = 1 : i64} : (tensor<3x4xf32>) -> tensor<12x1xf32>
  // CHECK: "dtensor.local_split"(%{{.*}}) {mesh = @mesh, mesh_axes = array<i64: 0>, shard_dim = 0 : i64} : (tensor<3x4xf32>) -> tensor<2x4xf32>
  %l = "dtensor.local_split"(%a) {mesh = @mesh, mesh_axes = array<i64: 0>, shard_dim = 0 : i64} : (tensor<3x4xf32>) -> tensor<2x4xf32>
  // CHECK: "dtensor.broadcast"(%{{.*}}) {mesh = @mesh, mesh_axes = array<i64: 1>, root = 3 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %bc = "dtensor.broadcast"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, root = 3 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  // CHECK: "dtensor.permute"(%{{.*}}) {mesh = @mesh, mesh_axes = array<i64: 1>, pairs = array<i64: 0, 1, 1, 2, 2, 3, 3, 0>} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %p = "dtensor.permute"(%a) {mesh = @mesh, mesh_axes = array<i64: 1>, pairs = array<i64: 0, 1, 1, 2, 2, 3, 3, 0>} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  // CHECK: %{{.*}}:2 = "dtensor.mesh_index"() {mesh = @mesh} : () -> (index, index)
  %i:2 = "dtensor.mesh_index"() {mesh = @mesh} : () -> (index, index)
  // CHECK: "dtensor.mesh_index"() {mesh = @mesh, mesh_axes = array<i64: 1>} : () -> index
  %j = "dtensor.mesh_index"() {mesh = @mesh, mesh_axes = array<i64: 1>} : () -> index
  %full = "dtensor.all_gather"(%r) {mesh = @mesh, mesh_axes = array<i64: 0>, gather_dim = 0 : i64} : (tensor<5x8xf32>) -> tensor<10x8xf32>
  return %full, %i#0, %j : tensor<10x8xf32>, index, index
}
