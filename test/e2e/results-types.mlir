// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK: rank 0: {{[0-9]+}} result elements (all results), equal to the single-device run
// CHECK: every rank's result equals the single-device run
// Two results of two element types on a 2x2 mesh: an f64 matmul whose
// contraction dim is sharded (Partial, resolved for the row-sharded
// result) and an i32 matmul with uneven shards (7 rows, contraction 5 over
// 2), compared exactly.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["dp", "tp"]} : () -> ()
func.func @two(%a: tensor<6x8xf64> {dtensor.layout = #dtensor.layout<@m, "[S0, S1]">},
               %b: tensor<8x5xf64> {dtensor.layout = #dtensor.layout<@m, "[S1, R]">},
               %x: tensor<7x5xi32> {dtensor.layout = #dtensor.layout<@m, "[R, S0]">},
               %y: tensor<5x3xi32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">})
    -> (tensor<6x5xf64> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">},
        tensor<7x3xi32> {dtensor.layout = #dtensor.layout<@m, "[S1, R]">}) {
  %z = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<6x5xf64>
  %i = linalg.fill ins(%z : f64) outs(%e : tensor<6x5xf64>) -> tensor<6x5xf64>
  %c = linalg.matmul ins(%a, %b : tensor<6x8xf64>, tensor<8x5xf64>) outs(%i : tensor<6x5xf64>) -> tensor<6x5xf64>
  %zi = arith.constant 0 : i32
  %ei = tensor.empty() : tensor<7x3xi32>
  %ii = linalg.fill ins(%zi : i32) outs(%ei : tensor<7x3xi32>) -> tensor<7x3xi32>
  %d = linalg.matmul ins(%x, %y : tensor<7x5xi32>, tensor<5x3xi32>) outs(%ii : tensor<7x3xi32>) -> tensor<7x3xi32>
  return %c, %d : tensor<6x5xf64>, tensor<7x3xi32>
}
