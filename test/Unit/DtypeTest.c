/* The runtime's element types and reductions (DTRT_DTYPE_LIST and
 * DTRT_REDUCE_LIST in dtensor-rt/Runtime.h) and the compiler's
 * (DtensorElementType, DtensorReduceKind) map by name: every runtime type
 * has a compiler type of the same name and size, every reduction a kind of
 * the same name, names parse back, and the numbers are those compiled
 * programs and the Python package pass (f32 0 ... i64 5, i8 6 ... ui8 9,
 * f8E4M3FN 10, f8E5M2 11; sum 0 ... prod 4); and the f8 conversions
 * (dtrtConvert) round as arith.truncf: every code decodes and encodes back,
 * and known values, ties, overflows and NaNs land where APFloat puts
 * them. */
#include "dtensor-c/Layout.h"
#include "dtensor-rt/Runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "Check.h"

int main(void) {
  static const char *const kAbi[] = {"f32", "f64", "f16",      "bf16",
                                     "i32", "i64", "i8",       "i16",
                                     "i1",  "ui8", "f8E4M3FN", "f8E5M2"};
  int n = 0;
#define DTRT_DTYPE_COUNT(e, name, size) ++n;
  DTRT_DTYPE_LIST(DTRT_DTYPE_COUNT)
#undef DTRT_DTYPE_COUNT
  CHECK(n == (int)(sizeof(kAbi) / sizeof(kAbi[0])));
  for (int code = 0; code < n; ++code) {
    DtrtDtype t = (DtrtDtype)code, back;
    const char *name = dtrtDtypeName(t);
    CHECK(!strcmp(name, kAbi[code]));
    CHECK(dtrtDtypeParse(name, &back) && back == t);
    DtensorElementType et = DTENSOR_F32;
    CHECK(dtensorElementTypeParse(name, &et));
    CHECK(dtensorElementTypeGetSize(et) == dtrtDtypeSize(t));
    CHECK(!strcmp(dtensorElementTypeGetName(et), name));
  }
  /* The typed entry points: one per type, in the list's order, each
   * suffix the type's name. */
  int typed = 0;
#define DTRT_TYPED_CHECK(suffix, code)                                         \
  CHECK((int)(code) == typed++ && !strcmp(dtrtDtypeName(code), #suffix));
  DTRT_TYPED_SUFFIXES(DTRT_TYPED_CHECK)
#undef DTRT_TYPED_CHECK
  CHECK(typed == n);
  /* Reductions: the compiler's kinds (but none) and the runtime's share
   * names and order. */
  int reductions = 0;
#define DTRT_REDUCE_CHECK(e, name)                                             \
  {                                                                            \
    DtensorReduceKind kind = DTENSOR_REDUCE_NONE;                              \
    DtrtReduce back = DTRT_PROD;                                               \
    CHECK(dtensorReduceKindParse(name, strlen(name), &kind));                  \
    CHECK(!strcmp(dtensorReduceKindGetName(kind), name));                      \
    CHECK(dtrtReduceParse(name, strlen(name), &back) && back == e);            \
    CHECK((int)e == reductions++);                                             \
  }
  DTRT_REDUCE_LIST(DTRT_REDUCE_CHECK)
#undef DTRT_REDUCE_CHECK
  CHECK(reductions == DTENSOR_NUM_REDUCE_KINDS - 1);
  DtrtReduce r;
  CHECK(!dtrtReduceParse("none", 4, &r) && !dtrtReduceParse("su", 2, &r));
  DtrtDtype t;
  CHECK(!dtrtDtypeParse("f8", &t) && !dtrtDtypeParse(NULL, &t));
  CHECK(dtrtDtypeSize((DtrtDtype)n) == 0 &&
        !strcmp(dtrtDtypeName((DtrtDtype)n), "?"));
  /* f8: every code through f32 and back (NaNs to their one pattern). */
  for (int code = 0; code < 256; ++code) {
    uint8_t b = (uint8_t)code, back8;
    float f;
    dtrtConvert(&b, DTRT_F8E4M3FN, &f, DTRT_F32, 1);
    dtrtConvert(&f, DTRT_F32, &back8, DTRT_F8E4M3FN, 1);
    CHECK(back8 == b || ((b & 0x7f) == 0x7f && back8 == b));
    dtrtConvert(&b, DTRT_F8E5M2, &f, DTRT_F32, 1);
    dtrtConvert(&f, DTRT_F32, &back8, DTRT_F8E5M2, 1);
    CHECK(back8 == b || (f != f && (back8 & 0x7f) == 0x7e));
  }
  /* Known values: E4M3FN's largest 448 (0x7e), 464 a tie to 448, beyond
   * NaN; its smallest subnormal 2^-9 (0x01), half of it a tie to 0;
   * 0.3 -> 0.3125 (0x2a, the nearer); E5M2's largest 57344 (0x7b), 61440
   * a tie to infinity (0x7c, even), -2^-16 (0x81). */
  static const struct {
    DtrtDtype t;
    float in;
    uint8_t want;
  } kCases[] = {{DTRT_F8E4M3FN, 448.0f, 0x7e},
                {DTRT_F8E4M3FN, 464.0f, 0x7e},
                {DTRT_F8E4M3FN, 465.0f, 0x7f},
                {DTRT_F8E4M3FN, -1e30f, 0xff},
                {DTRT_F8E4M3FN, 0.001953125f, 0x01},
                {DTRT_F8E4M3FN, 0.0009765625f, 0x00},
                {DTRT_F8E4M3FN, 0.3f, 0x2a},
                {DTRT_F8E4M3FN, -1.0f, 0xb8},
                {DTRT_F8E5M2, 57344.0f, 0x7b},
                {DTRT_F8E5M2, 61440.0f, 0x7c},
                {DTRT_F8E5M2, -1.52587890625e-05f, 0x81},
                {DTRT_F8E5M2, 1.0f, 0x3c}};
  for (size_t k = 0; k < sizeof(kCases) / sizeof(kCases[0]); ++k) {
    uint8_t got;
    dtrtConvert(&kCases[k].in, DTRT_F32, &got, kCases[k].t, 1);
    CHECK(got == kCases[k].want);
  }
  printf("dtype-test: %d types, %d passed, %d failed\n", n, checks - failures,
         failures);
  return failures != 0;
}
