// RUN: dtensor-opt %s --split-input-file --dtensor-spmd --dtensor-verify | FileCheck %s

// Megatron MLP: exactly one all_reduce and no all_gather; per-device types.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @megatron(
// CHECK-SAME: %arg0: tensor<16x64xf32> {dtensor.global_shape = array<i64: 16, 64>, dtensor.layout = #dtensor.layout<@tp, "[R, R]">}
// CHECK-SAME: %arg1: tensor<64x64xf32> {dtensor.global_shape = array<i64: 64, 256>, dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}
// CHECK-SAME: %arg2: tensor<64x64xf32> {dtensor.global_shape = array<i64: 256, 64>, dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}
// CHECK-SAME: -> (tensor<16x64xf32> {dtensor.global_shape = array<i64: 16, 64>, dtensor.layout = #dtensor.layout<@tp, "[R, R]">})
// CHECK-NOT: dtensor.all_gather
// CHECK: linalg.matmul ins(%arg0, %arg1 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%{{.*}} : tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK: linalg.matmul ins(%{{.*}}, %arg2 : tensor<16x64xf32>, tensor<64x64xf32>)
// CHECK-COUNT-1: dtensor.all_reduce
// CHECK-NOT: dtensor.all_gather
// CHECK: return
func.func @megatron(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">},
                    %w1: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">},
                    %w2: tensor<256x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">})
    -> (tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x256xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// 2x2 data x tensor parallel MLP: one all_reduce, over the tensor axis only.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 2>, axis_names = ["dp", "tp"]} : () -> ()
// CHECK-LABEL: func.func @mlp_2d(
// CHECK-SAME: %arg0: tensor<32x64xf32>
// CHECK-NOT: dtensor.all_gather
// CHECK: "dtensor.all_reduce"(%{{.*}}) {mesh = @mesh, mesh_axes = array<i64: 1>, reduce = "sum"} : (tensor<32x64xf32>) -> tensor<32x64xf32>
// CHECK-NOT: dtensor.all_reduce
// CHECK: return
func.func @mlp_2d(%x: tensor<64x64xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">},
                  %w1: tensor<64x128xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S(tp)]">},
                  %w2: tensor<128x64xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(tp), R]">})
    -> (tensor<64x64xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">}) {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64x128xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<64x128xf32>) -> tensor<64x128xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<64x64xf32>, tensor<64x128xf32>) outs(%i1 : tensor<64x128xf32>) -> tensor<64x128xf32>
  %e2 = tensor.empty() : tensor<64x64xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<64x128xf32>, tensor<128x64xf32>) outs(%i2 : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

// Sequence-parallel output: one reduce_scatter, no all_reduce.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @seq_parallel(
// CHECK-SAME: -> (tensor<16x32xf32> {dtensor.global_shape = array<i64: 64, 32>, dtensor.layout = #dtensor.layout<@tp, "[S(tp), R]">})
// CHECK-NOT: dtensor.all_reduce
// CHECK: "dtensor.reduce_scatter"(%{{.*}}) {mesh = @tp, mesh_axes = array<i64: 0>, reduce = "sum", shard_dim = 0 : i64} : (tensor<64x32xf32>) -> tensor<16x32xf32>
// CHECK-NOT: dtensor.all_reduce
// CHECK: return
func.func @seq_parallel(%h: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S(tp)]">},
                        %w: tensor<256x32xf32> {dtensor.layout = #dtensor.layout<@tp, "[S(tp), R]">})
    -> (tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@tp, "[S(tp), R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x32xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<64x32xf32>) -> tensor<64x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<64x256xf32>, tensor<256x32xf32>) outs(%i : tensor<64x32xf32>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}

// -----

// [S0] -> [S1] on a 1-D mesh: one all_to_all.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["x"]} : () -> ()
// CHECK-LABEL: func.func @s0_to_s1(
// CHECK-SAME: %arg0: tensor<4x16xf32>
// CHECK: "dtensor.all_to_all"(%arg0) {gather_dim = 0 : i64, mesh = @m, mesh_axes = array<i64: 0>, shard_dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<16x4xf32>
// CHECK-NEXT: return
func.func @s0_to_s1(%a: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">})
    -> (tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S0]">}) {
  return %a : tensor<16x16xf32>
}

// -----

// 2x2: [S0, S1] -> [S1, S0] and -> [R, R], with the right local types.
"dtensor.mesh"() {sym_name = "g", shape = array<i64: 2, 2>, axis_names = ["x", "y"]} : () -> ()
// CHECK-LABEL: func.func @grid(
// CHECK-SAME: %arg0: tensor<4x4xf32>
// CHECK-SAME: -> (tensor<4x4xf32> {dtensor.global_shape = array<i64: 8, 8>, dtensor.layout = #dtensor.layout<@g, "[S1, S0]">}, tensor<8x8xf32> {dtensor.global_shape = array<i64: 8, 8>, dtensor.layout = #dtensor.layout<@g, "[R, R]">})
// CHECK-DAG: "dtensor.all_gather"(%arg0) {gather_dim = 0 : i64, mesh = @g, mesh_axes = array<i64: 0>} : (tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK-DAG: "dtensor.all_to_all"(%{{.*}}) {gather_dim = 1 : i64, mesh = @g, mesh_axes = array<i64: 1>, shard_dim = 0 : i64} : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CHECK-DAG: "dtensor.local_split"(%{{.*}}) {mesh = @g, mesh_axes = array<i64: 0>, shard_dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x4xf32>
// CHECK-DAG: "dtensor.all_gather"(%{{.*}}) {gather_dim = 1 : i64, mesh = @g, mesh_axes = array<i64: 1>} : (tensor<8x4xf32>) -> tensor<8x8xf32>
// CHECK: return
func.func @grid(%a: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@g, "[S0, S1]">})
    -> (tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@g, "[S1, S0]">},
        tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@g, "[R, R]">}) {
  return %a, %a : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Partial kept through a residual add: both branches are Partial(sum), the
// add keeps it, and one all_reduce resolves the sum at the end.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @residual(
// CHECK: arith.addf {{.*}} : tensor<8x8xf32>
// CHECK-COUNT-1: dtensor.all_reduce
// CHECK-NOT: dtensor.all_reduce
// CHECK: return
func.func @residual(%a: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R] Psum(0)">},
                    %b: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R] Psum(0)">})
    -> (tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">}) {
  %c = arith.addf %a, %b : tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

// 1002 rows over 4 devices (blocks 251, 251, 251, 249): padded local types; the
// contraction over the uneven dim runs on each device's real extent,
// clamp(1002 - 251 * shard, 0, 251), computed once at the function's entry.
// (The contraction is long: gathering both inputs would cost more than one
// all_reduce of the 8x16 result.)
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @uneven(
// CHECK-SAME: %arg0: tensor<8x251xf32> {dtensor.global_shape = array<i64: 8, 1002>, dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}
// CHECK-SAME: %arg1: tensor<251x16xf32> {dtensor.global_shape = array<i64: 1002, 16>, dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}
// CHECK-SAME: -> (tensor<8x16xf32>
// CHECK-DAG: %[[C3:.*]] = arith.constant 251 : index
// CHECK-DAG: %[[C10:.*]] = arith.constant 1002 : index
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[SHARD:.*]] = "dtensor.mesh_index"() {mesh = @tp, mesh_axes = array<i64: 0>} : () -> index
// CHECK: %[[START:.*]] = arith.muli %[[SHARD]], %[[C3]] : index
// CHECK: %[[REM:.*]] = arith.subi %[[C10]], %[[START]] : index
// CHECK: %[[POS:.*]] = arith.maxsi %[[REM]], %[[C0]] : index
// CHECK: %[[REAL:.*]] = arith.minsi %[[POS]], %[[C3]] : index
// CHECK: %[[A:.*]] = tensor.extract_slice %arg0[0, 0] [8, %[[REAL]]] [1, 1] : tensor<8x251xf32> to tensor<8x?xf32>
// CHECK: %[[B:.*]] = tensor.extract_slice %arg1[0, 0] [%[[REAL]], 16] [1, 1] : tensor<251x16xf32> to tensor<?x16xf32>
// CHECK: linalg.matmul ins(%[[A]], %[[B]] : tensor<8x?xf32>, tensor<?x16xf32>) outs(%{{.*}} : tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK: "dtensor.all_reduce"
// CHECK-NOT: mesh_index
// CHECK: return
func.func @uneven(%x: tensor<8x1002xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">},
                  %w: tensor<1002x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">})
    -> (tensor<8x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<8x1002xf32>, tensor<1002x16xf32>) outs(%i : tensor<8x16xf32>) -> tensor<8x16xf32>
  %a = linalg.add ins(%y, %y : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %a : tensor<8x16xf32>
}

// -----

// Rows of 10 over 4 devices stay padded through elementwise ops and a
// parallel matmul dim: no slicing where no reduction runs over them.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @uneven_rows(
// CHECK-SAME: %arg0: tensor<3x8xf32> {dtensor.global_shape = array<i64: 10, 8>, dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}
// CHECK-SAME: -> (tensor<3x4xf32> {dtensor.global_shape = array<i64: 10, 4>, dtensor.layout = #dtensor.layout<@tp, "[S0, R]">})
// CHECK-NOT: extract_slice
// CHECK-NOT: mesh_index
// CHECK: linalg.matmul ins(%{{.*}}, %arg1 : tensor<3x8xf32>, tensor<8x4xf32>) outs(%{{.*}} : tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK-NOT: dtensor.all_
// CHECK: return
func.func @uneven_rows(%x: tensor<10x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">},
                       %w: tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">})
    -> (tensor<10x4xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}) {
  %z = arith.constant 0.0 : f32
  %r = math.exp %x : tensor<10x8xf32>
  %e = tensor.empty() : tensor<10x4xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<10x4xf32>) -> tensor<10x4xf32>
  %y = linalg.matmul ins(%r, %w : tensor<10x8xf32>, tensor<8x4xf32>) outs(%i : tensor<10x4xf32>) -> tensor<10x4xf32>
  return %y : tensor<10x4xf32>
}

// -----

// Ops that read or write at computed indices (extract, insert, slices at
// a dynamic offset) take the replicated value; one all_gather serves every
// such use (CSE does not merge dtensor ops, so the pass reuses it).
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK-LABEL: func.func @indexed(
// CHECK: %[[G:.*]] = "dtensor.all_gather"(%arg0) {gather_dim = 0 : i64, mesh = @m, mesh_axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<16x8xf32>
// CHECK-NOT: all_gather
// CHECK: tensor.extract %[[G]][%arg1, %{{.*}}] : tensor<16x8xf32>
// CHECK: tensor.insert %{{.*}} into %[[G]][%{{.*}}, %arg1] : tensor<16x8xf32>
// CHECK: tensor.extract_slice %[[G]][%arg1, 0] [4, 8] [1, 1] : tensor<16x8xf32> to tensor<4x8xf32>
// CHECK: "dtensor.local_split"
// CHECK: return
func.func @indexed(%a: tensor<16x8xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}, %i: index)
    -> (tensor<16x8xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) {
  %c1 = arith.constant 1 : index
  %s = tensor.extract %a[%i, %c1] : tensor<16x8xf32>
  %b = tensor.insert %s into %a[%c1, %i] : tensor<16x8xf32>
  %t = tensor.extract_slice %a[%i, 0] [4, 8] [1, 1] : tensor<16x8xf32> to tensor<4x8xf32>
  %u = tensor.insert_slice %t into %b[2, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<16x8xf32>
  return %u : tensor<16x8xf32>
}

// -----

// A declaration follows the calling convention too: its signature becomes
// the local types of its layouts, which the call's local operands match.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// CHECK: func.func private @kernel(tensor<2x8xf32> {dtensor.global_shape = array<i64: 8, 8>, dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}) -> (tensor<8x2xf32> {dtensor.global_shape = array<i64: 8, 8>, dtensor.layout = #dtensor.layout<@tp, "[R, S0]">})
func.func private @kernel(%x: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}) -> (tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">})
// CHECK-LABEL: func.func @caller(
// CHECK-SAME: tensor<2x8xf32>
func.func @caller(%x: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}) -> tensor<8x8xf32> {
  // CHECK-NEXT: %[[R:.*]] = call @kernel(%arg0) : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %y = func.call @kernel(%x) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  // CHECK-NEXT: return %[[R]] : tensor<8x2xf32>
  return %y : tensor<8x8xf32>
}
