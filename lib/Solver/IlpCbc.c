/* COIN-OR CBC's branch and cut for Ilp.h, through its C interface
 * (Debian's coinor-libcbc-dev). The only file that includes CBC. */
#define _DEFAULT_SOURCE /* fork, kill, nanosleep, MAP_ANONYMOUS */
#include "Ilp.h"
#include "Support/Support.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef DTENSOR_HAVE_CBC
#include <coin/Cbc_C_Interface.h>
#include <coin/Clp_C_Interface.h>

/* CBC is loaded by its SONAME (found when building) at the first solve,
 * not linked: through COIN-OR's LAPACK it brings OpenBLAS, whose threads
 * start, and spin a tenth of a second, in every process that loads it
 * (dtensor-opt's 10^4-block dtensor-spmd ran 6-9 % longer beside them on
 * our 2-core VMs). CLP's C interface, which CBC's library brings, is
 * looked up through the same handle (rootLp below). */
#define CBC_FUNCTIONS(X)                                                       \
  X(Cbc_newModel)                                                              \
  X(Cbc_loadProblem)                                                           \
  X(Cbc_setInteger)                                                            \
  X(Cbc_setObjSense)                                                           \
  X(Cbc_setLogLevel)                                                           \
  X(Cbc_setMaximumSeconds)                                                     \
  X(Cbc_setParameter)                                                          \
  X(Cbc_setMIPStartI)                                                          \
  X(Cbc_setCutoff)                                                             \
  X(Cbc_setMaximumSolutions)                                                   \
  X(Cbc_isSolutionLimitReached)                                                \
  X(Cbc_getColSolution)                                                        \
  X(Cbc_solve)                                                                 \
  X(Cbc_bestSolution)                                                          \
  X(Cbc_getObjValue)                                                           \
  X(Cbc_getBestPossibleObjValue)                                               \
  X(Cbc_isProvenOptimal)                                                       \
  X(Cbc_isProvenInfeasible)                                                    \
  X(Cbc_isSecondsLimitReached)                                                 \
  X(Cbc_status)                                                                \
  X(Cbc_secondaryStatus)                                                       \
  X(Cbc_deleteModel)                                                           \
  X(Clp_newModel)                                                              \
  X(Clp_loadProblem)                                                           \
  X(Clp_setLogLevel)                                                           \
  X(Clp_setPerturbation)                                                       \
  X(Clp_setMaximumSeconds)                                                     \
  X(Clp_crash)                                                                 \
  X(Clp_statusArray)                                                           \
  X(Clp_copyinStatus)                                                          \
  X(Clp_dual)                                                                  \
  X(Clp_isProvenOptimal)                                                       \
  X(Clp_isProvenPrimalInfeasible)                                              \
  X(Clp_getColSolution)                                                        \
  X(Clp_objectiveValue)                                                        \
  X(Clp_deleteModel)

typedef struct Cbc {
#define CBC_FIELD(f) __typeof__(f) *f;
  CBC_FUNCTIONS(CBC_FIELD)
#undef CBC_FIELD
} Cbc;

static Cbc cbc;
static bool cbcLoaded;
static char cbcError[sizeof(((DtensorDiag *)0)->message)];
static pthread_once_t cbcOnce = PTHREAD_ONCE_INIT;

static void loadCbc(void) {
  static const char *const names[] = {
#define CBC_NAME(f) #f,
      CBC_FUNCTIONS(CBC_NAME)
#undef CBC_NAME
  };
  enum { N = sizeof(names) / sizeof(names[0]) };
  void *symbols[N];
  DtensorDiag diag;
  if (!dtLoadSymbols(DTENSOR_CBC_SONAME, names, N, symbols, &diag)) {
    snprintf(cbcError, sizeof(cbcError), "%s", diag.message);
    return;
  }
  int i = 0;
#define CBC_SET(f) cbc.f = (__typeof__(cbc.f))(uintptr_t)symbols[i++];
  CBC_FUNCTIONS(CBC_SET)
#undef CBC_SET
  cbcLoaded = true;
}

/* The start made whole: an LP with its columns fixed at their values
 * and CLP's presolve on (the fixed columns fold away). Its value per
 * column in `x`, its objective in `*objective`; false when it does not
 * fit this program, or leaves an integer column out. */
