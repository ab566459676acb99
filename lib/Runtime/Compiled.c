/* The entry point compiled programs call (dtensor-lower-to-runtime): one
 * function for every dtensor collective, on unranked memrefs (each passed
 * as its rank and a pointer to its descriptor, MLIR's default lowering).
 * The tensors are the dialect's padded blocks; the gather and shard dims
 * may be any dim, so blocks are packed member-major around the runtime's
 * flat collectives. The process's context is created at the first call
 * and finalized at exit; a failure prints the runtime's message and exits
 * (compiled code has no way to handle it).
 *
 * A GPU program (dtensor-to-nvvm) hands over device buffers: they go to a
 * backend of device memory (nccl), packed and unpacked by the driver's
 * copies on the runtime's copy stream (Cuda.c), which each call waits for
 * before it returns; its caller waited for its own stream before the call
 * (gpu-async-region), so the collective is ordered with the compute. Host
 * buffers go to a host backend (shm, mpi); a mix is refused. */
#include "RuntimeInternal.h"

#include <limits.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Descriptor {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[];
} Descriptor;

static DtrtContext *process;

static void finalizeProcess(void) {
  if (process) {
    DtrtStatus s = dtrtFinalize(process);
    process = NULL;
    if (s != DTRT_OK)
      fprintf(stderr, "dtensor runtime: finalize: %s\n", dtrtStatusString(s));
  }
}

void dtrtProcessContextForget(void) { process = NULL; }

static void die(const char *what) {
  fprintf(stderr, "dtensor runtime: %s: %s\n", what,
          process ? dtrtLastError(process) : "no context");
  exit(1);
}

DtrtContext *dtrtProcessContext(void) {
  if (!process) {
    if (dtrtInit(&process) != DTRT_OK)
      die("init");
    atexit(finalizeProcess);
  }
  return process;
}

/* A view of a contiguous block as [outer, mid, inner] around `dim`. */
typedef struct View {
  char *data;
  int64_t outer, mid, inner;
} View;

static View viewOf(int64_t rank, void *desc, int64_t dim, size_t es) {
  Descriptor *d = desc;
  View v = {(char *)d->aligned + d->offset * (int64_t)es, 1, 1, 1};
  for (int64_t i = 0; i < rank; ++i) {
    if (i < dim)
      v.outer *= d->sizes[i];
    else if (i == dim)
      v.mid = d->sizes[i];
    else
      v.inner *= d->sizes[i];
  }
  return v;
}

static int64_t elements(int64_t rank, void *desc) {
  Descriptor *d = desc;
  int64_t n = 1;
  for (int64_t i = 0; i < rank; ++i)
    n *= d->sizes[i];
  return n;
}

/* Where a collective's blocks are: host memory, or a GPU program's device
 * memory. */
typedef struct Mem {
  bool device;
} Mem;

/* The memory of a collective's operands, checked against the backend's (an
 * empty block's pointer says nothing). */
static Mem memOf(DtrtContext *c, const void *in, int64_t inElements,
                 const void *out, int64_t outElements) {
  Mem m = {dtrtUsesDeviceMemory(c) != 0};
  bool hostIn = inElements > 0 && !dtrtCudaIsDevicePointer(in);
  bool hostOut = outElements > 0 && !dtrtCudaIsDevicePointer(out);
  if (m.device && (hostIn || hostOut)) {
    fprintf(stderr,
            "dtensor runtime: the %s backend takes device buffers, and this "
            "program works on host memory: compile it for the GPU "
            "(dtensor-compile --target cuda) or run it on shm or mpi\n",
            dtrtBackendName(c));
    exit(1);
  }
  if (!m.device &&
      ((inElements > 0 && !hostIn) || (outElements > 0 && !hostOut))) {
    fprintf(stderr,
            "dtensor runtime: a GPU program's collectives take device "
            "buffers: run it on the nccl backend, not %s\n",
            dtrtBackendName(c));
    exit(1);
  }
  /* The backend's stream does not wait for cuBLAS's (the default stream):
   * the device's work so far ends first. */
  if (m.device)
    dtrtCudaWaitAll();
  return m;
}

