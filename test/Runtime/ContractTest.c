/* The runtime's contractions (dtrt_mlir_contract_*) against a plain loop
 * nest, without MLIR: random loop nests (batch, row, column and reduced
 * loops, loops of one operand only, empty loops), random strided layouts
 * (transposed, gapped, broadcast), accumulating and overwriting, in f32,
 * f64 and bf16. Inputs are small multiples of 1/4, so every product and
 * sum here is exact in each type and results must match exactly. */
#include "dtensor-rt/Runtime.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANK 4

typedef struct Operand {
  int rank;
  int loop[MAX_RANK];
  int64_t stride[MAX_RANK];
  int64_t elems; /* of the buffer */
  int64_t desc[3 + 2 * MAX_RANK];
} Operand;

static unsigned next(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 8) & 0xffffff;
}

static double load(const void *p, DtrtDtype t, int64_t i) {
  double v;
  dtrtConvert((const char *)p + (size_t)i * dtrtDtypeSize(t), t, &v, DTRT_F64,
              1);
  return v;
}

static void store(void *p, DtrtDtype t, int64_t i, double v) {
  dtrtConvert(&v, DTRT_F64, (char *)p + (size_t)i * dtrtDtypeSize(t), t, 1);
}

/* A random layout of `rank` dims over loops of `extent`: dims in a random
 * order of memory, each stride the product of the faster ones' extents,
 * sometimes doubled (a gap) or 0 (a broadcast dim of extent 1... or more). */
static void layout(Operand *o, const int64_t *extent, unsigned *seed) {
  int order[MAX_RANK];
  for (int d = 0; d < o->rank; ++d)
    order[d] = d;
  for (int d = o->rank - 1; d > 0; --d) {
    int j = (int)(next(seed) % (unsigned)(d + 1)), t = order[d];
    order[d] = order[j];
    order[j] = t;
  }
  int64_t s = 1;
  for (int i = 0; i < o->rank; ++i) {
    int d = order[i];
    unsigned kind = next(seed) % 8;
    o->stride[d] = kind == 0 ? 0 : s * (kind == 1 ? 2 : 1);
    s = (o->stride[d] ? o->stride[d] : s) * (extent[o->loop[d]] + 1);
  }
  o->elems = s + 1;
}

static int64_t offsetOf(const Operand *o, const int64_t *idx) {
  int64_t off = 0;
  for (int d = 0; d < o->rank; ++d)
    off += idx[o->loop[d]] * o->stride[d];
  return off;
}

static bool odometer(int n, const int64_t *extent, int64_t *idx) {
  for (int i = n - 1; i >= 0; --i) {
    if (++idx[i] < extent[i])
      return true;
    idx[i] = 0;
  }
  return false;
}

