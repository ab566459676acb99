/*===- dtensor-rt/Runtime.h - the collective runtime ABI -----------*- C -*-===*
 *
 * What compiled SPMD programs and host applications call: a context per
 * process (rank and world size from the torchrun variables), communicators
 * over groups of ranks (cached), and the collectives of the dtensor dialect
 * on host buffers. Backend `shm` (POSIX shared memory, one host) is the
 * default; see docs/runtime.md. No MLIR here: the runtime ships alone.
 *
 *===----------------------------------------------------------------------===*/
#ifndef DTENSOR_RT_RUNTIME_H
#define DTENSOR_RT_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DTRT_EXPORT __attribute__((visibility("default")))
#else
#define DTRT_EXPORT
#endif

/* Status codes and their messages, from one list. */
#define DTRT_STATUS_LIST(X)                                                    \
  X(DTRT_OK, "success")                                                        \
  X(DTRT_ERR_INVALID, "invalid argument")                                      \
  X(DTRT_ERR_ENV, "bad or missing environment (RANK, WORLD_SIZE, ...)")        \
  X(DTRT_ERR_SYSTEM, "operating system error")                                 \
  X(DTRT_ERR_NOMEM, "out of memory")                                           \
  X(DTRT_ERR_TIMEOUT, "timed out waiting for other ranks")                     \
  X(DTRT_ERR_PEER, "another rank failed")                                      \
  X(DTRT_ERR_UNSUPPORTED, "not supported by this backend")                     \
  X(DTRT_ERR_MISMATCH, "the ranks of a group called different collectives")

/// A runtime status; DTRT_OK is 0.
typedef enum DtrtStatus {
#define DTRT_ENUM(name, text) name,
  DTRT_STATUS_LIST(DTRT_ENUM)
#undef DTRT_ENUM
} DtrtStatus;

/// Returns the generic message of a status (static).
DTRT_EXPORT const char *dtrtStatusString(DtrtStatus status);

/// The element types, one row each: enumerator, name (MLIR's spelling,
/// which is also the compiler's DtensorElementType name, so the two map by
/// name: dtensorElementTypeParse(dtrtDtypeName(t), ...)) and size in
/// bytes. The enum, dtrtDtypeSize, dtrtDtypeName and dtrtDtypeParse all
/// come from this list; the numbers are the ABI of compiled programs.
#define DTRT_DTYPE_LIST(X)                                                     \
  X(DTRT_F32, "f32", 4)                                                        \
  X(DTRT_F64, "f64", 8)                                                        \
  X(DTRT_F16, "f16", 2)                                                        \
  X(DTRT_BF16, "bf16", 2)                                                      \
  X(DTRT_I32, "i32", 4)                                                        \
  X(DTRT_I64, "i64", 8)                                                        \
  X(DTRT_I8, "i8", 1)                                                          \
  X(DTRT_I16, "i16", 2)                                                        \
  X(DTRT_I1, "i1", 1)                                                          \
  X(DTRT_UI8, "ui8", 1)                                                        \
  X(DTRT_F8E4M3FN, "f8E4M3FN", 1)                                              \
  X(DTRT_F8E5M2, "f8E5M2", 1)

/// Element types. i1 is one byte per element (0 or 1); it reduces by max
/// (or), min (and) and prod (and), and a sum or avg of it is refused. The
/// f8 types (f8E4M3FN: 4 exponent bits, 3 mantissa bits, no infinities;
/// f8E5M2: 5 and 2, IEEE's specials) are MLIR's: they reduce in f32,
/// each result rounded to nearest even as arith.truncf rounds (past the
/// largest finite value f8E4M3FN gives NaN, f8E5M2 infinity).
typedef enum DtrtDtype {
#define DTRT_DTYPE_ENUM(e, name, size) e,
  DTRT_DTYPE_LIST(DTRT_DTYPE_ENUM)
#undef DTRT_DTYPE_ENUM
} DtrtDtype;

/// Returns the size in bytes of one element (0 for an invalid type).
DTRT_EXPORT size_t dtrtDtypeSize(DtrtDtype dtype);

