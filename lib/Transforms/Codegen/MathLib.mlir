// The math functions dtensor-approximate-math expands in place of the math
// dialect's f32 ops (lib/Transforms/Codegen/ApproximateMath.c): straight-line
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

// ---- f8 conversions (dtensor-expand-f8) -----------------------------------
// f8 values travel as their bytes (LLVM has no f8 type): arith.extf from
// and arith.truncf to f8E4M3FN and f8E5M2 are these functions on the bits.
// Decoding is exact. Encoding rounds to nearest, ties to even, as
// arith.truncf (APFloat) does: below the smallest normal by scaling into
// the integers (2^23 added and taken away rounds there), above by adding
// the rounding bias to the f32 bits; past the largest finite value
// f8E4M3FN (no infinity) gives NaN and f8E5M2 infinity; NaN stays NaN,
// signs and zeros stay.

// f8E4M3FN: sign, 4 exponent bits (bias 7), 3 mantissa bits; S.1111.111 is
// NaN; subnormals m * 2^-9.
func.func private @extf_f8E4M3FN(%x: f8E4M3FN) -> f32 {
  %b8 = arith.bitcast %x : f8E4M3FN to i8
  %b = arith.extui %b8 : i8 to i32
  %c0 = arith.constant 0 : i32
  %c3 = arith.constant 3 : i32
  %c7 = arith.constant 7 : i32
  %c15 = arith.constant 15 : i32
  %c20 = arith.constant 20 : i32
  %c23 = arith.constant 23 : i32
  %c120 = arith.constant 120 : i32
  %scale = arith.constant 1.953125e-03 : f32
  %nan = arith.constant 0x7FC00000 : f32
  %s = arith.shrui %b, %c7 : i32
  %es = arith.shrui %b, %c3 : i32
  %e = arith.andi %es, %c15 : i32
  %m = arith.andi %b, %c7 : i32
  %en = arith.addi %e, %c120 : i32
  %eb = arith.shli %en, %c23 : i32
  %mb = arith.shli %m, %c20 : i32
  %nb = arith.ori %eb, %mb : i32
  %normal = arith.bitcast %nb : i32 to f32
  %mf = arith.uitofp %m : i32 to f32
  %sub = arith.mulf %mf, %scale : f32
  %isSub = arith.cmpi eq, %e, %c0 : i32
  %mag = arith.select %isSub, %sub, %normal : f32
  %eTop = arith.cmpi eq, %e, %c15 : i32
  %mTop = arith.cmpi eq, %m, %c7 : i32
  %isNan = arith.andi %eTop, %mTop : i1
  %v = arith.select %isNan, %nan, %mag : f32
  %neg = arith.negf %v : f32
  %isNeg = arith.cmpi ne, %s, %c0 : i32
  %r = arith.select %isNeg, %neg, %v : f32
  return %r : f32
}

func.func private @truncf_f8E4M3FN(%x: f32) -> f8E4M3FN {
  %c7 = arith.constant 7 : i32
  %c20 = arith.constant 20 : i32
  %c24 = arith.constant 24 : i32
  %c1 = arith.constant 1 : i32
  %bias = arith.constant 524287 : i32
  %rebias = arith.constant 960 : i32
  %top = arith.constant 126 : i32
  %nanCode = arith.constant 127 : i32
  %minNormal = arith.constant 1.562500e-02 : f32
  %toUnits = arith.constant 512.0 : f32
  %magic = arith.constant 8388608.0 : f32
  %xb = arith.bitcast %x : f32 to i32
  %sign = arith.shrui %xb, %c24 : i32
  %signBit = arith.andi %sign, %nanCode : i32
  %s = arith.xori %sign, %signBit : i32
  %a = math.absf %x : f32
  %y = arith.mulf %a, %toUnits : f32
  %y1 = arith.addf %y, %magic : f32
  %y2 = arith.subf %y1, %magic : f32
  %subCode = arith.fptoui %y2 : f32 to i32
  %u = arith.bitcast %a : f32 to i32
  %odd0 = arith.shrui %u, %c20 : i32
  %odd = arith.andi %odd0, %c1 : i32
  %r0 = arith.addi %u, %bias : i32
  %r1 = arith.addi %r0, %odd : i32
  %r2 = arith.shrui %r1, %c20 : i32
  %normCode = arith.subi %r2, %rebias : i32
  %isSub = arith.cmpf olt, %a, %minNormal : f32
  %code0 = arith.select %isSub, %subCode, %normCode : i32
  %over = arith.cmpi ugt, %code0, %top : i32
  %isNan = arith.cmpf uno, %x, %x : f32
  %bad = arith.ori %over, %isNan : i1
  %code = arith.select %bad, %nanCode, %code0 : i32
  %withSign = arith.ori %code, %s : i32
  %b = arith.trunci %withSign : i32 to i8
  %r = arith.bitcast %b : i8 to f8E4M3FN
  return %r : f8E4M3FN
}

