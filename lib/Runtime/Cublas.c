/* Contractions of GPU programs on cuBLAS: Contract.c hands over each batch
 * of products whose operands are device memory (dtrtCublasGemm). libcublas
 * is loaded with dlopen at the first call, as the driver is (Cuda.c), so
 * the runtime builds and runs without it; a GPU program that reaches a
 * contraction where it cannot be loaded stops with the loader's message.
 *
 * Row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets B first,
 * each operand not transposed when its rows have unit stride (its memory
 * is its transpose in column-major order), transposed when its columns do.
 * One strided-batched call per batch; the calls go on the default stream,
 * which the program's streams (made blocking) wait for, and which waits for
 * them. */
#include "RuntimeInternal.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* cuBLAS's types and constants, as cublas_api.h and library_types.h
 * declare them (not included: the runtime builds without CUDA). */
typedef int Status;
typedef struct CublasContext *Handle;
enum {
  kOpN = 0,             /* CUBLAS_OP_N */
  kOpT = 1,             /* CUBLAS_OP_T */
  kCompute32F = 68,     /* CUBLAS_COMPUTE_32F */
  kCompute32FTf32 = 77, /* CUBLAS_COMPUTE_32F_FAST_TF32 */
  kCompute64F = 70,     /* CUBLAS_COMPUTE_64F */
  kGemmDefault = -1,    /* CUBLAS_GEMM_DEFAULT */
  kR32F = 0,            /* CUDA_R_32F */
  kR64F = 1,            /* CUDA_R_64F */
  kR16F = 2,            /* CUDA_R_16F */
  kR16BF = 14,          /* CUDA_R_16BF */
};

typedef struct Cublas {
  Status (*create)(Handle *);
  Status (*setStream)(Handle, void *);
  Status (*gemm)(Handle, int, int, int, int, int, const void *, const void *,
                 int, int, long long, const void *, int, int, long long,
                 const void *, void *, int, int, long long, int, int, int);
  const char *(*statusString)(Status);
} Cublas;

static const char *const kSymbols[] = {"cublasCreate_v2", "cublasSetStream_v2",
                                       "cublasGemmStridedBatchedEx",
                                       "cublasGetStatusString"};

static Cublas blas;
static Handle handle;

/* Loads libcublas (its soname, then CUDA's usual directories) and makes
 * this process's handle on the default stream. */
