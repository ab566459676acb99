/* The column-major call the GPU's contractions hand to cuBLAS
 * (dtrtGemmPlan, lib/Runtime/Cublas.c), checked without a GPU: the call is
 * carried out by a naive column-major GEMM with cuBLAS's meaning of each
 * argument (op, leading dimension, batch stride) and compared with the
 * row-major product C = A B of the strided views, for A, B and C each
 * row-major, column-major (a transposed view) or padded, vectors, and
 * batches; a view with no unit stride is refused (it needs a packed
 * copy). */
#include "Runtime/RuntimeInternal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../Unit/Check.h"

/* cuBLAS's op(X)(i, j) of a column-major matrix with leading dimension ld. */
static double at(const double *x, int op, int64_t ld, int64_t i, int64_t j) {
  return op ? x[j + i * ld] : x[i + j * ld];
}

/* What cuBLAS computes for `g` (beta 0), on f64 buffers. */
static void carryOut(const DtrtGemmCall *g, int64_t batch) {
  for (int64_t p = 0; p < batch; ++p) {
    const double *f = (const double *)g->first + p * g->strideFirst;
    const double *s = (const double *)g->second + p * g->strideSecond;
    double *o = (double *)g->out + p * g->strideOut;
    for (int64_t i = 0; i < g->m; ++i)
      for (int64_t j = 0; j < g->n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < g->k; ++l)
          sum += at(f, g->opFirst, g->ldFirst, i, l) *
                 at(s, g->opSecond, g->ldSecond, l, j);
        o[i + j * g->ldOut] = sum;
      }
  }
}

static double *element(DtrtMat x, int64_t p, int64_t r, int64_t c) {
  return (double *)x.p + p * x.bs + r * x.rs + c * x.cs;
}

/* A view of `rows` x `cols` in `storage`: row-major (layout 0),
 * column-major (1), or row-major with padded rows (2). */
static DtrtMat view(double *storage, int layout, int64_t rows, int64_t cols) {
  DtrtMat x = {(char *)storage, DTRT_F64, rows, cols, cols, 1, 0};
  if (layout == 1)
    x.rs = 1, x.cs = rows;
  if (layout == 2)
    x.rs = cols + 3;
  x.bs = layout == 2 ? rows * (cols + 3) : rows * cols;
  return x;
}

static int checkCase(int64_t m, int64_t n, int64_t k, int la, int lb, int lc,
                     int64_t batch) {
  double *sa = calloc((size_t)(batch * m * (k + 3)), sizeof(double));
  double *sb = calloc((size_t)(batch * k * (n + 3)), sizeof(double));
  double *sc = calloc((size_t)(batch * m * (n + 3)), sizeof(double));
  DtrtMat a = view(sa, la, m, k), b = view(sb, lb, k, n),
          c = view(sc, lc, m, n);
  for (int64_t p = 0; p < batch; ++p) {
    for (int64_t r = 0; r < m; ++r)
      for (int64_t l = 0; l < k; ++l)
        *element(a, p, r, l) = (double)((r * 7 + l * 3 + p) % 11) - 5;
    for (int64_t l = 0; l < k; ++l)
      for (int64_t j = 0; j < n; ++j)
        *element(b, p, l, j) = (double)((l * 5 + j * 2 + p) % 13) - 6;
  }
  DtrtGemmCall g;
  int bad = 0;
  if (!dtrtGemmPlan(a, b, c, &g)) {
    bad = 1;
  } else {
    carryOut(&g, batch);
    for (int64_t p = 0; p < batch; ++p)
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j) {
          double want = 0;
          for (int64_t l = 0; l < k; ++l)
            want += *element(a, p, r, l) * *element(b, p, l, j);
          bad += fabs(*element(c, p, r, j) - want) > 1e-9;
        }
  }
  if (bad)
    fprintf(stderr,
            "cublas-plan: %lldx%lldx%lld layouts A %d B %d C %d batch %lld: "
            "%d wrong\n",
            (long long)m, (long long)n, (long long)k, la, lb, lc,
            (long long)batch, bad);
  free(sa);
  free(sb);
  free(sc);
  return bad;
}

int main(void) {
  static const int64_t shapes[][3] = {{5, 4, 3}, {1, 6, 4}, {6, 1, 4},
                                      {1, 1, 7}, {8, 8, 1}, {3, 9, 5}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); ++s)
    for (int la = 0; la < 3; ++la)
      for (int lb = 0; lb < 3; ++lb)
        for (int lc = 0; lc < 3; ++lc)
          for (int64_t batch = 1; batch <= 3; batch += 2)
            CHECK(checkCase(shapes[s][0], shapes[s][1], shapes[s][2], la, lb,
                            lc, batch) == 0);
  /* No unit stride: refused (the caller packs it). */
  double storage[64] = {0};
  DtrtMat strided = {(char *)storage, DTRT_F64, 3, 3, 6, 2, 0};
  DtrtMat dense = {(char *)storage, DTRT_F64, 3, 3, 3, 1, 0};
  DtrtGemmCall g;
  CHECK(!dtrtGemmPlan(strided, dense, dense, &g));
  CHECK(!dtrtGemmPlan(dense, strided, dense, &g));
  CHECK(!dtrtGemmPlan(dense, dense, strided, &g));
  printf("cublas-plan-test: %d passed, %d failed\n", checks - failures,
         failures);
  return failures != 0;
}
