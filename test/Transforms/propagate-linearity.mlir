// RUN: dtensor-opt %s --dtensor-spmd --dtensor-report -o /dev/null 2>&1 | FileCheck %s
// RUN: dtensor-opt %s --dtensor-spmd | FileCheck %s --check-prefix=IR
// RUN: dtensor-run -n 4 --entry masked_generic %s | FileCheck %s --check-prefix=OK
// RUN: dtensor-run -n 4 --entry sum_generic %s | FileCheck %s --check-prefix=OK
// RUN: dtensor-run -n 4 --entry scale_map %s | FileCheck %s --check-prefix=OK
// RUN: dtensor-run -n 4 --entry shape_ops %s | FileCheck %s --check-prefix=OK
// RUN: dtensor-run -n 4 --entry concat_sums %s | FileCheck %s --check-prefix=OK
// RUN: dtensor-run -n 4 --entry two_maps %s | FileCheck %s --check-prefix=OK
// OK: every rank's result equals the single-device run
// Linearity read from op bodies: a Partial(sum) passes through a
// linalg.generic/map whose yielded values are linear in it, and is resolved
// where that is cheapest; a body that is not linear resolves it first.

"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["d"]} : () -> ()

// A scale written as linalg.map: the Partial from the first matmul flows
// through it (no collective before the map) and is reduced and scattered by
// rows before the second matmul, which then splits its rows: carrying the
// Partial through that matmul would repeat its multiply-adds on every
// device, which the model counts (before it did: one reduce_scatter of the
// small result, the matmul repeated 4 times).
// CHECK-LABEL: dtensor report: @scale_map
// CHECK: 1 collective,
// CHECK-NEXT: dtensor.reduce_scatter 2048 bytes
// IR-LABEL: func.func @scale_map
// IR: %[[M:.*]] = linalg.map
// IR: %[[R:.*]] = "dtensor.reduce_scatter"(%[[M]])
// IR: linalg.matmul ins(%[[R]]
func.func @scale_map(%h: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d)]">},
                     %w: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">},
                     %w2: tensor<32x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">})
    -> (tensor<16x8xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">}) {
  %z = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %s = linalg.map ins(%y : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>)
    (%a: f32, %o: f32) {
      %m = arith.mulf %a, %half : f32
      linalg.yield %m : f32
    }
  %e2 = tensor.empty() : tensor<16x8xf32>
  %f2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x8xf32>) -> tensor<16x8xf32>
  %r = linalg.matmul ins(%s, %w2 : tensor<16x32xf32>, tensor<32x8xf32>) outs(%f2 : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %r : tensor<16x8xf32>
}

// A generic that negates, casts, divides by a replicated value and masks
// with a replicated condition (select against zero): all linear, so the
// Partial reaches the return, which wants rows: one reduce_scatter.
// CHECK-LABEL: dtensor report: @masked_generic
// CHECK: 1 collective,
// CHECK-NEXT: dtensor.reduce_scatter 1024 bytes
func.func @masked_generic(%h: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d)]">},
                          %w: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">},
                          %mask: tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">},
                          %scale: tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">})
    -> (tensor<16x32xf16> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %e16 = tensor.empty() : tensor<16x32xf16>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%y, %mask, %scale : tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) outs(%e16 : tensor<16x32xf16>) {
  ^bb0(%v: f32, %mk: f32, %s: f32, %o: f16):
    %zero = arith.constant 0.0 : f32
    %keep = arith.cmpf ogt, %mk, %zero : f32
    %n = arith.negf %v : f32
    %d = arith.divf %n, %s : f32
    %k = arith.select %keep, %d, %zero : f32
    %t = arith.truncf %k : f32 to f16
    linalg.yield %t : f16
  } -> tensor<16x32xf16>
  return %g : tensor<16x32xf16>
}

// The sum of two Partials in a generic body stays Partial: one all_reduce
// of the sum, not one per operand.
// CHECK-LABEL: dtensor report: @sum_generic
// CHECK: 1 collective,
// CHECK-NEXT: dtensor.all_reduce 2048 bytes
func.func @sum_generic(%h: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d)]">},
                       %w: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">},
                       %v: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">})
    -> (tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %a = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %b = linalg.matmul ins(%h, %v : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<16x32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %d = arith.subf %x, %y : f32
    linalg.yield %d : f32
  } -> tensor<16x32xf32>
  return %s : tensor<16x32xf32>
}

