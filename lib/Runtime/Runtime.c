/* libdtensor_rt: the context, communicators, element types and the
 * collectives over a backend's exchange area (docs/runtime.md). */
#include "RuntimeInternal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

size_t dtrtDtypeSize(DtrtDtype dtype) {
  switch (dtype) {
  case DTRT_F32: case DTRT_I32: return 4;
  case DTRT_F64: case DTRT_I64: return 8;
  case DTRT_F16: case DTRT_BF16: return 2;
  }
  return 0;
}

DtrtStatus dtrtFail(DtrtContext *c, DtrtStatus status, const char *format,
                    ...) {
  if (!c)
    return status;
  va_list args;
  va_start(args, format);
  vsnprintf(c->error, sizeof(c->error), format, args);
  va_end(args);
  return status;
}

const char *dtrtLastError(const DtrtContext *c) { return c ? c->error : ""; }
int dtrtRank(const DtrtContext *c) { return c->rank; }
int dtrtWorldSize(const DtrtContext *c) { return c->worldSize; }
int dtrtCommSize(const DtrtComm *comm) { return comm->size; }
int dtrtCommRank(const DtrtComm *comm) { return comm->rank; }
DtrtComm *dtrtCommWorld(DtrtContext *c) { return c->world; }

DtrtStatus dtrtSetTimeout(DtrtContext *c, double seconds) {
  if (!(seconds > 0))
    return dtrtFail(c, DTRT_ERR_INVALID, "the timeout must be > 0 s, not %g",
                    seconds);
  c->timeoutS = seconds;
  return DTRT_OK;
}

/* ---- environment ---------------------------------------------------------- */

static bool envInt(const char *name, int *out, bool required, DtrtContext *c,
                   DtrtStatus *status) {
  const char *v = getenv(name);
  if (!v || !*v) {
    if (required)
      *status = dtrtFail(c, DTRT_ERR_ENV, "%s is not set; run under "
                         "dtensor-run (or torchrun), which sets RANK and "
                         "WORLD_SIZE", name);
    return !required;
  }
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || x < 0 || x > 1 << 20) {
    *status = dtrtFail(c, DTRT_ERR_ENV, "%s is '%s', not a rank count or "
                       "index", name, v);
    return false;
  }
  *out = (int)x;
  return true;
}

DtrtStatus dtrtInit(DtrtContext **outContext) {
  DtrtContext *c = calloc(1, sizeof(DtrtContext));
  if (!c)
    return DTRT_ERR_NOMEM;
  *outContext = c;
  DtrtStatus s = DTRT_OK;
  c->timeoutS = 60.0;
  const char *backend = getenv("DTENSOR_BACKEND");
  if (backend && !strcmp(backend, "mpi")) {
#ifdef DTENSOR_HAVE_MPI
    c->backend = DTRT_BACKEND_MPI;
    if ((s = dtrtMpiInit(c)) != DTRT_OK)
      return s;
#else
    return dtrtFail(c, DTRT_ERR_UNSUPPORTED, "DTENSOR_BACKEND is 'mpi' but "
                    "this build has no MPI (install libopenmpi-dev and "
                    "rebuild)");
#endif
  } else if (backend && *backend && strcmp(backend, "shm")) {
    return dtrtFail(c, DTRT_ERR_UNSUPPORTED, "DTENSOR_BACKEND is '%s' (valid: "
                    "shm, mpi)", backend);
  } else if (!envInt("RANK", &c->rank, true, c, &s) ||
             !envInt("WORLD_SIZE", &c->worldSize, true, c, &s) ||
             !envInt("LOCAL_RANK", &c->localRank, false, c, &s)) {
    return s;
  }
  if (c->worldSize < 1 || c->rank >= c->worldSize)
    return dtrtFail(c, DTRT_ERR_ENV, "RANK %d is not below WORLD_SIZE %d",
                    c->rank, c->worldSize);
  const char *timeout = getenv("DTENSOR_TIMEOUT_S");
  if (timeout && *timeout) {
    char *end;
    double t = strtod(timeout, &end);
    if (*end || !(t > 0))
      return dtrtFail(c, DTRT_ERR_ENV, "DTENSOR_TIMEOUT_S is '%s', not a "
                      "number of seconds > 0", timeout);
    c->timeoutS = t;
  }
  const char *job = getenv("DTENSOR_JOB");
  const char *port = getenv("MASTER_PORT");
  if (job && *job)
    snprintf(c->job, sizeof(c->job), "%s", job);
  else
    snprintf(c->job, sizeof(c->job), "port%s", port && *port ? port : "0");
  for (const char *p = c->job; *p; ++p)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
      return dtrtFail(c, DTRT_ERR_ENV, "the job name '%s' may only hold "
                      "letters, digits, '-' and '_'", c->job);
  c->usable = true;
  int *all = malloc(sizeof(int) * (size_t)c->worldSize);
  if (!all)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  for (int i = 0; i < c->worldSize; ++i)
    all[i] = i;
  s = dtrtCommGet(c, c->worldSize, all, &c->world);
  free(all);
  return s;
}

