/* dtensor-run: launches a program on N ranks on this host, as torchrun does,
 * through the runtime's launcher (dtensor-rt/Launch.h: the variables, and
 * a rank that fails or dies stops the others), and says which rank failed
 * and how. SIGINT, SIGTERM or SIGHUP to dtensor-run stop the ranks the same
 * way; ranks die with it if it is killed. Under --backend mpi, mpirun
 * launches instead. */
#include "Run.h"
#include "Support/Support.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dtensor-rt/Launch.h"

static int usage(void) {
  fprintf(
      stderr,
      "usage: dtensor-run -n N [--backend shm|mpi|nccl] [--timeout SECONDS] "
      "[--threads T]\n"
      "                   [--nnodes K --node-rank I --master-addr A "
      "--master-port P]\n"
      "                   [--] PROGRAM [ARGS...]\n"
      "       dtensor-run -n N [--backend shm|mpi|nccl] [--entry FUNC] "
      "[--load DIR] [--save DIR]\n"
      "                   [--repeat R] [--threads T] [--gpu-options OPTS] "
      "[--rtol R] [--atol A]\n"
      "                   [--exact-reductions] [--profile FILE]\n"
      "                   [--auto] [--auto-options OPTS] PROG.mlir\n"
      "       dtensor-run -n N --calibrate FILE [--mesh SHAPE]\n"
      "  PROG.mlir: compiles the annotated program with dtensor-spmd, "
      "runs it on N ranks\n  (shm or mpi) and checks every rank's result "
      "against the single-device run;\n  --repeat R then runs it R more "
      "times and prints each rank's step time;\n  --backend nccl compiles "
      "it for the GPU (one GPU per rank; --gpu-options as\n  "
      "dtensor-to-nvvm's, e.g. 'chip=sm_90'); --rtol/--atol: a float "
      "result element\n  passes within atol + rtol * |reference| "
      "(default: rtol 1e-4 plus 1e-5 of the\n  result's largest finite "
      "magnitude; NaN and infinities must match exactly)\n"
      "  --exact-reductions: float sums keep the program's order (the "
      "default lets them\n  be reordered so that they vectorize)\n"
      "  --auto: dtensor-auto-shard chooses the layouts first (a program "
      "without a mesh\n  gets one of the N ranks); --auto-options: its "
      "options, e.g. 'memory=16GiB'\n"
      "  --profile FILE: times every op of the per-device program on each "
      "rank (shm):\n  a Chrome trace in FILE and a table by op, the "
      "largest total first\n"
      "  runs PROGRAM on N ranks with RANK, WORLD_SIZE, LOCAL_RANK, "
      "MASTER_ADDR,\n  MASTER_PORT, DTENSOR_JOB and DTENSOR_BACKEND set; "
      "with --nnodes K, this host's\n  N ranks (-n or --nproc-per-node) of "
      "a job of K x N, as torchrun's flags mean\n  (every node: the same "
      "DTENSOR_JOB and DTENSOR_SECRET exported)\n"
      "  --threads T: compute (BLAS) threads per rank (default: the "
      "cores / N)\n"
      "  --calibrate FILE: times this machine's collectives on every group "
      "of the mesh's\n  axes (default mesh: N) and writes the cost file "
      "that calibration=FILE reads\n");
  return 2;
}

volatile sig_atomic_t dtRunStopSignal;

static void onStopSignal(int sig) { dtRunStopSignal = sig; }

void dtRunCatchStopSignals(bool catchThem) {
  static const int stopSignals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = catchThem ? onStopSignal : SIG_DFL;
  sigemptyset(&sa.sa_mask);
  if (catchThem)
    dtRunStopSignal = 0;
  for (size_t i = 0; i < sizeof(stopSignals) / sizeof(stopSignals[0]); ++i)
    sigaction(stopSignals[i], &sa, NULL);
}

/* A rank that fails, or SIGINT, SIGTERM or SIGHUP, stops the others.
 * `nodes` (NULL: this host alone) is this host's share of a job over
 * several. */
