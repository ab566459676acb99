/* libdtensor_rt: the context, communicators and the
 * collectives over a backend's exchange area (docs/runtime.md). */
#include "RuntimeInternal.h"
#include "Support/Support.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *dtrtStatusString(DtrtStatus status) {
  switch (status) {
#define DTRT_CASE(name, text)                                                  \
  case name:                                                                   \
    return text;
    DTRT_STATUS_LIST(DTRT_CASE)
#undef DTRT_CASE
  }
  return "unknown status";
}

DtrtStatus dtrtFail(DtrtContext *c, DtrtStatus status, const char *format,
                    ...) {
  if (!c)
    return status;
  char *sink = c->hasErrorSink ? pthread_getspecific(c->errorSink) : NULL;
  va_list args;
  va_start(args, format);
  vsnprintf(sink ? sink : c->error, DTRT_ERROR_SIZE, format, args);
  va_end(args);
  return status;
}

double dtrtNow(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

const char *dtrtBackendName(const DtrtContext *c) {
  return c && c->backend ? c->backend->name : "none";
}

int dtrtUsesDeviceMemory(const DtrtContext *c) {
  return c && c->backend && c->backend->deviceMemory;
}

const char *dtrtLastError(const DtrtContext *c) { return c ? c->error : ""; }
int dtrtRank(const DtrtContext *c) { return c->rank; }
int dtrtWorldSize(const DtrtContext *c) { return c->worldSize; }
int dtrtCommSize(const DtrtComm *comm) { return comm->size; }
int dtrtCommRank(const DtrtComm *comm) { return comm->rank; }
DtrtComm *dtrtCommWorld(DtrtContext *c) { return c->world; }

DtrtStatus dtrtSetTimeout(DtrtContext *c, double seconds) {
  if (!(seconds > 0 && seconds <= DTRT_MAX_TIMEOUT_S))
    return dtrtFail(c, DTRT_ERR_INVALID,
                    "the timeout must be > 0 s and at most %g s, not %g",
                    DTRT_MAX_TIMEOUT_S, seconds);
  c->timeoutS = seconds;
  return DTRT_OK;
}

/* ---- environment --------------------------------------------------------- */

/* Slurm's names for the launcher variables, read where the torchrun
 * ones are not set (srun starts every rank itself). */
static const char *slurmName(const char *name) {
  return !strcmp(name, "RANK")         ? "SLURM_PROCID"
         : !strcmp(name, "WORLD_SIZE") ? "SLURM_NTASKS"
         : !strcmp(name, "LOCAL_RANK") ? "SLURM_LOCALID"
                                       : NULL;
}

static bool envInt(const char *name, int *out, bool required, DtrtContext *c,
                   DtrtStatus *status) {
  const char *v = getenv(name);
  const char *slurm = slurmName(name);
  if ((!v || !*v) && slurm && getenv(slurm) && *getenv(slurm)) {
    v = getenv(slurm);
    name = slurm;
  }
  if (!v || !*v) {
    if (required)
      *status = dtrtFail(c, DTRT_ERR_ENV,
                         "%s is not set; run under "
                         "dtensor-run (or torchrun, or srun), which sets "
                         "RANK and WORLD_SIZE (SLURM_PROCID, SLURM_NTASKS)",
                         name);
    return !required;
  }
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || x < 0 || x > 1 << 20) {
    *status = dtrtFail(c, DTRT_ERR_ENV,
                       "%s is '%s', not a rank count or "
                       "index",
                       name, v);
    return false;
  }
  *out = (int)x;
  return true;
}

static DtrtStatus drain(DtrtComm *comm);
static void stopWorker(DtrtComm *comm);

