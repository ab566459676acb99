// RUN: dtensor-opt %s --split-input-file --verify-diagnostics --dtensor-propagate=strict=true

// Two constraints on one value at equal priority: an error naming both.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @conflict(%h: tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>) {
  %a = "dtensor.annotate"(%h) {layout = #dtensor.layout<@tp, "[S0, R]">, priority = 1 : i64} : (tensor<16x16xf32>) -> tensor<16x16xf32>
  // expected-error @+1 {{conflicting layouts for one value at equal priority 1: [R, S0] here and [S0, R] at}}
  %b = "dtensor.annotate"(%h) {layout = #dtensor.layout<@tp, "[R, S0]">, priority = 1 : i64} : (tensor<16x16xf32>) -> tensor<16x16xf32>
  return %a, %b : tensor<16x16xf32>, tensor<16x16xf32>
}

// -----

// Strict mode: every implicit redistribution is an error naming the value,
// its layout and origin, and the layout needed.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @strict(%x: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[S0, R]">},
                  %y: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, S0]">}) -> tensor<16x16xf32> {
  // expected-error @+1 {{operand 1 (%arg1) has layout [R, S0] (from argument 1 of @strict) but this op needs [S0, R]: an implicit redistribution, which strict mode forbids}}
  %s = arith.addf %x, %y : tensor<16x16xf32>
  return %s : tensor<16x16xf32>
}

// -----

// Strict mode at the return: a Partial result must be resolved.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @strict_return(%x: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R] Psum(0)">})
    -> (tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@tp, "[R, R]">}) {
  // expected-error @+1 {{'func.return' op operand 0 (%arg0) has layout [R, R] Psum(0) (from argument 0 of @strict_return) but this op needs [R, R]}}
  return %x : tensor<16x16xf32>
}

// -----

// One mesh per function.
"dtensor.mesh"() {sym_name = "a", shape = array<i64: 4>, axis_names = ["x"]} : () -> ()
"dtensor.mesh"() {sym_name = "b", shape = array<i64: 2>, axis_names = ["y"]} : () -> ()
func.func @two_meshes(%x: tensor<16x16xf32> {dtensor.layout = #dtensor.layout<@a, "[S0, R]">}) -> tensor<16x16xf32> {
  // expected-error @+1 {{the annotation is on mesh '@b' but this function is propagated on '@a'}}
  %b = "dtensor.annotate"(%x) {layout = #dtensor.layout<@b, "[S0, R]">} : (tensor<16x16xf32>) -> tensor<16x16xf32>
  return %b : tensor<16x16xf32>
}

// -----

// A partitioned program (dtensor-spmd's output) given to propagation again.
"dtensor.mesh"() {sym_name = "tp", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
// expected-error @+1 {{'func.func' op is already partitioned (result 0 has a dtensor.global_shape: its type is a device's block); dtensor-propagate and dtensor-partition take the global program}}
func.func @twice(%x: tensor<4x16xf32>) -> (tensor<4x16xf32> {dtensor.global_shape = array<i64: 16, 16>, dtensor.layout = #dtensor.layout<@tp, "[S0, R]">}) {
  return %x : tensor<4x16xf32>
}

// -----

// A collective written in the global program: it has no meaning there.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @collective(%a: tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) -> tensor<8x4xf32> {
  // expected-error @+1 {{'dtensor.all_reduce' op works on a device's block, but this is the global program}}
  %r = "dtensor.all_reduce"(%a) {mesh = @m, mesh_axes = array<i64: 0>, reduce = "sum"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
