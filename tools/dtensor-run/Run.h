/* dtensor-run's parts: the launcher (dtensor-run.c) and the MLIR runner
 * (Jit.c). */
#ifndef DTENSOR_TOOLS_DTENSOR_RUN_RUN_H
#define DTENSOR_TOOLS_DTENSOR_RUN_RUN_H

int dtRunLaunch(int n, const char *backend, const char *timeout,
                int (*child)(int rank, void *arg), void *childArg);

int dtRunMlir(const char *path, const char *entry, int n, const char *backend,
              const char *timeout);

/// One rank of an MPI run of PROG.mlir (started by mpirun): compiles the
/// program, computes the reference and runs this rank (OMPI_COMM_WORLD_RANK
/// or PMI_RANK) of `n`.
int dtRunMlirMpiRank(const char *path, const char *entry, int n);

#endif
