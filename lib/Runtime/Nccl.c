/* The NCCL backend (built when CMake finds CUDA and NCCL): collectives on
 * device buffers, each communicator with its own CUDA stream. The only file
 * that includes nccl.h and the CUDA headers.
 *
 * Launched (dtensor-run, torchrun): the device is LOCAL_RANK modulo the
 * visible devices; a communicator's ncclUniqueId is made by its first member
 * and shared through the rendezvous store at MASTER_ADDR:MASTER_PORT, so
 * only the members take part in creating it (dtrtCommGet's contract).
 * Handed in (dtrtInitFromNcclComm): the host's communicator is the world,
 * and a sub-group's id travels from its first member to the others by
 * ncclSend/ncclRecv over it, again members only.
 *
 * Host buffers (the runner's checks, checkpoints) are staged through
 * device copies. Blocking calls and waits poll the stream and the
 * communicator's asynchronous error until the context's timeout, then abort the
 * communicator, so a dead peer ends the wait with a message. */
#include "RuntimeInternal.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct NcclWorld {
  int device;
  ncclComm_t host; /* the handed-in communicator, or NULL */
  void *idScratch; /* device buffer for ids sent over `host` */
  int *barrierBuf; /* one device int for barriers */
} NcclWorld;

typedef struct Nccl {
  ncclComm_t comm;
  bool owned;
  cudaStream_t stream;
  /* Under DTENSOR_CHECK_COLLECTIVES=1: the members' calls, on the host and
   * on the device (gathered there), and this member's count of calls. */
  uint32_t calls;
  DtrtCallSig *sigs;
  void *deviceSigs;
} Nccl;

static DtrtStatus cudaFail(DtrtContext *c, cudaError_t e, const char *what) {
  return dtrtFail(c, DTRT_ERR_SYSTEM, "rank %d: %s: %s", c->rank, what,
                  cudaGetErrorString(e));
}

static DtrtStatus ncclFail(DtrtContext *c, ncclComm_t comm, ncclResult_t r,
                           const char *what) {
  const char *detail = comm ? ncclGetLastError(comm) : NULL;
  return dtrtFail(c, DTRT_ERR_SYSTEM, "rank %d: %s: %s%s%s", c->rank, what,
                  ncclGetErrorString(r), detail && *detail ? ": " : "",
                  detail ? detail : "");
}

#define CUDA_CHECK(c, call, what)                                              \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess)                                                     \
      return cudaFail((c), e_, (what));                                        \
  } while (0)

#define NCCL_CHECK(c, comm, call, what)                                        \
  do {                                                                         \
    ncclResult_t r_ = (call);                                                  \
    if (r_ != ncclSuccess)                                                     \
      return ncclFail((c), (comm), r_, (what));                                \
  } while (0)

static NcclWorld *worldOf(DtrtContext *c) { return c->backendState; }

static DtrtStatus newWorld(DtrtContext *c, int device) {
  NcclWorld *w = calloc(1, sizeof(NcclWorld));
  if (!w)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  c->backendState = w;
  w->device = device;
  CUDA_CHECK(c, cudaSetDevice(device), "cudaSetDevice");
  CUDA_CHECK(c, cudaMalloc((void **)&w->barrierBuf, sizeof(int)), "cudaMalloc");
  return DTRT_OK;
}

static DtrtStatus ncclInit(DtrtContext *c) {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0)
    return dtrtFail(c, DTRT_ERR_UNSUPPORTED,
                    "rank %d: DTENSOR_BACKEND is "
                    "'nccl' but no CUDA device is usable: %s",
                    c->rank,
                    e != cudaSuccess ? cudaGetErrorString(e) : "none found");
  DtrtStatus s = newWorld(c, c->localRank % devices);
  if (s != DTRT_OK)
    return s;
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if (!addr || !*addr || !port || !*port)
    return dtrtFail(c, DTRT_ERR_ENV,
                    "the nccl backend needs MASTER_ADDR and "
                    "MASTER_PORT (its rendezvous); run under dtensor-run or "
                    "torchrun");
  return dtrtStoreCreate(c, addr, atoi(port), &c->store);
}