/* Room for `bytes` (zeroed when `zero`) where `m`'s blocks are. */
static void *scratch(const Mem *m, size_t bytes, bool zero) {
  if (m->device)
    return dtrtCudaScratch(bytes, zero);
  void *p = zero ? calloc(bytes + 1, 1) : malloc(bytes + 1);
  if (!p)
    die("out of memory");
  return p;
}

static void release(const Mem *m, void *p) {
  if (m->device)
    dtrtCudaScratchFree(p);
  else
    free(p);
}

/* Waits for the device copies queued so far (the backend's collective and
 * the caller's next kernels read what they wrote). */
static void fence(const Mem *m) {
  if (m->device)
    dtrtCudaWait();
}

/* Copies `mid` slices of `inner` elements for every outer index. */
static void copyRows(const Mem *m, char *dst, int64_t dstMid, int64_t dstStart,
                     const char *src, int64_t srcMid, int64_t srcStart,
                     int64_t outer, int64_t rows, int64_t inner, size_t es) {
  size_t row = (size_t)inner * es;
  if (m->device) {
    dtrtCudaCopy2D(dst + (size_t)dstStart * row, (size_t)dstMid * row,
                   src + (size_t)srcStart * row, (size_t)srcMid * row,
                   (size_t)rows * row, (size_t)outer);
    return;
  }
  for (int64_t o = 0; o < outer; ++o)
    memcpy(dst + ((size_t)(o * dstMid + dstStart)) * row,
           src + ((size_t)(o * srcMid + srcStart)) * row, (size_t)rows * row);
}

/* This process's group along the mesh axes (1-D i64 memrefs). */
static DtrtComm *groupOf(DtrtContext *c, void *meshDesc, void *axesDesc) {
  Descriptor *mesh = meshDesc, *axes = axesDesc;
  int64_t numMesh = mesh->sizes[0], numAxes = axes->sizes[0];
  const int64_t *meshShape = (const int64_t *)mesh->aligned + mesh->offset;
  const int64_t *axisList = (const int64_t *)axes->aligned + axes->offset;
  int axisInts[16];
  for (int64_t i = 0; i < numAxes && i < 16; ++i)
    axisInts[i] = (int)axisList[i];
  DtrtComm *comm;
  if (dtrtCommForMeshAxes(c, (int)numMesh, meshShape, (int)numAxes, axisInts,
                          &comm) != DTRT_OK)
    die("communicator");
  return comm;
}

/* A collective of a compiled program from its start to its end: the
 * runtime's collective on the blocks themselves or on packed scratch, and
 * where the blocks it receives go. */
typedef struct Pending {
  Mem m;
  DtrtComm *comm;
  DtrtCollective coll;
  bool communicates; /* false: a local split, done by the packing */
  char *send, *recv; /* scratch of this collective (NULL: none) */
  /* Unpacking (when `unpackTo`): received block j holds `outer` runs of
   * `rows` x `inner` elements, which go to rows [j*rows, ...) of a dim of
   * `outMid` rows of the output. */
  char *unpackTo;
  int64_t outer, rows, inner, outMid;
  DtrtRequest *request;
} Pending;

/* Where the collective receives g blocks of `outer` x `rows` x `inner`
 * (coll.count elements each) that go to rows [j*rows, ...) of `out`'s
 * dim: straight into `out` when they lie there member-major (one outer
 * run, no padding), else into scratch unpacked at the end. */
static void receiveInto(Pending *p, View out, int64_t outer, int64_t rows,
                        int64_t inner) {
  int64_t g = dtrtCommSize(p->comm);
  if (outer == 1 && out.mid == g * rows) {
    p->coll.recv = out.data;
    return;
  }
  p->recv = scratch(
      &p->m, p->coll.count * (size_t)g * dtrtDtypeSize(p->coll.dtype), false);
  p->coll.recv = p->recv;
  p->unpackTo = out.data;
  p->outer = outer, p->rows = rows, p->inner = inner, p->outMid = out.mid;
}

/* Packs the input of collective `kind` for the runtime's flat collective
 * (member-major blocks around the gather or shard dim), skipping the
 * copies where the blocks already lie so (dim 0, no padding). */