/// Returns the name of an element type ("f32", "bf16", ...; "?" if invalid).
DTRT_EXPORT const char *dtrtDtypeName(DtrtDtype dtype);

/// Parses an element type name ("f32", ...); returns 0 if unknown.
DTRT_EXPORT int dtrtDtypeParse(const char *name, DtrtDtype *outDtype);

/// Converts `count` elements of `in` (type `inType`) to `outType` into
/// `out`, which may be `in` itself (not another overlap): floats round to
/// nearest even, float to integer truncates.
DTRT_EXPORT void dtrtConvert(const void *in, DtrtDtype inType, void *out,
                             DtrtDtype outType, size_t count);

/// The reductions, one row each: enumerator and name, which is also the
/// compiler's DtensorReduceKind name and the dialect's `reduce` attribute
/// (the two map by name); the numbers are the ABI of compiled programs.
#define DTRT_REDUCE_LIST(X)                                                    \
  X(DTRT_SUM, "sum")                                                           \
  X(DTRT_MAX, "max")                                                           \
  X(DTRT_MIN, "min")                                                           \
  X(DTRT_AVG, "avg")                                                           \
  X(DTRT_PROD, "prod")

/// Reductions.
typedef enum DtrtReduce {
#define DTRT_REDUCE_ENUM(e, name) e,
  DTRT_REDUCE_LIST(DTRT_REDUCE_ENUM)
#undef DTRT_REDUCE_ENUM
} DtrtReduce;

/// Parses a reduction name of `length` bytes ("sum", ...); 0 if unknown.
/// Header-only, so the compiler can use it without linking the runtime.
static inline int dtrtReduceParse(const char *name, size_t length,
                                  DtrtReduce *outReduce) {
#define DTRT_REDUCE_TRY(e, text)                                               \
  if (name && length == sizeof(text) - 1 && !memcmp(name, text, length)) {     \
    *outReduce = e;                                                            \
    return 1;                                                                  \
  }
  DTRT_REDUCE_LIST(DTRT_REDUCE_TRY)
#undef DTRT_REDUCE_TRY
  return 0;
}

/// A process's runtime state (opaque).
typedef struct DtrtContext DtrtContext;

/// A group of ranks that run collectives together (opaque; owned by the
/// context, which caches one per member list).
typedef struct DtrtComm DtrtComm;

/// Creates the context from the environment: RANK, WORLD_SIZE (required),
/// LOCAL_RANK, MASTER_ADDR, MASTER_PORT (optional), DTENSOR_JOB (the job's
/// token, the same on every rank and unguessable by others, e.g. from
/// dtrtJobToken: shared memory is named after it; required by the shm
/// backend above one rank), DTENSOR_BACKEND ("shm", the default; "mpi";
/// "nccl"), DTENSOR_TIMEOUT_S (default 60). On failure returns the status
/// and a context that only answers dtrtLastError (destroy it with
/// dtrtFinalize).
DTRT_EXPORT DtrtStatus dtrtInit(DtrtContext **outContext);

/// Writes a fresh random job token for DTENSOR_JOB (32 hex digits from the
/// kernel's random source) into `out` (`capacity` >= 33), as a launcher
/// hands its ranks; DTRT_ERR_SYSTEM when no randomness is available.
DTRT_EXPORT DtrtStatus dtrtJobToken(char *out, size_t capacity);

/// Creates an `mpi` context over a communicator the host application owns:
/// `mpiComm` points at an MPI_Comm (the handle, e.g. `&MPI_COMM_WORLD` or
/// one the application split), which becomes the runtime's world; MPI must
/// be initialized and stays the application's to finalize. Fails with
/// DTRT_ERR_UNSUPPORTED in a build without MPI.
DTRT_EXPORT DtrtStatus dtrtInitFromMpiComm(const void *mpiComm,
                                           DtrtContext **outContext);

