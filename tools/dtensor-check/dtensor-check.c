/* dtensor-check: runs a bundle (dtensor-compile --bundle) where MLIR is
 * not installed: the differential check of dtensor-run PROG.mlir, on
 * programs compiled ahead of time. It links libdtensor_rt and the layout
 * library only, never MLIR (tools/CMakeLists.txt builds it from the
 * runner's MLIR-free files).
 *
 * As one rank of a job (RANK, WORLD_SIZE, ... as dtensor-run or torchrun
 * set them; a one-rank job when they are unset) it computes the reference,
 * runs its rank and prints its line. With -n N it launches the N ranks
 * itself, each this tool again, through the runtime's launcher: the
 * launcher loads no program (a GPU program's kernels would initialize CUDA
 * before the fork). */
#include "Support/Support.h"
#include "dtensor-c/Runner.h"
#include "dtensor-rt/Launch.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(FILE *out, int code) {
  fprintf(out,
          "usage: dtensor-check [-n N] [--backend shm|mpi|nccl] [--timeout "
          "SECONDS]\n"
          "                     [--repeat R] [--load DIR] [--save DIR] "
          "[--rtol R] [--atol A]\n"
          "                     [--profile FILE] BUNDLE\n"
          "  runs a bundle made by dtensor-compile --bundle (no MLIR needed):"
          " every rank's\n  result against the single-device reference, and "
          "with --repeat R, R timed\n  steps. Alone it is one rank of the job "
          "its environment describes (RANK,\n  WORLD_SIZE as dtensor-run or "
          "torchrun set them; a job of one rank without\n  them); -n N "
          "launches N ranks of this tool on this host. --rtol/--atol:\n"
          "  a float result element passes within atol + rtol * |reference| "
          "(as dtensor-run).\n"
          "  --profile FILE (a bundle compiled with --profile): every op timed "
          "on each rank,\n  a Chrome trace in FILE and a table by op, as "
          "dtensor-run --profile (under\n  another launcher each rank writes "
          "FILE.rank<N> instead).\n");
  return code;
}

typedef struct Args {
  int n, repeat;
  const char *backend, *timeout, *loadDir, *saveDir, *bundle, *profile;
  bool tolerance; /* --rtol or --atol given */
  DtensorTolerance tol;
} Args;

/* Reads the command line; returns -1 to go on, else the exit status. */
static int parseArgs(int argc, char **argv, Args *a) {
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(arg, "-n") && value) {
      a->n = (int)dtWholeNumber(argv[++i], 1, 1024);
      if (a->n < 1) {
        fprintf(stderr, "dtensor-check: -n needs a rank count from 1 to "
                        "1024\n");
        return 2;
      }
    } else if (!strcmp(arg, "--repeat") && value) {
      a->repeat = (int)dtWholeNumber(argv[++i], 1, 1000000);
      if (a->repeat < 1) {
        fprintf(stderr, "dtensor-check: --repeat needs a number of runs "
                        "from 1 to 1000000\n");
        return 2;
      }
    } else if (!strcmp(arg, "--backend") && value) {
      a->backend = argv[++i];
    } else if (!strcmp(arg, "--timeout") && value) {
      a->timeout = argv[++i];
      if (!(dtRealNumber(a->timeout, 0, DTRT_MAX_TIMEOUT_S) > 0)) {
        fprintf(stderr,
                "dtensor-check: --timeout needs a number of seconds > 0 and "
                "at most %g, not '%s'\n",
                DTRT_MAX_TIMEOUT_S, a->timeout);
        return 2;
      }
    } else if ((!strcmp(arg, "--rtol") || !strcmp(arg, "--atol")) && value) {
      double t = dtRealNumber(argv[++i], 0, 1e300);
      if (isnan(t)) {
        fprintf(stderr,
                "dtensor-check: %s needs a finite tolerance >= 0, not '%s'\n",
                arg, argv[i]);
        return 2;
      }
      *(arg[2] == 'r' ? &a->tol.rtol : &a->tol.atol) = t;
      a->tolerance = true;
    } else if (!strcmp(arg, "--profile") && value) {
      a->profile = argv[++i];
    } else if (!strcmp(arg, "--load") && value) {
      a->loadDir = argv[++i];
    } else if (!strcmp(arg, "--save") && value) {
      a->saveDir = argv[++i];
    } else if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      return usage(stdout, 0);
    } else if (arg[0] == '-') {
      fprintf(stderr, "dtensor-check: unknown option '%s'\n", arg);
      return usage(stderr, 2);
    } else if (!a->bundle) {
      a->bundle = arg;
    } else {
      fprintf(stderr, "dtensor-check: more than one bundle ('%s')\n", arg);
      return 2;
    }
  }
  if (!a->bundle) {
    fprintf(stderr, "dtensor-check: no bundle\n");
    return usage(stderr, 2);
  }
  return -1;
}