/* A context with its defaults and the settings every backend reads. */
static DtrtStatus newContext(DtrtContext **outContext) {
  DtrtContext *c = calloc(1, sizeof(DtrtContext));
  *outContext = c;
  if (!c)
    return DTRT_ERR_NOMEM;
  c->backend = &dtrtShmBackend;
  c->timeoutS = 60.0;
  c->hasErrorSink = pthread_key_create(&c->errorSink, NULL) == 0;
  if (!c->hasErrorSink)
    return dtrtFail(c, DTRT_ERR_SYSTEM, "pthread_key_create failed");
  const char *timeout = getenv("DTENSOR_TIMEOUT_S");
  if (timeout && *timeout) {
    char *end;
    double t = strtod(timeout, &end);
    if (*end || !(t > 0 && t <= DTRT_MAX_TIMEOUT_S))
      return dtrtFail(c, DTRT_ERR_ENV,
                      "DTENSOR_TIMEOUT_S is '%s', not a "
                      "number of seconds > 0 and at most %g",
                      timeout, DTRT_MAX_TIMEOUT_S);
    c->timeoutS = t;
  }
  const char *check = getenv("DTENSOR_CHECK_COLLECTIVES");
  c->checkCollectives = check && !strcmp(check, "1");
  /* The job's token (from the launcher; never derived from the port, which
   * other jobs share). Without one, only groups of one have shared memory
   * (Shm.c). */
  const char *job = getenv("DTENSOR_JOB");
  if (job && strlen(job) >= sizeof(c->job))
    return dtrtFail(c, DTRT_ERR_ENV,
                    "DTENSOR_JOB is longer than %zu "
                    "characters",
                    sizeof(c->job) - 1);
  snprintf(c->job, sizeof(c->job), "%s", job ? job : "");
  for (const char *p = c->job; *p; ++p)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
      return dtrtFail(c, DTRT_ERR_ENV,
                      "the job name '%s' may only hold "
                      "letters, digits, '-' and '_'",
                      c->job);
  return DTRT_OK;
}

static DtrtStatus checkRank(DtrtContext *c) {
  if (c->worldSize < 1 || c->rank >= c->worldSize)
    return dtrtFail(c, DTRT_ERR_ENV, "RANK %d is not below WORLD_SIZE %d",
                    c->rank, c->worldSize);
  return DTRT_OK;
}

/* Makes the world communicator once rank, world size and backend are set. */
static DtrtStatus openWorld(DtrtContext *c) {
  if (checkRank(c) != DTRT_OK)
    return DTRT_ERR_ENV;
  c->usable = true;
  int *all = malloc(sizeof(int) * (size_t)c->worldSize);
  if (!all)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  for (int i = 0; i < c->worldSize; ++i)
    all[i] = i;
  DtrtStatus s = dtrtCommGet(c, c->worldSize, all, &c->world);
  free(all);
  if (s != DTRT_OK)
    c->usable = false;
  return s;
}

DtrtStatus dtrtJobToken(char *out, size_t capacity) {
  unsigned char bytes[16];
  if (capacity < 2 * sizeof(bytes) + 1)
    return DTRT_ERR_INVALID;
  if (!dtRandomBytes(bytes, sizeof(bytes)))
    return DTRT_ERR_SYSTEM;
  for (size_t i = 0; i < sizeof(bytes); ++i)
    snprintf(out + 2 * i, 3, "%02x", bytes[i]);
  return DTRT_OK;
}