// f8E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE's
// infinities and NaNs; subnormals m * 2^-16.
func.func private @extf_f8E5M2(%x: f8E5M2) -> f32 {
  %b8 = arith.bitcast %x : f8E5M2 to i8
  %b = arith.extui %b8 : i8 to i32
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %c7 = arith.constant 7 : i32
  %c31 = arith.constant 31 : i32
  %c21 = arith.constant 21 : i32
  %c23 = arith.constant 23 : i32
  %c112 = arith.constant 112 : i32
  %scale = arith.constant 1.52587890625e-05 : f32
  %nan = arith.constant 0x7FC00000 : f32
  %inf = arith.constant 0x7F800000 : f32
  %s = arith.shrui %b, %c7 : i32
  %es = arith.shrui %b, %c2 : i32
  %e = arith.andi %es, %c31 : i32
  %m = arith.andi %b, %c3 : i32
  %en = arith.addi %e, %c112 : i32
  %eb = arith.shli %en, %c23 : i32
  %mb = arith.shli %m, %c21 : i32
  %nb = arith.ori %eb, %mb : i32
  %normal = arith.bitcast %nb : i32 to f32
  %mf = arith.uitofp %m : i32 to f32
  %sub = arith.mulf %mf, %scale : f32
  %isSub = arith.cmpi eq, %e, %c0 : i32
  %mag = arith.select %isSub, %sub, %normal : f32
  %eTop = arith.cmpi eq, %e, %c31 : i32
  %mZero = arith.cmpi eq, %m, %c0 : i32
  %special = arith.select %mZero, %inf, %nan : f32
  %v = arith.select %eTop, %special, %mag : f32
  %neg = arith.negf %v : f32
  %isNeg = arith.cmpi ne, %s, %c0 : i32
  %r = arith.select %isNeg, %neg, %v : f32
  return %r : f32
}

func.func private @truncf_f8E5M2(%x: f32) -> f8E5M2 {
  %c21 = arith.constant 21 : i32
  %c24 = arith.constant 24 : i32
  %c1 = arith.constant 1 : i32
  %c127 = arith.constant 127 : i32
  %bias = arith.constant 1048575 : i32
  %rebias = arith.constant 448 : i32
  %top = arith.constant 123 : i32
  %infCode = arith.constant 124 : i32
  %nanCode = arith.constant 126 : i32
  %minNormal = arith.constant 6.103515625e-05 : f32
  %toUnits = arith.constant 65536.0 : f32
  %magic = arith.constant 8388608.0 : f32
  %xb = arith.bitcast %x : f32 to i32
  %sign = arith.shrui %xb, %c24 : i32
  %signBit = arith.andi %sign, %c127 : i32
  %s = arith.xori %sign, %signBit : i32
  %a = math.absf %x : f32
  %y = arith.mulf %a, %toUnits : f32
  %y1 = arith.addf %y, %magic : f32
  %y2 = arith.subf %y1, %magic : f32
  %subCode = arith.fptoui %y2 : f32 to i32
  %u = arith.bitcast %a : f32 to i32
  %odd0 = arith.shrui %u, %c21 : i32
  %odd = arith.andi %odd0, %c1 : i32
  %r0 = arith.addi %u, %bias : i32
  %r1 = arith.addi %r0, %odd : i32
  %r2 = arith.shrui %r1, %c21 : i32
  %normCode = arith.subi %r2, %rebias : i32
  %isSub = arith.cmpf olt, %a, %minNormal : f32
  %code0 = arith.select %isSub, %subCode, %normCode : i32
  %over = arith.cmpi ugt, %code0, %top : i32
  %code1 = arith.select %over, %infCode, %code0 : i32
  %isNan = arith.cmpf uno, %x, %x : f32
  %code = arith.select %isNan, %nanCode, %code1 : i32
  %withSign = arith.ori %code, %s : i32
  %b = arith.trunci %withSign : i32 to i8
  %r = arith.bitcast %b : i8 to f8E5M2
  return %r : f8E5M2
}
