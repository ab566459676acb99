/* dtensor-run PROG.mlir: the differential run of the library's runner
 * (dtensor-c/Runner.h) with the tool's I/O — the program read from a file,
 * the reference computed once, the ranks forked after compiling (under
 * --backend nccl the program compiled for the GPU, one per rank; under
 * --backend mpi, one process per rank started by mpirun, each compiling
 * the program and running its own rank), one line per rank. */
#include "Run.h"
#include "Support/Support.h"

#include "dtensor-c/Dialect.h"
#include "dtensor-c/Passes.h"
#include "dtensor-c/Runner.h"
#include "mlir-c/Diagnostics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static MlirLogicalResult report(MlirDiagnostic d, void *user) {
  (void)user;
  char text[2048];
  dtensorDiagnosticFormat(d, text, sizeof(text));
  fprintf(stderr, "%s\n", text);
  return mlirLogicalResultSuccess();
}

/* One rank's line (and its step times with --repeat). */
static void printReport(const DtensorRunner *r, int rank,
                        const DtensorRankReport *rep) {
  char text[512];
  dtensorRankReportFormat(r, rank, rep, text, sizeof(text));
  fputs(text, stdout);
}

/* One rank in this process (under mpirun): runs, checks and prints. */
static int runMpiRank(DtensorRunner *r, int rank, const DtensorRankOptions *o) {
  DtensorRankReport rep;
  DtensorDiag diag;
  if (!dtensorRunnerRunRank(r, rank, o, &rep, &diag)) {
    fprintf(stderr, "dtensor-run: %s\n", diag.message);
    return 1;
  }
  printReport(r, rank, &rep);
  return rep.different ? 1 : 0;
}

/* Every rank forked from this process; their lines in rank order. */
static int launchRanks(DtensorRunner *r, const DtRunOptions *o,
                       const DtensorRankOptions *ro) {
  DtrtLaunchOptions launch = {o->n,
                              o->backend,
                              o->timeout ? strtod(o->timeout, NULL) : 0,
                              &dtRunStopSignal,
                              0,
                              0,
                              NULL,
                              0};
  DtensorRankReport *reps = calloc((size_t)o->n, sizeof(*reps));
  if (!reps)
    return 1;
  DtensorDiag diag;
  int status;
  dtRunCatchStopSignals(true);
  bool ok = dtensorRunnerLaunch(r, &launch, ro, reps, &status, &diag);
  dtRunCatchStopSignals(false);
  for (int k = 0; ok && k < o->n; ++k) {
    printReport(r, k, &reps[k]);
    if (reps[k].different)
      status = 1;
  }
  if (!ok)
    fprintf(stderr, "dtensor-run: %s\n", diag.message);
  free(reps);
  return status;
}

/* --auto: dtensor-auto-shard with --auto-options on the parsed program (a
 * program without a mesh gets one of the N ranks), so that what the runner
 * compiles carries the layouts it chose; false after a message. */
static bool autoShard(MlirOperation module, const DtRunOptions *o) {
  DtensorDiag diag;
  if (mlirLogicalResultIsFailure(dtensorAutoShard(
          module, mlirStringRefCreateFromCString(o->autoOptions), o->n,
          &diag))) {
    fprintf(stderr, "dtensor-run: --auto: %s\n", diag.message);
    return false;
  }
  return true;
}

static void printToFile(MlirStringRef text, void *user) {
  fwrite(text.data, 1, text.length, user);
}

bool dtRunAutoShardToFile(const char *path, const DtRunOptions *o, char *outDir,
                          size_t dirSize, char *outPath, size_t pathSize) {
  MlirContext ctx = dtensorContextCreate();
  dtensorRegisterUpstreamPasses();
  mlirContextAttachDiagnosticHandler(ctx, report, NULL, NULL);
  DtensorDiag diag;
  MlirOperation module = dtensorSourceParseFile(ctx, path, &diag);
  bool ok = !mlirOperationIsNull(module);
  if (!ok && diag.message[0])
    fprintf(stderr, "dtensor-run: %s\n", diag.message);
  ok = ok && autoShard(module, o);
  if (ok && !dtMakeTempDir("dtensor-auto", outDir, dirSize)) {
    fprintf(stderr, "dtensor-run: cannot make a private directory\n");
    ok = false;
  }
  if (ok) {
    snprintf(outPath, pathSize, "%s/auto.mlir", outDir);
    DtOutput out;
    ok = dtOutputOpen(&out, outPath, &diag);
    if (ok) {
      mlirOperationPrint(module, printToFile, out.file);
      ok = dtOutputClose(&out, true, &diag);
    }
    if (!ok)
      fprintf(stderr, "dtensor-run: %s\n", diag.message);
  }
  if (!mlirOperationIsNull(module))
    mlirOperationDestroy(module);
  mlirContextDestroy(ctx);
  return ok;
}

