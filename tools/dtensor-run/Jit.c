/* dtensor-run PROG.mlir: compiles an annotated program twice with the
 * ExecutionEngine — as the single-device reference (annotations dropped) and
 * with dtensor-spmd for the mesh — then runs the SPMD program on N ranks
 * (forked after compiling, so it is compiled once) with inputs built from
 * one deterministic global array per argument, each rank getting its block
 * under its argument's layout, and checks every rank's result block against
 * the reference (floats: rtol 1e-4; integers: exactly). Tensors of f32,
 * f64, i32 and i64, any number of results (docs/runtime.md). Under
 * --backend mpi, mpirun starts one such process per rank, each compiling
 * the program and running its own rank. */
#include "Run.h"

#include "dtensor-c/Dialect.h"
#include "dtensor-c/Passes.h"
#include "dtensor-rt/Checkpoint.h"
#include "dtensor-rt/Runtime.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/ExecutionEngine.h"
#include "mlir-c/Pass.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct Tensor {
  char name[128]; /* dtensor.name, or arg<i> / result<i> */
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK]; /* global */
  DtrtDtype elem;
  DtensorShardingSpec spec;
  bool sharded; /* has a layout in the partitioned signature */
} Tensor;

typedef struct Run {
  const char *entry;
  char ciface[300];
  MlirExecutionEngine spmd;
  DtensorMesh *mesh;
  int numArgs, numResults;
  /* numArgs and numResults of each (no fixed limit). */
  Tensor *args, *results;
  void **globals;
  const void **reference;
  int repeat;                    /* timed runs after the check */
  const char *loadDir, *saveDir; /* checkpoints, or NULL */
  char meshText[256];
} Run;

/* Elements as doubles, through the runtime's conversions (the entry's
 * types are f32, f64, f16, bf16, i32 and i64, all exact in a double here).
 * Inputs of f16 and bf16 are made as for f32 and rounded to the type. */
static bool elemIsFloat(DtrtDtype t) {
  return t == DTRT_F32 || t == DTRT_F64 || t == DTRT_F16 || t == DTRT_BF16;
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

static MlirLogicalResult report(MlirDiagnostic d, void *user) {
  (void)user;
  char text[2048];
  dtensorDiagnosticFormat(d, text, sizeof(text));
  fprintf(stderr, "%s\n", text);
  return mlirLogicalResultSuccess();
}

static bool nameIs(MlirOperation op, const char *name) {
  return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)),
                            mlirStringRefCreateFromCString(name));
}

static MlirOperation findEntry(MlirOperation module, const char *entry) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (!nameIs(op, "func.func") ||
        mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0))))
      continue;
    MlirStringRef name = mlirStringAttrGetValue(mlirOperationGetAttributeByName(
        op, mlirStringRefCreateFromCString("sym_name")));
    if (!entry ||
        mlirStringRefEqual(name, mlirStringRefCreateFromCString(entry)))
      return op;
  }
  return (MlirOperation){NULL};
}

/* Runs dtensor-spmd and/or dtensor-to-llvm on `module`. */
static bool runPipeline(MlirContext ctx, MlirOperation module, bool spmd,
                        bool toLLVM) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  DtensorDiag diag;
  bool ok = true;
  if (spmd)
    ok = mlirLogicalResultIsSuccess(
        dtensorAddSpmdPipeline(opm, mlirStringRefCreateFromCString(""), &diag));
  if (ok && toLLVM)
    ok = mlirLogicalResultIsSuccess(dtensorAddToLLVMPipeline(opm, &diag));
  if (!ok)
    fprintf(stderr, "dtensor-run: %s\n", diag.message);
  ok = ok && mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, module));
  mlirPassManagerDestroy(pm);
  return ok;
}

/* The deterministic global input: small values, integers for integer
 * types (so sums and products stay exact). */
static double inputValue(int arg, int64_t linear, DtrtDtype e) {
  int64_t v = (linear * 37 + arg * 11) % 101;
  return elemIsFloat(e) ? (double)v / 101.0 - 0.5 : (double)(v - 50);
}

/* What padding holds: NaN for floats, a huge value for integers, so a
 * program that let padding into a result differs from the reference. */
static double paddingValue(DtrtDtype e) { return elemIsFloat(e) ? NAN : 1e9; }

/* Room for `elements` elements of `t` (one more, so that 0 is fine),
 * zeroed; a size past this machine's memory, or an allocation that fails,
 * ends dtensor-run with the tensor and the size. */
static void *tensorAlloc(const Tensor *t, int64_t elements, const char *what) {
  size_t es = dtrtDtypeSize(t->elem);
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  double memory = pages > 0 && pageSize > 0 ? (double)pages * pageSize : 0;
  double bytes = ((double)elements + 1) * (double)es;
  void *p =
      elements < 0 || (memory > 0 && bytes > memory) || bytes > (double)SIZE_MAX
          ? NULL
          : calloc((size_t)elements + 1, es);
  if (!p) {
    double gib = 1024.0 * 1024 * 1024;
    if (memory > 0 && bytes > memory)
      fprintf(stderr,
              "dtensor-run: %s '%s' needs %.0f bytes (%.2f GiB), "
              "more than this machine's memory (%.2f GiB)\n",
              what, t->name, bytes, bytes / gib, memory / gib);
    else
      fprintf(stderr,
              "dtensor-run: %s '%s' needs %.0f bytes (%.2f GiB), "
              "which could not be allocated\n",
              what, t->name, bytes, bytes / gib);
    exit(1);
  }
  return p;
}

