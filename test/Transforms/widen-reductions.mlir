// RUN: dtensor-opt %s --dtensor-widen-reductions --split-input-file | FileCheck %s
// RUN: dtensor-opt %s --split-input-file --pass-pipeline='builtin.module(dtensor-to-llvm)' | FileCheck %s --check-prefix=REORDER
// RUN: dtensor-opt %s --split-input-file --pass-pipeline='builtin.module(dtensor-to-llvm{exact-reductions=true})' | FileCheck %s --check-prefix=EXACT
// RUN: not dtensor-opt %s --pass-pipeline='builtin.module(dtensor-to-llvm{exact=1})' 2>&1 | FileCheck %s --check-prefix=BAD
// dtensor-widen-reductions: a sum reduced into f16 or bf16 accumulates in
// f32, rounded once for its users. dtensor-to-llvm lets float sums be
// reordered (fastmath reassoc) unless exact-reductions=true.
// BAD: 'dtensor-to-llvm' option 'exact=1': expected exact-reductions=true|false

// CHECK-LABEL: func.func @sum_f16
// CHECK: %[[W:.*]] = arith.extf %{{.*}} : tensor<4xf16> to tensor<4xf32>
// CHECK: %[[R:.*]] = linalg.generic {{.*}} outs(%[[W]] : tensor<4xf32>)
// CHECK: ^bb0(%[[IN:.*]]: f16, %[[ACC:.*]]: f32):
// CHECK: %[[X:.*]] = arith.extf %[[IN]] : f16 to f32
// CHECK: arith.addf %[[ACC]], %[[X]] : f32
// CHECK: %[[T:.*]] = arith.truncf %[[R]] : tensor<4xf32> to tensor<4xf16>
// CHECK: return %[[T]]
// REORDER-LABEL: llvm.func @sum_f16
// REORDER: llvm.fadd {{.*}}reassoc
// EXACT-LABEL: llvm.func @sum_f16
// EXACT-NOT: reassoc
func.func @sum_f16(%x: tensor<4x64xf16>, %init: tensor<4xf16>) -> tensor<4xf16> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x64xf16>) outs(%init : tensor<4xf16>) {
  ^bb0(%in: f16, %acc: f16):
    %s = arith.addf %acc, %in : f16
    linalg.yield %s : f16
  } -> tensor<4xf16>
  return %r : tensor<4xf16>
}

// -----

// A max, an f32 sum and a body that reads its accumulator twice keep
// their types.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: arith.extf
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @kept(%x: tensor<4x64xbf16>, %i: tensor<4xbf16>, %y: tensor<4x64xf32>, %j: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>, tensor<4xbf16>) {
  %m = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x64xbf16>) outs(%i : tensor<4xbf16>) {
  ^bb0(%in: bf16, %acc: bf16):
    %s = arith.maximumf %acc, %in : bf16
    linalg.yield %s : bf16
  } -> tensor<4xbf16>
  %f = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%y : tensor<4x64xf32>) outs(%j : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x64xbf16>) outs(%i : tensor<4xbf16>) {
  ^bb0(%in: bf16, %acc: bf16):
    %p = arith.mulf %acc, %in : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  } -> tensor<4xbf16>
  return %m, %f, %t : tensor<4xbf16>, tensor<4xf32>, tensor<4xbf16>
}
