/* The mixed-integer program (Ilp.h): columns and rows kept here in plain
 * arrays, handed to a backend at each solve. */
#include "Ilp.h"

#include "Support/Support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

DtIlp *dtIlpCreate(void) {
  DtIlp *ilp = calloc(1, sizeof(DtIlp));
  if (!ilp)
    return NULL;
  ilp->rowStart = calloc(1, sizeof(int));
  if (!ilp->rowStart) {
    free(ilp);
    return NULL;
  }
  return ilp;
}

void dtIlpDestroy(DtIlp *ilp) {
  if (!ilp)
    return;
  free(ilp->colLb);
  free(ilp->colUb);
  free(ilp->obj);
  free(ilp->integer);
  free(ilp->rowLb);
  free(ilp->rowUb);
  free(ilp->rowStart);
  free(ilp->entryCol);
  free(ilp->entryVal);
  free(ilp->solution);
  free(ilp->startCols);
  free(ilp->startVals);
  free(ilp);
}

/* Room for one more entry in each of `count` arrays of `sizes` bytes per
 * element (`extra` more elements each than the capacity). */
static bool reserve(int count, int *cap, void **arrays[], const size_t *sizes,
                    int numArrays, int extra) {
  if (count < *cap)
    return true;
  int n = *cap ? 2 * *cap : 256;
  for (int i = 0; i < numArrays; ++i) {
    void *q = realloc(*arrays[i], sizes[i] * (size_t)(n + extra));
    if (!q)
      return false;
    *arrays[i] = q;
  }
  *cap = n;
  return true;
}

int dtIlpAddCol(DtIlp *ilp, double lb, double ub, double obj, bool integer) {
  void **arrays[] = {(void **)&ilp->colLb, (void **)&ilp->colUb,
                     (void **)&ilp->obj, (void **)&ilp->integer};
  const size_t sizes[] = {sizeof(double), sizeof(double), sizeof(double),
                          sizeof(bool)};
  if (!reserve(ilp->numCols, &ilp->capCols, arrays, sizes, 4, 0))
    return -1;
  int c = ilp->numCols++;
  ilp->colLb[c] = lb;
  ilp->colUb[c] = ub;
  ilp->obj[c] = obj;
  ilp->integer[c] = integer;
  return c;
}

bool dtIlpAddRow(DtIlp *ilp, int n, const int *cols, const double *vals,
                 double lb, double ub) {
  /* rowStart has one more element than rows. */
  void **arrays[] = {(void **)&ilp->rowLb, (void **)&ilp->rowUb,
                     (void **)&ilp->rowStart};
  const size_t sizes[] = {sizeof(double), sizeof(double), sizeof(int)};
  if (!reserve(ilp->numRows, &ilp->capRows, arrays, sizes, 3, 1))
    return false;
  size_t capBefore = ilp->capEntries;
  if (!dtArrayAppend((void **)&ilp->entryCol, &ilp->numEntries,
                     &ilp->capEntries, sizeof(int), cols, (size_t)n))
    return false;
  if (ilp->capEntries != capBefore || !ilp->entryVal) {
    double *v = realloc(ilp->entryVal, sizeof(double) * ilp->capEntries);
    if (!v) {
      ilp->numEntries -= (size_t)n;
      return false;
    }
    ilp->entryVal = v;
  }
  memcpy(ilp->entryVal + (ilp->numEntries - (size_t)n), vals,
         sizeof(double) * (size_t)n);
  int r = ilp->numRows++;
  ilp->rowLb[r] = lb;
  ilp->rowUb[r] = ub;
  ilp->rowStart[r + 1] = (int)ilp->numEntries;
  return true;
}

int dtIlpNumCols(const DtIlp *ilp) { return ilp->numCols; }

int dtIlpNumRows(const DtIlp *ilp) { return ilp->numRows; }

bool dtIlpSetStart(DtIlp *ilp, int n, const int *cols, const double *vals) {
  int *c = realloc(ilp->startCols, sizeof(int) * (size_t)(n + 1));
  if (c)
    ilp->startCols = c;
  double *v = realloc(ilp->startVals, sizeof(double) * (size_t)(n + 1));
  if (v)
    ilp->startVals = v;
  if (!c || !v)
    return false;
  memcpy(c, cols, sizeof(int) * (size_t)n);
  memcpy(v, vals, sizeof(double) * (size_t)n);
  ilp->numStart = n;
  return true;
}

void dtIlpStopAtFirst(DtIlp *ilp, bool stop) { ilp->stopAtFirst = stop; }

void dtIlpUseBasis(DtIlp *ilp, DtIlpBasis *basis) { ilp->basis = basis; }

void dtIlpBasisFree(DtIlpBasis *basis) {
  free(basis->status);
  *basis = (DtIlpBasis){0};
}

void dtIlpSetColBounds(DtIlp *ilp, int col, double lb, double ub) {
  ilp->colLb[col] = lb;
  ilp->colUb[col] = ub;
}

double dtIlpColUpper(const DtIlp *ilp, int col) { return ilp->colUb[col]; }

bool dtIlpHasSolver(DtIlpSolver solver) {
  switch (solver) {
  case DT_ILP_GLPK:
#ifdef DTENSOR_HAVE_GLPK
    return true;
#else
    return false;
#endif
  case DT_ILP_CBC:
#ifdef DTENSOR_HAVE_CBC
    return true;
#else
    return false;
#endif
  case DT_ILP_DEFAULT:
    return dtIlpHasSolver(DT_ILP_CBC) || dtIlpHasSolver(DT_ILP_GLPK);
  }
  return false;
}

static DtIlpSolver resolve(DtIlpSolver solver) {
  if (solver != DT_ILP_DEFAULT)
    return solver;
  return dtIlpHasSolver(DT_ILP_CBC) ? DT_ILP_CBC : DT_ILP_GLPK;
}

const char *dtIlpSolverName(DtIlpSolver solver) {
  return resolve(solver) == DT_ILP_CBC ? "cbc" : "glpk";
}

bool dtIlpSolve(DtIlp *ilp, DtIlpSolver solver, double seconds,
                DtIlpResult *out) {
  memset(out, 0, sizeof(*out));
  out->status = DT_ILP_ERROR;
  out->objective = out->bound = NAN;
  out->startObjective = INFINITY;
  solver = resolve(solver);
  if (!dtIlpHasSolver(solver)) {
    snprintf(out->message, sizeof(out->message),
             "dtensor-mlir was built without %s", dtIlpSolverName(solver));
    return false;
  }
  double *x =
      realloc(ilp->solution, sizeof(double) * (size_t)(ilp->numCols + 1));
  if (!x) {
    snprintf(out->message, sizeof(out->message), "out of memory");
    return true;
  }
  ilp->solution = x;
  double t0 = dtMonotonicSeconds();
  if (ilp->numCols == 0) {
    /* Nothing left to choose (a solver refuses an empty program). */
    out->status = DT_ILP_OPTIMAL;
    out->objective = out->bound = 0.0;
    out->x = ilp->solution;
    return true;
  }
  if (solver == DT_ILP_CBC)
    dtIlpSolveCbc(ilp, seconds, out);
  else
    dtIlpSolveGlpk(ilp, seconds, out);
  out->seconds = dtMonotonicSeconds() - t0;
  out->x = ilp->solution;
  return true;
}
