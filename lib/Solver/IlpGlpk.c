/* GLPK's branch and cut for Ilp.h (Debian's libglpk-dev). The only file
 * that includes glpk.h. */
#include "Ilp.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DTENSOR_HAVE_GLPK
#include <glpk.h>

/* The best bound of the open nodes, followed during the search. */
typedef struct Track {
  double bound;
} Track;

static void callback(glp_tree *tree, void *info) {
  Track *t = info;
  if (glp_ios_reason(tree) != GLP_ISELECT)
    return;
  int best = glp_ios_best_node(tree);
  if (best)
    t->bound = glp_ios_node_bound(tree, best);
}

/* GLPK prints through this hook; nothing of it goes to the user. */
static int quiet(void *info, const char *s) {
  (void)info;
  (void)s;
  return 1;
}

static int boundKind(double lb, double ub) {
  if (isinf(lb) && isinf(ub))
    return GLP_FR;
  if (isinf(ub))
    return GLP_LO;
  if (isinf(lb))
    return GLP_UP;
  return lb == ub ? GLP_FX : GLP_DB;
}

void dtIlpSolveGlpk(DtIlp *ilp, double seconds, DtIlpResult *out) {
  glp_term_hook(quiet, NULL);
  glp_prob *lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  if (ilp->numCols)
    glp_add_cols(lp, ilp->numCols);
  if (ilp->numRows)
    glp_add_rows(lp, ilp->numRows);
  for (int c = 0; c < ilp->numCols; ++c) {
    glp_set_col_bnds(lp, c + 1, boundKind(ilp->colLb[c], ilp->colUb[c]),
                     isinf(ilp->colLb[c]) ? 0.0 : ilp->colLb[c],
                     isinf(ilp->colUb[c]) ? 0.0 : ilp->colUb[c]);
    glp_set_obj_coef(lp, c + 1, ilp->obj[c]);
    if (ilp->integer[c])
      glp_set_col_kind(lp, c + 1,
                       ilp->colLb[c] == 0.0 && ilp->colUb[c] == 1.0 ? GLP_BV
                                                                    : GLP_IV);
  }
  /* GLPK's arrays count from 1. */
  size_t n = ilp->numEntries;
  int *ia = malloc(sizeof(int) * (n + 1)), *ja = malloc(sizeof(int) * (n + 1));
  double *ar = malloc(sizeof(double) * (n + 1));
  if (!ia || !ja || !ar) {
    free(ia);
    free(ja);
    free(ar);
    glp_delete_prob(lp);
    snprintf(out->message, sizeof(out->message), "out of memory");
    return;
  }
  for (int r = 0; r < ilp->numRows; ++r) {
    glp_set_row_bnds(lp, r + 1, boundKind(ilp->rowLb[r], ilp->rowUb[r]),
                     isinf(ilp->rowLb[r]) ? 0.0 : ilp->rowLb[r],
                     isinf(ilp->rowUb[r]) ? 0.0 : ilp->rowUb[r]);
    for (int k = ilp->rowStart[r]; k < ilp->rowStart[r + 1]; ++k) {
      ia[k + 1] = r + 1;
      ja[k + 1] = ilp->entryCol[k] + 1;
      ar[k + 1] = ilp->entryVal[k];
    }
  }
  glp_load_matrix(lp, (int)n, ia, ja, ar);
  free(ia);
  free(ja);
  free(ar);
  Track track = {-INFINITY};
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  parm.tm_lim = seconds >= 2e6 ? INT32_MAX : (int)(seconds * 1000.0);
  parm.cb_func = callback;
  parm.cb_info = &track;
  int rc = glp_intopt(lp, &parm);
  int status = glp_mip_status(lp);
  if (status == GLP_OPT || status == GLP_FEAS) {
    for (int c = 0; c < ilp->numCols; ++c)
      ilp->solution[c] = glp_mip_col_val(lp, c + 1);
    out->objective = glp_mip_obj_val(lp);
  }
  if (status == GLP_OPT && rc == 0) {
    out->status = DT_ILP_OPTIMAL;
    out->bound = out->objective;
  } else if (status == GLP_NOFEAS || rc == GLP_ENOPFS || rc == GLP_ENODFS) {
    out->status = DT_ILP_INFEASIBLE;
  } else if (rc == GLP_ETMLIM) {
    out->status = status == GLP_FEAS || status == GLP_OPT ? DT_ILP_FEASIBLE
                                                          : DT_ILP_NO_SOLUTION;
    out->bound = track.bound;
  } else {
    snprintf(out->message, sizeof(out->message),
             "GLPK's glp_intopt failed (code %d)", rc);
  }
  glp_delete_prob(lp);
  glp_term_hook(NULL, NULL);
}
#else
void dtIlpSolveGlpk(DtIlp *ilp, double seconds, DtIlpResult *out) {
  (void)ilp;
  (void)seconds;
  snprintf(out->message, sizeof(out->message),
           "dtensor-mlir was built without GLPK");
}
#endif
