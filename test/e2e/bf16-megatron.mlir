// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK: rank 0: {{[0-9]+}} result elements (all results), equal to the single-device run
// CHECK: every rank's result equals the single-device run
// bf16 and f16 entries: the Megatron MLP in bf16 (products on BLAS in f32,
// rounded to bf16; the partial sums all_reduced in bf16), and an f16
// product accumulated into an f32 result, row-sharded.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @mixed(%x: tensor<16x64xbf16> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">},
                 %w1: tensor<64x128xbf16> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">},
                 %w2: tensor<128x64xbf16> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">},
                 %a: tensor<32x24xf16> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">},
                 %b: tensor<24x8xf16>)
    -> (tensor<16x64xbf16> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">},
        tensor<32x8xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}) {
  %z = arith.constant 0.0 : bf16
  %e1 = tensor.empty() : tensor<16x128xbf16>
  %i1 = linalg.fill ins(%z : bf16) outs(%e1 : tensor<16x128xbf16>) -> tensor<16x128xbf16>
  %h = linalg.matmul ins(%x, %w1 : tensor<16x64xbf16>, tensor<64x128xbf16>) outs(%i1 : tensor<16x128xbf16>) -> tensor<16x128xbf16>
  %e2 = tensor.empty() : tensor<16x64xbf16>
  %i2 = linalg.fill ins(%z : bf16) outs(%e2 : tensor<16x64xbf16>) -> tensor<16x64xbf16>
  %y = linalg.matmul ins(%h, %w2 : tensor<16x128xbf16>, tensor<128x64xbf16>) outs(%i2 : tensor<16x64xbf16>) -> tensor<16x64xbf16>
  %zf = arith.constant 0.0 : f32
  %e3 = tensor.empty() : tensor<32x8xf32>
  %i3 = linalg.fill ins(%zf : f32) outs(%e3 : tensor<32x8xf32>) -> tensor<32x8xf32>
  %p = linalg.matmul ins(%a, %b : tensor<32x24xf16>, tensor<24x8xf16>) outs(%i3 : tensor<32x8xf32>) -> tensor<32x8xf32>
  return %y, %p : tensor<16x64xbf16>, tensor<32x8xf32>
}