DtrtStatus dtrtFinalize(DtrtContext *c) {
  if (!c)
    return DTRT_OK;
  DtrtStatus s = DTRT_OK;
  if (c->usable && c->world)
    s = dtrtBarrier(c->world);
  for (int i = 0; i < c->numComms; ++i) {
#ifdef DTENSOR_HAVE_MPI
    if (c->backend == DTRT_BACKEND_MPI)
      dtrtMpiCommFree(c->comms[i]);
    else
#endif
      dtrtShmCommFree(c->comms[i], s == DTRT_OK);
    free(c->comms[i]->members);
    free(c->comms[i]);
  }
#ifdef DTENSOR_HAVE_MPI
  if (c->backend == DTRT_BACKEND_MPI)
    dtrtMpiFinalize(c);
#endif
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
      return dtrtFail(c, DTRT_ERR_INVALID, "rank %d is not in the world of "
                      "%d", ranks[i], c->worldSize);
    for (int j = 0; j < i; ++j)
      if (ranks[j] == ranks[i])
        return dtrtFail(c, DTRT_ERR_INVALID, "rank %d is listed twice",
                        ranks[i]);
    if (ranks[i] == c->rank)
      me = i;
  }
  if (numRanks < 1 || me < 0)
    return dtrtFail(c, DTRT_ERR_INVALID, "a communicator must include the "
                    "calling rank %d", c->rank);
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
  *k = (DtrtComm){c, numRanks, me, members, NULL};
#ifdef DTENSOR_HAVE_MPI
  DtrtStatus s = c->backend == DTRT_BACKEND_MPI ? dtrtMpiCommInit(k)
                                                : dtrtShmCommInit(k);
#else
  DtrtStatus s = dtrtShmCommInit(k);
#endif
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
    return dtrtFail(c, DTRT_ERR_INVALID, "a mesh of %lld devices does not "
                    "match the world of %d ranks", (long long)total,
                    c->worldSize);
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

/* ---- element arithmetic -------------------------------------------------- */

static float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ff;
  float f;
  if (exp == 0)
    f = ldexpf((float)mant, -24);
  else if (exp == 31)
    f = mant ? NAN : INFINITY;
  else
    f = ldexpf((float)(mant | 0x400), (int)exp - 25);
  return sign ? -f : f;
}

