/* dtrtLaunch: one forked process per rank, the environment dtrtInit reads,
 * and a wait that stops the job when one rank fails (dtensor-rt/Launch.h).
 * It waits for its own children by pid only, so the host's other children
 * (a Python interpreter's subprocesses) are left to the host. */
#include "dtensor-rt/Launch.h"

#include "RuntimeInternal.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What a job's ranks share: the variables' values and the pids. */
typedef struct Job {
  const DtrtLaunchOptions *o;
  char id[80], secret[40], port[16], size[16], localSize[16], timeout[32];
  char addr[256];
  int firstRank; /* the global rank of this launch's rank 0 */
  pid_t *pids;
  int live;
} Job;

static void removeSegments(const char *job) {
  char prefix[160];
  snprintf(prefix, sizeof(prefix), "dtensor-%s-", job);
  DIR *d = opendir("/dev/shm");
  if (!d)
    return;
  for (struct dirent *e; (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, strlen(prefix))) {
      char path[512];
      struct stat st;
      snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
      /* Only this user's: a name another user made is not ours to remove. */
      if (lstat(path, &st) == 0 && st.st_uid == geteuid())
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

static void pauseBriefly(void) {
  struct timespec pause = {0, 10 * 1000 * 1000};
  nanosleep(&pause, NULL);
}

static void signalRanks(const Job *job, int sig) {
  for (int r = 0; r < job->o->numRanks; ++r)
    if (job->pids[r] > 0)
      kill(job->pids[r], sig);
}

/* A rank that ended since the last look (its pid forgotten) and its wait
 * status, or -1. */
static int reapRank(Job *job, int *outStatus) {
  for (int r = 0; r < job->o->numRanks; ++r) {
    if (job->pids[r] <= 0)
      continue;
    pid_t p = waitpid(job->pids[r], outStatus, WNOHANG);
    if (p == job->pids[r] || (p < 0 && errno == ECHILD)) {
      if (p < 0) /* reaped by someone else: count it as a success */
        *outStatus = 0;
      job->pids[r] = 0;
      --job->live;
      return r;
    }
  }
  return -1;
}

static const int stopSignals[] = {SIGINT, SIGTERM, SIGHUP};

/* In a forked rank: the variables, then `child`. */
static void startRank(const Job *job, int r, pid_t parent,
                      int (*child)(int rank, void *arg), void *arg) {
  /* A rank ends with its launcher, however that ends. */
  for (size_t i = 0; i < sizeof(stopSignals) / sizeof(stopSignals[0]); ++i)
    signal(stopSignals[i], SIG_DFL);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(1);
  dtrtProcessContextForget();
  char rank[16], local[16];
  snprintf(rank, sizeof(rank), "%d", job->firstRank + r);
  snprintf(local, sizeof(local), "%d", r);
  setenv("RANK", rank, 1);
  setenv("LOCAL_RANK", local, 1);
  setenv("WORLD_SIZE", job->size, 1);
  setenv("LOCAL_WORLD_SIZE", job->localSize, 1);
  setenv("MASTER_ADDR", job->addr, 1);
  setenv("MASTER_PORT", job->port, 1);
  setenv("DTENSOR_JOB", job->id, 1);
  setenv("DTENSOR_SECRET", job->secret, 1);
  setenv("DTENSOR_BACKEND", job->o->backend ? job->o->backend : "shm", 1);
  if (job->timeout[0])
    setenv("DTENSOR_TIMEOUT_S", job->timeout, 1);
  exit(child(r, arg));
}

/* A rank failed with wait status `st`: ranks that lose a peer fail at
 * nearly the same moment as the peer, so gather what else ends within a
 * moment and name a rank killed by a signal (the likelier cause) before
 * one that exited with an error; then stop the others. */
static void reportFailure(Job *job, int r, int st, DtrtLaunchResult *out) {
  for (int waited = 0; waited < 25 && job->live > 0; ++waited) {
    int st2;
    int r2 = reapRank(job, &st2);
    if (r2 < 0) {
      pauseBriefly();
      continue;
    }
    if (WIFSIGNALED(st2) && !WIFSIGNALED(st)) {
      r = r2;
      st = st2;
    }
  }
  out->failedRank = r;
  out->exitCode = 1;
  if (WIFSIGNALED(st))
    snprintf(out->message, sizeof(out->message),
             "rank %d was killed by signal %d (%s); stopping the other ranks",
             job->firstRank + r, WTERMSIG(st), strsignal(WTERMSIG(st)));
  else
    snprintf(out->message, sizeof(out->message),
             "rank %d exited with status %d; stopping the other ranks",
             job->firstRank + r, WEXITSTATUS(st));
  signalRanks(job, SIGTERM);
}

/* Waits for every rank: the first failure, or a stop, stops the others
 * (SIGTERM, SIGKILL after 5 s). */
static void waitRanks(Job *job, DtrtLaunchResult *out) {
  bool stopped = false;
  time_t stopping = 0;
  while (job->live > 0) {
    int st;
    int r = reapRank(job, &st);
    if (r < 0) {
      int sig = job->o->stop ? *job->o->stop : 0;
      if (sig && !stopped && out->exitCode == 0) {
        stopped = true;
        snprintf(out->message, sizeof(out->message), "%s; stopping the ranks",
                 strsignal(sig));
        out->exitCode = 128 + sig;
        stopping = time(NULL);
        signalRanks(job, SIGTERM);
      }
      if (stopping && time(NULL) - stopping >= 5)
        signalRanks(job, SIGKILL);
      pauseBriefly();
      continue;
    }
    if ((!WIFEXITED(st) || WEXITSTATUS(st) != 0) && out->exitCode == 0) {
      reportFailure(job, r, st, out);
      stopping = time(NULL);
    }
  }
}

/* A job over several hosts: the rendezvous and the job's token and secret
 * the caller gave, the same on every node. */
static DtrtStatus prepareNodes(Job *job, DtrtLaunchResult *out) {
  const DtrtLaunchOptions *o = job->o;
  const char *id = getenv("DTENSOR_JOB"), *secret = getenv("DTENSOR_SECRET");
  const char *problem =
      o->nodeRank < 0 || o->nodeRank >= o->numNodes
          ? "the node rank is not below the number of nodes"
      : !o->masterAddr || !*o->masterAddr || o->masterPort < 1 ||
              o->masterPort > 65535
          ? "a job of several nodes needs the master's address and port "
            "(the host of rank 0)"
      : !id || !*id || !secret || !*secret
          ? "a job of several nodes needs DTENSOR_JOB and DTENSOR_SECRET "
            "exported, the same on every node (e.g. "
            "j$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'))"
          : NULL;
  if (!problem &&
      (strlen(id) >= sizeof(job->id) || strlen(secret) >= sizeof(job->secret) ||
       strlen(o->masterAddr) >= sizeof(job->addr)))
    problem = "DTENSOR_JOB, DTENSOR_SECRET or the master's address is too "
              "long";
  if (problem) {
    snprintf(out->message, sizeof(out->message), "%s", problem);
    return DTRT_ERR_INVALID;
  }
  snprintf(job->id, sizeof(job->id), "%s", id);
  snprintf(job->secret, sizeof(job->secret), "%s", secret);
  snprintf(job->addr, sizeof(job->addr), "%s", o->masterAddr);
  snprintf(job->port, sizeof(job->port), "%d", o->masterPort);
  job->firstRank = o->nodeRank * o->numRanks;
  snprintf(job->size, sizeof(job->size), "%d", o->numNodes * o->numRanks);
  return DTRT_OK;
}

static DtrtStatus prepareJob(Job *job, DtrtLaunchResult *out) {
  snprintf(job->localSize, sizeof(job->localSize), "%d", job->o->numRanks);
  if (job->o->timeoutSeconds > 0)
    snprintf(job->timeout, sizeof(job->timeout), "%.17g",
             job->o->timeoutSeconds);
  if (job->o->numNodes > 1) {
    DtrtStatus s = prepareNodes(job, out);
    if (s != DTRT_OK)
      return s;
    job->pids = calloc((size_t)job->o->numRanks, sizeof(pid_t));
    if (!job->pids) {
      snprintf(out->message, sizeof(out->message), "out of memory");
      return DTRT_ERR_NOMEM;
    }
    return DTRT_OK;
  }
  snprintf(job->addr, sizeof(job->addr), "127.0.0.1");
  char token[40];
  if (dtrtJobToken(token, sizeof(token)) != DTRT_OK ||
      dtrtJobToken(job->secret, sizeof(job->secret)) != DTRT_OK) {
    snprintf(out->message, sizeof(out->message), "no random job token: %s",
             strerror(errno));
    return DTRT_ERR_SYSTEM;
  }
  /* The pid makes a job's segments easy to find; the token makes them
   * impossible to guess. */
  snprintf(job->id, sizeof(job->id), "j%ld-%s", (long)getpid(), token);
  snprintf(job->port, sizeof(job->port), "%d", freePort());
  snprintf(job->size, sizeof(job->size), "%d", job->o->numRanks);
  job->pids = calloc((size_t)job->o->numRanks, sizeof(pid_t));
  if (!job->pids) {
    snprintf(out->message, sizeof(out->message), "out of memory");
    return DTRT_ERR_NOMEM;
  }
  return DTRT_OK;
}

DtrtStatus dtrtLaunch(const DtrtLaunchOptions *options,
                      int (*child)(int rank, void *arg), void *arg,
                      DtrtLaunchResult *outResult) {
  DtrtLaunchResult *out = outResult;
  out->exitCode = 1;
  out->failedRank = -1;
  out->message[0] = '\0';
  if (!options || !child || options->numRanks < 1 ||
      options->numRanks > DTRT_LAUNCH_MAX_RANKS) {
    snprintf(out->message, sizeof(out->message),
             "a launch needs a child and from 1 to %d ranks",
             DTRT_LAUNCH_MAX_RANKS);
    return DTRT_ERR_INVALID;
  }
  Job job = {options, "", "", "", "", "", "", "", 0, NULL, 0};
  /* Segments of jobs killed during set-up (kill -9 of the launcher) stay
   * in /dev/shm; the next launch removes them. */
  dtrtShmRemoveStale();
  DtrtStatus s = prepareJob(&job, out);
  if (s != DTRT_OK)
    return s;
  out->exitCode = 0;
  pid_t parent = getpid();
  /* Whatever the caller buffered is written once, not once per rank. */
  fflush(NULL);
  for (int r = 0; r < options->numRanks; ++r) {
    pid_t pid = fork();
    if (pid == 0)
      startRank(&job, r, parent, child, arg);
    if (pid < 0) {
      snprintf(out->message, sizeof(out->message), "fork: %s", strerror(errno));
      out->exitCode = 1;
      signalRanks(&job, SIGKILL);
      for (int k = 0; k < r; ++k)
        waitpid(job.pids[k], NULL, 0);
      free(job.pids);
      return DTRT_ERR_SYSTEM;
    }
    job.pids[r] = pid;
    ++job.live;
  }
  waitRanks(&job, out);
  removeSegments(job.id);
  free(job.pids);
  return out->exitCode == 0 ? DTRT_OK : DTRT_ERR_PEER;
}
