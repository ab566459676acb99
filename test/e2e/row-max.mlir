// RUN: dtensor-run -n 4 %s | FileCheck %s
// RUN: dtensor-opt --dtensor-spmd %s | FileCheck %s --check-prefix=IR
// CHECK: every rank's result equals the single-device run
// A max reduction over a sharded dim, pinned Partial(max) (at this size the
// cost model would rather gather the input), resolved by an all_reduce.
// IR-NOT: all_gather
// IR: "dtensor.all_reduce"({{.*}}) {mesh = @m, mesh_axes = array<i64: 1>, reduce = "max"} : (tensor<4xf32>) -> tensor<4xf32>
// IR-NEXT: "dtensor.all_gather"({{.*}}) {gather_dim = 0 : i64, mesh = @m, mesh_axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<8xf32>
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["dp", "tp"]} : () -> ()
func.func @rowmax(%x: tensor<8x64xf32> {dtensor.layout = #dtensor.layout<@m, "[S(dp), S(tp)]">})
    -> (tensor<8xf32> {dtensor.layout = #dtensor.layout<@m, "[R]">}) {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<8xf32>
  %i = linalg.fill ins(%ninf : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %m = linalg.reduce ins(%x : tensor<8x64xf32>) outs(%i : tensor<8xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.maximumf %in, %acc : f32
      linalg.yield %r : f32
    }
  %p = "dtensor.annotate"(%m) {layout = #dtensor.layout<@m, "[S(dp)] Pmax(tp)">} : (tensor<8xf32>) -> tensor<8xf32>
  return %p : tensor<8xf32>
}
