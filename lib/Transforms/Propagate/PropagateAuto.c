/* dtensor-propagate{auto=true} (dtensor-auto-shard): the whole function's
 * choice with the arguments that have no layout chosen too, as an integer
 * program solved by lib/Solver (CBC or GLPK).
 *
 * The program is the exact search's (PropagateExact.c) written for a
 * solver: a 0/1 column per candidate of every var (each op with a
 * strategy, each argument without a layout), one picked per var, each
 * costing its compute and its conversions to fixed users. For each value
 * that vars use and each layout L some user's candidate needs of it, a
 * column n (the value is converted to L: at least every user's candidates
 * that need L) and, when the value's maker is a var, a column y per
 * layout s it may make whose conversion to L costs something (y <= the
 * maker's candidates making s, sum of y >= n + those candidates - 1): one
 * conversion per distinct layout, as the model counts it. A function
 * result without a layout takes its argument's (the same dtensor.name: a
 * training step's carried state) or its value's, resolved.
 *
 * Memory: the bytes per device of the arguments and of the values ops
 * make (a value live from its op to its last user; values that only
 * initialize hold nothing) must fit the budget at every op. Rows for it
 * are added where the solution breaks it, and the program solved again,
 * until none does. */
#include "PropagateRefine.h"

#include "Solver/Ilp.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* At most this many rounds of memory rows. */
enum { kMemoryRounds = 60 };

typedef struct User {
  int k;       /* the var (its place in R->order) */
  int operand; /* the operand it needs; -1: a tie (its result 0) */
  int next;
} User;

/* A value some var uses: made by var `producer` (result `result`) or
 * fixed (-1); its users that are vars. */
typedef struct Group {
  const Info *info;
  int producer, result;
  size_t fixedNeeds;
  int numFixedNeeds;
  int firstUser;
  int firstCol, endCol; /* its n and y columns */
} Group;

typedef struct GroupSlot {
  const void *value;
  int index;
} GroupSlot;

/* A value whose bytes count: made at op `def` (-1: an argument), last
 * used at op `last` (indices in the entry block). */
typedef struct Live {
  const Info *info;
  int def, last;
  int var, result; /* its maker's var and result, or -1 (fixed bytes) */
} Live;

typedef struct Auto {
  Refine *R;
  Prop *p;
  DtIlp *ilp;
  int *firstCol; /* per var of the order */
  Group *groups;
  size_t numGroups, capGroups;
  DtTable groupIndex;
  User *users;
  size_t numUsers, capUsers;
  Live *lives;
  size_t numLives, capLives;
  int numOps;
  /* scratch: a coefficient per column, the columns touched */
  double *coef;
  bool *inRow;
  int *touched;
  int numTouched, numScratch;
  int rounds;
  double seconds;
  double constant;
} Auto;

static bool sameGroup(const void *entry, const void *key) {
  return ((const GroupSlot *)entry)->value == key;
}

static uint64_t groupHash(const void *value) {
  return dtHashMix(41, (uint64_t)(uintptr_t)value);
}

/* The place in the order of var `index`, -1 if it is not there. */
static int orderOf(const Refine *R, int index) {
  for (int k = 0; k < R->count; ++k)
    if (R->order[k] == index)
      return k;
  return -1;
}

/* The group of `value`, made on first use with its maker. */
static int groupOf(Auto *A, const Info *in) {
  Refine *R = A->R;
  MlirValue v = in->value;
  uint64_t hash = groupHash(v.ptr);
  GroupSlot *hit = dtTableFind(&A->groupIndex, hash, sameGroup, v.ptr);
  if (hit)
    return hit->index;
  Group *g = dtArrayPush((void **)&A->groups, &A->numGroups, &A->capGroups,
                         sizeof(Group));
  GroupSlot *slot = g ? dtTableInsert(&A->groupIndex, hash) : NULL;
  if (!g || !slot) {
    R->failed = true;
    return -1;
  }
  memset(g, 0, sizeof(*g));
  g->info = in;
  g->producer = -1;
  g->firstUser = -1;
  int var = dtRefineArgVarOf(R, v);
  if (var < 0 && mlirValueIsAOpResult(v)) {
    var = dtRefineVarOf(R, mlirOpResultGetOwner(v));
    g->result = (int)mlirOpResultGetResultNumber(v);
  }
  if (var >= 0)
    g->producer = orderOf(R, var);
  if (!dtRefineOtherNeeds(R, v, (MlirOperation){NULL}, -1, true,
                          &g->fixedNeeds))
    R->failed = true;
  g->numFixedNeeds = (int)(R->numShared - g->fixedNeeds);
  slot->value = v.ptr;
  slot->index = (int)(A->numGroups - 1);
  return slot->index;
}

