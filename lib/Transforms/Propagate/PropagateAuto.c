/* dtensor-propagate{auto=true} (dtensor-auto-shard): the whole function's
 * choice with the arguments that have no layout chosen too, as an integer
 * program solved by lib/Solver (CBC or GLPK).
 *
 * The program is the exact search's (PropagateExact.c) written for a
 * solver: a 0/1 column per candidate of every var (each op with a
 * strategy, each argument without a layout), one picked per var, each
 * costing its compute and its conversions to fixed users. A value of one
 * user between two vars: a transport between the two picks (addPairwise).
 * A value of several users made by a var: per user a transport between
 * the maker's pick and the user's, and per pair (made layout s, needed
 * layout L) a column w at least each user's share of it, costing the
 * conversion: one conversion per distinct layout, as the model counts it
 * (addTransports; the relaxation of the GPT forward on 2x2 and 2x4 and of
 * the Adam step on 2x2 is integral). A fixed value of several users: per layout
 * L some user needs, a column n at least those users' candidates. A function
 * result without a layout takes its argument's (the same dtensor.name: a
 * training step's carried state) or its value's, resolved.
 *
 * Memory: the bytes per device of the arguments and of the values ops
 * make (a value live from its op to its last user; values that only
 * initialize hold nothing) must fit the budget at every op. Rows for it
 * are added where the solution breaks it, and the program solved again,
 * until none does. */
#include "PropagateRefine.h"

#include "Solver/Choice.h"
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
  int at; /* its op's place in the entry block; -1: not known */
} User;

/* A value some var uses: made by var `producer` (result `result`) or
 * fixed (-1); its users that are vars. */
typedef struct Group {
  const Info *info;
  int producer, result;
  size_t fixedNeeds;
  int numFixedNeeds;
  int firstUser;
  int firstUse, lastUse; /* the ops of the entry block that use it */
} Group;

typedef struct GroupSlot {
  const void *value;
  int index;
} GroupSlot;

/* A pointer's index (ops in the entry block; first vars of a class). */
typedef struct OpIndex {
  const void *op;
  int index;
} OpIndex;

static bool sameOpIndex(const void *entry, const void *key) {
  return ((const OpIndex *)entry)->op == key;
}

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
  DtIlpBasis basis;     /* the last LP's, for the next of the same matrix */
  DtChoiceGraph *graph; /* a node per var, an edge per value of one user */
  int *firstCol;        /* per var of the order: its columns (-1: reduced) */
  int *candBase;        /* per var: where its candidates start in `extra` */
  double *extra;        /* per candidate: the results' prices it adds */
  int *pick;            /* per var: the candidate the plan picks */
  bool *pinned;         /* per var: kept in the program (memory, why) */
  int *points;          /* the ops where the budget has rows */
  size_t numPoints, capPoints;
  int forbidK, forbidC; /* a candidate excluded (why's alternatives) */
  int restrict_;        /* candidates allowed: -1 all, else axesOnly's */
  int *start;           /* per var: the start's pick (NULL: current) */
  double startCost;     /* the start's modelled cost (NAN: not known) */
  int *fits;            /* per var: the cheapest plan within the budget
                           solve() knows, where its next build starts
                           (NULL: none) */
  Group *groups;
  size_t numGroups, capGroups;
  DtTable groupIndex;
  User *users;
  size_t numUsers, capUsers;
  bool *hyper; /* per group: several users (priced in the program) */
  int *tie;    /* per var: the var it picks alike (itself: none) */
  int numTied;
  int *cols; /* scratch for addPairwise: classes */
  size_t capBuffers;
  Live *lives;
  size_t numLives, capLives;
  int numOps;
  /* scratch: a coefficient per column, the columns touched */
  double *coef;
  bool *inRow;
  int *touched;
  int numTouched, numScratch;
  int rounds;
  /* Memory rows count a converted copy only where its users straddle the
   * op (exact), or wherever its value is used (the first rounds': at least
   * as many bytes, a tighter relaxation, so a plan that fits them fits). */
  bool exactCopies;
  /* The answer's last program: its memory rows (the first of `points`)
   * and how they count copies. Why's programs start as it (their LPs
   * start from its basis). -1: not built. */
  int answerPoints;
  bool answerExact;
  double seconds;
  double until; /* the solves end when `seconds` reaches this */
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
  double cost = dtPropConvertCost(A->p, in, &a, &b);
  /* The planner's "no plan" is a huge price: impossible. */
  return cost >= 1e15 ? INFINITY : cost;
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

/* Whether two conversion prices are the same (they come from one formula
 * on the same sizes, so equal ones are equal to rounding). */
