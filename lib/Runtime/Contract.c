/* Contractions of compiled programs on BLAS (dtrt_mlir_contract_*).
 * dtensor-lower-contractions hands over the three memrefs of C += A·B and
 * the loop each of their dims reads. The loops are classified by the
 * operands they appear in — A and C: rows (M), B and C: columns (N), A and
 * B: reduced (K), all three: batch — and the largest M, N and K loop go to
 * one BLAS call per point of the other loops, which are iterated around it
 * (each call accumulates into C, or writes a C block at its first visit
 * when the output was a zero fill, so any loop nest stays exact). A matrix
 * BLAS can read in place (a unit stride, a leading dimension from the other
 * stride) is passed as it is, transposed when its unit stride is the row
 * one; one it cannot (no unit stride, a broadcast, bf16, f16) is packed
 * into a contiguous f32/f64 copy. Device memory (a GPU program's) goes to
 * cuBLAS instead (Cublas.c), batched over the largest other loop of C.
 * Only this file includes cblas.h; OpenBLAS itself is loaded at the first
 * contraction (blas()). */
#include "RuntimeInternal.h"
#include "Support/Support.h"

#include <cblas.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LOOPS DTRT_CONTRACT_MAX_LOOPS

typedef DtrtMat Mat;

static void fatal(const char *format, const char *detail) {
  fprintf(stderr, "dtensor runtime: contraction: ");
  fprintf(stderr, format, detail);
  fputc('\n', stderr);
  exit(1);
}

/* ---- OpenBLAS, loaded when first used ------------------------------------ */

/* OpenBLAS is loaded by name (its SONAME, found when building) when a
 * process first contracts or sets its thread count, not linked: at load it
 * starts a thread per core that spins a tenth of a second, which a process
 * that only compiles (dtensor-opt, which has the runtime through
 * libdtensor) paid for nothing (6-9 % of a 10^4-block dtensor-spmd on our
 * 2-core VMs). */
#define BLAS_FUNCTIONS(X)                                                      \
  X(cblas_sgemm)                                                               \
  X(cblas_dgemm)                                                               \
  X(cblas_sgemv)                                                               \
  X(cblas_dgemv)                                                               \
  X(cblas_sdot)                                                                \
  X(cblas_ddot)                                                                \
  X(openblas_set_num_threads)

typedef struct Blas {
#define BLAS_FIELD(f) __typeof__(f) *f;
  BLAS_FUNCTIONS(BLAS_FIELD)
#undef BLAS_FIELD
} Blas;

static Blas blasFunctions;
static pthread_once_t blasLoaded = PTHREAD_ONCE_INIT;

static void loadBlas(void) {
  static const char *const names[] = {
#define BLAS_NAME(f) #f,
      BLAS_FUNCTIONS(BLAS_NAME)
#undef BLAS_NAME
  };
  enum { N = sizeof(names) / sizeof(names[0]) };
  void *symbols[N];
  DtensorDiag diag;
  if (!dtLoadSymbols(DTENSOR_OPENBLAS_SONAME, names, N, symbols, &diag))
    fatal("%s", diag.message);
  int i = 0;
#define BLAS_SET(f)                                                            \
  blasFunctions.f = (__typeof__(blasFunctions.f))(uintptr_t)symbols[i++];
  BLAS_FUNCTIONS(BLAS_SET)
#undef BLAS_SET
}

static const Blas *blas(void) {
  pthread_once(&blasLoaded, loadBlas);
  return &blasFunctions;
}

/* ---- threads ------------------------------------------------------------- */

/* `name` in LLVM's OpenMP runtime if a program loaded it: among the
 * process's global symbols (the JIT loads it so), else in the library a
 * bundle's shared object, loaded locally, brought in. */
static void (*ompFunction(const char *name))(int) {
  void *f = dlsym(RTLD_DEFAULT, name);
  void *lib = f ? NULL : dlopen("libomp.so.5", RTLD_NOW | RTLD_NOLOAD);
  if (lib) {
    f = dlsym(lib, name);
    dlclose(lib); /* NOLOAD took a reference; the program keeps its own */
  }
  return (void (*)(int))(uintptr_t)f;
}