static void addUser(Auto *A, int group, int k, int operand) {
  User *u =
      dtArrayPush((void **)&A->users, &A->numUsers, &A->capUsers, sizeof(User));
  if (!u || group < 0) {
    A->R->failed = true;
    return;
  }
  u->k = k;
  u->operand = operand;
  u->next = A->groups[group].firstUser;
  A->groups[group].firstUser = (int)(A->numUsers - 1);
}

/* What candidate `c` of the user `u` needs of its value. */
static CSpec needOf(const Auto *A, const User *u, size_t c) {
  const Var *v = &A->R->vars[A->R->order[u->k]];
  return u->operand < 0 ? v->cands[c].res[0] : v->cands[c].need[u->operand];
}

/* The layout candidate `c` of var `k` makes of result `r`. */
static CSpec madeBy(const Auto *A, int k, size_t c, int r) {
  return A->R->vars[A->R->order[k]].cands[c].res[r];
}

static double convert(Auto *A, const Info *in, CSpec from, CSpec to) {
  DtensorShardingSpec a, b;
  unpack(&from, in->rank, &a);
  unpack(&to, in->rank, &b);
  return dtPropConvertCost(A->p, in, &a, &b);
}

/* The bytes per device of a value of `in` in layout `c`. */
static double bytesOf(const Prop *p, const Info *in, CSpec c) {
  DtensorShardingSpec s;
  unpack(&c, in->rank, &s);
  MlirType t = mlirValueGetType(in->value);
  double bytes = (double)dtensorElementTypeGetSize(in->elementType);
  for (int d = 0; d < in->rank; ++d) {
    int64_t parts = 1;
    for (int i = 0; i < s.numAxes[d]; ++i)
      parts *= dtensorMeshGetAxisSize(p->mesh, s.axes[d][i]);
    bytes *= (double)dtCeilDiv(mlirShapedTypeGetDimSize(t, d), parts);
  }
  return bytes;
}

/* ---- building the program ------------------------------------------------ */

static bool addRow(Auto *A, double lb, double ub) {
  int *cols = malloc(sizeof(int) * (size_t)(A->numTouched + 1));
  double *vals = malloc(sizeof(double) * (size_t)(A->numTouched + 1));
  bool ok = cols && vals;
  int n = 0;
  for (int i = 0; ok && i < A->numTouched; ++i) {
    int c = A->touched[i];
    if (A->coef[c] != 0.0) {
      cols[n] = c;
      vals[n++] = A->coef[c];
    }
    A->coef[c] = 0.0;
    A->inRow[c] = false;
  }
  A->numTouched = 0;
  ok = ok && dtIlpAddRow(A->ilp, n, cols, vals, lb, ub);
  free(cols);
  free(vals);
  if (!ok)
    A->R->failed = true;
  return ok;
}

/* Adds `value` to column `col`'s coefficient of the row being built. */
static void term(Auto *A, int col, double value) {
  if (!A->inRow[col]) {
    A->inRow[col] = true;
    A->touched[A->numTouched++] = col;
  }
  A->coef[col] += value;
}

static bool growScratch(Auto *A) {
  int n = dtIlpNumCols(A->ilp);
  double *coef = realloc(A->coef, sizeof(double) * (size_t)(n + 1));
  if (coef)
    A->coef = coef;
  int *touched = realloc(A->touched, sizeof(int) * (size_t)(n + 1));
  if (touched)
    A->touched = touched;
  bool *inRow = realloc(A->inRow, sizeof(bool) * (size_t)(n + 1));
  if (inRow)
    A->inRow = inRow;
  if (!coef || !touched || !inRow)
    return false;
  for (int c = A->numScratch; c <= n; ++c) {
    coef[c] = 0.0;
    inRow[c] = false;
  }
  A->numScratch = n + 1;
  return true;
}

/* A column for each candidate of each var; one picked per var. */
static bool addPicks(Auto *A) {
  Refine *R = A->R;
  for (int k = 0; k < R->count; ++k) {
    const Var *v = &R->vars[R->order[k]];
    A->firstCol[k] = dtIlpNumCols(A->ilp);
    for (size_t c = 0; c < v->numCands; ++c)
      if (dtIlpAddCol(A->ilp, 0.0, 1.0, v->cands[c].fixedCost, true) < 0)
        return false;
  }
  A->firstCol[R->count] = dtIlpNumCols(A->ilp);
  if (!growScratch(A))
    return false;
  for (int k = 0; k < R->count; ++k) {
    for (int c = A->firstCol[k]; c < A->firstCol[k + 1]; ++c)
      term(A, c, 1.0);
    if (!addRow(A, 1.0, 1.0))
      return false;
  }
  return true;
}