DtrtStatus dtrtNcclAdopt(DtrtContext *c, void *hostComm) {
  ncclComm_t h = hostComm;
  int device = 0;
  NCCL_CHECK(c, h, ncclCommUserRank(h, &c->rank), "ncclCommUserRank");
  NCCL_CHECK(c, h, ncclCommCount(h, &c->worldSize), "ncclCommCount");
  NCCL_CHECK(c, h, ncclCommCuDevice(h, &device), "ncclCommCuDevice");
  DtrtStatus s = newWorld(c, device);
  if (s != DTRT_OK)
    return s;
  worldOf(c)->host = h;
  CUDA_CHECK(c, cudaMalloc(&worldOf(c)->idScratch, sizeof(ncclUniqueId)),
             "cudaMalloc");
  return DTRT_OK;
}

static void ncclFinalize(DtrtContext *c) {
  NcclWorld *w = worldOf(c);
  if (!w)
    return;
  cudaFree(w->idScratch);
  cudaFree(w->barrierBuf);
  free(w);
  c->backendState = NULL;
}

/* Polls the stream until done, a communicator error, or the timeout. */
static DtrtStatus syncStream(DtrtComm *comm, cudaStream_t stream,
                             cudaEvent_t event, const char *what) {
  DtrtContext *c = comm->context;
  Nccl *n = comm->backend;
  double start = dtrtNow();
  if (!n->comm)
    return dtrtFail(c, DTRT_ERR_PEER,
                    "rank %d: the group's communicator was "
                    "aborted after an earlier failure",
                    c->rank);
  for (unsigned spins = 0;; ++spins) {
    cudaError_t e = event ? cudaEventQuery(event) : cudaStreamQuery(stream);
    if (e == cudaSuccess)
      return DTRT_OK;
    if (e != cudaErrorNotReady)
      return cudaFail(c, e, what);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(n->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      ncclCommAbort(n->comm);
      n->comm = NULL;
      return ncclFail(c, NULL, async, what);
    }
    if (spins > 100)
      sched_yield();
    if (dtrtNow() - start > c->timeoutS) {
      ncclCommAbort(n->comm);
      n->comm = NULL;
      return dtrtFail(c, DTRT_ERR_TIMEOUT,
                      "rank %d: timed out after %g s in "
                      "%s waiting for the other ranks of a group of %d",
                      c->rank, c->timeoutS, what, comm->size);
    }
  }
}

/* This member's id of the group: made by member 0, shared with the others
 * through the store or over the host's communicator. */