static uint16_t floatToHalf(float f) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  float a = fabsf(f);
  if (isnan(a))
    return sign | 0x7e00;
  if (a >= 65520.0f)
    return sign | 0x7c00;
  if (a < ldexpf(1.0f, -24) * 0.5f)
    return sign;
  int e;
  frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  int exp = e - 1 + 15;
  if (exp <= 0) /* subnormal: units of 2^-24 */
    return sign | (uint16_t)lrintf(ldexpf(a, 24));
  uint32_t mant = (uint32_t)lrintf(ldexpf(a, 10 - (e - 1))) - 0x400;
  if (mant == 0x400) { /* rounded up to the next power of two */
    mant = 0;
    ++exp;
  }
  return sign | (uint16_t)(exp << 10) | (uint16_t)mant;
}

static float bf16ToFloat(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t floatToBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000)
    return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

#define COMBINE(T, acc, in, n, op)                                             \
  do {                                                                         \
    T *a_ = (T *)(acc);                                                        \
    const T *b_ = (const T *)(in);                                             \
    for (size_t i_ = 0; i_ < (n); ++i_)                                        \
      switch (op) {                                                            \
      case DTRT_MAX: a_[i_] = b_[i_] > a_[i_] ? b_[i_] : a_[i_]; break;        \
      case DTRT_MIN: a_[i_] = b_[i_] < a_[i_] ? b_[i_] : a_[i_]; break;        \
      case DTRT_PROD: a_[i_] = a_[i_] * b_[i_]; break;                         \
      default: a_[i_] = a_[i_] + b_[i_]; break;                                \
      }                                                                        \
  } while (0)

static float combineFloat(float a, float b, DtrtReduce op) {
  switch (op) {
  case DTRT_MAX: return b > a ? b : a;
  case DTRT_MIN: return b < a ? b : a;
  case DTRT_PROD: return a * b;
  default: return a + b;
  }
}

void dtrtCombine(void *acc, const void *in, size_t n, DtrtDtype dtype,
                 DtrtReduce op) {
  switch (dtype) {
  case DTRT_F32: COMBINE(float, acc, in, n, op); break;
  case DTRT_F64: COMBINE(double, acc, in, n, op); break;
  case DTRT_I32: COMBINE(int32_t, acc, in, n, op); break;
  case DTRT_I64: COMBINE(int64_t, acc, in, n, op); break;
  case DTRT_F16:
  case DTRT_BF16: {
    uint16_t *a = acc;
    const uint16_t *b = in;
    bool half = dtype == DTRT_F16;
    for (size_t i = 0; i < n; ++i) {
      float x = half ? halfToFloat(a[i]) : bf16ToFloat(a[i]);
      float y = half ? halfToFloat(b[i]) : bf16ToFloat(b[i]);
      float r = combineFloat(x, y, op);
      a[i] = half ? floatToHalf(r) : floatToBf16(r);
    }
    break;
  }
  }
}

void dtrtScale(void *buf, size_t n, DtrtDtype dtype, int divisor) {
  for (size_t i = 0; i < n; ++i)
    switch (dtype) {
    case DTRT_F32: ((float *)buf)[i] /= (float)divisor; break;
    case DTRT_F64: ((double *)buf)[i] /= (double)divisor; break;
    case DTRT_I32: ((int32_t *)buf)[i] /= divisor; break;
    case DTRT_I64: ((int64_t *)buf)[i] /= divisor; break;
    case DTRT_F16: {
      uint16_t *h = buf;
      h[i] = floatToHalf(halfToFloat(h[i]) / (float)divisor);
      break;
    }
    case DTRT_BF16: {
      uint16_t *h = buf;
      h[i] = floatToBf16(bf16ToFloat(h[i]) / (float)divisor);
      break;
    }
    }
}

/* ---- collectives over the exchange slots ----------------------------------- */

/* Every collective goes in rounds: each member writes (part of) its input
 * into its own slot, all wait, each reads what it needs from the slots, all
 * wait again before the slots are reused. A round carries at most one slot
 * per member; larger buffers take several rounds. */