/* The conversions of group `g`'s value to what its var users need. */
static bool addConversions(Auto *A, Group *g) {
  Refine *R = A->R;
  const Var *maker = g->producer >= 0 ? &R->vars[R->order[g->producer]] : NULL;
  CSpec fixedSource = g->info->spec;
  /* The layouts the users' candidates need (fixed users' needs are paid
   * by the maker already). */
  CSpec *targets = NULL;
  size_t numTargets = 0, capTargets = 0;
  for (int u = g->firstUser; u >= 0; u = A->users[u].next) {
    const User *us = &A->users[u];
    const Var *uv = &R->vars[R->order[us->k]];
    for (size_t c = 0; c < uv->numCands; ++c) {
      CSpec L = needOf(A, us, c);
      if (dtRefineHasCSpec(R->shared + g->fixedNeeds, (size_t)g->numFixedNeeds,
                           L) ||
          dtRefineHasCSpec(targets, numTargets, L))
        continue;
      CSpec *slot = dtArrayPush((void **)&targets, &numTargets, &capTargets,
                                sizeof(CSpec));
      if (!slot) {
        free(targets);
        return false;
      }
      *slot = L;
    }
  }
  g->firstCol = dtIlpNumCols(A->ilp);
  bool ok = true;
  for (size_t t = 0; t < numTargets && ok; ++t) {
    CSpec L = targets[t];
    /* Nothing to pay whatever the maker makes: no columns. */
    bool costly = false;
    double fixedCost = 0.0;
    if (maker)
      for (size_t c = 0; c < maker->numCands && !costly; ++c)
        costly =
            convert(A, g->info, madeBy(A, g->producer, c, g->result), L) > 0.0;
    else
      costly = (fixedCost = convert(A, g->info, fixedSource, L)) > 0.0;
    if (!costly)
      continue;
    int n = dtIlpAddCol(A->ilp, 0.0, 1.0, isinf(fixedCost) ? 0.0 : fixedCost,
                        false);
    ok = n >= 0 && growScratch(A);
    if (maker == NULL && isinf(fixedCost) && ok)
      dtIlpSetColBounds(A->ilp, n, 0.0, 0.0); /* impossible */
    /* n >= every user's candidates needing L. */
    for (int u = g->firstUser; u >= 0 && ok; u = A->users[u].next) {
      const User *us = &A->users[u];
      const Var *uv = &R->vars[R->order[us->k]];
      bool any = false;
      for (size_t c = 0; c < uv->numCands; ++c)
        if (sameCSpec(needOf(A, us, c), L)) {
          term(A, A->firstCol[us->k] + (int)c, -1.0);
          any = true;
        }
      if (any) {
        term(A, n, 1.0);
        ok = addRow(A, 0.0, INFINITY);
      }
    }
    if (!maker || !ok)
      continue;
    /* The maker's layouts: y per costly one. */
    CSpec *made = NULL;
    size_t numMade = 0, capMade = 0;
    int sumFirst = dtIlpNumCols(A->ilp);
    for (size_t c = 0; c < maker->numCands && ok; ++c) {
      CSpec s = madeBy(A, g->producer, c, g->result);
      if (dtRefineHasCSpec(made, numMade, s))
        continue;
      CSpec *slot =
          dtArrayPush((void **)&made, &numMade, &capMade, sizeof(CSpec));
      if (!slot) {
        ok = false;
        break;
      }
      *slot = s;
      double cost = convert(A, g->info, s, L);
      if (cost == 0.0)
        continue;
      if (isinf(cost)) {
        /* This maker's layout and this need never meet. */
        for (size_t e = 0; e < maker->numCands; ++e)
          if (sameCSpec(madeBy(A, g->producer, e, g->result), s))
            term(A, A->firstCol[g->producer] + (int)e, 1.0);
        term(A, n, 1.0);
        ok = addRow(A, -INFINITY, 1.0);
        continue;
      }
      int y = dtIlpAddCol(A->ilp, 0.0, 1.0, cost, false);
      ok = y >= 0 && growScratch(A);
      for (size_t e = 0; e < maker->numCands && ok; ++e)
        if (sameCSpec(madeBy(A, g->producer, e, g->result), s))
          term(A, A->firstCol[g->producer] + (int)e, -1.0);
      if (ok) {
        term(A, y, 1.0);
        ok = addRow(A, -INFINITY, 0.0);
      }
    }
    free(made);
    /* sum y >= n + (the maker's costly candidates) - 1 */
    int sumEnd = dtIlpNumCols(A->ilp);
    if (ok && sumEnd > sumFirst) {
      for (int y = sumFirst; y < sumEnd; ++y)
        term(A, y, 1.0);
      term(A, n, -1.0);
      for (size_t e = 0; e < maker->numCands; ++e) {
        double cost =
            convert(A, g->info, madeBy(A, g->producer, e, g->result), L);
        if (cost > 0.0 && !isinf(cost))
          term(A, A->firstCol[g->producer] + (int)e, -1.0);
      }
      ok = addRow(A, -1.0, INFINITY);
    }
  }
  g->endCol = dtIlpNumCols(A->ilp);
  free(targets);
  return ok;
}

