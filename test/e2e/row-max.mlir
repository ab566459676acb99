// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK: every rank's result equals the single-device run
// A max reduction over a sharded dim: Partial(max), resolved by all_reduce.
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
  return %m : tensor<8xf32>
}
