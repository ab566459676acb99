/* Element types and arithmetic (docs/runtime.md): sizes and names from
 * the runtime's one type list, 16-bit float conversions, and the
 * combining, scaling and converting the backends and checkpoints use. The
 * layer below the backends: it calls none of them. */
#include "RuntimeInternal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

size_t dtrtDtypeSize(DtrtDtype dtype) {
  switch (dtype) {
#define DTRT_DTYPE_CASE(e, name, size)                                         \
  case e:                                                                      \
    return size;
    DTRT_DTYPE_LIST(DTRT_DTYPE_CASE)
#undef DTRT_DTYPE_CASE
  }
  return 0;
}

const char *dtrtDtypeName(DtrtDtype dtype) {
  switch (dtype) {
#define DTRT_DTYPE_CASE(e, name, size)                                         \
  case e:                                                                      \
    return name;
    DTRT_DTYPE_LIST(DTRT_DTYPE_CASE)
#undef DTRT_DTYPE_CASE
  }
  return "?";
}

int dtrtDtypeParse(const char *name, DtrtDtype *outDtype) {
#define DTRT_DTYPE_TRY(e, text, size)                                          \
  if (name && !strcmp(name, text)) {                                           \
    *outDtype = e;                                                             \
    return 1;                                                                  \
  }
  DTRT_DTYPE_LIST(DTRT_DTYPE_TRY)
#undef DTRT_DTYPE_TRY
  return 0;
}

/* ---- element arithmetic -------------------------------------------------- */

static float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ff;
  float f;
  if (exp == 0)
    f = ldexpf((float)mant, -24);
  else if (exp == 31)
    f = mant ? NAN : INFINITY;
  else
    f = ldexpf((float)(mant | 0x400), (int)exp - 25);
  return sign ? -f : f;
}

static uint16_t floatToHalf(float f) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  float a = fabsf(f);
  if (isnan(a))
    return sign | 0x7e00;
  if (a >= 65520.0f)
    return sign | 0x7c00;
  if (a < ldexpf(1.0f, -24) * 0.5f)
    return sign;
  int e;
  frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  int exp = e - 1 + 15;
  if (exp <= 0) /* subnormal: units of 2^-24 */
    return sign | (uint16_t)lrintf(ldexpf(a, 24));
  uint32_t mant = (uint32_t)lrintf(ldexpf(a, 10 - (e - 1))) - 0x400;
  if (mant == 0x400) { /* rounded up to the next power of two */
    mant = 0;
    ++exp;
  }
  return sign | (uint16_t)(exp << 10) | (uint16_t)mant;
}

static float bf16ToFloat(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t floatToBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000)
    return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

/* The f8 types as MLIR's arith.extf and arith.truncf convert them (and
 * lib/Transforms/Codegen/MathLib.mlir's code for compiled programs): `mant`
 * mantissa bits, exponent `bias`, `ieee` for IEEE's infinities and NaNs
 * (f8E5M2) rather than one NaN pattern and no infinity (f8E4M3FN). */
static float f8ToFloat(uint8_t b, int mant, int bias, bool ieee) {
  int top = (1 << (7 - mant)) - 1, mmask = (1 << mant) - 1;
  int e = (b >> mant) & top, m = b & mmask;
  float v;
  if (ieee && e == top)
    v = m ? NAN : INFINITY;
  else if (!ieee && e == top && m == mmask)
    v = NAN;
  else if (e == 0)
    v = ldexpf((float)m, 1 - bias - mant);
  else
    v = ldexpf((float)(m | (1 << mant)), e - bias - mant);
  return b & 0x80 ? -v : v;
}

/* Rounded to nearest, ties to even; past the largest finite value NaN
 * (f8E4M3FN) or infinity (f8E5M2). */
static uint8_t floatToF8(float f, int mant, int bias, bool ieee) {
  uint8_t sign = signbit(f) ? 0x80 : 0;
  if (isnan(f))
    return sign | (ieee ? 0x7e : 0x7f);
  int top = (1 << (7 - mant)) - 1;
  uint32_t largest = ieee ? (uint32_t)((top - 1) << mant | ((1 << mant) - 1))
                          : (uint32_t)(top << mant | ((1 << mant) - 2));
  float a = fabsf(f);
  uint32_t code;
  if (a < ldexpf(1.0f, 1 - bias)) {
    /* Below the smallest normal: units of the subnormals (exact products),
     * rounded as the current (default: to nearest even) mode rounds. */
    code = (uint32_t)nearbyintf(ldexpf(a, bias - 1 + mant));
  } else if (isinf(a)) {
    code = UINT32_MAX;
  } else {
    uint32_t u;
    memcpy(&u, &a, 4);
    int shift = 23 - mant;
    u += (1u << (shift - 1)) - 1 + ((u >> shift) & 1);
    code = (u >> shift) - ((uint32_t)(127 - bias) << mant);
  }
  if (code > largest)
    code = ieee ? largest + 1 : 0x7f;
  return sign | (uint8_t)code;
}

