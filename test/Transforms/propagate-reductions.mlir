// RUN: dtensor-opt %s --dtensor-spmd --dtensor-report -o /dev/null 2>&1 | FileCheck %s
// RUN: dtensor-run -n 4 %s | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
//
// A 0-d sum of a row-sharded 4 MiB tensor: each device reduces its rows
// and one all_reduce of 4 bytes sums the parts (never a gather of the
// input). On tiny inputs the default link model prices a gather of the
// input and an all_reduce alike (latency dominates); a calibration from
// the machine decides those (test/Transforms/calibration.mlir).
// CHECK-LABEL: dtensor report: @sum_all
// CHECK: 1 collective, 4 bytes moved
// CHECK-NEXT: dtensor.all_reduce 4 bytes
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["d"]} : () -> ()
func.func @sum_all(%x: tensor<1024x1024xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">})
    -> (tensor<f32> {dtensor.layout = #dtensor.layout<@m, "[]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.reduce ins(%x : tensor<1024x1024xf32>) outs(%f : tensor<f32>) dimensions = [0, 1]
    (%a: f32, %b: f32) {
      %s = arith.addf %a, %b : f32
      linalg.yield %s : f32
    }
  return %r : tensor<f32>
}