static void prepare(Pending *p, int64_t kind, DtrtDtype dtype, int64_t reduce,
                    int64_t gatherDim, int64_t shardDim, int64_t root,
                    int64_t inRank, void *inDesc, int64_t outRank,
                    void *outDesc, void *meshDesc, void *axesDesc) {
  DtrtContext *c = dtrtProcessContext();
  size_t es = dtrtDtypeSize(dtype);
  p->comm = groupOf(c, meshDesc, axesDesc);
  int64_t g = dtrtCommSize(p->comm), pos = dtrtCommRank(p->comm);
  p->m =
      memOf(c, viewOf(inRank, inDesc, 0, es).data, elements(inRank, inDesc),
            viewOf(outRank, outDesc, 0, es).data, elements(outRank, outDesc));
  const Mem *m = &p->m;
  p->communicates = true;
  DtrtCollective *coll = &p->coll;
  coll->dtype = dtype;
  coll->reduce = (DtrtReduce)reduce;
  switch (kind) {
  case DTRT_MLIR_ALL_REDUCE: {
    coll->kind = DTRT_COLL_ALL_REDUCE;
    coll->send = viewOf(inRank, inDesc, 0, es).data;
    coll->recv = viewOf(outRank, outDesc, 0, es).data;
    coll->count = (size_t)elements(inRank, inDesc);
    break;
  }
  case DTRT_MLIR_BROADCAST: {
    View in = viewOf(inRank, inDesc, 0, es),
         out = viewOf(outRank, outDesc, 0, es);
    size_t n = (size_t)elements(inRank, inDesc);
    copyRows(m, out.data, 1, 0, in.data, 1, 0, 1, 1, (int64_t)(n * es), 1);
    coll->kind = DTRT_COLL_BROADCAST;
    coll->recv = out.data;
    coll->count = n;
    coll->root = (int)root;
    break;
  }
  case DTRT_MLIR_LOCAL_SPLIT: {
    View in = viewOf(inRank, inDesc, shardDim, es);
    View out = viewOf(outRank, outDesc, shardDim, es);
    int64_t start = pos * out.mid;
    int64_t rows = in.mid - start < out.mid ? in.mid - start : out.mid;
    if (rows > 0)
      copyRows(m, out.data, out.mid, 0, in.data, in.mid, start, in.outer, rows,
               in.inner, es);
    p->communicates = false;
    break;
  }
  case DTRT_MLIR_ALL_GATHER: {
    View in = viewOf(inRank, inDesc, gatherDim, es);
    View out = viewOf(outRank, outDesc, gatherDim, es);
    coll->kind = DTRT_COLL_ALL_GATHER;
    coll->send = in.data;
    coll->count = (size_t)(in.outer * in.mid * in.inner);
    receiveInto(p, out, in.outer, in.mid, in.inner);
    break;
  }
  case DTRT_MLIR_REDUCE_SCATTER:
  case DTRT_MLIR_ALL_TO_ALL: {
    bool a2a = kind == DTRT_MLIR_ALL_TO_ALL;
    View in = viewOf(inRank, inDesc, shardDim, es);
    View out = viewOf(outRank, outDesc, a2a ? gatherDim : shardDim, es);
    int64_t chunk = viewOf(outRank, outDesc, shardDim, es).mid;
    /* Member j's part: rows [j*chunk, (j+1)*chunk) of the shard dim, padded
     * with zeros past the input. */
    size_t block = (size_t)(in.outer * chunk * in.inner);
    coll->kind = a2a ? DTRT_COLL_ALL_TO_ALL : DTRT_COLL_REDUCE_SCATTER;
    coll->count = block;
    if (in.outer == 1 && in.mid == g * chunk) {
      coll->send = in.data;
    } else {
      p->send = scratch(m, block * (size_t)g * es, true);
      coll->send = p->send;
      for (int64_t j = 0; j < g; ++j) {
        int64_t start = j * chunk;
        int64_t rows = in.mid - start < chunk ? in.mid - start : chunk;
        if (rows > 0)
          copyRows(m, p->send + (size_t)j * block * es, chunk, 0, in.data,
                   in.mid, start, in.outer, rows, in.inner, es);
      }
    }
    if (!a2a) {
      coll->recv = out.data;
      break;
    }
    /* Block j comes from member j: its rows of the gather dim. Blocks are
     * [outer', in_gd, inner'] around the gather dim of the sent shape. */
    Descriptor *d = inDesc;
    int64_t o = 1, mid = 1, inner = 1;
    for (int64_t i = 0; i < inRank; ++i) {
      int64_t size = i == shardDim ? chunk : d->sizes[i];
      if (i < gatherDim)
        o *= size;
      else if (i == gatherDim)
        mid = size;
      else
        inner *= size;
    }
    receiveInto(p, out, o, mid, inner);
    break;
  }
  default:
    fprintf(stderr, "dtensor runtime: collective kind %lld is not supported\n",
            (long long)kind);
    exit(1);
  }
  /* The backend reads what the packing copies wrote. */
  fence(m);
}