static bool samePrice(double a, double b) {
  if (isinf(a) || isinf(b))
    return isinf(a) && isinf(b);
  return fabs(a - b) <= 1e-12 * fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* Room for `n` entries in the scratch columns. */
static bool growBuffers(Auto *A, size_t n) {
  if (n < A->capBuffers)
    return true;
  int *cols = realloc(A->cols, sizeof(int) * (n + 1));
  if (!cols)
    return false;
  A->cols = cols;
  A->capBuffers = n + 1;
  return true;
}

/* Adds to the row being built user `us`'s candidates that need `L`,
 * times `sign`; whether it has any. */
static bool termNeeding(Auto *A, const User *us, CSpec L, double sign) {
  const Var *uv = &A->R->vars[A->R->order[us->k]];
  bool any = false;
  for (size_t c = 0; c < uv->numCands; ++c)
    if (sameCSpec(needOf(A, us, c), L)) {
      term(A, A->firstCol[us->k] + (int)c, sign);
      any = true;
    }
  return any;
}

/* Whether candidate `c` of var `k` may be picked in this program (its
 * column not held at 0: a restriction's or why's forbidden one). */
static bool candOpen(const Auto *A, int k, size_t c) {
  return dtIlpColUpper(A->ilp, A->firstCol[k] + (int)c) > 0.0;
}

/* The conversions of group `g`'s value, made by a var, to what its var
 * users need: `price` prices each target (rows, `numTargets`) from each
 * layout the maker may make (columns, `made`). Per user a transport
 * between the maker's pick (by the layout it makes) and the user's (by
 * the target it needs, those of a positive price from some made layout):
 * a column z per pair of a finite price, the z's of a target summing to
 * the user's candidates that need it, those of a made layout at most the
 * maker's candidates that make it (the rest goes to the user's free
 * needs). Per pair of a positive price a column w, at least each user's
 * z of the pair, costing the conversion: one per distinct layout, as the
 * model counts it. With 0/1 picks each user's z is its picked pair
 * exactly; in the relaxation each user's mass must pair with the maker's,
 * so a fractional pick pays what its parts pay (a column per target
 * converted to, at least its users, and one per price bounded by the
 * maker's candidates at it, let every target use the same cheap mass of
 * the maker: on the GPT forward on 2x4 that bound was 3.5 % under the
 * optimum). */
static bool addTransports(Auto *A, const Group *g, const CSpec *made,
                          size_t numMade, const CSpec *targets,
                          size_t numTargets, const double *price,
                          double scale) {
  Refine *R = A->R;
  const Var *maker = &R->vars[R->order[g->producer]];
  size_t cells = numTargets * numMade;
  int *wcol = malloc(sizeof(int) * (cells + 1));
  int *zcol = malloc(sizeof(int) * (cells + 1));
  int *madeOf = malloc(sizeof(int) * (maker->numCands + 1));
  bool ok = wcol && zcol && madeOf;
  for (size_t i = 0; i < cells && ok; ++i)
    wcol[i] = -1;
  /* Made layouts no open candidate of the maker makes (a restricted or
   * forbidden program's) get no z: the rows would hold them at 0. */
  bool *madeOpen = calloc(numMade + 1, sizeof(bool));
  ok = ok && madeOpen;
  for (size_t c = 0; c < maker->numCands && ok; ++c) {
    CSpec mc = madeBy(A, g->producer, c, g->result);
    madeOf[c] = 0;
    for (size_t m = 0; m < numMade; ++m)
      if (sameCSpec(made[m], mc)) {
        madeOf[c] = (int)m;
        break;
      }
    madeOpen[madeOf[c]] |= candOpen(A, g->producer, c);
  }
  for (int u = g->firstUser; u >= 0 && ok; u = A->users[u].next) {
    const User *us = &A->users[u];
    const Var *uv = &R->vars[R->order[us->k]];
    /* The z's of each costly target this user may need. */
    for (size_t i = 0; i < cells; ++i)
      zcol[i] = -1;
    for (size_t c = 0; c < uv->numCands && ok; ++c) {
      if (!candOpen(A, us->k, c))
        continue; /* its target, if no open one needs it: no z */
      CSpec L = needOf(A, us, c);
      for (size_t t = 0; t < numTargets && ok; ++t) {
        if (!sameCSpec(targets[t], L) || zcol[t * numMade] != -1)
          continue;
        const double *row = price + t * numMade;
        bool costly = false;
        for (size_t m = 0; m < numMade; ++m)
          costly = costly || row[m] > 0.0;
        for (size_t m = 0; m < numMade && ok; ++m) {
          /* -2: no column (a free target, or an impossible pair) */
          zcol[t * numMade + m] = -2;
          if (!costly || isinf(row[m]) || !madeOpen[m])
            continue;
          zcol[t * numMade + m] = dtIlpAddCol(A->ilp, 0.0, 1.0, 0.0, false);
          ok = zcol[t * numMade + m] >= 0;
          if (ok && row[m] > 0.0 && wcol[t * numMade + m] < 0) {
            wcol[t * numMade + m] =
                dtIlpAddCol(A->ilp, 0.0, 1.0, scale * row[m], false);
            ok = wcol[t * numMade + m] >= 0;
          }
        }
        ok = ok && growScratch(A);
        if (!costly || !ok)
          continue;
        /* The z's of target t are the user's candidates needing it. */
        for (size_t m = 0; m < numMade; ++m)
          if (zcol[t * numMade + m] >= 0)
            term(A, zcol[t * numMade + m], 1.0);
        termNeeding(A, us, L, -1.0);
        ok = addRow(A, 0.0, 0.0);
        /* Each w of the target at least the user's z. */
        for (size_t m = 0; m < numMade && ok; ++m)
          if (zcol[t * numMade + m] >= 0 && wcol[t * numMade + m] >= 0) {
            term(A, wcol[t * numMade + m], 1.0);
            term(A, zcol[t * numMade + m], -1.0);
            ok = addRow(A, 0.0, INFINITY);
          }
      }
    }
    /* The z's from each made layout at most the maker's candidates that
     * make it. */
    for (size_t m = 0; m < numMade && ok; ++m) {
      bool any = false;
      for (size_t t = 0; t < numTargets; ++t)
        if (zcol[t * numMade + m] >= 0) {
          term(A, zcol[t * numMade + m], 1.0);
          any = true;
        }
      if (!any)
        continue;
      for (size_t c = 0; c < maker->numCands; ++c)
        if (madeOf[c] == (int)m)
          term(A, A->firstCol[g->producer] + (int)c, -1.0);
      ok = addRow(A, -INFINITY, 0.0);
    }
  }
  free(wcol);
  free(zcol);
  free(madeOf);
  free(madeOpen);
  return ok;
}

/* Rows: column `n` at least each user's candidates of group `g` that need
 * `L` (the value is converted to L when one of them is picked). */
static bool atLeastUsers(Auto *A, const Group *g, int n, CSpec L) {
  bool ok = true;
  for (int u = g->firstUser; u >= 0 && ok; u = A->users[u].next)
    if (termNeeding(A, &A->users[u], L, -1.0)) {
      term(A, n, 1.0);
      ok = addRow(A, 0.0, INFINITY);
    }
  return ok;
}

/* The conversions of group `g`'s value (of several users) to what its
 * var users need. The layouts the maker may make (`made`, one per
 * distinct layout; the value's own when nobody chooses it) and the
 * layouts users need (`targets`, those fixed users need excluded: the
 * maker pays them) give a price matrix. A var maker: addTransports. A
 * fixed value: per costly target a column n (the value is converted to
 * it) at least every user's candidates that need it, paying the price
 * from the value's own layout. */
static bool addConversions(Auto *A, Group *g, double scale) {
  Refine *R = A->R;
  const Var *maker = g->producer >= 0 ? &R->vars[R->order[g->producer]] : NULL;
  CSpec *made = NULL, *targets = NULL;
  size_t numMade = 0, capMade = 0, numTargets = 0, capTargets = 0;
  double *price = NULL;
  bool ok = true;
  if (maker) {
    for (size_t c = 0; c < maker->numCands && ok; ++c) {
      CSpec m = madeBy(A, g->producer, c, g->result);
      if (dtRefineHasCSpec(made, numMade, m))
        continue;
      CSpec *slot =
          dtArrayPush((void **)&made, &numMade, &capMade, sizeof(CSpec));
      ok = slot != NULL;
      if (ok)
        *slot = m;
    }
  } else {
    CSpec *slot =
        dtArrayPush((void **)&made, &numMade, &capMade, sizeof(CSpec));
    ok = slot != NULL;
    if (ok)
      *slot = g->info->spec;
  }
  for (int u = g->firstUser; u >= 0 && ok; u = A->users[u].next) {
    const User *us = &A->users[u];
    const Var *uv = &R->vars[R->order[us->k]];
    for (size_t c = 0; c < uv->numCands && ok; ++c) {
      CSpec L = needOf(A, us, c);
      if (dtRefineHasCSpec(R->shared + g->fixedNeeds, (size_t)g->numFixedNeeds,
                           L) ||
          dtRefineHasCSpec(targets, numTargets, L))
        continue;
      CSpec *slot = dtArrayPush((void **)&targets, &numTargets, &capTargets,
                                sizeof(CSpec));
      ok = slot != NULL;
      if (ok)
        *slot = L;
    }
  }
  if (ok && numTargets) {
    price = malloc(sizeof(double) * numTargets * numMade);
    ok = price != NULL;
  }
  for (size_t t = 0; t < numTargets && ok; ++t)
    for (size_t m = 0; m < numMade; ++m)
      price[t * numMade + m] = convert(A, g->info, made[m], targets[t]);
  if (maker && numTargets && ok)
    ok = addTransports(A, g, made, numMade, targets, numTargets, price, scale);
  for (size_t t = 0; t < numTargets && ok && !maker; ++t) {
    double own = price[t];
    if (!(own > 0.0))
      continue;
    int n = dtIlpAddCol(A->ilp, 0.0, isinf(own) ? 0.0 : 1.0,
                        isinf(own) ? 0.0 : scale * own, false);
    ok = n >= 0 && growScratch(A);
    ok = ok && atLeastUsers(A, g, n, targets[t]);
  }
  free(made);
  free(targets);
  free(price);
  return ok;
}

static bool addMemoryRow(Auto *A, int at);

/* Adds price `p` (times `scale`) to column `col`'s objective; an infinite
 * one rules the column out. */
static void priceColumn(DtIlp *ilp, int col, double p, double scale) {
  if (isinf(p))
    dtIlpSetColBounds(ilp, col, 0.0, 0.0);
  else
    ilp->obj[col] += scale * p;
}

/* Classes of `count` lines of `matrix` (line k's entries at k * step +
 * e * stride, e < len) with the same prices: classOf[k] is the first line
 * of k's class. Returns the number of classes. */
static int priceClasses(const double *matrix, int count, int step, int len,
                        int stride, int *classOf) {
  int classes = 0;
  for (int k = 0; k < count; ++k) {
    classOf[k] = k;
    for (int f = 0; f < k && classOf[k] == k; ++f) {
      if (classOf[f] != f)
        continue;
      bool same = true;
      for (int e = 0; e < len && same; ++e)
        same = samePrice(matrix[k * step + e * stride],
                         matrix[f * step + e * stride]);
      if (same)
        classOf[k] = f;
    }
    classes += classOf[k] == k;
  }
  return classes;
}

/* A value of one user between two vars that are both in the program:
 * `matrix` prices a's candidates (rows) by b's (columns). The pair is
 * priced as a transport between the two picks (the local polytope of
 * pairwise costs): b's candidates with the same prices form a class J, a's
 * with the same prices by those classes a class I; a column z per pair of
 * classes whose price is finite, with sum over J of z(I, J) = a's
 * candidates in I and sum over I of z(I, J) = b's candidates in J, each
 * z(I, J) costing its price. With 0/1 picks exactly the picked pair's z is
 * 1; in the relaxation a's mass must go somewhere, so a fractional pick
 * pays what its parts pay (the earlier formulation, a column per price
 * bounded by a's candidates at it, let each class of b use the same cheap
 * mass of a: on the GPT step on 2x2 its bound was 4.4 % under the plan).
 * Where a or b has one class the price is linear in the other's pick and
 * goes to its columns; where a and b share their columns (alike vars), to
 * the diagonal. */
static bool addPairwise(Auto *A, int ka, int kb, const double *matrix,
                        double scale) {
  const Var *va = &A->R->vars[A->R->order[ka]];
  const Var *vb = &A->R->vars[A->R->order[kb]];
  int na = (int)va->numCands, nb = (int)vb->numCands;
  DtIlp *ilp = A->ilp;
  if (A->firstCol[ka] == A->firstCol[kb]) {
    for (int i = 0; i < na; ++i)
      priceColumn(ilp, A->firstCol[ka] + i, matrix[i * nb + i], scale);
    return true;
  }
  /* classOf[0, na): a's classes (rows); [na, na + nb): b's (columns). */
  if (!growBuffers(A, (size_t)(na + nb)))
    return false;
  int *classOf = A->cols;
  int numJ = priceClasses(matrix, nb, 1, na, nb, classOf + na);
  int numI = priceClasses(matrix, na, nb, nb, 1, classOf);
  /* One class on a side: the price follows the other side's pick. */
  if (numI == 1 || numJ == 1) {
    bool byA = numJ == 1;
    int n = byA ? na : nb, first = A->firstCol[byA ? ka : kb];
    for (int c = 0; c < n; ++c)
      priceColumn(ilp, first + c, byA ? matrix[c * nb] : matrix[c], scale);
    return true;
  }
  bool costly = false;
  for (int k = 0; k < na * nb && !costly; ++k)
    costly = matrix[k] != 0.0;
  if (!costly)
    return true;
  /* z(I, J) for the classes' firsts i and j at zcol[i * nb + j]; none
   * for a class of closed candidates only (held at 0 by its row). */
  int *zcol = malloc(sizeof(int) * (size_t)(na * nb));
  bool *open = calloc((size_t)(na + nb) + 1, sizeof(bool));
  if (!zcol || !open) {
    free(zcol);
    free(open);
    return false;
  }
  for (int c = 0; c < na; ++c)
    open[classOf[c]] |= candOpen(A, ka, (size_t)c);
  for (int c = 0; c < nb; ++c)
    open[na + classOf[na + c]] |= candOpen(A, kb, (size_t)c);
  bool ok = true;
  for (int i = 0; i < na && ok; ++i)
    for (int j = 0; j < nb && ok; ++j) {
      zcol[i * nb + j] = -1;
      double p = matrix[i * nb + j];
      if (classOf[i] != i || classOf[na + j] != j || isinf(p) || !open[i] ||
          !open[na + j])
        continue;
      zcol[i * nb + j] = dtIlpAddCol(ilp, 0.0, 1.0, scale * p, false);
      ok = zcol[i * nb + j] >= 0;
    }
  ok = ok && growScratch(A);
  /* Each class of a: its z's are its candidates' mass. */
  for (int i = 0; i < na && ok; ++i) {
    if (classOf[i] != i)
      continue;
    for (int j = 0; j < nb; ++j)
      if (zcol[i * nb + j] >= 0)
        term(A, zcol[i * nb + j], 1.0);
    for (int c = i; c < na; ++c)
      if (classOf[c] == i)
        term(A, A->firstCol[ka] + c, -1.0);
    ok = addRow(A, 0.0, 0.0);
  }
  /* And each class of b. */
  for (int j = 0; j < nb && ok; ++j) {
    if (classOf[na + j] != j)
      continue;
    for (int i = 0; i < na; ++i)
      if (zcol[i * nb + j] >= 0)
        term(A, zcol[i * nb + j], 1.0);
    for (int c = j; c < nb; ++c)
      if (classOf[na + c] == j)
        term(A, A->firstCol[kb] + c, -1.0);
    ok = addRow(A, 0.0, 0.0);
  }
  free(zcol);
  free(open);
  return ok;
}

/* The price of a value's conversion to what candidate `c` of its one
 * user needs, from layout `from` (nothing when a fixed user needs it
 * too: its maker pays that conversion). */
static double priceFor(Auto *A, const Group *g, const User *u, size_t c,
                       CSpec from) {
  CSpec L = needOf(A, u, c);
  if (dtRefineHasCSpec(A->R->shared + g->fixedNeeds, (size_t)g->numFixedNeeds,
                       L))
    return 0.0;
  return convert(A, g->info, from, L);
}

/* Whether packed spec `c` uses the mesh axes as restriction `r` allows:
 * r < rank, axis r alone; r == rank, every axis together (one dim split
 * over all of them in order, or all Partial), as on a 1-d mesh of every
 * device. */
static bool specAllowed(CSpec c, int rank, int r) {
  int byte[DTENSOR_MAX_MESH_RANK];
  for (int a = 0; a < rank; ++a)
    byte[a] = (int)((c.code >> (8 * a)) & 0xff);
  if (r < rank) {
    for (int a = 0; a < rank; ++a)
      if (a != r && byte[a] != 0)
        return false;
    return true;
  }
  /* Bytes: 0 free, 1 Partial, 2 + 8 dim + position. */
  for (int a = 0; a < rank; ++a) {
    if (byte[a] == 0 || byte[a] == 1) {
      if (byte[a] != byte[0])
        return false;
      continue;
    }
    if (byte[0] < 2 || (byte[a] - 2) / 8 != (byte[0] - 2) / 8 ||
        (byte[a] - 2) % 8 != a)
      return false;
  }
  return true;
}

/* Whether candidate `c` of `v` is allowed under restriction `r`. */
static bool allowedUnder(const Auto *A, const Cand *c, const Var *v, int r) {
  int rank = dtensorMeshGetRank(A->p->mesh);
  for (int i = 0; i < DT_MAX_RULE_VALUES; ++i) {
    if (i < v->numOperands && v->operands[i] &&
        !specAllowed(c->need[i], rank, r))
      return false;
    if (i < v->numResults && v->results[i] && !specAllowed(c->res[i], rank, r))
      return false;
  }
  return true;
}

/* The graph of the vars: a node each (its candidates' own costs), an
 * edge per value of one user whose maker is a var, that user's prices
 * when the maker is fixed; values of several users pin their vars (the
 * program prices them). */
static bool buildGraph(Auto *A) {
  Refine *R = A->R;
  DtChoiceGraph *g = A->graph;
  for (int k = 0; k < R->count; ++k) {
    const Var *v = &R->vars[R->order[k]];
    if (dtChoiceAddNode(g, (int)v->numCands) != k)
      return false;
    for (size_t c = 0; c < v->numCands; ++c)
      dtChoiceAddCost(g, k, (int)c,
                      v->cands[c].fixedCost +
                          A->extra[A->candBase[k] + (int)c]);
    if (k == A->forbidK && !A->pinned[k])
      dtChoiceAddCost(g, k, A->forbidC, INFINITY); /* pinned: a bound */
    for (size_t c = 0; c < v->numCands && A->restrict_ >= 0; ++c)
      if (!allowedUnder(A, &v->cands[c], v, A->restrict_))
        dtChoiceAddCost(g, k, (int)c, INFINITY);
    if (A->pinned[k] || A->numTied > 0)
      dtChoicePin(g, k);
  }
  double *matrix = NULL;
  size_t capMatrix = 0;
  bool ok = true;
  for (size_t gi = 0; gi < A->numGroups && ok; ++gi) {
    Group *gr = &A->groups[gi];
    const User *u = gr->firstUser >= 0 ? &A->users[gr->firstUser] : NULL;
    A->hyper[gi] = !u || u->next >= 0;
    if (A->hyper[gi]) {
      if (gr->producer >= 0)
        dtChoicePin(g, gr->producer);
      for (int e = gr->firstUser; e >= 0; e = A->users[e].next)
        dtChoicePin(g, A->users[e].k);
      continue;
    }
    const Var *uv = &R->vars[R->order[u->k]];
    if (gr->producer < 0 || gr->producer == u->k) {
      for (size_t c = 0; c < uv->numCands; ++c)
        dtChoiceAddCost(g, u->k, (int)c,
                        priceFor(A, gr, u, c,
                                 gr->producer < 0
                                     ? gr->info->spec
                                     : madeBy(A, gr->producer, c, gr->result)));
      continue;
    }
    const Var *mv = &R->vars[R->order[gr->producer]];
    size_t cells = mv->numCands * uv->numCands;
    if (cells > capMatrix) {
      double *m = realloc(matrix, sizeof(double) * cells);
      if (!m) {
        ok = false;
        break;
      }
      matrix = m;
      capMatrix = cells;
    }
    for (size_t i = 0; i < mv->numCands; ++i)
      for (size_t c = 0; c < uv->numCands; ++c)
        matrix[i * uv->numCands + c] =
            priceFor(A, gr, u, c, madeBy(A, gr->producer, i, gr->result));
    ok = dtChoiceAddEdge(g, gr->producer, u->k, matrix);
  }
  free(matrix);
  return ok && dtChoiceReduce(g);
}

/* Repeated layers: vars whose ops, candidates and neighbourhoods (a few
 * rounds of Weisfeiler-Lehman refinement over the links) are alike take
 * the same candidate (A->tie[k]: the first var of k's class). */
static bool findTies(Auto *A, int rounds) {
  Refine *R = A->R;
  int n = R->count;
  uint64_t *label = malloc(sizeof(uint64_t) * (size_t)(n + 1));
  uint64_t *next = malloc(sizeof(uint64_t) * (size_t)(n + 1));
  if (!label || !next) {
    free(label);
    free(next);
    return false;
  }
  for (int k = 0; k < n; ++k) {
    const Var *v = &R->vars[R->order[k]];
    uint64_t h = dtHashMix(97, v->numCands);
    if (v->arg < 0) {
      MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(v->op));
      h = dtHashMix(h, dtHashBytes(name.data, name.length));
    }
    for (int i = 0; i < DT_MAX_RULE_VALUES; ++i) {
      const Info *in = i < v->numResults ? v->results[i] : NULL;
      if (in)
        h = dtHashMix(h, (uint64_t)(uintptr_t)mlirValueGetType(in->value).ptr);
      in = i < v->numOperands ? v->operands[i] : NULL;
      if (in)
        h = dtHashMix(h, (uint64_t)(uintptr_t)mlirValueGetType(in->value).ptr);
    }
    for (size_t c = 0; c < v->numCands; ++c)
      for (int i = 0; i < DT_MAX_RULE_VALUES; ++i)
        h = hashCSpec(hashCSpec(h, v->cands[c].need[i]), v->cands[c].res[i]);
    label[k] = h;
  }
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < n; ++k)
      next[k] = dtHashMix(label[k], 1);
    /* Each link adds its ends' labels, by operand (a sum: the order of a
     * value's users does not matter). */
    for (size_t gi = 0; gi < A->numGroups; ++gi) {
      const Group *g = &A->groups[gi];
      uint64_t from = g->producer >= 0 ? label[g->producer] : 77;
      for (int u = g->firstUser; u >= 0; u = A->users[u].next) {
        const User *us = &A->users[u];
        next[us->k] += dtHashMix(dtHashMix(from, (uint64_t)(us->operand + 2)),
                                 (uint64_t)g->result);
        if (g->producer >= 0)
          next[g->producer] +=
              dtHashMix(dtHashMix(label[us->k], (uint64_t)(us->operand + 2)),
                        (uint64_t)g->result + 1000);
      }
    }
    memcpy(label, next, sizeof(uint64_t) * (size_t)n);
  }
  DtTable first = dtTableInit(sizeof(OpIndex));
  bool ok = true;
  for (int k = 0; k < n && ok; ++k) {
    A->tie[k] = k;
    uint64_t key = label[k];
    OpIndex *hit = dtTableFind(&first, dtHashMix(3, key), sameOpIndex,
                               (const void *)(uintptr_t)key);
    if (hit) {
      A->tie[k] = hit->index;
      continue;
    }
    OpIndex *slot = dtTableInsert(&first, dtHashMix(3, key));
    ok = slot != NULL;
    if (ok) {
      slot->op = (const void *)(uintptr_t)key;
      slot->index = k;
    }
  }
  dtTableFree(&first);
  free(label);
  free(next);
  return ok;
}