int dtRunLaunch(int n, const char *backend, const char *timeout,
                const DtRunNodes *nodes, int (*child)(int rank, void *arg),
                void *childArg) {
  DtrtLaunchOptions o = {n,
                         backend,
                         timeout ? strtod(timeout, NULL) : 0,
                         &dtRunStopSignal,
                         nodes ? nodes->numNodes : 0,
                         nodes ? nodes->nodeRank : 0,
                         nodes ? nodes->masterAddr : NULL,
                         nodes ? nodes->masterPort : 0};
  DtrtLaunchResult result;
  dtRunCatchStopSignals(true);
  dtrtLaunch(&o, child, childArg, &result);
  dtRunCatchStopSignals(false);
  if (result.message[0])
    fprintf(stderr, "dtensor-run: %s\n", result.message);
  return result.exitCode;
}

typedef struct Exec {
  char **argv;
} Exec;

static int execChild(int rank, void *arg) {
  Exec *e = arg;
  execvp(e->argv[0], e->argv);
  fprintf(stderr, "dtensor-run: rank %d: cannot run '%s': %s\n", rank,
          e->argv[0], strerror(errno));
  return 127;
}

/* dtensor-run's command line. */
typedef struct Args {
  int n;
  const char *backend, *timeout, *entry, *loadDir, *saveDir, *threads;
  const char *calibrate, *mesh; /* --calibrate FILE [--mesh SHAPE] */
  const char *gpuOptions;       /* --gpu-options OPTS */
  const char *rtol, *atol;      /* --rtol R, --atol A */
  bool exactReductions;         /* --exact-reductions */
  const char *profile;          /* --profile FILE */
  bool autoShard;               /* --auto */
  const char *autoOptions;      /* --auto-options OPTS */
  DtRunNodes nodes;             /* --nnodes, --node-rank, --master-* */
  int repeat;
  bool mpiRank; /* started by mpirun as one rank of a .mlir run */
  int first;    /* argv index of PROGRAM */
} Args;

/* Reads the options; returns -1 to go on, else the exit status. */
static int parseOptions(int argc, char **argv, Args *a) {
  int i = 1;
  for (; i < argc; ++i) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if ((!strcmp(arg, "-n") || !strcmp(arg, "--nproc-per-node")) && value)
      a->n = (int)dtWholeNumber(argv[++i], 1, 1024);
    else if (!strcmp(arg, "--nnodes") && value)
      a->nodes.numNodes = (int)dtWholeNumber(argv[++i], 1, 65536);
    else if (!strcmp(arg, "--node-rank") && value)
      a->nodes.nodeRank = (int)dtWholeNumber(argv[++i], 0, 65535);
    else if (!strcmp(arg, "--master-addr") && value)
      a->nodes.masterAddr = argv[++i];
    else if (!strcmp(arg, "--master-port") && value)
      a->nodes.masterPort = (int)dtWholeNumber(argv[++i], 1, 65535);
    else if (!strcmp(arg, "--mpi-rank"))
      a->mpiRank = true;
    else if (!strcmp(arg, "--exact-reductions"))
      a->exactReductions = true;
    else if (!strcmp(arg, "--auto"))
      a->autoShard = true;
    else if (!strcmp(arg, "--auto-options") && value)
      a->autoOptions = argv[++i];
    else if (!strcmp(arg, "--backend") && value)
      a->backend = argv[++i];
    else if (!strcmp(arg, "--timeout") && value)
      a->timeout = argv[++i];
    else if (!strcmp(arg, "--entry") && value)
      a->entry = argv[++i];
    else if (!strcmp(arg, "--load") && value)
      a->loadDir = argv[++i];
    else if (!strcmp(arg, "--save") && value)
      a->saveDir = argv[++i];
    else if (!strcmp(arg, "--calibrate") && value)
      a->calibrate = argv[++i];
    else if (!strcmp(arg, "--mesh") && value)
      a->mesh = argv[++i];
    else if (!strcmp(arg, "--gpu-options") && value)
      a->gpuOptions = argv[++i];
    else if (!strcmp(arg, "--profile") && value)
      a->profile = argv[++i];
    else if ((!strcmp(arg, "--rtol") || !strcmp(arg, "--atol")) && value) {
      *(arg[2] == 'r' ? &a->rtol : &a->atol) = argv[++i];
      if (isnan(dtRealNumber(argv[i], 0, 1e300))) {
        fprintf(stderr,
                "dtensor-run: %s needs a finite tolerance >= 0, not '%s'\n",
                arg, argv[i]);
        return 2;
      }
    } else if (!strcmp(arg, "--repeat") && value) {
      a->repeat = (int)dtWholeNumber(argv[++i], 1, 1000000);
      if (a->repeat < 0) {
        fprintf(stderr,
                "dtensor-run: --repeat needs a number of runs from 1 "
                "to 1000000, not '%s'\n",
                argv[i]);
        return 2;
      }
    } else if (!strcmp(arg, "--threads") && value) {
      a->threads = argv[++i];
      if (dtWholeNumber(a->threads, 1, 4096) < 0) {
        fprintf(stderr,
                "dtensor-run: --threads needs a thread count from 1 "
                "to 4096, not '%s'\n",
                a->threads);
        return 2;
      }
    } else if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      usage();
      return 0;
    } else if (!strcmp(arg, "--")) {
      ++i;
      break;
    } else if (arg[0] == '-') {
      fprintf(stderr, "dtensor-run: unknown option '%s'\n", arg);
      return usage();
    } else
      break;
  }
  a->first = i;
  return -1;
}

