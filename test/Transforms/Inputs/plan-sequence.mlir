// Inputs of apply-plan.mlir's sequence-parallel checks.
func.func @norm(%x: tensor<4x16x32xf32> {dtensor.name = "x"},
                %h: tensor<16x32xf32> {dtensor.name = "h"},
                %g: tensor<32xf32> {dtensor.name = "g"}) -> tensor<4x16x32xf32> {
  return %x : tensor<4x16x32xf32>
}