static DtrtStatus groupId(DtrtComm *comm, ncclUniqueId *id) {
  DtrtContext *c = comm->context;
  NcclWorld *w = worldOf(c);
  if (comm->rank == 0)
    NCCL_CHECK(c, NULL, ncclGetUniqueId(id), "ncclGetUniqueId");
  if (c->store) {
    /* The key is the member list: every member computes the same one, and
     * a context creates each group once (they are cached). */
    char key[200];
    int k = snprintf(key, sizeof(key), "nccl/%d", comm->members[0]);
    for (int i = 1; i < comm->size && k < 180; ++i)
      k += snprintf(key + k, sizeof(key) - (size_t)k, ",%d", comm->members[i]);
    if (k >= 180) { /* long member lists: a hash keeps the key short */
      uint64_t h = 1469598103934665603ULL;
      for (int i = 0; i < comm->size; ++i)
        h = (h ^ (uint64_t)(comm->members[i] + 1)) * 1099511628211ULL;
      snprintf(key, sizeof(key), "nccl/%d/h%016llx", comm->size,
               (unsigned long long)h);
    }
    return comm->rank == 0 ? dtrtStoreSet(c->store, key, id, sizeof(*id))
                           : dtrtStoreGet(c->store, key, id, sizeof(*id));
  }
  /* Over the host communicator: point to point from member 0 only. */
  cudaStream_t s;
  CUDA_CHECK(c, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
             "cudaStreamCreate");
  ncclResult_t r = ncclSuccess;
  cudaError_t e = cudaSuccess;
  if (comm->rank == 0) {
    e = cudaMemcpy(w->idScratch, id, sizeof(*id), cudaMemcpyHostToDevice);
    r = ncclGroupStart();
    for (int i = 1; i < comm->size && r == ncclSuccess; ++i)
      r = ncclSend(w->idScratch, sizeof(*id), ncclUint8, comm->members[i],
                   w->host, s);
    if (r == ncclSuccess)
      r = ncclGroupEnd();
  } else {
    r = ncclRecv(w->idScratch, sizeof(*id), ncclUint8, comm->members[0],
                 w->host, s);
  }
  if (e == cudaSuccess && r == ncclSuccess)
    e = cudaStreamSynchronize(s);
  if (comm->rank != 0 && e == cudaSuccess && r == ncclSuccess)
    e = cudaMemcpy(id, w->idScratch, sizeof(*id), cudaMemcpyDeviceToHost);
  cudaStreamDestroy(s);
  if (r != ncclSuccess)
    return ncclFail(c, w->host, r, "sending a group's id");
  if (e != cudaSuccess)
    return cudaFail(c, e, "sending a group's id");
  return DTRT_OK;
}

static DtrtStatus ncclCommInitGroup(DtrtComm *comm) {
  DtrtContext *c = comm->context;
  NcclWorld *w = worldOf(c);
  Nccl *n = calloc(1, sizeof(Nccl));
  if (!n)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  comm->backend = n;
  CUDA_CHECK(c, cudaSetDevice(w->device), "cudaSetDevice");
  CUDA_CHECK(c, cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking),
             "cudaStreamCreate");
  bool isWorld = comm->size == c->worldSize;
  for (int i = 0; isWorld && i < comm->size; ++i)
    isWorld = comm->members[i] == i;
  if (isWorld && w->host) {
    n->comm = w->host;
    return DTRT_OK;
  }
  ncclUniqueId id;
  DtrtStatus s = groupId(comm, &id);
  if (s != DTRT_OK)
    return s;
  NCCL_CHECK(c, NULL, ncclCommInitRank(&n->comm, comm->size, id, comm->rank),
             "ncclCommInitRank");
  n->owned = true;
  return DTRT_OK;
}

static void ncclCommFree(DtrtComm *comm, bool clean) {
  Nccl *n = comm->backend;
  if (!n)
    return;
  if (n->comm && n->owned) {
    if (clean)
      ncclCommDestroy(n->comm);
    else
      ncclCommAbort(n->comm);
  }
  if (n->stream)
    cudaStreamDestroy(n->stream);
  cudaFree(n->deviceSigs);
  free(n->sigs);
  free(n);
  comm->backend = NULL;
}

static ncclDataType_t ncclType(DtrtDtype t) {
  switch (t) {
  case DTRT_F32:
    return ncclFloat32;
  case DTRT_F64:
    return ncclFloat64;
  case DTRT_F16:
    return ncclFloat16;
  case DTRT_BF16:
    return ncclBfloat16;
  case DTRT_I32:
    return ncclInt32;
  case DTRT_I64:
    return ncclInt64;
  case DTRT_I8:
    return ncclInt8;
  case DTRT_UI8:
  case DTRT_I1: /* bytes of 0 or 1: max, min and prod are or, and */
    return ncclUint8;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
  case DTRT_F8E4M3FN: /* NCCL's e4m3 is the finite one (no infinities) */
    return ncclFloat8e4m3;
  case DTRT_F8E5M2:
    return ncclFloat8e5m2;
#else
  case DTRT_F8E4M3FN:
  case DTRT_F8E5M2:
#endif
  case DTRT_I16: /* refused before (ncclHasType) */
    break;
  }
  return ncclFloat32;
}

