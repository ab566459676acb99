// RUN: split-file %s %t
// RUN: dtensor-run -n 2 %t/constant.mlir | FileCheck %s
// RUN: dtensor-opt --dtensor-spmd %t/constant.mlir | FileCheck %s --check-prefix=CONST
// RUN: dtensor-run -n 2 %t/annotated.mlir | FileCheck %s
// RUN: dtensor-run -n 2 %t/result-only.mlir | FileCheck %s
// RUN: dtensor-opt --dtensor-spmd %t/result-only.mlir | FileCheck %s --check-prefix=RESULT
// RUN: dtensor-run -n 4 %t/shard.mlir | FileCheck %s
// CHECK: every rank's result equals the single-device run
// Functions whose arguments carry no layout are partitioned like any
// other: the mesh comes from their results or annotations. Such functions
// kept their global types ("'func.func' op was not partitioned: result 0
// has a dtensor.layout but no dtensor.global_shape"), as MLIR's shard
// tests of constants and of results without a sharding found.

//--- constant.mlir
// A function of constants only, its result sharded: each device slices
// its rows out of the constant.
// CONST-LABEL: func.func @c() -> (tensor<2x2xf32> {dtensor.global_shape = array<i64: 4, 2>
// CONST: "dtensor.local_split"
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @c() -> (tensor<4x2xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) {
  %c = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  return %c : tensor<4x2xf32>
}

//--- annotated.mlir
// A constant annotated inside, one result without a layout.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @c() -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  %c = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %a = "dtensor.annotate"(%c) {layout = #dtensor.layout<@m, "[R, S0]">} : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %s = arith.addf %a, %c : tensor<4x2xf32>
  return %c, %s : tensor<4x2xf32>, tensor<4x2xf32>
}

//--- result-only.mlir
// An argument without a layout, the result sharded.
// RESULT-LABEL: func.func @f(%arg0: tensor<
// RESULT-SAME: dtensor.global_shape = array<i64: 8, 4>
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @f(%x: tensor<8x4xf32>) -> (tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) {
  %e = math.exp %x : tensor<8x4xf32>
  return %e : tensor<8x4xf32>
}

//--- shard.mlir
// The same in MLIR's shard dialect: a constant sharded, then sharded back.
shard.grid @grid(shape = 2x2)
func.func @constant() -> tensor<8x16xf32> {
  %c = arith.constant dense<1.5> : tensor<8x16xf32>
  %s = shard.sharding @grid split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %c to %s : tensor<8x16xf32>
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %b = shard.shard %a to %r annotate_for_users : tensor<8x16xf32>
  %e = math.exp %b : tensor<8x16xf32>
  return %e : tensor<8x16xf32>
}
