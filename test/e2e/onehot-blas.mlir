// A one-hot embedding as people write it before they know gathers: ids
// compared with the vocabulary index, then contracted with the table in a
// linalg.generic (the ids split over 2 ranks). The one-hot loop is an
// elementwise producer of the contraction, and the pipeline fuses such
// producers into their consumers: the contraction must stay a BLAS call
// (issue 36: [B,T] one-hot x table took 40 ms as one fused loop instead of
// 2 ms), with the one-hot its own loop before it, and the result must be
// the table's rows.
// RUN: dtensor-run -n 2 --profile %t.json %s | FileCheck %s
// CHECK: every rank's result equals the single-device run
// CHECK-DAG: {{^ *[0-9.]+ +2 +[0-9.]+ +[0-9.]+%}} call dtrt_mlir_contract_f32_f32_f32 memref<4x16x64xf32>, memref<64x32xf32>, memref<4x16x32xf32> at {{.*}}onehot-blas.mlir:[[# @LINE + 18]]:8
// CHECK-DAG: {{^ *[0-9.]+ +2 +[0-9.]+ +[0-9.]+%}} linalg.generic memref<4x16xi64>, memref<4x16x64xf32> at {{.*}}onehot-blas.mlir:[[# @LINE + 4]]:9
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["dp"]} : () -> ()
func.func @embed(%ids: tensor<8x16xi64> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}, %table: tensor<64x32xf32>) -> tensor<8x16x32xf32> {
  %e = tensor.empty() : tensor<8x16x64xf32>
  %oh = linalg.generic {indexing_maps = [affine_map<(b, t, v) -> (b, t)>, affine_map<(b, t, v) -> (b, t, v)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ids : tensor<8x16xi64>) outs(%e : tensor<8x16x64xf32>) {
  ^bb0(%id: i64, %o: f32):
    %v = linalg.index 2 : index
    %vi = arith.index_cast %v : index to i64
    %eq = arith.cmpi eq, %id, %vi : i64
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %r = arith.select %eq, %one, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x16x64xf32>
  %z = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<8x16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e2 : tensor<8x16x32xf32>) -> tensor<8x16x32xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(b, t, d, v) -> (b, t, v)>, affine_map<(b, t, d, v) -> (v, d)>, affine_map<(b, t, d, v) -> (b, t, d)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%oh, %table : tensor<8x16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<8x16x32xf32>) {
  ^bb0(%a: f32, %w: f32, %acc: f32):
    %m = arith.mulf %a, %w : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x16x32xf32>
  return %r : tensor<8x16x32xf32>
}