/* The end of a collective: its received blocks unpacked, its scratch
 * released. */
static void finish(Pending *p) {
  const Mem *m = &p->m;
  size_t es = dtrtDtypeSize(p->coll.dtype), blockBytes = p->coll.count * es;
  for (int64_t j = 0; p->unpackTo && j < dtrtCommSize(p->comm); ++j) {
    int64_t start = j * p->rows;
    int64_t rows = p->outMid - start < p->rows ? p->outMid - start : p->rows;
    if (rows > 0)
      copyRows(m, p->unpackTo, p->outMid, start,
               p->recv + (size_t)j * blockBytes, p->rows, 0, p->outer, rows,
               p->inner, es);
  }
  if (p->send)
    release(m, p->send);
  if (p->recv)
    release(m, p->recv);
  fence(m);
}

static void runNow(Pending *p) {
  if (p->communicates && dtrtRunCollective(p->comm, &p->coll) != DTRT_OK)
    die(dtrtCollectiveName(p->coll.kind));
  finish(p);
}

/* Seconds the process's compiled programs spent in collective calls
 * (blocked in them, packing, waiting for started ones): what
 * dtrtCompiledCommSeconds reports. Compiled programs call from one thread. */
static double commSeconds;

double dtrtCompiledCommSeconds(void) { return commSeconds; }

void dtrt_mlir_collective(int64_t kind, int64_t dtypeCode, int64_t reduce,
                          int64_t gatherDim, int64_t shardDim, int64_t root,
                          int64_t inRank, void *inDesc, int64_t outRank,
                          void *outDesc, int64_t meshRank, void *meshDesc,
                          int64_t axesRank, void *axesDesc) {
  (void)meshRank;
  (void)axesRank;
  double t0 = dtrtNow();
  Pending p = {0};
  prepare(&p, kind, (DtrtDtype)dtypeCode, reduce, gatherDim, shardDim, root,
          inRank, inDesc, outRank, outDesc, meshDesc, axesDesc);
  runNow(&p);
  commSeconds += dtrtNow() - t0;
}

void dtrt_mlir_permute(int64_t inRank, void *inDesc, int64_t outRank,
                       void *outDesc, int64_t dtypeCode, int64_t meshRank,
                       void *meshDesc, int64_t axesRank, void *axesDesc,
                       int64_t pairsRank, void *pairsDesc) {
  (void)meshRank;
  (void)axesRank;
  (void)pairsRank;
  DtrtContext *c = dtrtProcessContext();
  DtrtDtype dtype = (DtrtDtype)dtypeCode;
  size_t es = dtrtDtypeSize(dtype);
  DtrtComm *comm = groupOf(c, meshDesc, axesDesc);
  Descriptor *pairs = pairsDesc;
  const int64_t *p = (const int64_t *)pairs->aligned + pairs->offset;
  int64_t numPairs = pairs->sizes[0] / 2, pos = dtrtCommRank(comm);
  int sendTo = -1, recvFrom = -1;
  for (int64_t i = 0; i < numPairs; ++i) {
    if (p[2 * i] == pos)
      sendTo = (int)p[2 * i + 1];
    if (p[2 * i + 1] == pos)
      recvFrom = (int)p[2 * i];
  }
  View in = viewOf(inRank, inDesc, 0, es),
       out = viewOf(outRank, outDesc, 0, es);
  double t0 = dtrtNow();
  memOf(c, in.data, elements(inRank, inDesc), out.data,
        elements(outRank, outDesc));
  if (dtrtPermute(comm, in.data, out.data, (size_t)elements(inRank, inDesc),
                  dtype, sendTo, recvFrom) != DTRT_OK)
    die("permute");
  commSeconds += dtrtNow() - t0;
}

