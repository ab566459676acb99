/* dtensorRunSession*: ranks that stay up between steps. A launcher process
 * (forked once) runs dtrtLaunch, whose ranks wait on a semaphore for each
 * command; the global values in and out, the commands and each rank's
 * status live in one shared mapping made before the fork. A result that is
 * the next step's value of an argument of the same name and layout stays
 * on the ranks as that argument's block, so a training step's parameters
 * and optimizer state never leave them. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, prctl */
#include "RunnerInternal.h"

#include "Support/Support.h"

#include "dtensor-rt/Launch.h"

#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { CMD_STEP = 1, CMD_FETCH, CMD_PROFILE, CMD_QUIT };

/* What a rank says of the last command. */
typedef struct RankStatus {
  int ok;
  double seconds; /* the program's time in a step */
  DtensorDiag diag;
} RankStatus;

/* The head of the shared mapping; the semaphores, statuses, flags and
 * values follow at the offsets the session keeps. */
typedef struct Shared {
  int command, fetchArg;
  char path[4096]; /* CMD_PROFILE's file prefix */
  sem_t done;
  DtrtLaunchResult launch; /* written by the launcher when the job ends */
} Shared;

struct DtensorRunSession {
  DtensorRunner *runner;
  int n;
  pid_t launcher;
  bool ended; /* the launcher was reaped */
  double timeout;
  Shared *shared;
  size_t bytes;
  sem_t *go;                 /* one per rank */
  RankStatus *status;        /* one per rank */
  unsigned char *given;      /* argument given for the next step */
  unsigned char *wanted;     /* result placed into its global value */
  int *carry;                /* result -> the argument it becomes, or -1 */
  bool *held;                /* (the caller's side) argument has a value */
  void **argData, **resData; /* global values in the mapping */
};

static size_t roundUp(size_t n) { return (n + 63) & ~(size_t)63; }

static size_t globalBytes(const DtensorRunTensor *t) {
  return (size_t)dtRunCount(t->rank, t->shape) * dtrtDtypeSize(t->dtype);
}

/* Whether result `res` can stay on the ranks as argument `arg`: the same
 * name, type, shape and layout, and nothing pending. */
static bool carries(const DtensorRunner *r, const DtensorRunTensor *res,
                    const DtensorRunTensor *arg) {
  if (strcmp(res->name, arg->name) || res->dtype != arg->dtype ||
      res->rank != arg->rank ||
      memcmp(res->shape, arg->shape, sizeof(int64_t) * (size_t)res->rank) ||
      !dtensorShardingSpecEqual(&res->spec, &arg->spec))
    return false;
  for (int a = 0; a < dtensorMeshGetRank(r->mesh); ++a)
    if (res->spec.partial[a] != DTENSOR_REDUCE_NONE)
      return false;
  return true;
}

/* ---- a rank -------------------------------------------------------------- */

static bool step(DtensorRunSession *s, int rank, int64_t **descs,
                 bool *resident, void **out, void **outAlloc, RankStatus *st) {
  DtensorRunner *r = s->runner;
  for (int a = 0; a < r->numArgs; ++a) {
    if (resident[a] && !s->given[a])
      continue;
    if (!dtRunFillBlock(r, &r->args[a], rank, s->argData[a], &descs[a],
                        &st->diag))
      return false;
    resident[a] = false;
  }
  double t0 = dtMonotonicSeconds();
  if (!dtRunInvoke(r, true, descs, out, outAlloc, &st->diag))
    return false;
  st->seconds = dtMonotonicSeconds() - t0;
  bool ok = true;
  for (int k = 0; k < r->numResults && ok; ++k)
    if (s->wanted[k]) {
      ok = dtRunResolvePartial(r, &r->results[k], out[k], rank, &st->diag);
      if (ok)
        dtRunPlaceBlock(r, &r->results[k], rank, out[k], s->resData[k]);
    }
  /* Carried results become their arguments' blocks (a buffer carried
   * twice: the second argument gets a copy in its own block); then every
   * buffer no argument took is freed, once. */
  for (int k = 0; k < r->numResults && ok; ++k) {
    int a = s->carry[k];
    if (a < 0)
      continue;
    bool taken = false;
    for (int j = 0; j < k && !taken; ++j)
      taken = s->carry[j] >= 0 && outAlloc[j] == outAlloc[k];
    if (taken) {
      memcpy((void *)(intptr_t)descs[a][1], out[k],
             (size_t)dtRunBlockCount(r, &r->args[a]) *
                 dtrtDtypeSize(r->args[a].dtype));
    } else {
      free((void *)(intptr_t)descs[a][0]);
      descs[a][0] = (int64_t)(intptr_t)outAlloc[k];
      descs[a][1] = (int64_t)(intptr_t)out[k];
    }
    resident[a] = true;
  }
  for (int k = 0; k < r->numResults; ++k) {
    bool done = false;
    for (int j = 0; j < r->numResults && !done; ++j)
      done = outAlloc[j] == outAlloc[k] && (j < k || (ok && s->carry[j] >= 0));
    if (!done)
      free(outAlloc[k]);
  }
  return ok;
}

