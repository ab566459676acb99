/* The ahead-of-time path end to end: examples/megatron.mlir compiled by
 * dtensor-compile into an object file, linked with this driver and
 * libdtensor_rt, and run by dtensor-run on 4 ranks. Each rank passes its
 * blocks under the program's layouts (x replicated, w1 split by columns,
 * w2 by rows) to _mlir_ciface_megatron and checks the replicated result
 * against a single-device product computed here in double precision. */
#include "dtensor-rt/Runtime.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct Memref2 {
  float *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} Memref2;

void _mlir_ciface_megatron(Memref2 *result, Memref2 *x, Memref2 *w1,
                           Memref2 *w2);

enum { M = 16, K = 64, H = 256, RANKS = 4, HB = H / RANKS };

static float input(int arg, int64_t linear) {
  return (float)((linear * 37 + arg * 11) % 101) / 101.0f - 0.5f;
}

static Memref2 view(float *data, int64_t rows, int64_t cols) {
  return (Memref2){data, data, 0, {rows, cols}, {cols, 1}};
}

int main(void) {
  /* The runtime knows the rank on every backend (mpirun sets no RANK). On
   * a job of another size the compiled entry stops with a message (its
   * dtrt_mlir_init checks the mesh), before any block is read. */
  int rank = dtrtRank(dtrtProcessContext());
  if (rank >= RANKS)
    rank = 0;
  static float x[M * K], w1[K * HB], w2[HB * K];
  for (int64_t i = 0; i < M * K; ++i)
    x[i] = input(0, i);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < HB; ++j)
      w1[k * HB + j] = input(1, k * H + rank * HB + j);
  for (int64_t j = 0; j < HB; ++j)
    for (int64_t n = 0; n < K; ++n)
      w2[j * K + n] = input(2, (rank * HB + j) * K + n);
  Memref2 vx = view(x, M, K), v1 = view(w1, K, HB), v2 = view(w2, HB, K), y;
  _mlir_ciface_megatron(&y, &vx, &v1, &v2);
  /* The reference on the global tensors. */
  static double h[M * H];
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < H; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += (double)input(0, i * K + k) * input(1, k * H + j);
      h[i * H + j] = acc;
    }
  int bad = 0;
  double maxErr = 0;
  if (y.sizes[0] != M || y.sizes[1] != K) {
    fprintf(stderr, "rank %d: result is %lldx%lld, not %dx%d\n", rank,
            (long long)y.sizes[0], (long long)y.sizes[1], M, K);
    return 1;
  }
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < K; ++n) {
      double want = 0;
      for (int64_t j = 0; j < H; ++j)
        want += h[i * H + j] * input(2, j * K + n);
      double got = y.aligned[y.offset + i * y.strides[0] + n * y.strides[1]];
      double err = fabs(got - want);
      maxErr = err > maxErr ? err : maxErr;
      bad += !(err <= 1e-4 * fabs(want) + 1e-4);
    }
  printf("rank %d: %d of %d result elements differ from the single-device "
         "product (max abs error %.3g)\n",
         rank, bad, M * K, maxErr);
  free(y.allocated);
  return bad ? 1 : 0;
}