/// Creates an `nccl` context over an NCCL communicator the host application
/// owns (`ncclComm` is an ncclComm_t), which becomes the runtime's world
/// (rank and size from it, collectives on its CUDA device); the application
/// keeps it and destroys it after dtrtFinalize. Sub-group communicators are
/// made with ids sent point to point over it. Fails with
/// DTRT_ERR_UNSUPPORTED in a build without NCCL.
DTRT_EXPORT DtrtStatus dtrtInitFromNcclComm(void *ncclComm,
                                            DtrtContext **outContext);

/// Returns the name of the context's backend ("shm", "mpi" or "nccl").
DTRT_EXPORT const char *dtrtBackendName(const DtrtContext *context);

/// Returns 1 when the backend's collectives take device (CUDA) buffers
/// (nccl), 0 when they take host buffers (shm, mpi).
DTRT_EXPORT int dtrtUsesDeviceMemory(const DtrtContext *context);

/// Whether compiled GPU programs can run in this process: loads the CUDA
/// driver (libcuda.so.1, by dlopen) and makes LOCAL_RANK's device (modulo
/// the visible ones) current. Returns 1, or 0 with "the cuda target needs a
/// CUDA device: <why>" (the loader's or the driver's message) in `why`
/// (may be NULL). The runtime also defines the mgpu* functions MLIR's GPU
/// lowering calls (lib/Runtime/Cuda.c, docs/runtime.md).
DTRT_EXPORT int dtrtCudaProbe(char *why, size_t capacity);

/// The CUDA devices visible to this process (0 without a driver). Like
/// dtrtCudaProbe it initializes CUDA, which a process must not do before it
/// forks ranks that use CUDA: ask in a child process.
DTRT_EXPORT int dtrtCudaDeviceCount(void);

/// This process's device's compute capability as 10 * major + minor (90
/// for an H100 or H200: chip sm_90), or 0 without a device. Initializes
/// CUDA, as dtrtCudaDeviceCount does.
DTRT_EXPORT int dtrtCudaComputeCapability(void);

/// The CUDA calls of compiled GPU programs (MLIR 22's signatures). Callers
/// of a program compiled with boundary=device use them too: arguments
/// allocated with mgpuMemAlloc and filled with mgpuMemcpy, results (device
/// buffers) read with mgpuMemcpy and freed with mgpuMemFree. A NULL stream
/// is CUDA's default stream; mgpuMemcpy is asynchronous on its stream
/// (mgpuStreamSynchronize waits). Every failure ends the process with
/// CUDA's message (docs/runtime.md).
DTRT_EXPORT void *mgpuStreamCreate(void);
DTRT_EXPORT void mgpuStreamDestroy(void *stream);
DTRT_EXPORT void mgpuStreamSynchronize(void *stream);
DTRT_EXPORT void *mgpuMemAlloc(uint64_t bytes, void *stream, bool hostShared);
DTRT_EXPORT void mgpuMemFree(void *ptr, void *stream);
DTRT_EXPORT void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream);
DTRT_EXPORT void *mgpuModuleLoad(void *data, size_t size);
DTRT_EXPORT void *mgpuModuleLoadJIT(void *data, int optLevel);
DTRT_EXPORT void mgpuModuleUnload(void *module);
DTRT_EXPORT void *mgpuModuleGetFunction(void *module, const char *name);
DTRT_EXPORT void mgpuLaunchKernel(void *function, intptr_t gridX,
                                  intptr_t gridY, intptr_t gridZ,
                                  intptr_t blockX, intptr_t blockY,
                                  intptr_t blockZ, int32_t sharedBytes,
                                  void *stream, void **params, void **extra,
                                  size_t numParams);

/// Waits for every rank (a final barrier), releases the communicators and
/// removes the job's shared memory; NULL is a no-op.
DTRT_EXPORT DtrtStatus dtrtFinalize(DtrtContext *context);

/// Returns this process's rank, and the number of ranks.
DTRT_EXPORT int dtrtRank(const DtrtContext *context);
DTRT_EXPORT int dtrtWorldSize(const DtrtContext *context);