/* Reads and compiles PROG.mlir and computes the reference; NULL after a
 * message (`*outStatus`: 2 for a mesh of another size, else 1). */
static DtensorRunner *prepare(MlirContext ctx, const char *path,
                              const DtRunOptions *o, int *outStatus) {
  *outStatus = 1;
  DtensorDiag diag;
  MlirOperation module = dtensorSourceParseFile(ctx, path, &diag);
  if (mlirOperationIsNull(module)) {
    if (diag.message[0])
      fprintf(stderr, "dtensor-run: %s\n", diag.message);
    return NULL;
  }
  if (o->autoOptions && !autoShard(module, o)) {
    mlirOperationDestroy(module);
    return NULL;
  }
  bool gpu = !strcmp(o->backend, "nccl");
  char cpuOptions[64];
  snprintf(cpuOptions, sizeof(cpuOptions), "%s%s%s",
           o->exactReductions ? "exact-reductions=true " : "",
           o->profile ? "profile=true " : "", "threads=auto");
  const char *targetOptions =
      gpu ? (o->gpuOptions ? o->gpuOptions : "") : cpuOptions;
  DtensorRunner *r = dtensorRunnerCreateForTarget(
      module, o->entry, gpu ? "cuda" : "cpu", targetOptions, &diag);
  if (!r) {
    fprintf(stderr, "dtensor-run: '%s': %s\n", path, diag.message);
    return NULL;
  }
  long long devices = dtensorMeshGetNumDevices(dtensorRunnerGetMesh(r));
  if (devices != o->n) {
    fprintf(stderr,
            "dtensor-run: the program's mesh has %lld device%s; run it "
            "with -n %lld\n",
            devices, devices == 1 ? "" : "s", devices);
    *outStatus = 2;
  } else if ((o->loadDir &&
              !dtensorRunnerLoadArguments(r, o->loadDir, &diag)) ||
             !dtensorRunnerComputeReference(r, &diag)) {
    fprintf(stderr, "dtensor-run: %s\n", diag.message);
  } else {
    return r;
  }
  dtensorRunnerDestroy(r);
  return NULL;
}

/* The check's tolerance from --rtol and --atol (either alone: the other
 * 0) in `out`; NULL, the defaults, when neither is given. */
static const DtensorTolerance *tolerance(const DtRunOptions *o,
                                         DtensorTolerance *out) {
  if (!o->rtol && !o->atol)
    return NULL;
  out->rtol = o->rtol ? strtod(o->rtol, NULL) : 0;
  out->atol = o->atol ? strtod(o->atol, NULL) : 0;
  return out;
}

/* `mpiRank` < 0: launches N ranks (shm); else runs that rank in this
 * process (under mpirun). */
static int compileAndRun(const char *path, const DtRunOptions *o, int mpiRank) {
  MlirContext ctx = dtensorContextCreate();
  dtensorRegisterUpstreamPasses();
  mlirContextAttachDiagnosticHandler(ctx, report, NULL, NULL);
  int status;
  DtensorRunner *runner = prepare(ctx, path, o, &status);
  DtensorTolerance tol;
  DtensorRankOptions ro = {o->loadDir,         o->saveDir, o->repeat,
                           tolerance(o, &tol), false,      o->profile};
  if (runner && mpiRank <= 0)
    printf("dtensor-run: %s compiled for %d ranks; single-device reference "
           "computed\n",
           path, o->n);
  fflush(stdout);
  if (runner && mpiRank >= 0)
    status = runMpiRank(runner, mpiRank, &ro);
  else if (runner)
    status = launchRanks(runner, o, &ro);
  if (runner && mpiRank < 0 && !status)
    printf("dtensor-run: every rank's result equals the single-device run\n");
  if (runner && mpiRank < 0 && !status && o->profile) {
    DtensorDiag diag;
    if (!dtensorRunnerProfileReport(runner, o->profile, o->n, stdout, &diag)) {
      fprintf(stderr, "dtensor-run: --profile: %s\n", diag.message);
      status = 1;
    }
  }
  dtensorRunnerDestroy(runner);
  mlirContextDestroy(ctx);
  return status;
}