DtrtStatus dtrtInit(DtrtContext **outContext) {
  DtrtStatus s = newContext(outContext);
  DtrtContext *c = *outContext;
  if (s != DTRT_OK)
    return s;
  const char *backend = getenv("DTENSOR_BACKEND");
  if (!backend || !*backend || !strcmp(backend, "shm")) {
    c->backend = &dtrtShmBackend;
  } else if (!strcmp(backend, "mpi")) {
#ifdef DTENSOR_HAVE_MPI
    c->backend = &dtrtMpiBackend;
#else
    return dtrtFail(c, DTRT_ERR_UNSUPPORTED,
                    "DTENSOR_BACKEND is 'mpi' but "
                    "this build has no MPI (install libopenmpi-dev and "
                    "rebuild)");
#endif
  } else if (!strcmp(backend, "nccl")) {
#ifdef DTENSOR_HAVE_NCCL
    c->backend = &dtrtNcclBackend;
#else
    return dtrtFail(c, DTRT_ERR_UNSUPPORTED,
                    "DTENSOR_BACKEND is 'nccl' but "
                    "this build has no NCCL (CUDA and NCCL were not found "
                    "at configure time)");
#endif
  } else {
    return dtrtFail(c, DTRT_ERR_UNSUPPORTED,
                    "DTENSOR_BACKEND is '%s' (valid: "
                    "shm, mpi, nccl)",
                    backend);
  }
  /* MPI knows rank and size itself; the others read the torchrun
   * variables first. */
  if (!c->backend->ownRanks &&
      (!envInt("RANK", &c->rank, true, c, &s) ||
       !envInt("WORLD_SIZE", &c->worldSize, true, c, &s) ||
       !envInt("LOCAL_RANK", &c->localRank, false, c, &s)))
    return s;
  /* Before the backend starts anything with them. */
  if (!c->backend->ownRanks && checkRank(c) != DTRT_OK)
    return DTRT_ERR_ENV;
  if (c->backend->init && (s = c->backend->init(c)) != DTRT_OK)
    return s;
  return openWorld(c);
}

DtrtStatus dtrtInitFromMpiComm(const void *mpiComm, DtrtContext **outContext) {
  DtrtStatus s = newContext(outContext);
  DtrtContext *c = *outContext;
  if (s != DTRT_OK)
    return s;
#ifdef DTENSOR_HAVE_MPI
  if (!mpiComm)
    return dtrtFail(c, DTRT_ERR_INVALID, "a NULL MPI communicator");
  c->backend = &dtrtMpiBackend;
  if ((s = dtrtMpiAdopt(c, mpiComm)) != DTRT_OK)
    return s;
  return openWorld(c);
#else
  (void)mpiComm;
  return dtrtFail(c, DTRT_ERR_UNSUPPORTED,
                  "this build has no MPI (install "
                  "libopenmpi-dev and rebuild)");
#endif
}

DtrtStatus dtrtInitFromNcclComm(void *ncclComm, DtrtContext **outContext) {
  DtrtStatus s = newContext(outContext);
  DtrtContext *c = *outContext;
  if (s != DTRT_OK)
    return s;
#ifdef DTENSOR_HAVE_NCCL
  if (!ncclComm)
    return dtrtFail(c, DTRT_ERR_INVALID, "a NULL NCCL communicator");
  c->backend = &dtrtNcclBackend;
  if ((s = dtrtNcclAdopt(c, ncclComm)) != DTRT_OK)
    return s;
  return openWorld(c);
#else
  (void)ncclComm;
  return dtrtFail(c, DTRT_ERR_UNSUPPORTED,
                  "this build has no NCCL (CUDA and "
                  "NCCL were not found at configure time)");
#endif
}

DtrtStatus dtrtFinalize(DtrtContext *c) {
  if (!c)
    return DTRT_OK;
  DtrtStatus s = DTRT_OK;
  for (int i = 0; i < c->numComms; ++i)
    if (c->comms[i]->worker) {
      DtrtStatus d = drain(c->comms[i]);
      if (s == DTRT_OK)
        s = d;
      stopWorker(c->comms[i]);
    }
  if (c->usable && c->world && s == DTRT_OK)
    s = dtrtBarrier(c->world);
  /* Sub-groups first: a backend may build them on the world. */
  for (int i = c->numComms - 1; i >= 0; --i) {
    c->backend->commFree(c->comms[i], s == DTRT_OK);
    free(c->comms[i]->members);
    free(c->comms[i]);
  }
  if (c->backend->finalize)
    c->backend->finalize(c);
  if (c->store)
    dtrtStoreDestroy(c->store);
  if (c->hasErrorSink)
    pthread_key_delete(c->errorSink);
  free(c);
  return s;
}

