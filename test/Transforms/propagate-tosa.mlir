// RUN: dtensor-opt %s --dtensor-propagate | FileCheck %s
// RUN: dtensor-opt %s --dtensor-propagate=choice=order | FileCheck %s --check-prefix=ORDER
// RUN: dtensor-run -n 4 %s | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
//
// tosa ops have rules (einsum rules made from each op, RulesTosa.c):
// a batched matmul sharded on its contraction is Partial(sum); a reduce_max
// of a sharded axis is Partial(max); a transpose moves the shard with its
// dim; a broadcast operand (1x1x8) stays replicated; the concat axis is
// whole (and a concat of two Partials stays Partial). And the per-device program runs: tosa lowers through linalg in
// dtensor-to-llvm.
// In program order (ORDER) each of those shows. The whole function's
// choice (CHECK) sees that one all_reduce of the matmul's small result
// serves tanh, reduce_max and concat, where program order resolves three
// Partials (3 all_reduce).
// CHECK-LABEL: func.func @t
// CHECK: tosa.matmul {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, R, R] Psum(0)">
// CHECK: tosa.add {{.*}}dtensor.operand_layouts = [#dtensor.layout<@m, "[R, R, R]">, #dtensor.layout<@m, "[R, R, R]">]
// CHECK: tosa.tanh {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, R, R]">
// CHECK: tosa.reduce_max {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, R, R]">
// CHECK: tosa.transpose {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, S0, R]">
// CHECK: tosa.concat {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, R, R]">
// ORDER-LABEL: func.func @t
// ORDER: tosa.matmul {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, R, R] Psum(0)">
// ORDER: tosa.add {{.*}}dtensor.operand_layouts = [#dtensor.layout<@m, "[R, R, R]">, #dtensor.layout<@m, "[R, R, R]">]
// ORDER: tosa.tanh {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, S0, R]">
// ORDER: tosa.reduce_max {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, R, R] Pmax(0)">
// ORDER: tosa.transpose {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, S0, R]">
// ORDER: tosa.concat {{.*}}dtensor.layout = #dtensor.layout<@m, "[R, R, R] Psum(0)">
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["d"]} : () -> ()
func.func @t(%x: tensor<2x16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R, S(d)]">},
             %w: tensor<2x32x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d), R]">},
             %b: tensor<1x1x8xf32>)
    -> (tensor<2x16x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d), R]">}, tensor<2x1x8xf32>, tensor<8x16x2xf32>, tensor<2x32x8xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.matmul %x, %w, %zp, %zp : (tensor<2x16x32xf32>, tensor<2x32x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x16x8xf32>
  %a = tosa.add %y, %b : (tensor<2x16x8xf32>, tensor<1x1x8xf32>) -> tensor<2x16x8xf32>
  %t = tosa.tanh %a : (tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  %s = tosa.reduce_max %t {axis = 1 : i32} : (tensor<2x16x8xf32>) -> tensor<2x1x8xf32>
  %p = tosa.transpose %t {perms = array<i32: 2, 1, 0>} : (tensor<2x16x8xf32>) -> tensor<8x16x2xf32>
  %c = tosa.concat %y, %y {axis = 1 : i32} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> tensor<2x32x8xf32>
  return %t, %s, %p, %c : tensor<2x16x8xf32>, tensor<2x1x8xf32>, tensor<8x16x2xf32>, tensor<2x32x8xf32>
}

// A transpose that moves the sharded dim, and an elementwise op whose
// second operand broadcasts along the sharded dim.
// CHECK-LABEL: func.func @moves
// CHECK: tosa.transpose {{.*}}dtensor.layout = #dtensor.layout<@m, "[S0, R, R]">
// CHECK: tosa.mul {{.*}}dtensor.operand_layouts = [#dtensor.layout<@m, "[S0, R, R]">, #dtensor.layout<@m, "[R, R, R]">, #dtensor.layout<@m, "[R]">]
func.func @moves(%x: tensor<2x16x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d), R]">},
                 %s: tensor<1x2x8xf32>) -> tensor<16x2x8xf32> {
  %t = tosa.transpose %x {perms = array<i32: 1, 0, 2>} : (tensor<2x16x8xf32>) -> tensor<16x2x8xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %m = tosa.mul %t, %s, %shift : (tensor<16x2x8xf32>, tensor<1x2x8xf32>, tensor<1xi8>) -> tensor<16x2x8xf32>
  return %m : tensor<16x2x8xf32>
}
