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

/* Starts `child(rank, arg)` in N processes with the torchrun variables and
 * waits: a rank that fails stops the others (SIGTERM, SIGKILL after 5 s);
 * so does a stop signal to dtensor-run; the job's shared memory is removed.
 * Returns 0 when every rank succeeded, 128 + the signal when stopped by
 * one, 1 otherwise. */
int dtRunLaunch(int n, const char *backend, const char *timeout,
                int (*child)(int rank, void *arg), void *childArg) {
  char job[80], token[40], secret[40], port[16], size[16];
  if (dtrtJobToken(token, sizeof(token)) != DTRT_OK ||
      dtrtJobToken(secret, sizeof(secret)) != DTRT_OK) {
    fprintf(stderr, "dtensor-run: no random job token: %s\n", strerror(errno));
    return 1;
  }
  /* The pid makes a job's segments easy to find; the token makes them
   * impossible to guess. */
  snprintf(job, sizeof(job), "j%ld-%s", (long)getpid(), token);
  snprintf(port, sizeof(port), "%d", freePort());
  snprintf(size, sizeof(size), "%d", n);
  pid_t *pids = calloc((size_t)n, sizeof(pid_t));
  if (!pids)
    return 1;
  pid_t parent = getpid();
  stopSignal = 0;
  handleStopSignals(onStopSignal);
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "dtensor-run: fork: %s\n", strerror(errno));
      for (int k = 0; k < r; ++k)
        kill(pids[k], SIGKILL);
      handleStopSignals(SIG_DFL);
      return 1;
    }
    if (pid == 0) {
      /* A rank ends with dtensor-run, however that ends. */
      handleStopSignals(SIG_DFL);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent)
        _exit(1);
      char rank[16];
      snprintf(rank, sizeof(rank), "%d", r);
      setenv("RANK", rank, 1);
      setenv("LOCAL_RANK", rank, 1);
      setenv("WORLD_SIZE", size, 1);
      setenv("LOCAL_WORLD_SIZE", size, 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port, 1);
      setenv("DTENSOR_JOB", job, 1);
      setenv("DTENSOR_SECRET", secret, 1);
      setenv("DTENSOR_BACKEND", backend, 1);
      if (timeout)
        setenv("DTENSOR_TIMEOUT_S", timeout, 1);
      fflush(stdout);
      _exit(child(r, childArg));
    }
    pids[r] = pid;
  }
  int live = n, status = 0, failedRank = -1;
  time_t stopping = 0;
  bool interrupted = false;
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
        for (int r = 0; r < n; ++r)
          if (pids[r])
            kill(pids[r], SIGTERM);
      }
      if (stopping && time(NULL) - stopping >= 5)
        for (int r = 0; r < n; ++r)
          if (pids[r])
            kill(pids[r], SIGKILL);
      struct timespec pause = {0, 10 * 1000 * 1000};
      nanosleep(&pause, NULL);
      continue;
    }
    if (pid < 0)
      break;
    int r = 0;
    while (r < n && pids[r] != pid)
      ++r;
    if (r == n)
      continue;
    pids[r] = 0;
    --live;
    bool failed = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    if (failed && failedRank < 0 && !interrupted) {
      /* Ranks that lose a peer fail at nearly the same moment as the peer:
       * gather what else ends within a moment and name a rank killed by a
       * signal (the likelier cause) before one that exited with an
       * error. */
      failedRank = r;
      int culpritStatus = st;
      for (int waited = 0; waited < 25 && live > 0; ++waited) {
        int st2;
        pid_t p2 = waitpid(-1, &st2, WNOHANG);
        if (p2 <= 0) {
          struct timespec pause = {0, 10 * 1000 * 1000};
          nanosleep(&pause, NULL);
          continue;
        }
        int r2 = 0;
        while (r2 < n && pids[r2] != p2)
          ++r2;
        if (r2 == n)
          continue;
        pids[r2] = 0;
        --live;
        if (WIFSIGNALED(st2) && !WIFSIGNALED(culpritStatus)) {
          failedRank = r2;
          culpritStatus = st2;
        }
      }
      r = failedRank;
      st = culpritStatus;
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
      status = 1;
      stopping = time(NULL);
      for (int k = 0; k < n; ++k)
        if (pids[k])
          kill(pids[k], SIGTERM);
    }
  }
  handleStopSignals(SIG_DFL);
  removeSegments(job);
  free(pids);
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