/// Returns the message of the last failure in this context ("" if none);
/// borrowed, valid until the next call.
DTRT_EXPORT const char *dtrtLastError(const DtrtContext *context);

/// The longest timeout accepted (seconds, about 115 days): deadlines are
/// computed in microseconds and in time_t, which larger values overflow.
#define DTRT_MAX_TIMEOUT_S 1e7

/// Sets the timeout of every wait, in seconds (> 0, at most
/// DTRT_MAX_TIMEOUT_S); DTRT_ERR_INVALID otherwise.
DTRT_EXPORT DtrtStatus dtrtSetTimeout(DtrtContext *context, double seconds);

/// Returns the world communicator.
DTRT_EXPORT DtrtComm *dtrtCommWorld(DtrtContext *context);

/// Returns (creating on first use) the communicator of `numRanks` distinct
/// global ranks, in order, which must include this rank. Every member must
/// ask for it with the same list.
DTRT_EXPORT DtrtStatus dtrtCommGet(DtrtContext *context, int numRanks,
                                   const int *ranks, DtrtComm **outComm);

/// Returns the communicator of this rank's group along `axes` of a mesh of
/// the world (row-major, `meshShape` multiplies to the world size): the
/// ranks that differ from this one only in those axes, ordered row-major
/// over them (as the dialect's group positions).
DTRT_EXPORT DtrtStatus dtrtCommForMeshAxes(DtrtContext *context, int meshRank,
                                           const int64_t *meshShape,
                                           int numAxes, const int *axes,
                                           DtrtComm **outComm);

/// Returns the number of members and this rank's position in `comm`.
DTRT_EXPORT int dtrtCommSize(const DtrtComm *comm);
DTRT_EXPORT int dtrtCommRank(const DtrtComm *comm);

/// Collectives on host buffers. `count` is the number of elements each
/// member contributes: all_gather writes size*count elements (member j's at
/// j*count); reduce_scatter reads size*count and writes member j's count;
/// all_to_all sends block j (count elements) to member j and receives block
/// j from member j. Send and receive buffers must not overlap (all_reduce
/// and broadcast may work in place).
DTRT_EXPORT DtrtStatus dtrtAllGather(DtrtComm *comm, const void *send,
                                     void *recv, size_t count, DtrtDtype dtype);
DTRT_EXPORT DtrtStatus dtrtAllReduce(DtrtComm *comm, const void *send,
                                     void *recv, size_t count, DtrtDtype dtype,
                                     DtrtReduce op);
DTRT_EXPORT DtrtStatus dtrtReduceScatter(DtrtComm *comm, const void *send,
                                         void *recv, size_t count,
                                         DtrtDtype dtype, DtrtReduce op);
DTRT_EXPORT DtrtStatus dtrtAllToAll(DtrtComm *comm, const void *send,
                                    void *recv, size_t count, DtrtDtype dtype);
DTRT_EXPORT DtrtStatus dtrtBroadcast(DtrtComm *comm, void *buffer, size_t count,
                                     DtrtDtype dtype, int root);
DTRT_EXPORT DtrtStatus dtrtBarrier(DtrtComm *comm);

/// Point to point within `comm`: sends `count` elements of `send` to member
/// position `sendTo` and receives `count` elements into `recv` from member
/// `recvFrom`, all members at once (a collective permute: each member sends
/// to at most one and receives from at most one). -1 means none; a member
/// that receives from none gets zeros in `recv`. Pairs must match (A sends
/// to B exactly when B receives from A): the shm backend checks this and
/// fails with DTRT_ERR_INVALID naming the mismatch.
DTRT_EXPORT DtrtStatus dtrtPermute(DtrtComm *comm, const void *send, void *recv,
                                   size_t count, DtrtDtype dtype, int sendTo,
                                   int recvFrom);

/* ---- asynchronous collectives -------------------------------------------- */