void dtrtSetComputeThreads(int threads) {
  blas()->openblas_set_num_threads(threads > 0 ? threads : 1);
  /* Loops in threads (dtensor-to-llvm{threads=true}) run on LLVM's OpenMP
   * runtime, loaded with such a program: the same count, and workers that
   * sleep at once after a loop rather than spin (200 ms by default) on the
   * cores BLAS and the other ranks use. */
  void (*ompThreads)(int) = ompFunction("omp_set_num_threads");
  void (*blockTime)(int) = ompFunction("kmp_set_blocktime");
  if (ompThreads)
    ompThreads(threads > 0 ? threads : 1);
  if (blockTime && !getenv("KMP_BLOCKTIME"))
    blockTime(0);
}

/* DTENSOR_THREADS, else this rank's share of the cores it may run on
 * (LOCAL_WORLD_SIZE ranks on this host); OPENBLAS_NUM_THREADS set by the
 * user is OpenBLAS's own. */
static void initThreads(void) {
  const char *t = getenv("DTENSOR_THREADS");
  if (t && *t) {
    char *end;
    long n = strtol(t, &end, 10);
    if (*end || n < 1 || n > 4096)
      fatal("DTENSOR_THREADS='%s' is not a thread count (1 to 4096)", t);
    dtrtSetComputeThreads((int)n);
    return;
  }
  if (getenv("OPENBLAS_NUM_THREADS"))
    return;
  long cores = dtCoresToRunOn();
  const char *local = getenv("LOCAL_WORLD_SIZE");
  long ranks = local ? strtol(local, NULL, 10) : 1;
  if (ranks < 1)
    ranks = 1;
  long share = cores / ranks;
  dtrtSetComputeThreads(share < 1 ? 1 : (int)share);
}

/* The process the thread count was set for: a rank forked from a process
 * that already ran a contraction (dtensor-run's reference) sets its own. */
static pid_t threadsSetFor;

void dtrtEnsureComputeThreads(void) {
  if (threadsSetFor != getpid()) {
    threadsSetFor = getpid();
    initThreads();
  }
}

/* ---- BLAS in one compute type -------------------------------------------- */

static int blasInt(int64_t v) {
  if (v > INT_MAX)
    fatal("%s exceeds BLAS's 32-bit sizes", "a dimension or stride");
  return (int)v;
}

/* Row-major C(m x n) = op(A) op(B) + beta C (beta 0 or 1): `ta`/`tb` say
 * whether A/B are stored transposed (their unit stride is the row
 * stride). */
static void gemm(DtrtDtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const void *a, int64_t lda, const void *b, int64_t ldb,
                 int beta, void *c, int64_t ldc) {
  enum CBLAS_TRANSPOSE opA = ta ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE opB = tb ? CblasTrans : CblasNoTrans;
  if (t == DTRT_F32)
    blas()->cblas_sgemm(CblasRowMajor, opA, opB, blasInt(m), blasInt(n),
                        blasInt(k), 1.0f, a, blasInt(lda), b, blasInt(ldb),
                        (float)beta, c, blasInt(ldc));
  else
    blas()->cblas_dgemm(CblasRowMajor, opA, opB, blasInt(m), blasInt(n),
                        blasInt(k), 1.0, a, blasInt(lda), b, blasInt(ldb),
                        (double)beta, c, blasInt(ldc));
}

/* y(m) = op(A) x(k) + beta y, A stored m x k (or k x m when `ta`). */
static void gemv(DtrtDtype t, bool ta, int64_t m, int64_t k, const void *a,
                 int64_t lda, const void *x, int64_t incx, int beta, void *y,
                 int64_t incy) {
  int rows = blasInt(ta ? k : m), cols = blasInt(ta ? m : k);
  if (t == DTRT_F32)
    blas()->cblas_sgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, rows,
                        cols, 1.0f, a, blasInt(lda), x, blasInt(incx),
                        (float)beta, y, blasInt(incy));
  else
    blas()->cblas_dgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, rows,
                        cols, 1.0, a, blasInt(lda), x, blasInt(incx),
                        (double)beta, y, blasInt(incy));
}

static void dot(DtrtDtype t, int64_t k, const void *x, int64_t incx,
                const void *y, int64_t incy, int beta, void *out) {
  if (t == DTRT_F32) {
    float d =
        blas()->cblas_sdot(blasInt(k), x, blasInt(incx), y, blasInt(incy));
    *(float *)out = beta ? *(float *)out + d : d;
  } else {
    double d =
        blas()->cblas_ddot(blasInt(k), x, blasInt(incx), y, blasInt(incy));
    *(double *)out = beta ? *(double *)out + d : d;
  }
}