static int64_t *descriptor(void *data, int rank, const int64_t *shape) {
  int64_t *d = calloc((size_t)(3 + 2 * rank), sizeof(int64_t));
  d[0] = d[1] = (int64_t)(intptr_t)data;
  d[2] = 0;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    d[3 + i] = shape[i];
    d[3 + rank + i] = stride;
    stride *= shape[i];
  }
  return d;
}

static int64_t product(int rank, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    n *= shape[i];
  return n;
}

static int64_t ravel(int rank, const int64_t *shape, const int64_t *idx) {
  int64_t l = 0;
  for (int i = 0; i < rank; ++i)
    l = l * shape[i] + idx[i];
  return l;
}

static void unravel(int64_t l, int rank, const int64_t *shape, int64_t *idx) {
  for (int i = rank - 1; i >= 0; --i) {
    idx[i] = l % shape[i];
    l /= shape[i];
  }
}

/* Invokes `fn` (a c-interface function) on `args`. Its memref results come
 * back through the first argument, one descriptor after the other (a struct
 * of descriptors when there are several); `outData` gets each result's
 * first element, or, when NULL, the results are freed. */
static bool invoke(MlirExecutionEngine jit, const char *fn, int64_t **argDescs,
                   int numArgs, const Tensor *results, int numResults,
                   const void **outData) {
  size_t words = 0;
  for (int k = 0; k < numResults; ++k)
    words += 3 + 2 * (size_t)results[k].rank;
  int64_t *packed = calloc(words + 1, sizeof(int64_t));
  void **slots = calloc((size_t)numArgs + 1, sizeof(void *));
  void **ptrs = calloc((size_t)numArgs + 1, sizeof(void *));
  if (!packed || !slots || !ptrs) {
    fprintf(stderr, "dtensor-run: out of memory\n");
    exit(1);
  }
  ptrs[0] = packed;
  slots[0] = &ptrs[0];
  for (int i = 0; i < numArgs; ++i) {
    ptrs[i + 1] = argDescs[i];
    slots[i + 1] = &ptrs[i + 1];
  }
  if (mlirLogicalResultIsFailure(mlirExecutionEngineInvokePacked(
          jit, mlirStringRefCreateFromCString(fn), slots))) {
    fprintf(stderr, "dtensor-run: cannot call '%s'\n", fn);
    free(packed);
    free(slots);
    free(ptrs);
    return false;
  }
  free(slots);
  free(ptrs);
  const int64_t *d = packed;
  for (int k = 0; k < numResults; ++k) {
    if (outData)
      outData[k] = (const char *)(intptr_t)d[1] +
                   d[2] * (int64_t)dtrtDtypeSize(results[k].elem);
    else /* the caller owns results (buffer-deallocation-pipeline) */
      free((void *)(intptr_t)d[0]);
    d += 3 + 2 * results[k].rank;
  }
  if (!outData)
    free(packed);
  return true;
}

static bool layoutOf(const Run *r, const Tensor *t, DtensorLayout *out) {
  DtensorShardingSpec spec = t->spec;
  if (!t->sharded)
    dtensorShardingSpecInitReplicated(t->rank, &spec);
  return dtensorLayoutInit(r->mesh, &spec, t->rank, t->shape, DTENSOR_F32, out,
                           NULL);
}

/* Calls `visit(e, g)` for each element `e` of this rank's padded block of
 * `t` that holds real data, with its global linear index `g` (-1 for
 * padding). */
typedef void (*VisitFn)(void *user, int64_t e, int64_t g);
static int64_t forBlock(const Run *r, const Tensor *t, int rank, VisitFn visit,
                        void *user) {
  DtensorLayout l;
  layoutOf(r, t, &l);
  int64_t padded[DTENSOR_MAX_TENSOR_RANK], real[DTENSOR_MAX_TENSOR_RANK];
  dtensorLayoutGetMaxLocalShape(&l, padded);
  dtensorLayoutGetLocalShape(&l, rank, real);
  int64_t n = product(l.rank, padded);
  for (int64_t e = 0; e < n; ++e) {
    int64_t idx[DTENSOR_MAX_TENSOR_RANK], g[DTENSOR_MAX_TENSOR_RANK];
    unravel(e, l.rank, padded, idx);
    bool inside = true;
    for (int d = 0; d < l.rank; ++d)
      inside &= idx[d] < real[d];
    if (inside)
      dtensorLayoutLocalToGlobal(&l, rank, idx, g);
    visit(user, e, inside ? ravel(l.rank, l.shape, g) : -1);
  }
  return n;
}

typedef struct Fill {
  void *block;
  const void *global;
  DtrtDtype elem;
  bool neutral;        /* a pending sum or product this rank does not own */
  double neutralValue; /* 0 for a sum, 1 for a product */
} Fill;

