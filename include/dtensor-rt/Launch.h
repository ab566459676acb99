/*===- dtensor-rt/Launch.h - start a job's ranks on this host ------*- C -*-===*
 *
 * The launcher dtensor-run, the differential runner and the Python package
 * share: one forked process per rank with the environment dtrtInit reads
 * (torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT, plus a fresh DTENSOR_JOB and DTENSOR_SECRET, DTENSOR_BACKEND
 * and DTENSOR_TIMEOUT_S). A rank that fails stops the others; the job's
 * shared memory is removed at the end. It installs no signal handler and
 * waits only for the children it started, so a host process (a Python
 * interpreter) keeps its own.
 *
 *===----------------------------------------------------------------------===*/
#ifndef DTENSOR_RT_LAUNCH_H
#define DTENSOR_RT_LAUNCH_H

#include "dtensor-rt/Runtime.h"

#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The most ranks one launch starts.
#define DTRT_LAUNCH_MAX_RANKS 1024

/// How dtrtLaunch starts and stops a job.
typedef struct DtrtLaunchOptions {
  int numRanks;          /* 1 .. DTRT_LAUNCH_MAX_RANKS */
  const char *backend;   /* the ranks' DTENSOR_BACKEND; NULL: "shm" */
  double timeoutSeconds; /* the ranks' DTENSOR_TIMEOUT_S; <= 0: not set */
  /* Polled while waiting: once nonzero (the caller's signal handler stores
   * the signal there), the ranks are stopped and the launch ends with
   * 128 + its value. NULL: never. */
  const volatile sig_atomic_t *stop;
  /* A job over several hosts, torchrun's way (--nnodes, --node-rank,
   * --master-addr, --master-port): this launch starts global ranks
   * nodeRank * numRanks ... + numRanks - 1 of numNodes * numRanks, with
   * LOCAL_RANK 0 .. numRanks - 1, and every node's launch must be given
   * the same DTENSOR_JOB and DTENSOR_SECRET in its environment. numNodes 0
   * or 1: this host alone (masterAddr 127.0.0.1, a free port, a fresh job
   * token). */
  int numNodes, nodeRank;
  const char *masterAddr; /* the host of global rank 0 */
  int masterPort;
} DtrtLaunchOptions;

/// How a job ended.
typedef struct DtrtLaunchResult {
  int exitCode;   /* 0: every rank succeeded; 128 + signal: stopped; else 1 */
  int failedRank; /* the rank that failed first, or -1 */
  char message[256]; /* what went wrong ("" on success) */
} DtrtLaunchResult;

/// Starts `child(rank, arg)` in `numRanks` forked processes and waits for
/// every one. A rank process ends with `exit` of child's return value (so
/// atexit handlers, such as the compiled program's runtime finalize, run)
/// and dies with the caller (PR_SET_PDEATHSIG); in it, SIGINT, SIGTERM and
/// SIGHUP are back to their default actions. When a rank exits non-zero or
/// is killed — or `*options->stop` becomes nonzero — the others get
/// SIGTERM, then SIGKILL after 5 s. Returns DTRT_OK when every rank
/// succeeded; DTRT_ERR_PEER when one failed or the job was stopped;
/// DTRT_ERR_INVALID or DTRT_ERR_SYSTEM (no randomness, fork failed) before
/// any rank ran. `outResult` says how and, on failure, which rank.
DTRT_EXPORT DtrtStatus dtrtLaunch(const DtrtLaunchOptions *options,
                                  int (*child)(int rank, void *arg), void *arg,
                                  DtrtLaunchResult *outResult);

#ifdef __cplusplus
}
#endif

#endif /* DTENSOR_RT_LAUNCH_H */
