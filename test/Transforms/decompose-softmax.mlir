// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --dtensor-decompose-softmax | FileCheck %s

// A softmax along dim 1 of a 3-D tensor: the max and the sum reduce dim 1,
// exp(x - max) and the division are elementwise; no linalg.softmax is left.
// CHECK-LABEL: func.func @middle(
// CHECK-NOT: linalg.softmax
// CHECK: %[[M:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]
// CHECK: arith.maximumf
// CHECK: %[[E:.*]] = linalg.generic {{.*}}ins(%{{.*}}, %[[M]] : tensor<2x5x3xf32>, tensor<2x3xf32>)
// CHECK: math.exp
// CHECK: %[[S:.*]] = linalg.generic {{.*}}ins(%[[E]] : tensor<2x5x3xf32>)
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}}ins(%[[E]], %[[S]] : tensor<2x5x3xf32>, tensor<2x3xf32>)
// CHECK: arith.divf
func.func @middle(%x: tensor<2x5x3xf32>) -> tensor<2x5x3xf32> {
  %e = tensor.empty() : tensor<2x5x3xf32>
  %r = linalg.softmax dimension(1) ins(%x : tensor<2x5x3xf32>) outs(%e : tensor<2x5x3xf32>) -> tensor<2x5x3xf32>
  return %r : tensor<2x5x3xf32>
}

// -----

func.func @dynamic(%x: tensor<?x8xf32>, %e: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'linalg.softmax' op has dynamic sizes; only static shapes are compiled}}
  %r = linalg.softmax dimension(1) ins(%x : tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