static DtrtStatus checkArgs(DtrtComm *comm, DtrtDtype dtype, const void *a,
                            const void *b) {
  if (!comm)
    return DTRT_ERR_INVALID;
  if (!dtrtDtypeSize(dtype))
    return dtrtFail(comm->context, DTRT_ERR_INVALID, "invalid element type %d",
                    (int)dtype);
  if (!a || !b)
    return dtrtFail(comm->context, DTRT_ERR_INVALID, "a NULL buffer");
  return DTRT_OK;
}

DtrtStatus dtrtBarrier(DtrtComm *comm) {
  if (!comm)
    return DTRT_ERR_INVALID;
#ifdef DTENSOR_HAVE_MPI
  if (comm->context->backend == DTRT_BACKEND_MPI)
    return dtrtMpiBarrier(comm);
#endif
  return dtrtShmBarrier(comm, "barrier");
}

static DtrtStatus slotAllGather(DtrtComm *comm, const void *send, void *recv,
                         size_t count, DtrtDtype dtype) {
  DtrtStatus s = checkArgs(comm, dtype, send, recv);
  if (s)
    return s;
  size_t es = dtrtDtypeSize(dtype), bytes = count * es;
  size_t step = dtrtShmSlotBytes(comm) / es * es;
  for (size_t off = 0; off < bytes || (off == 0 && bytes == 0); off += step) {
    size_t n = bytes - off < step ? bytes - off : step;
    memcpy(dtrtShmSlot(comm, comm->rank), (const char *)send + off, n);
    if ((s = dtrtShmBarrier(comm, "all_gather")))
      return s;
    for (int j = 0; j < comm->size; ++j)
      memcpy((char *)recv + (size_t)j * bytes + off, dtrtShmSlot(comm, j), n);
    if ((s = dtrtShmBarrier(comm, "all_gather")))
      return s;
    if (bytes == 0)
      break;
  }
  return DTRT_OK;
}

/* Reduces the `n`-byte part at `off` of every member's slot into `out`. */
static void reduceSlots(DtrtComm *comm, void *out, size_t n, DtrtDtype dtype,
                        DtrtReduce op, size_t slotOffset) {
  size_t es = dtrtDtypeSize(dtype);
  memcpy(out, (char *)dtrtShmSlot(comm, 0) + slotOffset, n);
  for (int j = 1; j < comm->size; ++j)
    dtrtCombine(out, (char *)dtrtShmSlot(comm, j) + slotOffset, n / es, dtype,
                op);
  if (op == DTRT_AVG)
    dtrtScale(out, n / es, dtype, comm->size);
}

static DtrtStatus slotAllReduce(DtrtComm *comm, const void *send, void *recv,
                         size_t count, DtrtDtype dtype, DtrtReduce op) {
  DtrtStatus s = checkArgs(comm, dtype, send, recv);
  if (s)
    return s;
  size_t es = dtrtDtypeSize(dtype), bytes = count * es;
  size_t step = dtrtShmSlotBytes(comm) / es * es;
  /* Small rounds: each member reduces the whole round from every slot (two
   * waits). Large rounds: each member reduces its 1/size part and publishes
   * it in its own slot, then everyone copies the parts (three waits, but
   * each member reads the data about twice instead of size times). */
  for (size_t off = 0; off < bytes; off += step) {
    size_t n = bytes - off < step ? bytes - off : step;
    memcpy(dtrtShmSlot(comm, comm->rank), (const char *)send + off, n);
    if ((s = dtrtShmBarrier(comm, "all_reduce")))
      return s;
    size_t elems = n / es, part = (elems + (size_t)comm->size - 1) /
                                  (size_t)comm->size;
    if (n < (64u << 10) || comm->size == 1) {
      reduceSlots(comm, (char *)recv + off, n, dtype, op, 0);
    } else {
      size_t first = part * (size_t)comm->rank;
      size_t mine = first >= elems ? 0
                    : (elems - first < part ? elems - first : part);
      char *out = (char *)recv + off + first * es;
      if (mine)
        reduceSlots(comm, out, mine * es, dtype, op, first * es);
      /* Only this member reads its part of its own slot: no wait needed
       * before overwriting it with the result. */
      if (mine)
        memcpy((char *)dtrtShmSlot(comm, comm->rank) + first * es, out,
               mine * es);
      if ((s = dtrtShmBarrier(comm, "all_reduce")))
        return s;
      for (int j = 0; j < comm->size; ++j) {
        size_t f = part * (size_t)j;
        if (j == comm->rank || f >= elems)
          continue;
        size_t m = elems - f < part ? elems - f : part;
        memcpy((char *)recv + off + f * es,
               (char *)dtrtShmSlot(comm, j) + f * es, m * es);
      }
    }
    if ((s = dtrtShmBarrier(comm, "all_reduce")))
      return s;
  }
  return DTRT_OK;
}

