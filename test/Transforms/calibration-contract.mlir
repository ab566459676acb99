// RUN: dtensor-opt %s --dtensor-spmd | FileCheck %s --check-prefix=MODEL
// RUN: printf 'dtensor-calibration 1\nmesh 4\ncontract 0.5 1000\n' > %t.fast.txt
// RUN: dtensor-opt %s --pass-pipeline='builtin.module(dtensor-spmd{calibration=%t.fast.txt})' | FileCheck %s --check-prefix=FAST
// RUN: printf 'dtensor-calibration 1\nmesh 4\ncontract 3 0.01\n' > %t.slow.txt
// RUN: dtensor-opt %s --pass-pipeline='builtin.module(dtensor-propagate{calibration=%t.slow.txt cost=true})' -o /dev/null 2>&1 | FileCheck %s --check-prefix=SLOW
// RUN: dtensor-opt %s --pass-pipeline='builtin.module(dtensor-propagate{cost=true})' -o /dev/null 2>&1 | FileCheck %s --check-prefix=FIXED
// RUN: printf 'dtensor-calibration 1\nmesh 4\ncontract 1\n' > %t.short.txt
// RUN: not dtensor-opt %s --pass-pipeline='builtin.module(dtensor-spmd{calibration=%t.short.txt})' 2>&1 | FileCheck %s --check-prefix=SHORT
// RUN: printf 'dtensor-calibration 1\nmesh 4\ncontract 1 0\n' > %t.zero.txt
// RUN: not dtensor-opt %s --pass-pipeline='builtin.module(dtensor-spmd{calibration=%t.zero.txt})' 2>&1 | FileCheck %s --check-prefix=ZERO
//
// A calibration's contraction rate (dtensor-run --calibrate's `contract`
// line) prices the multiply-adds where the fixed model does not. A wide
// product of a row-sharded 64x8 input: computing each device's rows and
// gathering the 64x512 result moves 64x more bytes than gathering the
// input, but repeating the whole product on every device costs 4x the
// multiply-adds. At the model's 25 G/s a device's product (65536
// multiply-adds on its rows) costs 2.6 us, and the rows are kept; on a
// machine that computes at 1000 G/s the input is gathered instead.
// MODEL-LABEL: func.func @wide
// MODEL: "dtensor.all_gather"({{.*}}) {{.*}}: (tensor<16x512xf32>) -> tensor<64x512xf32>
// FAST-LABEL: func.func @wide
// FAST: "dtensor.all_gather"(%arg0) {{.*}}: (tensor<16x8xf32>) -> tensor<64x8xf32>
// FAST-NOT: dtensor.all_gather
//
// The modelled cost is overhead + multiply-adds / rate per device: 3 us +
// 65536 / 10 per us, and the gather of the result (11.0 us) on top;
// with the fixed rate 65536 x 40 ps = 2.6 us.
// SLOW: @wide: modelled cost 6567.583040 us
// FIXED: @wide: modelled cost 13.604480 us
//
// SHORT: calibration: {{.*}}short.txt:3: expected 'contract OVERHEAD_US GMACS'
// ZERO: calibration: {{.*}}zero.txt:3: a contraction's overhead must be a finite number >= 0 µs and its rate a finite number > 0 G multiply-adds per second (got 1 and 0)

"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["d"]} : () -> ()
func.func @wide(%x: tensor<64x8xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">},
                %w: tensor<8x512xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">})
    -> (tensor<64x512xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x512xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<64x512xf32>) -> tensor<64x512xf32>
  %y = linalg.matmul ins(%x, %w : tensor<64x8xf32>, tensor<8x512xf32>) outs(%f : tensor<64x512xf32>) -> tensor<64x512xf32>
  return %y : tensor<64x512xf32>
}