static void fillElement(void *user, int64_t e, int64_t g) {
  Fill *f = user;
  store(f->block, f->elem, e,
        g < 0        ? paddingValue(f->elem)
        : f->neutral ? f->neutralValue
                     : load(f->global, f->elem, g));
}

/* The one reduce kind of `t`'s pending (Partial) mesh axes, NONE if it has
 * none; false (with a message) for several kinds, which no reduction of
 * the blocks turns into one global value. */
static bool partialKind(const Run *r, const Tensor *t, DtensorReduceKind *out) {
  *out = DTENSOR_REDUCE_NONE;
  if (!t->sharded)
    return true;
  for (int a = 0; a < dtensorMeshGetRank(r->mesh); ++a) {
    DtensorReduceKind k = t->spec.partial[a];
    if (k == DTENSOR_REDUCE_NONE)
      continue;
    if (*out != DTENSOR_REDUCE_NONE && *out != k) {
      fprintf(stderr,
              "dtensor-run: '%s' is pending reductions of two kinds; "
              "dtensor-run builds and checks one kind\n",
              t->name);
      return false;
    }
    *out = k;
  }
  return true;
}

/* Whether this rank's block of a Partial argument holds the neutral value
 * (a sum or product is given whole by the ranks at coordinate 0 of its
 * pending axes; max, min and avg by every rank). */
static bool ownsPartial(const Run *r, const Tensor *t, int rank,
                        DtensorReduceKind kind) {
  if (kind != DTENSOR_REDUCE_SUM && kind != DTENSOR_REDUCE_PROD)
    return true;
  int64_t coords[DTENSOR_MAX_MESH_RANK];
  dtensorMeshGetCoords(r->mesh, rank, coords);
  for (int a = 0; a < dtensorMeshGetRank(r->mesh); ++a)
    if (t->spec.partial[a] != DTENSOR_REDUCE_NONE && coords[a] != 0)
      return false;
  return true;
}

/* Resolves a Partial result block in place: one all_reduce per pending
 * mesh axis, so every rank holds the value the check compares. */
static bool resolvePartial(const Run *r, const Tensor *t, void *block,
                           int64_t count, DtensorReduceKind kind, int rank) {
  DtrtContext *c = dtrtProcessContext();
  int meshRank = dtensorMeshGetRank(r->mesh);
  int64_t shape[DTENSOR_MAX_MESH_RANK];
  for (int a = 0; a < meshRank; ++a)
    shape[a] = dtensorMeshGetAxisSize(r->mesh, a);
  for (int a = 0; a < meshRank; ++a) {
    if (t->spec.partial[a] == DTENSOR_REDUCE_NONE)
      continue;
    DtrtComm *comm;
    if (dtrtCommForMeshAxes(c, meshRank, shape, 1, &a, &comm) != DTRT_OK ||
        dtrtAllReduce(comm, block, block, (size_t)count, t->elem,
                      (DtrtReduce)(kind - 1)) != DTRT_OK) {
      fprintf(stderr, "dtensor-run: rank %d: resolving '%s': %s\n", rank,
              t->name, dtrtLastError(c));
      return false;
    }
  }
  return true;
}

typedef struct Compare {
  const void *got, *want;
  DtrtDtype elem;
  double scale; /* the reference's largest magnitude */
  double maxErr;
  int64_t bad, compared;
} Compare;

static void compareElement(void *user, int64_t e, int64_t g) {
  Compare *c = user;
  if (g < 0)
    return;
  double want = load(c->want, c->elem, g), got = load(c->got, c->elem, e);
  double err = fabs(got - want);
  if (isnan(err))
    err = INFINITY;
  if (err > c->maxErr)
    c->maxErr = err;
  /* Floats: within 1e-4 relative, or 1e-5 of the result's scale (sums of
   * many terms near zero keep the rounding of the large ones); f16 and
   * bf16 (11 and 8 significant bits, partial sums rounded to them in
   * collectives) within 2e-2 and 1e-2. */
  bool half = c->elem == DTRT_F16 || c->elem == DTRT_BF16;
  double rtol = half ? 2e-2 : 1e-4, stol = half ? 1e-2 : 1e-5;
  c->bad += elemIsFloat(c->elem)
                ? err > rtol * fabs(want) + stol * (c->scale > 1 ? c->scale : 1)
                : err != 0;
  ++c->compared;
}

/* "f32 16x64" for messages. */
static void typeText(DtrtDtype dtype, int rank, const int64_t *shape, char *out,
                     size_t size) {
  int n = snprintf(out, size, "%s ", dtrtDtypeName(dtype));
  for (int d = 0; d < rank && n > 0 && (size_t)n < size; ++d)
    n += snprintf(out + n, size - (size_t)n, "%s%lld", d ? "x" : "",
                  (long long)shape[d]);
  if (rank == 0 && n > 0 && (size_t)n < size)
    snprintf(out + n, size - (size_t)n, "scalar");
}

/* Reads argument `index` whole from the checkpoint (the reference's
 * input), after checking its element type and shape. */
