/* The MPI backend (built when CMake finds MPI): the world is MPI_COMM_WORLD
 * (or the communicator a host application hands in) and a communicator is
 * MPI_Comm_create_group over its members, which only the members call.
 * Started collectives are MPI's nonblocking ones (MPI_Iallreduce, ...).
 * Collectives map to their MPI namesakes; f16/bf16 reductions use MPI ops made
 * from the runtime's own arithmetic, and avg is a sum divided by the group
 * size. MPI has no timed waits: started collectives are tested until done or
 * the timeout; a blocking one (and the creation of a communicator) runs under a
 * watchdog thread that, past the context's timeout, says where this rank was
 * stuck and ends the process, so that mpirun stops the job. */
#include "RuntimeInternal.h"

#include <mpi.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct Mpi {
  MPI_Comm comm;
  uint32_t calls;    /* collectives so far (DtrtCallSig.seq) */
  DtrtCallSig *sigs; /* the members' calls, under DTENSOR_CHECK_COLLECTIVES */
} Mpi;

/* The watchdog of blocking calls: a deadline (microseconds on dtrtNow's
 * clock; 0 while none runs), what runs, and the group's size. */
typedef struct Watchdog {
  pthread_t thread;
  bool running;
  atomic_bool stop;
  _Atomic long long deadlineUs;
  _Atomic(const char *) what;
  atomic_int groupSize;
  int rank;
  double timeoutS;
} Watchdog;

/* The context's world. */
typedef struct MpiWorld {
  MPI_Comm comm;
  bool ownsMpi; /* the runtime called MPI_Init */
  Watchdog watchdog;
} MpiWorld;

static void *watch(void *arg) {
  Watchdog *w = arg;
  while (!atomic_load(&w->stop)) {
    long long deadline = atomic_load(&w->deadlineUs);
    if (deadline && dtrtNow() * 1e6 > (double)deadline) {
      /* The collective cannot be cancelled: end the rank, loudly. */
      fprintf(stderr,
              "dtensor-rt: rank %d: timed out after %g s in %s "
              "waiting for the other ranks of a group of %d; ending this "
              "rank\n",
              w->rank, w->timeoutS, atomic_load(&w->what),
              atomic_load(&w->groupSize));
      fflush(stderr);
      _exit(1);
    }
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  return NULL;
}

static void startWatchdog(DtrtContext *c, MpiWorld *w) {
  w->watchdog.rank = c->rank;
  w->watchdog.running =
      pthread_create(&w->watchdog.thread, NULL, watch, &w->watchdog) == 0;
}

/* Arms the watchdog for a blocking call of `comm` (`what`), or disarms it
 * (`what` NULL). Without a watchdog thread the call just blocks. */
static void guard(DtrtContext *c, int groupSize, const char *what) {
  Watchdog *w = &((MpiWorld *)c->backendState)->watchdog;
  if (!what) {
    atomic_store(&w->deadlineUs, 0);
    return;
  }
  w->timeoutS = c->timeoutS;
  atomic_store(&w->what, what);
  atomic_store(&w->groupSize, groupSize);
  atomic_store(&w->deadlineUs, (long long)((dtrtNow() + c->timeoutS) * 1e6));
}

static MPI_Comm worldOf(DtrtContext *c) {
  return ((MpiWorld *)c->backendState)->comm;
}

static DtrtStatus mpiFail(DtrtContext *c, int code, const char *what) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, text, &n);
  return dtrtFail(c, DTRT_ERR_SYSTEM, "rank %d: %s: %.*s", c->rank, what, n,
                  text);
}

static DtrtStatus mpiInit(DtrtContext *c) {
  MpiWorld *w = calloc(1, sizeof(MpiWorld));
  if (!w)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  c->backendState = w;
  int ready = 0;
  MPI_Initialized(&ready);
  if (!ready) {
    int code = MPI_Init(NULL, NULL);
    if (code != MPI_SUCCESS)
      return mpiFail(c, code, "MPI_Init");
    w->ownsMpi = true;
  }
  w->comm = MPI_COMM_WORLD;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c->worldSize);
  startWatchdog(c, w);
  return DTRT_OK;
}