/* A rank: one command per wake-up until told to stop. A failed command
 * ends the rank (and so the job: dtrtLaunch stops the others). */
static int rankLoop(int rank, void *arg) {
  DtensorRunSession *s = arg;
  DtensorRunner *r = s->runner;
  size_t n = (size_t)r->numArgs + 1, m = (size_t)r->numResults + 1;
  int64_t **descs = calloc(n, sizeof(int64_t *));
  bool *resident = calloc(n, sizeof(bool));
  void **out = calloc(m, sizeof(void *)),
       **outAlloc = calloc(m, sizeof(void *));
  RankStatus *st = &s->status[rank];
  /* The job's rendezvous now, while the caller compiles on, rather than in
   * the first step. */
  DtrtContext *c = dtrtProcessContext();
  if (c)
    dtrtBarrier(dtrtCommWorld(c));
  dtrtProfileReset(); /* a profiled program's events are this rank's */
  for (;;) {
    while (sem_wait(&s->go[rank]) != 0 && errno == EINTR)
      ;
    int command = s->shared->command;
    st->diag.message[0] = '\0';
    st->seconds = 0;
    bool ok = descs && resident && out && outAlloc;
    if (!ok)
      dtDiag(&st->diag, -1, "out of memory");
    if (command == CMD_QUIT) {
      st->ok = 1;
      sem_post(&s->shared->done);
      return 0;
    }
    if (ok && command == CMD_STEP)
      ok = step(s, rank, descs, resident, out, outAlloc, st);
    else if (ok && command == CMD_PROFILE) {
      char path[4200];
      snprintf(path, sizeof(path), "%s.rank%d", s->shared->path, rank);
      ok = dtrtProfileWrite(path) == DTRT_OK ||
           dtDiag(&st->diag, -1, "cannot write '%s'", path);
      dtrtProfileReset();
    } else if (ok && command == CMD_FETCH) {
      int a = s->shared->fetchArg;
      if (descs[a])
        dtRunPlaceBlock(r, &r->args[a], rank, (void *)(intptr_t)descs[a][1],
                        s->argData[a]);
    }
    st->ok = ok;
    sem_post(&s->shared->done);
    if (!ok)
      return 1;
  }
}

/* ---- the caller's side --------------------------------------------------- */

/* Reaps the launcher if it ended; true when it has. */
static bool launcherEnded(DtensorRunSession *s) {
  if (s->ended)
    return true;
  int status;
  if (waitpid(s->launcher, &status, WNOHANG) == s->launcher)
    s->ended = true;
  return s->ended;
}

/* Why the job ended: the first rank that said so, else the launch's. */
static bool jobFailed(DtensorRunSession *s, DtensorDiag *outDiag) {
  for (int k = 0; k < s->n; ++k)
    if (s->status[k].diag.message[0])
      return dtDiag(outDiag, -1, "rank %d: %s", k, s->status[k].diag.message);
  if (s->shared->launch.message[0])
    return dtDiag(outDiag, -1, "the ranks stopped: %s",
                  s->shared->launch.message);
  return dtDiag(outDiag, -1, "the ranks stopped");
}

/* Gives every rank `command` and waits until each has done it, the job
 * ended, or the session's timeout passed. */
