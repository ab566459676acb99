/* Private parts of libdtensor_rt shared by the common layer (Runtime.c),
 * the backends (Shm.c, Mpi.c, Nccl.c) and the rendezvous store (Store.c). */
#ifndef DTENSOR_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define DTENSOR_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include "dtensor-rt/Runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define DTRT_MAX_COMMS 256
#define DTRT_ERROR_SIZE 512

typedef struct DtrtWorker DtrtWorker;
typedef struct DtrtStore DtrtStore;

struct DtrtComm {
  DtrtContext *context;
  int size, rank;     /* members, and this rank's position */
  int *members;       /* global ranks */
  void *backend;      /* the backend's state */
  DtrtWorker *worker; /* progress thread of asynchronous collectives (shm) */
};

struct DtrtRequest {
  DtrtComm *comm;
  DtrtCollective op;
  DtrtStatus status;
  atomic_bool done;
  char error[DTRT_ERROR_SIZE];
  void *backend;     /* the backend's in-flight state */
  DtrtRequest *next; /* the worker's queue */
};

/// A backend: what the common layer calls. `run` performs one collective to
/// completion; `start`/`test`/`wait` are native asynchronous collectives
/// (NULL: a progress thread per communicator runs `run`).
typedef struct DtrtBackend {
  const char *name;
  bool deviceMemory;
  /// The backend knows rank and world size itself (mpi): `init` sets them;
  /// otherwise they come from the environment before `init`.
  bool ownRanks;
  DtrtStatus (*init)(DtrtContext *c); /* may be NULL */
  void (*finalize)(DtrtContext *c);
  DtrtStatus (*commInit)(DtrtComm *comm);
  /// `clean`: the job ended well, so shared resources may be removed.
  void (*commFree)(DtrtComm *comm, bool clean);
  DtrtStatus (*run)(DtrtComm *comm, const DtrtCollective *op);
  DtrtStatus (*start)(DtrtComm *comm, DtrtRequest *request);
  DtrtStatus (*test)(DtrtRequest *request, bool *outDone);
  DtrtStatus (*wait)(DtrtRequest *request);
} DtrtBackend;

struct DtrtContext {
  const DtrtBackend *backend;
  void *backendState; /* e.g. the MPI world or NCCL device */
  int rank, worldSize, localRank;
  double timeoutS;
  /* DTENSOR_CHECK_COLLECTIVES=1: backends that do not always compare the
   * members' calls (mpi) compare them before each collective. */
  bool checkCollectives;
  char job[128];
  char error[DTRT_ERROR_SIZE];
  /* Where dtrtFail writes on a progress thread (its request's buffer). */
  pthread_key_t errorSink;
  bool hasErrorSink;
  DtrtComm *comms[DTRT_MAX_COMMS];
  int numComms;
  DtrtComm *world;
  DtrtStore *store; /* the rendezvous store (nccl launched by dtensor-run) */
  bool usable;
};