/* NCCL has no 16-bit integers, and 8-bit floats from 2.24 on (whose
 * reductions need sm_90). */
static bool ncclHasType(DtrtDtype t) {
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 24, 0)
  if (t == DTRT_F8E4M3FN || t == DTRT_F8E5M2)
    return false;
#endif
  return t != DTRT_I16;
}

static ncclRedOp_t ncclOp(DtrtReduce op) {
  switch (op) {
  case DTRT_SUM:
    return ncclSum;
  case DTRT_MAX:
    return ncclMax;
  case DTRT_MIN:
    return ncclMin;
  case DTRT_AVG:
    return ncclAvg;
  case DTRT_PROD:
    return ncclProd;
  }
  return ncclSum;
}

/* Enqueues `op` on the communicator's stream. */
static DtrtStatus enqueue(DtrtComm *comm, const DtrtCollective *op) {
  DtrtContext *c = comm->context;
  Nccl *n = comm->backend;
  if (!n->comm)
    return dtrtFail(c, DTRT_ERR_PEER,
                    "rank %d: the group's communicator was "
                    "aborted after an earlier failure",
                    c->rank);
  ncclComm_t nc = n->comm;
  cudaStream_t st = n->stream;
  if (op->kind != DTRT_COLL_BARRIER && !ncclHasType(op->dtype))
    return dtrtFail(c, DTRT_ERR_INVALID,
                    "rank %d: %s of %s: NCCL has no such element type "
                    "(widen it to i32 first)",
                    c->rank, dtrtCollectiveName(op->kind),
                    dtrtDtypeName(op->dtype));
  ncclDataType_t t = ncclType(op->dtype);
  size_t es = dtrtDtypeSize(op->dtype), cnt = op->count;
  CUDA_CHECK(c, cudaSetDevice(worldOf(c)->device), "cudaSetDevice");
  switch (op->kind) {
  case DTRT_COLL_BARRIER:
    NCCL_CHECK(c, nc,
               ncclAllReduce(worldOf(c)->barrierBuf, worldOf(c)->barrierBuf, 1,
                             ncclInt32, ncclSum, nc, st),
               "ncclAllReduce (barrier)");
    break;
  case DTRT_COLL_ALL_GATHER:
    NCCL_CHECK(c, nc, ncclAllGather(op->send, op->recv, cnt, t, nc, st),
               "ncclAllGather");
    break;
  case DTRT_COLL_ALL_REDUCE:
    NCCL_CHECK(
        c, nc,
        ncclAllReduce(op->send, op->recv, cnt, t, ncclOp(op->reduce), nc, st),
        "ncclAllReduce");
    break;
  case DTRT_COLL_REDUCE_SCATTER:
    NCCL_CHECK(c, nc,
               ncclReduceScatter(op->send, op->recv, cnt, t, ncclOp(op->reduce),
                                 nc, st),
               "ncclReduceScatter");
    break;
  case DTRT_COLL_ALL_TO_ALL:
    NCCL_CHECK(c, nc, ncclAlltoAll(op->send, op->recv, cnt, t, nc, st),
               "ncclAlltoAll");
    break;
  case DTRT_COLL_BROADCAST:
    NCCL_CHECK(c, nc,
               ncclBroadcast(op->recv, op->recv, cnt, t, op->root, nc, st),
               "ncclBroadcast");
    break;
  case DTRT_COLL_PERMUTE:
    if (op->recvFrom < 0)
      CUDA_CHECK(c, cudaMemsetAsync(op->recv, 0, cnt * es, st),
                 "cudaMemsetAsync");
    NCCL_CHECK(c, nc, ncclGroupStart(), "ncclGroupStart");
    if (op->sendTo >= 0)
      NCCL_CHECK(c, nc, ncclSend(op->send, cnt, t, op->sendTo, nc, st),
                 "ncclSend");
    if (op->recvFrom >= 0)
      NCCL_CHECK(c, nc, ncclRecv(op->recv, cnt, t, op->recvFrom, nc, st),
                 "ncclRecv");
    NCCL_CHECK(c, nc, ncclGroupEnd(), "ncclGroupEnd");
    break;
  }
  return DTRT_OK;
}