DtrtStatus dtrtMpiAdopt(DtrtContext *c, const void *mpiComm) {
  int ready = 0;
  MPI_Initialized(&ready);
  if (!ready)
    return dtrtFail(c, DTRT_ERR_INVALID,
                    "MPI is not initialized: the host "
                    "application calls MPI_Init before handing in a "
                    "communicator");
  MpiWorld *w = calloc(1, sizeof(MpiWorld));
  if (!w)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  c->backendState = w;
  /* A duplicate: our collectives never mix with the application's. */
  int code = MPI_Comm_dup(*(const MPI_Comm *)mpiComm, &w->comm);
  if (code != MPI_SUCCESS) {
    w->comm = MPI_COMM_NULL;
    return mpiFail(c, code, "MPI_Comm_dup of the handed-in communicator");
  }
  MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(w->comm, &c->rank);
  MPI_Comm_size(w->comm, &c->worldSize);
  startWatchdog(c, w);
  return DTRT_OK;
}

static void mpiFinalize(DtrtContext *c) {
  MpiWorld *w = c->backendState;
  if (!w)
    return;
  if (w->watchdog.running) {
    atomic_store(&w->watchdog.stop, true);
    pthread_join(w->watchdog.thread, NULL);
  }
  if (w->comm != MPI_COMM_WORLD && w->comm != MPI_COMM_NULL)
    MPI_Comm_free(&w->comm);
  if (w->ownsMpi)
    MPI_Finalize();
  free(w);
  c->backendState = NULL;
}

static DtrtStatus mpiCommInit(DtrtComm *comm) {
  DtrtContext *c = comm->context;
  Mpi *m = calloc(1, sizeof(Mpi));
  if (!m)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  MPI_Group world, group;
  MPI_Comm_group(worldOf(c), &world);
  MPI_Group_incl(world, comm->size, comm->members, &group);
  guard(c, comm->size, "MPI_Comm_create_group");
  int code = MPI_Comm_create_group(worldOf(c), group, 0, &m->comm);
  guard(c, 0, NULL);
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  if (code != MPI_SUCCESS) {
    free(m);
    return mpiFail(c, code, "MPI_Comm_create_group");
  }
  MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
  comm->backend = m;
  if (c->checkCollectives &&
      !(m->sigs = calloc((size_t)comm->size, sizeof(DtrtCallSig))))
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  return DTRT_OK;
}

static void mpiCommFree(DtrtComm *comm, bool clean) {
  (void)clean;
  Mpi *m = comm->backend;
  if (!m)
    return;
  MPI_Comm_free(&m->comm);
  free(m->sigs);
  free(m);
  comm->backend = NULL;
}

static MPI_Comm mpiComm(DtrtComm *comm) { return ((Mpi *)comm->backend)->comm; }

/* Every type of DTRT_DTYPE_LIST, no default: a type added to the list
 * without a case here fails the build (-Wswitch -Werror). */
