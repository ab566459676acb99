/* A mixed-integer linear program and the solvers that take it (Ilp.c:
 * the model; IlpGlpk.c and IlpCbc.c: GLPK's and COIN-OR CBC's C APIs,
 * each compiled when the build found it). Plain C, no MLIR: automatic
 * sharding (lib/Transforms/Propagate/PropagateAuto.c) builds its program
 * here. Minimizes; columns are continuous or integer, rows are ranges. */
#ifndef DTENSOR_LIB_SOLVER_ILP_H
#define DTENSOR_LIB_SOLVER_ILP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct DtIlp DtIlp;

typedef enum DtIlpSolver {
  DT_ILP_DEFAULT = 0, /* the better of those built (DT_ILP_CBC if built) */
  DT_ILP_GLPK,
  DT_ILP_CBC,
} DtIlpSolver;

typedef enum DtIlpStatus {
  DT_ILP_OPTIMAL,     /* proven optimal */
  DT_ILP_FEASIBLE,    /* stopped at the time limit with a solution */
  DT_ILP_INFEASIBLE,  /* proven to have no solution */
  DT_ILP_NO_SOLUTION, /* stopped at the time limit without one */
  DT_ILP_ERROR,       /* the solver failed (message in `message`) */
} DtIlpStatus;

typedef struct DtIlpResult {
  DtIlpStatus status;
  double objective;      /* of the solution found */
  double bound;          /* the best lower bound proven */
  double seconds;        /* the solver's wall time */
  double startObjective; /* the start's, completed (INFINITY: none, or not
                            completed: GLPK takes no start) */
  const double *x;       /* the solution, a value per column (owned by the ILP,
                            valid until the next solve or destroy) */
  char message[160];
} DtIlpResult;

/// A new, empty program; NULL when out of memory. Destroy with dtIlpDestroy.
DtIlp *dtIlpCreate(void);
void dtIlpDestroy(DtIlp *ilp);

/// Adds a column with bounds [lb, ub] (±INFINITY for none), objective
/// coefficient `obj`; integer when `integer`. Returns its index, -1 when
/// out of memory.
int dtIlpAddCol(DtIlp *ilp, double lb, double ub, double obj, bool integer);

/// Adds the row lb <= sum(vals[k] * x[cols[k]]) <= ub (±INFINITY for an
/// open side). False when out of memory.
bool dtIlpAddRow(DtIlp *ilp, int n, const int *cols, const double *vals,
                 double lb, double ub);

/// The number of columns and rows so far.
int dtIlpNumCols(const DtIlp *ilp);
int dtIlpNumRows(const DtIlp *ilp);

/// A known solution for `n` of the columns (the integer ones) that the
/// solver may start from: CBC does, GLPK ignores it. False when out of
/// memory.
bool dtIlpSetStart(DtIlp *ilp, int n, const int *cols, const double *vals);

/// Stop at the first solution found (the status then DT_ILP_FEASIBLE
/// unless that proved optimal): CBC does, GLPK ignores it.
void dtIlpStopAtFirst(DtIlp *ilp, bool stop);

/// An LP basis kept from one program to the next (CBC's backend; GLPK's
/// ignores it): a status per column, then per row, and the program's
/// matrix it was found for (a hash). Zeroed: none yet.
typedef struct DtIlpBasis {
  unsigned long long matrix;
  int numCols, numRows;
  unsigned char *status;
  bool frozen; /* read, not replaced: the start of several variants */
} DtIlpBasis;

/// The solves of `ilp` start their LP from `*basis` when `ilp`'s matrix is
/// the one it was found for (its bounds and costs may differ: a candidate
/// forbidden, another start), and leave their optimal basis there. The
/// caller owns `basis` (dtIlpBasisFree) and keeps it across programs.
void dtIlpUseBasis(DtIlp *ilp, DtIlpBasis *basis);
void dtIlpBasisFree(DtIlpBasis *basis);

/// Sets column `col`'s bounds (to fix or free it between solves).
void dtIlpSetColBounds(DtIlp *ilp, int col, double lb, double ub);

/// Column `col`'s upper bound.
double dtIlpColUpper(const DtIlp *ilp, int col);

/// Whether `solver` was built in (DT_ILP_DEFAULT: any).
bool dtIlpHasSolver(DtIlpSolver solver);

/// The name of `solver` ("glpk", "cbc"; the default's resolved).
const char *dtIlpSolverName(DtIlpSolver solver);

/// Solves with `solver` within `seconds` of wall time; the program may be
/// extended and solved again. False only when the solver was not built
/// (out->status DT_ILP_ERROR then too).
bool dtIlpSolve(DtIlp *ilp, DtIlpSolver solver, double seconds,
                DtIlpResult *out);

/* ---- the model, for the backends ----------------------------------------
 * Rows in compressed form: row r's entries are [rowStart[r],
 * rowStart[r+1]). */
struct DtIlp {
  int numCols, capCols;
  double *colLb, *colUb, *obj;
  bool *integer;
  int numRows, capRows;
  double *rowLb, *rowUb;
  int *rowStart; /* numRows + 1 entries */
  size_t numEntries, capEntries;
  int *entryCol;
  double *entryVal;
  double *solution;
  int numStart;
  int *startCols;
  double *startVals;
  bool stopAtFirst;
  DtIlpBasis *basis; /* not owned (dtIlpUseBasis) */
};

/// The backends: fill `out` (status, objective, bound, message) and
/// ilp->solution.
void dtIlpSolveGlpk(DtIlp *ilp, double seconds, DtIlpResult *out);
void dtIlpSolveCbc(DtIlp *ilp, double seconds, DtIlpResult *out);

#endif