/* ---- communicators ------------------------------------------------------- */

DtrtStatus dtrtCommGet(DtrtContext *c, int numRanks, const int *ranks,
                       DtrtComm **outComm) {
  if (!c->usable)
    return dtrtFail(c, DTRT_ERR_INVALID, "the runtime did not initialize: %s",
                    c->error);
  int me = -1;
  for (int i = 0; i < numRanks; ++i) {
    if (ranks[i] < 0 || ranks[i] >= c->worldSize)
      return dtrtFail(c, DTRT_ERR_INVALID,
                      "rank %d is not in the world of "
                      "%d",
                      ranks[i], c->worldSize);
    for (int j = 0; j < i; ++j)
      if (ranks[j] == ranks[i])
        return dtrtFail(c, DTRT_ERR_INVALID, "rank %d is listed twice",
                        ranks[i]);
    if (ranks[i] == c->rank)
      me = i;
  }
  if (numRanks < 1 || me < 0)
    return dtrtFail(c, DTRT_ERR_INVALID,
                    "a communicator must include the "
                    "calling rank %d",
                    c->rank);
  for (int i = 0; i < c->numComms; ++i) {
    DtrtComm *k = c->comms[i];
    if (k->size == numRanks &&
        !memcmp(k->members, ranks, sizeof(int) * (size_t)numRanks)) {
      *outComm = k;
      return DTRT_OK;
    }
  }
  if (c->numComms == DTRT_MAX_COMMS)
    return dtrtFail(c, DTRT_ERR_INVALID, "more than %d communicators",
                    DTRT_MAX_COMMS);
  DtrtComm *k = calloc(1, sizeof(DtrtComm));
  int *members = malloc(sizeof(int) * (size_t)numRanks);
  if (!k || !members) {
    free(k);
    free(members);
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  }
  memcpy(members, ranks, sizeof(int) * (size_t)numRanks);
  *k = (DtrtComm){c, numRanks, me, members, NULL, NULL};
  DtrtStatus s = c->backend->commInit(k);
  if (s != DTRT_OK) {
    free(members);
    free(k);
    return s;
  }
  c->comms[c->numComms++] = k;
  *outComm = k;
  return DTRT_OK;
}

DtrtStatus dtrtCommForMeshAxes(DtrtContext *c, int meshRank,
                               const int64_t *meshShape, int numAxes,
                               const int *axes, DtrtComm **outComm) {
  int64_t total = 1;
  for (int a = 0; a < meshRank; ++a)
    total *= meshShape[a] > 0 ? meshShape[a] : 0;
  if (meshRank < 1 || meshRank > 16 || total != c->worldSize)
    return dtrtFail(c, DTRT_ERR_INVALID,
                    "a mesh of %lld devices does not "
                    "match the world of %d ranks",
                    (long long)total, c->worldSize);
  int64_t coords[16];
  for (int a = meshRank - 1, r = c->rank; a >= 0; --a) {
    coords[a] = r % meshShape[a];
    r /= (int)meshShape[a];
  }
  int64_t group = 1;
  for (int i = 0; i < numAxes; ++i) {
    if (axes[i] < 0 || axes[i] >= meshRank)
      return dtrtFail(c, DTRT_ERR_INVALID, "mesh axis %d is out of range",
                      axes[i]);
    group *= meshShape[axes[i]];
  }
  int *ranks = malloc(sizeof(int) * (size_t)group);
  if (!ranks)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  for (int64_t j = 0; j < group; ++j) {
    int64_t m[16];
    memcpy(m, coords, sizeof(int64_t) * (size_t)meshRank);
    for (int i = numAxes - 1, q = (int)j; i >= 0; --i) {
      m[axes[i]] = q % meshShape[axes[i]];
      q /= (int)meshShape[axes[i]];
    }
    int64_t lin = 0;
    for (int a = 0; a < meshRank; ++a)
      lin = lin * meshShape[a] + m[a];
    ranks[j] = (int)lin;
  }
  DtrtStatus s = dtrtCommGet(c, (int)group, ranks, outComm);
  free(ranks);
  return s;
}