/// Which collective a DtrtCollective describes, with its name in messages
/// (a broadcast works in place on `recv`; `send` is ignored).
#define DTRT_COLL_LIST(X)                                                      \
  X(DTRT_COLL_ALL_GATHER, "all_gather")                                        \
  X(DTRT_COLL_ALL_REDUCE, "all_reduce")                                        \
  X(DTRT_COLL_REDUCE_SCATTER, "reduce_scatter")                                \
  X(DTRT_COLL_ALL_TO_ALL, "all_to_all")                                        \
  X(DTRT_COLL_BROADCAST, "broadcast")                                          \
  X(DTRT_COLL_PERMUTE, "permute")                                              \
  X(DTRT_COLL_BARRIER, "barrier")

typedef enum DtrtCollectiveKind {
#define DTRT_COLL_ENUM(e, name) e,
  DTRT_COLL_LIST(DTRT_COLL_ENUM)
#undef DTRT_COLL_ENUM
} DtrtCollectiveKind;

/// One collective, as the blocking functions above take it: the fields a
/// kind does not use are ignored.
typedef struct DtrtCollective {
  DtrtCollectiveKind kind;
  const void *send;
  void *recv;
  size_t count;
  DtrtDtype dtype;
  DtrtReduce reduce; /* all_reduce, reduce_scatter */
  int root;          /* broadcast */
  int sendTo;        /* permute */
  int recvFrom;      /* permute */
} DtrtCollective;

/// An asynchronous collective in flight (opaque; freed by dtrtWait).
typedef struct DtrtRequest DtrtRequest;

/// Starts `collective` on `comm` and returns at once with a request; the
/// buffers must stay untouched until dtrtWait returns. Collectives on one
/// communicator run in the order they were started or called (blocking calls
/// included); those on different communicators may overlap. mpi uses MPI's
/// nonblocking collectives, nccl the communicator's CUDA stream, shm a
/// progress thread per communicator. On an argument error nothing starts and
/// `*outRequest` is NULL.
DTRT_EXPORT DtrtStatus dtrtStart(DtrtComm *comm,
                                 const DtrtCollective *collective,
                                 DtrtRequest **outRequest);

/// Sets `*outDone` to 1 when the request has completed (then dtrtWait
/// returns at once), else 0; returns a failure of the collective.
DTRT_EXPORT DtrtStatus dtrtTest(DtrtRequest *request, int *outDone);

/// Waits for the request to complete (within the context's timeout), frees
/// it and returns the collective's status (dtrtLastError says what failed);
/// NULL is a no-op.
DTRT_EXPORT DtrtStatus dtrtWait(DtrtRequest *request);

/* ---- the entry point of compiled programs -------------------------------- */

/// The collectives dtrt_mlir_collective performs (`kind`, numbered in this
/// order from 0: the ABI of compiled programs), with the name of the dtensor
/// op each one runs (the dialect's collective table is checked against it,
/// ctest collective-table-test).
#define DTRT_MLIR_COLLECTIVE_LIST(X)                                           \
  X(DTRT_MLIR_ALL_GATHER, "all_gather")                                        \
  X(DTRT_MLIR_ALL_REDUCE, "all_reduce")                                        \
  X(DTRT_MLIR_REDUCE_SCATTER, "reduce_scatter")                                \
  X(DTRT_MLIR_ALL_TO_ALL, "all_to_all")                                        \
  X(DTRT_MLIR_LOCAL_SPLIT, "local_split")                                      \
  X(DTRT_MLIR_BROADCAST, "broadcast")

enum {
#define DTRT_MLIR_COLLECTIVE_ENUM(e, name) e,
  DTRT_MLIR_COLLECTIVE_LIST(DTRT_MLIR_COLLECTIVE_ENUM)
#undef DTRT_MLIR_COLLECTIVE_ENUM
};