/* Copies the part [off, off + n) of every member's block of `send` (blocks
 * of `bytes`) into this member's slot, one after the other. */
static void packBlocks(DtrtComm *comm, const void *send, size_t bytes,
                       size_t off, size_t n) {
  char *slot = dtrtShmSlot(comm, comm->rank);
  for (int j = 0; j < comm->size; ++j)
    memcpy(slot + (size_t)j * n, (const char *)send + (size_t)j * bytes + off,
           n);
}

static DtrtStatus slotReduceScatter(DtrtComm *comm, const void *send, void *recv,
                             size_t count, DtrtDtype dtype, DtrtReduce op) {
  DtrtStatus s = checkArgs(comm, dtype, send, recv);
  if (s)
    return s;
  size_t es = dtrtDtypeSize(dtype), bytes = count * es;
  /* A round carries the same part of every member's block. */
  size_t step = dtrtShmSlotBytes(comm) / (size_t)comm->size / es * es;
  if (step == 0)
    return dtrtFail(comm->context, DTRT_ERR_INVALID, "the exchange slot is "
                    "too small for %d members", comm->size);
  for (size_t off = 0; off < bytes; off += step) {
    size_t n = bytes - off < step ? bytes - off : step;
    packBlocks(comm, send, bytes, off, n);
    if ((s = dtrtShmBarrier(comm, "reduce_scatter")))
      return s;
    reduceSlots(comm, (char *)recv + off, n, dtype, op,
                (size_t)comm->rank * n);
    if ((s = dtrtShmBarrier(comm, "reduce_scatter")))
      return s;
  }
  return DTRT_OK;
}

static DtrtStatus slotAllToAll(DtrtComm *comm, const void *send, void *recv,
                        size_t count, DtrtDtype dtype) {
  DtrtStatus s = checkArgs(comm, dtype, send, recv);
  if (s)
    return s;
  size_t es = dtrtDtypeSize(dtype), bytes = count * es;
  size_t step = dtrtShmSlotBytes(comm) / (size_t)comm->size / es * es;
  if (step == 0)
    return dtrtFail(comm->context, DTRT_ERR_INVALID, "the exchange slot is "
                    "too small for %d members", comm->size);
  for (size_t off = 0; off < bytes; off += step) {
    size_t n = bytes - off < step ? bytes - off : step;
    packBlocks(comm, send, bytes, off, n);
    if ((s = dtrtShmBarrier(comm, "all_to_all")))
      return s;
    for (int j = 0; j < comm->size; ++j)
      memcpy((char *)recv + (size_t)j * bytes + off,
             (char *)dtrtShmSlot(comm, j) + (size_t)comm->rank * n, n);
    if ((s = dtrtShmBarrier(comm, "all_to_all")))
      return s;
  }
  return DTRT_OK;
}

