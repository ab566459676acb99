// RUN: dtensor-opt %s --dtensor-spmd | FileCheck %s --check-prefix=RING
// RUN: dtensor-opt %s --pass-pipeline='builtin.module(dtensor-spmd{calibration=%S/Inputs/calibration-dear-all-reduce.txt})' | FileCheck %s --check-prefix=CAL
// RUN: dtensor-opt %s --pass-pipeline='builtin.module(dtensor-propagate{calibration=%S/Inputs/calibration-dear-all-reduce.txt})' | FileCheck %s --check-prefix=PROP
// RUN: printf 'dtensor-calibration 1\nmesh 2x2\n' > %t.2x2.txt
// RUN: not dtensor-opt %s --pass-pipeline='builtin.module(dtensor-spmd{calibration=%t.2x2.txt})' 2>&1 | FileCheck %s --check-prefix=MESH
// RUN: not dtensor-opt %s --pass-pipeline='builtin.module(dtensor-spmd{calibration=%t.none.txt})' 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: printf 'dtensor-calibration 1\nmesh 4\nall_reduce 0 5\n' > %t.bad.txt
// RUN: not dtensor-opt %s --pass-pipeline='builtin.module(dtensor-lower-redistribute{calibration=%t.bad.txt})' 2>&1 | FileCheck %s --check-prefix=BAD
//
// A sum over the rows of a row-sharded tensor: the link model prices an
// all_reduce of the 128-byte result by recursive doubling (2 latencies)
// below a gather of the 2 KiB input, so each device reduces its rows and
// the result is all_reduced. With a calibration in which an all_reduce
// costs 100 µs, gathering the input and reducing it everywhere is cheaper,
// and chosen.
// RING-LABEL: func.func @sum_rows
// RING-NOT: dtensor.all_gather
// RING: linalg.reduce
// RING: "dtensor.all_reduce"({{.*}}) {{.*}}: (tensor<32xf32>) -> tensor<32xf32>
// CAL-LABEL: func.func @sum_rows
// CAL: dtensor.all_gather
// CAL-NOT: dtensor.all_reduce
// PROP-LABEL: func.func @sum_rows
// PROP: linalg.reduce {{.*}}dtensor.loop_axes = [array<i64>, array<i64>]
//
// A calibration for another mesh shape, one that does not exist, one that
// does not read: errors that say which and where.
// MESH: calibration.mlir:[[@LINE+4]]:1: error: 'dtensor.mesh' op mesh '@m': the calibration was measured on a mesh of shape 2x2, not 4 (measure this one: dtensor-run --calibrate -n N --mesh 4)
// NOFILE: error: 'dtensor.mesh' op dtensor-propagate: calibration: {{.*}}none.txt: cannot read: No such file or directory
// BAD: error: 'dtensor.mesh' op dtensor-lower-redistribute: calibration: {{.*}}bad.txt:3: expected 'COLLECTIVE AXES LATENCY_US BANDWIDTH_GBPS'

"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["d"]} : () -> ()
func.func @sum_rows(%x: tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">})
    -> (tensor<32xf32> {dtensor.layout = #dtensor.layout<@m, "[R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<32xf32>) -> tensor<32xf32>
  %r = linalg.reduce ins(%x : tensor<16x32xf32>) outs(%f : tensor<32xf32>) dimensions = [0]
    (%a: f32, %b: f32) {
      %s = arith.addf %a, %b : f32
      linalg.yield %s : f32
    }
  return %r : tensor<32xf32>
}
