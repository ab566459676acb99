/* Private parts of libdtensor_rt shared by the common layer (Runtime.c) and
 * the shared-memory backend (Shm.c). */
#ifndef DTENSOR_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define DTENSOR_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include "dtensor-rt/Runtime.h"

#include <stdbool.h>

#define DTRT_MAX_COMMS 256
#define DTRT_ERROR_SIZE 512

struct DtrtComm {
  DtrtContext *context;
  int size, rank; /* members, and this rank's position */
  int *members;   /* global ranks */
  void *backend;  /* the backend's state */
};

enum { DTRT_BACKEND_SHM = 0, DTRT_BACKEND_MPI = 1 };

struct DtrtContext {
  int backend;
  bool ownsMpi; /* the runtime called MPI_Init */
  int rank, worldSize, localRank;
  double timeoutS;
  char job[128];
  char error[DTRT_ERROR_SIZE];
  DtrtComm *comms[DTRT_MAX_COMMS];
  int numComms;
  DtrtComm *world;
  bool usable;
};

/// Records a failure message in the context and returns `status`.
DtrtStatus dtrtFail(DtrtContext *c, DtrtStatus status, const char *format,
                    ...) __attribute__((format(printf, 3, 4)));

/// Reduces `n` elements of `in` into `acc` (acc = acc op in); AVG sums.
void dtrtCombine(void *acc, const void *in, size_t n, DtrtDtype dtype,
                 DtrtReduce op);

/// Divides `n` elements by `divisor` (the end of an AVG).
void dtrtScale(void *buf, size_t n, DtrtDtype dtype, int divisor);

/* The shared-memory backend. */
DtrtStatus dtrtShmCommInit(DtrtComm *comm);
void dtrtShmCommFree(DtrtComm *comm, bool unlink);
DtrtStatus dtrtShmBarrier(DtrtComm *comm, const char *what);
/// The slot (bytes) each member has, and member j's slot.
size_t dtrtShmSlotBytes(const DtrtComm *comm);
void *dtrtShmSlot(DtrtComm *comm, int member);
/// Marks the communicator failed, so the others stop waiting.
void dtrtShmMarkFailed(DtrtComm *comm);

/* The MPI backend (Mpi.c, built when MPI is found). */
DtrtStatus dtrtMpiInit(DtrtContext *c);
void dtrtMpiFinalize(DtrtContext *c);
DtrtStatus dtrtMpiCommInit(DtrtComm *comm);
void dtrtMpiCommFree(DtrtComm *comm);
DtrtStatus dtrtMpiBarrier(DtrtComm *comm);
DtrtStatus dtrtMpiAllGather(DtrtComm *comm, const void *send, void *recv,
                            size_t count, DtrtDtype dtype);
DtrtStatus dtrtMpiAllReduce(DtrtComm *comm, const void *send, void *recv,
                            size_t count, DtrtDtype dtype, DtrtReduce op);
DtrtStatus dtrtMpiReduceScatter(DtrtComm *comm, const void *send, void *recv,
                                size_t count, DtrtDtype dtype, DtrtReduce op);
DtrtStatus dtrtMpiAllToAll(DtrtComm *comm, const void *send, void *recv,
                           size_t count, DtrtDtype dtype);
DtrtStatus dtrtMpiBroadcast(DtrtComm *comm, void *buffer, size_t count,
                            DtrtDtype dtype, int root);

#endif
