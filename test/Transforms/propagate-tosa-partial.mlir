// RUN: dtensor-opt %s --dtensor-spmd --dtensor-report -o /dev/null 2>&1 | FileCheck %s
// RUN: dtensor-run -n 4 %s | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
// A Partial flows through tosa ops that keep sums (matmul in either input,
// sub of two Partials, then matmul again): one reduce_scatter of the small
// result at the return, instead of resolving at the sub.
// CHECK-LABEL: dtensor report: @tp
// CHECK: 1 collective,
// CHECK-NEXT: dtensor.reduce_scatter 512 bytes
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["d"]} : () -> ()
func.func @tp(%x: tensor<1x16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R, S(d)]">},
              %w: tensor<1x32x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d), R]">},
              %v: tensor<1x32x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d), R]">},
              %w2: tensor<1x64x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R, R]">})
    -> (tensor<1x16x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d), R]">}) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %a = tosa.matmul %x, %w, %zp, %zp : (tensor<1x16x32xf32>, tensor<1x32x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %b = tosa.matmul %x, %v, %zp, %zp : (tensor<1x16x32xf32>, tensor<1x32x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %s = tosa.sub %a, %b : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
  %y = tosa.matmul %s, %w2, %zp, %zp : (tensor<1x16x64xf32>, tensor<1x64x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x8xf32>
  return %y : tensor<1x16x8xf32>
}
