// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK: rank 3: {{[0-9]+}} result elements (all results), equal to the single-device run
// CHECK: every rank's result equals the single-device run
// Pending reductions at the entry: a Partial sum argument (dtensor-run
// gives its value to the ranks at coordinate 0 of the pending axis and
// zeros to the others; a max is given by every rank) and Partial results
// (reduced over their pending axes before the check). dtensor-run reported
// such correct programs as DIFFERENT.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["dp", "tp"]} : () -> ()
func.func @partial(%x: tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R] Psum(1)">},
                   %y: tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R] Pmax(0)">},
                   %a: tensor<8x6xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S1]">},
                   %b: tensor<6x5xf32> {dtensor.layout = #dtensor.layout<@m, "[S1, R]">})
    -> (tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">},
        tensor<8x5xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R] Psum(1)">}) {
  %s = arith.addf %x, %y : tensor<8x4xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x5xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<8x5xf32>) -> tensor<8x5xf32>
  %p = linalg.matmul ins(%a, %b : tensor<8x6xf32>, tensor<6x5xf32>) outs(%c : tensor<8x5xf32>) -> tensor<8x5xf32>
  return %s, %p : tensor<8x4xf32>, tensor<8x5xf32>
}