/* ---- the function's results ---------------------------------------------- */

/* The vars' uses, ties and what the results chosen here cost. */
static bool collectGroups(Auto *A, MlirOperation ret) {
  Refine *R = A->R;
  Prop *p = A->p;
  for (int k = 0; k < R->count && !R->failed; ++k) {
    const Var *v = &R->vars[R->order[k]];
    for (int l = 0; l < v->numLinks; ++l)
      addUser(A, groupOf(A, v->operands[v->links[l].operand]), k,
              v->links[l].operand);
  }
  if (mlirOperationIsNull(ret))
    return !R->failed;
  for (int i = 0; i < p->numResults && !R->failed; ++i) {
    if (!p->autoResult[i] || i >= mlirOperationGetNumOperands(ret))
      continue;
    Info *in = dtPropInfo(p, mlirOperationGetOperand(ret, i));
    if (!in || !in->isTensor)
      continue;
    int tied =
        p->tiedArg[i] >= 0
            ? dtRefineArgVarOf(R, mlirBlockGetArgument(R->entry, p->tiedArg[i]))
            : -1;
    if (tied >= 0) {
      addUser(A, groupOf(A, in), orderOf(R, tied), -1);
      continue;
    }
    if (p->tiedArg[i] >= 0)
      continue; /* a fixed argument's layout: a fixed need */
    /* Its own layout, resolved: what resolving costs each maker's
     * candidate. */
    int var = -1, result = 0;
    if (mlirValueIsAOpResult(in->value)) {
      var = dtRefineVarOf(R, mlirOpResultGetOwner(in->value));
      result = (int)mlirOpResultGetResultNumber(in->value);
    }
    int k = var >= 0 ? orderOf(R, var) : -1;
    if (k < 0)
      continue;
    const Var *v = &R->vars[var];
    for (size_t c = 0; c < v->numCands; ++c) {
      CSpec s = v->cands[c].res[result], r;
      DtensorShardingSpec u;
      unpack(&s, in->rank, &u);
      resolved(&u);
      pack(&u, &r);
      double cost = convert(A, in, s, r);
      A->ilp->obj[A->firstCol[k] + (int)c] += isinf(cost) ? 1e12 : cost;
    }
  }
  return !R->failed;
}

/* ---- memory ---------------------------------------------------------------
 */

static bool holdsNothing(MlirValue v) {
  if (!mlirValueIsAOpResult(v))
    return false;
  MlirOperation def = mlirOpResultGetOwner(v);
  return dtIsOp(def, "tensor.empty") || dtIsOp(def, "linalg.fill") ||
         dtIsOp(def, "arith.constant") || dtIsOp(def, "tensor.splat");
}

/* The op of the entry block that holds `op` (itself when it is there). */
static MlirOperation inEntry(MlirBlock entry, MlirOperation op) {
  while (!mlirOperationIsNull(op) &&
         !mlirBlockEqual(mlirOperationGetBlock(op), entry))
    op = mlirOperationGetParentOperation(op);
  return op;
}

typedef struct OpIndex {
  const void *op;
  int index;
} OpIndex;

static bool sameOpIndex(const void *entry, const void *key) {
  return ((const OpIndex *)entry)->op == key;
}

