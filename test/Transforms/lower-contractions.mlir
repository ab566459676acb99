// RUN: dtensor-opt %s --split-input-file --pass-pipeline="builtin.module(dtensor-prepare-contractions, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, dtensor-lower-contractions)" | FileCheck %s

// A matmul whose output starts as zeros: one call that overwrites C (the
// fill goes), its maps (3 loops; A reads m,k; B k,n; C m,n) in a global.
// CHECK-DAG: memref.global "private" constant @__dtensor_contract_3_0_2_2_1_0_1 : memref<7xi64> = dense<[3, 0, 2, 2, 1, 0, 1]>
// CHECK-LABEL: func.func @matmul(
// CHECK-NOT: linalg.fill
// CHECK: %[[OVERWRITE:.*]] = arith.constant 1 : i64
// CHECK: call @dtrt_mlir_contract_f32_f32_f32(%[[OVERWRITE]],
// CHECK-NOT: linalg.matmul
// CHECK: func.func private @dtrt_mlir_contract_f32_f32_f32(i64, memref<*xi64>, memref<*xf32>, memref<*xf32>, memref<*xf32>)
func.func @matmul(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>) -> tensor<8x6xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x6xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<8x6xf32>) -> tensor<8x6xf32>
  %r = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x6xf32>) outs(%c : tensor<8x6xf32>) -> tensor<8x6xf32>
  return %r : tensor<8x6xf32>
}

// -----

// An accumulating batched product, B transposed: C += A·B (overwrite 0),
// the batch loop in all three operands.
// CHECK-DAG: memref.global "private" constant @__dtensor_contract_4_0_1_3_0_2_3_0_1_2 : memref<10xi64>
// CHECK-LABEL: func.func @batch_transposed(
// CHECK: %[[ACCUMULATE:.*]] = arith.constant 0 : i64
// CHECK: call @dtrt_mlir_contract_f32_f32_f32(%[[ACCUMULATE]],
func.func @batch_transposed(%a: tensor<2x8x4xf32>, %b: tensor<2x6x4xf32>, %c: tensor<2x8x6xf32>) -> tensor<2x8x6xf32> {
  %r = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%a, %b : tensor<2x8x4xf32>, tensor<2x6x4xf32>) outs(%c : tensor<2x8x6xf32>) -> tensor<2x8x6xf32>
  return %r : tensor<2x8x6xf32>
}

// -----

// bf16 inputs accumulated in an f32 output.
// CHECK-LABEL: func.func @bf16(
// CHECK: call @dtrt_mlir_contract_bf16_bf16_f32(
func.func @bf16(%a: tensor<8x4xbf16>, %b: tensor<4x6xbf16>, %c: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<8x4xbf16>, tensor<4x6xbf16>) outs(%c : tensor<8x6xf32>) -> tensor<8x6xf32>
  return %r : tensor<8x6xf32>
}

// -----

// Integers stay generated loops.
// CHECK-LABEL: func.func @integers(
// CHECK: linalg.matmul
// CHECK-NOT: dtrt_mlir_contract
func.func @integers(%a: tensor<8x4xi32>, %b: tensor<4x6xi32>, %c: tensor<8x6xi32>) -> tensor<8x6xi32> {
  %r = linalg.matmul ins(%a, %b : tensor<8x4xi32>, tensor<4x6xi32>) outs(%c : tensor<8x6xi32>) -> tensor<8x6xi32>
  return %r : tensor<8x6xi32>
}

// -----

// A multiply-add of exp(a), not of a: a contraction to MLIR, not to BLAS.
// CHECK-LABEL: func.func @not_plain(
// CHECK: linalg.generic
// CHECK: math.exp
// CHECK-NOT: dtrt_mlir_contract
func.func @not_plain(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>, %c: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<8x4xf32>, tensor<4x6xf32>) outs(%c : tensor<8x6xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %e = math.exp %x : f32
    %p = arith.mulf %e, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x6xf32>
  return %r : tensor<8x6xf32>
}

// -----

// One zero fill shared by two products (as cse leaves it): each gets its
// own, so both overwrite and no copy of the zeros is made.
// CHECK-LABEL: func.func @shared_fill(
// CHECK-NOT: memref.copy
// CHECK-NOT: linalg.fill
// CHECK: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK: call @dtrt_mlir_contract_f32_f32_f32(%[[ONE]],
// CHECK: %[[ONE2:.*]] = arith.constant 1 : i64
// CHECK: call @dtrt_mlir_contract_f32_f32_f32(%[[ONE2]],
func.func @shared_fill(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %h = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%c : tensor<8x8xf32>) -> tensor<8x8xf32>
  %y = linalg.matmul ins(%h, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%c : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
