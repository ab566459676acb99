// RUN: dtensor-run -n 4 %s | FileCheck %s
// RUN: dtensor-opt --dtensor-spmd %s | FileCheck %s --check-prefix=IR
// CHECK-COUNT-4: result elements, equal to the single-device run
// CHECK: every rank's result equals the single-device run
// Values built from global indices (linalg.index) on sharded loops (rows
// in blocks of 5, columns unevenly in blocks of 4 and 3): each device adds
// its block offset to the loop index, so it builds its block of the same
// tensor.
// IR-DAG: %[[R:.*]] = "dtensor.mesh_index"() {mesh = @m, mesh_axes = array<i64: 0>} : () -> index
// IR-DAG: %[[C:.*]] = "dtensor.mesh_index"() {mesh = @m, mesh_axes = array<i64: 1>} : () -> index
// IR-DAG: %[[ROFF:.*]] = arith.muli %[[R]], %c5 : index
// IR-DAG: %[[COFF:.*]] = arith.muli %[[C]], %c4 : index
// IR: linalg.index 0 : index
// IR-NEXT: arith.addi %{{.*}}, %[[ROFF]] : index
// IR: linalg.index 1 : index
// IR-NEXT: arith.addi %{{.*}}, %[[COFF]] : index
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["dp", "tp"]} : () -> ()
#id = affine_map<(i, j) -> (i, j)>
func.func @iota(%x: tensor<10x7xf32> {dtensor.layout = #dtensor.layout<@m, "[S(dp), S(tp)]">})
    -> (tensor<10x7xf32> {dtensor.layout = #dtensor.layout<@m, "[S(dp), S(tp)]">}) {
  %e = tensor.empty() : tensor<10x7xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<10x7xf32>) outs(%e : tensor<10x7xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 0 : index
      %j = linalg.index 1 : index
      %c16 = arith.constant 16 : index
      %ij = arith.muli %i, %c16 : index
      %k = arith.addi %ij, %j : index
      %ki = arith.index_cast %k : index to i64
      %kf = arith.sitofp %ki : i64 to f32
      %r = arith.addf %in, %kf : f32
      linalg.yield %r : f32
  } -> tensor<10x7xf32>
  return %g : tensor<10x7xf32>
}
