// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --dtensor-lower-redistribute
// RUN: not dtensor-opt %s --split-input-file --dtensor-lower-redistribute 2>&1 | FileCheck %s

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @global_form(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // CHECK: lower-redistribute-errors.mlir:[[@LINE+2]]:8: error: 'dtensor.redistribute' op has no 'global_shape'
  // expected-error @+1 {{has no 'global_shape': it is still in a global program}}
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S0, R]">, dst = #dtensor.layout<@mesh, "[R, R]">}
      : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @change_kind(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{Partial(sum) cannot become Partial(max)}}
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[R, R] Psum(0)">, dst = #dtensor.layout<@mesh, "[R, R] Pmax(0)">, global_shape = array<i64: 8, 8>}
      : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// Two failures in one function: both are reported.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2, 2>, axis_names = ["x", "y"]} : () -> ()
func.func @two(%a: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  // expected-error @+1 {{reductions of different kinds do not convert}}
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[R, R] Pmin(0)">, dst = #dtensor.layout<@mesh, "[R, R] Pmax(0)">, global_shape = array<i64: 8, 8>}
      : (tensor<8x8xf32>) -> tensor<8x8xf32>
  // expected-error @+1 {{different reduce kinds}}
  %s = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[R, R] Psum(0) Pmax(1)">, dst = #dtensor.layout<@mesh, "[R, R]">, global_shape = array<i64: 8, 8>}
      : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r, %s : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A malformed spec is caught by the verifier before the pass body.
"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @bad_spec(%a: tensor<2x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{dst: mesh axis 1 (sharding dim 0) is out of range}}
  %r = "dtensor.redistribute"(%a) {src = #dtensor.layout<@mesh, "[S0, R]">, dst = #dtensor.layout<@mesh, "[S1, R]">, global_shape = array<i64: 8, 8>}
      : (tensor<2x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}