static bool completeStart(const DtIlp *ilp, const CoinBigIndex *start,
                          const int *index, const double *value,
                          const double *rowLb, const double *rowUb,
                          double seconds, double *x, double *objective) {
  int nc = ilp->numCols;
  double *lb = malloc(sizeof(double) * ((size_t)nc + 1));
  double *ub = malloc(sizeof(double) * ((size_t)nc + 1));
  Cbc_Model *m = lb && ub ? cbc.Cbc_newModel() : NULL;
  bool ok = m != NULL;
  if (ok) {
    memcpy(lb, ilp->colLb, sizeof(double) * (size_t)nc);
    memcpy(ub, ilp->colUb, sizeof(double) * (size_t)nc);
    for (int k = 0; k < ilp->numStart && ok; ++k) {
      int c = ilp->startCols[k];
      double v = ilp->startVals[k];
      /* Out of its column's bounds (a candidate forbidden since): not a
       * start of this program. */
      ok = v >= lb[c] && v <= ub[c];
      lb[c] = ub[c] = v;
    }
    for (int c = 0; c < nc && ok; ++c)
      ok = !ilp->integer[c] || lb[c] == ub[c];
  }
  if (ok) {
    cbc.Cbc_loadProblem(m, nc, ilp->numRows, start, index, value, lb, ub,
                        ilp->obj, rowLb, rowUb);
    cbc.Cbc_setObjSense(m, 1.0);
    cbc.Cbc_setLogLevel(m, 0);
    cbc.Cbc_setMaximumSeconds(m, seconds);
    cbc.Cbc_solve(m);
    ok = cbc.Cbc_isProvenOptimal(m);
  }
  if (ok) {
    memcpy(x, cbc.Cbc_getColSolution(m), sizeof(double) * (size_t)nc);
    *objective = cbc.Cbc_getObjValue(m);
  }
  if (m)
    cbc.Cbc_deleteModel(m);
  free(lb);
  free(ub);
  return ok;
}

/* What CBC's search ended with, written by the process that ran it. */
typedef struct Search {
  int done; /* 0: killed at the deadline before it ended */
  int hasBest, optimal, infeasible, secondsLimit, solutionLimit;
  int status, secondary;
  double objective, bound;
  double x[]; /* the best solution, a value per column */
} Search;

static void searchHere(Cbc_Model *m, int nc, Search *s) {
  cbc.Cbc_solve(m);
  const double *best = cbc.Cbc_bestSolution(m);
  if (best) {
    memcpy(s->x, best, sizeof(double) * (size_t)nc);
    s->objective = cbc.Cbc_getObjValue(m);
  }
  s->hasBest = best != NULL;
  s->bound = cbc.Cbc_getBestPossibleObjValue(m);
  s->optimal = cbc.Cbc_isProvenOptimal(m);
  s->infeasible = cbc.Cbc_isProvenInfeasible(m);
  s->secondsLimit = cbc.Cbc_isSecondsLimitReached(m);
  s->solutionLimit = cbc.Cbc_isSolutionLimitReached(m);
  s->status = cbc.Cbc_status(m);
  s->secondary = cbc.Cbc_secondaryStatus(m);
  __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
}

/* CBC's search, in a child process killed at `deadline` (monotonic
 * seconds): CBC checks its limit between nodes, not within its root's
 * work (on solver-test's chain of 3000 picks CBC given 29 s ran 40 s),
 * so the limit holds only from outside. Its answer comes back through a
 * shared mapping (NULL: out of memory); where no process can be made,
 * the search runs here. The caller unmaps `*size` bytes. */
static Search *search(Cbc_Model *m, int nc, double deadline, size_t *size) {
  *size = sizeof(Search) + sizeof(double) * ((size_t)nc + 1);
  Search *s = mmap(NULL, *size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED)
    return NULL;
  pid_t pid = fork();
  if (pid == 0) {
    searchHere(m, nc, s);
    _exit(0);
  }
  if (pid < 0) {
    searchHere(m, nc, s);
    return s;
  }
  for (;;) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR))
      break;
    if (dtMonotonicSeconds() >= deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
      break;
    }
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
  }
  if (!__atomic_load_n(&s->done, __ATOMIC_ACQUIRE))
    memset(s, 0, sizeof(Search)); /* killed: none found, none proven */
  return s;
}

typedef enum RootLp {
  LP_INTEGRAL,
  LP_FRACTIONAL,
  LP_INFEASIBLE,
  LP_STOPPED
} RootLp;

