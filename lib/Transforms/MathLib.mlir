// The math functions dtensor-approximate-math expands in place of the math
// dialect's f32 ops (lib/Transforms/ApproximateMath.c): straight-line
// arith/math code with no calls, so that LLVM vectorizes the loops that use
// them (libm's expf and tanhf are scalar calls). One function per op,
// named after it; the argument and the single result are the op's. A
// function may use ops expanded later in the pass's order.

// exp: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two constants so that
// n ln2 is exact), e^r by a degree-7 polynomial (Cephes' coefficients,
// relative error about 1e-7), 2^n built in the exponent bits. Above
// ln(FLT_MAX): +inf; below ln(FLT_MIN) (results that would be subnormal):
// 0; NaN stays NaN.
func.func private @exp(%x: f32) -> f32 {
  %hi = arith.constant 88.72283905206835 : f32
  %lo = arith.constant -87.3365478515625 : f32
  %log2e = arith.constant 1.44269504088896341 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %zero = arith.constant 0.0 : f32
  %inf = arith.constant 0x7F800000 : f32
  %n127 = arith.constant 127.0 : f32
  %ln2hi = arith.constant 0.693359375 : f32
  %ln2lo = arith.constant -2.12194440e-4 : f32
  %p0 = arith.constant 1.9875691500e-4 : f32
  %p1 = arith.constant 1.3981999507e-3 : f32
  %p2 = arith.constant 8.3334519073e-3 : f32
  %p3 = arith.constant 4.1665795894e-2 : f32
  %p4 = arith.constant 1.6666665459e-1 : f32
  %p5 = arith.constant 5.0000001201e-1 : f32
  %bias = arith.constant 127 : i32
  %shift = arith.constant 23 : i32
  %xa = arith.minimumf %x, %hi : f32
  %xc = arith.maximumf %xa, %lo : f32
  %t = arith.mulf %xc, %log2e : f32
  %t1 = arith.addf %t, %half : f32
  %n = math.floor %t1 : f32
  %r0 = arith.mulf %n, %ln2hi : f32
  %r1 = arith.subf %xc, %r0 : f32
  %r2 = arith.mulf %n, %ln2lo : f32
  %r = arith.subf %r1, %r2 : f32
  %rr = arith.mulf %r, %r : f32
  %y0 = arith.mulf %p0, %r fastmath<contract> : f32
  %y1 = arith.addf %y0, %p1 fastmath<contract> : f32
  %y2 = arith.mulf %y1, %r fastmath<contract> : f32
  %y3 = arith.addf %y2, %p2 fastmath<contract> : f32
  %y4 = arith.mulf %y3, %r fastmath<contract> : f32
  %y5 = arith.addf %y4, %p3 fastmath<contract> : f32
  %y6 = arith.mulf %y5, %r fastmath<contract> : f32
  %y7 = arith.addf %y6, %p4 fastmath<contract> : f32
  %y8 = arith.mulf %y7, %r fastmath<contract> : f32
  %y9 = arith.addf %y8, %p5 fastmath<contract> : f32
  %ya = arith.mulf %y9, %rr fastmath<contract> : f32
  %yb = arith.addf %ya, %r fastmath<contract> : f32
  %y = arith.addf %yb, %one : f32
  // n reaches 128 only at the top of the range: 2^128 as 2 * 2^127.
  %top = arith.cmpf ogt, %n, %n127 : f32
  %scale = arith.select %top, %two, %one : f32
  %nc = arith.minimumf %n, %n127 : f32
  %ni = arith.fptosi %nc : f32 to i32
  %nb = arith.addi %ni, %bias : i32
  %bits = arith.shli %nb, %shift : i32
  %pow2 = arith.bitcast %bits : i32 to f32
  %ys = arith.mulf %y, %scale : f32
  %v = arith.mulf %ys, %pow2 : f32
  %over = arith.cmpf ogt, %x, %hi : f32
  %v1 = arith.select %over, %inf, %v : f32
  %under = arith.cmpf olt, %x, %lo : f32
  %v2 = arith.select %under, %zero, %v1 : f32
  return %v2 : f32
}

// tanh: x P(x^2) / Q(x^2) on x clamped to +-7.90531 (where tanh rounds to
// +-1 in f32), the rational minimax form Eigen uses for float tanh (its
// published coefficients); measured against tanh in f64 on 2.1 M points
// of [-10, 10] and [1e-8, 1]: at most 4.8 ulp (6.0 before the flags below).
// One division and 11 multiply-adds: about a third of the work of
// 1 - 2 / (e^{2x} + 1), which dominated a fused gelu. The multiply-adds
// carry `contract` (fused where the target has FMA) and the division
// `arcp, ninf` (its operands are finite: a reciprocal estimate refined by
// one Newton step where the target has one, rcp14 on AVX-512), as in exp's
// polynomial. NaN stays NaN.
func.func private @tanh(%x: f32) -> f32 {
  %hi = arith.constant 7.90531110763549805 : f32
  %lo = arith.constant -7.90531110763549805 : f32
  %a1 = arith.constant 4.89352455891786e-03 : f32
  %a3 = arith.constant 6.37261928875436e-04 : f32
  %a5 = arith.constant 1.48572235717979e-05 : f32
  %a7 = arith.constant 5.12229709037114e-08 : f32
  %a9 = arith.constant -8.60467152213735e-11 : f32
  %a11 = arith.constant 2.00018790482477e-13 : f32
  %a13 = arith.constant -2.76076847742355e-16 : f32
  %b0 = arith.constant 4.89352518554385e-03 : f32
  %b2 = arith.constant 2.26843463243900e-03 : f32
  %b4 = arith.constant 1.18534705686654e-04 : f32
  %b6 = arith.constant 1.19825839466702e-06 : f32
  %xa = arith.minimumf %x, %hi : f32
  %xc = arith.maximumf %xa, %lo : f32
  %z = arith.mulf %xc, %xc : f32
  %p0 = arith.mulf %a13, %z fastmath<contract> : f32
  %p1 = arith.addf %p0, %a11 fastmath<contract> : f32
  %p2 = arith.mulf %p1, %z fastmath<contract> : f32
  %p3 = arith.addf %p2, %a9 fastmath<contract> : f32
  %p4 = arith.mulf %p3, %z fastmath<contract> : f32
  %p5 = arith.addf %p4, %a7 fastmath<contract> : f32
  %p6 = arith.mulf %p5, %z fastmath<contract> : f32
  %p7 = arith.addf %p6, %a5 fastmath<contract> : f32
  %p8 = arith.mulf %p7, %z fastmath<contract> : f32
  %p9 = arith.addf %p8, %a3 fastmath<contract> : f32
  %pa = arith.mulf %p9, %z fastmath<contract> : f32
  %pb = arith.addf %pa, %a1 fastmath<contract> : f32
  %p = arith.mulf %pb, %xc : f32
  %q0 = arith.mulf %b6, %z fastmath<contract> : f32
  %q1 = arith.addf %q0, %b4 fastmath<contract> : f32
  %q2 = arith.mulf %q1, %z fastmath<contract> : f32
  %q3 = arith.addf %q2, %b2 fastmath<contract> : f32
  %q4 = arith.mulf %q3, %z fastmath<contract> : f32
  %q = arith.addf %q4, %b0 fastmath<contract> : f32
  %v = arith.divf %p, %q fastmath<arcp,ninf> : f32
  return %v : f32
}
