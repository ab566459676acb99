// RUN: dtensor-opt %s --dtensor-spmd --dtensor-report -o /dev/null 2>&1 | FileCheck %s
// RUN: dtensor-run -n 4 %s | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
// A Partial flows through tosa ops that keep sums (two matmuls, the sub of
// their Partials): one reduce_scatter of the sub's result by rows, not one
// per matmul; the last matmul then splits its rows (carrying the Partial
// through it too would repeat its multiply-adds on every device, which the
// model counts).
// CHECK-LABEL: dtensor report: @tp
// CHECK: 1 collective,
// CHECK-NEXT: dtensor.reduce_scatter 4096 bytes
// RUN: dtensor-opt %s --dtensor-spmd | FileCheck %s --check-prefix=IR
// IR: %[[S:.*]] = tosa.sub
// IR: "dtensor.reduce_scatter"(%[[S]])
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
