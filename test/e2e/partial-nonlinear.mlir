// RUN: split-file %s %t
// RUN: dtensor-run -n 2 %t/square.mlir | FileCheck %s
// RUN: dtensor-opt --dtensor-spmd %t/square.mlir | FileCheck %s --check-prefix=SQUARE
// RUN: dtensor-run -n 2 %t/scaled.mlir | FileCheck %s
// RUN: dtensor-opt --dtensor-spmd %t/scaled.mlir | FileCheck %s --check-prefix=SCALED
// RUN: dtensor-run -n 2 %t/linear.mlir | FileCheck %s
// RUN: dtensor-opt --dtensor-spmd %t/linear.mlir | FileCheck %s --check-prefix=LINEAR
// CHECK: every rank's result equals the single-device run
// What a Partial sum may pass through. A body is linear in a Partial
// operand only where every product has one factor the same on every
// device and the other itself linear: (y * y) * 0.5 is not, so y is
// reduced before the square (it was not: max abs error 905). A loop split
// over devices may be combined only when its body is acc (+) f(inputs):
// acc * 0.5 + x is not, so the rows are gathered (it was summed as parts).
// (x * 2 - y) / 4 summed into acc is linear: it runs on the Partial shares
// and one scalar is reduced after it.

//--- square.mlir
// SQUARE: linalg.matmul
// SQUARE: "dtensor.{{all_reduce|all_gather|reduce_scatter}}"
// SQUARE: linalg.generic
// SQUARE-NOT: "dtensor.all_reduce"
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["tp"]} : () -> ()
func.func @f(%x: tensor<16x1024xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">},
             %w: tensor<1024x16xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %ye = tensor.empty() : tensor<16x16xf32>
  %yz = linalg.fill ins(%zero : f32) outs(%ye : tensor<16x16xf32>) -> tensor<16x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<16x1024xf32>, tensor<1024x16xf32>) outs(%yz : tensor<16x16xf32>) -> tensor<16x16xf32>
  %le = tensor.empty() : tensor<f32>
  %lz = linalg.fill ins(%zero : f32) outs(%le : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%y : tensor<16x16xf32>) outs(%lz : tensor<f32>) {
  ^bb0(%v: f32, %a: f32):
    %half = arith.constant 0.5 : f32
    %q = arith.mulf %v, %v : f32
    %r = arith.mulf %q, %half : f32
    %s = arith.addf %a, %r : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

//--- scaled.mlir
// SCALED: "dtensor.all_gather"
// SCALED-NOT: "dtensor.all_reduce"
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["tp"]} : () -> ()
func.func @f(%x: tensor<64x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">})
    -> (tensor<4xf32> {dtensor.layout = #dtensor.layout<@m, "[R]">}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>], iterator_types = ["reduction", "parallel"]} ins(%x : tensor<64x4xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%v: f32, %a: f32):
    %half = arith.constant 0.5 : f32
    %h = arith.mulf %a, %half : f32
    %s = arith.addf %h, %v : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %l : tensor<4xf32>
}

//--- linear.mlir
// LINEAR: %[[Y:.*]] = linalg.matmul
// LINEAR: %[[L:.*]] = linalg.generic {{.*}} ins(%[[Y]]
// LINEAR: "dtensor.all_reduce"(%[[L]])
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["tp"]} : () -> ()
func.func @f(%x: tensor<16x1024xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">},
             %w: tensor<1024x16xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %ye = tensor.empty() : tensor<16x16xf32>
  %yz = linalg.fill ins(%zero : f32) outs(%ye : tensor<16x16xf32>) -> tensor<16x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<16x1024xf32>, tensor<1024x16xf32>) outs(%yz : tensor<16x16xf32>) -> tensor<16x16xf32>
  %le = tensor.empty() : tensor<f32>
  %lz = linalg.fill ins(%zero : f32) outs(%le : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%y : tensor<16x16xf32>) outs(%lz : tensor<f32>) {
  ^bb0(%v: f32, %a: f32):
    %two = arith.constant 2.0 : f32
    %four = arith.constant 4.0 : f32
    %d = arith.mulf %two, %v : f32
    %t = arith.subf %d, %v : f32
    %q = arith.divf %t, %four : f32
    %s = arith.addf %a, %q : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