// The same with the named linalg.sub: its body is read the same way.
// CHECK-LABEL: dtensor report: @sum_named
// CHECK: 1 collective,
// CHECK-NEXT: dtensor.all_reduce 2048 bytes
func.func @sum_named(%h: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d)]">},
                     %w: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">},
                     %v: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">})
    -> (tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %a = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %b = linalg.matmul ins(%h, %v : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %s = linalg.sub ins(%a, %b : tensor<16x32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  return %s : tensor<16x32xf32>
}

// Not linear: a square, and a shift by a constant (affine). The Partial is
// resolved before the map, by a reduce_scatter as the result is wanted by
// rows.
// IR-LABEL: func.func @not_linear
// IR: %[[Y:.*]] = linalg.matmul
// IR: %[[R:.*]] = "dtensor.reduce_scatter"(%[[Y]])
// IR: linalg.map ins(%[[R]]
// IR-LABEL: func.func @affine
// IR: %[[Y:.*]] = linalg.matmul
// IR: %[[R:.*]] = "dtensor.reduce_scatter"(%[[Y]])
// IR: linalg.map ins(%[[R]]
func.func @not_linear(%h: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d)]">},
                      %w: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">})
    -> (tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %s = linalg.map ins(%y : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>)
    (%a: f32, %o: f32) {
      %m = arith.mulf %a, %a : f32
      linalg.yield %m : f32
    }
  return %s : tensor<16x32xf32>
}
func.func @affine(%h: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d)]">},
                  %w: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">})
    -> (tensor<16x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">}) {
  %z = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %s = linalg.map ins(%y : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>)
    (%a: f32, %o: f32) {
      %m = arith.addf %a, %one : f32
      linalg.yield %m : f32
    }
  return %s : tensor<16x32xf32>
}

// Transposes (linalg bodies that yield their input), a reshape, a slice and
// a zero pad keep sums too: the Partial reaches the return, which wants
// rows: one reduce_scatter there.
// CHECK-LABEL: dtensor report: @shape_ops
// CHECK: 1 collective,
// CHECK-NEXT: dtensor.reduce_scatter
func.func @shape_ops(%h: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d)]">},
                     %w: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">})
    -> (tensor<4x4x36xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R, R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %et = tensor.empty() : tensor<32x16xf32>
  %t = linalg.transpose ins(%y : tensor<16x32xf32>) outs(%et : tensor<32x16xf32>) permutation = [1, 0]
  %t2 = linalg.transpose ins(%t : tensor<32x16xf32>) outs(%e : tensor<16x32xf32>) permutation = [1, 0]
  %s = tensor.extract_slice %t2[0, 0] [16, 30] [1, 1] : tensor<16x32xf32> to tensor<16x30xf32>
  %p = tensor.pad %s low[0, 2] high[0, 4] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } : tensor<16x30xf32> to tensor<16x36xf32>
  %x = tensor.expand_shape %p [[0, 1], [2]] output_shape [4, 4, 36] : tensor<16x36xf32> into tensor<4x4x36xf32>
  return %x : tensor<4x4x36xf32>
}

// Two Partials concatenated stay one Partial: one all_reduce.
// CHECK-LABEL: dtensor report: @concat_sums
// CHECK: 1 collective,
// CHECK-NEXT: dtensor.all_reduce 4096 bytes
func.func @concat_sums(%h: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d)]">},
                       %w: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">},
                       %v: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">})
    -> (tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %a = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %b = linalg.matmul ins(%h, %v : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %c = tensor.concat dim(1) %a, %b : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x64xf32>
  return %c : tensor<16x64xf32>
}

// Two linalg.map ops of the same types, one linear and one not, each
// followed by a matmul to a small result: each body is read on its own (a
// rule cached by name and types gave the square the scale's linearity, a
// Partial through x*x, and wrong numbers). The scale's Partial flows to one
// reduce_scatter of the small result; the square's is resolved first (by an
// all_reduce, as ops are still decided in program order).
// IR-LABEL: func.func @two_maps
// IR: %[[A:.*]] = linalg.matmul
// IR: %[[B:.*]] = linalg.matmul
// IR: %[[RB:.*]] = "dtensor.{{all_reduce|reduce_scatter}}"(%[[B]])
// IR: linalg.map ins(%[[RB]]
func.func @two_maps(%h: tensor<16x64xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(d)]">},
                    %w: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">},
                    %v: tensor<64x32xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">},
                    %w2: tensor<32x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, R]">})
    -> (tensor<16x8xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">},
        tensor<16x8xf32> {dtensor.layout = #dtensor.layout<@m, "[S(d), R]">}) {
  %z = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %a = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %b = linalg.matmul ins(%h, %v : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %s1 = linalg.map ins(%a : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>)
    (%x: f32, %o: f32) {
      %m = arith.mulf %x, %half : f32
      linalg.yield %m : f32
    }
  %s2 = linalg.map ins(%b : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>)
    (%x: f32, %o: f32) {
      %m = arith.mulf %x, %x : f32
      linalg.yield %m : f32
    }
  %e2 = tensor.empty() : tensor<16x8xf32>
  %f2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x8xf32>) -> tensor<16x8xf32>
  %r1 = linalg.matmul ins(%s1, %w2 : tensor<16x32xf32>, tensor<32x8xf32>) outs(%f2 : tensor<16x8xf32>) -> tensor<16x8xf32>
  %r2 = linalg.matmul ins(%s2, %w2 : tensor<16x32xf32>, tensor<32x8xf32>) outs(%f2 : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %r1, %r2 : tensor<16x8xf32>, tensor<16x8xf32>
}