/* What the driver says, asked in a child process. */
typedef struct GpuAnswer {
  int ok, count, capability;
  char why[512];
} GpuAnswer;

/* Whether this host can run a GPU program on `n` ranks (after a message
 * if not), and its GPU's compute capability. Asked in a child process: the
 * ranks are forked from this one, and CUDA initialized before a fork does
 * not work in the children. */
static bool gpuReady(int n, int *outCapability) {
  int fds[2];
  if (pipe(fds) != 0)
    return false;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    GpuAnswer answer = {0, 0, 0, ""};
    answer.ok = dtrtCudaProbe(answer.why, sizeof(answer.why));
    answer.count = dtrtCudaDeviceCount();
    answer.capability = dtrtCudaComputeCapability();
    ssize_t w = write(fds[1], &answer, sizeof(answer));
    _exit(w == (ssize_t)sizeof(answer) ? 0 : 1);
  }
  close(fds[1]);
  GpuAnswer answer = {0, 0, 0, "the probe of the CUDA driver failed"};
  bool got = pid > 0 &&
             read(fds[0], &answer, sizeof(answer)) == (ssize_t)sizeof(answer);
  close(fds[0]);
  if (pid > 0)
    waitpid(pid, NULL, 0);
  answer.why[sizeof(answer.why) - 1] = 0;
  if (!got || !answer.ok) {
    fprintf(stderr, "dtensor-run: %s\n", answer.why);
    return false;
  }
  if (answer.count < n) {
    fprintf(stderr,
            "dtensor-run: the nccl backend runs one rank per GPU, and this "
            "host has %d GPU%s for %d ranks\n",
            answer.count, answer.count == 1 ? "" : "s", n);
    return false;
  }
  *outCapability = answer.capability;
  return true;
}

/* Whether CUDA's ptxas is where the GPU pipeline looks for it. */
static bool havePtxas(void) {
  static const char *const kVars[] = {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"};
  char path[4096];
  for (size_t i = 0; i < sizeof(kVars) / sizeof(kVars[0]); ++i) {
    const char *root = getenv(kVars[i]);
    snprintf(path, sizeof(path), "%s/bin/ptxas", root ? root : "");
    if (root && access(path, X_OK) == 0)
      return true;
  }
  const char *dirs = getenv("PATH");
  for (const char *p = dirs; p && *p;) {
    size_t len = strcspn(p, ":");
    snprintf(path, sizeof(path), "%.*s/ptxas", (int)len, p);
    if (len && access(path, X_OK) == 0)
      return true;
    p += len + (p[len] == ':');
  }
  return access("/usr/local/cuda/bin/ptxas", X_OK) == 0;
}

/* The GPU options for this host: the user's, with the local GPU's chip
 * when they name none, and PTX (compiled by the driver) when no ptxas can
 * make cubins. */
static void localGpuOptions(const char *given, int capability, char *out,
                            size_t size) {
  given = given ? given : "";
  int n = snprintf(out, size, "%s", given);
  if (!strstr(given, "chip=") && capability > 0 && n >= 0 && (size_t)n < size)
    n += snprintf(out + n, size - (size_t)n, " chip=sm_%d", capability);
  if (!strstr(given, "format=") && !havePtxas() && n >= 0 && (size_t)n < size)
    snprintf(out + n, size - (size_t)n, " format=isa");
}

int dtRunMlir(const char *path, const DtRunOptions *o) {
  if (strcmp(o->backend, "nccl"))
    return compileAndRun(path, o, -1);
  int capability = 0;
  if (!gpuReady(o->n, &capability))
    return 1;
  char options[256];
  localGpuOptions(o->gpuOptions, capability, options, sizeof(options));
  DtRunOptions local = *o;
  local.gpuOptions = options;
  return compileAndRun(path, &local, -1);
}

int dtRunMlirMpiRank(const char *path, const DtRunOptions *o) {
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  if (!rank)
    rank = getenv("PMI_RANK");
  if (!rank) {
    fprintf(stderr, "dtensor-run: --mpi-rank runs under mpirun (no "
                    "OMPI_COMM_WORLD_RANK or PMI_RANK)\n");
    return 2;
  }
  setenv("DTENSOR_BACKEND", "mpi", 1);
  return compileAndRun(path, o, atoi(rank));
}