/* ---- the public collectives: checks, then the backend -------------------- */

const char *dtrtCollectiveName(DtrtCollectiveKind k) {
  static const char *const names[] = {
#define DTRT_COLL_NAME(e, name) name,
      DTRT_COLL_LIST(DTRT_COLL_NAME)
#undef DTRT_COLL_NAME
  };
  return (unsigned)k <= DTRT_COLL_BARRIER ? names[k] : "collective";
}

DtrtCallSig dtrtCallSigOf(const DtrtCollective *op, uint32_t seq) {
  DtrtCallSig s;
  memset(&s, 0, sizeof(s));
  s.seq = seq;
  s.kind = (uint8_t)op->kind;
  if (op->kind == DTRT_COLL_BARRIER)
    return s;
  s.dtype = (uint8_t)op->dtype;
  s.count = op->count;
  if (op->kind == DTRT_COLL_ALL_REDUCE || op->kind == DTRT_COLL_REDUCE_SCATTER)
    s.reduce = (uint8_t)op->reduce;
  if (op->kind == DTRT_COLL_BROADCAST)
    s.root = op->root;
  return s;
}

static void describeCall(char *out, size_t n, const DtrtCallSig *s) {
  static const char *const reduces[] = {
#define DTRT_REDUCE_TEXT(e, name) name,
      DTRT_REDUCE_LIST(DTRT_REDUCE_TEXT)
#undef DTRT_REDUCE_TEXT
  };
  const char *what = dtrtCollectiveName((DtrtCollectiveKind)s->kind);
  if (s->kind == DTRT_COLL_BARRIER) {
    snprintf(out, n, "%s #%u", what, s->seq);
    return;
  }
  int k = snprintf(out, n, "%s #%u of %llu %s elements", what, s->seq,
                   (unsigned long long)s->count,
                   dtrtDtypeName((DtrtDtype)s->dtype));
  if (k > 0 && (size_t)k < n &&
      (s->kind == DTRT_COLL_ALL_REDUCE || s->kind == DTRT_COLL_REDUCE_SCATTER))
    k += snprintf(out + k, n - (size_t)k, " (%s)",
                  s->reduce <= DTRT_PROD ? reduces[s->reduce] : "?");
  if (k > 0 && (size_t)k < n && s->kind == DTRT_COLL_BROADCAST)
    snprintf(out + k, n - (size_t)k, " from member %d", s->root);
}

DtrtStatus dtrtCallSigAgree(DtrtComm *comm, int a, const DtrtCallSig *sa, int b,
                            const DtrtCallSig *sb) {
  if (sa->seq == sb->seq && sa->kind == sb->kind && sa->dtype == sb->dtype &&
      sa->reduce == sb->reduce && sa->root == sb->root &&
      sa->count == sb->count)
    return DTRT_OK;
  char ta[128], tb[128];
  describeCall(ta, sizeof(ta), sa);
  describeCall(tb, sizeof(tb), sb);
  return dtrtFail(comm->context, DTRT_ERR_MISMATCH,
                  "rank %d: the ranks of a group of %d disagree on a "
                  "collective: rank %d calls %s, rank %d calls %s",
                  comm->context->rank, comm->size, comm->members[a], ta,
                  comm->members[b], tb);
}