static DtrtStatus slotBroadcast(DtrtComm *comm, void *buffer, size_t count,
                         DtrtDtype dtype, int root) {
  DtrtStatus s = checkArgs(comm, dtype, buffer, buffer);
  if (s)
    return s;
  if (root < 0 || root >= comm->size)
    return dtrtFail(comm->context, DTRT_ERR_INVALID, "root %d is not a member "
                    "position (0 to %d)", root, comm->size - 1);
  size_t es = dtrtDtypeSize(dtype), bytes = count * es;
  size_t step = dtrtShmSlotBytes(comm) / es * es;
  for (size_t off = 0; off < bytes; off += step) {
    size_t n = bytes - off < step ? bytes - off : step;
    if (comm->rank == root)
      memcpy(dtrtShmSlot(comm, root), (char *)buffer + off, n);
    if ((s = dtrtShmBarrier(comm, "broadcast")))
      return s;
    if (comm->rank != root)
      memcpy((char *)buffer + off, dtrtShmSlot(comm, root), n);
    if ((s = dtrtShmBarrier(comm, "broadcast")))
      return s;
  }
  return DTRT_OK;
}

/* ---- the public collectives: checks, then the backend ---------------------- */

#ifdef DTENSOR_HAVE_MPI
#define ON_MPI(comm, call)                                                     \
  if ((comm)->context->backend == DTRT_BACKEND_MPI)                            \
    return call;
#else
#define ON_MPI(comm, call)
#endif

DtrtStatus dtrtAllGather(DtrtComm *comm, const void *send, void *recv,
                         size_t count, DtrtDtype dtype) {
  DtrtStatus s = checkArgs(comm, dtype, send, recv);
  if (s)
    return s;
  ON_MPI(comm, dtrtMpiAllGather(comm, send, recv, count, dtype))
  return slotAllGather(comm, send, recv, count, dtype);
}

DtrtStatus dtrtAllReduce(DtrtComm *comm, const void *send, void *recv,
                         size_t count, DtrtDtype dtype, DtrtReduce op) {
  DtrtStatus s = checkArgs(comm, dtype, send, recv);
  if (s)
    return s;
  if ((unsigned)op > DTRT_PROD)
    return dtrtFail(comm->context, DTRT_ERR_INVALID, "invalid reduction %d",
                    (int)op);
  ON_MPI(comm, dtrtMpiAllReduce(comm, send, recv, count, dtype, op))
  return slotAllReduce(comm, send, recv, count, dtype, op);
}

DtrtStatus dtrtReduceScatter(DtrtComm *comm, const void *send, void *recv,
                             size_t count, DtrtDtype dtype, DtrtReduce op) {
  DtrtStatus s = checkArgs(comm, dtype, send, recv);
  if (s)
    return s;
  if ((unsigned)op > DTRT_PROD)
    return dtrtFail(comm->context, DTRT_ERR_INVALID, "invalid reduction %d",
                    (int)op);
  ON_MPI(comm, dtrtMpiReduceScatter(comm, send, recv, count, dtype, op))
  return slotReduceScatter(comm, send, recv, count, dtype, op);
}

DtrtStatus dtrtAllToAll(DtrtComm *comm, const void *send, void *recv,
                        size_t count, DtrtDtype dtype) {
  DtrtStatus s = checkArgs(comm, dtype, send, recv);
  if (s)
    return s;
  ON_MPI(comm, dtrtMpiAllToAll(comm, send, recv, count, dtype))
  return slotAllToAll(comm, send, recv, count, dtype);
}

DtrtStatus dtrtBroadcast(DtrtComm *comm, void *buffer, size_t count,
                         DtrtDtype dtype, int root) {
  DtrtStatus s = checkArgs(comm, dtype, buffer, buffer);
  if (s)
    return s;
  if (root < 0 || root >= comm->size)
    return dtrtFail(comm->context, DTRT_ERR_INVALID, "root %d is not a member "
                    "position (0 to %d)", root, comm->size - 1);
  ON_MPI(comm, dtrtMpiBroadcast(comm, buffer, count, dtype, root))
  return slotBroadcast(comm, buffer, count, dtype, root);
}