/// Records a failure message in the context (or, on a progress thread, in
/// its request) and returns `status`.
DtrtStatus dtrtFail(DtrtContext *c, DtrtStatus status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/// The name of a collective kind ("all_gather", ...), for messages.
const char *dtrtCollectiveName(DtrtCollectiveKind kind);

/// What a member says it calls, compared across a group's members before
/// any data moves (fixed size: it travels in shared memory and over MPI).
typedef struct DtrtCallSig {
  uint32_t seq;   /* the member's collectives on this communicator so far */
  uint8_t kind;   /* DtrtCollectiveKind */
  uint8_t dtype;  /* DtrtDtype (0 for a barrier) */
  uint8_t reduce; /* DtrtReduce for reductions, else 0 */
  uint8_t pad;
  int32_t root;   /* broadcast's root, else 0 */
  uint64_t count; /* elements per member (0 for a barrier) */
} DtrtCallSig;

/// The signature of `op` as the `seq`-th collective on its communicator.
DtrtCallSig dtrtCallSigOf(const DtrtCollective *op, uint32_t seq);

/// DTRT_OK when member `a`'s and member `b`'s signatures are the same;
/// otherwise fails `comm`'s context (DTRT_ERR_MISMATCH) naming both ranks
/// and both calls.
DtrtStatus dtrtCallSigAgree(DtrtComm *comm, int a, const DtrtCallSig *sa, int b,
                            const DtrtCallSig *sb);

/// Runs `op` on `comm` now (after what was started on it), as the blocking
/// functions do.
DtrtStatus dtrtRunCollective(DtrtComm *comm, const DtrtCollective *op);

/// Seconds on a monotonic clock.
double dtrtNow(void);

/// Reduces `n` elements of `in` into `acc` (acc = acc op in); AVG sums.
void dtrtCombine(void *acc, const void *in, size_t n, DtrtDtype dtype,
                 DtrtReduce op);

/// Divides `n` elements by `divisor` (the end of an AVG).
void dtrtScale(void *buf, size_t n, DtrtDtype dtype, int divisor);

/// The shm backend's segment name for `comm` in job `job`
/// ("/dtensor-<job>-<tag>", the tag an HMAC of the members under
/// DTENSOR_SECRET, or under the job token when no secret is set).
void dtrtShmSegmentName(const char *job, const DtrtComm *comm, char *out,
                        size_t capacity);

/// Removes this user's shm segments whose creator has exited (a job killed
/// during a communicator's set-up, before the name was removed); never
/// another user's, nor one whose creator lives.
void dtrtShmRemoveStale(void);

/// The backends. MPI and NCCL exist when the build found them.
extern const DtrtBackend dtrtShmBackend;
#ifdef DTENSOR_HAVE_MPI
extern const DtrtBackend dtrtMpiBackend;
/// Makes `c` an mpi context over the host's communicator.
DtrtStatus dtrtMpiAdopt(DtrtContext *c, const void *mpiComm);
#endif
#ifdef DTENSOR_HAVE_NCCL
extern const DtrtBackend dtrtNcclBackend;
/// Makes `c` an nccl context over the host's communicator.
DtrtStatus dtrtNcclAdopt(DtrtContext *c, void *ncclComm);
#endif

/* The rendezvous store (Store.c): a key-value store served by rank 0 at
 * MASTER_ADDR:MASTER_PORT over TCP, as torchrun's, open only to clients
 * that know the job's DTENSOR_SECRET. */

/// Connects to (rank 0: starts serving) the store of `worldSize` ranks.
DtrtStatus dtrtStoreCreate(DtrtContext *c, const char *addr, int port,
                           DtrtStore **outStore);
/// Stops serving (rank 0, once every rank has disconnected or the timeout
/// passed) and frees the store; NULL is a no-op.
void dtrtStoreDestroy(DtrtStore *store);
/// Sets `key` (1 to 200 bytes) to `size` bytes (at most 1 MiB); refused
/// (DTRT_ERR_INVALID) once the store holds 64 MiB.
DtrtStatus dtrtStoreSet(DtrtStore *store, const char *key, const void *value,
                        size_t size);
/// Waits (within the context's timeout) until `key` is set and copies its
/// value, which must be `size` bytes, into `out`.
DtrtStatus dtrtStoreGet(DtrtStore *store, const char *key, void *out,
                        size_t size);

/* The compiled programs' process context (Compiled.c). */

/// In a freshly forked rank: forgets the process context inherited from the
/// launcher (it is the launcher's, in the launcher's job), so the rank's
/// first collective creates its own from the rank's environment.
void dtrtProcessContextForget(void);

/* Device memory around the collectives of compiled GPU programs (Cuda.c;
 * every call but the first ends the process with CUDA's message when it
 * fails, as compiled calls do). */

/// Whether `p` is device memory: false in a process that never loaded the
/// driver (a CPU program).
bool dtrtCudaIsDevicePointer(const void *p);
/// A device buffer of `bytes` (zeroed when `zero`), ordered on the
/// runtime's copy stream; freed with dtrtCudaScratchFree.
void *dtrtCudaScratch(size_t bytes, bool zero);
void dtrtCudaScratchFree(void *p);
/// Queues a copy of `height` rows of `width` bytes between any two of host
/// and device memory on the copy stream (dtrtCudaWait waits for it).
void dtrtCudaCopy2D(void *dst, size_t dstPitch, const void *src,
                    size_t srcPitch, size_t width, size_t height);
void dtrtCudaWait(void);
/// Waits for all the device's work (cuBLAS's on the default stream
/// included).
void dtrtCudaWaitAll(void);
/// Prints "dtensor runtime: [rank R: ]<message>" and exits 1.
__attribute__((format(printf, 1, 2), noreturn)) void
dtrtCudaFatal(const char *format, ...);

/* Contractions (Contract.c on BLAS; Cublas.c on the GPU). */

/// A strided matrix of a contraction: element (r, c) at p + (r * rs + c *
/// cs) elements; `bs` elements between the matrices of a batch.
typedef struct DtrtMat {
  char *p;
  DtrtDtype type;
  int64_t rows, cols, rs, cs, bs;
} DtrtMat;

/// How BLAS reads a matrix in place (dtrtMatOrientation): rows of unit
/// stride (DTRT_MAT_ROW, leading dimension the row stride), columns of unit
/// stride (DTRT_MAT_COL), or neither (DTRT_MAT_PACK: a copy is needed).
enum { DTRT_MAT_PACK = 0, DTRT_MAT_ROW = 1, DTRT_MAT_COL = 2 };
int dtrtMatOrientation(const DtrtMat *x, int64_t *outLd);
/// C = A B as C^T = B^T A^T: `a` becomes B^T, `b` A^T, `c` C^T (views of
/// the same memory).
void dtrtMatTransposeProduct(DtrtMat *a, DtrtMat *b, DtrtMat *c);

/// A column-major GEMM call (cuBLAS's): out (m x n, leading dimension
/// ldOut) = op(first) (m x k) op(second) (k x n), op 0: as it lies, 1:
/// transposed; each operand's batch stride in elements.
typedef struct DtrtGemmCall {
  int opFirst, opSecond;
  int64_t m, n, k;
  const char *first, *second;
  char *out;
  int64_t ldFirst, ldSecond, ldOut;
  int64_t strideFirst, strideSecond, strideOut;
  DtrtDtype typeFirst, typeSecond, typeOut;
} DtrtGemmCall;

/// The column-major call that computes row-major C = A B on the matrices
/// as they lie; false when one of them has no unit stride (it needs a
/// packed copy).
bool dtrtGemmPlan(DtrtMat a, DtrtMat b, DtrtMat c, DtrtGemmCall *out);

/// C = A B (+ C when `beta`) for `batch` products on the GPU with cuBLAS
/// (libcublas by dlopen), on the default stream: the i-th at each
/// operand's p + i * bs. Each operand is in device memory and readable in
/// place (not DTRT_MAT_PACK). f32 (TF32 tensor cores when DTENSOR_TF32=1),
/// f64, and bf16 or f16 inputs with f32 accumulation into C of theirs or
/// f32.
void dtrtCublasGemm(DtrtMat a, DtrtMat b, int beta, DtrtMat c, int64_t batch);

#endif