static DtrtStatus checkCollective(DtrtComm *comm, const DtrtCollective *op) {
  if (!comm || !op)
    return DTRT_ERR_INVALID;
  DtrtContext *c = comm->context;
  if ((unsigned)op->kind > DTRT_COLL_BARRIER)
    return dtrtFail(c, DTRT_ERR_INVALID, "invalid collective kind %d",
                    (int)op->kind);
  if (op->kind == DTRT_COLL_BARRIER)
    return DTRT_OK;
  const char *what = dtrtCollectiveName(op->kind);
  if (!dtrtDtypeSize(op->dtype))
    return dtrtFail(c, DTRT_ERR_INVALID, "%s: invalid element type %d", what,
                    (int)op->dtype);
  bool needsSend = op->kind != DTRT_COLL_BROADCAST &&
                   !(op->kind == DTRT_COLL_PERMUTE && op->sendTo < 0);
  if ((needsSend && !op->send) || !op->recv)
    return dtrtFail(c, DTRT_ERR_INVALID, "%s: a NULL buffer", what);
  if ((op->kind == DTRT_COLL_ALL_REDUCE ||
       op->kind == DTRT_COLL_REDUCE_SCATTER) &&
      (unsigned)op->reduce > DTRT_PROD)
    return dtrtFail(c, DTRT_ERR_INVALID, "%s: invalid reduction %d", what,
                    (int)op->reduce);
  if ((op->kind == DTRT_COLL_ALL_REDUCE ||
       op->kind == DTRT_COLL_REDUCE_SCATTER) &&
      op->dtype == DTRT_I1 &&
      (op->reduce == DTRT_SUM || op->reduce == DTRT_AVG))
    return dtrtFail(c, DTRT_ERR_INVALID,
                    "%s: a %s of i1 (booleans) is not defined: reduce them "
                    "by max (or), min (and) or prod (and), or sum them as "
                    "integers",
                    what, op->reduce == DTRT_SUM ? "sum" : "avg");
  if (op->kind == DTRT_COLL_BROADCAST &&
      (op->root < 0 || op->root >= comm->size))
    return dtrtFail(c, DTRT_ERR_INVALID,
                    "root %d is not a member position "
                    "(0 to %d)",
                    op->root, comm->size - 1);
  if (op->kind == DTRT_COLL_PERMUTE &&
      (op->sendTo < -1 || op->sendTo >= comm->size || op->recvFrom < -1 ||
       op->recvFrom >= comm->size))
    return dtrtFail(c, DTRT_ERR_INVALID,
                    "permute: send to %d, receive from "
                    "%d: each must be a member position (0 to %d) or -1",
                    op->sendTo, op->recvFrom, comm->size - 1);
  if (op->count > (size_t)INT32_MAX && c->backend != &dtrtShmBackend)
    return dtrtFail(c, DTRT_ERR_INVALID,
                    "%s: %zu elements is more than %s "
                    "takes in one call",
                    what, op->count, c->backend->name);
  return DTRT_OK;
}

/* A blocking collective: after whatever was started on the communicator. */
DtrtStatus dtrtRunCollective(DtrtComm *comm, const DtrtCollective *op) {
  DtrtStatus s = checkCollective(comm, op);
  if (s != DTRT_OK)
    return s;
  if (comm->worker && (s = drain(comm)) != DTRT_OK)
    return s;
  return comm->context->backend->run(comm, op);
}

DtrtStatus dtrtBarrier(DtrtComm *comm) {
  DtrtCollective op = {.kind = DTRT_COLL_BARRIER};
  return dtrtRunCollective(comm, &op);
}

DtrtStatus dtrtAllGather(DtrtComm *comm, const void *send, void *recv,
                         size_t count, DtrtDtype dtype) {
  DtrtCollective op = {.kind = DTRT_COLL_ALL_GATHER,
                       .send = send,
                       .recv = recv,
                       .count = count,
                       .dtype = dtype};
  return dtrtRunCollective(comm, &op);
}

DtrtStatus dtrtAllReduce(DtrtComm *comm, const void *send, void *recv,
                         size_t count, DtrtDtype dtype, DtrtReduce reduce) {
  DtrtCollective op = {.kind = DTRT_COLL_ALL_REDUCE,
                       .send = send,
                       .recv = recv,
                       .count = count,
                       .dtype = dtype,
                       .reduce = reduce};
  return dtrtRunCollective(comm, &op);
}