/* ---- views BLAS can read ------------------------------------------------- */

enum { PACK = DTRT_MAT_PACK, ROW = DTRT_MAT_ROW, COL = DTRT_MAT_COL };

/* How BLAS reads `x` in place: ROW (unit column stride; leading dimension
 * the row stride), COL (unit row stride, read transposed) or PACK. A dim
 * of extent 1 takes any stride. */
int dtrtMatOrientation(const Mat *x, int64_t *ld) {
  int64_t rowLd = x->rows == 1 ? x->cols : x->rs;
  if ((x->cols == 1 || x->cs == 1) && rowLd >= x->cols && rowLd >= 1) {
    *ld = rowLd;
    return ROW;
  }
  int64_t colLd = x->cols == 1 ? x->rows : x->cs;
  if ((x->rows == 1 || x->rs == 1) && colLd >= x->rows && colLd >= 1) {
    *ld = colLd;
    return COL;
  }
  return PACK;
}

static Mat transposed(Mat x) {
  return (Mat){x.p, x.type, x.cols, x.rows, x.cs, x.rs, x.bs};
}

void dtrtMatTransposeProduct(Mat *a, Mat *b, Mat *c) {
  Mat at = transposed(*b), bt = transposed(*a);
  *a = at;
  *b = bt;
  *c = transposed(*c);
}

/* Copies `x` into a contiguous row-major matrix of `type` (converting),
 * or back (`unpack`: from `dense` into `x`). */
static void copyDense(Mat x, char *dense, DtrtDtype type, bool unpack) {
  size_t es = dtrtDtypeSize(x.type), ds = dtrtDtypeSize(type);
  for (int64_t r = 0; r < x.rows; ++r) {
    char *row = dense + (size_t)(r * x.cols) * ds;
    if (x.cs == 1 || x.cols == 1) {
      char *src = x.p + (size_t)(r * x.rs) * es;
      if (unpack)
        dtrtConvert(row, type, src, x.type, (size_t)x.cols);
      else
        dtrtConvert(src, x.type, row, type, (size_t)x.cols);
      continue;
    }
    for (int64_t c = 0; c < x.cols; ++c) {
      char *e = x.p + (size_t)(r * x.rs + c * x.cs) * es;
      if (unpack)
        dtrtConvert(row + (size_t)c * ds, type, e, x.type, 1);
      else
        dtrtConvert(e, x.type, row + (size_t)c * ds, type, 1);
    }
  }
}

/* `x` as BLAS reads it in compute type `t`: in place, or a packed copy
 * (kept in `*owned` for the caller to free). */
static Mat readable(Mat x, DtrtDtype t, void **owned, int *outOrient,
                    int64_t *outLd) {
  *owned = NULL;
  int o = x.type == t ? dtrtMatOrientation(&x, outLd) : PACK;
  if (o == PACK) {
    size_t bytes = (size_t)(x.rows * x.cols) * dtrtDtypeSize(t);
    char *dense = malloc(bytes ? bytes : 1);
    if (!dense)
      fatal("cannot allocate %s for a packed operand", "memory");
    copyDense(x, dense, t, false);
    *owned = dense;
    x = (Mat){dense, t, x.rows, x.cols, x.cols, 1, 0};
    o = dtrtMatOrientation(&x, outLd);
  }
  *outOrient = o;
  return x;
}

/* C(m x n) = A(m x k) B(k x n) + beta C in compute type `t` (f32 or f64);
 * k > 0 (an empty product is the caller's). */