int main(int argc, char **argv) {
  int n = 0, i = 1;
  const char *backend = "shm", *timeout = NULL, *entry = NULL;
  const char *loadDir = NULL, *saveDir = NULL, *threads = NULL;
  int repeat = 0;
  bool mpiRank = false; /* started by mpirun as one rank of a .mlir run */
  for (; i < argc; ++i) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      n = *argv[i] && !*end && v >= 1 && v <= 1024 ? (int)v : -1;
    } else if (!strcmp(argv[i], "--mpi-rank"))
      mpiRank = true;
    else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
      backend = argv[++i];
    else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
      timeout = argv[++i];
    else if (!strcmp(argv[i], "--entry") && i + 1 < argc)
      entry = argv[++i];
    else if (!strcmp(argv[i], "--load") && i + 1 < argc)
      loadDir = argv[++i];
    else if (!strcmp(argv[i], "--save") && i + 1 < argc)
      saveDir = argv[++i];
    else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (!*argv[i] || *end || v < 1 || v > 1000000) {
        fprintf(stderr,
                "dtensor-run: --repeat needs a number of runs from 1 "
                "to 1000000, not '%s'\n",
                argv[i]);
        return 2;
      }
      repeat = (int)v;
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      char *end;
      threads = argv[++i];
      long v = strtol(threads, &end, 10);
      if (!*threads || *end || v < 1 || v > 4096) {
        fprintf(stderr,
                "dtensor-run: --threads needs a thread count from 1 "
                "to 4096, not '%s'\n",
                threads);
        return 2;
      }
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage();
      return 0;
    } else if (!strcmp(argv[i], "--")) {
      ++i;
      break;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "dtensor-run: unknown option '%s'\n", argv[i]);
      return usage();
    } else
      break;
  }
  if (n < 1 || n > 1024 || i >= argc) {
    if (n < 1 || n > 1024)
      fprintf(stderr, "dtensor-run: -n needs a rank count from 1 to 1024\n");
    return usage();
  }
  if (timeout) {
    char *end;
    double t = strtod(timeout, &end);
    if (!*timeout || *end || !(t > 0)) {
      fprintf(stderr,
              "dtensor-run: --timeout needs a number of seconds > 0, "
              "not '%s'\n",
              timeout);
      return 2;
    }
  }
  if (strcmp(backend, "shm") && strcmp(backend, "mpi") &&
      strcmp(backend, "nccl")) {
    fprintf(stderr,
            "dtensor-run: unknown backend '%s' (valid: shm, mpi, "
            "nccl)\n",
            backend);
    return 2;
  }
  size_t len = strlen(argv[i]);
  bool isMlir = len > 5 && !strcmp(argv[i] + len - 5, ".mlir");
  DtRunOptions opts = {n, entry, backend, timeout, loadDir, saveDir, repeat};
  if ((loadDir || saveDir || repeat) && !isMlir) {
    fprintf(stderr, "dtensor-run: --load, --save and --repeat apply to "
                    "PROG.mlir\n");
    return 2;
  }
  /* Each rank's compute threads (libdtensor_rt reads DTENSOR_THREADS;
   * without it, the cores shared among the ranks). */
  if (threads)
    setenv("DTENSOR_THREADS", threads, 1);
  if (mpiRank)
    return isMlir ? dtRunMlirMpiRank(argv[i], &opts) : usage();
  if (!strcmp(backend, "mpi")) {
    /* MPI has its own launcher: hand the job to mpirun. */
    char count[16];
    snprintf(count, sizeof(count), "%d", n);
    char **args = calloc((size_t)(argc - i + 32), sizeof(char *));
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
    if (timeout) {
      setenv("DTENSOR_TIMEOUT_S", timeout, 1);
      args[k++] = "-x";
      args[k++] = "DTENSOR_TIMEOUT_S";
    }
    if (threads) {
      args[k++] = "-x";
      args[k++] = "DTENSOR_THREADS";
    }
    if (!isMlir) {
      for (int a = i; a < argc; ++a)
        args[k++] = argv[a];
      execvp("mpirun", args);
      fprintf(stderr,
              "dtensor-run: cannot run mpirun: %s (install "
              "openmpi-bin)\n",
              strerror(errno));
      return 1;
    }
    /* A program: every rank is this tool again, compiling the program and
     * running its own rank; the summary comes when mpirun is done. */
    char self[4096];
    ssize_t m = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (m <= 0) {
      fprintf(stderr, "dtensor-run: cannot find its own executable\n");
      return 1;
    }
    self[m] = 0;
    args[k++] = self;
    args[k++] = "--mpi-rank";
    args[k++] = "-n";
    args[k++] = count;
    if (entry) {
      args[k++] = "--entry";
      args[k++] = (char *)entry;
    }
    if (loadDir) {
      args[k++] = "--load";
      args[k++] = (char *)loadDir;
    }
    if (saveDir) {
      args[k++] = "--save";
      args[k++] = (char *)saveDir;
    }
    char repeatText[16];
    if (repeat) {
      snprintf(repeatText, sizeof(repeatText), "%d", repeat);
      args[k++] = "--repeat";
      args[k++] = repeatText;
    }
    args[k++] = argv[i];
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
    /* A stop signal goes on to mpirun, which stops its ranks. */
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
  if (isMlir)
    return dtRunMlir(argv[i], &opts);
  Exec exec = {argv + i};
  return dtRunLaunch(n, backend, timeout, execChild, &exec);
}
