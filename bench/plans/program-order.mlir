// Two Partial results, one scaled (linear) and one squared (not), each
// followed by a matmul to a small result wanted by rows. A person writes a
// reduce_scatter for each branch: after the second matmul for the scale,
// before the square for the other. Deciding ops in program order resolves
// the square's operand with an all_reduce before knowing its consumer wants
// rows (issue 20 item 3).
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, axis_names = ["d"]} : () -> ()
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