static bool command(DtensorRunSession *s, int command, DtensorDiag *outDiag) {
  if (launcherEnded(s))
    return jobFailed(s, outDiag);
  s->shared->command = command;
  for (int k = 0; k < s->n; ++k) {
    s->status[k].ok = 0;
    sem_post(&s->go[k]);
  }
  double start = dtMonotonicSeconds();
  for (int got = 0; got < s->n;) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec += 1;
      until.tv_nsec -= 1000000000;
    }
    if (sem_timedwait(&s->shared->done, &until) == 0) {
      ++got;
      continue;
    }
    if (errno == EINTR)
      continue;
    if (launcherEnded(s))
      return jobFailed(s, outDiag);
    if (s->timeout > 0 && dtMonotonicSeconds() - start > s->timeout) {
      kill(s->launcher, SIGTERM);
      return dtDiag(outDiag, -1,
                    "the step took longer than %g s; the ranks "
                    "were stopped",
                    s->timeout);
    }
  }
  for (int k = 0; k < s->n; ++k)
    if (!s->status[k].ok) {
      /* That rank ended: wait for the launcher to stop the others. */
      waitpid(s->launcher, NULL, 0);
      s->ended = true;
      return jobFailed(s, outDiag);
    }
  return true;
}

DtensorRunSession *dtensorRunSessionStart(DtensorRunner *r,
                                          const DtrtLaunchOptions *launch,
                                          double timeoutSeconds,
                                          DtensorDiag *outDiag) {
  int64_t devices = dtensorMeshGetNumDevices(r->mesh);
  if (launch->numRanks != devices) {
    dtDiag(outDiag, -1, "the program's mesh has %lld devices, not %d ranks",
           (long long)devices, launch->numRanks);
    return NULL;
  }
  if (r->gpu) {
    dtDiag(outDiag, -1,
           "ranks that stay up run CPU programs; a GPU program is launched "
           "once per step (dtensorRunnerLaunch)");
    return NULL;
  }
  DtensorRunSession *s = calloc(1, sizeof(*s));
  int na = r->numArgs, nr = r->numResults, n = launch->numRanks;
  if (s) {
    s->carry = calloc((size_t)nr + 1, sizeof(int));
    s->held = calloc((size_t)na + 1, sizeof(bool));
    s->argData = calloc((size_t)na + 1, sizeof(void *));
    s->resData = calloc((size_t)nr + 1, sizeof(void *));
  }
  if (!s || !s->carry || !s->held || !s->argData || !s->resData) {
    dtensorRunSessionClose(s, NULL);
    dtDiag(outDiag, -1, "out of memory");
    return NULL;
  }
  s->runner = r;
  s->n = n;
  s->timeout = timeoutSeconds;
  s->launcher = -1;
  /* The layout of the mapping. */
  size_t at = roundUp(sizeof(Shared));
  size_t goAt = at;
  at = roundUp(at + (size_t)n * sizeof(sem_t));
  size_t statusAt = at;
  at = roundUp(at + (size_t)n * sizeof(RankStatus));
  size_t givenAt = at;
  at = roundUp(at + (size_t)na + 1);
  size_t wantedAt = at;
  at = roundUp(at + (size_t)nr + 1);
  size_t *argAt = calloc((size_t)na + (size_t)nr + 1, sizeof(size_t));
  if (!argAt) {
    dtensorRunSessionClose(s, NULL);
    dtDiag(outDiag, -1, "out of memory");
    return NULL;
  }
  for (int a = 0; a < na; ++a) {
    argAt[a] = at;
    at = roundUp(at + globalBytes(&r->args[a]));
  }
  for (int k = 0; k < nr; ++k) {
    argAt[na + k] = at;
    at = roundUp(at + globalBytes(&r->results[k]));
  }
  s->bytes = at;
  void *map = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    free(argAt);
    dtensorRunSessionClose(s, NULL);
    dtDiag(outDiag, -1, "no shared memory for the steps' values (%zu bytes)",
           at);
    return NULL;
  }
  char *base = map;
  s->shared = map;
  s->go = (sem_t *)(base + goAt);
  s->status = (RankStatus *)(base + statusAt);
  s->given = (unsigned char *)(base + givenAt);
  s->wanted = (unsigned char *)(base + wantedAt);
  for (int a = 0; a < na; ++a)
    s->argData[a] = base + argAt[a];
  for (int k = 0; k < nr; ++k)
    s->resData[k] = base + argAt[na + k];
  free(argAt);
  bool ok = sem_init(&s->shared->done, 1, 0) == 0;
  for (int k = 0; k < n && ok; ++k)
    ok = sem_init(&s->go[k], 1, 0) == 0;
  for (int k = 0; k < nr; ++k) {
    s->carry[k] = -1;
    for (int a = 0; a < na && s->carry[k] < 0; ++a) {
      bool taken = false;
      for (int j = 0; j < k; ++j)
        taken |= s->carry[j] == a;
      if (!taken && carries(r, &r->results[k], &r->args[a]))
        s->carry[k] = a;
    }
  }
  if (!ok) {
    dtensorRunSessionClose(s, NULL);
    dtDiag(outDiag, -1, "no process-shared semaphores: %s", strerror(errno));
    return NULL;
  }
  DtrtLaunchOptions options = *launch;
  pid_t parent = getpid();
  fflush(NULL);
  s->launcher = fork();
  if (s->launcher < 0) {
    dtensorRunSessionClose(s, NULL);
    dtDiag(outDiag, -1, "cannot start the ranks: %s", strerror(errno));
    return NULL;
  }
  if (s->launcher == 0) {
    /* The launcher: dies with the caller (and its ranks with it). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(1);
    DtrtLaunchResult result;
    memset(&result, 0, sizeof(result));
    dtrtLaunch(&options, rankLoop, s, &result);
    s->shared->launch = result;
    _exit(result.exitCode ? 1 : 0);
  }
  return s;
}

int dtensorRunSessionCarried(const DtensorRunSession *s, int result) {
  return result >= 0 && result < s->runner->numResults ? s->carry[result] : -1;
}

void *dtensorRunSessionArgument(DtensorRunSession *s, int index) {
  if (index < 0 || index >= s->runner->numArgs)
    return NULL;
  s->given[index] = 1;
  s->held[index] = true;
  return s->argData[index];
}

bool dtensorRunSessionStep(DtensorRunSession *s, const bool *wanted,
                           double *outSeconds, DtensorDiag *outDiag) {
  DtensorRunner *r = s->runner;
  for (int a = 0; a < r->numArgs; ++a)
    if (!s->held[a])
      return dtDiag(outDiag, -1, "argument '%s' has no value", r->args[a].name);
  for (int k = 0; k < r->numResults; ++k)
    s->wanted[k] = wanted ? wanted[k] : s->carry[k] < 0;
  bool ok = command(s, CMD_STEP, outDiag);
  memset(s->given, 0, (size_t)r->numArgs);
  if (!ok)
    return false;
  /* A carried result is its argument's value from now on. */
  for (int k = 0; k < r->numResults; ++k)
    if (s->carry[k] >= 0)
      s->held[s->carry[k]] = true;
  if (outSeconds) {
    *outSeconds = 0;
    for (int k = 0; k < s->n; ++k)
      if (s->status[k].seconds > *outSeconds)
        *outSeconds = s->status[k].seconds;
  }
  return true;
}

