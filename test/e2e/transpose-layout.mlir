// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK: every rank's result equals the single-device run
// [S0, S1] -> [S1, S0] on a 2x2 grid, with an elementwise op and a
// transpose in between (all_gather, all_to_all, local_split).
"dtensor.mesh"() {sym_name = "g", shape = array<i64: 2, 2>, axis_names = ["x", "y"]} : () -> ()
func.func @f(%a: tensor<8x12xf32> {dtensor.layout = #dtensor.layout<@g, "[S0, S1]">})
    -> (tensor<12x8xf32> {dtensor.layout = #dtensor.layout<@g, "[S0, R]">}) {
  %b = math.exp %a : tensor<8x12xf32>
  %e = tensor.empty() : tensor<12x8xf32>
  %t = linalg.transpose ins(%b : tensor<8x12xf32>) outs(%e : tensor<12x8xf32>) permutation = [1, 0]
  return %t : tensor<12x8xf32>
}