static float f8e4m3fnToFloat(uint8_t b) { return f8ToFloat(b, 3, 7, false); }
static float f8e5m2ToFloat(uint8_t b) { return f8ToFloat(b, 2, 15, true); }
static uint8_t floatToF8e4m3fn(float f) { return floatToF8(f, 3, 7, false); }
static uint8_t floatToF8e5m2(float f) { return floatToF8(f, 2, 15, true); }

/* The switch is outside the loops so that each loop vectorizes. */
#define COMBINE_LOOP(T, a, b, n, expr)                                         \
  for (size_t i_ = 0; i_ < (n); ++i_) {                                        \
    T x_ = (a)[i_], y_ = (b)[i_];                                              \
    (a)[i_] = (expr);                                                          \
  }
#define COMBINE(T, acc, in, n, op)                                             \
  do {                                                                         \
    T *a_ = (T *)(acc);                                                        \
    const T *b_ = (const T *)(in);                                             \
    switch (op) {                                                              \
    case DTRT_MAX:                                                             \
      COMBINE_LOOP(T, a_, b_, n, y_ > x_ ? y_ : x_) break;                     \
    case DTRT_MIN:                                                             \
      COMBINE_LOOP(T, a_, b_, n, y_ < x_ ? y_ : x_) break;                     \
    case DTRT_PROD:                                                            \
      COMBINE_LOOP(T, a_, b_, n, x_ * y_) break;                               \
    default:                                                                   \
      COMBINE_LOOP(T, a_, b_, n, x_ + y_) break;                               \
    }                                                                          \
  } while (0)

static float combineFloat(float a, float b, DtrtReduce op) {
  switch (op) {
  case DTRT_MAX:
    return b > a ? b : a;
  case DTRT_MIN:
    return b < a ? b : a;
  case DTRT_PROD:
    return a * b;
  default:
    return a + b;
  }
}

void dtrtCombine(void *acc, const void *in, size_t n, DtrtDtype dtype,
                 DtrtReduce op) {
  switch (dtype) {
  case DTRT_F32:
    COMBINE(float, acc, in, n, op);
    break;
  case DTRT_F64:
    COMBINE(double, acc, in, n, op);
    break;
  case DTRT_I32:
    COMBINE(int32_t, acc, in, n, op);
    break;
  case DTRT_I64:
    COMBINE(int64_t, acc, in, n, op);
    break;
  case DTRT_I8:
    COMBINE(int8_t, acc, in, n, op);
    break;
  case DTRT_I16:
    COMBINE(int16_t, acc, in, n, op);
    break;
  case DTRT_UI8:
    COMBINE(uint8_t, acc, in, n, op);
    break;
  case DTRT_I1: {
    /* 0 or 1: max is or, min and prod are and (a sum is refused before). */
    uint8_t *a = acc;
    const uint8_t *b = in;
    for (size_t i = 0; i < n; ++i)
      a[i] =
          op == DTRT_MIN || op == DTRT_PROD ? (a[i] && b[i]) : (a[i] || b[i]);
    break;
  }
  case DTRT_F16:
  case DTRT_BF16: {
    uint16_t *a = acc;
    const uint16_t *b = in;
    bool half = dtype == DTRT_F16;
    for (size_t i = 0; i < n; ++i) {
      float x = half ? halfToFloat(a[i]) : bf16ToFloat(a[i]);
      float y = half ? halfToFloat(b[i]) : bf16ToFloat(b[i]);
      float r = combineFloat(x, y, op);
      a[i] = half ? floatToHalf(r) : floatToBf16(r);
    }
    break;
  }
  case DTRT_F8E4M3FN:
  case DTRT_F8E5M2: {
    uint8_t *a = acc;
    const uint8_t *b = in;
    bool e4 = dtype == DTRT_F8E4M3FN;
    for (size_t i = 0; i < n; ++i) {
      float x = e4 ? f8e4m3fnToFloat(a[i]) : f8e5m2ToFloat(a[i]);
      float y = e4 ? f8e4m3fnToFloat(b[i]) : f8e5m2ToFloat(b[i]);
      float r = combineFloat(x, y, op);
      a[i] = e4 ? floatToF8e4m3fn(r) : floatToF8e5m2(r);
    }
    break;
  }
  }
}