static void multiply(DtrtDtype t, Mat a, Mat b, int beta, Mat c) {
  if (!c.rows || !c.cols)
    return;
  /* A one-row product is the transposed one-column product (gemv). */
  if (c.rows == 1 && c.cols > 1) {
    dtrtMatTransposeProduct(&a, &b, &c);
  }
  int64_t ldc;
  int oc = c.type == t ? dtrtMatOrientation(&c, &ldc) : PACK;
  if (oc == COL) {
    /* C^T = B^T A^T, with C^T row-major. */
    dtrtMatTransposeProduct(&a, &b, &c);
  }
  void *ownA, *ownB, *ownC;
  int oa, ob;
  int64_t lda, ldb;
  Mat ra = readable(a, t, &ownA, &oa, &lda);
  Mat rb = readable(b, t, &ownB, &ob, &ldb);
  Mat rc = readable(c, t, &ownC, &oc, &ldc);
  int64_t m = c.rows, n = c.cols, k = a.cols;
  /* In place or packed, a vector's stride is at least 1 here (a
   * broadcast operand, stride 0, is packed). */
  if (m == 1 && n == 1) {
    dot(t, k, ra.p, k == 1 ? 1 : ra.cs, rb.p, k == 1 ? 1 : rb.rs, beta, rc.p);
  } else if (n == 1) {
    gemv(t, oa == COL, m, k, ra.p, lda, rb.p, k == 1 ? 1 : rb.rs, beta, rc.p,
         rc.rs);
  } else {
    gemm(t, oa == COL, ob == COL, m, n, k, ra.p, lda, rb.p, ldb, beta, rc.p,
         ldc);
  }
  if (ownC)
    copyDense(c, ownC, t, true);
  free(ownA);
  free(ownB);
  free(ownC);
}

/* ---- the loop nest around the BLAS call ---------------------------------- */

/* A strided memref descriptor as MLIR lowers it. */
typedef struct Descriptor {
  char *allocated, *aligned;
  int64_t offset;
  int64_t sizesAndStrides[];
} Descriptor;

typedef struct Nest {
  int numLoops;
  int64_t extent[MAX_LOOPS];
  int64_t stride[3][MAX_LOOPS]; /* per operand and loop; 0: not read */
  bool in[3][MAX_LOOPS];
  char *base[3];
  DtrtDtype type[3];
} Nest;

/* Reads the maps and the operands' descriptors into `nest`. */
static void readNest(const int64_t *maps, int64_t numMaps, const int64_t *ranks,
                     void *const *descs, const DtrtDtype *types, Nest *nest) {
  memset(nest, 0, sizeof(*nest));
  if (numMaps < 1 || maps[0] < 0 || maps[0] > MAX_LOOPS)
    fatal("%s", "more loops than the runtime takes (16) or none");
  nest->numLoops = (int)maps[0];
  for (int l = 0; l < nest->numLoops; ++l)
    nest->extent[l] = -1;
  int64_t at = 1;
  for (int o = 0; o < 3; ++o) {
    const Descriptor *d = descs[o];
    int64_t rank = ranks[o];
    if (rank < 0 || at + rank > numMaps)
      fatal("%s", "the maps do not match the operands' ranks");
    nest->type[o] = types[o];
    nest->base[o] = d->aligned + d->offset * (int64_t)dtrtDtypeSize(types[o]);
    for (int64_t dim = 0; dim < rank; ++dim) {
      int64_t l = maps[at + dim], size = d->sizesAndStrides[dim];
      if (l < 0 || l >= nest->numLoops || nest->in[o][l])
        fatal("%s", "a map is not a projected permutation");
      if (nest->extent[l] >= 0 && nest->extent[l] != size)
        fatal("%s", "two dims of one loop have different sizes");
      nest->extent[l] = size;
      nest->in[o][l] = true;
      nest->stride[o][l] = d->sizesAndStrides[rank + dim];
    }
    at += rank;
  }
  if (at != numMaps)
    fatal("%s", "the maps do not match the operands' ranks");
  for (int l = 0; l < nest->numLoops; ++l)
    if (nest->extent[l] < 0)
      fatal("%s", "a loop no operand reads");
}

/* Merges loops that are one in memory: two loops read by the same
 * operands where, in each of them, the outer one's stride is the inner
 * one's times its extent (a GEMM whose rows were split by a reshape into
 * batch x sequence, say) become one loop, so that BLAS gets one large
 * product instead of many small ones. */
