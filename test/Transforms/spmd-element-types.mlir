// RUN: dtensor-opt %s --dtensor-spmd --verify-diagnostics
// A sharded program on an element type layouts do not carry (i4) is
// refused naming the type, not as if propagation had been skipped.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @f(%a: tensor<4x8xi32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) -> tensor<4x8xi32> {
  // expected-error @+1 {{'arith.trunci' op has a result of element type i4, which dtensor-propagate does not lay out (it lays out f32, f64, f16, bf16, f8E4M3FN, f8E5M2, i1, i8, i16, i32, i64 and ui8): a program on sharded i4 values is not supported}}
  %t = arith.trunci %a : tensor<4x8xi32> to tensor<4x8xi4>
  %b = arith.extsi %t : tensor<4x8xi4> to tensor<4x8xi32>
  return %b : tensor<4x8xi32>
}