/* Whether started collectives run in the background (DTENSOR_OVERLAP=0:
 * each completes at its start, to measure what the overlap hides). */
static bool overlapping(void) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("DTENSOR_OVERLAP");
    on = !(e && !strcmp(e, "0"));
  }
  return on;
}

int64_t dtrt_mlir_collective_start(int64_t kind, int64_t dtypeCode,
                                   int64_t reduce, int64_t gatherDim,
                                   int64_t shardDim, int64_t root,
                                   int64_t inRank, void *inDesc,
                                   int64_t outRank, void *outDesc,
                                   int64_t meshRank, void *meshDesc,
                                   int64_t axesRank, void *axesDesc) {
  (void)meshRank;
  (void)axesRank;
  double t0 = dtrtNow();
  Pending *p = calloc(1, sizeof(Pending));
  if (!p)
    die("out of memory");
  prepare(p, kind, (DtrtDtype)dtypeCode, reduce, gatherDim, shardDim, root,
          inRank, inDesc, outRank, outDesc, meshDesc, axesDesc);
  /* Device buffers: the backend's stream orders it already; nothing to
   * send: done now. */
  if (p->m.device || !p->communicates || dtrtCommSize(p->comm) == 1 ||
      !overlapping()) {
    runNow(p);
    free(p);
    commSeconds += dtrtNow() - t0;
    return 0;
  }
  if (dtrtStart(p->comm, &p->coll, &p->request) != DTRT_OK)
    die(dtrtCollectiveName(p->coll.kind));
  commSeconds += dtrtNow() - t0;
  return (int64_t)(intptr_t)p;
}

void dtrt_mlir_wait(int64_t request) {
  Pending *p = (Pending *)(intptr_t)request;
  if (!p)
    return;
  double t0 = dtrtNow();
  DtrtCollectiveKind kind = p->coll.kind;
  if (dtrtWait(p->request) != DTRT_OK)
    die(dtrtCollectiveName(kind));
  finish(p);
  free(p);
  commSeconds += dtrtNow() - t0;
}

/* A mesh shape (1-D i64 memref): its axes and their sizes; returns the
 * device count. */
static int64_t meshShapeOf(void *meshDesc, int64_t *outRank,
                           const int64_t **outShape) {
  Descriptor *mesh = meshDesc;
  *outRank = mesh->sizes[0];
  *outShape = (const int64_t *)mesh->aligned + mesh->offset;
  int64_t total = 1;
  for (int64_t a = 0; a < *outRank; ++a)
    total *= (*outShape)[a];
  return total;
}

void dtrt_mlir_init(int64_t meshRank, void *meshDesc) {
  (void)meshRank;
  dtrtEnsureComputeThreads();
  DtrtContext *c = dtrtProcessContext();
  int64_t axes;
  const int64_t *shape;
  int64_t total = meshShapeOf(meshDesc, &axes, &shape);
  if (total != dtrtWorldSize(c)) {
    fprintf(stderr,
            "dtensor runtime: the program's mesh has %lld devices "
            "but the job has %d ranks (WORLD_SIZE); run it on %lld\n",
            (long long)total, dtrtWorldSize(c), (long long)total);
    exit(1);
  }
}

int64_t dtrt_mlir_mesh_coord(int64_t axis, int64_t meshRank, void *meshDesc) {
  (void)meshRank;
  DtrtContext *c = dtrtProcessContext();
  int64_t numMesh;
  const int64_t *shape;
  int64_t total = meshShapeOf(meshDesc, &numMesh, &shape);
  if (axis < 0 || axis >= numMesh || total != c->worldSize) {
    fprintf(stderr,
            "dtensor runtime: mesh_index: axis %lld of a mesh of %lld "
            "devices on a world of %d ranks\n",
            (long long)axis, (long long)total, c->worldSize);
    exit(1);
  }
  int64_t r = c->rank;
  for (int64_t a = numMesh - 1; a > axis; --a)
    r /= shape[a];
  return r % shape[axis];
}