/// What dtensor-lower-to-runtime calls for every dtensor collective, with
/// unranked memrefs as MLIR lowers them (rank, descriptor pointer): the
/// input and output blocks (contiguous), the mesh shape and the group's
/// mesh axes (1-D i64). Uses a process-wide context created at the first
/// call from the environment and finalized at exit; on failure it prints
/// the runtime's message and exits with status 1.
DTRT_EXPORT void dtrt_mlir_collective(int64_t kind, int64_t dtype,
                                      int64_t reduce, int64_t gatherDim,
                                      int64_t shardDim, int64_t root,
                                      int64_t inRank, void *inDesc,
                                      int64_t outRank, void *outDesc,
                                      int64_t meshRank, void *meshDesc,
                                      int64_t axesRank, void *axesDesc);

/// The process-wide context compiled programs use: created from the
/// environment at the first call (of this or of a compiled collective) and
/// finalized at exit; on failure prints the runtime's message and exits
/// with status 1. A host program calls it for its rank (dtrtRank) before
/// building the blocks it passes to a compiled entry. Borrowed.
DTRT_EXPORT DtrtContext *dtrtProcessContext(void);

/// The entry points with one symbol per element type: (suffix, type) for
/// each type of DTRT_DTYPE_LIST, the suffix its name (dtype-test checks
/// both).
#define DTRT_TYPED_SUFFIXES(X)                                                 \
  X(f32, DTRT_F32)                                                             \
  X(f64, DTRT_F64)                                                             \
  X(f16, DTRT_F16)                                                             \
  X(bf16, DTRT_BF16)                                                           \
  X(i32, DTRT_I32)                                                             \
  X(i64, DTRT_I64)                                                             \
  X(i8, DTRT_I8)                                                               \
  X(i16, DTRT_I16)                                                             \
  X(i1, DTRT_I1)                                                               \
  X(ui8, DTRT_UI8)                                                             \
  X(f8E4M3FN, DTRT_F8E4M3FN)                                                   \
  X(f8E5M2, DTRT_F8E5M2)

/// The same, one symbol per element type (f32, f64, f16, bf16, i32, i64,
/// i8, i16, i1, ui8, f8E4M3FN, f8E5M2),
/// as dtensor-lower-to-runtime declares them.
#define DTRT_DECLARE_TYPED(suffix, code)                                       \
  DTRT_EXPORT void dtrt_mlir_collective_##suffix(                              \
      int64_t kind, int64_t dtype, int64_t reduce, int64_t gatherDim,          \
      int64_t shardDim, int64_t root, int64_t inRank, void *inDesc,            \
      int64_t outRank, void *outDesc, int64_t meshRank, void *meshDesc,        \
      int64_t axesRank, void *axesDesc);
DTRT_TYPED_SUFFIXES(DTRT_DECLARE_TYPED)
#undef DTRT_DECLARE_TYPED

/// What dtensor-lower-to-runtime calls for dtensor.permute: `pairs` (1-D
/// i64) holds (source, destination) group positions; this member sends its
/// block to the destination paired with its position and receives from the
/// source paired with it (zeros if none). One symbol per element type.
DTRT_EXPORT void dtrt_mlir_permute(int64_t inRank, void *inDesc,
                                   int64_t outRank, void *outDesc,
                                   int64_t dtype, int64_t meshRank,
                                   void *meshDesc, int64_t axesRank,
                                   void *axesDesc, int64_t pairsRank,
                                   void *pairsDesc);
#define DTRT_DECLARE_TYPED_PERMUTE(suffix, code)                               \
  DTRT_EXPORT void dtrt_mlir_permute_##suffix(                                 \
      int64_t inRank, void *inDesc, int64_t outRank, void *outDesc,            \
      int64_t meshRank, void *meshDesc, int64_t axesRank, void *axesDesc,      \
      int64_t pairsRank, void *pairsDesc);
DTRT_TYPED_SUFFIXES(DTRT_DECLARE_TYPED_PERMUTE)
#undef DTRT_DECLARE_TYPED_PERMUTE

