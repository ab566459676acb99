// A tensor constant is the module's data (bufferization makes it a
// global), not a buffer of the step: neither the 16 KiB of zeros nor %k
// count. Peak, at %y: the argument, the slice and %y (256 bytes each).
func.func @consts(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %zeros = arith.constant dense<0.0> : tensor<64x64xf32>
  %k = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
  %s = tensor.extract_slice %zeros[0, 0] [8, 8] [1, 1] : tensor<64x64xf32> to tensor<8x8xf32>
  %y = arith.addf %x, %s : tensor<8x8xf32>
  %e = tensor.empty() : tensor<8x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%y, %k : tensor<8x8xf32>, tensor<8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}