static bool readArgument(const char *dir, const DtrtCheckpoint *c, int index,
                         const Tensor *t, void *out) {
  char err[512], want[128], have[128] = "";
  bool found = false, same = false;
  for (int i = 0; i < dtrtCheckpointNumTensors(c) && !found; ++i) {
    DtrtTensor saved;
    dtrtCheckpointGetTensor(c, i, &saved, NULL, NULL);
    found = !strcmp(saved.name, t->name);
    same = found && saved.dtype == t->elem && saved.rank == t->rank;
    for (int d = 0; same && d < t->rank; ++d)
      same = saved.shape[d] == t->shape[d];
    if (found)
      typeText(saved.dtype, saved.rank, saved.shape, have, sizeof(have));
  }
  typeText(t->elem, t->rank, t->shape, want, sizeof(want));
  if (!found) {
    fprintf(stderr,
            "dtensor-run: %s/%s: no tensor '%s' for argument %d of "
            "the entry (%s; name an argument with {dtensor.name = \"...\"})\n",
            dir, DTRT_CHECKPOINT_METADATA, t->name, index, want);
    return false;
  }
  if (!same) {
    fprintf(stderr,
            "dtensor-run: %s/%s: '%s' is %s, but argument %d of the "
            "entry is %s\n",
            dir, DTRT_CHECKPOINT_METADATA, t->name, have, index, want);
    return false;
  }
  size_t bytes = dtrtDtypeSize(t->elem) * (size_t)product(t->rank, t->shape);
  if (dtrtCheckpointReadTensor(dir, t->name, out, bytes, err, sizeof(err)) !=
      DTRT_OK) {
    fprintf(stderr, "dtensor-run: %s\n", err);
    return false;
  }
  return true;
}

/* Loads (or saves) the blocks of `tensors` — each an argument descriptor
 * or a result's first element — collectively under their layouts. */
static bool checkpointIo(const Run *r, const Tensor *tensors, int n,
                         void **data, bool save) {
  DtrtTensor *ts = calloc((size_t)n + 1, sizeof(DtrtTensor));
  char (*specs)[256] = calloc((size_t)n + 1, sizeof(*specs));
  if (!ts || !specs) {
    fprintf(stderr, "dtensor-run: out of memory\n");
    exit(1);
  }
  for (int i = 0; i < n; ++i) {
    const Tensor *t = &tensors[i];
    DtensorShardingSpec spec = t->spec;
    if (!t->sharded)
      dtensorShardingSpecInitReplicated(t->rank, &spec);
    dtensorShardingSpecPrint(&spec, specs[i], sizeof(specs[i]));
    void *block = save ? data[i] : (void *)(intptr_t)((int64_t *)data[i])[1];
    ts[i] = (DtrtTensor){t->name,     t->elem,  t->rank, t->shape,
                         r->meshText, specs[i], block};
  }
  DtrtContext *c = dtrtProcessContext();
  DtrtStatus s = save ? dtrtCheckpointSave(c, r->saveDir, n, ts)
                      : dtrtCheckpointLoad(c, r->loadDir, n, ts);
  free(ts);
  free(specs);
  if (s != DTRT_OK) {
    fprintf(stderr, "dtensor-run: rank %d: %s: %s\n", dtrtRank(c),
            save ? "save" : "load", dtrtLastError(c));
    return false;
  }
  return true;
}

