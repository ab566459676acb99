// RUN: dtensor-opt %s --dtensor-prepare-contractions --linalg-fuse-elementwise-ops | FileCheck %s

// A generic contraction becomes linalg.contract with its maps, so that
// elementwise fusion leaves it whole: the scale stays its own op.
// CHECK-LABEL: func.func @scaled(
// CHECK: %[[S:.*]] = linalg.generic
// CHECK: arith.mulf
// CHECK: linalg.contract indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[S]], %{{.*}} : tensor<8x4xf32>, tensor<6x4xf32>)
// CHECK-NOT: linalg.generic
func.func @scaled(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %c: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %e = tensor.empty() : tensor<8x4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%q : tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %h = arith.constant 0.5 : f32
    %m = arith.mulf %v, %h : f32
    linalg.yield %m : f32
  } -> tensor<8x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%s, %k : tensor<8x4xf32>, tensor<6x4xf32>) outs(%c : tensor<8x6xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %a = arith.addf %o, %p : f32
    linalg.yield %a : f32
  } -> tensor<8x6xf32>
  return %r : tensor<8x6xf32>
}