static bool addLive(Auto *A, DtTable *index, MlirValue v, int def) {
  Refine *R = A->R;
  Info *in = dtPropInfo(A->p, v);
  if (!in || !in->isTensor || holdsNothing(v))
    return true;
  int last = def;
  for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u);
       u = mlirOpOperandGetNextUse(u)) {
    MlirOperation at = inEntry(R->entry, mlirOpOperandGetOwner(u));
    if (mlirOperationIsNull(at))
      continue;
    const OpIndex *hit =
        dtTableFind(index, groupHash(at.ptr), sameOpIndex, at.ptr);
    if (hit && hit->index > last)
      last = hit->index;
  }
  Live *l =
      dtArrayPush((void **)&A->lives, &A->numLives, &A->capLives, sizeof(Live));
  if (!l)
    return false;
  l->info = in;
  l->def = def;
  l->last = last;
  l->var = dtRefineArgVarOf(R, v);
  l->result = 0;
  if (l->var < 0 && mlirValueIsAOpResult(v)) {
    l->var = dtRefineVarOf(R, mlirOpResultGetOwner(v));
    l->result = (int)mlirOpResultGetResultNumber(v);
  }
  if (l->var >= 0)
    l->var = orderOf(R, l->var);
  return true;
}

/* Every value whose bytes count, with the ops where it lives. */
static bool collectLives(Auto *A) {
  Refine *R = A->R;
  DtTable index = dtTableInit(sizeof(OpIndex));
  int n = 0;
  bool ok = true;
  for (MlirOperation op = mlirBlockGetFirstOperation(R->entry);
       !mlirOperationIsNull(op) && ok; op = mlirOperationGetNextInBlock(op)) {
    OpIndex *slot = dtTableInsert(&index, groupHash(op.ptr));
    ok = slot != NULL;
    if (ok) {
      slot->op = op.ptr;
      slot->index = n++;
    }
  }
  A->numOps = n;
  for (intptr_t i = 0; ok && i < mlirBlockGetNumArguments(R->entry); ++i)
    ok = addLive(A, &index, mlirBlockGetArgument(R->entry, i), -1);
  int at = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(R->entry);
       !mlirOperationIsNull(op) && ok;
       op = mlirOperationGetNextInBlock(op), ++at)
    for (intptr_t j = 0; ok && j < mlirOperationGetNumResults(op); ++j)
      ok = addLive(A, &index, mlirOperationGetResult(op, j), at);
  dtTableFree(&index);
  return ok;
}

/* The bytes of live value `l` under the solution `x`. */
static double liveBytes(const Auto *A, const Live *l, const double *x) {
  if (l->var < 0)
    return bytesOf(A->p, l->info, l->info->spec);
  const Var *v = &A->R->vars[A->R->order[l->var]];
  double bytes = 0.0;
  for (size_t c = 0; c < v->numCands; ++c)
    if (x[A->firstCol[l->var] + (int)c] > 0.5)
      bytes += bytesOf(A->p, l->info, v->cands[c].res[l->result]);
  return bytes;
}

/* The op where the solution holds the most bytes (-1: the arguments
 * alone), and those bytes. */
static double peakOf(const Auto *A, const double *x, int *at) {
  double *delta = calloc((size_t)A->numOps + 2, sizeof(double));
  if (!delta)
    return INFINITY;
  for (size_t i = 0; i < A->numLives; ++i) {
    const Live *l = &A->lives[i];
    double b = liveBytes(A, l, x);
    delta[l->def + 1] += b;
    delta[l->last + 2] -= b;
  }
  double now = 0.0, peak = -1.0;
  for (int i = 0; i <= A->numOps; ++i) {
    now += delta[i];
    if (now > peak) {
      peak = now;
      *at = i - 1;
    }
  }
  free(delta);
  return peak;
}

/* The row: the bytes live at op `at` fit the budget. */
static bool addMemoryRow(Auto *A, int at) {
  double fixed = 0.0;
  for (size_t i = 0; i < A->numLives; ++i) {
    const Live *l = &A->lives[i];
    if (l->def > at || l->last < at)
      continue;
    if (l->var < 0) {
      fixed += bytesOf(A->p, l->info, l->info->spec);
      continue;
    }
    const Var *v = &A->R->vars[A->R->order[l->var]];
    for (size_t c = 0; c < v->numCands; ++c)
      term(A, A->firstCol[l->var] + (int)c,
           bytesOf(A->p, l->info, v->cands[c].res[l->result]));
  }
  return addRow(A, -INFINITY, (double)A->p->memoryBudget - fixed);
}

/* ---- solving ---------------------------------------------------------------
 */

/* Solves, adding memory rows until the solution fits; the last result in
 * `out`. */
