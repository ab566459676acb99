/* The MPI backend (built when CMake finds MPI): the world is MPI_COMM_WORLD
 * and a communicator is MPI_Comm_create_group over its members, which only
 * the members call. Collectives map to their MPI namesakes; f16/bf16
 * reductions use MPI ops made from the runtime's own arithmetic, and avg
 * is a sum divided by the group size. Waits have no timeout here: MPI
 * itself decides what happens when a rank dies (mpirun stops the job). */
#include "RuntimeInternal.h"

#include <mpi.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct Mpi {
  MPI_Comm comm;
} Mpi;

static DtrtStatus mpiFail(DtrtContext *c, int code, const char *what) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, text, &n);
  return dtrtFail(c, DTRT_ERR_SYSTEM, "rank %d: %s: %.*s", c->rank, what, n,
                  text);
}

DtrtStatus dtrtMpiInit(DtrtContext *c) {
  int ready = 0;
  MPI_Initialized(&ready);
  if (!ready) {
    int code = MPI_Init(NULL, NULL);
    if (code != MPI_SUCCESS)
      return mpiFail(c, code, "MPI_Init");
    c->ownsMpi = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c->worldSize);
  return DTRT_OK;
}

void dtrtMpiFinalize(DtrtContext *c) {
  if (c->ownsMpi)
    MPI_Finalize();
}

DtrtStatus dtrtMpiCommInit(DtrtComm *comm) {
  DtrtContext *c = comm->context;
  Mpi *m = calloc(1, sizeof(Mpi));
  if (!m)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  MPI_Group world, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_incl(world, comm->size, comm->members, &group);
  int code = MPI_Comm_create_group(MPI_COMM_WORLD, group, 0, &m->comm);
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  if (code != MPI_SUCCESS) {
    free(m);
    return mpiFail(c, code, "MPI_Comm_create_group");
  }
  MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
  comm->backend = m;
  return DTRT_OK;
}

void dtrtMpiCommFree(DtrtComm *comm) {
  Mpi *m = comm->backend;
  if (!m)
    return;
  MPI_Comm_free(&m->comm);
  free(m);
  comm->backend = NULL;
}

static MPI_Comm mpiComm(DtrtComm *comm) { return ((Mpi *)comm->backend)->comm; }

static MPI_Datatype mpiType(DtrtDtype t) {
  switch (t) {
  case DTRT_F32: return MPI_FLOAT;
  case DTRT_F64: return MPI_DOUBLE;
  case DTRT_I32: return MPI_INT32_T;
  case DTRT_I64: return MPI_INT64_T;
  default: return MPI_UINT16_T; /* f16, bf16: reduced by our own ops */
  }
}

/* 16-bit floats travel as MPI types named "dtensor_f16"/"dtensor_bf16"
 * (so an MPI op can tell them apart without global state), reduced by one
 * op function per reduce kind. */
static DtrtDtype halfTypeOf(MPI_Datatype *t) {
  char name[MPI_MAX_OBJECT_NAME];
  int n = 0;
  MPI_Type_get_name(*t, name, &n);
  return n >= 11 && name[8] == 'b' ? DTRT_BF16 : DTRT_F16;
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
  if (t != DTRT_F16 && t != DTRT_BF16)
    return mpiType(t);
  MPI_Datatype d;
  MPI_Type_contiguous(1, MPI_UINT16_T, &d);
  MPI_Type_set_name(d, t == DTRT_F16 ? "dtensor_f16" : "dtensor_bf16");
  MPI_Type_commit(&d);
  *owned = true;
  return d;
}

static DtrtStatus reduceOp(DtrtComm *comm, DtrtDtype t, DtrtReduce op,
                           MPI_Op *out, bool *custom) {
  *custom = t == DTRT_F16 || t == DTRT_BF16;
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
  case DTRT_MAX: *out = MPI_MAX; break;
  case DTRT_MIN: *out = MPI_MIN; break;
  case DTRT_PROD: *out = MPI_PROD; break;
  default: *out = MPI_SUM; break;
  }
  return DTRT_OK;
}

#define MPI_CHECK(comm, call, what)                                            \
  do {                                                                         \
    int code_ = (call);                                                        \
    if (code_ != MPI_SUCCESS)                                                  \
      return mpiFail((comm)->context, code_, what);                            \
  } while (0)

DtrtStatus dtrtMpiBarrier(DtrtComm *comm) {
  MPI_CHECK(comm, MPI_Barrier(mpiComm(comm)), "MPI_Barrier");
  return DTRT_OK;
}

DtrtStatus dtrtMpiAllGather(DtrtComm *comm, const void *send, void *recv,
                            size_t count, DtrtDtype dtype) {
  MPI_CHECK(comm,
            MPI_Allgather(send, (int)count, mpiType(dtype), recv, (int)count,
                          mpiType(dtype), mpiComm(comm)),
            "MPI_Allgather");
  return DTRT_OK;
}

DtrtStatus dtrtMpiAllReduce(DtrtComm *comm, const void *send, void *recv,
                            size_t count, DtrtDtype dtype, DtrtReduce op) {
  MPI_Op mop;
  bool custom;
  DtrtStatus s = reduceOp(comm, dtype, op, &mop, &custom);
  if (s)
    return s;
  bool owned;
  MPI_Datatype type = typeFor(dtype, &owned);
  int code = MPI_Allreduce(send, recv, (int)count, type, mop, mpiComm(comm));
  if (custom)
    MPI_Op_free(&mop);
  if (owned)
    MPI_Type_free(&type);
  if (code != MPI_SUCCESS)
    return mpiFail(comm->context, code, "MPI_Allreduce");
  if (op == DTRT_AVG)
    dtrtScale(recv, count, dtype, comm->size);
  return DTRT_OK;
}

DtrtStatus dtrtMpiReduceScatter(DtrtComm *comm, const void *send, void *recv,
                                size_t count, DtrtDtype dtype, DtrtReduce op) {
  MPI_Op mop;
  bool custom;
  DtrtStatus s = reduceOp(comm, dtype, op, &mop, &custom);
  if (s)
    return s;
  bool owned;
  MPI_Datatype type = typeFor(dtype, &owned);
  int code = MPI_Reduce_scatter_block(send, recv, (int)count, type, mop,
                                      mpiComm(comm));
  if (custom)
    MPI_Op_free(&mop);
  if (owned)
    MPI_Type_free(&type);
  if (code != MPI_SUCCESS)
    return mpiFail(comm->context, code, "MPI_Reduce_scatter_block");
  if (op == DTRT_AVG)
    dtrtScale(recv, count, dtype, comm->size);
  return DTRT_OK;
}

DtrtStatus dtrtMpiAllToAll(DtrtComm *comm, const void *send, void *recv,
                           size_t count, DtrtDtype dtype) {
  MPI_CHECK(comm,
            MPI_Alltoall(send, (int)count, mpiType(dtype), recv, (int)count,
                         mpiType(dtype), mpiComm(comm)),
            "MPI_Alltoall");
  return DTRT_OK;
}

DtrtStatus dtrtMpiBroadcast(DtrtComm *comm, void *buffer, size_t count,
                            DtrtDtype dtype, int root) {
  MPI_CHECK(comm,
            MPI_Bcast(buffer, (int)count, mpiType(dtype), root, mpiComm(comm)),
            "MPI_Bcast");
  return DTRT_OK;
}