/* One symbol per element type, as dtensor-lower-to-runtime declares them
 * (MLIR needs a signature per memref element type). */
#define DTRT_TYPED(suffix, code)                                               \
  void dtrt_mlir_collective_##suffix(                                          \
      int64_t kind, int64_t dtype, int64_t reduce, int64_t gatherDim,          \
      int64_t shardDim, int64_t root, int64_t inRank, void *inDesc,            \
      int64_t outRank, void *outDesc, int64_t meshRank, void *meshDesc,        \
      int64_t axesRank, void *axesDesc) {                                      \
    dtrt_mlir_collective(kind, dtype, reduce, gatherDim, shardDim, root,       \
                         inRank, inDesc, outRank, outDesc, meshRank, meshDesc, \
                         axesRank, axesDesc);                                  \
  }
DTRT_TYPED_SUFFIXES(DTRT_TYPED)

#define DTRT_TYPED_PERMUTE(suffix, code)                                       \
  void dtrt_mlir_permute_##suffix(                                             \
      int64_t inRank, void *inDesc, int64_t outRank, void *outDesc,            \
      int64_t meshRank, void *meshDesc, int64_t axesRank, void *axesDesc,      \
      int64_t pairsRank, void *pairsDesc) {                                    \
    dtrt_mlir_permute(inRank, inDesc, outRank, outDesc, code, meshRank,        \
                      meshDesc, axesRank, axesDesc, pairsRank, pairsDesc);     \
  }
DTRT_TYPED_SUFFIXES(DTRT_TYPED_PERMUTE)

#define DTRT_TYPED_ASYNC(suffix, code)                                         \
  int64_t dtrt_mlir_collective_start_##suffix(                                 \
      int64_t kind, int64_t reduce, int64_t gatherDim, int64_t shardDim,       \
      int64_t root, int64_t inRank, void *inDesc, int64_t outRank,             \
      void *outDesc, int64_t meshRank, void *meshDesc, int64_t axesRank,       \
      void *axesDesc) {                                                        \
    return dtrt_mlir_collective_start(kind, code, reduce, gatherDim, shardDim, \
                                      root, inRank, inDesc, outRank, outDesc,  \
                                      meshRank, meshDesc, axesRank, axesDesc); \
  }                                                                            \
  void dtrt_mlir_wait_##suffix(int64_t request, int64_t inRank,                \
                               void *inDesc) {                                 \
    (void)inRank;                                                              \
    (void)inDesc;                                                              \
    dtrt_mlir_wait(request);                                                   \
  }
DTRT_TYPED_SUFFIXES(DTRT_TYPED_ASYNC)

/* ---- memory of compiled programs ----------------------------------------- */

/* Buffers of a step are freed and allocated again at the next: glibc maps
 * large ones afresh each time (mmap above its threshold, at most 32 MiB)
 * and pays a page fault per 4 KiB page every step, a fifth of a GPT
 * block's time here. Kept in the heap instead (no mmap, no trimming),
 * freed buffers are reused, as a caching allocator does;
 * DTENSOR_MALLOC_CACHE=0 leaves glibc's defaults. */
static bool heapTuned;