const void *dtensorRunSessionResult(const DtensorRunSession *s, int k) {
  return k >= 0 && k < s->runner->numResults ? s->resData[k] : NULL;
}

const void *dtensorRunSessionFetch(DtensorRunSession *s, int index,
                                   DtensorDiag *outDiag) {
  if (index < 0 || index >= s->runner->numArgs) {
    dtDiag(outDiag, -1, "no argument %d", index);
    return NULL;
  }
  s->shared->fetchArg = index;
  return command(s, CMD_FETCH, outDiag) ? s->argData[index] : NULL;
}

bool dtensorRunSessionProfile(DtensorRunSession *s, const char *path,
                              FILE *table, DtensorDiag *outDiag) {
  if (strlen(path) >= sizeof(s->shared->path))
    return dtDiag(outDiag, -1, "the profile's path is too long");
  snprintf(s->shared->path, sizeof(s->shared->path), "%s", path);
  return command(s, CMD_PROFILE, outDiag) &&
         dtensorRunnerProfileReport(s->runner, path, s->n, table, outDiag);
}

bool dtensorRunSessionClose(DtensorRunSession *s, DtensorDiag *outDiag) {
  if (!s)
    return true;
  bool ok = true;
  if (s->launcher > 0 && !launcherEnded(s)) {
    ok = command(s, CMD_QUIT, outDiag);
    int status = 0;
    if (!s->ended && waitpid(s->launcher, &status, 0) == s->launcher)
      ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && outDiag && !outDiag->message[0])
      jobFailed(s, outDiag);
  }
  if (s->shared) {
    sem_destroy(&s->shared->done);
    for (int k = 0; k < s->n; ++k)
      sem_destroy(&s->go[k]);
    munmap(s->shared, s->bytes);
  }
  free(s->carry);
  free(s->held);
  free(s->argData);
  free(s->resData);
  free(s);
  return ok;
}
