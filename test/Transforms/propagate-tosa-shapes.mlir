// RUN: dtensor-opt %s --dtensor-propagate | FileCheck %s
// RUN: dtensor-opt %s --dtensor-spmd | FileCheck %s --check-prefix=SPMD
// RUN: dtensor-run -n 4 %s | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
//
// tosa.reshape and tosa.slice have rules: a reshape's dims split into
// groups of equal size (12 = 3 x 4 is a compound dim, as for
// expand_shape), a slice shards the dims it takes whole. Partition gives
// each a tosa.const_shape of its local result's dims.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["d"]} : () -> ()
// CHECK-LABEL: func.func @shapes
// CHECK: tosa.reshape {{.*}}dtensor.layout = #dtensor.layout<@m, "[S0, R, R]">, dtensor.operand_layouts = [#dtensor.layout<@m, "[S0, R]">, unit]
// CHECK: tosa.slice {{.*}}dtensor.layout = #dtensor.layout<@m, "[S0, R]">, dtensor.operand_layouts = [#dtensor.layout<@m, "[S0, R]">, unit, unit]
// CHECK: tosa.reshape {{.*}}dtensor.layout = #dtensor.layout<@m, "[S0]">
// CHECK: tosa.reshape {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, S0]">, dtensor.operand_layouts = [#dtensor.layout<@m, "[R, S0, R]">, unit]
// SPMD-LABEL: func.func @shapes
// SPMD-NOT: dtensor.all_
// SPMD-DAG: tosa.const_shape {values = dense<[2, 3, 4]> : tensor<3xindex>}
// SPMD-DAG: tosa.const_shape {values = dense<[2, 6]> : tensor<2xindex>}
// SPMD-DAG: tosa.const_shape {values = dense<24> : tensor<1xindex>}
// SPMD-DAG: tosa.const_shape {values = dense<[8, 12]> : tensor<2xindex>}
// SPMD: return
func.func @shapes(%x: tensor<8x12xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">},
                  %z: tensor<8x16x3xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d), R]">})
    -> (tensor<8x3x4xf32>, tensor<8x6xf32>, tensor<96xf32>, tensor<8x48xf32>) {
  %s = tosa.const_shape {values = dense<[8, 3, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %r = tosa.reshape %x, %s : (tensor<8x12xf32>, !tosa.shape<3>) -> tensor<8x3x4xf32>
  %st = tosa.const_shape {values = dense<[0, 2]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %sz = tosa.const_shape {values = dense<[8, 6]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %l = tosa.slice %x, %st, %sz : (tensor<8x12xf32>, !tosa.shape<2>, !tosa.shape<2>) -> tensor<8x6xf32>
  %f = tosa.const_shape {values = dense<[96]> : tensor<1xindex>} : () -> !tosa.shape<1>
  %flat = tosa.reshape %x, %f : (tensor<8x12xf32>, !tosa.shape<1>) -> tensor<96xf32>
  %g = tosa.const_shape {values = dense<[8, 48]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %m = tosa.reshape %z, %g : (tensor<8x16x3xf32>, !tosa.shape<2>) -> tensor<8x48xf32>
  return %r, %l, %flat, %m : tensor<8x3x4xf32>, tensor<8x6xf32>, tensor<96xf32>, tensor<8x48xf32>
}