static void tuneHeap(void) {
  heapTuned = true;
  const char *cache = getenv("DTENSOR_MALLOC_CACHE");
  if (cache && !strcmp(cache, "0"))
    return;
  /* No mmap at all (glibc caps M_MMAP_THRESHOLD at 32 MiB), no trimming. */
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

/* An allocation that fails ends the rank with what it could not have
 * (compiled code would write through the null pointer otherwise). */
static void *checkedAlloc(void *p, uint64_t size) {
  if (!p && size) {
    const char *rank = getenv("RANK");
    fprintf(stderr,
            "dtensor runtime: rank %s: out of memory: a buffer of "
            "%llu bytes (%.2f GiB) of the compiled program could not be "
            "allocated\n",
            rank ? rank : "0", (unsigned long long)size,
            (double)size / (1024.0 * 1024.0 * 1024.0));
    exit(1);
  }
  return p;
}

/* The bytes the compiled program's buffers hold, and the most since the
 * last reset (dtrtBufferPeak): each block's usable size, counted when it
 * is made and when _mlir_memref_to_llvm_free frees it (results the caller
 * frees with free() stay counted: a reset takes the count as its base). */
static _Atomic int64_t bufferBytes, bufferPeak, bufferBase;

static void *counted(void *p) {
  if (p) {
    int64_t n = (int64_t)malloc_usable_size(p);
    int64_t now = atomic_fetch_add(&bufferBytes, n) + n;
    int64_t seen = atomic_load(&bufferPeak);
    while (now > seen &&
           !atomic_compare_exchange_weak(&bufferPeak, &seen, now)) {
    }
  }
  return p;
}

void dtrtBufferPeakReset(void) {
  int64_t now = atomic_load(&bufferBytes);
  atomic_store(&bufferBase, now);
  atomic_store(&bufferPeak, now);
}

int64_t dtrtBufferPeak(void) {
  return atomic_load(&bufferPeak) - atomic_load(&bufferBase);
}

void *_mlir_memref_to_llvm_alloc(uint64_t size) {
  if (!heapTuned)
    tuneHeap();
  return counted(checkedAlloc(malloc(size), size));
}

void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t size) {
  if (!heapTuned)
    tuneHeap();
  void *p = NULL;
  if (alignment < sizeof(void *))
    alignment = sizeof(void *);
  if (posix_memalign(&p, alignment, size))
    p = NULL;
  return counted(checkedAlloc(p, size));
}

void _mlir_memref_to_llvm_free(void *p) {
  if (p)
    atomic_fetch_sub(&bufferBytes, (int64_t)malloc_usable_size(p));
  free(p);
}

/* memref.copy of buffers whose layouts the lowering does not know (MLIR's
 * generic lowering calls memrefCopy, which MLIR's C runner utilities
 * define; those link libMLIR, so the runtime defines it, and a compiled
 * program needs only libdtensor_rt). Unranked memrefs: {rank, descriptor}
 * with the descriptor {allocated, aligned, offset, sizes[rank],
 * strides[rank]}. */
typedef struct UnrankedMemref {
  int64_t rank;
  Descriptor *descriptor;
} UnrankedMemref;

void memrefCopy(int64_t elemSize, void *srcMemref, void *dstMemref) {
  const UnrankedMemref *src = srcMemref, *dst = dstMemref;
  int64_t rank = src->rank;
  const Descriptor *s = src->descriptor, *d = dst->descriptor;
  const int64_t *sizes = s->sizes, *sStrides = s->sizes + rank,
                *dStrides = d->sizes + rank;
  const char *from = (const char *)s->aligned + s->offset * elemSize;
  char *to = (char *)d->aligned + d->offset * elemSize;
  int64_t count = 1;
  bool contiguous = true;
  for (int64_t i = rank - 1, expect = 1; i >= 0; --i) {
    count *= sizes[i];
    contiguous &=
        sizes[i] == 1 || (sStrides[i] == expect && dStrides[i] == expect);
    expect *= sizes[i];
  }
  if (count <= 0)
    return;
  if (contiguous) {
    memmove(to, from, (size_t)(count * elemSize));
    return;
  }
  /* An odometer over the indices, last fastest. */
  int64_t idx[64] = {0};
  if (rank > 64) {
    fprintf(stderr, "dtensor runtime: memrefCopy of rank %lld (at most 64)\n",
            (long long)rank);
    exit(1);
  }
  for (;;) {
    int64_t so = 0, dOff = 0;
    for (int64_t i = 0; i < rank; ++i) {
      so += idx[i] * sStrides[i];
      dOff += idx[i] * dStrides[i];
    }
    memcpy(to + dOff * elemSize, from + so * elemSize, (size_t)elemSize);
    int64_t i = rank - 1;
    while (i >= 0 && ++idx[i] == sizes[i])
      idx[i--] = 0;
    if (i < 0)
      return;
  }
}