static void mergeLoops(Nest *nest) {
  for (bool merged = true; merged;) {
    merged = false;
    for (int u = 0; u < nest->numLoops && !merged; ++u)
      for (int v = 0; v < nest->numLoops && !merged; ++v) {
        if (u == v || nest->extent[u] < 2 || nest->extent[v] < 2)
          continue;
        bool same = true, readAny = false;
        for (int o = 0; o < 3 && same; ++o) {
          same = nest->in[o][u] == nest->in[o][v] &&
                 (!nest->in[o][u] ||
                  nest->stride[o][u] == nest->stride[o][v] * nest->extent[v]);
          readAny |= nest->in[o][u];
        }
        if (!same || !readAny)
          continue;
        /* u (outer) and v (inner) are one loop of stride v's. */
        nest->extent[v] *= nest->extent[u];
        int last = nest->numLoops - 1;
        for (int o = 0; o < 3; ++o) {
          nest->in[o][u] = nest->in[o][last];
          nest->stride[o][u] = nest->stride[o][last];
        }
        nest->extent[u] = nest->extent[last];
        if (v == last)
          v = u;
        --nest->numLoops;
        merged = true;
      }
  }
}

/* The largest loop read by exactly operands `x` and `y` (-1: none). */
static int pickLoop(const Nest *nest, int x, int y) {
  int best = -1;
  for (int l = 0; l < nest->numLoops; ++l) {
    int count = nest->in[0][l] + nest->in[1][l] + nest->in[2][l];
    if (count == 2 && nest->in[x][l] && nest->in[y][l] &&
        (best < 0 || nest->extent[l] > nest->extent[best]))
      best = l;
  }
  return best;
}

static int64_t extentOf(const Nest *nest, int l) {
  return l < 0 ? 1 : nest->extent[l];
}

static int64_t strideOf(const Nest *nest, int o, int l) {
  return l < 0 ? 0 : nest->stride[o][l];
}

/* Steps `idx` over `loops` (odometer, last fastest); false after the
 * last point. */
static bool nextPoint(const Nest *nest, const int *loops, int count,
                      int64_t *idx) {
  for (int i = count - 1; i >= 0; --i) {
    if (++idx[i] < nest->extent[loops[i]])
      return true;
    idx[i] = 0;
  }
  return false;
}

/* C = 0 (an overwritten C of an empty product): all-zero bits are zero in
 * every element type. */
static void zeroOutput(const Nest *nest, size_t es) {
  int loops[MAX_LOOPS], count = 0;
  for (int l = 0; l < nest->numLoops; ++l)
    if (nest->in[2][l])
      loops[count++] = l;
  int64_t idx[MAX_LOOPS] = {0};
  do {
    int64_t off = 0;
    for (int i = 0; i < count; ++i)
      off += idx[i] * nest->stride[2][loops[i]];
    memset(nest->base[2] + off * (int64_t)es, 0, es);
  } while (nextPoint(nest, loops, count, idx));
}

/* ---- on the GPU ---------------------------------------------------------- */

/* The elements `x` spans from its first (a view's strides are not
 * negative). */
static int64_t spanOf(const Mat *x) {
  if (!x->rows || !x->cols)
    return 0;
  if (x->rs < 0 || x->cs < 0)
    fatal("%s", "a negative stride on the GPU");
  return (x->rows - 1) * x->rs + (x->cols - 1) * x->cs + 1;
}

static void *hostRoom(size_t bytes) {
  void *p = malloc(bytes + 1);
  if (!p)
    fatal("cannot allocate %s to pack a GPU operand", "host memory");
  return p;
}

/* What `x` spans, copied to the host (in order after the device's work). */
static char *spanToHost(const Mat *x, size_t bytes) {
  char *host = hostRoom(bytes);
  dtrtCudaCopy2D(host, bytes, x->p, bytes, bytes, 1);
  dtrtCudaWait();
  return host;
}

/* A device matrix with no unit stride (a view with two strided dims, rare)
 * as a dense device copy, made through the host; `*owned` gets it. */
static Mat denseOnDevice(Mat x, void **owned) {
  size_t es = dtrtDtypeSize(x.type);
  size_t bytes = (size_t)(x.rows * x.cols) * es;
  Mat host = x;
  host.p = spanToHost(&x, (size_t)spanOf(&x) * es);
  char *dense = hostRoom(bytes);
  copyDense(host, dense, x.type, false);
  *owned = dtrtCudaScratch(bytes, false);
  dtrtCudaCopy2D(*owned, bytes, dense, bytes, bytes, 1);
  dtrtCudaWait();
  free(host.p);
  free(dense);
  return (Mat){*owned, x.type, x.rows, x.cols, x.cols, 1, 0};
}