/* This process as one rank: the reference, the rank's run, its lines. */
static int runRank(const Args *a) {
  /* Alone (no launcher): this process is the job, and reports its profile. */
  bool alone = !getenv("RANK") && !getenv("WORLD_SIZE");
  if (alone) {
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("LOCAL_RANK", "0", 1);
  }
  int rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
  DtensorDiag diag;
  DtensorRunner *r = dtensorRunnerOpenBundle(a->bundle, &diag);
  if (!r) {
    fprintf(stderr, "dtensor-check: %s\n", diag.message);
    return 1;
  }
  DtensorRankOptions o = {a->loadDir, a->saveDir,
                          a->repeat,  a->tolerance ? &a->tol : NULL,
                          false,      a->profile};
  DtensorRankReport rep;
  bool ok = (!a->loadDir || dtensorRunnerLoadArguments(r, a->loadDir, &diag)) &&
            dtensorRunnerComputeReference(r, &diag) &&
            dtensorRunnerRunRank(r, rank, &o, &rep, &diag);
  if (ok) {
    char text[512];
    dtensorRankReportFormat(r, rank, &rep, text, sizeof(text));
    fputs(text, stdout);
  } else {
    fprintf(stderr, "dtensor-check: rank %d: %s\n", rank, diag.message);
  }
  if (ok && alone && a->profile &&
      !dtensorRunnerProfileReport(r, a->profile, 1, stdout, &diag)) {
    fprintf(stderr, "dtensor-check: --profile: %s\n", diag.message);
    ok = false;
  }
  dtensorRunnerDestroy(r);
  return !ok ? 1 : rep.different ? 1 : 0;
}

typedef struct Self {
  char **argv;
} Self;

/* A rank: this tool again, without -n (the launcher set its variables). */
static int execRank(int rank, void *arg) {
  Self *self = arg;
  execv("/proc/self/exe", self->argv);
  fprintf(stderr, "dtensor-check: rank %d: cannot start: %s\n", rank,
          strerror(errno));
  return 127;
}

static volatile sig_atomic_t stopSignal;

static void onStop(int sig) { stopSignal = sig; }

static int launch(const Args *a, int argc, char **argv) {
  char **rankArgv = calloc((size_t)argc + 1, sizeof(char *));
  if (!rankArgv)
    return 1;
  int k = 0;
  rankArgv[k++] = argv[0];
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-n") || !strcmp(argv[i], "--backend") ||
        !strcmp(argv[i], "--timeout")) {
      ++i;
      continue;
    }
    rankArgv[k++] = argv[i];
  }
  signal(SIGINT, onStop);
  signal(SIGTERM, onStop);
  DtrtLaunchOptions o = {
      a->n,        a->backend, a->timeout ? strtod(a->timeout, NULL) : 0,
      &stopSignal, 0,          0,
      NULL,        0};
  Self self = {rankArgv};
  DtrtLaunchResult result;
  dtrtLaunch(&o, execRank, &self, &result);
  if (result.message[0])
    fprintf(stderr, "dtensor-check: %s\n", result.message);
  free(rankArgv);
  if (result.exitCode || !a->profile)
    return result.exitCode;
  /* The ranks wrote their events: merged here, named from the manifest
   * (the bundle is a CPU one: its ranks refused a profile otherwise). */
  DtensorDiag diag;
  DtensorRunner *r = dtensorRunnerOpenBundle(a->bundle, &diag);
  bool ok = r && dtensorRunnerProfileReport(r, a->profile, a->n, stdout, &diag);
  if (!ok)
    fprintf(stderr, "dtensor-check: --profile: %s\n", diag.message);
  dtensorRunnerDestroy(r);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  Args a = {.backend = "shm"};
  int status = parseArgs(argc, argv, &a);
  if (status >= 0)
    return status;
  if (a.n > 0)
    return launch(&a, argc, argv);
  return runRank(&a);
}