static bool runCase(unsigned seed, DtrtDtype t) {
  unsigned s = seed;
  int loops = 1 + (int)(next(&s) % 4);
  int64_t extent[MAX_RANK];
  for (int l = 0; l < loops; ++l)
    extent[l] = next(&s) % 16 == 0 ? 0 : 1 + (int64_t)(next(&s) % 6);
  /* Each operand reads a random subset of the loops, in random order;
   * every loop is read by someone (C takes the unread ones). */
  Operand ops[3];
  bool read[MAX_RANK] = {false};
  for (int o = 0; o < 3; ++o) {
    ops[o].rank = 0;
    for (int l = 0; l < loops; ++l)
      if (next(&s) % 2 || (o == 2 && !read[l])) {
        ops[o].loop[ops[o].rank++] = l;
        read[l] = true;
      }
    for (int d = ops[o].rank - 1; d > 0; --d) {
      int j = (int)(next(&s) % (unsigned)(d + 1)), tmp = ops[o].loop[d];
      ops[o].loop[d] = ops[o].loop[j];
      ops[o].loop[j] = tmp;
    }
    layout(&ops[o], extent, &s);
    /* A broadcast output would alias itself: outputs get no zero stride. */
    for (int d = 0; o == 2 && d < ops[o].rank; ++d)
      if (!ops[o].stride[d])
        layout(&ops[o], extent, &s), d = -1;
  }
  bool overwrite = next(&s) % 2;
  size_t es = dtrtDtypeSize(t);
  void *buf[3];
  for (int o = 0; o < 3; ++o) {
    buf[o] = malloc((size_t)ops[o].elems * es);
    for (int64_t i = 0; i < ops[o].elems; ++i)
      store(buf[o], t, i, (double)((int)(next(&s) % 9) - 4) / 4);
    int64_t *d = ops[o].desc;
    d[0] = d[1] = (int64_t)(intptr_t)buf[o];
    d[2] = 0;
    for (int k = 0; k < ops[o].rank; ++k) {
      d[3 + k] = extent[ops[o].loop[k]];
      d[3 + ops[o].rank + k] = ops[o].stride[k];
    }
  }
  /* The reference, on a copy of C. */
  double *want = malloc((size_t)ops[2].elems * sizeof(double));
  for (int64_t i = 0; i < ops[2].elems; ++i)
    want[i] = load(buf[2], t, i);
  int64_t idx[MAX_RANK] = {0};
  bool empty = false;
  for (int l = 0; l < loops; ++l)
    empty |= !extent[l];
  if (overwrite) {
    int64_t cext[MAX_RANK], cidx[MAX_RANK] = {0};
    bool cEmpty = false;
    for (int d = 0; d < ops[2].rank; ++d)
      cEmpty |= !(cext[d] = extent[ops[2].loop[d]]);
    while (!cEmpty) {
      int64_t off = 0;
      for (int d = 0; d < ops[2].rank; ++d)
        off += cidx[d] * ops[2].stride[d];
      want[off] = 0;
      if (!odometer(ops[2].rank, cext, cidx))
        break;
    }
  }
  while (!empty) {
    want[offsetOf(&ops[2], idx)] += load(buf[0], t, offsetOf(&ops[0], idx)) *
                                    load(buf[1], t, offsetOf(&ops[1], idx));
    if (!odometer(loops, extent, idx))
      break;
  }
  int64_t maps[1 + 3 * MAX_RANK], n = 0;
  maps[n++] = loops;
  for (int o = 0; o < 3; ++o)
    for (int d = 0; d < ops[o].rank; ++d)
      maps[n++] = ops[o].loop[d];
  int64_t mapsDesc[5] = {(int64_t)(intptr_t)maps, (int64_t)(intptr_t)maps, 0, n,
                         1};
  if (t == DTRT_F32)
    dtrt_mlir_contract_f32_f32_f32(overwrite, 1, mapsDesc, ops[0].rank,
                                   ops[0].desc, ops[1].rank, ops[1].desc,
                                   ops[2].rank, ops[2].desc);
  else if (t == DTRT_F64)
    dtrt_mlir_contract_f64_f64_f64(overwrite, 1, mapsDesc, ops[0].rank,
                                   ops[0].desc, ops[1].rank, ops[1].desc,
                                   ops[2].rank, ops[2].desc);
  else
    dtrt_mlir_contract_bf16_bf16_bf16(overwrite, 1, mapsDesc, ops[0].rank,
                                      ops[0].desc, ops[1].rank, ops[1].desc,
                                      ops[2].rank, ops[2].desc);
  bool ok = true;
  for (int64_t i = 0; i < ops[2].elems && ok; ++i) {
    /* bf16 holds the exact sums here only while they stay small. */
    double got = load(buf[2], t, i), w = want[i];
    double tol = t == DTRT_BF16 ? (w < 0 ? -w : w) / 128 : 0;
    if ((got - w > tol || w - got > tol)) {
      fprintf(stderr,
              "case %u (%s, %d loops, overwrite %d): element %lld is "
              "%g, want %g\n",
              seed, dtrtDtypeName(t), loops, overwrite, (long long)i, got, w);
      ok = false;
    }
  }
  for (int o = 0; o < 3; ++o)
    free(buf[o]);
  free(want);
  return ok;
}

int main(void) {
  int failed = 0, cases = 0;
  DtrtDtype types[3] = {DTRT_F32, DTRT_F64, DTRT_BF16};
  for (unsigned seed = 1; seed <= 3000; ++seed, ++cases)
    failed += !runCase(seed, types[seed % 3]);
  printf("%d contraction cases, %d failed\n", cases, failed);
  return failed != 0;
}