/* Edges and values of several users that alike vars repeat: the first
 * of each kind is priced, times its count. */
typedef struct Alike {
  uint64_t key;
  bool isEdge;
  int first, count;
} Alike;

static bool sameAlike(const void *entry, const void *key) {
  const Alike *a = entry, *b = key;
  return a->key == b->key && a->isEdge == b->isEdge;
}

/* The key of a value of several users: its maker's class and result, its
 * type, and its users' classes and operands (summed: their order does not
 * matter). */
static uint64_t groupKey(const Auto *A, const Group *g) {
  uint64_t users = 0;
  for (int u = g->firstUser; u >= 0; u = A->users[u].next)
    users += dtHashMix(dtHashMix(11, A->tie[A->users[u].k]),
                       (uint64_t)(A->users[u].operand + 2));
  uint64_t h = dtHashMix(13, g->producer >= 0 ? A->tie[g->producer] : -1);
  h = dtHashMix(h, (uint64_t)g->result);
  h = dtHashMix(h, (uint64_t)(uintptr_t)mlirValueGetType(g->info->value).ptr);
  if (g->producer < 0)
    h = hashCSpec(h, g->info->spec);
  return dtHashMix(h, users);
}

/* Pass 0 counts each kind; pass 1 prices the first of each. */
static bool countAlike(Auto *A, DtTable *seen, int pass, uint64_t key,
                       int index, bool isEdge) {
  Alike probe = {key, isEdge, index, 0};
  uint64_t hash = dtHashMix(key, isEdge);
  Alike *hit = dtTableFind(seen, hash, sameAlike, &probe);
  if (pass == 0) {
    if (hit) {
      ++hit->count;
      return true;
    }
    hit = dtTableInsert(seen, hash);
    if (!hit)
      return false;
    *hit = probe;
    hit->count = 1;
    return true;
  }
  if (!hit || hit->first != index)
    return true;
  if (isEdge) {
    int a, b;
    const double *m;
    dtChoiceEdge(A->graph, index, &a, &b, &m);
    return addPairwise(A, a, b, m, (double)hit->count);
  }
  return addConversions(A, &A->groups[index], (double)hit->count);
}

