// RUN: dtensor-run -n 4 %s | FileCheck %s
// CHECK-COUNT-4: result elements, equal to the single-device run
// CHECK: every rank's result equals the single-device run
// Uneven shards: 10 rows and a contraction dim of 10 over 4 devices
// (blocks 3, 3, 3, 1). dtensor-run fills each padded block's padding with
// NaN, so a contraction or reduction that counted padding would differ.
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["tp"]} : () -> ()
func.func @uneven(%x: tensor<6x10xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S0]">},
                  %w: tensor<10x10xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">})
    -> (tensor<10xf32> {dtensor.layout = #dtensor.layout<@m, "[R]">}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x10xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<6x10xf32>) -> tensor<6x10xf32>
  // k (10) is sharded unevenly: Partial(sum), all_reduce.
  %y = linalg.matmul ins(%x, %w : tensor<6x10xf32>, tensor<10x10xf32>) outs(%z : tensor<6x10xf32>) -> tensor<6x10xf32>
  %s = "dtensor.annotate"(%y) {layout = #dtensor.layout<@m, "[R, S0]">} : (tensor<6x10xf32>) -> tensor<6x10xf32>
  %t = tensor.empty() : tensor<10x6xf32>
  %yt = linalg.transpose ins(%s : tensor<6x10xf32>) outs(%t : tensor<10x6xf32>) permutation = [1, 0]
  // A max over the uneven dim.
  %ninf = arith.constant 0xFF800000 : f32
  %e2 = tensor.empty() : tensor<6xf32>
  %i = linalg.fill ins(%ninf : f32) outs(%e2 : tensor<6xf32>) -> tensor<6xf32>
  %m = linalg.reduce ins(%s : tensor<6x10xf32>) outs(%i : tensor<6xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.maximumf %in, %acc : f32
      linalg.yield %r : f32
    }
  // A sum over the other dim of the transposed value (rows stay uneven).
  %e3 = tensor.empty() : tensor<10xf32>
  %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<10xf32>) -> tensor<10xf32>
  %r = linalg.reduce ins(%yt : tensor<10x6xf32>) outs(%z3 : tensor<10xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  // Sum the maxima, broadcast the total and add: a [R] result.
  %e5 = tensor.empty() : tensor<f32>
  %z5 = linalg.fill ins(%zero : f32) outs(%e5 : tensor<f32>) -> tensor<f32>
  %tot = linalg.reduce ins(%m : tensor<6xf32>) outs(%z5 : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  %e4 = tensor.empty() : tensor<10xf32>
  %mb = linalg.broadcast ins(%tot : tensor<f32>) outs(%e4 : tensor<10xf32>) dimensions = [0]
  %out = linalg.add ins(%r, %mb : tensor<10xf32>, tensor<10xf32>) outs(%e4 : tensor<10xf32>) -> tensor<10xf32>
  return %out : tensor<10xf32>
}