static double loadAny(const void *p, DtrtDtype t, size_t i) {
  switch (t) {
  case DTRT_F32:
    return ((const float *)p)[i];
  case DTRT_F64:
    return ((const double *)p)[i];
  case DTRT_I32:
    return ((const int32_t *)p)[i];
  case DTRT_I64:
    return (double)((const int64_t *)p)[i];
  case DTRT_I8:
    return ((const int8_t *)p)[i];
  case DTRT_I16:
    return ((const int16_t *)p)[i];
  case DTRT_UI8:
    return ((const uint8_t *)p)[i];
  case DTRT_I1:
    return ((const uint8_t *)p)[i] != 0;
  case DTRT_F16:
    return halfToFloat(((const uint16_t *)p)[i]);
  case DTRT_BF16:
    return bf16ToFloat(((const uint16_t *)p)[i]);
  case DTRT_F8E4M3FN:
    return f8e4m3fnToFloat(((const uint8_t *)p)[i]);
  case DTRT_F8E5M2:
    return f8e5m2ToFloat(((const uint8_t *)p)[i]);
  }
  return 0;
}

/* `v` as an integer in [lo, hi]: rounded toward zero, saturated, NaN 0
 * (a C cast out of range is undefined). */
static int64_t clampInt(double v, double lo, double hi) {
  if (isnan(v))
    return 0;
  return (int64_t)(v < lo ? lo : v > hi ? hi : v);
}

static void storeAny(void *p, DtrtDtype t, size_t i, double v) {
  switch (t) {
  case DTRT_I8:
    ((int8_t *)p)[i] = (int8_t)clampInt(v, INT8_MIN, INT8_MAX);
    break;
  case DTRT_I16:
    ((int16_t *)p)[i] = (int16_t)clampInt(v, INT16_MIN, INT16_MAX);
    break;
  case DTRT_UI8:
    ((uint8_t *)p)[i] = (uint8_t)clampInt(v, 0, UINT8_MAX);
    break;
  case DTRT_I1:
    ((uint8_t *)p)[i] = v != 0 && !isnan(v);
    break;
  case DTRT_F32:
    ((float *)p)[i] = (float)v;
    break;
  case DTRT_F64:
    ((double *)p)[i] = v;
    break;
  case DTRT_I32:
    ((int32_t *)p)[i] = (int32_t)v;
    break;
  case DTRT_I64:
    ((int64_t *)p)[i] = (int64_t)v;
    break;
  case DTRT_F16:
    ((uint16_t *)p)[i] = floatToHalf((float)v);
    break;
  case DTRT_BF16:
    ((uint16_t *)p)[i] = floatToBf16((float)v);
    break;
  case DTRT_F8E4M3FN:
    ((uint8_t *)p)[i] = floatToF8e4m3fn((float)v);
    break;
  case DTRT_F8E5M2:
    ((uint8_t *)p)[i] = floatToF8e5m2((float)v);
    break;
  }
}

void dtrtConvert(const void *in, DtrtDtype inType, void *out, DtrtDtype outType,
                 size_t count) {
  if (inType == outType) {
    memmove(out, in, count * dtrtDtypeSize(inType));
    return;
  }
  /* Widening writes past what it reads: go from the back. */
  bool backward = dtrtDtypeSize(outType) > dtrtDtypeSize(inType);
  for (size_t k = 0; k < count; ++k) {
    size_t i = backward ? count - 1 - k : k;
    storeAny(out, outType, i, loadAny(in, inType, i));
  }
}

void dtrtScale(void *buf, size_t n, DtrtDtype dtype, int divisor) {
  for (size_t i = 0; i < n; ++i)
    switch (dtype) {
    case DTRT_F32:
      ((float *)buf)[i] /= (float)divisor;
      break;
    case DTRT_F64:
      ((double *)buf)[i] /= (double)divisor;
      break;
    case DTRT_I32:
      ((int32_t *)buf)[i] /= divisor;
      break;
    case DTRT_I64:
      ((int64_t *)buf)[i] /= divisor;
      break;
    case DTRT_I8:
      ((int8_t *)buf)[i] = (int8_t)(((int8_t *)buf)[i] / divisor);
      break;
    case DTRT_I16:
      ((int16_t *)buf)[i] = (int16_t)(((int16_t *)buf)[i] / divisor);
      break;
    case DTRT_UI8:
      ((uint8_t *)buf)[i] = (uint8_t)(((uint8_t *)buf)[i] / divisor);
      break;
    case DTRT_I1: /* an average of i1 is refused before */
      break;
    case DTRT_F16: {
      uint16_t *h = buf;
      h[i] = floatToHalf(halfToFloat(h[i]) / (float)divisor);
      break;
    }
    case DTRT_BF16: {
      uint16_t *h = buf;
      h[i] = floatToBf16(bf16ToFloat(h[i]) / (float)divisor);
      break;
    }
    case DTRT_F8E4M3FN: {
      uint8_t *q = buf;
      q[i] = floatToF8e4m3fn(f8e4m3fnToFloat(q[i]) / (float)divisor);
      break;
    }
    case DTRT_F8E5M2: {
      uint8_t *q = buf;
      q[i] = floatToF8e5m2(f8e5m2ToFloat(q[i]) / (float)divisor);
      break;
    }
    }
}
