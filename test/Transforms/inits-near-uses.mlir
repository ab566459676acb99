// cse merges the fills of a program's layers into one; bufferization then
// keeps that fill from its first user to its last (each user before the
// last writes into a copy). Under a memory budget dtensor-inits-near-uses
// gives each user its own fill right before it: the peak drops by the
// fill's bytes. Without one (no memory=, no dtensor.memory on the
// function) the program stays as it is.
// RUN: dtensor-opt %s --dtensor-inits-near-uses=memory=1MB | FileCheck %s
// RUN: sed 's/@layers(/@layers(/; s/-> tensor<8x8xf32> {$/-> tensor<8x8xf32> attributes {dtensor.memory = 1280 : i64} {/' %s | dtensor-opt --dtensor-inits-near-uses | FileCheck %s
// RUN: dtensor-opt %s --dtensor-inits-near-uses | FileCheck %s --check-prefix=NONE
// RUN: dtensor-opt %s --dtensor-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=BEFORE
// RUN: dtensor-opt %s --dtensor-inits-near-uses=memory=1MB --dtensor-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=AFTER
// NONE-COUNT-1: linalg.fill
// CHECK-LABEL: func.func @layers(
// CHECK: %[[E:.*]] = tensor.empty()
// CHECK-NEXT: %[[F1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]]
// CHECK-NEXT: %[[A:.*]] = linalg.matmul ins(%arg0, %arg1 : {{.*}}) outs(%[[F1]] :
// CHECK-NEXT: %[[T:.*]] = math.tanh %[[A]]
// CHECK-NEXT: %[[F2:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]]
// CHECK-NEXT: linalg.matmul ins(%[[T]], %arg2 : {{.*}}) outs(%[[F2]] :
// CHECK-NOT: linalg.fill
// BEFORE: peak 1536 bytes
// AFTER: peak 1280 bytes
func.func @layers(%x: tensor<8x8xf32>, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %t = math.tanh %a : tensor<8x8xf32>
  %b = linalg.matmul ins(%t, %w2 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %b : tensor<8x8xf32>
}
