/* COIN-OR CBC's branch and cut for Ilp.h, through its C interface
 * (Debian's coinor-libcbc-dev). The only file that includes CBC. */
#include "Ilp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DTENSOR_HAVE_CBC
#include <coin/Cbc_C_Interface.h>

void dtIlpSolveCbc(DtIlp *ilp, double seconds, DtIlpResult *out) {
  /* CBC loads columns: the rows transposed. */
  int nc = ilp->numCols, nr = ilp->numRows;
  size_t n = ilp->numEntries;
  CoinBigIndex *start = calloc((size_t)nc + 1, sizeof(CoinBigIndex));
  int *index = malloc(sizeof(int) * (n + 1));
  double *value = malloc(sizeof(double) * (n + 1));
  double *rowLb = malloc(sizeof(double) * ((size_t)nr + 1));
  double *rowUb = malloc(sizeof(double) * ((size_t)nr + 1));
  Cbc_Model *m = Cbc_newModel();
  if (!start || !index || !value || !rowLb || !rowUb || !m) {
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
  Cbc_loadProblem(m, nc, nr, start, index, value, ilp->colLb, ilp->colUb,
                  ilp->obj, rowLb, rowUb);
  for (int c = 0; c < nc; ++c)
    if (ilp->integer[c])
      Cbc_setInteger(m, c);
  Cbc_setObjSense(m, 1.0);
  Cbc_setLogLevel(m, 0);
  Cbc_setMaximumSeconds(m, seconds);
  /* No presolve of the root LP: automatic sharding's programs (transport
   * columns per edge, equality rows) are ones CLP's presolve works on
   * long and shrinks little. The 24-block GPT forward on 2x2: 3.5 s to
   * the optimum with it, 0.9 s without; the 2-layer Adam step on meshes
   * 2 and 4: 0.5-0.6 s, 0.2-0.3 s; the same plans on every line of
   * bench/autoshard (2026-12-06). */
  Cbc_setParameter(m, "presolve", "off");
  if (ilp->numStart > 0)
    Cbc_setMIPStartI(m, ilp->numStart, ilp->startCols, ilp->startVals);
  Cbc_solve(m);
  const double *best = Cbc_bestSolution(m);
  if (best) {
    memcpy(ilp->solution, best, sizeof(double) * (size_t)nc);
    out->objective = Cbc_getObjValue(m);
  }
  out->bound = Cbc_getBestPossibleObjValue(m);
  if (Cbc_isProvenOptimal(m) && best) {
    out->status = DT_ILP_OPTIMAL;
    out->bound = out->objective;
  } else if (Cbc_isProvenInfeasible(m)) {
    out->status = DT_ILP_INFEASIBLE;
  } else if (Cbc_isSecondsLimitReached(m)) {
    out->status = best ? DT_ILP_FEASIBLE : DT_ILP_NO_SOLUTION;
  } else {
    snprintf(out->message, sizeof(out->message),
             "CBC stopped (status %d, secondary status %d)", Cbc_status(m),
             Cbc_secondaryStatus(m));
  }
done:
  if (m)
    Cbc_deleteModel(m);
  free(start);
  free(index);
  free(value);
  free(rowLb);
  free(rowUb);
}
#else
void dtIlpSolveCbc(DtIlp *ilp, double seconds, DtIlpResult *out) {
  (void)ilp;
  (void)seconds;
  snprintf(out->message, sizeof(out->message),
           "dtensor-mlir was built without CBC");
}
#endif
