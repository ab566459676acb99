// RUN: dtensor-opt %s --split-input-file --dtensor-gathers | FileCheck %s
// RUN: dtensor-opt %s --split-input-file --dtensor-gathers --dtensor-lower-gathers | FileCheck %s --check-prefix=LOW

// An embedding: the id is read from an input, the hidden dim is the loop's
// own index. The lookup becomes a dtensor.gather of the table by an i64
// index tensor over (b, t) only, read by the generic as a new input.
// CHECK-LABEL: func.func @embedding(
// CHECK-SAME: %[[W:.*]]: tensor<16x4xf32>, %[[IDS:.*]]: tensor<2x3xi64>
// CHECK: %[[I:.*]] = linalg.generic {{.*}}ins(%[[IDS]] : tensor<2x3xi64>) outs(%{{.*}} : tensor<2x3xi64>)
// CHECK: %[[G:.*]] = "dtensor.gather"(%[[W]], %[[I]]) {dims = "qc,ab->abc"} : (tensor<16x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// CHECK: linalg.generic {{.*}}ins(%[[IDS]], %[[G]] : tensor<2x3xi64>, tensor<2x3x4xf32>)
// CHECK-NOT: tensor.extract %
// The lowering: a generic over the result that checks the index's range.
// LOW-LABEL: func.func @embedding(
// LOW-NOT: dtensor.gather
// LOW: arith.cmpi sge
// LOW: arith.cmpi slt, %{{.*}}, %c16
// LOW: tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<16x4xf32>
// LOW: arith.select
func.func @embedding(%w: tensor<16x4xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %e = tensor.empty() : tensor<2x3x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(b, t, d) -> (b, t)>, affine_map<(b, t, d) -> (b, t, d)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%ids : tensor<2x3xi64>) outs(%e : tensor<2x3x4xf32>) {
  ^bb0(%id: i64, %o: f32):
    %i = arith.index_cast %id : i64 to index
    %d = linalg.index 2 : index
    %v = tensor.extract %w[%i, %d] : tensor<16x4xf32>
    linalg.yield %v : f32
  } -> tensor<2x3x4xf32>
  return %r : tensor<2x3x4xf32>
}

// -----

// A read at the loops' own indices is an input with an indexing map.
// CHECK-LABEL: func.func @plain(
// CHECK-NOT: dtensor.gather
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}]{{.*}}ins(%arg0 : tensor<3x4xf32>)
func.func @plain(%x: tensor<3x4xf32>) -> tensor<4x3xf32> {
  %e = tensor.empty() : tensor<4x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x3xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = tensor.extract %x[%j, %i] : tensor<3x4xf32>
    linalg.yield %v : f32
  } -> tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}

// -----

// tensor.gather with index elements (cast to i64), keeping the gathered
// dim as a unit (expanded back), and tosa.gather.
// CHECK-LABEL: func.func @forms(
// CHECK: arith.index_cast %arg1 : tensor<2x1xindex> to tensor<2x1xi64>
// CHECK: %[[G:.*]] = "dtensor.gather"(%arg0, %{{.*}}) {dims = "bc,a->ac"} : (tensor<9x5xf32>, tensor<2xi64>) -> tensor<2x5xf32>
// CHECK: tensor.expand_shape %[[G]] {{\[}}[0, 1], [2]] output_shape [2, 1, 5]
// CHECK: "dtensor.gather"(%arg2, %arg3) {dims = "nkc,nw->nwc"} : (tensor<1x9x5xf32>, tensor<1x3xi32>) -> tensor<1x3x5xf32>
func.func @forms(%w: tensor<9x5xf32>, %i: tensor<2x1xindex>, %v: tensor<1x9x5xf32>, %j: tensor<1x3xi32>) -> (tensor<2x1x5xf32>, tensor<1x3x5xf32>) {
  %g = tensor.gather %w[%i] gather_dims([0]) : (tensor<9x5xf32>, tensor<2x1xindex>) -> tensor<2x1x5xf32>
  %t = tosa.gather %v, %j : (tensor<1x9x5xf32>, tensor<1x3xi32>) -> tensor<1x3x5xf32>
  return %g, %t : tensor<2x1x5xf32>, tensor<1x3x5xf32>
}

// -----

// An index read from the accumulator cannot be computed ahead: the
// extract stays.
// CHECK-LABEL: func.func @from_accumulator(
// CHECK-NOT: dtensor.gather
// CHECK: tensor.extract %arg0
func.func @from_accumulator(%x: tensor<3x4xf32>, %init: tensor<3xi64>) -> tensor<3xi64> {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]} outs(%init : tensor<3xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %k = arith.index_cast %o : i64 to index
    %v = tensor.extract %x[%i, %k] : tensor<3x4xf32>
    %r = arith.fptosi %v : f32 to i64
    linalg.yield %r : i64
  } -> tensor<3xi64>
  return %r : tensor<3xi64>
}

// -----

// The scatter_add lowering: loops over the updates, the in-range ones added.
// LOW-LABEL: func.func @scatter(
// LOW: scf.for %{{.*}} = %c0 to %c3 step %c1 iter_args(%[[A:.*]] = %arg0)
// LOW: scf.for
// LOW: scf.if
// LOW: arith.addf
// LOW: tensor.insert
func.func @scatter(%d: tensor<8x4xf32>, %i: tensor<3xi64>, %u: tensor<3x4xf32>) -> tensor<8x4xf32> {
  %s = "dtensor.scatter_add"(%d, %i, %u) {dims = "vd,b,bd->vd"} : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf32>) -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}
