// A chain of 7 Megatron MLP blocks (bench/compile/gen.py's program, with
// the weights as arguments so that it runs): 14 matmuls, more than the
// exact search takes, so the refinement alone decides.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 4>, axis_names = ["a0"]} : () -> ()
func.func @model(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, R]">},
                  %w1_0: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S0]">},
                  %w2_0: tensor<256x64xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">},
                  %w1_1: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S0]">},
                  %w2_1: tensor<256x64xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">},
                  %w1_2: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S0]">},
                  %w2_2: tensor<256x64xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">},
                  %w1_3: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S0]">},
                  %w2_3: tensor<256x64xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">},
                  %w1_4: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S0]">},
                  %w2_4: tensor<256x64xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">},
                  %w1_5: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S0]">},
                  %w2_5: tensor<256x64xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">},
                  %w1_6: tensor<64x256xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S0]">},
                  %w2_6: tensor<256x64xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S0, R]">}) -> tensor<16x64xf32> {
  %z = arith.constant 0.0 : f32
  %e1_0 = tensor.empty() : tensor<16x256xf32>
  %i1_0 = linalg.fill ins(%z : f32) outs(%e1_0 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h_0 = linalg.matmul ins(%x, %w1_0 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1_0 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2_0 = tensor.empty() : tensor<16x64xf32>
  %i2_0 = linalg.fill ins(%z : f32) outs(%e2_0 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y_0 = linalg.matmul ins(%h_0, %w2_0 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2_0 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %e1_1 = tensor.empty() : tensor<16x256xf32>
  %i1_1 = linalg.fill ins(%z : f32) outs(%e1_1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h_1 = linalg.matmul ins(%y_0, %w1_1 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1_1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2_1 = tensor.empty() : tensor<16x64xf32>
  %i2_1 = linalg.fill ins(%z : f32) outs(%e2_1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y_1 = linalg.matmul ins(%h_1, %w2_1 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2_1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %e1_2 = tensor.empty() : tensor<16x256xf32>
  %i1_2 = linalg.fill ins(%z : f32) outs(%e1_2 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h_2 = linalg.matmul ins(%y_1, %w1_2 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1_2 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2_2 = tensor.empty() : tensor<16x64xf32>
  %i2_2 = linalg.fill ins(%z : f32) outs(%e2_2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y_2 = linalg.matmul ins(%h_2, %w2_2 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2_2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %e1_3 = tensor.empty() : tensor<16x256xf32>
  %i1_3 = linalg.fill ins(%z : f32) outs(%e1_3 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h_3 = linalg.matmul ins(%y_2, %w1_3 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1_3 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2_3 = tensor.empty() : tensor<16x64xf32>
  %i2_3 = linalg.fill ins(%z : f32) outs(%e2_3 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y_3 = linalg.matmul ins(%h_3, %w2_3 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2_3 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %e1_4 = tensor.empty() : tensor<16x256xf32>
  %i1_4 = linalg.fill ins(%z : f32) outs(%e1_4 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h_4 = linalg.matmul ins(%y_3, %w1_4 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1_4 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2_4 = tensor.empty() : tensor<16x64xf32>
  %i2_4 = linalg.fill ins(%z : f32) outs(%e2_4 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y_4 = linalg.matmul ins(%h_4, %w2_4 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2_4 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %e1_5 = tensor.empty() : tensor<16x256xf32>
  %i1_5 = linalg.fill ins(%z : f32) outs(%e1_5 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h_5 = linalg.matmul ins(%y_4, %w1_5 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1_5 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2_5 = tensor.empty() : tensor<16x64xf32>
  %i2_5 = linalg.fill ins(%z : f32) outs(%e2_5 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y_5 = linalg.matmul ins(%h_5, %w2_5 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2_5 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %e1_6 = tensor.empty() : tensor<16x256xf32>
  %i1_6 = linalg.fill ins(%z : f32) outs(%e1_6 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h_6 = linalg.matmul ins(%y_5, %w1_6 : tensor<16x64xf32>, tensor<64x256xf32>) outs(%i1_6 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2_6 = tensor.empty() : tensor<16x64xf32>
  %i2_6 = linalg.fill ins(%z : f32) outs(%e2_6 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y_6 = linalg.matmul ins(%h_6, %w2_6 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%i2_6 : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y_6 : tensor<16x64xf32>
}