/* Whether `p` is host memory, which NCCL cannot read. */
static bool isHost(const void *p) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError(); /* clears the error */
    return true;
  }
  return a.type == cudaMemoryTypeUnregistered || a.type == cudaMemoryTypeHost;
}

/* The elements `op` sends and receives on a group of `size`. */
static void extents(const DtrtCollective *op, int size, size_t *send,
                    size_t *recv) {
  size_t n = op->count, all = n * (size_t)size;
  *send = *recv = n;
  if (op->kind == DTRT_COLL_ALL_GATHER)
    *recv = all;
  else if (op->kind == DTRT_COLL_REDUCE_SCATTER)
    *send = all;
  else if (op->kind == DTRT_COLL_ALL_TO_ALL)
    *send = *recv = all;
  else if (op->kind == DTRT_COLL_BROADCAST)
    *send = 0;
  else if (op->kind == DTRT_COLL_BARRIER)
    *send = *recv = 0;
}

/* Runs `op` and waits. Host buffers (the runtime's own callers: the
 * runner's checks, checkpoints) go through device copies: NCCL reads and
 * writes device memory only. */
/* Under DTENSOR_CHECK_COLLECTIVES=1: the members gather their calls (an
 * ncclAllGather of a few bytes on the group's stream, waited for) and
 * each compares every call with member 0's before any data moves. */
static DtrtStatus checkCalls(DtrtComm *comm, const DtrtCollective *op) {
  DtrtContext *c = comm->context;
  Nccl *n = comm->backend;
  if (!c->checkCollectives)
    return DTRT_OK;
  size_t one = sizeof(DtrtCallSig);
  CUDA_CHECK(c, cudaSetDevice(worldOf(c)->device), "cudaSetDevice");
  if (!n->sigs) {
    n->sigs = calloc((size_t)comm->size, one);
    if (!n->sigs)
      return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
    CUDA_CHECK(c, cudaMalloc(&n->deviceSigs, one * (size_t)comm->size),
               "cudaMalloc");
  }
  DtrtCallSig mine = dtrtCallSigOf(op, n->calls++);
  char *slot = (char *)n->deviceSigs + one * (size_t)comm->rank;
  CUDA_CHECK(c, cudaMemcpy(slot, &mine, one, cudaMemcpyHostToDevice),
             "cudaMemcpy");
  NCCL_CHECK(
      c, n->comm,
      ncclAllGather(slot, n->deviceSigs, one, ncclUint8, n->comm, n->stream),
      "ncclAllGather (call check)");
  DtrtStatus s = syncStream(comm, n->stream, NULL, "the check of the calls");
  if (s != DTRT_OK)
    return s;
  CUDA_CHECK(c,
             cudaMemcpy(n->sigs, n->deviceSigs, one * (size_t)comm->size,
                        cudaMemcpyDeviceToHost),
             "cudaMemcpy");
  for (int j = 1; j < comm->size && s == DTRT_OK; ++j)
    s = dtrtCallSigAgree(comm, 0, &n->sigs[0], j, &n->sigs[j]);
  return s;
}