static void solve(Auto *A, DtIlpResult *out) {
  Prop *p = A->p;
  for (;;) {
    double left = p->timeLimit - A->seconds;
    dtIlpSolve(A->ilp, p->solver, left > 0.05 ? left : 0.05, out);
    A->seconds += out->seconds;
    if (out->status != DT_ILP_OPTIMAL && out->status != DT_ILP_FEASIBLE)
      return;
    if (p->memoryBudget <= 0)
      return;
    int at;
    double peak = peakOf(A, out->x, &at);
    if (peak <= (double)p->memoryBudget * (1.0 + 1e-9))
      return;
    if (++A->rounds > kMemoryRounds || A->seconds >= p->timeLimit) {
      out->status = DT_ILP_NO_SOLUTION;
      snprintf(out->message, sizeof(out->message),
               "no plan within the budget found in %d rounds", A->rounds);
      return;
    }
    if (!addMemoryRow(A, at)) {
      out->status = DT_ILP_ERROR;
      snprintf(out->message, sizeof(out->message), "out of memory");
      return;
    }
  }
}

/* The candidate of var `k` the solution picks. */
static int picked(const Auto *A, const double *x, int k) {
  for (int c = A->firstCol[k]; c < A->firstCol[k + 1]; ++c)
    if (x[c] > 0.5)
      return c - A->firstCol[k];
  return 0;
}

static void argName(Prop *p, int arg, char *out, size_t size) {
  MlirAttribute name = dtFuncArgAttr(p->func, false, arg, "dtensor.name");
  if (!mlirAttributeIsNull(name) && mlirAttributeIsAString(name)) {
    MlirStringRef s = mlirStringAttrGetValue(name);
    snprintf(out, size, "%.*s", (int)s.length, s.data);
  } else
    snprintf(out, size, "argument %d", arg);
}

static void specText(const Info *in, CSpec c, char *out, size_t size) {
  DtensorShardingSpec s;
  unpack(&c, in->rank, &s);
  dtensorShardingSpecPrint(&s, out, size);
}

/* why=true: per argument chosen here, its layout, bytes and the best plan
 * with another layout (solved again without this one). */
static void explain(Auto *A, const double *best, double objective,
                    double peak) {
  Refine *R = A->R;
  Prop *p = A->p;
  MlirStringRef fname = mlirStringAttrGetValue(dtGetAttr(p->func, "sym_name"));
  int *pick = malloc(sizeof(int) * (size_t)(R->count + 1));
  if (!pick)
    return;
  for (int k = 0; k < R->count; ++k)
    pick[k] = picked(A, best, k);
  fprintf(stderr,
          "dtensor-auto-shard: @%.*s: modelled step %.3f us, peak %.0f bytes "
          "per device",
          (int)fname.length, fname.data, objective, peak);
  if (p->memoryBudget > 0)
    fprintf(stderr, " of a budget of %lld", (long long)p->memoryBudget);
  fprintf(stderr, "\n");
  for (int k = 0; k < R->count; ++k) {
    const Var *v = &R->vars[R->order[k]];
    if (v->arg < 0)
      continue;
    char name[128], chosen[96], other[96] = "none";
    argName(p, v->arg, name, sizeof(name));
    specText(v->results[0], v->cands[pick[k]].res[0], chosen, sizeof(chosen));
    double bytes = bytesOf(p, v->results[0], v->cands[pick[k]].res[0]);
    /* Its own conversions under the plan. */
    double own = 0.0;
    for (size_t gi = 0; gi < A->numGroups; ++gi) {
      const Group *g = &A->groups[gi];
      if (g->producer == k)
        for (int c = g->firstCol; c < g->endCol; ++c)
          own += A->ilp->obj[c] * best[c];
    }
    own += v->cands[pick[k]].fixedCost;
    int col = A->firstCol[k] + pick[k];
    double altCost = NAN;
    if (v->numCands > 1) {
      dtIlpSetColBounds(A->ilp, col, 0.0, 0.0);
      DtIlpResult alt;
      solve(A, &alt);
      if (alt.status == DT_ILP_OPTIMAL || alt.status == DT_ILP_FEASIBLE) {
        altCost = alt.objective + A->constant;
        specText(v->results[0], v->cands[picked(A, alt.x, k)].res[0], other,
                 sizeof(other));
      } else
        snprintf(other, sizeof(other), "none that fits");
      dtIlpSetColBounds(A->ilp, col, 0.0, 1.0);
    }
    fprintf(stderr,
            "  %s: %s, %.0f bytes per device, its conversions %.3f us; "
            "next best %s",
            name, chosen, bytes, own, other);
    if (!isnan(altCost))
      fprintf(stderr, " (step %.3f us, +%.3f)", altCost, altCost - objective);
    fprintf(stderr, "\n");
  }
  free(pick);
}