static double monotonicSeconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compareTimes(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* --repeat: runs the entry `r->repeat` more times on the arguments as they
 * were before the checked run (restored before each step, untimed), every
 * step starting after a barrier of all ranks, and prints this rank's
 * fastest and median step. Results of the timed steps are freed, as a
 * training loop would. */
static void timeSteps(const Run *r, int rank, int64_t **descs,
                      void *const *saved, const size_t *bytes) {
  double *times = calloc((size_t)r->repeat, sizeof(double));
  if (!times) {
    fprintf(stderr, "dtensor-run: out of memory\n");
    exit(1);
  }
  DtrtContext *c = dtrtProcessContext();
  for (int s = 0; s < r->repeat; ++s) {
    for (int a = 0; a < r->numArgs; ++a)
      memcpy((void *)(intptr_t)descs[a][1], saved[a], bytes[a]);
    if (dtrtBarrier(dtrtCommWorld(c)) != DTRT_OK) {
      fprintf(stderr, "dtensor-run: rank %d: barrier: %s\n", rank,
              dtrtLastError(c));
      exit(1);
    }
    double t0 = monotonicSeconds();
    if (!invoke(r->spmd, r->ciface, descs, r->numArgs, r->results,
                r->numResults, NULL))
      exit(1);
    times[s] = monotonicSeconds() - t0;
  }
  qsort(times, (size_t)r->repeat, sizeof(double), compareTimes);
  printf("rank %d: step time min %.3f ms, median %.3f ms over %d runs\n", rank,
         1e3 * times[0], 1e3 * times[r->repeat / 2], r->repeat);
  fflush(stdout);
  free(times);
}

static int runRank(int rank, void *arg) {
  Run *r = arg;
  int64_t **descs = calloc((size_t)r->numArgs + 1, sizeof(int64_t *));
  void **saved = calloc((size_t)r->numArgs + 1, sizeof(void *));
  size_t *bytes = calloc((size_t)r->numArgs + 1, sizeof(size_t));
  const void **out = calloc((size_t)r->numResults, sizeof(void *));
  if (!descs || !saved || !bytes || !out) {
    fprintf(stderr, "dtensor-run: out of memory\n");
    exit(1);
  }
  for (int a = 0; a < r->numArgs; ++a) {
    const Tensor *t = &r->args[a];
    DtensorLayout l;
    layoutOf(r, t, &l);
    int64_t padded[DTENSOR_MAX_TENSOR_RANK];
    dtensorLayoutGetMaxLocalShape(&l, padded);
    DtensorReduceKind kind;
    if (!partialKind(r, t, &kind))
      exit(1);
    Fill f = {tensorAlloc(t, product(l.rank, padded), "the block of argument"),
              r->globals[a], t->elem, !ownsPartial(r, t, rank, kind),
              kind == DTENSOR_REDUCE_PROD ? 1.0 : 0.0};
    forBlock(r, t, rank, fillElement, &f);
    descs[a] = descriptor(f.block, l.rank, padded);
  }
  /* From a checkpoint: each rank reads its blocks (the padding stays as
   * filled above). */
  if (r->loadDir &&
      !checkpointIo(r, r->args, r->numArgs, (void **)descs, false))
    exit(1);
  /* The arguments as given, for the timed steps (the program may write
   * its arguments in place). */
  for (int a = 0; a < r->numArgs && r->repeat; ++a) {
    const Tensor *t = &r->args[a];
    DtensorLayout l;
    layoutOf(r, t, &l);
    int64_t padded[DTENSOR_MAX_TENSOR_RANK];
    dtensorLayoutGetMaxLocalShape(&l, padded);
    bytes[a] = (size_t)product(l.rank, padded) * dtrtDtypeSize(t->elem);
    saved[a] = tensorAlloc(t, product(l.rank, padded),
                           "the saved block of "
                           "argument");
    memcpy(saved[a], (void *)(intptr_t)descs[a][1], bytes[a]);
  }
  if (!invoke(r->spmd, r->ciface, descs, r->numArgs, r->results, r->numResults,
              out))
    exit(1);
  if (r->saveDir &&
      !checkpointIo(r, r->results, r->numResults, (void **)out, true))
    exit(1);
  /* Partial results: each rank holds a contribution; reduced here, so the
   * check sees the value the layout stands for. */
  for (int k = 0; k < r->numResults; ++k) {
    const Tensor *t = &r->results[k];
    DtensorReduceKind kind;
    if (!partialKind(r, t, &kind))
      exit(1);
    if (kind == DTENSOR_REDUCE_NONE)
      continue;
    DtensorLayout l;
    layoutOf(r, t, &l);
    int64_t padded[DTENSOR_MAX_TENSOR_RANK];
    dtensorLayoutGetMaxLocalShape(&l, padded);
    if (!resolvePartial(r, t, (void *)out[k], product(l.rank, padded), kind,
                        rank))
      exit(1);
  }
  Compare all = {NULL, NULL, DTRT_F32, 0, 0, 0, 0};
  for (int k = 0; k < r->numResults; ++k) {
    const Tensor *t = &r->results[k];
    double scale = 0;
    for (int64_t e = 0; e < product(t->rank, t->shape); ++e) {
      double v = fabs(load(r->reference[k], t->elem, e));
      scale = v > scale ? v : scale;
    }
    Compare c = {out[k], r->reference[k], t->elem, scale, 0, 0, 0};
    forBlock(r, &r->results[k], rank, compareElement, &c);
    all.maxErr = c.maxErr > all.maxErr ? c.maxErr : all.maxErr;
    all.bad += c.bad;
    all.compared += c.compared;
  }
  printf("rank %d: %lld result elements%s, %s the single-device run (max abs "
         "error %.3g)\n",
         rank, (long long)all.compared,
         r->numResults > 1 ? " (all results)" : "",
         all.bad ? "DIFFERENT from" : "equal to", all.maxErr);
  fflush(stdout);
  if (!all.bad && r->repeat)
    timeSteps(r, rank, descs, saved, bytes);
  exit(all.bad ? 1 : 0); /* runs the runtime's finalize */
}

static bool readSignature(Run *r, MlirOperation func) {
  MlirAttribute args = mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("arg_attrs"));
  MlirAttribute results = mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("res_attrs"));
  MlirType fnType = mlirTypeAttrGetValue(mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("function_type")));
  r->numArgs = (int)mlirFunctionTypeGetNumInputs(fnType);
  r->numResults = (int)mlirFunctionTypeGetNumResults(fnType);
  if (r->numResults < 1) {
    fprintf(stderr, "dtensor-run: the entry returns nothing; it must return "
                    "at least one tensor to compare\n");
    return false;
  }
  r->args = calloc((size_t)r->numArgs + 1, sizeof(Tensor));
  r->results = calloc((size_t)r->numResults, sizeof(Tensor));
  r->globals = calloc((size_t)r->numArgs + 1, sizeof(void *));
  r->reference = calloc((size_t)r->numResults, sizeof(void *));
  if (!r->args || !r->results || !r->globals || !r->reference) {
    fprintf(stderr, "dtensor-run: out of memory\n");
    return false;
  }
  for (int k = 0; k < r->numArgs + r->numResults; ++k) {
    bool isResult = k >= r->numArgs;
    int pos = isResult ? k - r->numArgs : k;
    Tensor *t = isResult ? &r->results[pos] : &r->args[pos];
    MlirType type = isResult ? mlirFunctionTypeGetResult(fnType, pos)
                             : mlirFunctionTypeGetInput(fnType, pos);
    MlirType et = mlirTypeIsARankedTensor(type)
                      ? mlirShapedTypeGetElementType(type)
                      : type;
    if (mlirTypeIsAF32(et))
      t->elem = DTRT_F32;
    else if (mlirTypeIsAF64(et))
      t->elem = DTRT_F64;
    else if (mlirTypeIsAF16(et))
      t->elem = DTRT_F16;
    else if (mlirTypeIsABF16(et))
      t->elem = DTRT_BF16;
    else if (mlirTypeIsAInteger(et) && mlirIntegerTypeGetWidth(et) == 32)
      t->elem = DTRT_I32;
    else if (mlirTypeIsAInteger(et) && mlirIntegerTypeGetWidth(et) == 64)
      t->elem = DTRT_I64;
    if (!mlirTypeIsARankedTensor(type) || et.ptr == type.ptr ||
        !(mlirTypeIsAF32(et) || mlirTypeIsAF64(et) || mlirTypeIsAF16(et) ||
          mlirTypeIsABF16(et) ||
          (mlirTypeIsAInteger(et) && (mlirIntegerTypeGetWidth(et) == 32 ||
                                      mlirIntegerTypeGetWidth(et) == 64)))) {
      fprintf(stderr,
              "dtensor-run: the entry's %s %d is not a ranked tensor "
              "of f32, f64, f16, bf16, i32 or i64, the types dtensor-run "
              "builds inputs for and compares\n",
              isResult ? "result" : "argument", pos);
      return false;
    }
    MlirAttribute list = isResult ? results : args;
    MlirAttribute dict =
        mlirAttributeIsNull(list) ? list : mlirArrayAttrGetElement(list, pos);
    MlirAttribute global =
        mlirAttributeIsNull(dict)
            ? dict
            : mlirDictionaryAttrGetElementByName(
                  dict, mlirStringRefCreateFromCString("dtensor.global_shape"));
    MlirAttribute layout =
        mlirAttributeIsNull(dict)
            ? dict
            : mlirDictionaryAttrGetElementByName(
                  dict, mlirStringRefCreateFromCString("dtensor.layout"));
    MlirAttribute nameAttr =
        mlirAttributeIsNull(dict)
            ? dict
            : mlirDictionaryAttrGetElementByName(
                  dict, mlirStringRefCreateFromCString("dtensor.name"));
    if (!mlirAttributeIsNull(nameAttr) && mlirAttributeIsAString(nameAttr)) {
      MlirStringRef v = mlirStringAttrGetValue(nameAttr);
      snprintf(t->name, sizeof(t->name), "%.*s", (int)v.length, v.data);
    } else {
      snprintf(t->name, sizeof(t->name), "%s%d", isResult ? "result" : "arg",
               pos);
    }
    t->rank = (int)mlirShapedTypeGetRank(type);
    for (int d = 0; d < t->rank; ++d)
      t->shape[d] = mlirAttributeIsNull(global)
                        ? mlirShapedTypeGetDimSize(type, d)
                        : mlirDenseI64ArrayGetElement(global, d);
    t->sharded = !mlirAttributeIsNull(layout);
    if (t->sharded) {
      DtensorLayoutAttrParts parts;
      DtensorDiag diag;
      if (!dtensorLayoutAttrGetParts(layout, &parts) ||
          !dtensorShardingSpecParse(parts.spec, r->mesh, &t->spec, &diag)) {
        fprintf(stderr, "dtensor-run: a layout of the entry does not read\n");
        return false;
      }
    }
  }
  return true;
}