/* Writes `dense` (denseOnDevice's copy of `x`, computed) back into `x`. */
static void denseBack(Mat x, void *dense) {
  size_t es = dtrtDtypeSize(x.type), span = (size_t)spanOf(&x) * es;
  size_t bytes = (size_t)(x.rows * x.cols) * es;
  Mat host = x;
  host.p = spanToHost(&x, span);
  char *values = hostRoom(bytes);
  dtrtCudaCopy2D(values, bytes, dense, bytes, bytes, 1);
  dtrtCudaWait();
  copyDense(host, values, x.type, true);
  dtrtCudaCopy2D(x.p, span, host.p, span, span, 1);
  dtrtCudaWait();
  free(host.p);
  free(values);
}

/* C = A B + beta C for `batch` products on the GPU: one cuBLAS call, or,
 * when an operand has no unit stride, one per product on dense copies. */
static void multiplyOnDevice(Mat a, Mat b, int beta, Mat c, int64_t batch) {
  int64_t ld;
  bool packA = dtrtMatOrientation(&a, &ld) == PACK;
  bool packB = dtrtMatOrientation(&b, &ld) == PACK;
  bool packC = dtrtMatOrientation(&c, &ld) == PACK;
  if (!packA && !packB && !packC) {
    dtrtCublasGemm(a, b, beta, c, batch);
    return;
  }
  for (int64_t i = 0; i < batch; ++i) {
    Mat x[3] = {a, b, c};
    void *owned[3] = {NULL, NULL, NULL};
    bool pack[3] = {packA, packB, packC};
    Mat use[3];
    for (int o = 0; o < 3; ++o) {
      x[o].p += i * x[o].bs * (int64_t)dtrtDtypeSize(x[o].type);
      x[o].bs = 0;
      use[o] = pack[o] ? denseOnDevice(x[o], &owned[o]) : x[o];
    }
    dtrtCublasGemm(use[0], use[1], beta, use[2], 1);
    if (packC)
      denseBack(x[2], owned[2]);
    for (int o = 0; o < 3; ++o)
      if (owned[o])
        dtrtCudaScratchFree(owned[o]);
  }
}

/* zeroOutput for C in device memory, through a host copy of its span. */
static void zeroOutputOnDevice(Nest *nest, size_t es) {
  int64_t span = 1;
  for (int l = 0; l < nest->numLoops; ++l)
    if (nest->in[2][l] && nest->extent[l] > 0)
      span += (nest->extent[l] - 1) * nest->stride[2][l];
  Mat whole = {nest->base[2], nest->type[2], 1, span, span, 1, 0};
  char *device = nest->base[2];
  nest->base[2] = spanToHost(&whole, (size_t)span * es);
  zeroOutput(nest, es);
  dtrtCudaCopy2D(device, (size_t)span * es, nest->base[2], (size_t)span * es,
                 (size_t)span * es, 1);
  dtrtCudaWait();
  free(nest->base[2]);
  nest->base[2] = device;
}

