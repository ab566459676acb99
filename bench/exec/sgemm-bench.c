/* The peer of the compiled GEMM (bench/exec/run.py): OpenBLAS's cblas_sgemm
 * called directly on row-major M x K and K x N f32 matrices, C = A B.
 * Prints the fastest of R calls in milliseconds. Threads: OpenBLAS's own
 * (OPENBLAS_NUM_THREADS). usage: sgemm-bench M N K [R] */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: sgemm-bench M N K [REPEATS]\n");
    return 2;
  }
  int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]);
  int reps = argc > 4 ? atoi(argv[4]) : 10;
  if (m < 1 || n < 1 || k < 1 || reps < 1) {
    fprintf(stderr, "sgemm-bench: sizes and repeats must be positive\n");
    return 2;
  }
  float *a = malloc(sizeof(float) * (size_t)m * (size_t)k);
  float *b = malloc(sizeof(float) * (size_t)k * (size_t)n);
  float *c = malloc(sizeof(float) * (size_t)m * (size_t)n);
  if (!a || !b || !c) {
    fprintf(stderr, "sgemm-bench: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < (size_t)m * (size_t)k; ++i)
    a[i] = (float)(i % 7) * 0.1f;
  for (size_t i = 0; i < (size_t)k * (size_t)n; ++i)
    b[i] = (float)(i % 5) * 0.1f;
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t = seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k,
                b, n, 0.0f, c, n);
    t = seconds() - t;
    best = t < best ? t : best;
  }
  printf("%.4f\n", best * 1e3);
  free(a);
  free(b);
  free(c);
  return 0;
}