/* Checks the options together; returns -1 to go on, else the status. */
static int checkOptions(int argc, const Args *a, bool isMlir) {
  if (a->n < 1 || a->n > 1024 || (a->first >= argc && !a->calibrate)) {
    if (a->n < 1 || a->n > 1024)
      fprintf(stderr, "dtensor-run: -n needs a rank count from 1 to 1024\n");
    return usage();
  }
  if (a->timeout) {
    double t = dtRealNumber(a->timeout, 0, DTRT_MAX_TIMEOUT_S);
    if (!(t > 0)) {
      fprintf(stderr,
              "dtensor-run: --timeout needs a number of seconds > 0 and at "
              "most %g, not '%s'\n",
              DTRT_MAX_TIMEOUT_S, a->timeout);
      return 2;
    }
  }
  if (strcmp(a->backend, "shm") && strcmp(a->backend, "mpi") &&
      strcmp(a->backend, "nccl")) {
    fprintf(stderr,
            "dtensor-run: unknown backend '%s' (valid: shm, mpi, "
            "nccl)\n",
            a->backend);
    return 2;
  }
  if (a->profile && (!isMlir || strcmp(a->backend, "shm"))) {
    fprintf(stderr, "dtensor-run: --profile times a PROG.mlir run on the "
                    "shm backend\n");
    return 2;
  }
  if (a->calibrate && (a->first < argc || strcmp(a->backend, "shm"))) {
    fprintf(stderr, "dtensor-run: --calibrate times the shm backend's "
                    "collectives and takes no PROGRAM\n");
    return 2;
  }
  if (a->mesh && !a->calibrate) {
    fprintf(stderr, "dtensor-run: --mesh applies to --calibrate (a "
                    "PROG.mlir declares its own mesh)\n");
    return 2;
  }
  if (a->nodes.numNodes < 0 || a->nodes.nodeRank < 0 ||
      a->nodes.masterPort < 0) {
    fprintf(stderr, "dtensor-run: --nnodes, --node-rank and --master-port "
                    "take whole numbers (1 to 65536 nodes, a rank below "
                    "them, a TCP port)\n");
    return 2;
  }
  if (a->nodes.numNodes > 1 && a->nodes.nodeRank >= a->nodes.numNodes) {
    fprintf(stderr, "dtensor-run: --node-rank %d is not below --nnodes %d\n",
            a->nodes.nodeRank, a->nodes.numNodes);
    return 2;
  }
  if (a->nodes.numNodes > 1 && isMlir) {
    fprintf(stderr, "dtensor-run: a job over several nodes runs a PROGRAM; "
                    "for PROG.mlir compile a bundle (dtensor-compile --bundle) "
                    "and run dtensor-check BUNDLE on every node\n");
    return 2;
  }
  if (a->gpuOptions && (!isMlir || strcmp(a->backend, "nccl"))) {
    fprintf(stderr, "dtensor-run: --gpu-options applies to PROG.mlir under "
                    "--backend nccl\n");
    return 2;
  }
  if ((a->autoShard || a->autoOptions) && !isMlir) {
    fprintf(stderr, "dtensor-run: --auto and --auto-options apply to "
                    "PROG.mlir\n");
    return 2;
  }
  if (a->autoOptions && !a->autoShard) {
    fprintf(stderr, "dtensor-run: --auto-options needs --auto\n");
    return 2;
  }
  if ((a->loadDir || a->saveDir || a->repeat) && !isMlir) {
    fprintf(stderr, "dtensor-run: --load, --save and --repeat apply to "
                    "PROG.mlir\n");
    return 2;
  }
  return -1;
}

