// dtensor-report's peak, by hand (f32, per device: no layouts, so the
// function is its own per-device program): the argument %x 4 KiB; %a
// 16 KiB, the loop's init, and the loop's result 16 KiB both live while it
// runs; inside it %t 32 KiB and its slice %s 16 KiB (each tensor.empty is
// written in place by its fill and adds nothing): 4 + 32 + 48 KiB = 86016.
func.func @f(%x: tensor<32x32xf32>) -> tensor<32x64xf32> {
  %z = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<64x64xf32>
  %a = linalg.fill ins(%z : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %a) -> tensor<64x64xf32> {
    %e2 = tensor.empty() : tensor<128x64xf32>
    %t = linalg.fill ins(%z : f32) outs(%e2 : tensor<128x64xf32>) -> tensor<128x64xf32>
    %s = tensor.extract_slice %t[0, 0] [64, 64] [1, 1] : tensor<128x64xf32> to tensor<64x64xf32>
    scf.yield %s : tensor<64x64xf32>
  }
  %b = tensor.extract_slice %r[0, 0] [32, 64] [1, 1] : tensor<64x64xf32> to tensor<32x64xf32>
  return %b : tensor<32x64xf32>
}