static void load(void) {
  if (handle)
    return;
  static const char *const kNames[] = {"libcublas.so.13", "libcublas.so.12",
                                       "libcublas.so",
                                       "/usr/local/cuda/lib64/libcublas.so.13",
                                       "/usr/local/cuda/lib64/libcublas.so.12"};
  void *lib = NULL;
  char firstError[256] = "";
  for (size_t i = 0; !lib && i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
    lib = dlopen(kNames[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib && !firstError[0])
      snprintf(firstError, sizeof(firstError), "%s", dlerror());
  }
  if (!lib)
    dtrtCudaFatal("a contraction on the GPU needs cuBLAS: %s", firstError);
  void **slots = (void **)&blas;
  for (size_t i = 0; i < sizeof(kSymbols) / sizeof(kSymbols[0]); ++i)
    if (!(slots[i] = dlsym(lib, kSymbols[i])))
      dtrtCudaFatal("libcublas has no %s (too old)", kSymbols[i]);
  Status s = blas.create(&handle);
  if (s == 0)
    s = blas.setStream(handle, NULL);
  if (s != 0)
    dtrtCudaFatal("cublasCreate: %s", blas.statusString(s));
}

static int cudaType(DtrtDtype t) {
  switch (t) {
  case DTRT_F64:
    return kR64F;
  case DTRT_F16:
    return kR16F;
  case DTRT_BF16:
    return kR16BF;
  default:
    return kR32F;
  }
}

static int fits(int64_t v, const char *what) {
  if (v < 0 || v > INT_MAX)
    dtrtCudaFatal("a contraction on the GPU: %s %lld is past cuBLAS's 32-bit "
                  "sizes",
                  what, (long long)v);
  return (int)v;
}

bool dtrtGemmPlan(DtrtMat a, DtrtMat b, DtrtMat c, DtrtGemmCall *out) {
  int64_t ldc, lda, ldb;
  if (dtrtMatOrientation(&c, &ldc) == DTRT_MAT_COL) {
    /* C^T = B^T A^T, with C^T's rows of unit stride. */
    dtrtMatTransposeProduct(&a, &b, &c);
  }
  int oa = dtrtMatOrientation(&a, &lda), ob = dtrtMatOrientation(&b, &ldb);
  if (oa == DTRT_MAT_PACK || ob == DTRT_MAT_PACK ||
      dtrtMatOrientation(&c, &ldc) == DTRT_MAT_PACK)
    return false;
  /* Row-major C (m x n) is column-major C^T (n x m) = B^T A^T: cuBLAS's
   * first operand is B, read as it lies (N) when its rows have unit stride,
   * transposed (T) when its columns do; its second is A, likewise. */
  *out = (DtrtGemmCall){.opFirst = ob == DTRT_MAT_ROW ? 0 : 1,
                        .opSecond = oa == DTRT_MAT_ROW ? 0 : 1,
                        .m = c.cols,
                        .n = c.rows,
                        .k = a.cols,
                        .first = b.p,
                        .second = a.p,
                        .out = c.p,
                        .ldFirst = ldb,
                        .ldSecond = lda,
                        .ldOut = ldc,
                        .strideFirst = b.bs,
                        .strideSecond = a.bs,
                        .strideOut = c.bs,
                        .typeFirst = b.type,
                        .typeSecond = a.type,
                        .typeOut = c.type};
  return true;
}

void dtrtCublasGemm(DtrtMat a, DtrtMat b, int beta, DtrtMat c, int64_t batch) {
  if (!c.rows || !c.cols || !batch)
    return;
  DtrtGemmCall g;
  if (!dtrtGemmPlan(a, b, c, &g))
    dtrtCudaFatal("a contraction on the GPU: an operand without a unit "
                  "stride reached cuBLAS");
  load();
  bool f64 = g.typeOut == DTRT_F64;
  const char *tf32 = getenv("DTENSOR_TF32");
  bool fast = g.typeFirst == DTRT_F32 && g.typeSecond == DTRT_F32 && tf32 &&
              tf32[0] == '1' && !tf32[1];
  int compute = f64 ? kCompute64F : fast ? kCompute32FTf32 : kCompute32F;
  float alpha32 = 1.0f, beta32 = (float)beta;
  double alpha64 = 1.0, beta64 = (double)beta;
  const void *alpha = f64 ? (const void *)&alpha64 : (const void *)&alpha32;
  const void *betaPtr = f64 ? (const void *)&beta64 : (const void *)&beta32;
  Status s = blas.gemm(
      handle, g.opFirst ? kOpT : kOpN, g.opSecond ? kOpT : kOpN, fits(g.m, "m"),
      fits(g.n, "n"), fits(g.k, "k"), alpha, g.first, cudaType(g.typeFirst),
      fits(g.ldFirst, "a leading dimension"), (long long)g.strideFirst,
      g.second, cudaType(g.typeSecond), fits(g.ldSecond, "a leading dimension"),
      (long long)g.strideSecond, betaPtr, g.out, cudaType(g.typeOut),
      fits(g.ldOut, "a leading dimension"), (long long)g.strideOut,
      fits(batch, "the batch"), compute, kGemmDefault);
  if (s != 0)
    dtrtCudaFatal("cublasGemmStridedBatchedEx (%lld x %lld x %lld, batch "
                  "%lld): %s",
                  (long long)c.rows, (long long)c.cols, (long long)a.cols,
                  (long long)batch, blas.statusString(s));
}