/* Runs `op` to completion, through device copies of host buffers. */
static DtrtStatus runStaged(DtrtComm *comm, const DtrtCollective *op) {
  DtrtContext *c = comm->context;
  size_t es = dtrtDtypeSize(op->dtype), sendN, recvN;
  extents(op, comm->size, &sendN, &recvN);
  bool hostSend = sendN && isHost(op->send),
       hostRecv = recvN && isHost(op->recv);
  bool inPlace = op->send == op->recv || op->kind == DTRT_COLL_BROADCAST;
  DtrtCollective staged = *op;
  void *dSend = NULL, *dRecv = NULL;
  CUDA_CHECK(c, cudaSetDevice(worldOf(c)->device), "cudaSetDevice");
  if (hostRecv) {
    CUDA_CHECK(c, cudaMalloc(&dRecv, recvN * es + 1), "cudaMalloc");
    staged.recv = dRecv;
    if (inPlace)
      CUDA_CHECK(
          c, cudaMemcpy(dRecv, op->recv, recvN * es, cudaMemcpyHostToDevice),
          "cudaMemcpy");
  }
  if (hostSend && inPlace && hostRecv) {
    staged.send = dRecv;
  } else if (hostSend) {
    CUDA_CHECK(c, cudaMalloc(&dSend, sendN * es + 1), "cudaMalloc");
    CUDA_CHECK(c,
               cudaMemcpy(dSend, op->send, sendN * es, cudaMemcpyHostToDevice),
               "cudaMemcpy");
    staged.send = dSend;
  }
  DtrtStatus s = enqueue(comm, &staged);
  if (s == DTRT_OK)
    s = syncStream(comm, ((Nccl *)comm->backend)->stream, NULL,
                   dtrtCollectiveName(op->kind));
  cudaError_t e = cudaSuccess;
  if (s == DTRT_OK && hostRecv)
    e = cudaMemcpy(op->recv, dRecv, recvN * es, cudaMemcpyDeviceToHost);
  cudaFree(dSend);
  cudaFree(dRecv);
  if (s == DTRT_OK && e != cudaSuccess)
    return cudaFail(c, e, "cudaMemcpy");
  return s;
}

static DtrtStatus ncclRun(DtrtComm *comm, const DtrtCollective *op) {
  DtrtStatus s = checkCalls(comm, op);
  return s != DTRT_OK ? s : runStaged(comm, op);
}

static DtrtStatus ncclStart(DtrtComm *comm, DtrtRequest *r) {
  DtrtContext *c = comm->context;
  size_t sendN, recvN;
  extents(&r->op, comm->size, &sendN, &recvN);
  /* Host buffers: the collective runs now (through device copies); the
   * request's event then completes at once. */
  DtrtStatus s = checkCalls(comm, &r->op);
  if (s == DTRT_OK)
    s = (sendN && isHost(r->op.send)) || (recvN && isHost(r->op.recv))
            ? runStaged(comm, &r->op)
            : enqueue(comm, &r->op);
  if (s != DTRT_OK)
    return s;
  cudaEvent_t event;
  CUDA_CHECK(c, cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
             "cudaEventCreate");
  cudaError_t e = cudaEventRecord(event, ((Nccl *)comm->backend)->stream);
  if (e != cudaSuccess) {
    cudaEventDestroy(event);
    return cudaFail(c, e, "cudaEventRecord");
  }
  r->backend = event;
  return DTRT_OK;
}

static DtrtStatus ncclTest(DtrtRequest *r, bool *outDone) {
  cudaError_t e = cudaEventQuery((cudaEvent_t)r->backend);
  *outDone = e == cudaSuccess;
  if (e == cudaSuccess || e == cudaErrorNotReady)
    return DTRT_OK;
  return cudaFail(r->comm->context, e, "cudaEventQuery");
}

static DtrtStatus ncclWait(DtrtRequest *r) {
  cudaEvent_t event = r->backend;
  DtrtStatus s =
      syncStream(r->comm, NULL, event, dtrtCollectiveName(r->op.kind));
  cudaEventDestroy(event);
  r->backend = NULL;
  return s;
}

const DtrtBackend dtrtNcclBackend = {
    .name = "nccl",
    .deviceMemory = true,
    .init = ncclInit,
    .finalize = ncclFinalize,
    .commInit = ncclCommInitGroup,
    .commFree = ncclCommFree,
    .run = ncclRun,
    .start = ncclStart,
    .test = ncclTest,
    .wait = ncclWait,
};
