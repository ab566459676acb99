// RUN: dtensor-opt %s --split-input-file --dtensor-import-gspmd | FileCheck %s

// One mesh for all: the running products of [2,1,2] (2, 4), [1,4] (4),
// [4,1] and [2,2] (2, 4) give axes 2x2.
// CHECK: "dtensor.mesh"() {axis_names = ["g0", "g1"], shape = array<i64: 2, 2>, sym_name = "gspmd"}
// CHECK-LABEL: func.func @jax(
// CHECK-SAME: {dtensor.layout = #dtensor.layout<@gspmd, "[S0, R]">}
// CHECK-SAME: {dtensor.layout = #dtensor.layout<@gspmd, "[R, S01]">, jax.name = "w1"}
// CHECK-SAME: {dtensor.layout = #dtensor.layout<@gspmd, "[S01, R]">}
// CHECK-SAME: {dtensor.layout = #dtensor.layout<@gspmd, "[R]">}
// CHECK-SAME: -> (tensor<8x16xf32> {dtensor.layout = #dtensor.layout<@gspmd, "[S0, S1]">})
// CHECK-NOT: mhlo.sharding
func.func @jax(%x: tensor<8x16xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"},
               %w1: tensor<16x32xf32> {jax.name = "w1", mhlo.sharding = "{devices=[1,4]<=[4]}"},
               %w2: tensor<32x16xf32> {mhlo.sharding = "{devices=[4,1]0,1,2,3}"},
               %b: tensor<16xf32> {mhlo.sharding = "{replicated}"})
    -> (tensor<8x16xf32> {mhlo.sharding = "{devices=[2,2]<=[4] metadata={op_name=\"y\"}}"}) {
  return %x : tensor<8x16xf32>
}

// -----

// Uneven device splits on 8: [8] and [2,4] give axes 2x4.
// CHECK: "dtensor.mesh"() {axis_names = ["g0", "g1"], shape = array<i64: 2, 4>, sym_name = "gspmd"}
// CHECK-LABEL: func.func @eight(
// CHECK-SAME: #dtensor.layout<@gspmd, "[S01]">
// CHECK-SAME: #dtensor.layout<@gspmd, "[S0, S1]">
func.func @eight(%a: tensor<16xf32> {mhlo.sharding = "{devices=[8]<=[8]}"},
                 %b: tensor<4x8xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"}) -> tensor<16xf32> {
  return %a : tensor<16xf32>
}
