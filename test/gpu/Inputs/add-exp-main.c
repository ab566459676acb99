/* Calls the compiled @f of add-exp.mlir (exp(a + b) on 64x128) through its
 * C entry point and checks every element; exit 0 when they match. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct Memref2 {
  float *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} Memref2;

void _mlir_ciface_f(Memref2 *result, Memref2 *a, Memref2 *b);

int main(void) {
  enum { R = 64, C = 128 };
  static float a[R * C], b[R * C];
  for (int i = 0; i < R * C; ++i) {
    a[i] = (float)(i % 7) * 0.125f;
    b[i] = (float)(i % 5) * -0.0625f;
  }
  Memref2 ma = {a, a, 0, {R, C}, {C, 1}}, mb = {b, b, 0, {R, C}, {C, 1}};
  Memref2 out;
  _mlir_ciface_f(&out, &ma, &mb);
  int wrong = 0;
  for (int i = 0; i < R * C; ++i)
    wrong += fabsf(out.aligned[out.offset + i] - expf(a[i] + b[i])) > 1e-5f;
  printf("add-exp: %d of %d elements equal exp(a + b)\n", R * C - wrong, R * C);
  free(out.allocated);
  return wrong != 0;
}