static void contract(DtrtDtype ta, DtrtDtype tb, DtrtDtype tc,
                     int64_t overwrite, void *mapsDesc, int64_t aRank,
                     void *aDesc, int64_t bRank, void *bDesc, int64_t cRank,
                     void *cDesc) {
  dtrtEnsureComputeThreads();
  const Descriptor *md = mapsDesc;
  const int64_t *maps = (const int64_t *)md->aligned + md->offset;
  int64_t ranks[3] = {aRank, bRank, cRank};
  void *descs[3] = {aDesc, bDesc, cDesc};
  DtrtDtype types[3] = {ta, tb, tc};
  Nest nest;
  readNest(maps, md->sizesAndStrides[0], ranks, descs, types, &nest);
  mergeLoops(&nest);
  enum { A, B, C };
  int m = pickLoop(&nest, A, C), n = pickLoop(&nest, B, C),
      k = pickLoop(&nest, A, B);
  DtrtDtype compute = tc == DTRT_F64 ? DTRT_F64 : DTRT_F32;
  size_t es[3] = {dtrtDtypeSize(ta), dtrtDtypeSize(tb), dtrtDtypeSize(tc)};
  /* A GPU program's operands are device memory: cuBLAS. */
  bool device = dtrtCudaIsDevicePointer(nest.base[C]);
  /* The other loops, iterated around the call. An empty loop of C: no
   * output; an empty reduction: nothing added (an overwritten C is 0). */
  int outer[MAX_LOOPS], numOuter = 0;
  bool emptyProduct = false;
  for (int l = 0; l < nest.numLoops; ++l) {
    if (!nest.extent[l] && nest.in[C][l])
      return;
    emptyProduct |= !nest.extent[l];
    if (l != m && l != n && l != k)
      outer[numOuter++] = l;
  }
  if (emptyProduct) {
    if (overwrite && device)
      zeroOutputOnDevice(&nest, es[C]);
    else if (overwrite)
      zeroOutput(&nest, es[C]);
    return;
  }
  if (device && (!dtrtCudaIsDevicePointer(nest.base[A]) ||
                 !dtrtCudaIsDevicePointer(nest.base[B])))
    fatal("%s", "a contraction of device and host memory");
  /* On the GPU the largest other loop of C is cuBLAS's batch (its
   * products write distinct blocks of C). */
  int batch = -1;
  for (int i = 0; device && i < numOuter; ++i)
    if (nest.in[C][outer[i]] &&
        (batch < 0 || nest.extent[outer[i]] > nest.extent[batch]))
      batch = outer[i];
  for (int i = 0; batch >= 0 && i < numOuter; ++i)
    if (outer[i] == batch) {
      outer[i] = outer[--numOuter];
      break;
    }
  int64_t idx[MAX_LOOPS] = {0};
  do {
    /* An overwritten C block is written (beta 0) at its first visit: the
     * one where every loop C does not read is at 0 (visits are in
     * lexicographic order). */
    int beta = !overwrite;
    for (int i = 0; i < numOuter && !beta; ++i)
      beta = !nest.in[C][outer[i]] && idx[i];
    char *p[3];
    for (int o = 0; o < 3; ++o) {
      int64_t off = 0;
      for (int i = 0; i < numOuter; ++i)
        off += idx[i] * nest.stride[o][outer[i]];
      p[o] = nest.base[o] + off * (int64_t)es[o];
    }
    Mat a = {p[A],
             ta,
             extentOf(&nest, m),
             extentOf(&nest, k),
             strideOf(&nest, A, m),
             strideOf(&nest, A, k),
             strideOf(&nest, A, batch)};
    Mat b = {p[B],
             tb,
             extentOf(&nest, k),
             extentOf(&nest, n),
             strideOf(&nest, B, k),
             strideOf(&nest, B, n),
             strideOf(&nest, B, batch)};
    Mat c = {p[C],
             tc,
             extentOf(&nest, m),
             extentOf(&nest, n),
             strideOf(&nest, C, m),
             strideOf(&nest, C, n),
             strideOf(&nest, C, batch)};
    if (device)
      multiplyOnDevice(a, b, beta, c, extentOf(&nest, batch));
    else
      multiply(compute, a, b, beta, c);
  } while (nextPoint(&nest, outer, numOuter, idx));
}

void dtrtMatmulF32(int64_t m, int64_t n, int64_t k, const float *a,
                   const float *b, float *c) {
  dtrtEnsureComputeThreads();
  Mat ma = {(char *)a, DTRT_F32, m, k, k, 1, 0};
  Mat mb = {(char *)b, DTRT_F32, k, n, n, 1, 0};
  Mat mc = {(char *)c, DTRT_F32, m, n, n, 1, 0};
  multiply(DTRT_F32, ma, mb, 0, mc);
}

#define DTRT_DTYPE_f32 DTRT_F32
#define DTRT_DTYPE_f64 DTRT_F64
#define DTRT_DTYPE_bf16 DTRT_BF16
#define DTRT_DTYPE_f16 DTRT_F16
#define DTRT_DEFINE_CONTRACT(a, b, c)                                          \
  void dtrt_mlir_contract_##a##_##b##_##c(                                     \
      int64_t overwrite, int64_t mapsRank, void *mapsDesc, int64_t aRank,      \
      void *aDesc, int64_t bRank, void *bDesc, int64_t cRank, void *cDesc) {   \
    (void)mapsRank;                                                            \
    contract(DTRT_DTYPE_##a, DTRT_DTYPE_##b, DTRT_DTYPE_##c, overwrite,        \
             mapsDesc, aRank, aDesc, bRank, bDesc, cRank, cDesc);              \
  }
DTRT_CONTRACT_TYPES(DTRT_DEFINE_CONTRACT)