DtrtStatus dtrtReduceScatter(DtrtComm *comm, const void *send, void *recv,
                             size_t count, DtrtDtype dtype, DtrtReduce reduce) {
  DtrtCollective op = {.kind = DTRT_COLL_REDUCE_SCATTER,
                       .send = send,
                       .recv = recv,
                       .count = count,
                       .dtype = dtype,
                       .reduce = reduce};
  return dtrtRunCollective(comm, &op);
}

DtrtStatus dtrtAllToAll(DtrtComm *comm, const void *send, void *recv,
                        size_t count, DtrtDtype dtype) {
  DtrtCollective op = {.kind = DTRT_COLL_ALL_TO_ALL,
                       .send = send,
                       .recv = recv,
                       .count = count,
                       .dtype = dtype};
  return dtrtRunCollective(comm, &op);
}

DtrtStatus dtrtBroadcast(DtrtComm *comm, void *buffer, size_t count,
                         DtrtDtype dtype, int root) {
  DtrtCollective op = {.kind = DTRT_COLL_BROADCAST,
                       .recv = buffer,
                       .count = count,
                       .dtype = dtype,
                       .root = root};
  return dtrtRunCollective(comm, &op);
}

DtrtStatus dtrtPermute(DtrtComm *comm, const void *send, void *recv,
                       size_t count, DtrtDtype dtype, int sendTo,
                       int recvFrom) {
  DtrtCollective op = {.kind = DTRT_COLL_PERMUTE,
                       .send = send,
                       .recv = recv,
                       .count = count,
                       .dtype = dtype,
                       .sendTo = sendTo,
                       .recvFrom = recvFrom};
  return dtrtRunCollective(comm, &op);
}

/* ---- asynchronous collectives -------------------------------------------- */

/* Backends without native asynchronous collectives (shm) get a progress
 * thread per communicator that runs started collectives in order; a
 * blocking call on that communicator first waits for the queue to empty.
 * Failures on the thread are written into the request (the context's error
 * sink), never into the context another thread may be reading. */
struct DtrtWorker {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t changed;
  DtrtRequest *head, *tail;
  int pending; /* queued or running */
  bool stop;
};

static void *workerMain(void *arg) {
  DtrtComm *comm = arg;
  DtrtWorker *w = comm->worker;
  DtrtContext *c = comm->context;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (!w->head && !w->stop)
      pthread_cond_wait(&w->changed, &w->lock);
    if (!w->head)
      break;
    DtrtRequest *r = w->head;
    w->head = r->next;
    if (!w->head)
      w->tail = NULL;
    pthread_mutex_unlock(&w->lock);
    pthread_setspecific(c->errorSink, r->error);
    r->status = c->backend->run(comm, &r->op);
    pthread_setspecific(c->errorSink, NULL);
    pthread_mutex_lock(&w->lock);
    atomic_store(&r->done, true);
    --w->pending;
    pthread_cond_broadcast(&w->changed);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

static DtrtStatus startWorker(DtrtComm *comm) {
  DtrtWorker *w = calloc(1, sizeof(DtrtWorker));
  if (!w)
    return dtrtFail(comm->context, DTRT_ERR_NOMEM, "out of memory");
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->changed, NULL);
  comm->worker = w;
  int e = pthread_create(&w->thread, NULL, workerMain, comm);
  if (e) {
    comm->worker = NULL;
    pthread_cond_destroy(&w->changed);
    pthread_mutex_destroy(&w->lock);
    free(w);
    return dtrtFail(comm->context, DTRT_ERR_SYSTEM, "pthread_create: %s",
                    strerror(e));
  }
  return DTRT_OK;
}