static MlirOperation findMesh(MlirOperation module) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (nameIs(op, "dtensor.mesh"))
      return op;
  return (MlirOperation){NULL};
}

static void registerRuntime(MlirExecutionEngine jit) {
  static const struct {
    const char *name;
    void *fn;
  } kSymbols[] = {
      {"dtrt_mlir_collective_f32", (void *)dtrt_mlir_collective_f32},
      {"dtrt_mlir_collective_f64", (void *)dtrt_mlir_collective_f64},
      {"dtrt_mlir_collective_f16", (void *)dtrt_mlir_collective_f16},
      {"dtrt_mlir_collective_bf16", (void *)dtrt_mlir_collective_bf16},
      {"dtrt_mlir_collective_i32", (void *)dtrt_mlir_collective_i32},
      {"dtrt_mlir_collective_i64", (void *)dtrt_mlir_collective_i64},
      {"dtrt_mlir_permute_f32", (void *)dtrt_mlir_permute_f32},
      {"dtrt_mlir_permute_f64", (void *)dtrt_mlir_permute_f64},
      {"dtrt_mlir_permute_f16", (void *)dtrt_mlir_permute_f16},
      {"dtrt_mlir_permute_bf16", (void *)dtrt_mlir_permute_bf16},
      {"dtrt_mlir_permute_i32", (void *)dtrt_mlir_permute_i32},
      {"dtrt_mlir_permute_i64", (void *)dtrt_mlir_permute_i64},
      {"dtrt_mlir_mesh_coord", (void *)dtrt_mlir_mesh_coord},
      {"dtrt_mlir_init", (void *)dtrt_mlir_init},
      {"_mlir_memref_to_llvm_alloc", (void *)_mlir_memref_to_llvm_alloc},
      {"_mlir_memref_to_llvm_aligned_alloc",
       (void *)_mlir_memref_to_llvm_aligned_alloc},
      {"_mlir_memref_to_llvm_free", (void *)_mlir_memref_to_llvm_free},
#define DT_CONTRACT_SYMBOL(a, b, c)                                            \
  {"dtrt_mlir_contract_" #a "_" #b "_" #c,                                     \
   (void *)dtrt_mlir_contract_##a##_##b##_##c},
      DTRT_CONTRACT_TYPES(DT_CONTRACT_SYMBOL)
#undef DT_CONTRACT_SYMBOL
  };
  for (size_t k = 0; k < sizeof(kSymbols) / sizeof(kSymbols[0]); ++k)
    mlirExecutionEngineRegisterSymbol(
        jit, mlirStringRefCreateFromCString(kSymbols[k].name), kSymbols[k].fn);
}

/* Compiles PROG.mlir, computes the reference; then `mpiRank` < 0: launches
 * N ranks (shm); else runs that rank in this process (under mpirun). */
static int compileAndRun(const char *path, const DtRunOptions *o, int mpiRank) {
  const char *entry = o->entry;
  int n = o->n;
  MlirContext ctx = dtensorContextCreate();
  dtensorRegisterUpstreamPasses();
  mlirContextAttachDiagnosticHandler(ctx, report, NULL, NULL);
  DtensorDiag readDiag;
  MlirOperation spmd = dtensorSourceParseFile(ctx, path, &readDiag);
  if (mlirOperationIsNull(spmd)) {
    if (readDiag.message[0])
      fprintf(stderr, "dtensor-run: %s\n", readDiag.message);
    return 1;
  }
  static Run r;
  r.entry = entry;
  r.loadDir = o->loadDir;
  r.saveDir = o->saveDir;
  r.repeat = o->repeat;
  MlirOperation func = findEntry(spmd, entry);
  MlirOperation meshOp = findMesh(spmd);
  if (mlirOperationIsNull(meshOp)) {
    /* A program written for the shard dialect, or exported for GSPMD:
     * its grids and shardings, or mhlo.sharding strings, give the mesh
     * and layouts. */
    MlirPassManager pm = mlirPassManagerCreate(ctx);
    DtensorDiag diag;
    bool ok = mlirLogicalResultIsSuccess(dtensorPassManagerAddPipeline(
                  mlirPassManagerGetAsOpPassManager(pm),
                  mlirStringRefCreateFromCString(
                      "dtensor-import-shard, dtensor-import-gspmd"),
                  &diag)) &&
              mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, spmd));
    mlirPassManagerDestroy(pm);
    if (!ok)
      return 1;
    meshOp = findMesh(spmd);
  }
  if (mlirOperationIsNull(func) && entry) {
    fprintf(stderr, "dtensor-run: '%s' has no function '%s' (--entry)\n", path,
            entry);
    return 1;
  }
  if (mlirOperationIsNull(func) || mlirOperationIsNull(meshOp)) {
    fprintf(stderr, "dtensor-run: '%s' has no %s\n", path,
            mlirOperationIsNull(func) ? "entry function (a function with a "
                                        "body)"
                                      : "dtensor.mesh");
    return 1;
  }
  MlirStringRef fname = mlirStringAttrGetValue(mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("sym_name")));
  /* mlirExecutionEngineInvokePacked adds the "_mlir_ciface_" itself. */
  snprintf(r.ciface, sizeof(r.ciface), "%.*s", (int)fname.length, fname.data);
  DtensorDiag diag;
  r.mesh = dtensorMeshCreateFromOp(meshOp, &diag);
  if (!r.mesh) { /* said "run it with -n 0" before */
    fprintf(stderr, "dtensor-run: '%s': its dtensor.mesh is not valid: %s\n",
            path, diag.message);
    return 1;
  }
  if (dtensorMeshGetNumDevices(r.mesh) != n) {
    fprintf(stderr,
            "dtensor-run: the program's mesh has %lld devices; run "
            "it with -n %lld\n",
            r.mesh ? (long long)dtensorMeshGetNumDevices(r.mesh) : 0LL,
            r.mesh ? (long long)dtensorMeshGetNumDevices(r.mesh) : 0LL);
    return 2;
  }
  /* The reference: a copy without annotations, to LLVM. */
  MlirOperation ref = mlirOperationClone(spmd);
  dtensorStripToSingleDevice(ref);
  MlirOperation refFunc = findEntry(ref, entry);
  mlirOperationSetDiscardableAttributeByName(
      refFunc, mlirStringRefCreateFromCString("llvm.emit_c_interface"),
      mlirUnitAttrGet(ctx));
  mlirOperationSetDiscardableAttributeByName(
      func, mlirStringRefCreateFromCString("llvm.emit_c_interface"),
      mlirUnitAttrGet(ctx));
  if (!runPipeline(ctx, ref, false, true))
    return 1;
  /* The SPMD program: partitioned (its signature read), then to LLVM. */
  if (!runPipeline(ctx, spmd, true, false) ||
      !readSignature(&r, findEntry(spmd, entry)))
    return 1;
  if (!runPipeline(ctx, spmd, false, true))
    return 1;
  /* Bufferization may copy buffers with memrefCopy, from MLIR's C runner
   * utilities. */
  MlirStringRef libs[1] = {mlirStringRefCreateFromCString(
      DTENSOR_MLIR_LIB_DIR "/libmlir_c_runner_utils.so")};
  MlirExecutionEngine refJit = mlirExecutionEngineCreate(
      mlirModuleFromOperation(ref), 2, 1, libs, false, false);
  r.spmd = mlirExecutionEngineCreate(mlirModuleFromOperation(spmd), 2, 1, libs,
                                     false, false);
  if (mlirExecutionEngineIsNull(refJit) || mlirExecutionEngineIsNull(r.spmd)) {
    fprintf(stderr, "dtensor-run: the ExecutionEngine did not compile the "
                    "program\n");
    return 1;
  }
  registerRuntime(refJit);
  registerRuntime(r.spmd);
  dtensorMeshPrint(r.mesh, r.meshText, sizeof(r.meshText));

  /* Inputs and the reference results. */
  int64_t **descs = calloc((size_t)r.numArgs + 1, sizeof(int64_t *));
  if (!descs) {
    fprintf(stderr, "dtensor-run: out of memory\n");
    return 1;
  }
  DtrtCheckpoint *loaded = NULL;
  char ckErr[512];
  if (r.loadDir &&
      dtrtCheckpointOpen(r.loadDir, &loaded, ckErr, sizeof(ckErr)) != DTRT_OK) {
    fprintf(stderr, "dtensor-run: %s\n", ckErr);
    return 1;
  }
  /* A positional tensor (arg<i>, as the Python package writes a list of
   * inputs) that no argument takes is a mistake, not something to skip. */
  for (int i = 0; loaded && i < dtrtCheckpointNumTensors(loaded); ++i) {
    DtrtTensor saved;
    dtrtCheckpointGetTensor(loaded, i, &saved, NULL, NULL);
    const char *digits = saved.name + 3;
    if (strncmp(saved.name, "arg", 3) || !*digits ||
        strspn(digits, "0123456789") != strlen(digits))
      continue;
    bool taken = false;
    for (int a = 0; a < r.numArgs && !taken; ++a)
      taken = !strcmp(r.args[a].name, saved.name);
    if (!taken) {
      fprintf(stderr,
              "dtensor-run: %s/%s: '%s' is given, but the entry "
              "takes %d argument%s and none is '%s'\n",
              r.loadDir, DTRT_CHECKPOINT_METADATA, saved.name, r.numArgs,
              r.numArgs == 1 ? "" : "s", saved.name);
      dtrtCheckpointClose(loaded);
      return 1;
    }
  }
  for (int a = 0; a < r.numArgs; ++a) {
    const Tensor *t = &r.args[a];
    int64_t count = product(t->rank, t->shape);
    r.globals[a] = tensorAlloc(t, count, "argument");
    /* The reference gets its own copy: bufferized code may write its
     * arguments in place. */
    void *copy = tensorAlloc(t, count, "the reference's copy of argument");
    if (r.loadDir) {
      if (!readArgument(r.loadDir, loaded, a, t, r.globals[a])) {
        dtrtCheckpointClose(loaded);
        return 1;
      }
      memcpy(copy, r.globals[a], dtrtDtypeSize(t->elem) * (size_t)count);
    } else {
      for (int64_t e = 0; e < count; ++e) {
        store(r.globals[a], t->elem, e, inputValue(a, e, t->elem));
        store(copy, t->elem, e, inputValue(a, e, t->elem));
      }
    }
    descs[a] = descriptor(copy, t->rank, t->shape);
  }
  dtrtCheckpointClose(loaded);
  if (!invoke(refJit, r.ciface, descs, r.numArgs, r.results, r.numResults,
              r.reference))
    return 1;
  if (mpiRank <= 0)
    printf("dtensor-run: %s compiled for %d ranks; single-device reference "
           "computed\n",
           path, n);
  fflush(stdout);
  if (mpiRank >= 0)
    return runRank(mpiRank, &r);
  int status = dtRunLaunch(n, o->backend, o->timeout, runRank, &r);
  if (!status)
    printf("dtensor-run: every rank's result equals the single-device run\n");
  return status;
}

int dtRunMlir(const char *path, const DtRunOptions *o) {
  if (strcmp(o->backend, "shm")) {
    fprintf(stderr,
            "dtensor-run: MLIR programs run on host memory: the shm "
            "or mpi backend, not '%s'\n",
            o->backend);
    return 2;
  }
  return compileAndRun(path, o, -1);
}

int dtRunMlirMpiRank(const char *path, const DtRunOptions *o) {
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  if (!rank)
    rank = getenv("PMI_RANK");
  if (!rank) {
    fprintf(stderr, "dtensor-run: --mpi-rank runs under mpirun (no "
                    "OMPI_COMM_WORLD_RANK or PMI_RANK)\n");
    return 2;
  }
  setenv("DTENSOR_BACKEND", "mpi", 1);
  return compileAndRun(path, o, atoi(rank));
}
