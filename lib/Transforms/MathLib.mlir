// The math functions dtensor-approximate-math expands in place of the math
// dialect's f32 ops (lib/Transforms/ApproximateMath.c): straight-line
// arith/math code with no calls, so that LLVM vectorizes the loops that use
// them (libm's expf and tanhf are scalar calls). One function per op,
// named after it; the argument and the single result are the op's. A
// function may use ops expanded later in the pass's order (tanh uses exp).

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
  %y0 = arith.mulf %p0, %r : f32
  %y1 = arith.addf %y0, %p1 : f32
  %y2 = arith.mulf %y1, %r : f32
  %y3 = arith.addf %y2, %p2 : f32
  %y4 = arith.mulf %y3, %r : f32
  %y5 = arith.addf %y4, %p3 : f32
  %y6 = arith.mulf %y5, %r : f32
  %y7 = arith.addf %y6, %p4 : f32
  %y8 = arith.mulf %y7, %r : f32
  %y9 = arith.addf %y8, %p5 : f32
  %ya = arith.mulf %y9, %rr : f32
  %yb = arith.addf %ya, %r : f32
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

// tanh: an odd polynomial below |x| = 0.625 (Cephes' coefficients), else
// 1 - 2 / (e^{2|x|} + 1) with the sign of x (no cancellation there: the
// quotient is at most 0.45); +-1 for large |x| (e^{2|x|} = inf).
func.func private @tanh(%x: f32) -> f32 {
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %small = arith.constant 0.625 : f32
  %q0 = arith.constant -5.70498872745e-3 : f32
  %q1 = arith.constant 2.06390887954e-2 : f32
  %q2 = arith.constant -5.37397155531e-2 : f32
  %q3 = arith.constant 1.33314422036e-1 : f32
  %q4 = arith.constant -3.33332819422e-1 : f32
  %ax = math.absf %x : f32
  %z = arith.mulf %x, %x : f32
  %s0 = arith.mulf %q0, %z : f32
  %s1 = arith.addf %s0, %q1 : f32
  %s2 = arith.mulf %s1, %z : f32
  %s3 = arith.addf %s2, %q2 : f32
  %s4 = arith.mulf %s3, %z : f32
  %s5 = arith.addf %s4, %q3 : f32
  %s6 = arith.mulf %s5, %z : f32
  %s7 = arith.addf %s6, %q4 : f32
  %s8 = arith.mulf %s7, %z : f32
  %s9 = arith.mulf %s8, %x : f32
  %poly = arith.addf %s9, %x : f32
  %a2 = arith.mulf %ax, %two : f32
  %e = math.exp %a2 : f32
  %e1 = arith.addf %e, %one : f32
  %q = arith.divf %two, %e1 : f32
  %m = arith.subf %one, %q : f32
  %big = math.copysign %m, %x : f32
  %isSmall = arith.cmpf olt, %ax, %small : f32
  %v = arith.select %isSmall, %poly, %big : f32
  return %v : f32
}
