/* dtensor-run: launches a program on N ranks on this host, as torchrun does
 * (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), plus
 * DTENSOR_JOB (a fresh random token the job's shared memory is named
 * after), DTENSOR_SECRET (another, which admits the ranks to the
 * rendezvous store) and DTENSOR_BACKEND. If a rank fails or dies, the others
 * are stopped (SIGTERM, then SIGKILL after 5 s), the job's shared-memory
 * segments are removed, and it says which rank and how. SIGINT, SIGTERM
 * or SIGHUP to dtensor-run stop the ranks the same way; ranks die with it
 * if it is killed (PR_SET_PDEATHSIG). */
#include "Run.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dtensor-rt/Runtime.h"

static int usage(void) {
  fprintf(
      stderr,
      "usage: dtensor-run -n N [--backend shm|mpi|nccl] [--timeout SECONDS] "
      "[--threads T]\n"
      "                   [--] PROGRAM [ARGS...]\n"
      "       dtensor-run -n N [--backend shm|mpi] [--entry FUNC] "
      "[--load DIR] [--save DIR]\n"
      "                   [--repeat R] [--threads T] PROG.mlir\n"
      "  PROG.mlir: compiles the annotated program with dtensor-spmd, "
      "runs it on N ranks\n  (shm or mpi) and checks every rank's result "
      "against the single-device run;\n  --repeat R then runs it R more "
      "times and prints each rank's step time\n"
      "  runs PROGRAM on N ranks with RANK, WORLD_SIZE, LOCAL_RANK, "
      "MASTER_ADDR,\n  MASTER_PORT, DTENSOR_JOB and DTENSOR_BACKEND set\n"
      "  --threads T: compute (BLAS) threads per rank (default: the "
      "cores / N)\n");
  return 2;
}

static void removeSegments(const char *job) {
  char prefix[160];
  snprintf(prefix, sizeof(prefix), "dtensor-%s-", job);
  DIR *d = opendir("/dev/shm");
  if (!d)
    return;
  for (struct dirent *e; (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, strlen(prefix))) {
      char path[512];
      snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
      unlink(path);
    }
  closedir(d);
}

/* A TCP port on loopback that is free now (the kernel picks it), for the
 * rendezvous of backends that need one (nccl); a fixed fallback otherwise. */
static int freePort(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 29500 + (int)(getpid() % 1000);
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

/* The signal that asked dtensor-run to stop (0: none yet). */
static volatile sig_atomic_t stopSignal;

static void onStopSignal(int sig) { stopSignal = sig; }

static const int stopSignals[] = {SIGINT, SIGTERM, SIGHUP};

static void handleStopSignals(void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof(stopSignals) / sizeof(stopSignals[0]); ++i)
    sigaction(stopSignals[i], &sa, NULL);
}

/* What a job's ranks share: the torchrun variables' values and the pids. */
typedef struct Job {
  int n;
  const char *backend, *timeout;
  char id[80], secret[40], port[16], size[16];
  pid_t *pids;
} Job;

static void pauseBriefly(void) {
  struct timespec pause = {0, 10 * 1000 * 1000};
  nanosleep(&pause, NULL);
}

static void signalRanks(const Job *job, int sig) {
  for (int r = 0; r < job->n; ++r)
    if (job->pids[r])
      kill(job->pids[r], sig);
}

/* The rank of a child that ended (its pid forgotten), or -1. */
static int reapRank(Job *job, pid_t pid) {
  for (int r = 0; r < job->n; ++r)
    if (job->pids[r] == pid) {
      job->pids[r] = 0;
      return r;
    }
  return -1;
}

