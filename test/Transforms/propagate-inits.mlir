// RUN: dtensor-opt %s --dtensor-propagate --split-input-file | FileCheck %s
// RUN: dtensor-opt %s --dtensor-spmd --split-input-file | FileCheck %s --check-prefix=SPMD

// Values that only initialize are made once per use: one zero fill shared
// by two matmuls that want it by rows and by columns gives each its own,
// and no collective moves zeros (before: an all_to_all of the fill).
// CHECK-LABEL: func.func @shared_fill
// CHECK-DAG: linalg.fill {dtensor.layout = #dtensor.layout<@m, "[S0, R]">
// CHECK-DAG: linalg.fill {dtensor.layout = #dtensor.layout<@m, "[R, S0]">
// CHECK-NOT: dtensor.redistribute
// CHECK: return
// SPMD-LABEL: func.func @shared_fill
// SPMD-NOT: dtensor.all_to_all
// SPMD-NOT: dtensor.all_gather
// SPMD: return
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["d"]} : () -> ()
func.func @shared_fill(%x: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">},
             %w: tensor<64x16xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">},
             %y: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">},
             %v: tensor<64x16xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d)]">})
    -> (tensor<16x16xf32>, tensor<16x16xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %a = linalg.matmul ins(%x, %w : tensor<16x64xf32>, tensor<64x16xf32>) outs(%f : tensor<16x16xf32>) -> tensor<16x16xf32>
  %b = linalg.matmul ins(%y, %v : tensor<16x64xf32>, tensor<64x16xf32>) outs(%f : tensor<16x16xf32>) -> tensor<16x16xf32>
  return %a, %b : tensor<16x16xf32>, tensor<16x16xf32>
}

// -----

// A constant, and an empty tensor that is the init of ops inside a loop:
// the copies are made where the original is, never inside the loop.
// CHECK-LABEL: func.func @shared_constant
// CHECK-DAG: arith.constant {dtensor.layout = #dtensor.layout<@m, "[S0]">} dense<1.000000e+00>
// CHECK-DAG: arith.constant {dtensor.layout = #dtensor.layout<@m, "[R]">} dense<1.000000e+00>
// CHECK-DAG: tensor.empty() {dtensor.layout = #dtensor.layout<@m, "[S0]">}
// CHECK-DAG: tensor.empty() {dtensor.layout = #dtensor.layout<@m, "[R]">}
// CHECK: scf.for
// CHECK-NOT: tensor.empty
// CHECK-NOT: arith.constant {{.*}}dense
// CHECK: scf.yield
// SPMD-LABEL: func.func @shared_constant
// SPMD-NOT: dtensor.all_gather
// SPMD: return
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["d"]} : () -> ()
func.func @shared_constant(%x: tensor<16xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d)]">},
                           %y: tensor<16xf32> {dtensor.layout = #dtensor.layout<@m, "[R]">})
    -> (tensor<16xf32>, tensor<16xf32>) {
  %one = arith.constant dense<1.0> : tensor<16xf32>
  %e = tensor.empty() : tensor<16xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r:2 = scf.for %i = %c0 to %c3 step %c1 iter_args(%p = %x, %q = %y) -> (tensor<16xf32>, tensor<16xf32>) {
    %a = linalg.add ins(%p, %one : tensor<16xf32>, tensor<16xf32>) outs(%e : tensor<16xf32>) -> tensor<16xf32>
    %b = linalg.add ins(%q, %one : tensor<16xf32>, tensor<16xf32>) outs(%e : tensor<16xf32>) -> tensor<16xf32>
    scf.yield %a, %b : tensor<16xf32>, tensor<16xf32>
  }
  return %r#0, %r#1 : tensor<16xf32>, tensor<16xf32>
}