/* The least bytes the arguments need (each split as far as it goes). */
static double leastArgumentBytes(const Auto *A) {
  double total = 0.0;
  for (size_t i = 0; i < A->numLives; ++i) {
    const Live *l = &A->lives[i];
    if (l->def >= 0)
      continue;
    if (l->var < 0) {
      total += bytesOf(A->p, l->info, l->info->spec);
      continue;
    }
    const Var *v = &A->R->vars[A->R->order[l->var]];
    double least = INFINITY;
    for (size_t c = 0; c < v->numCands; ++c)
      least = fmin(least, bytesOf(A->p, l->info, v->cands[c].res[0]));
    total += least;
  }
  return total;
}

static const char *finishAuto(Auto *A, MlirOperation func) {
  Refine *R = A->R;
  Prop *p = A->p;
  MlirOperation ret = mlirBlockGetTerminator(R->entry);
  if (!mlirOperationIsNull(ret) && !dtIsOp(ret, "func.return"))
    ret = (MlirOperation){NULL};
  /* The results chosen here are priced below, not as fixed needs. */
  for (int i = 0; i < p->numResults && !mlirOperationIsNull(ret); ++i)
    if (p->autoResult[i] &&
        (p->tiedArg[i] < 0 ||
         dtRefineArgVarOf(R, mlirBlockGetArgument(R->entry, p->tiedArg[i])) >=
             0))
      dtRefineForgetNeed(R, ret, i);
  if (!dtRefinePrepare(R))
    return NULL;
  /* What no var changes (conversions between fixed ends): the program's
   * objective plus this is the modelled cost. */
  A->constant = dtPropModelledCost(p) - dtRefineCurrentTotal(R);
  if (!addPicks(A) || !collectGroups(A, ret))
    return NULL;
  for (size_t g = 0; g < A->numGroups; ++g)
    if (!addConversions(A, &A->groups[g]))
      return NULL;
  if (!collectLives(A))
    return NULL;
  /* The refined choice, where the solver may start. */
  int numX = A->firstCol[R->count];
  int *cols = malloc(sizeof(int) * (size_t)(numX + 1));
  double *vals = malloc(sizeof(double) * (size_t)(numX + 1));
  bool started = cols && vals;
  for (int k = 0; k < R->count && started; ++k) {
    const Var *v = &R->vars[R->order[k]];
    for (size_t c = 0; c < v->numCands; ++c) {
      int col = A->firstCol[k] + (int)c;
      cols[col] = col;
      vals[col] = (int)c == v->current ? 1.0 : 0.0;
    }
  }
  started = started && dtIlpSetStart(A->ilp, numX, cols, vals);
  free(cols);
  free(vals);
  if (!started)
    return NULL;
  DtIlpResult res;
  solve(A, &res);
  if (res.status == DT_ILP_ERROR) {
    dtPropError(p, func, "dtensor-auto-shard: %s (solver %s)", res.message,
                dtIlpSolverName(p->solver));
    return "failed";
  }
  if (res.status == DT_ILP_INFEASIBLE || res.status == DT_ILP_NO_SOLUTION) {
    if (p->memoryBudget > 0)
      dtPropError(p, func,
                  "dtensor-auto-shard: no layouts fit memory=%lld bytes per "
                  "device (%s; the arguments alone need at least %.0f, each "
                  "split as far as the mesh allows)",
                  (long long)p->memoryBudget,
                  res.status == DT_ILP_INFEASIBLE
                      ? "proven by the solver"
                      : (res.message[0] ? res.message : "time limit"),
                  leastArgumentBytes(A));
    else
      dtPropError(p, func,
                  "dtensor-auto-shard: the solver found no plan in %.1f s "
                  "(time-limit)",
                  A->seconds);
    return "failed";
  }
  int at;
  double peak = peakOf(A, res.x, &at);
  double *best = malloc(sizeof(double) * (size_t)(dtIlpNumCols(A->ilp) + 1));
  if (!best)
    return NULL;
  memcpy(best, res.x, sizeof(double) * (size_t)dtIlpNumCols(A->ilp));
  if (p->autoWhy)
    explain(A, best, res.objective + A->constant, peak);
  /* Apply. */
  for (int k = 0; k < R->count && !p->failed; ++k) {
    Var *v = &R->vars[R->order[k]];
    const Cand *c = &v->cands[picked(A, best, k)];
    if (v->arg >= 0) {
      DtensorShardingSpec s;
      unpack(&c->res[0], v->results[0]->rank, &s);
      setSpec(v->results[0], &s);
      v->results[0]->known = true;
      continue;
    }
    if (c->isCurrent)
      continue;
    Choice *ch = &R->scratch[1];
    if (!dtPropSpecsWith(p, v->rule, v->operands, v->results, &c->strategy,
                         c->pass, c->passOperand, ch)) {
      free(best);
      R->failed = true;
      return "inconsistent candidate";
    }
    dtRefineApply(R, v, ch);
  }
  free(best);
  const char *how = res.status == DT_ILP_OPTIMAL ? "optimal" : "best found";
  char gap[64] = "";
  if (res.status == DT_ILP_FEASIBLE && !isnan(res.bound))
    snprintf(gap, sizeof(gap), ", gap %.2f %%",
             100.0 * (res.objective - res.bound) /
                 fmax(fabs(res.objective), 1e-12));
  return dtPropKeep(p,
                    "automatic: %s, %.3f us over %d vars "
                    "(%s, %d columns, %d rows, %d memory rounds, %.2f s%s); "
                    "peak %.0f bytes per device",
                    how, res.objective + A->constant, R->count,
                    dtIlpSolverName(p->solver), dtIlpNumCols(A->ilp),
                    dtIlpNumRows(A->ilp), A->rounds, A->seconds, gap, peak);
}

