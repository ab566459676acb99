// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --dtensor-verify
// Every error the verifier reports about dtensor.mesh.

func.func @f() {
  // expected-error @+1 {{'dtensor.mesh' op must be at the top level of a builtin.module}}
  "dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
  return
}

// -----

// The module's symbol table catches a second mesh of the same name.
// expected-note @+1 {{see existing symbol definition here}}
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
// expected-error @+1 {{redefinition of symbol named 'm'}}
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["y"]} : () -> ()

// -----

// expected-error @+1 {{'shape' must be an array<i64: ...> of axis sizes}}
"dtensor.mesh"() {sym_name = "m", shape = array<i32: 2>, axis_names = ["x"]} : () -> ()

// -----

// expected-error @+1 {{a mesh has 1 to 8 axes, not 0}}
"dtensor.mesh"() {sym_name = "m", shape = array<i64>, axis_names = []} : () -> ()

// -----

// expected-error @+1 {{'axis_names' must be an array of 2 strings, one per axis}}
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["x"]} : () -> ()

// -----

// expected-error @+1 {{'axis_names' entry 0 is not a string}}
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = [1 : i64]} : () -> ()

// -----

// expected-error @+1 {{mesh axis 0 has size 0; sizes must be >= 1}}
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 0>, axis_names = ["x"]} : () -> ()

// -----

// expected-error @+1 {{are both named 'x'}}
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["x", "x"]} : () -> ()

// -----

// expected-error @+1 {{'latency_us' must be an array<f64: ...> of 2 values, one per axis}}
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["x", "y"], latency_us = array<f64: 1.0>} : () -> ()

// -----

// expected-error @+1 {{'bandwidth_gbps' must be an array<f64: ...> of 1 values}}
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"], bandwidth_gbps = [1.0]} : () -> ()

// -----

// expected-error @+1 {{'device_ids' must be an array<i64: ...>}}
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"], device_ids = [0, 1]} : () -> ()

// -----

// expected-error @+1 {{device id 3 appears twice}}
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"], device_ids = array<i64: 3, 3>} : () -> ()
