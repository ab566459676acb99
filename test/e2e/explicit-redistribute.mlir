// RUN: dtensor-opt %s --dtensor-spmd | FileCheck %s --check-prefix=SPMD
// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK: every rank's result equals the single-device run
// Redistributes written in the global program (as DTensor's redistribute()
// call): the Partial product is reduce-scattered by the first, the second
// moves the rows' split to the columns (one all_to_all, 10 rows over 4
// devices: uneven), and partition gives each its global shape.
// SPMD: "dtensor.reduce_scatter"(%{{.*}}) {mesh = @tp, mesh_axes = array<i64: 0>, reduce = "sum", shard_dim = 0 : i64} : (tensor<10x12xf32>) -> tensor<3x12xf32>
// SPMD-NEXT: "dtensor.all_to_all"(%{{.*}}) {gather_dim = 0 : i64, mesh = @tp, mesh_axes = array<i64: 0>, shard_dim = 1 : i64} : (tensor<3x12xf32>) -> tensor<10x3xf32>
// SPMD-NOT: "dtensor.redistribute"
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @explicit(%h: tensor<10x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S(tp)]">},
                    %w: tensor<16x12xf32> {dtensor.layout = #dtensor.layout<@tp, "[S(tp), R]">})
    -> (tensor<10x12xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S(tp)]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<10x12xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<10x12xf32>) -> tensor<10x12xf32>
  %y = linalg.matmul ins(%h, %w : tensor<10x16xf32>, tensor<16x12xf32>) outs(%i : tensor<10x12xf32>) -> tensor<10x12xf32>
  %s = "dtensor.redistribute"(%y) {src = #dtensor.layout<@tp, "[R, R] Psum(tp)">, dst = #dtensor.layout<@tp, "[S(tp), R]">}
      : (tensor<10x12xf32>) -> tensor<10x12xf32>
  %t = "dtensor.redistribute"(%s) {src = #dtensor.layout<@tp, "[S(tp), R]">, dst = #dtensor.layout<@tp, "[R, S(tp)]">}
      : (tensor<10x12xf32>) -> tensor<10x12xf32>
  return %t : tensor<10x12xf32>
}
