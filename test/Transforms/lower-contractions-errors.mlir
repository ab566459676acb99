// RUN: dtensor-opt %s --verify-diagnostics --dtensor-lower-contractions

// The pass works on memrefs: a contraction still on tensors is named.
func.func @on_tensors(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>, %c: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // expected-error @+1 {{'linalg.matmul' op is on tensors: dtensor-lower-contractions runs on memrefs, after one-shot-bufferize}}
  %r = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x6xf32>) outs(%c : tensor<8x6xf32>) -> tensor<8x6xf32>
  return %r : tensor<8x6xf32>
}
