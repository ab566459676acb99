// RUN: dtensor-opt %s --dtensor-reassociate-reductions | FileCheck %s

// The float sum a reduction yields may be reordered; the elementwise ops
// before it, and the elementwise generic, keep their flags.
// CHECK-LABEL: func.func @sums(
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : f32
// CHECK: arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NOT: reassoc
func.func @sums(%x: tensor<8x16xf32>, %acc: tensor<8xf32>, %y: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<8x16xf32>) {
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<8x16xf32>) outs(%acc : tensor<8xf32>) {
  ^bb0(%v: f32, %a: f32):
    %q = arith.mulf %v, %v : f32
    %r = arith.addf %a, %q fastmath<contract> : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x16xf32>) outs(%y : tensor<8x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  return %s, %e : tensor<8xf32>, tensor<8x16xf32>
}