/* The program's LP relaxation by CLP's dual simplex within `seconds`
 * (which CLP checks as it goes; CBC does not check its limit within its
 * own root LP: on the 2-layer Adam step's full program on 2x4, 100 000
 * rows by 177 000 columns, that LP took 44-63 s and a 59 s limit ran to
 * 62-65 s). Integral at its optimum (as on most of automatic sharding's
 * programs: transports per user), it is the integer program's optimum,
 * in `x` and `*objective`, and CBC is not needed. CLP's perturbation is
 * on from the start (CBC's setting: with CLP's default, perturbing once
 * it finds itself stalled, that LP was not solved in 150 s), and a crash
 * basis first (bounds flipped by simple pivots: 12-13 s and 28 000-31 000
 * iterations to the optimum, where from the slack basis it took 48-63 s
 * and 66 000; 2026-12-07). A basis kept from a program of the same
 * matrix (dtIlpUseBasis) is the start instead: why=true's programs, each
 * with one candidate forbidden, on that step took 0.15-9 s from the
 * answer's basis where the crash took 13 s (one run each of 8). */
static RootLp rootLp(const DtIlp *ilp, const CoinBigIndex *start,
                     const int *index, const double *value, const double *rowLb,
                     const double *rowUb, double seconds, double *x,
                     double *objective) {
  Clp_Simplex *m = cbc.Clp_newModel();
  if (!m)
    return LP_STOPPED;
  int nc = ilp->numCols;
  cbc.Clp_loadProblem(m, nc, ilp->numRows, start, index, value, ilp->colLb,
                      ilp->colUb, ilp->obj, rowLb, rowUb);
  cbc.Clp_setLogLevel(m, 0);
  cbc.Clp_setPerturbation(m, 50);
  cbc.Clp_setMaximumSeconds(m, seconds);
  DtIlpBasis *kept = ilp->basis;
  int nr = ilp->numRows;
  /* The matrix, column by column (its shape and every entry), when a
   * basis is kept. */
  uint64_t matrix = 0;
  if (kept) {
    matrix = dtHashMix(dtHashMix(11, (uint64_t)nc), (uint64_t)nr);
    matrix = dtHashMix(matrix, dtHashBytes(start, sizeof(*start) * (size_t)nc));
    matrix =
        dtHashMix(matrix, dtHashBytes(index, sizeof(int) * ilp->numEntries));
    matrix =
        dtHashMix(matrix, dtHashBytes(value, sizeof(double) * ilp->numEntries));
  }
  if (kept && kept->status && kept->matrix == matrix && kept->numCols == nc &&
      kept->numRows == nr)
    cbc.Clp_copyinStatus(m, kept->status);
  else
    cbc.Clp_crash(m, 1e3, 1);
  cbc.Clp_dual(m, 0);
  RootLp r = LP_STOPPED;
  if (cbc.Clp_isProvenPrimalInfeasible(m))
    r = LP_INFEASIBLE;
  else if (cbc.Clp_isProvenOptimal(m)) {
    unsigned char *status =
        kept && !kept->frozen
            ? realloc(kept->status, (size_t)nc + (size_t)nr + 1)
            : NULL;
    if (status) {
      memcpy(status, cbc.Clp_statusArray(m), (size_t)nc + (size_t)nr);
      *kept = (DtIlpBasis){matrix, nc, nr, status, false};
    }
    const double *lp = cbc.Clp_getColSolution(m);
    r = LP_INTEGRAL;
    for (int c = 0; c < nc; ++c) {
      x[c] = lp[c];
      if (ilp->integer[c]) {
        x[c] = round(lp[c]);
        if (fabs(lp[c] - x[c]) > 1e-6)
          r = LP_FRACTIONAL;
      }
    }
    *objective = cbc.Clp_objectiveValue(m);
  }
  cbc.Clp_deleteModel(m);
  return r;
}