/* Runs mpirun with `args` and waits; a stop signal goes on to mpirun,
 * which stops its ranks. */
static int waitForMpirun(char **args) {
  dtRunCatchStopSignals(true);
  pid_t pid = fork();
  if (pid == 0) {
    dtRunCatchStopSignals(false);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    execvp("mpirun", args);
    fprintf(stderr,
            "dtensor-run: cannot run mpirun: %s (install "
            "openmpi-bin)\n",
            strerror(errno));
    _exit(127);
  }
  int st = 0;
  pid_t done = -1;
  bool forwarded = false;
  while (pid > 0 && (done = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
    if (dtRunStopSignal && !forwarded) {
      kill(pid, SIGTERM);
      forwarded = true;
    }
  if (dtRunStopSignal) {
    fprintf(stderr, "dtensor-run: %s; the MPI job was stopped\n",
            strsignal(dtRunStopSignal));
    return 128 + dtRunStopSignal;
  }
  if (pid < 0 || done < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "dtensor-run: the MPI job failed\n");
    return 1;
  }
  printf("dtensor-run: every rank's result equals the single-device run\n");
  return 0;
}

/* MPI has its own launcher: hands the job to mpirun — a PROGRAM as is, a
 * PROG.mlir as this tool again per rank (--mpi-rank), each compiling the
 * program and running its own rank. */
static int runUnderMpirun(int argc, char **argv, const Args *a, bool isMlir,
                          const DtRunOptions *opts) {
  char count[16], repeatText[16], self[4096];
  snprintf(count, sizeof(count), "%d", a->n);
  char **args = calloc((size_t)(argc - a->first + 32), sizeof(char *));
  if (!args)
    return 1;
  int k = 0;
  args[k++] = "mpirun";
  args[k++] = "-n";
  args[k++] = count;
  if (geteuid() == 0)
    args[k++] = "--allow-run-as-root";
  args[k++] = "--oversubscribe";
  setenv("DTENSOR_BACKEND", "mpi", 1);
  args[k++] = "-x";
  args[k++] = "DTENSOR_BACKEND";
  if (a->timeout) {
    setenv("DTENSOR_TIMEOUT_S", a->timeout, 1);
    args[k++] = "-x";
    args[k++] = "DTENSOR_TIMEOUT_S";
  }
  if (a->threads) {
    args[k++] = "-x";
    args[k++] = "DTENSOR_THREADS";
  }
  if (!isMlir) {
    for (int i = a->first; i < argc; ++i)
      args[k++] = argv[i];
    execvp("mpirun", args);
    fprintf(stderr,
            "dtensor-run: cannot run mpirun: %s (install "
            "openmpi-bin)\n",
            strerror(errno));
    return 1;
  }
  ssize_t m = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (m <= 0) {
    fprintf(stderr, "dtensor-run: cannot find its own executable\n");
    return 1;
  }
  self[m] = 0;
  const char *pairs[][2] = {
      {"--entry", a->entry},  {"--load", a->loadDir},
      {"--save", a->saveDir}, {"--repeat", a->repeat ? repeatText : NULL},
      {"--rtol", a->rtol},    {"--atol", a->atol}};
  snprintf(repeatText, sizeof(repeatText), "%d", a->repeat);
  args[k++] = self;
  args[k++] = "--mpi-rank";
  if (a->exactReductions)
    args[k++] = "--exact-reductions";
  args[k++] = "-n";
  args[k++] = count;
  for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); ++p)
    if (pairs[p][1]) {
      args[k++] = (char *)pairs[p][0];
      args[k++] = (char *)pairs[p][1];
    }
  /* --auto: the layouts are chosen once, here, and every rank runs the
   * program that carries them (a solver stopped by its time limit could
   * choose differently on each rank). */
  char autoDir[4096] = "", autoPath[4200];
  if (a->autoShard) {
    if (!dtRunAutoShardToFile(argv[a->first], opts, autoDir, sizeof(autoDir),
                              autoPath, sizeof(autoPath))) {
      if (autoDir[0])
        dtRemoveTree(autoDir);
      free(args);
      return 1;
    }
    args[k++] = autoPath;
  } else {
    args[k++] = argv[a->first];
  }
  /* The job's own Open MPI session directory (unless the user chose one):
   * jobs one after the other share $TMPDIR/ompi.<host>.<uid>, which the
   * last one out removes, and a job creating its directory in it then
   * failed in orte_init ("orte_session_dir failed": 1 of 60 random
   * programs in a CI run). */
  char session[4096] = "";
  if (!getenv("OMPI_MCA_orte_tmpdir_base") &&
      dtMakeTempDir("dtensor-mpi", session, sizeof(session)))
    setenv("OMPI_MCA_orte_tmpdir_base", session, 1);
  int status = waitForMpirun(args);
  if (session[0])
    dtRemoveTree(session); /* what Open MPI left of its session too */
  if (autoDir[0])
    dtRemoveTree(autoDir);
  return status;
}