/* In a forked rank: the torchrun variables, then `child`. */
static void startRank(const Job *job, int r, pid_t parent,
                      int (*child)(int rank, void *arg), void *childArg) {
  /* A rank ends with dtensor-run, however that ends. */
  handleStopSignals(SIG_DFL);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(1);
  char rank[16];
  snprintf(rank, sizeof(rank), "%d", r);
  setenv("RANK", rank, 1);
  setenv("LOCAL_RANK", rank, 1);
  setenv("WORLD_SIZE", job->size, 1);
  setenv("LOCAL_WORLD_SIZE", job->size, 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", job->port, 1);
  setenv("DTENSOR_JOB", job->id, 1);
  setenv("DTENSOR_SECRET", job->secret, 1);
  setenv("DTENSOR_BACKEND", job->backend, 1);
  if (job->timeout)
    setenv("DTENSOR_TIMEOUT_S", job->timeout, 1);
  fflush(stdout);
  _exit(child(r, childArg));
}

/* A rank failed with status `st`: ranks that lose a peer fail at nearly the
 * same moment as the peer, so gather what else ends within a moment and
 * name a rank killed by a signal (the likelier cause) before one that
 * exited with an error; then stop the others. */
static void reportFailure(Job *job, int r, int st, int *live) {
  for (int waited = 0; waited < 25 && *live > 0; ++waited) {
    int st2;
    pid_t p2 = waitpid(-1, &st2, WNOHANG);
    if (p2 <= 0) {
      pauseBriefly();
      continue;
    }
    int r2 = reapRank(job, p2);
    if (r2 < 0)
      continue;
    --*live;
    if (WIFSIGNALED(st2) && !WIFSIGNALED(st)) {
      r = r2;
      st = st2;
    }
  }
  if (WIFSIGNALED(st))
    fprintf(stderr,
            "dtensor-run: rank %d was killed by signal %d (%s); "
            "stopping the other ranks\n",
            r, WTERMSIG(st), strsignal(WTERMSIG(st)));
  else
    fprintf(stderr,
            "dtensor-run: rank %d exited with status %d; "
            "stopping the other ranks\n",
            r, WEXITSTATUS(st));
  signalRanks(job, SIGTERM);
}

/* Waits for every rank: the first failure, or a stop signal, stops the
 * others (SIGTERM, SIGKILL after 5 s). Returns the job's status. */
static int waitRanks(Job *job) {
  int live = job->n, status = 0;
  bool failed = false, interrupted = false;
  time_t stopping = 0;
  while (live > 0) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid == 0 || (pid < 0 && errno == EINTR)) {
      if (stopSignal && !interrupted) {
        interrupted = true;
        fprintf(stderr, "dtensor-run: %s; stopping the ranks\n",
                strsignal(stopSignal));
        status = 128 + stopSignal;
        if (!stopping)
          stopping = time(NULL);
        signalRanks(job, SIGTERM);
      }
      if (stopping && time(NULL) - stopping >= 5)
        signalRanks(job, SIGKILL);
      pauseBriefly();
      continue;
    }
    if (pid < 0)
      break;
    int r = reapRank(job, pid);
    if (r < 0)
      continue;
    --live;
    if ((!WIFEXITED(st) || WEXITSTATUS(st) != 0) && !failed && !interrupted) {
      failed = true;
      reportFailure(job, r, st, &live);
      status = 1;
      stopping = time(NULL);
    }
  }
  return status;
}

/* Starts `child(rank, arg)` in N processes with the torchrun variables and
 * waits: a rank that fails stops the others (SIGTERM, SIGKILL after 5 s);
 * so does a stop signal to dtensor-run; the job's shared memory is removed.
 * Returns 0 when every rank succeeded, 128 + the signal when stopped by
 * one, 1 otherwise. */
int dtRunLaunch(int n, const char *backend, const char *timeout,
                int (*child)(int rank, void *arg), void *childArg) {
  Job job = {n, backend, timeout, "", "", "", "", NULL};
  char token[40];
  if (dtrtJobToken(token, sizeof(token)) != DTRT_OK ||
      dtrtJobToken(job.secret, sizeof(job.secret)) != DTRT_OK) {
    fprintf(stderr, "dtensor-run: no random job token: %s\n", strerror(errno));
    return 1;
  }
  /* The pid makes a job's segments easy to find; the token makes them
   * impossible to guess. */
  snprintf(job.id, sizeof(job.id), "j%ld-%s", (long)getpid(), token);
  snprintf(job.port, sizeof(job.port), "%d", freePort());
  snprintf(job.size, sizeof(job.size), "%d", n);
  job.pids = calloc((size_t)n, sizeof(pid_t));
  if (!job.pids)
    return 1;
  pid_t parent = getpid();
  stopSignal = 0;
  handleStopSignals(onStopSignal);
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0)
      startRank(&job, r, parent, child, childArg);
    if (pid < 0) {
      fprintf(stderr, "dtensor-run: fork: %s\n", strerror(errno));
      signalRanks(&job, SIGKILL);
      handleStopSignals(SIG_DFL);
      free(job.pids);
      return 1;
    }
    job.pids[r] = pid;
  }
  int status = waitRanks(&job);
  handleStopSignals(SIG_DFL);
  removeSegments(job.id);
  free(job.pids);
  return status;
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
  int repeat;
  bool mpiRank; /* started by mpirun as one rank of a .mlir run */
  int first;    /* argv index of PROGRAM */
} Args;

