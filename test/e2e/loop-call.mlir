// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK: every rank's result equals the single-device run
// A layer called in a loop: interprocedural layouts, a loop-carried value
// at a fixed point, a residual add.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @layer(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%i : tensor<8x16xf32>) -> tensor<8x16xf32>
  %s = math.tanh %h : tensor<8x16xf32>
  %r = arith.addf %s, %x : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
func.func @model(%x: tensor<8x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">},
                 %w: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">})
    -> (tensor<8x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">}) {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %c1 = arith.constant 1 : index
  %y = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %x) -> (tensor<8x16xf32>) {
    %n = func.call @layer(%acc, %w) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    scf.yield %n : tensor<8x16xf32>
  }
  return %y : tensor<8x16xf32>
}