/// A collective that starts now and completes at dtrt_mlir_wait (what
/// dtensor-lower-to-runtime calls for every dtensor collective but permute:
/// started as soon as its input is ready, waited for before its result's
/// first use). The arguments are dtrt_mlir_collective's; returns the request
/// (0: already complete, on device buffers, a group of one or a local
/// split). Neither block may be touched until the wait. On failure prints
/// why and exits with status 1.
DTRT_EXPORT int64_t dtrt_mlir_collective_start(
    int64_t kind, int64_t dtype, int64_t reduce, int64_t gatherDim,
    int64_t shardDim, int64_t root, int64_t inRank, void *inDesc,
    int64_t outRank, void *outDesc, int64_t meshRank, void *meshDesc,
    int64_t axesRank, void *axesDesc);

/// Completes a request of dtrt_mlir_collective_start (0: nothing): waits
/// for the collective, then unpacks what it received into the output.
DTRT_EXPORT void dtrt_mlir_wait(int64_t request);

/// The same per element type: the start without the type code, and the
/// wait taking the input block too (its use there keeps the compiled
/// program from reusing the input's memory before the wait).
#define DTRT_DECLARE_TYPED_ASYNC(suffix, code)                                 \
  DTRT_EXPORT int64_t dtrt_mlir_collective_start_##suffix(                     \
      int64_t kind, int64_t reduce, int64_t gatherDim, int64_t shardDim,       \
      int64_t root, int64_t inRank, void *inDesc, int64_t outRank,             \
      void *outDesc, int64_t meshRank, void *meshDesc, int64_t axesRank,       \
      void *axesDesc);                                                         \
  DTRT_EXPORT void dtrt_mlir_wait_##suffix(int64_t request, int64_t inRank,    \
                                           void *inDesc);
DTRT_TYPED_SUFFIXES(DTRT_DECLARE_TYPED_ASYNC)
#undef DTRT_DECLARE_TYPED_ASYNC

/// Seconds this process's compiled programs have spent so far in collective
/// calls: blocked in them, packing their blocks, waiting for started ones
/// (the communication a step did not hide; dtensor-run --repeat reports it
/// per step). DTENSOR_OVERLAP=0 in the environment makes every started
/// collective complete at its start, so the same program's figure is then
/// all of its communication.
DTRT_EXPORT double dtrtCompiledCommSeconds(void);

/// The per-op profile (lib/Runtime/Profile.c): a program compiled with
/// dtensor-to-llvm{profile=true} calls these around each op that costs
/// time, numbered by dtensor-profile (the module's `dtensor.profile_ops`
/// names them); this process keeps one event (start, seconds) per call.
DTRT_EXPORT void dtrt_profile_begin(int64_t id);
DTRT_EXPORT void dtrt_profile_end(int64_t id);

/// Forgets the events so far (a forked rank: the parent's are not its).
DTRT_EXPORT void dtrtProfileReset(void);

/// Writes this process's events to `path`, a line each: "ID START
/// SECONDS" (monotonic seconds). DTRT_ERR_SYSTEM when it cannot.
DTRT_EXPORT DtrtStatus dtrtProfileWrite(const char *path);

/// What a function using a mesh starts with (dtensor-lower-to-runtime):
/// sets up the process's context and checks that the mesh (1-D i64 shape)
/// has as many devices as the job has ranks; on a mismatch prints what to
/// run instead and exits with status 1.
DTRT_EXPORT void dtrt_mlir_init(int64_t meshRank, void *meshDesc);

/// This process's coordinate along mesh `axis` (row-major over the mesh
/// shape, a 1-D i64 memref): what dtensor.mesh_index lowers to.
DTRT_EXPORT int64_t dtrt_mlir_mesh_coord(int64_t axis, int64_t meshRank,
                                         void *meshDesc);

/* ---- the local compute of compiled programs ------------------------------ */

/// The element types of the contractions compiled programs run on BLAS, as
/// (A, B, C) triples: f32 and f64 natively, bf16 and f16 in f32 (their
/// products accumulated in f32, the result rounded once).
#define DTRT_CONTRACT_TYPES(X)                                                 \
  X(f32, f32, f32)                                                             \
  X(f64, f64, f64)                                                             \
  X(bf16, bf16, bf16)                                                          \
  X(bf16, bf16, f32)                                                           \
  X(f16, f16, f16)                                                             \
  X(f16, f16, f32)