/* A whole number in [lo, hi] from `text`, or -1. */
static long wholeNumber(const char *text, long lo, long hi) {
  char *end;
  long v = strtol(text, &end, 10);
  return *text && !*end && v >= lo && v <= hi ? v : -1;
}

/* Reads the options; returns -1 to go on, else the exit status. */
static int parseOptions(int argc, char **argv, Args *a) {
  int i = 1;
  for (; i < argc; ++i) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(arg, "-n") && value)
      a->n = (int)wholeNumber(argv[++i], 1, 1024);
    else if (!strcmp(arg, "--mpi-rank"))
      a->mpiRank = true;
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
    else if (!strcmp(arg, "--repeat") && value) {
      a->repeat = (int)wholeNumber(argv[++i], 1, 1000000);
      if (a->repeat < 0) {
        fprintf(stderr,
                "dtensor-run: --repeat needs a number of runs from 1 "
                "to 1000000, not '%s'\n",
                argv[i]);
        return 2;
      }
    } else if (!strcmp(arg, "--threads") && value) {
      a->threads = argv[++i];
      if (wholeNumber(a->threads, 1, 4096) < 0) {
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
  if (a->n < 1 || a->n > 1024 || a->first >= argc) {
    if (a->n < 1 || a->n > 1024)
      fprintf(stderr, "dtensor-run: -n needs a rank count from 1 to 1024\n");
    return usage();
  }
  if (a->timeout) {
    char *end;
    double t = strtod(a->timeout, &end);
    if (!*a->timeout || *end || !(t > 0)) {
      fprintf(stderr,
              "dtensor-run: --timeout needs a number of seconds > 0, "
              "not '%s'\n",
              a->timeout);
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
  stopSignal = 0;
  handleStopSignals(onStopSignal);
  pid_t pid = fork();
  if (pid == 0) {
    handleStopSignals(SIG_DFL);
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
    if (stopSignal && !forwarded) {
      kill(pid, SIGTERM);
      forwarded = true;
    }
  if (stopSignal) {
    fprintf(stderr, "dtensor-run: %s; the MPI job was stopped\n",
            strsignal(stopSignal));
    return 128 + stopSignal;
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
static int runUnderMpirun(int argc, char **argv, const Args *a, bool isMlir) {
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
  const char *pairs[][2] = {{"--entry", a->entry},
                            {"--load", a->loadDir},
                            {"--save", a->saveDir},
                            {"--repeat", a->repeat ? repeatText : NULL}};
  snprintf(repeatText, sizeof(repeatText), "%d", a->repeat);
  args[k++] = self;
  args[k++] = "--mpi-rank";
  args[k++] = "-n";
  args[k++] = count;
  for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); ++p)
    if (pairs[p][1]) {
      args[k++] = (char *)pairs[p][0];
      args[k++] = (char *)pairs[p][1];
    }
  args[k++] = argv[a->first];
  return waitForMpirun(args);
}

int main(int argc, char **argv) {
  Args a = {0, "shm", NULL, NULL, NULL, NULL, NULL, 0, false, 1};
  int status = parseOptions(argc, argv, &a);
  if (status >= 0)
    return status;
  const char *prog = a.first < argc ? argv[a.first] : "";
  size_t len = strlen(prog);
  bool isMlir = len > 5 && !strcmp(prog + len - 5, ".mlir");
  if ((status = checkOptions(argc, &a, isMlir)) >= 0)
    return status;
  DtRunOptions opts = {a.n,       a.entry,   a.backend, a.timeout,
                       a.loadDir, a.saveDir, a.repeat};
  /* Each rank's compute threads (libdtensor_rt reads DTENSOR_THREADS;
   * without it, the cores shared among the ranks). */
  if (a.threads)
    setenv("DTENSOR_THREADS", a.threads, 1);
  if (a.mpiRank)
    return isMlir ? dtRunMlirMpiRank(prog, &opts) : usage();
  if (!strcmp(a.backend, "mpi"))
    return runUnderMpirun(argc, argv, &a, isMlir);
  if (isMlir)
    return dtRunMlir(prog, &opts);
  Exec exec = {argv + a.first};
  return dtRunLaunch(a.n, a.backend, a.timeout, execChild, &exec);
}
