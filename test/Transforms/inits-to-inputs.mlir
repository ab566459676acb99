// dtensor-inits-to-inputs: an all-parallel generic that reads its init
// takes it as an input and writes into a tensor.empty; reductions and
// generics that do not read their init stay as they are
// (test/codegen's init-read-then-broadcast runs the case fusion broke).
// RUN: dtensor-opt %s --dtensor-inits-to-inputs | FileCheck %s
// CHECK-LABEL: func.func @reads_init(
// CHECK: %[[INIT:.*]] = linalg.fill
// CHECK: %[[E:.*]] = tensor.empty() : tensor<3xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[INIT]] : tensor<3xf32>, tensor<3xf32>) outs(%[[E]] : tensor<3xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[I:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: arith.addf %[[I]], %[[A]]
// CHECK-LABEL: func.func @reduction(
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<3x4xf32>) outs(%{{.*}} : tensor<3xf32>)
// CHECK-LABEL: func.func @writes_only(
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<3xf32>) outs(%{{.*}} : tensor<3xf32>)
func.func @reads_init(%d: tensor<3xf32>) -> tensor<3xf32> {
  %c = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<3xf32>
  %one = linalg.fill ins(%c : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%d : tensor<3xf32>) outs(%one : tensor<3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  return %p : tensor<3xf32>
}
func.func @reduction(%x: tensor<3x4xf32>, %init: tensor<3xf32>) -> tensor<3xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<3x4xf32>) outs(%init : tensor<3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  return %r : tensor<3xf32>
}
func.func @writes_only(%d: tensor<3xf32>, %init: tensor<3xf32>) -> tensor<3xf32> {
  %p = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%d : tensor<3xf32>) outs(%init : tensor<3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  return %p : tensor<3xf32>
}