/* The integer program of what the reductions left: a column per
 * candidate of each var still in the graph, the edges, the values of
 * several users, and the budget's rows. */
static bool buildProgram(Auto *A) {
  Refine *R = A->R;
  dtIlpDestroy(A->ilp);
  dtChoiceDestroy(A->graph);
  A->ilp = dtIlpCreate();
  A->graph = dtChoiceCreate();
  A->numScratch = 0;
  A->numTouched = 0;
  if (!A->ilp || !A->graph || !buildGraph(A))
    return false;
  dtIlpUseBasis(A->ilp, &A->basis);
  /* A var alike an earlier one shares its columns (and adds its costs to
   * them). */
  for (int k = 0; k < R->count; ++k) {
    A->firstCol[k] = -1;
    if (!dtChoiceIsAlive(A->graph, k))
      continue;
    const double *cost = dtChoiceCosts(A->graph, k);
    int t = A->tie[k];
    if (t != k && A->firstCol[t] >= 0) {
      A->firstCol[k] = A->firstCol[t];
      for (int c = 0; c < dtChoiceNumChoices(A->graph, k); ++c) {
        int col = A->firstCol[k] + c;
        if (isinf(cost[c]))
          dtIlpSetColBounds(A->ilp, col, 0.0, 0.0);
        else
          A->ilp->obj[col] += cost[c];
      }
      continue;
    }
    A->firstCol[k] = dtIlpNumCols(A->ilp);
    for (int c = 0; c < dtChoiceNumChoices(A->graph, k); ++c)
      if (dtIlpAddCol(A->ilp, 0.0, isinf(cost[c]) ? 0.0 : 1.0,
                      isinf(cost[c]) ? 0.0 : cost[c], true) < 0)
        return false;
  }
  if (!growScratch(A))
    return false;
  for (int k = 0; k < R->count; ++k) {
    if (A->firstCol[k] < 0 || (A->tie[k] != k && A->firstCol[A->tie[k]] >= 0))
      continue;
    for (int c = 0; c < dtChoiceNumChoices(A->graph, k); ++c)
      term(A, A->firstCol[k] + c, 1.0);
    if (!addRow(A, 1.0, 1.0))
      return false;
  }
  /* Edges and values alike earlier ones are priced once, times how many
   * there are. */
  DtTable seen = dtTableInit(sizeof(Alike));
  bool ok = true;
  for (int pass = 0; pass < 2 && ok; ++pass) {
    for (int e = 0; e < dtChoiceNumEdges(A->graph) && ok; ++e) {
      int a, b;
      const double *m;
      if (dtChoiceEdge(A->graph, e, &a, &b, &m))
        ok = countAlike(A, &seen, pass,
                        dtHashMix(dtHashMix(5, A->tie[a]), A->tie[b]), e, true);
    }
    for (size_t gi = 0; gi < A->numGroups && ok; ++gi)
      if (A->hyper[gi])
        ok = countAlike(A, &seen, pass, groupKey(A, &A->groups[gi]), (int)gi,
                        false);
  }
  dtTableFree(&seen);
  if (!ok)
    return false;
  for (size_t i = 0; i < A->numPoints; ++i)
    if (!addMemoryRow(A, A->points[i]))
      return false;
  /* A pinned var's candidate forbidden by its bound alone, after the rows
   * (which price open candidates only): the program is the answer's, and
   * its LP starts from the answer's basis. */
  if (A->forbidK >= 0 && A->pinned[A->forbidK] && A->firstCol[A->forbidK] >= 0)
    dtIlpSetColBounds(A->ilp, A->firstCol[A->forbidK] + A->forbidC, 0.0, 0.0);
  /* The vars' current choices, where the solver may start. */
  int numX = dtIlpNumCols(A->ilp);
  int *cols = malloc(sizeof(int) * (size_t)(numX + 1));
  double *vals = malloc(sizeof(double) * (size_t)(numX + 1));
  int n = 0;
  ok = cols && vals;
  for (int k = 0; k < R->count && ok; ++k) {
    if (A->firstCol[k] < 0 || (A->tie[k] != k && A->firstCol[A->tie[k]] >= 0))
      continue;
    const Var *v = &R->vars[R->order[k]];
    for (size_t c = 0; c < v->numCands; ++c) {
      cols[n] = A->firstCol[k] + (int)c;
      int from = A->fits ? A->fits[k] : A->start ? A->start[k] : v->current;
      vals[n++] = (int)c == from ? 1.0 : 0.0;
    }
  }
  ok = ok && dtIlpSetStart(A->ilp, n, cols, vals);
  free(cols);
  free(vals);
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
      A->extra[A->candBase[k] + (int)c] += cost;
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

static bool addLive(Auto *A, DtTable *index, MlirValue v, int def) {
  Refine *R = A->R;
  Info *in = dtPropInfo(A->p, v);
  if (!in || !in->isTensor || holdsNothing(v))
    return true;
  /* The caller holds the arguments throughout (as dtensor-report counts
   * them). */
  int last = def < 0 ? A->numOps - 1 : def;
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

/* The values made inside an op's regions (a loop's body, a branch) live
 * while the op runs: each counts at the op, all at once (dtensor-report
 * counts the largest set live together: this is at least that). Their
 * ops are fixed (their layouts are propagation's). */
typedef struct Inner {
  Auto *A;
  DtTable *index;
  MlirOperation top;
  int at;
  bool ok;
} Inner;

static MlirWalkResult addInner(MlirOperation op, void *data) {
  Inner *in = data;
  if (mlirOperationEqual(op, in->top))
    return MlirWalkResultAdvance;
  for (intptr_t j = 0; in->ok && j < mlirOperationGetNumResults(op); ++j)
    in->ok = addLive(in->A, in->index, mlirOperationGetResult(op, j), in->at);
  return in->ok ? MlirWalkResultAdvance : MlirWalkResultInterrupt;
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
  /* Where each value some var uses is used: a conversion's buffer lives
   * there. */
  for (size_t gi = 0; gi < A->numGroups; ++gi) {
    Group *g = &A->groups[gi];
    g->firstUse = n;
    g->lastUse = -1;
    for (MlirOpOperand u = mlirValueGetFirstUse(g->info->value);
         !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
      MlirOperation at = inEntry(R->entry, mlirOpOperandGetOwner(u));
      const OpIndex *hit =
          mlirOperationIsNull(at)
              ? NULL
              : dtTableFind(&index, groupHash(at.ptr), sameOpIndex, at.ptr);
      if (!hit)
        continue;
      if (hit->index < g->firstUse)
        g->firstUse = hit->index;
      if (hit->index > g->lastUse)
        g->lastUse = hit->index;
    }
  }
  /* Where each user is: a converted copy lives from the first user that
   * needs it to the last. */
  for (size_t u = 0; u < A->numUsers; ++u) {
    MlirOperation op = R->vars[R->order[A->users[u].k]].op;
    const OpIndex *hit =
        mlirOperationIsNull(op)
            ? NULL
            : dtTableFind(&index, groupHash(op.ptr), sameOpIndex, op.ptr);
    A->users[u].at = hit ? hit->index : -1;
  }
  for (intptr_t i = 0; ok && i < mlirBlockGetNumArguments(R->entry); ++i)
    ok = addLive(A, &index, mlirBlockGetArgument(R->entry, i), -1);
  int at = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(R->entry);
       !mlirOperationIsNull(op) && ok;
       op = mlirOperationGetNextInBlock(op), ++at) {
    for (intptr_t j = 0; ok && j < mlirOperationGetNumResults(op); ++j)
      ok = addLive(A, &index, mlirOperationGetResult(op, j), at);
    if (ok && mlirOperationGetNumRegions(op)) {
      Inner in = {A, &index, op, at, true};
      mlirOperationWalk(op, addInner, &in, MlirWalkPreOrder);
      ok = in.ok;
    }
  }
  dtTableFree(&index);
  return ok;
}

/* The bytes of live value `l` under the picks. */
static double liveBytes(const Auto *A, const Live *l, const int *pick) {
  if (l->var < 0)
    return bytesOf(A->p, l->info, l->info->spec);
  const Var *v = &A->R->vars[A->R->order[l->var]];
  return bytesOf(A->p, l->info, v->cands[pick[l->var]].res[l->result]);
}

/* The layout group `g`'s value is made in under the picks. */
static CSpec madeUnder(const Auto *A, const Group *g, const int *pick) {
  return g->producer >= 0
             ? madeBy(A, g->producer, (size_t)pick[g->producer], g->result)
             : g->info->spec;
}

/* A converted copy in `layout` and the ops where it lives. */
typedef struct CopyRange {
  CSpec layout;
  int first, last;
} CopyRange;

/* Widens to [lo, hi] the range of the copy in `L` among the `*n` of `r`
 * (64 at most). */
static void widen(CopyRange *r, int *n, CSpec L, int lo, int hi) {
  int k = 0;
  while (k < *n && !sameCSpec(r[k].layout, L))
    ++k;
  if (k == *n) {
    if (*n < 64)
      r[(*n)++] = (CopyRange){L, lo, hi};
    return;
  }
  r[k].first = lo < r[k].first ? lo : r[k].first;
  r[k].last = hi > r[k].last ? hi : r[k].last;
}

/* Adds to `delta` (per op + 1) the converted copies of group `g`'s value
 * under the picks: each distinct layout its users need other than the
 * one it is made in (a collective's result, or a local slice, is a
 * buffer of its own), from the first user that needs it to the last (a
 * fixed op's need: from the value's first use to its last). */
static void addCopies(const Auto *A, const Group *g, const int *pick,
                      double *delta) {
  CSpec from = madeUnder(A, g, pick);
  CopyRange copies[64];
  int n = 0;
  for (int u = g->firstUser; u >= 0; u = A->users[u].next) {
    const User *us = &A->users[u];
    CSpec L = needOf(A, us, (size_t)pick[us->k]);
    if (!sameCSpec(L, from))
      widen(copies, &n, L, us->at < 0 ? g->firstUse : us->at,
            us->at < 0 ? g->lastUse : us->at);
  }
  for (int f = 0; f < g->numFixedNeeds; ++f) {
    CSpec L = A->R->shared[g->fixedNeeds + (size_t)f];
    if (!sameCSpec(L, from))
      widen(copies, &n, L, g->firstUse, g->lastUse);
  }
  for (int k = 0; k < n; ++k) {
    double b = bytesOf(A->p, g->info, copies[k].layout);
    delta[copies[k].first + 1] += b;
    delta[copies[k].last + 2] -= b;
  }
}

/* The op where the picks hold the most bytes (-1: the arguments alone),
 * and those bytes, as the compiled program holds them. */
static double peakOf(const Auto *A, const int *pick, int *at) {
  double *delta = calloc((size_t)A->numOps + 2, sizeof(double));
  *at = -1;
  if (!delta)
    return INFINITY;
  for (size_t i = 0; i < A->numLives; ++i) {
    const Live *l = &A->lives[i];
    double b = liveBytes(A, l, pick);
    delta[l->def + 1] += b;
    delta[l->last + 2] -= b;
  }
  for (size_t gi = 0; gi < A->numGroups; ++gi) {
    const Group *g = &A->groups[gi];
    if (g->lastUse >= g->firstUse)
      addCopies(A, g, pick, delta);
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

/* Adds to the row being built the maker's candidates that make layout
 * `L` of group `g`'s value, times `sign`; the constant 1 or 0 when the
 * maker is fixed (returned). */
static double madeTerm(Auto *A, const Group *g, CSpec L, double sign) {
  if (g->producer < 0)
    return sameCSpec(g->info->spec, L) ? 1.0 : 0.0;
  const Var *m = &A->R->vars[A->R->order[g->producer]];
  for (size_t c = 0; c < m->numCands; ++c)
    if (sameCSpec(m->cands[c].res[g->result], L))
      term(A, A->firstCol[g->producer] + (int)c, sign);
  return 0.0;
}

/* A column z, at least 1 when some user of group `g`'s value needs `L`
 * and its maker makes another layout: the converted copy exists (counted
 * wherever the value is used). -1 when it can never exist, -2 when out
 * of memory. */
static int copyColumn(Auto *A, const Group *g, CSpec L) {
  int z = dtIlpAddCol(A->ilp, 0.0, 1.0, 0.0, false);
  if (z < 0 || !growScratch(A))
    return -2;
  bool any = false;
  for (int u = g->firstUser; u >= 0; u = A->users[u].next) {
    if (!termNeeding(A, &A->users[u], L, -1.0))
      continue;
    /* z >= this user needs L - the maker makes L */
    term(A, z, 1.0);
    double made = madeTerm(A, g, L, 1.0);
    if (!addRow(A, -made, INFINITY))
      return -2;
    any = true;
  }
  if (dtRefineHasCSpec(A->R->shared + g->fixedNeeds, (size_t)g->numFixedNeeds,
                       L)) {
    term(A, z, 1.0);
    double made = madeTerm(A, g, L, 1.0);
    if (!addRow(A, 1.0 - made, INFINITY))
      return -2;
    any = true;
  }
  return any ? z : -1;
}

/* Whether some candidate of user `us` needs `L`. */
static bool mayNeed(const Auto *A, const User *us, CSpec L) {
  const Var *uv = &A->R->vars[A->R->order[us->k]];
  for (size_t c = 0; c < uv->numCands; ++c)
    if (sameCSpec(needOf(A, us, c), L))
      return true;
  return false;
}

/* The row y >= need(u) [+ need(w) - 1] - made(L) of group `g`. */
static bool copyRow(Auto *A, const Group *g, CSpec L, int y, const User *u,
                    const User *w) {
  termNeeding(A, u, L, -1.0);
  if (w)
    termNeeding(A, w, L, -1.0);
  term(A, y, 1.0);
  double made = madeTerm(A, g, L, 1.0);
  return addRow(A, (w ? -1.0 : 0.0) - made, INFINITY);
}

/* A column y, at least 1 when op `at` runs while the converted copy of
 * group `g`'s value in layout `L` lives and its maker makes another
 * layout: when a user at `at` needs `L`, or one before it and one after
 * it do (a fixed op's need: wherever the value is used). -1 when it can
 * never be, -2 when out of memory. */
static int copyLiveColumn(Auto *A, const Group *g, CSpec L, int at) {
  int y = dtIlpAddCol(A->ilp, 0.0, 1.0, 0.0, false);
  if (y < 0 || !growScratch(A))
    return -2;
  if (dtRefineHasCSpec(A->R->shared + g->fixedNeeds, (size_t)g->numFixedNeeds,
                       L)) {
    term(A, y, 1.0);
    double made = madeTerm(A, g, L, 1.0);
    return addRow(A, 1.0 - made, INFINITY) ? y : -2;
  }
  bool any = false, ok = true;
  for (int i = g->firstUser; i >= 0 && ok; i = A->users[i].next) {
    const User *u = &A->users[i];
    if (u->at > at || !mayNeed(A, u, L))
      continue;
    if (u->at < 0 || u->at == at) {
      ok = copyRow(A, g, L, y, u, NULL);
      any = true;
      continue;
    }
    for (int j = g->firstUser; j >= 0 && ok; j = A->users[j].next) {
      const User *w = &A->users[j];
      if (w->at > at && w->k != u->k && mayNeed(A, w, L)) {
        ok = copyRow(A, g, L, y, u, w);
        any = true;
      }
    }
  }
  return !ok ? -2 : any ? y : -1;
}

/* A converted copy's column and its bytes. */
typedef struct Copy {
  int col;
  double bytes;
} Copy;

/* The row: the bytes live at op `at` fit the budget (the vars it reads
 * are pinned, so in the program): values, and the converted copies of
 * the values used around it. */
static bool addMemoryRow(Auto *A, int at) {
  /* The copies' columns first (their rows are built one at a time). */
  Copy *copies = NULL;
  size_t numCopies = 0, capCopies = 0;
  bool ok = true;
  for (size_t gi = 0; gi < A->numGroups && ok; ++gi) {
    const Group *g = &A->groups[gi];
    if (g->firstUse > at || g->lastUse < at)
      continue;
    CSpec seen[64];
    int numSeen = 0;
    for (int u = g->firstUser; u >= 0 && ok; u = A->users[u].next) {
      const User *us = &A->users[u];
      const Var *uv = &A->R->vars[A->R->order[us->k]];
      for (size_t c = 0; c < uv->numCands && ok; ++c) {
        CSpec L = needOf(A, us, c);
        if (dtRefineHasCSpec(seen, (size_t)numSeen, L) || numSeen == 64)
          continue;
        seen[numSeen++] = L;
        int z =
            A->exactCopies ? copyLiveColumn(A, g, L, at) : copyColumn(A, g, L);
        ok = z != -2;
        if (z < 0)
          continue;
        Copy *slot =
            dtArrayPush((void **)&copies, &numCopies, &capCopies, sizeof(Copy));
        ok = slot != NULL;
        if (ok)
          *slot = (Copy){z, bytesOf(A->p, g->info, L)};
      }
    }
  }
  double fixed = 0.0;
  for (size_t i = 0; i < A->numLives && ok; ++i) {
    const Live *l = &A->lives[i];
    if (l->def > at || l->last < at)
      continue;
    if (l->var < 0 || A->firstCol[l->var] < 0) {
      fixed += liveBytes(A, l, A->pick);
      continue;
    }
    const Var *v = &A->R->vars[A->R->order[l->var]];
    for (size_t c = 0; c < v->numCands; ++c)
      term(A, A->firstCol[l->var] + (int)c,
           bytesOf(A->p, l->info, v->cands[c].res[l->result]));
  }
  for (size_t i = 0; i < numCopies && ok; ++i)
    term(A, copies[i].col, copies[i].bytes);
  ok = ok && addRow(A, -INFINITY, (double)A->p->memoryBudget - fixed);
  free(copies);
  return ok;
}

/* A memory row at op `at` from the next build on: the vars live there
 * pinned (their columns read by the row). False when out of memory. */
static bool addPoint(Auto *A, int at) {
  for (size_t i = 0; i < A->numPoints; ++i)
    if (A->points[i] == at)
      return true;
  for (size_t i = 0; i < A->numLives; ++i) {
    const Live *l = &A->lives[i];
    if (l->def <= at && l->last >= at && l->var >= 0)
      A->pinned[l->var] = true;
  }
  for (size_t gi = 0; gi < A->numGroups; ++gi) {
    const Group *g = &A->groups[gi];
    if (g->firstUse > at || g->lastUse < at)
      continue;
    if (g->producer >= 0)
      A->pinned[g->producer] = true;
    for (int u = g->firstUser; u >= 0; u = A->users[u].next)
      A->pinned[A->users[u].k] = true;
  }
  int *slot = dtArrayPush((void **)&A->points, &A->numPoints, &A->capPoints,
                          sizeof(int));
  if (slot)
    *slot = at;
  return slot != NULL;
}

/* ---- solving ------------------------------------------------------------- */

/* Keeps `pick` (of cost `cost`) as the cheapest plan within the budget
 * solve() knows, unless one no dearer is kept. False when out of memory. */
static bool keepFit(Auto *A, const int *pick, double cost, double *fitsCost) {
  if (A->fits && *fitsCost <= cost)
    return true;
  if (!A->fits)
    A->fits = malloc(sizeof(int) * (size_t)(A->R->count + 1));
  if (!A->fits)
    return false;
  memcpy(A->fits, pick, sizeof(int) * (size_t)A->R->count);
  *fitsCost = cost;
  return true;
}

/* The budget a peak is held to (with the rounding of a sum of bytes). */
static double budgetOf(const Prop *p) {
  return (double)p->memoryBudget * (1.0 + 1e-9);
}

/* A start not priced before (why's), as the solve completed it: kept
 * within the budget (its reduced vars as the reductions pick them), and
 * priced. False when out of memory. */
static bool keepStart(Auto *A, const DtIlpResult *out, double *fitsCost) {
  A->startCost = out->startObjective + dtChoiceConstant(A->graph);
  int *pick = malloc(sizeof(int) * (size_t)(A->R->count + 1));
  if (!pick)
    return false;
  memcpy(pick, A->start, sizeof(int) * (size_t)A->R->count);
  dtChoiceExpand(A->graph, pick);
  int at;
  bool ok = peakOf(A, pick, &at) > budgetOf(A->p) ||
            keepFit(A, pick, A->startCost, fitsCost);
  free(pick);
  return ok;
}

/* Builds and solves, then, while the plan breaks the budget at some op,
 * pins the vars live there, adds that op's row and solves again. Those
 * rounds stop at their first plan (one that breaks the budget elsewhere
 * is not worth proving optimal: the 2-layer Adam step on 2x4 spent its
 * time limit proving such plans); the first that fits is solved again
 * in full from itself. The cheapest plan seen within the budget (the
 * start's too) is the answer when the rounds or the time run out. The
 * picks of every var in A->pick; the last result in `out`.
 *
 * Under a budget the answer is optimal, and has a bound, only as far as
 * a relaxation of the budget proved it: a program without memory rows,
 * or with rows that count each copy where it lives (a subset of the
 * ops' exact rows). Rows that count a copy wherever its value is used
 * ask more than a plan needs: their optimum may be dearer than the
 * budget's, their infeasibility is not the budget's. An answer optimal
 * under those is solved again under the exact rows, from itself, while
 * there is time. */
static void solve(Auto *A, DtIlpResult *out) {
  Prop *p = A->p;
  Refine *R = A->R;
  double budget = budgetOf(p);
  bool quick = false, again = false, ok = true;
  double fitsCost = INFINITY;
  double lower = -INFINITY; /* the best bound a relaxation proved */
  bool relaxes = true;      /* the last program relaxes the budget */
  /* The answer's and why's: not the restricted programs' (a start). */
  bool proving = A->restrict_ < 0;
  /* The rows the restricted programs found, left out of the answer's
   * first build: its program relaxes the budget (a bound, and the optimum
   * when its plan fits: the 2-layer Adam step on 2x2 under 2833459
   * bytes). Why's first builds are the answer's last program (its LP's
   * basis is theirs): without the rows it did not have, counting copies
   * as it did. */
  bool why = A->forbidK >= 0 && A->answerPoints >= 0;
  size_t held = p->memoryBudget <= 0 ? 0
                : why                ? A->numPoints - (size_t)A->answerPoints
                : proving            ? A->numPoints
                                     : 0;
  A->numPoints -= held;
  A->exactCopies = why && A->answerExact;
  int at;
  if (p->memoryBudget > 0 && A->start && !isnan(A->startCost) &&
      (A->forbidK < 0 || A->start[A->forbidK] != A->forbidC) &&
      peakOf(A, A->start, &at) <= budget)
    ok = keepFit(A, A->start, A->startCost, &fitsCost);
  for (; ok;) {
    if (!(ok = buildProgram(A)))
      break;
    if (proving && A->forbidK < 0) {
      A->answerPoints = (int)A->numPoints;
      A->answerExact = A->exactCopies;
    }
    /* Solved again in full from a plan that fits, a plan may break the
     * budget at an op with no row yet, and so may the first build's
     * without the held rows: half the time left, the rest for the rounds
     * that follow (why's first all of its share: its start is its answer
     * when the relaxation's plan does not fit). */
    double left =
        (A->until - A->seconds) * (again || (held && !why) ? 0.5 : 1.0);
    dtIlpStopAtFirst(A->ilp, quick);
    dtIlpSolve(A->ilp, p->solver, left > 0.05 ? left : 0.05, out);
    A->seconds += out->seconds;
    if (p->memoryBudget > 0 && A->start && isnan(A->startCost) &&
        out->startObjective < INFINITY && !(ok = keepStart(A, out, &fitsCost)))
      break;
    relaxes = A->numPoints == 0 || A->exactCopies;
    A->numPoints += held;
    held = 0;
    if (out->status == DT_ILP_INFEASIBLE && !relaxes && A->restrict_ < 0 &&
        A->seconds < A->until) {
      /* Counted wherever their values are used, the copies may not fit
       * where they would: the full program again with each counted where
       * it lives (a weaker relaxation: the restricted programs, there for
       * a start, do without). */
      A->exactCopies = true;
      quick = true;
      continue;
    }
    if (out->status != DT_ILP_OPTIMAL && out->status != DT_ILP_FEASIBLE)
      break;
    out->bound += dtChoiceConstant(A->graph);
    for (int k = 0; k < R->count; ++k) {
      A->pick[k] = 0;
      if (A->firstCol[k] < 0)
        continue; /* reduced: expanded below */
      for (int c = 0; c < dtChoiceNumChoices(A->graph, k); ++c)
        if (out->x[A->firstCol[k] + c] > 0.5)
          A->pick[k] = c;
    }
    dtChoiceExpand(A->graph, A->pick);
    out->objective += dtChoiceConstant(A->graph);
    if (p->memoryBudget <= 0)
      break;
    if (relaxes) /* an optimum, or a search's bound (fmax skips a NaN) */
      lower = fmax(lower,
                   out->status == DT_ILP_OPTIMAL ? out->objective : out->bound);
    double peak = peakOf(A, A->pick, &at);
    if (peak <= budget) {
      if (!(ok = keepFit(A, A->pick, out->objective, &fitsCost)))
        break;
      if ((out->status == DT_ILP_OPTIMAL && relaxes) || A->seconds >= A->until)
        break;
      again = true;
      if (quick && out->status != DT_ILP_OPTIMAL) {
        quick = false; /* the first plan that fits: again in full from it */
        continue;
      }
      if (!A->exactCopies && proving) {
        quick = false; /* optimal under the rows that ask more: proven, or */
        A->exactCopies = true; /* bettered, under the exact ones */
        continue;
      }
      break;
    }
    if (++A->rounds > kMemoryRounds || A->seconds >= A->until) {
      out->status = DT_ILP_NO_SOLUTION;
      snprintf(out->message, sizeof(out->message),
               "no plan within the budget found in %d rounds", A->rounds);
      break;
    }
    if (!(ok = addPoint(A, at)))
      break;
    quick = true;
  }
  A->numPoints += held; /* when the first build failed */
  if (!ok) {
    out->status = DT_ILP_ERROR;
    snprintf(out->message, sizeof(out->message), "out of memory");
  } else if (A->fits && out->status != DT_ILP_ERROR) {
    /* The cheapest plan within the budget seen (the first of equals: a
     * later solve's as cheap, another layout at a larger peak, does not
     * replace it). Optimal below when a relaxation proved it. */
    if (out->status != DT_ILP_OPTIMAL && out->status != DT_ILP_FEASIBLE)
      out->bound = NAN; /* the last solve's, without the reductions' */
    memcpy(A->pick, A->fits, sizeof(int) * (size_t)R->count);
    out->objective = fitsCost;
    out->status = DT_ILP_FEASIBLE;
  }
  if (ok && p->memoryBudget > 0 && A->restrict_ < 0 &&
      out->status == DT_ILP_INFEASIBLE && !relaxes) {
    /* Not a proof (the answer's, or why's "none that fits"). */
    out->status = DT_ILP_NO_SOLUTION;
    snprintf(out->message, sizeof(out->message),
             "time limit; none under the rows that count each converted "
             "copy wherever its value is used, not solved under the exact "
             "ones");
  } else if (ok && p->memoryBudget > 0 && proving) {
    if (out->status == DT_ILP_OPTIMAL || out->status == DT_ILP_FEASIBLE) {
      bool proven =
          out->objective <= lower + 1e-9 * fmax(1.0, fabs(out->objective));
      out->status = proven ? DT_ILP_OPTIMAL : DT_ILP_FEASIBLE;
      out->bound = proven ? out->objective : isinf(lower) ? NAN : lower;
    }
  }
  free(A->fits);
  A->fits = NULL;
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

/* The price of the conversions of the values var `k` makes under the
 * picks (each distinct layout its var users need, fixed users' ones
 * excluded: those are in its candidate's own cost). */
static double ownConversions(Auto *A, int k, const int *pick) {
  double total = 0.0;
  for (size_t gi = 0; gi < A->numGroups; ++gi) {
    const Group *g = &A->groups[gi];
    if (g->producer != k)
      continue;
    CSpec from = madeBy(A, k, (size_t)pick[k], g->result);
    CSpec seen[64];
    int numSeen = 0;
    for (int u = g->firstUser; u >= 0; u = A->users[u].next) {
      const User *us = &A->users[u];
      CSpec L = needOf(A, us, (size_t)pick[us->k]);
      if (dtRefineHasCSpec(seen, (size_t)numSeen, L) ||
          dtRefineHasCSpec(A->R->shared + g->fixedNeeds,
                           (size_t)g->numFixedNeeds, L))
        continue;
      if (numSeen < 64)
        seen[numSeen++] = L;
      total += convert(A, g->info, from, L);
    }
  }
  return total;
}

/* The answer `best` with var k and the vars that pick alike on
 * candidate `c`, into `alt`. */
static void switched(const Auto *A, const int *best, int k, int c, int *alt) {
  memcpy(alt, best, sizeof(int) * (size_t)A->R->count);
  for (int j = 0; j < A->R->count; ++j)
    if (A->tie[j] == A->tie[k])
      alt[j] = c;
}

/* A start for why's solve of var `k` without candidate best[k]: the
 * answer with k on the other candidate whose own price and conversions
 * are least, of those within the budget where one is, into `alt`; false
 * when it has none. Its completion is the solve's cutoff, and what it
 * reports (best found, not proven) when its share of the time ends
 * first. */
static bool otherStart(Auto *A, int k, const int *best, int *alt) {
  const Var *v = &A->R->vars[A->R->order[k]];
  int other = -1;
  bool otherFits = false;
  double least = INFINITY;
  for (size_t c = 0; c < v->numCands; ++c) {
    if ((int)c == best[k] || isinf(v->cands[c].fixedCost))
      continue;
    switched(A, best, k, (int)c, alt);
    double price = v->cands[c].fixedCost + ownConversions(A, k, alt);
    int at;
    bool fits =
        A->p->memoryBudget <= 0 || peakOf(A, alt, &at) <= budgetOf(A->p);
    if ((fits && !otherFits) || (fits == otherFits && price < least)) {
      least = price;
      other = (int)c;
      otherFits = fits;
    }
  }
  if (other >= 0)
    switched(A, best, k, other, alt);
  return other >= 0;
}

/* why=true: per argument chosen here, its layout, bytes, conversions and
 * the best plan with another layout (solved again without this one).
 * Those solves share one more time limit, each its part of what is left:
 * on the 2-layer Adam step on 2x4 (75 arguments, 177k columns) each
 * rebuild and root LP took seconds, and the 75 of them over 10 minutes. */
static void explain(Auto *A, const int *best, double objective, double peak) {
  Refine *R = A->R;
  Prop *p = A->p;
  MlirStringRef fname = mlirStringAttrGetValue(dtGetAttr(p->func, "sym_name"));
  fprintf(stderr,
          "dtensor-auto-shard: @%.*s: modelled step %.3f us, peak %.0f bytes "
          "per device",
          (int)fname.length, fname.data, objective, peak);
  if (p->memoryBudget > 0)
    fprintf(stderr, " of a budget of %lld", (long long)p->memoryBudget);
  fprintf(stderr, "\n");
  int toSolve = 0;
  for (int k = 0; k < R->count; ++k)
    toSolve +=
        R->vars[R->order[k]].arg >= 0 && R->vars[R->order[k]].numCands > 1;
  double started = dtMonotonicSeconds();
  int *alt = malloc(sizeof(int) * (size_t)(R->count + 1));
  int *kept = A->start;
  double keptCost = A->startCost;
  for (int k = 0; k < R->count; ++k) {
    const Var *v = &R->vars[R->order[k]];
    if (v->arg < 0)
      continue;
    char name[128], chosen[96], other[96] = "none";
    argName(p, v->arg, name, sizeof(name));
    specText(v->results[0], v->cands[best[k]].res[0], chosen, sizeof(chosen));
    double bytes = bytesOf(p, v->results[0], v->cands[best[k]].res[0]);
    double own = v->cands[best[k]].fixedCost + ownConversions(A, k, best);
    double altCost = NAN, altBound = NAN;
    bool proven = false;
    double left = p->timeLimit - (dtMonotonicSeconds() - started);
    double share = toSolve > 0 ? left / toSolve : left; /* its part */
    if (v->numCands > 1 && left <= 0.0)
      snprintf(other, sizeof(other),
               "not solved (why=true's time-limit spent)");
    else if (v->numCands > 1) {
      A->forbidK = k;
      A->forbidC = best[k];
      A->basis.frozen = true; /* each from the answer's basis */
      A->until = A->seconds + share;
      A->start = alt && otherStart(A, k, best, alt) ? alt : kept;
      A->startCost = NAN; /* completed and priced by the solve */
      DtIlpResult res;
      solve(A, &res);
      A->start = kept;
      A->startCost = keptCost;
      if (res.status == DT_ILP_OPTIMAL || res.status == DT_ILP_FEASIBLE) {
        altCost = res.objective + A->constant;
        proven = res.status == DT_ILP_OPTIMAL;
        /* Its LP's bound, or under a budget a relaxation's (solve()). */
        if (!proven && !isnan(res.bound))
          altBound = res.bound + A->constant;
        specText(v->results[0], v->cands[A->pick[k]].res[0], other,
                 sizeof(other));
      } else if (res.status == DT_ILP_INFEASIBLE)
        snprintf(other, sizeof(other), "none that fits");
      else /* its share of the limit: a larger time-limit explains more */
        snprintf(other, sizeof(other), "none found in its %.2f s of time-limit",
                 share);
      A->forbidK = -1;
    }
    toSolve -= v->numCands > 1;
    fprintf(stderr,
            "  %s: %s, %.0f bytes per device, its conversions %.3f us; "
            "%s %s",
            name, chosen, bytes, own,
            isnan(altCost) || proven ? "next best" : "best other found", other);
    if (!isnan(altCost)) {
      /* As dear to the rounding (no "+-0.000"); dearer, or cheaper when
       * the answer is not proven optimal. */
      double more = altCost - objective;
      if (fabs(more) <= 1e-9 * fmax(1.0, fabs(objective)))
        more = 0.0;
      fprintf(stderr, " (step %.3f us, %+.3f", altCost, more);
      if (!proven && !isnan(altBound))
        fprintf(stderr, "; the next best at least %.3f us", altBound);
      if (!proven)
        fprintf(stderr,
                "; not proven the next best in its %.2f s of "
                "time-limit",
                share);
      fprintf(stderr, ")");
    }
    fprintf(stderr, "\n");
  }
  free(alt);
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
  int numCands = 0;
  for (int k = 0; k < R->count; ++k) {
    A->candBase[k] = numCands;
    numCands += (int)R->vars[R->order[k]].numCands;
  }
  A->extra = calloc((size_t)numCands + 1, sizeof(double));
  if (!A->extra || !collectGroups(A, ret) || !collectLives(A))
    return NULL;
  A->hyper = calloc(A->numGroups + 1, sizeof(bool));
  if (!A->hyper)
    return NULL;
  /* Repeated layers alike (4 rounds tell a layer next to the ends from
   * the others); every var stays in the program then. */
  A->tie = malloc(sizeof(int) * (size_t)(R->count + 1));
  if (!A->tie)
    return NULL;
  if (p->layersAlike) {
    if (!findTies(A, 4))
      return NULL;
  } else
    for (int k = 0; k < R->count; ++k)
      A->tie[k] = k;
  for (int k = 0; k < R->count; ++k)
    A->numTied += A->tie[k] != k;
  /* Arguments stay in the program when the budget or why reads them. */
  for (int k = 0; k < R->count; ++k)
    A->pinned[k] =
        R->vars[R->order[k]].arg >= 0 && (p->memoryBudget > 0 || p->autoWhy);
  /* On a mesh of several axes the program is large: first the plans on
   * one axis at a time and on all together (as on 1-d meshes: small
   * programs, solved fast); the best is where the full program starts,
   * so its plan is never dearer than those. */
  int rank = dtensorMeshGetRank(p->mesh);
  double bestStart = INFINITY;
  A->restrict_ = -1;
  if (rank > 1) {
    A->start = malloc(sizeof(int) * (size_t)(R->count + 1));
    if (!A->start)
      return NULL;
    int *kept = A->start;
    A->start = NULL;
    for (int r = 0; r <= rank; ++r) {
      A->restrict_ = r;
      /* Half the time limit for these, shared out (what one leaves goes
       * to the next): the 2-layer Adam step on 2x4 under a budget spent
       * 54 s of 60 in one and left the full program none. */
      A->until = p->timeLimit * (r + 1) / (2.0 * (rank + 1));
      DtIlpResult part;
      solve(A, &part);
      if ((part.status == DT_ILP_OPTIMAL || part.status == DT_ILP_FEASIBLE) &&
          part.objective < bestStart) {
        bestStart = part.objective;
        memcpy(kept, A->pick, sizeof(int) * (size_t)R->count);
      }
    }
    A->restrict_ = -1;
    A->until = p->timeLimit;
    A->start = isinf(bestStart) ? (free(kept), NULL) : kept;
    A->startCost = bestStart;
  }
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
  double peak = peakOf(A, A->pick, &at);
  mlirOperationSetDiscardableAttributeByName(
      func, mlirStringRefCreateFromCString(DT_ATTR_AUTO_PEAK),
      mlirIntegerAttrGet(mlirIntegerTypeGet(p->ctx, 64), (int64_t)peak));
  int *best = malloc(sizeof(int) * (size_t)(R->count + 1));
  if (!best)
    return NULL;
  memcpy(best, A->pick, sizeof(int) * (size_t)R->count);
  int columns = dtIlpNumCols(A->ilp), rows = dtIlpNumRows(A->ilp);
  int reducedTo = 0;
  for (int k = 0; k < R->count; ++k)
    reducedTo += A->firstCol[k] >= 0;
  if (p->autoWhy)
    explain(A, best, res.objective + A->constant, peak);
  /* Apply. */
  for (int k = 0; k < R->count && !p->failed; ++k) {
    Var *v = &R->vars[R->order[k]];
    const Cand *c = &v->cands[best[k]];
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
                    "automatic: %s, %.3f us over %d vars, %d after "
                    "reductions, %d alike an earlier one (%s, %d columns, %d "
                    "rows, %d memory rounds, %.2f s%s); peak %.0f bytes "
                    "per device",
                    how, res.objective + A->constant, R->count, reducedTo,
                    A->numTied, dtIlpSolverName(p->solver), columns, rows,
                    A->rounds, A->seconds, gap, peak);
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
  A.forbidK = -1;
  A.answerPoints = -1;
  A.restrict_ = -1;
  A.until = p->timeLimit;
  A.startCost = NAN;
  A.firstCol = malloc(sizeof(int) * cap);
  A.candBase = malloc(sizeof(int) * cap);
  A.pick = calloc(cap, sizeof(int));
  A.pinned = calloc(cap, sizeof(bool));
  A.groupIndex = dtTableInit(sizeof(GroupSlot));
  const char *summary = NULL;
  if (R->pick && R->bestPick && R->suffix && A.firstCol && A.candBase &&
      A.pick && A.pinned && !R->failed)
    summary = finishAuto(&A, func);
  if (!summary && !p->failed)
    R->failed = true;
  if (summary && !p->failed)
    summary = dtPropKeep(p, "%s [%d of them arguments]", summary, numArgVars);
  dtIlpDestroy(A.ilp);
  dtIlpBasisFree(&A.basis);
  dtChoiceDestroy(A.graph);
  free(A.firstCol);
  free(A.candBase);
  free(A.extra);
  free(A.pick);
  free(A.pinned);
  free(A.points);
  free(A.hyper);
  free(A.tie);
  free(A.cols);
  free(A.start);
  free(A.groups);
  dtTableFree(&A.groupIndex);
  free(A.users);
  free(A.lives);
  free(A.coef);
  free(A.inRow);
  free(A.touched);
  return summary ? summary : "failed";
}