void dtIlpSolveCbc(DtIlp *ilp, double seconds, DtIlpResult *out) {
  double t0 = dtMonotonicSeconds();
  pthread_once(&cbcOnce, loadCbc);
  if (!cbcLoaded) {
    /* Cut at the result's message size. */
    size_t n = strlen(cbcError);
    if (n >= sizeof(out->message))
      n = sizeof(out->message) - 1;
    memcpy(out->message, cbcError, n);
    out->message[n] = 0;
    return;
  }
  /* CBC loads columns: the rows transposed. */
  int nc = ilp->numCols, nr = ilp->numRows;
  size_t n = ilp->numEntries;
  CoinBigIndex *start = calloc((size_t)nc + 1, sizeof(CoinBigIndex));
  int *index = malloc(sizeof(int) * (n + 1));
  double *value = malloc(sizeof(double) * (n + 1));
  double *rowLb = malloc(sizeof(double) * ((size_t)nr + 1));
  double *rowUb = malloc(sizeof(double) * ((size_t)nr + 1));
  double *lpX = malloc(sizeof(double) * ((size_t)nc + 1));
  Cbc_Model *m = cbc.Cbc_newModel();
  if (!start || !index || !value || !rowLb || !rowUb || !lpX || !m) {
    snprintf(out->message, sizeof(out->message), "out of memory");
    goto done;
  }
  for (size_t k = 0; k < n; ++k)
    ++start[ilp->entryCol[k] + 1];
  for (int c = 0; c < nc; ++c)
    start[c + 1] += start[c];
  for (int r = 0; r < nr; ++r) {
    /* CBC's infinity is DBL_MAX; IEEE infinities work as well. */
    rowLb[r] = ilp->rowLb[r];
    rowUb[r] = ilp->rowUb[r];
    for (int k = ilp->rowStart[r]; k < ilp->rowStart[r + 1]; ++k) {
      CoinBigIndex at = start[ilp->entryCol[k]]++;
      index[at] = r;
      value[at] = ilp->entryVal[k];
    }
  }
  for (int c = nc; c > 0; --c)
    start[c] = start[c - 1];
  start[0] = 0;
  /* A start is completed here (and given to CBC's search as a cutoff
   * below): CBC given it as a MIP start completes it itself without
   * presolve, a root LP's work (1.1 s of the 24-block GPT forward's 2.0 s
   * on 2x4, where the root LP took 0.8 s). */
  double startCost = INFINITY;
  if (ilp->numStart > 0 &&
      !completeStart(ilp, start, index, value, rowLb, rowUb,
                     fmax(seconds, 10.0), ilp->solution, &startCost))
    startCost = INFINITY;
  out->startObjective = startCost;
  /* Then the LP relaxation, within what is left of the limit. */
  double lpCost = NAN, lpStart = dtMonotonicSeconds();
  RootLp lp =
      rootLp(ilp, start, index, value, rowLb, rowUb,
             fmax(seconds - (dtMonotonicSeconds() - t0), 0.01), lpX, &lpCost);
  double lpSeconds = dtMonotonicSeconds() - lpStart;
  if (lp == LP_INTEGRAL || lp == LP_INFEASIBLE) {
    out->status = lp == LP_INFEASIBLE ? DT_ILP_INFEASIBLE : DT_ILP_OPTIMAL;
    if (lp == LP_INTEGRAL) {
      memcpy(ilp->solution, lpX, sizeof(double) * (size_t)nc);
      out->objective = out->bound = lpCost;
    }
    goto done;
  }
  /* Stopped, or fractional with too little time left for CBC, whose
   * search solves the LP again first, from the slack basis and unchecked
   * by its limit, and does its root's work past it: 4-10 times the time
   * the LP took here from the crash (on the Adam step on 2x4 42-49 s
   * against 12-13 s; on solver-test's time-limited chain CBC given 29 s
   * ran 40 s, given 14.7 s 22.7 s, after an LP of 0.7-1.0 s here): the
   * start, if any, with the LP's bound when there is one. Otherwise CBC
   * gets what is left less ten times the LP's time. */
  double left = seconds - (dtMonotonicSeconds() - t0);
  if (lp == LP_STOPPED || left < 12.0 * lpSeconds) {
    out->bound = lp == LP_FRACTIONAL ? lpCost : NAN;
    out->status = DT_ILP_NO_SOLUTION;
    if (startCost < INFINITY) {
      out->objective = startCost;
      out->status = DT_ILP_FEASIBLE;
    }
    goto done;
  }
  cbc.Cbc_loadProblem(m, nc, nr, start, index, value, ilp->colLb, ilp->colUb,
                      ilp->obj, rowLb, rowUb);
  for (int c = 0; c < nc; ++c)
    if (ilp->integer[c])
      cbc.Cbc_setInteger(m, c);
  cbc.Cbc_setObjSense(m, 1.0);
  cbc.Cbc_setLogLevel(m, 0);
  cbc.Cbc_setMaximumSeconds(m, left - 10.0 * lpSeconds);
  /* No presolve of the root LP: automatic sharding's programs (transport
   * columns per edge, equality rows) are ones CLP's presolve works on
   * long and shrinks little. The 24-block GPT forward on 2x2: 3.5 s to
   * the optimum with it, 0.9 s without; the 2-layer Adam step on meshes
   * 2 and 4: 0.5-0.6 s, 0.2-0.3 s; the same plans on every line of
   * bench/autoshard (2026-12-06). */
  cbc.Cbc_setParameter(m, "presolve", "off");
  /* No cuts either: on these programs CBC's cut generators (Gomory's
   * rows of ~1 200 entries) moved the root bound a little and made every
   * node's LP slow. The 24-block GPT forward on 2x4: 31.5 s to the same
   * optimum with them, 9.4-9.6 s without; the 2-layer Adam step on 2x4 at
   * a 60 s limit: 804.2 us found with them, 801.5 without, on 2x2 the
   * same (2026-12-07, docs/autoshard.md). */
  cbc.Cbc_setParameter(m, "cuts", "off");
  /* Nor CBC's preprocessing of the integer program (CglPreProcess: its
   * cliques and SOS): with the transports per user of a value
   * (PropagateAuto.c) the root LP is integral on these programs, and the
   * preprocessed copy made CBC's heuristics spend 20 s finding what the LP
   * had (the 96-block GPT forward on 2x4: 21.5 s to the optimum with it,
   * 1.1 s without; 24 blocks 2.6 s, 2.1 s; 2026-12-07). */
  cbc.Cbc_setParameter(m, "preprocess", "off");
  /* Nor its feasibility pump: one pass of it took 57 s of the 2-layer
   * Adam step's full program on 2x4 under 1416729 bytes (past the time
   * limit, which it does not check within a pass), and 33 s to a first
   * plan of a memory round where a dive found one in 1.5 s; the 24-block
   * forward on 2x2 0.95 -> 0.60 s (2026-12-07). */
  cbc.Cbc_setParameter(m, "feasibilityPump", "off");
  /* The start's cost a hair above, so that it or one as cheap is still
   * found; when none is, it is the answer. */
  if (startCost < INFINITY)
    cbc.Cbc_setCutoff(m, startCost + 1e-9 * fmax(1.0, fabs(startCost)));
  else if (ilp->numStart > 0)
    cbc.Cbc_setMIPStartI(m, ilp->numStart, ilp->startCols, ilp->startVals);
  if (ilp->stopAtFirst)
    cbc.Cbc_setMaximumSolutions(m, 1);
  size_t searchSize = 0;
  Search *found = search(m, nc, t0 + seconds, &searchSize);
  if (!found) {
    snprintf(out->message, sizeof(out->message), "out of memory");
    goto done;
  }
  bool killed = !found->done;
  if (found->hasBest) {
    memcpy(ilp->solution, found->x, sizeof(double) * (size_t)nc);
    out->objective = found->objective;
  }
  /* CLP's LP bound where CBC's search proved less (or was stopped). */
  out->bound = killed ? lpCost : fmax(found->bound, lpCost);
  if (!found->hasBest && startCost < INFINITY &&
      (found->infeasible || found->secondsLimit || killed)) {
    /* None within the cutoff: the start (in ilp->solution), optimal when
     * that was proven. */
    out->objective = startCost;
    out->status = DT_ILP_FEASIBLE;
    if (found->infeasible) {
      out->status = DT_ILP_OPTIMAL;
      out->bound = startCost;
    }
  } else if (found->optimal && found->hasBest) {
    out->status = DT_ILP_OPTIMAL;
    out->bound = out->objective;
  } else if (found->infeasible) {
    out->status = DT_ILP_INFEASIBLE;
  } else if (found->secondsLimit || killed) {
    out->status = found->hasBest ? DT_ILP_FEASIBLE : DT_ILP_NO_SOLUTION;
  } else if (found->solutionLimit && found->hasBest) {
    out->status = DT_ILP_FEASIBLE;
  } else {
    snprintf(out->message, sizeof(out->message),
             "CBC stopped (status %d, secondary status %d)", found->status,
             found->secondary);
  }
  munmap(found, searchSize);
done:
  if (m)
    cbc.Cbc_deleteModel(m);
  free(start);
  free(index);
  free(value);
  free(rowLb);
  free(rowUb);
  free(lpX);
}
#else
void dtIlpSolveCbc(DtIlp *ilp, double seconds, DtIlpResult *out) {
  (void)ilp;
  (void)seconds;
  snprintf(out->message, sizeof(out->message),
           "dtensor-mlir was built without CBC");
}
#endif