DT_TUNE_ALLOCATOR;

int main(int argc, char **argv) {
  Args a = {.backend = "shm", .first = 1};
  int status = parseOptions(argc, argv, &a);
  if (status >= 0)
    return status;
  const char *prog = a.first < argc ? argv[a.first] : "";
  size_t len = strlen(prog);
  bool isMlir = len > 5 && !strcmp(prog + len - 5, ".mlir");
  if ((status = checkOptions(argc, &a, isMlir)) >= 0)
    return status;
  DtRunOptions opts = {a.n,
                       a.entry,
                       a.backend,
                       a.timeout,
                       a.loadDir,
                       a.saveDir,
                       a.repeat,
                       a.gpuOptions,
                       a.rtol,
                       a.atol,
                       a.exactReductions,
                       a.profile,
                       a.autoShard ? (a.autoOptions ? a.autoOptions : "")
                                   : NULL};
  /* Each rank's compute threads (libdtensor_rt reads DTENSOR_THREADS;
   * without it, the cores shared among the ranks). */
  if (a.threads)
    setenv("DTENSOR_THREADS", a.threads, 1);
  if (a.calibrate)
    return dtRunCalibrate(a.calibrate, a.n, a.mesh, a.timeout);
  if (a.mpiRank)
    return isMlir ? dtRunMlirMpiRank(prog, &opts) : usage();
  if (!strcmp(a.backend, "mpi"))
    return runUnderMpirun(argc, argv, &a, isMlir, &opts);
  if (isMlir)
    return dtRunMlir(prog, &opts);
  Exec exec = {argv + a.first};
  return dtRunLaunch(a.n, a.backend, a.timeout,
                     a.nodes.numNodes > 1 ? &a.nodes : NULL, execChild, &exec);
}