static MPI_Datatype mpiType(DtrtDtype t) {
  switch (t) {
  case DTRT_F32:
    return MPI_FLOAT;
  case DTRT_F64:
    return MPI_DOUBLE;
  case DTRT_I32:
    return MPI_INT32_T;
  case DTRT_I64:
    return MPI_INT64_T;
  case DTRT_I8:
    return MPI_INT8_T;
  case DTRT_I16:
    return MPI_INT16_T;
  case DTRT_UI8:
  case DTRT_I1: /* bytes of 0 or 1: MPI's max, min and prod are or, and */
    return MPI_UINT8_T;
  case DTRT_F16: /* 16-bit floats: reduced by our own ops */
  case DTRT_BF16:
    return MPI_UINT16_T;
  case DTRT_F8E4M3FN: /* 8-bit floats: the same */
  case DTRT_F8E5M2:
    return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

/* 16- and 8-bit floats travel as MPI types named "dtensor_<type>" (so an
 * MPI op can tell them apart without global state), reduced by one op
 * function per reduce kind. */
static bool ownFloat(DtrtDtype t) {
  return t == DTRT_F16 || t == DTRT_BF16 || t == DTRT_F8E4M3FN ||
         t == DTRT_F8E5M2;
}

static DtrtDtype halfTypeOf(MPI_Datatype *t) {
  char name[MPI_MAX_OBJECT_NAME];
  int n = 0;
  MPI_Type_get_name(*t, name, &n);
  DtrtDtype d;
  return n > 8 && dtrtDtypeParse(name + 8, &d) ? d : DTRT_F16;
}

#define HALF_OP(fn, kind)                                                      \
  static void fn(void *in, void *inout, int *len, MPI_Datatype *t) {           \
    dtrtCombine(inout, in, (size_t)*len, halfTypeOf(t), kind);                 \
  }
HALF_OP(halfSum, DTRT_SUM)
HALF_OP(halfMax, DTRT_MAX)
HALF_OP(halfMin, DTRT_MIN)
HALF_OP(halfProd, DTRT_PROD)

/* The MPI datatype of `t`; for 16-bit floats a new named type the caller
 * frees (`*owned`). */
static MPI_Datatype typeFor(DtrtDtype t, bool *owned) {
  *owned = false;
  if (!ownFloat(t))
    return mpiType(t);
  MPI_Datatype d;
  char name[32];
  snprintf(name, sizeof(name), "dtensor_%s", dtrtDtypeName(t));
  MPI_Type_contiguous(1, mpiType(t), &d);
  MPI_Type_set_name(d, name);
  MPI_Type_commit(&d);
  *owned = true;
  return d;
}

static DtrtStatus reduceOp(DtrtComm *comm, DtrtDtype t, DtrtReduce op,
                           MPI_Op *out, bool *custom) {
  *custom = ownFloat(t);
  if (*custom) {
    MPI_User_function *fn = op == DTRT_MAX    ? halfMax
                            : op == DTRT_MIN  ? halfMin
                            : op == DTRT_PROD ? halfProd
                                              : halfSum;
    int code = MPI_Op_create(fn, 1, out);
    return code == MPI_SUCCESS ? DTRT_OK
                               : mpiFail(comm->context, code, "MPI_Op_create");
  }
  switch (op) {
  case DTRT_MAX:
    *out = MPI_MAX;
    break;
  case DTRT_MIN:
    *out = MPI_MIN;
    break;
  case DTRT_PROD:
    *out = MPI_PROD;
    break;
  default:
    *out = MPI_SUM;
    break;
  }
  return DTRT_OK;
}

/* One collective in flight: its MPI requests and what to release or finish
 * when they complete. */
typedef struct InFlight {
  MPI_Request reqs[2];
  int numReqs;
  MPI_Op op;
  bool customOp;
  MPI_Datatype type;
  bool ownedType;
  void *scratch; /* a copy of an input that overlaps the output */
} InFlight;

/* The bytes a collective reads (`input`) or writes on this rank. */
static size_t bytesOf(const DtrtComm *comm, const DtrtCollective *op,
                      bool input) {
  size_t n = op->count * dtrtDtypeSize(op->dtype), p = (size_t)comm->size;
  switch (op->kind) {
  case DTRT_COLL_ALL_GATHER:
    return input ? n : n * p;
  case DTRT_COLL_REDUCE_SCATTER:
    return input ? n * p : n;
  case DTRT_COLL_ALL_TO_ALL:
    return n * p;
  default:
    return n;
  }
}

/* What MPI gets as the input: MPI_IN_PLACE for an all_reduce on one
 * buffer, a copy of an input that otherwise overlaps the output (MPI
 * refuses aliased buffers: MPI_ERR_BUFFER), else the input itself. */
static const void *inputFor(const DtrtComm *comm, const DtrtCollective *op,
                            InFlight *f, DtrtStatus *outStatus) {
  *outStatus = DTRT_OK;
  const char *in = op->send, *out = op->recv;
  size_t inBytes = bytesOf(comm, op, true), outBytes = bytesOf(comm, op, false);
  if (!in || !out || op->kind == DTRT_COLL_BARRIER ||
      op->kind == DTRT_COLL_BROADCAST || in + inBytes <= out ||
      out + outBytes <= in)
    return in;
  if (op->kind == DTRT_COLL_ALL_REDUCE && in == out)
    return MPI_IN_PLACE;
  f->scratch = malloc(inBytes ? inBytes : 1);
  if (!f->scratch) {
    *outStatus = dtrtFail(comm->context, DTRT_ERR_NOMEM,
                          "rank %d: out of "
                          "memory copying an input that overlaps its output",
                          comm->context->rank);
    return NULL;
  }
  memcpy(f->scratch, in, inBytes);
  return f->scratch;
}

/* Posts `op` as MPI's blocking (then it is done on return) or nonblocking
 * collective. One switch for both, so the two paths cannot drift apart. */
static DtrtStatus post(DtrtComm *comm, const DtrtCollective *op, bool async,
                       InFlight *f) {
  MPI_Comm mc = mpiComm(comm);
  int n = (int)op->count;
  f->numReqs = 0;
  f->customOp = f->ownedType = false;
  f->scratch = NULL;
  DtrtStatus inStatus;
  const void *send = inputFor(comm, op, f, &inStatus);
  if (inStatus)
    return inStatus;
  bool reduces =
      op->kind == DTRT_COLL_ALL_REDUCE || op->kind == DTRT_COLL_REDUCE_SCATTER;
  if (reduces) {
    DtrtStatus s = reduceOp(comm, op->dtype, op->reduce, &f->op, &f->customOp);
    if (s)
      return s;
    f->type = typeFor(op->dtype, &f->ownedType);
  } else {
    f->type = mpiType(op->dtype);
  }
  MPI_Request *r = f->reqs;
  int code = MPI_SUCCESS;
  const char *what = "";
  switch (op->kind) {
  case DTRT_COLL_BARRIER:
    what = "MPI_Barrier";
    code = async ? MPI_Ibarrier(mc, r) : MPI_Barrier(mc);
    break;
  case DTRT_COLL_ALL_GATHER:
    what = "MPI_Allgather";
    code = async ? MPI_Iallgather(send, n, f->type, op->recv, n, f->type, mc, r)
                 : MPI_Allgather(send, n, f->type, op->recv, n, f->type, mc);
    break;
  case DTRT_COLL_ALL_REDUCE:
    what = "MPI_Allreduce";
    code = async ? MPI_Iallreduce(send, op->recv, n, f->type, f->op, mc, r)
                 : MPI_Allreduce(send, op->recv, n, f->type, f->op, mc);
    break;
  case DTRT_COLL_REDUCE_SCATTER:
    what = "MPI_Reduce_scatter_block";
    code =
        async ? MPI_Ireduce_scatter_block(send, op->recv, n, f->type, f->op, mc,
                                          r)
              : MPI_Reduce_scatter_block(send, op->recv, n, f->type, f->op, mc);
    break;
  case DTRT_COLL_ALL_TO_ALL:
    what = "MPI_Alltoall";
    code = async ? MPI_Ialltoall(send, n, f->type, op->recv, n, f->type, mc, r)
                 : MPI_Alltoall(send, n, f->type, op->recv, n, f->type, mc);
    break;
  case DTRT_COLL_BROADCAST:
    what = "MPI_Bcast";
    code = async ? MPI_Ibcast(op->recv, n, f->type, op->root, mc, r)
                 : MPI_Bcast(op->recv, n, f->type, op->root, mc);
    break;
  case DTRT_COLL_PERMUTE: {
    what = "MPI_Sendrecv";
    int to = op->sendTo < 0 ? MPI_PROC_NULL : op->sendTo;
    int from = op->recvFrom < 0 ? MPI_PROC_NULL : op->recvFrom;
    if (op->recvFrom < 0)
      memset(op->recv, 0, op->count * dtrtDtypeSize(op->dtype));
    if (!async) {
      code = MPI_Sendrecv(send, n, f->type, to, 77, op->recv, n, f->type, from,
                          77, mc, MPI_STATUS_IGNORE);
    } else {
      /* Posted requests are counted even on failure: they must complete
       * or be cancelled before the buffers are given back. */
      code = MPI_Irecv(op->recv, n, f->type, from, 77, mc, &r[0]);
      if (code == MPI_SUCCESS) {
        f->numReqs = 1;
        code = MPI_Isend(send, n, f->type, to, 77, mc, &r[1]);
        if (code == MPI_SUCCESS)
          f->numReqs = 2;
      }
    }
    break;
  }
  }
  if (async && op->kind != DTRT_COLL_PERMUTE && code == MPI_SUCCESS)
    f->numReqs = 1;
  return code == MPI_SUCCESS ? DTRT_OK : mpiFail(comm->context, code, what);
}

/* Releases what `post` made and finishes an average. */
static void finish(DtrtComm *comm, const DtrtCollective *op, InFlight *f,
                   bool ok) {
  if (f->customOp)
    MPI_Op_free(&f->op);
  if (f->ownedType)
    MPI_Type_free(&f->type);
  f->customOp = f->ownedType = false;
  free(f->scratch);
  f->scratch = NULL;
  size_t n =
      op->kind == DTRT_COLL_ALL_REDUCE || op->kind == DTRT_COLL_REDUCE_SCATTER
          ? op->count
          : 0;
  if (ok && n && op->reduce == DTRT_AVG)
    dtrtScale(op->recv, n, op->dtype, comm->size);
}

/* Under DTENSOR_CHECK_COLLECTIVES=1: the members gather their calls (a
 * blocking allgather of a few bytes, also before a started collective) and
 * each compares every call with member 0's before any data moves. */
static DtrtStatus checkCalls(DtrtComm *comm, const DtrtCollective *op) {
  Mpi *m = comm->backend;
  if (!m->sigs)
    return DTRT_OK;
  DtrtCallSig mine = dtrtCallSigOf(op, m->calls++);
  guard(comm->context, comm->size, "the check of the members' calls");
  int code = MPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, m->sigs,
                           (int)sizeof(mine), MPI_BYTE, m->comm);
  guard(comm->context, 0, NULL);
  if (code != MPI_SUCCESS)
    return mpiFail(comm->context, code, "MPI_Allgather (call check)");
  for (int j = 1; j < comm->size; ++j) {
    DtrtStatus s = dtrtCallSigAgree(comm, 0, &m->sigs[0], j, &m->sigs[j]);
    if (s != DTRT_OK)
      return s;
  }
  return DTRT_OK;
}

static DtrtStatus mpiRun(DtrtComm *comm, const DtrtCollective *op) {
  InFlight f;
  DtrtStatus checked = checkCalls(comm, op);
  if (checked != DTRT_OK)
    return checked;
  guard(comm->context, comm->size, dtrtCollectiveName(op->kind));
  DtrtStatus s = post(comm, op, false, &f);
  guard(comm->context, 0, NULL);
  finish(comm, op, &f, s == DTRT_OK);
  return s;
}

static DtrtStatus mpiStart(DtrtComm *comm, DtrtRequest *r) {
  DtrtStatus checked = checkCalls(comm, &r->op);
  if (checked != DTRT_OK)
    return checked;
  InFlight *f = calloc(1, sizeof(InFlight));
  if (!f)
    return dtrtFail(comm->context, DTRT_ERR_NOMEM, "out of memory");
  DtrtStatus s = post(comm, &r->op, true, f);
  if (s != DTRT_OK) {
    /* A half-posted permute: its receive must still complete or be
     * cancelled before the buffer is given back. */
    for (int i = 0; i < f->numReqs; ++i)
      if (f->reqs[i] != MPI_REQUEST_NULL) {
        MPI_Cancel(&f->reqs[i]);
        MPI_Wait(&f->reqs[i], MPI_STATUS_IGNORE);
      }
    finish(comm, &r->op, f, false);
    free(f);
    return s;
  }
  r->backend = f;
  return DTRT_OK;
}

static DtrtStatus mpiTest(DtrtRequest *r, bool *outDone) {
  InFlight *f = r->backend;
  int done = 0;
  int code = MPI_Testall(f->numReqs, f->reqs, &done, MPI_STATUSES_IGNORE);
  if (code != MPI_SUCCESS)
    return mpiFail(r->comm->context, code, "MPI_Testall");
  if (done && !atomic_load(&r->done)) {
    finish(r->comm, &r->op, f, true);
    atomic_store(&r->done, true);
  }
  *outDone = done;
  return DTRT_OK;
}

/* MPI has no timed wait: test until done or the context's timeout. */
static DtrtStatus mpiWait(DtrtRequest *r) {
  DtrtContext *c = r->comm->context;
  InFlight *f = r->backend;
  double start = dtrtNow();
  DtrtStatus s = DTRT_OK;
  for (unsigned spins = 0;; ++spins) {
    bool done = false;
    if ((s = mpiTest(r, &done)) != DTRT_OK || done)
      break;
    if (spins > 1000)
      sched_yield();
    if ((spins & 1023) == 0 && dtrtNow() - start > c->timeoutS) {
      s = dtrtFail(c, DTRT_ERR_TIMEOUT,
                   "rank %d: timed out after %g s "
                   "waiting for a started collective of a group of %d",
                   c->rank, c->timeoutS, r->comm->size);
      break;
    }
  }
  if (s != DTRT_OK)
    finish(r->comm, &r->op, f, false);
  free(f);
  r->backend = NULL;
  return s;
}

const DtrtBackend dtrtMpiBackend = {
    .name = "mpi",
    .deviceMemory = false,
    .ownRanks = true,
    .init = mpiInit,
    .finalize = mpiFinalize,
    .commInit = mpiCommInit,
    .commFree = mpiCommFree,
    .run = mpiRun,
    .start = mpiStart,
    .test = mpiTest,
    .wait = mpiWait,
};
