// RUN: dtensor-opt %s --dtensor-spmd | FileCheck %s

// A dim near INT64_MAX (i8, so its bytes fit in 64 bits): each device's
// block is ceil(n / 2), computed without the (n + k - 1) / k overflow that
// gave a negative tensor type.
// CHECK-LABEL: func.func @huge(
// CHECK-SAME: tensor<4611686018427387904xi8>
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @huge(%a: tensor<9223372036854775807xi8> {dtensor.layout = #dtensor.layout<@m, "[S0]">}) -> tensor<9223372036854775807xi8> {
  return %a : tensor<9223372036854775807xi8>
}
