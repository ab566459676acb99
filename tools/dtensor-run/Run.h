/* dtensor-run's parts: the launcher (dtensor-run.c) and the MLIR runner
 * (Jit.c). */
#ifndef DTENSOR_TOOLS_DTENSOR_RUN_RUN_H
#define DTENSOR_TOOLS_DTENSOR_RUN_RUN_H

#include <signal.h>
#include <stdbool.h>

/// The signal that asked dtensor-run to stop (0: none yet), set while
/// dtRunCatchStopSignals(true) is in force.
extern volatile sig_atomic_t dtRunStopSignal;

/// Catches SIGINT, SIGTERM and SIGHUP into dtRunStopSignal (cleared first),
/// or puts back their default actions.
void dtRunCatchStopSignals(bool catchThem);

/// This host's share of a job over several (torchrun's flags).
typedef struct DtRunNodes {
  int numNodes, nodeRank;
  const char *masterAddr;
  int masterPort;
} DtRunNodes;

/// Starts `child(rank, arg)` on N ranks (dtrtLaunch) with the stop signals
/// caught, as this host's share of `nodes` (NULL: this host alone);
/// returns 0, 128 + a stop signal, or 1 after saying why.
int dtRunLaunch(int n, const char *backend, const char *timeout,
                const DtRunNodes *nodes, int (*child)(int rank, void *arg),
                void *childArg);

/// dtensor-run --calibrate PATH: times the collectives of `meshText` (NULL:
/// a 1-d mesh of N) on N ranks and writes the fitted cost file.
int dtRunCalibrate(const char *path, int n, const char *meshText,
                   const char *timeout);

/// How to run PROG.mlir (dtensor-run's options).
typedef struct DtRunOptions {
  int n;                   /* ranks */
  const char *entry;       /* NULL: the first function with a body */
  const char *backend;     /* shm, mpi, or nccl (the program on the GPU) */
  const char *timeout;     /* DTENSOR_TIMEOUT_S, or NULL */
  const char *loadDir;     /* arguments from this checkpoint, or NULL */
  const char *saveDir;     /* results into this checkpoint, or NULL */
  int repeat;              /* timed runs after the checked one (0: none) */
  const char *gpuOptions;  /* dtensor-to-nvvm's options under nccl */
  const char *rtol, *atol; /* --rtol, --atol (checked), or NULL */
  bool exactReductions;    /* --exact-reductions */
  const char *profile;     /* --profile FILE, or NULL */
  const char *autoOptions; /* --auto: dtensor-auto-shard's options ("" for
                              none), or NULL: the program's own layouts */
} DtRunOptions;

/// Compiles PROG.mlir, runs it on N ranks (shm; nccl: compiled for the GPU,
/// one GPU per rank) and checks every rank against the single-device run.
int dtRunMlir(const char *path, const DtRunOptions *options);

/// --auto under mpirun: the program with the layouts dtensor-auto-shard
/// chose, written to `outPath` (in a directory of this user's, made here:
/// `outDir`), so that every rank runs the same plan; false after a message.
bool dtRunAutoShardToFile(const char *path, const DtRunOptions *options,
                          char *outDir, size_t dirSize, char *outPath,
                          size_t pathSize);

/// One rank of an MPI run of PROG.mlir (started by mpirun): compiles the
/// program, computes the reference and runs this rank (OMPI_COMM_WORLD_RANK
/// or PMI_RANK).
int dtRunMlirMpiRank(const char *path, const DtRunOptions *options);

#endif