/// The most loops a contraction handed to the runtime may have.
#define DTRT_CONTRACT_MAX_LOOPS 16

/// What dtensor-lower-contractions calls for a contraction C += A·B (C =
/// A·B when `overwrite` is 1: the zero fill before it was dropped) whose
/// indexing maps are projected permutations: `maps` (1-D i64) holds the
/// number of loops, then for each dim of A, of B and of C the loop it
/// reads. Loops in A and C are rows, in B and C columns, in A and B
/// reduced; one of each goes to a BLAS call (gemm, gemv or dot) with
/// leading dimensions from the memrefs' strides, the others are iterated
/// around it, and operands BLAS cannot take as they are (no unit stride,
/// bf16, f16) are packed first. Threads: DTENSOR_THREADS, else the cores
/// shared among LOCAL_WORLD_SIZE ranks (OPENBLAS_NUM_THREADS, when set, is
/// left to OpenBLAS). On a malformed call prints why and exits with status 1.
#define DTRT_DECLARE_CONTRACT(a, b, c)                                         \
  DTRT_EXPORT void dtrt_mlir_contract_##a##_##b##_##c(                         \
      int64_t overwrite, int64_t mapsRank, void *mapsDesc, int64_t aRank,      \
      void *aDesc, int64_t bRank, void *bDesc, int64_t cRank, void *cDesc);
DTRT_CONTRACT_TYPES(DTRT_DECLARE_CONTRACT)
#undef DTRT_DECLARE_CONTRACT

/// C (m x n) = A (m x k) B (k x n) on dense row-major f32 matrices, by the
/// path compiled contractions take on the host (this process's compute
/// threads, then BLAS): what `dtensor-run --calibrate` times to price
/// contractions. m, n, k >= 1; exits with status 1 where BLAS's sizes
/// overflow, as a contraction does.
DTRT_EXPORT void dtrtMatmulF32(int64_t m, int64_t n, int64_t k, const float *a,
                               const float *b, float *c);

/// The allocation functions compiled programs call (dtensor-to-llvm lowers
/// memref.alloc/dealloc to them: MLIR's names, hence no dtrt prefix): malloc
/// and posix_memalign underneath, so results handed to the caller are
/// freed with free(). A failed allocation prints the rank and the size and
/// exits with status 1.
DTRT_EXPORT void *_mlir_memref_to_llvm_alloc(uint64_t size);
DTRT_EXPORT void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment,
                                                     uint64_t size);
DTRT_EXPORT void _mlir_memref_to_llvm_free(void *pointer);

/// memref.copy of strided buffers, as MLIR's lowering calls it (MLIR's C
/// runner utilities define it too, but link libMLIR): `src` and `dst` are
/// unranked memrefs ({rank, descriptor pointer}) of `elemSize`-byte
/// elements and equal sizes.
DTRT_EXPORT void memrefCopy(int64_t elemSize, void *src, void *dst);

/// Sets the number of threads the local compute (BLAS) uses in this process
/// (at least 1); what DTENSOR_THREADS sets at the first contraction.
DTRT_EXPORT void dtrtSetComputeThreads(int threads);

/// Sets this process's compute threads (BLAS's and, with loops in threads,
/// OpenMP's) from DTENSOR_THREADS or its share of the cores, once per
/// process (a forked rank sets its own); compiled programs call it at their
/// start (dtrt_mlir_init) and before their first contraction.
DTRT_EXPORT void dtrtEnsureComputeThreads(void);

/// Starts a count of the bytes a compiled program's buffers (those it
/// allocates through _mlir_memref_to_llvm_*: its intermediate values and
/// results, not its arguments) hold in this process at once.
DTRT_EXPORT void dtrtBufferPeakReset(void);

/// The most bytes those buffers held at once since dtrtBufferPeakReset,
/// above what they held at the reset.
DTRT_EXPORT int64_t dtrtBufferPeak(void);

#ifdef __cplusplus
}
#endif

#endif /* DTENSOR_RT_RUNTIME_H */