static void stopWorker(DtrtComm *comm) {
  DtrtWorker *w = comm->worker;
  if (!w)
    return;
  pthread_mutex_lock(&w->lock);
  w->stop = true;
  pthread_cond_broadcast(&w->changed);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->changed);
  pthread_mutex_destroy(&w->lock);
  free(w);
  comm->worker = NULL;
}

/* Waits until the worker has run everything queued (within the timeout,
 * plus the time a started collective itself may wait). */
static DtrtStatus drain(DtrtComm *comm) {
  DtrtWorker *w = comm->worker;
  DtrtContext *c = comm->context;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)(2 * c->timeoutS) + 1;
  pthread_mutex_lock(&w->lock);
  int e = 0;
  while (w->pending && e != ETIMEDOUT)
    e = pthread_cond_timedwait(&w->changed, &w->lock, &until);
  bool idle = w->pending == 0;
  pthread_mutex_unlock(&w->lock);
  return idle ? DTRT_OK
              : dtrtFail(c, DTRT_ERR_TIMEOUT,
                         "rank %d: timed out waiting for "
                         "the started collectives of a group of %d",
                         c->rank, comm->size);
}

DtrtStatus dtrtStart(DtrtComm *comm, const DtrtCollective *op,
                     DtrtRequest **outRequest) {
  *outRequest = NULL;
  DtrtStatus s = checkCollective(comm, op);
  if (s != DTRT_OK)
    return s;
  DtrtContext *c = comm->context;
  DtrtRequest *r = calloc(1, sizeof(DtrtRequest));
  if (!r)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  r->comm = comm;
  r->op = *op;
  if (c->backend->start) {
    if ((s = c->backend->start(comm, r)) != DTRT_OK) {
      free(r);
      return s;
    }
    *outRequest = r;
    return DTRT_OK;
  }
  if (!comm->worker && (s = startWorker(comm)) != DTRT_OK) {
    free(r);
    return s;
  }
  DtrtWorker *w = comm->worker;
  pthread_mutex_lock(&w->lock);
  if (w->tail)
    w->tail->next = r;
  else
    w->head = r;
  w->tail = r;
  ++w->pending;
  pthread_cond_broadcast(&w->changed);
  pthread_mutex_unlock(&w->lock);
  *outRequest = r;
  return DTRT_OK;
}

DtrtStatus dtrtTest(DtrtRequest *r, int *outDone) {
  *outDone = 0;
  if (!r)
    return DTRT_ERR_INVALID;
  DtrtContext *c = r->comm->context;
  if (c->backend->test) {
    bool done = false;
    DtrtStatus s = c->backend->test(r, &done);
    *outDone = done;
    return s;
  }
  if (!atomic_load(&r->done))
    return DTRT_OK;
  *outDone = 1;
  return r->status;
}

DtrtStatus dtrtWait(DtrtRequest *r) {
  if (!r)
    return DTRT_OK;
  DtrtComm *comm = r->comm;
  DtrtContext *c = comm->context;
  DtrtStatus s;
  if (c->backend->wait) {
    s = c->backend->wait(r);
  } else {
    DtrtWorker *w = comm->worker;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(2 * c->timeoutS) + 1;
    pthread_mutex_lock(&w->lock);
    int e = 0;
    while (!atomic_load(&r->done) && e != ETIMEDOUT)
      e = pthread_cond_timedwait(&w->changed, &w->lock, &until);
    pthread_mutex_unlock(&w->lock);
    if (!atomic_load(&r->done))
      /* The request stays queued (the thread still owns it): leaked on
       * purpose rather than freed under the thread. */
      return dtrtFail(c, DTRT_ERR_TIMEOUT,
                      "rank %d: timed out waiting for "
                      "a started %s",
                      c->rank, dtrtCollectiveName(r->op.kind));
    s = r->status;
    if (s != DTRT_OK)
      dtrtFail(c, s, "%s", r->error);
  }
  free(r);
  return s;
}
