// A two-layer MLP on a 2x4 mesh (dp = data parallel, tp = tensor parallel),
// annotated the way a user writes it: layouts on the arguments and results,
// one sharding constraint in the middle. Global shapes throughout.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 4>,
                  axis_names = ["dp", "tp"],
                  latency_us = array<f64: 5.0, 1.0>,
                  bandwidth_gbps = array<f64: 25.0, 300.0>} : () -> ()

func.func @mlp(%x: tensor<64x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">},
               %w1: tensor<512x1024xf32> {dtensor.layout = #dtensor.layout<@mesh, "[R, S(tp)]">},
               %w2: tensor<1024x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(tp), R]">})
    -> (tensor<64x512xf32> {dtensor.layout = #dtensor.layout<@mesh, "[S(dp), R]">}) {
  %z0 = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64x1024xf32>
  %i1 = linalg.fill ins(%z0 : f32) outs(%e1 : tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<64x512xf32>, tensor<512x1024xf32>)
                     outs(%i1 : tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %hs = "dtensor.annotate"(%h) {layout = #dtensor.layout<@mesh, "[S(dp), S(tp)]">, priority = 1 : i64}
      : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %e2 = tensor.empty() : tensor<64x512xf32>
  %i2 = linalg.fill ins(%z0 : f32) outs(%e2 : tensor<64x512xf32>) -> tensor<64x512xf32>
  %y = linalg.matmul ins(%hs, %w2 : tensor<64x1024xf32>, tensor<1024x512xf32>)
                     outs(%i2 : tensor<64x512xf32>) -> tensor<64x512xf32>
  return %y : tensor<64x512xf32>
}
