/* The runtime's element types and reductions (DTRT_DTYPE_LIST and
 * DTRT_REDUCE_LIST in dtensor-rt/Runtime.h) and the compiler's
 * (DtensorElementType, DtensorReduceKind) map by name: every runtime type
 * has a compiler type of the same name and size, every reduction a kind of
 * the same name, names parse back, and the numbers are those compiled
 * programs and the Python package pass (f32 0 ... i64 5, i8 6 ... ui8 9;
 * sum 0 ... prod 4). */
#include "dtensor-c/Layout.h"
#include "dtensor-rt/Runtime.h"

#include <stdio.h>
#include <string.h>

#include "Check.h"

int main(void) {
  static const char *const kAbi[] = {"f32", "f64", "f16", "bf16", "i32",
                                     "i64", "i8",  "i16", "i1",   "ui8"};
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
  printf("dtype-test: %d types, %d passed, %d failed\n", n, checks - failures,
         failures);
  return failures != 0;
}