const char *dtRefineAuto(Refine *R, MlirOperation func) {
  Prop *p = R->p;
  if (!dtIlpHasSolver(p->solver)) {
    dtPropError(p, func,
                "dtensor-auto-shard: this build has no %s solver (install "
                "Debian's coinor-libcbc-dev or libglpk-dev and build again)",
                p->solver == DT_ILP_DEFAULT ? "integer program"
                                            : dtIlpSolverName(p->solver));
    return "no solver";
  }
  /* The order: the arguments' vars, then the ops' in program order. */
  int numArgs = (int)mlirBlockGetNumArguments(R->entry);
  for (int i = 0; i < numArgs && !R->failed; ++i) {
    Info *in = dtPropInfo(p, mlirBlockGetArgument(R->entry, i));
    if (in && in->isTensor && !in->fixed)
      dtRefineArgVar(R, mlirBlockGetArgument(R->entry, i), i);
  }
  size_t cap = R->numVars + 1;
  for (MlirOperation op = mlirBlockGetFirstOperation(R->entry);
       !mlirOperationIsNull(op) && !R->failed;
       op = mlirOperationGetNextInBlock(op))
    cap += dtRefineVarOf(R, op) >= 0;
  R->order = malloc(sizeof(int) * cap);
  if (!R->order) {
    R->failed = true;
    return NULL;
  }
  int numArgVars = 0;
  for (size_t n = 0; n < R->numVars; ++n)
    if (R->vars[n].arg >= 0)
      R->order[R->count++] = (int)n, ++numArgVars;
  for (MlirOperation op = mlirBlockGetFirstOperation(R->entry);
       !mlirOperationIsNull(op) && !R->failed;
       op = mlirOperationGetNextInBlock(op)) {
    int v = dtRefineVarOf(R, op);
    if (v < 0)
      continue;
    R->order[R->count++] = v;
    if (!(R->vars[v].rule = malloc(sizeof(DtRule))))
      R->failed = true;
    else
      dtPropRule(p, op, R->vars[v].rule);
  }
  R->pick = malloc(sizeof(int) * cap);
  R->bestPick = malloc(sizeof(int) * cap);
  R->suffix = malloc(sizeof(double) * cap);
  Auto A;
  memset(&A, 0, sizeof(A));
  A.R = R;
  A.p = p;
  A.ilp = dtIlpCreate();
  A.firstCol = malloc(sizeof(int) * cap);
  A.groupIndex = dtTableInit(sizeof(GroupSlot));
  const char *summary = NULL;
  if (R->pick && R->bestPick && R->suffix && A.ilp && A.firstCol && !R->failed)
    summary = finishAuto(&A, func);
  if (!summary && !p->failed)
    R->failed = true;
  if (summary && !p->failed)
    summary = dtPropKeep(p, "%s [%d of them arguments]", summary, numArgVars);
  dtIlpDestroy(A.ilp);
  free(A.firstCol);
  free(A.groups);
  dtTableFree(&A.groupIndex);
  free(A.users);
  free(A.lives);
  free(A.coef);
  free(A.inRow);
  free(A.touched);
  return summary ? summary : "failed";
}
