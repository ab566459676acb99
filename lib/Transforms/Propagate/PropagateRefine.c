/* dtensor-propagate: the whole function's choice of strategies.
 *
 * Program order decides each op from its operands and the demands known
 * when it comes; a consumer's needs arrive too late. Here the modelled cost
 * of the function is the sum over every use of a tensor of the conversion
 * from its producer's layout to what the user needs (a value that only
 * initializes and has one use converts for free: it is made in the layout
 * its user wants). Two steps lower it:
 *
 *  1. Refinement: every op next to a conversion is revisited with its
 *     operands' layouts and its results' users' needs as seeds; it takes a
 *     candidate that lowers the cost of the uses it touches, and its
 *     neighbours are revisited in turn, until no single op's change lowers
 *     the cost. Ops far from every conversion are never touched (a cost of
 *     zero is the optimum), so this costs little on large programs.
 *  2. On functions of at most kExactOps ops with a strategy: every
 *     strategy of every op (each mesh axis on any factor, in any order,
 *     and every way a Partial(sum) operand may flow through) in a
 *     branch-and-bound search, for the optimum (PropagateExact.c).
 *     choice=enumerate walks every combination instead, without pruning:
 *     the check of the search.
 *
 * Annotations, function signatures and ops with regions or callees are
 * fixed: their needs and layouts are the constraints. Ties keep the
 * program-order choice, which already honours priorities. */
#include "PropagateRefine.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- operand needs ------------------------------------------------------ */

static bool sameNeedOp(const void *entry, const void *key) {
  return ((const NeedEntry *)entry)->op == key;
}

static uint64_t needHash(const void *op) {
  return dtHashMix(23, (uint64_t)(uintptr_t)op);
}

/* `need` without Partial on the axes `have` is not Partial on (a Partial
 * made locally, which costs nothing to model): dtPropDropCreatedPartial
 * on packed specs, for the check every decision makes. */
static CSpec dropCreated(CSpec need, CSpec have) {
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    if (((need.code >> (8 * a)) & 0xff) == 1 &&
        ((have.code >> (8 * a)) & 0xff) != 1) {
      need.code &= ~((uint64_t)0xff << (8 * a));
      need.partial &= ~((uint32_t)0xf << (4 * a));
    }
  return need;
}

void dtPropNoteNeeds(Prop *p, MlirOperation op, int count,
                     const DtensorShardingSpec *const *need, bool byRule) {
  uint64_t hash = needHash(op.ptr);
  NeedEntry *e = dtTableFind(&p->needs, hash, sameNeedOp, op.ptr);
  if (!e || e->count < count) {
    size_t first = p->numNeedSpecs;
    static const CSpec blank[DT_MAX_RULE_VALUES];
    for (int done = 0; done < count; done += DT_MAX_RULE_VALUES) {
      size_t n =
          (size_t)(count - done < DT_MAX_RULE_VALUES ? count - done
                                                     : DT_MAX_RULE_VALUES);
      if (!dtArrayAppend((void **)&p->needSpecs, &p->numNeedSpecs,
                         &p->capNeedSpecs, sizeof(CSpec), blank, n)) {
        dtPropError(p, op, "out of memory");
        return;
      }
    }
    if (!e)
      e = dtTableInsert(&p->needs, hash);
    if (!e) {
      dtPropError(p, op, "out of memory");
      return;
    }
    e->op = op.ptr;
    e->first = first;
  }
  e->count = count;
  e->byRule = byRule;
  bool costly = false;
  for (int i = 0; i < count; ++i) {
    CSpec *slot = &p->needSpecs[e->first + (size_t)i];
    if (!need[i]) {
      *slot = (CSpec){0, NO_NEED_PARTIAL, 0, 0, 0};
      continue;
    }
    pack(need[i], slot);
    const Info *in = dtPropInfo(p, mlirOperationGetOperand(op, i));
    if (in && in->isTensor && in->known &&
        !sameCSpec(dropCreated(*slot, in->spec), in->spec))
      costly = true;
  }
  if (costly) {
    MlirOperation *slot = dtArrayPush((void **)&p->costly, &p->numCostly,
                                      &p->capCostly, sizeof(MlirOperation));
    if (!slot)
      dtPropError(p, op, "out of memory");
    else
      *slot = op;
  }
}

static NeedEntry *needEntryOf(const Prop *p, MlirOperation op) {
  return dtTableFind(&p->needs, needHash(op.ptr), sameNeedOp, op.ptr);
}

/* What `op` needs of its operands (count in `*count`), NULL if it was not
 * decided. */
static const CSpec *needsOf(const Prop *p, MlirOperation op, int *count) {
  const NeedEntry *e = needEntryOf(p, op);
  if (!e)
    return NULL;
  *count = e->count;
  return p->needSpecs + e->first;
}

/* The outcome of a visit, by the bytes of its key (R->memoBytes). */
typedef struct VisitMemo {
  size_t keyFirst, keyBytes;
  bool changed;
  Cand choice; /* when changed: the new needs, layouts and strategy */
} VisitMemo;

typedef struct VarSlot {
  const void *op;
  int index; /* -1: not an op with a strategy */
} VarSlot;

static bool sameVarOp(const void *entry, const void *key) {
  return ((const VarSlot *)entry)->op == key;
}

/* Whether `v` only initializes and has one use: its user gets it in any
 * layout for free (tensor.empty, constants, splats, linalg ops on such
 * values alone; split per use before propagation). */
static bool isFreeUncached(Prop *p, MlirValue v, int depth);

static bool isFreeValue(Prop *p, MlirValue v, int depth) {
  if (!mlirValueIsAOpResult(v) || depth > 8)
    return false;
  Info *in = dtPropInfo(p, v);
  if (!in || !in->isTensor || in->fixed)
    return false;
  if (!in->isFree)
    in->isFree = isFreeUncached(p, v, depth) ? 1 : -1;
  return in->isFree > 0;
}

static bool isFreeUncached(Prop *p, MlirValue v, int depth) {
  MlirOpOperand use = mlirValueGetFirstUse(v);
  if (mlirOpOperandIsNull(use) ||
      !mlirOpOperandIsNull(mlirOpOperandGetNextUse(use)))
    return false;
  MlirOperation def = mlirOpResultGetOwner(v);
  if (dtIsOp(def, "tensor.empty") || dtIsOp(def, "arith.constant") ||
      dtIsOp(def, "tensor.splat"))
    return true;
  if (!dtIsOpIn(def, "linalg.") || mlirOperationGetNumResults(def) != 1 ||
      mlirOperationGetNumRegions(def) > 1)
    return false;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) {
    MlirValue o = mlirOperationGetOperand(def, i);
    if (mlirTypeIsATensor(mlirValueGetType(o)) && !isFreeValue(p, o, depth + 1))
      return false;
  }
  return true;
}

static bool excluded(MlirOperation op) {
  return dtIsOp(op, DT_OP_ANNOTATE) || dtIsOp(op, DT_OP_REDISTRIBUTE) ||
         dtIsOp(op, "func.call") || dtIsOp(op, "scf.for") ||
         dtIsOp(op, "scf.if") || mlirOperationGetNumRegions(op) > 1;
}

/* Whether every use of the tensor results of `op` was decided (so its
 * need is known) and some result is not free. */
static bool resultsMovable(Prop *p, MlirOperation op) {
  bool any = false;
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j) {
    MlirValue v = mlirOperationGetResult(op, j);
    Info *in = dtPropInfo(p, v);
    if (!in || !in->isTensor)
      continue;
    if (in->fixed || isFreeValue(p, v, 0))
      return false;
    any = true;
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u);
         u = mlirOpOperandGetNextUse(u)) {
      int count;
      const CSpec *need = needsOf(p, mlirOpOperandGetOwner(u), &count);
      if (!need || (int)mlirOpOperandGetOperandNumber(u) >= count)
        return false;
    }
  }
  return any;
}

/* The var of `op` (an op of the entry block with a factor rule whose
 * layouts may change), created on first use; -1 for other ops. */
int dtRefineVarOf(Refine *R, MlirOperation op) {
  Prop *p = R->p;
  uint64_t hash = needHash(op.ptr);
  const VarSlot *hit = dtTableFind(&R->index, hash, sameVarOp, op.ptr);
  if (hit)
    return hit->index;
  int index = -1;
  const NeedEntry *e = needEntryOf(p, op);
  if (e && e->byRule && mlirBlockEqual(mlirOperationGetBlock(op), R->entry) &&
      !excluded(op) && resultsMovable(p, op) &&
      mlirOperationGetNumResults(op) <= DT_MAX_RULE_VALUES) {
    Var *v =
        dtArrayPush((void **)&R->vars, &R->numVars, &R->capVars, sizeof(Var));
    if (!v) {
      R->failed = true;
      return -1;
    }
    memset(v, 0, sizeof(*v));
    v->op = op;
    v->arg = -1;
    v->numOperands = e->count;
    v->numResults = (int)mlirOperationGetNumResults(op);
    /* The tensor operands are those with a need. */
    const CSpec *need = p->needSpecs + e->first;
    bool ok = true;
    for (int i = 0; ok && i < e->count; ++i)
      if (need[i].partial != NO_NEED_PARTIAL) {
        MlirValue o = mlirOperationGetOperand(op, i);
        v->operands[i] = dtPropInfo(p, o);
        if (!v->operands[i] || !v->operands[i]->isTensor)
          ok = false;
        else
          v->freeOperand[i] = isFreeValue(p, o, 0);
      }
    for (int j = 0; ok && j < v->numResults; ++j) {
      Info *in = dtPropInfo(p, mlirOperationGetResult(op, j));
      v->results[j] = in && in->isTensor ? in : NULL;
    }
    if (ok)
      index = (int)(R->numVars - 1);
    else
      --R->numVars;
  }
  VarSlot *slot = dtTableInsert(&R->index, hash);
  if (!slot) {
    R->failed = true;
    return -1;
  }
  slot->op = op.ptr;
  slot->index = index;
  return index;
}

int dtRefineArgVar(Refine *R, MlirValue arg, int index) {
  int found = dtRefineArgVarOf(R, arg);
  if (found >= 0)
    return found;
  Info *in = dtPropInfo(R->p, arg);
  if (!in || !in->isTensor)
    return -1;
  Var *v =
      dtArrayPush((void **)&R->vars, &R->numVars, &R->capVars, sizeof(Var));
  VarSlot *slot = v ? dtTableInsert(&R->index, needHash(arg.ptr)) : NULL;
  if (!v || !slot) {
    R->failed = true;
    return -1;
  }
  memset(v, 0, sizeof(*v));
  v->arg = index;
  v->numResults = 1;
  v->results[0] = in;
  slot->op = arg.ptr;
  slot->index = (int)(R->numVars - 1);
  return slot->index;
}

int dtRefineArgVarOf(Refine *R, MlirValue v) {
  if (!mlirValueIsABlockArgument(v))
    return -1;
  const VarSlot *hit =
      dtTableFind(&R->index, needHash(v.ptr), sameVarOp, v.ptr);
  return hit ? hit->index : -1;
}

void dtRefineForgetNeed(Refine *R, MlirOperation op, int i) {
  NeedEntry *e = needEntryOf(R->p, op);
  if (e && i < e->count)
    R->p->needSpecs[e->first + (size_t)i] =
        (CSpec){0, NO_NEED_PARTIAL, 0, 0, 0};
}

static void enqueue(Refine *R, int index) {
  if (index < 0 || R->vars[index].queued)
    return;
  int *slot =
      dtArrayPush((void **)&R->stack, &R->numStack, &R->capStack, sizeof(int));
  if (!slot) {
    R->failed = true;
    return;
  }
  *slot = index;
  R->vars[index].queued = true;
}

/* The vars next to `op`: its operands' producers and its results' users. */
static void enqueueAround(Refine *R, MlirOperation op) {
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    MlirValue v = mlirOperationGetOperand(op, i);
    if (mlirValueIsAOpResult(v))
      enqueue(R, dtRefineVarOf(R, mlirOpResultGetOwner(v)));
  }
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j)
    for (MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(op, j));
         !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u))
      enqueue(R, dtRefineVarOf(R, mlirOpOperandGetOwner(u)));
}

/* The rule of `v`: its own in the exact search, else read into
 * `scratch`. */
static const DtRule *ruleOf(Refine *R, const Var *v, DtRule *scratch) {
  if (v->rule)
    return v->rule;
  dtPropRule(R->p, v->op, scratch);
  return scratch;
}

static Known *pushKnown(Refine *R) {
  Known *k = dtArrayPush((void **)&R->known, &R->numKnown, &R->capKnown,
                         sizeof(Known));
  if (!k)
    R->failed = true;
  return k;
}

/* What `user` needs of operand `i`; false when it needs nothing. */
static bool needAt(const Prop *p, MlirOperation user, intptr_t i, CSpec *out) {
  int count;
  const CSpec *need = needsOf(p, user, &count);
  if (!need || i >= count || need[i].partial == NO_NEED_PARTIAL)
    return false;
  *out = need[i];
  return true;
}

bool dtRefineHasCSpec(const CSpec *list, size_t count, CSpec c) {
  for (size_t i = 0; i < count; ++i)
    if (sameCSpec(list[i], c))
      return true;
  return false;
}

/* The distinct needs of the users of `v` other than operand `skipIndex`
 * of `skipOp` (and, when `skipVars`, other than vars), appended to the
 * refinement's shared list; false when out of memory. */
bool dtRefineOtherNeeds(Refine *R, MlirValue v, MlirOperation skipOp,
                        intptr_t skipIndex, bool skipVars, size_t *first) {
  *first = R->numShared;
  for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u);
       u = mlirOpOperandGetNextUse(u)) {
    MlirOperation user = mlirOpOperandGetOwner(u);
    intptr_t n = mlirOpOperandGetOperandNumber(u);
    CSpec c;
    if ((mlirOperationEqual(user, skipOp) && n == skipIndex) ||
        (skipVars && dtRefineVarOf(R, user) >= 0) ||
        !needAt(R->p, user, n, &c) ||
        dtRefineHasCSpec(R->shared + *first, R->numShared - *first, c))
      continue;
    CSpec *slot = dtArrayPush((void **)&R->shared, &R->numShared, &R->capShared,
                              sizeof(CSpec));
    if (!slot) {
      R->failed = true;
      return false;
    }
    *slot = c;
  }
  return true;
}

/* What the choice of `v` is measured against: its operands' layouts (not
 * the free ones; a layout another user needs too is made anyway) and, per
 * result, each distinct need of its users (one conversion serves every
 * user that needs the same layout). */
static bool gatherKnown(Refine *R, const Var *v) {
  R->numKnown = 0;
  R->numShared = 0;
  size_t firsts[DT_MAX_RULE_VALUES];
  for (int i = 0; i < v->numOperands; ++i) {
    if (!v->operands[i] || v->freeOperand[i])
      continue;
    if (!dtRefineOtherNeeds(R, v->operands[i]->value, v->op, i, false,
                            &firsts[i]))
      return false;
    Known *k = pushKnown(R);
    if (!k)
      return false;
    k->isResult = false;
    k->index = i;
    k->spec = specOf(v->operands[i]);
    k->info = v->operands[i];
    k->origin = v->operands[i]->origin;
    k->numShared = (int)(R->numShared - firsts[i]);
    k->noSeed = false;
  }
  /* The shared list has stopped growing: point into it. */
  for (size_t k = 0; k < R->numKnown; ++k)
    R->known[k].shared = R->shared + firsts[R->known[k].index];
  for (int j = 0; j < v->numResults; ++j) {
    if (!v->results[j])
      continue;
    for (MlirOpOperand u = mlirValueGetFirstUse(v->results[j]->value);
         !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
      CSpec want;
      if (!needAt(R->p, mlirOpOperandGetOwner(u),
                  mlirOpOperandGetOperandNumber(u), &want))
        continue;
      DtensorShardingSpec s;
      unpack(&want, v->results[j]->rank, &s);
      size_t k = 0;
      for (; k < R->numKnown; ++k)
        if (R->known[k].isResult && R->known[k].index == j &&
            dtensorShardingSpecEqual(&R->known[k].spec, &s))
          break;
      if (k < R->numKnown)
        continue;
      Known *kn = pushKnown(R);
      if (!kn)
        return false;
      kn->isResult = true;
      kn->index = j;
      kn->spec = s;
      kn->info = v->results[j];
      kn->origin = originOf(NULL);
      kn->numShared = 0;
      kn->noSeed = false;
    }
  }
  return true;
}

/* The current choice of `v`: what it needs (as noted) and its results'
 * layouts. */
void dtRefineCurrentChoice(Refine *R, const Var *v, Choice *c) {
  int count;
  const CSpec *need = needsOf(R->p, v->op, &count);
  for (int i = 0; i < v->numOperands; ++i)
    if (v->operands[i])
      unpack(&need[i], v->operands[i]->rank, &c->operands[i]);
  for (int j = 0; j < v->numResults; ++j)
    if (v->results[j])
      c->results[j] = specOf(v->results[j]);
}

/* `v` takes choice `c`: its results' layouts and its needs change (the
 * decision is written at the end, by finish). */
void dtRefineApply(Refine *R, Var *v, const Choice *c) {
  Prop *p = R->p;
  if (!v->choice && !(v->choice = calloc(1, sizeof(Cand)))) {
    R->failed = true;
    return;
  }
  NeedEntry *e = needEntryOf(p, v->op);
  for (int j = 0; j < v->numResults; ++j)
    if (v->results[j]) {
      setSpec(v->results[j], &c->results[j]);
      v->choice->res[j] = v->results[j]->spec;
    }
  for (int i = 0; i < v->numOperands; ++i)
    if (v->operands[i]) {
      pack(&c->operands[i], &v->choice->need[i]);
      p->needSpecs[e->first + (size_t)i] = v->choice->need[i];
    }
  v->choice->strategy = c->strategy;
}

bool dtRefineLower(double candidate, double current) {
  if (isinf(current))
    return candidate < current;
  return candidate < current - 1e-9 * fmax(1.0, fabs(current));
}

static void keyAdd(Refine *R, const void *bytes, size_t n) {
  if (!dtArrayAppend((void **)&R->key, &R->numKey, &R->capKey, 1, bytes, n))
    R->failed = true;
}

/* The key of a visit: what its outcome depends on (the rule's key, the
 * known values in order, the current choice); false when the rule is not
 * keyed (it depends on a body). */
static bool visitKey(Refine *R, const Var *v, const Choice *cur,
                     uint64_t *hash) {
  const void *rule[DT_RULE_KEY_MAX];
  int n = dtPropRuleKey(R->p, v->op, rule);
  if (n < 0)
    return false;
  R->numKey = 0;
  keyAdd(R, rule, sizeof(void *) * (size_t)n);
  keyAdd(R, &R->numKnown, sizeof(R->numKnown));
  for (size_t k = 0; k < R->numKnown; ++k) {
    const Known *kn = &R->known[k];
    int head[4] = {kn->isResult, kn->index, kn->noSeed, kn->numShared};
    CSpec c;
    pack(&kn->spec, &c);
    keyAdd(R, head, sizeof(head));
    keyAdd(R, &c, sizeof(c));
    keyAdd(R, kn->shared, sizeof(CSpec) * (size_t)kn->numShared);
  }
  for (int i = 0; i < v->numOperands; ++i)
    if (v->operands[i]) {
      CSpec c;
      pack(&cur->operands[i], &c);
      keyAdd(R, &c, sizeof(c));
    }
  for (int j = 0; j < v->numResults; ++j)
    if (v->results[j]) {
      CSpec c;
      pack(&cur->results[j], &c);
      keyAdd(R, &c, sizeof(c));
    }
  *hash = dtHashBytes(R->key, R->numKey);
  return !R->failed;
}

typedef struct MemoProbe {
  const Refine *R;
} MemoProbe;

static bool sameVisit(const void *entry, const void *key) {
  const VisitMemo *m = entry;
  const Refine *R = ((const MemoProbe *)key)->R;
  return m->keyBytes == R->numKey &&
         !memcmp(R->memoBytes + m->keyFirst, R->key, R->numKey);
}

/* Remembers the outcome of a visit under the key just built. */
static void remember(Refine *R, uint64_t hash, const Var *v,
                     const Choice *best) {
  size_t first = R->numMemoBytes;
  if (!dtArrayAppend((void **)&R->memoBytes, &R->numMemoBytes, &R->capMemoBytes,
                     1, R->key, R->numKey))
    return; /* not remembered: only slower */
  VisitMemo *m = dtTableInsert(&R->memo, hash);
  if (!m)
    return;
  m->keyFirst = first;
  m->keyBytes = R->numKey;
  m->changed = best != NULL;
  if (!best)
    return;
  for (int i = 0; i < v->numOperands; ++i)
    if (v->operands[i])
      pack(&best->operands[i], &m->choice.need[i]);
  for (int j = 0; j < v->numResults; ++j)
    if (v->results[j])
      pack(&best->results[j], &m->choice.res[j]);
  m->choice.strategy = best->strategy;
}

/* Revisits `v`: the cheapest of the candidates its neighbours seed, taken
 * if it lowers the cost of the uses `v` touches. A model repeats its
 * blocks: an op whose rule and surroundings were seen before takes the
 * same outcome without the search. */
static void visit(Refine *R, int index) {
  Var *v = &R->vars[index];
  v->queued = false;
  if (!gatherKnown(R, v))
    return;
  Choice *cur = &R->scratch[3];
  dtRefineCurrentChoice(R, v, cur);
  const DtRule *rule = ruleOf(R, v, R->visitRule);
  double now = dtPropChoiceCost(R->p, v->operands, v->results, R->known,
                                (int)R->numKnown, cur) +
               dtPropComputeUs(R->p, rule, v->operands, v->results, cur);
  if (now <= 0.0)
    return;
  /* Values that convert for free now seed nothing new: their layouts are
   * merged into the other seeds' candidates. */
  for (size_t k = 0; k < R->numKnown; ++k) {
    Known *kn = &R->known[k];
    kn->noSeed =
        dtPropChoiceCost(R->p, v->operands, v->results, kn, 1, cur) <= 0.0;
  }
  uint64_t hash;
  bool keyed = visitKey(R, v, cur, &hash);
  MemoProbe probe = {R};
  const VisitMemo *seen =
      keyed ? dtTableFind(&R->memo, hash, sameVisit, &probe) : NULL;
  Choice *best = NULL;
  if (seen && !seen->changed)
    return;
  if (seen) {
    best = &R->scratch[0];
    for (int i = 0; i < v->numOperands; ++i)
      if (v->operands[i])
        unpack(&seen->choice.need[i], v->operands[i]->rank, &best->operands[i]);
    for (int j = 0; j < v->numResults; ++j)
      if (v->results[j])
        unpack(&seen->choice.res[j], v->results[j]->rank, &best->results[j]);
    best->strategy = seen->choice.strategy;
  } else {
    dtPropBestChoice(R->p, rule, v->operands, v->results, R->known,
                     (int)R->numKnown, R->scratch, &best, NULL);
    if (best && !dtRefineLower(best->cost, now))
      best = NULL;
    if (keyed)
      remember(R, hash, v, best);
    if (!best)
      return;
  }
  dtRefineApply(R, v, best);
  enqueueAround(R, v->op);
}

/* ---- writing the new choices -------------------------------------------- */

/* Forgets the free value `v` and what made it, so the next user's
 * adoption remakes it in the layout it needs. */
static void forgetFree(Prop *p, MlirValue v) {
  Info *in = dtPropInfo(p, v);
  if (!in || !mlirValueIsAOpResult(v))
    return;
  in->known = false;
  in->hasDemand = false;
  MlirOperation def = mlirOpResultGetOwner(v);
  dtPropUnmarkDecided(p, def);
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) {
    MlirValue o = mlirOperationGetOperand(def, i);
    if (mlirTypeIsATensor(mlirValueGetType(o)))
      forgetFree(p, o);
  }
}

static void finish(Refine *R) {
  Prop *p = R->p;
  Choice *c = &R->scratch[0];
  for (size_t n = 0; n < R->numVars && !p->failed; ++n) {
    Var *v = &R->vars[n];
    if (!v->choice || v->arg >= 0)
      continue;
    for (int i = 0; i < v->numOperands; ++i)
      if (v->operands[i]) {
        unpack(&v->choice->need[i], v->operands[i]->rank, &c->operands[i]);
        if (v->freeOperand[i])
          forgetFree(p, v->operands[i]->value);
      }
    for (int j = 0; j < v->numResults; ++j)
      if (v->results[j])
        unpack(&v->choice->res[j], v->results[j]->rank, &c->results[j]);
    c->strategy = v->choice->strategy;
    dtPropRecord(p, v->op, ruleOf(R, v, R->visitRule), v->operands, v->results,
                 c, originOf("the whole function's choice"));
  }
}

/* A conversion counted once: a value to a layout. */
typedef struct Conversion {
  const void *value;
  CSpec to;
} Conversion;

static bool sameConversion(const void *entry, const void *key) {
  const Conversion *a = entry, *b = key;
  return a->value == b->value && sameCSpec(a->to, b->to);
}

typedef struct CostSum {
  Prop *p;
  DtTable seen; /* Conversion */
  double total;
  DtRule *rule;   /* scratch */
  Choice *choice; /* scratch */
} CostSum;

/* The compute of `op` (a contraction's) under its current layouts. */
static double opCompute(CostSum *sum, MlirOperation op, const NeedEntry *e) {
  Prop *p = sum->p;
  Info *operands[DT_MAX_RULE_VALUES] = {NULL},
       *results[DT_MAX_RULE_VALUES] = {NULL};
  if (!sum->rule || !sum->choice)
    return 0.0;
  dtPropRule(p, op, sum->rule);
  if (sum->rule->numOperands != e->count ||
      sum->rule->numResults > DT_MAX_RULE_VALUES ||
      sum->rule->numResults != mlirOperationGetNumResults(op))
    return 0.0;
  for (int i = 0; i < e->count; ++i) {
    operands[i] = dtPropInfo(p, mlirOperationGetOperand(op, i));
    if (operands[i] && operands[i]->isTensor &&
        p->needSpecs[e->first + (size_t)i].partial != NO_NEED_PARTIAL)
      unpack(&p->needSpecs[e->first + (size_t)i], operands[i]->rank,
             &sum->choice->operands[i]);
    else
      operands[i] = NULL;
  }
  for (int j = 0; j < sum->rule->numResults; ++j) {
    results[j] = dtPropInfo(p, mlirOperationGetResult(op, j));
    if (results[j] && results[j]->isTensor && results[j]->known)
      sum->choice->results[j] = specOf(results[j]);
    else
      results[j] = NULL;
  }
  return dtPropComputeUs(p, sum->rule, operands, results, sum->choice);
}

static void addOpCost(void *entry, void *user) {
  const NeedEntry *e = entry;
  CostSum *sum = user;
  Prop *p = sum->p;
  MlirOperation op = {(void *)e->op};
  sum->total += opCompute(sum, op, e);
  /* An explicit dtensor.redistribute converts its operand from 'src' (what
   * it needs of it) to 'dst' (its result): that conversion is the op's own
   * (dtensor-auto-shard writes the plan's conversions so). */
  if (e->count == 1 && dtIsOp(op, DT_OP_REDISTRIBUTE)) {
    const Info *out = dtPropInfo(p, mlirOperationGetResult(op, 0));
    CSpec src = p->needSpecs[e->first];
    if (out && out->isTensor && out->known && src.partial != NO_NEED_PARTIAL) {
      DtensorShardingSpec a, b = specOf(out);
      unpack(&src, out->rank, &a);
      sum->total += dtPropConvertCost(p, out, &a, &b);
    }
  }
  for (int i = 0; i < e->count; ++i) {
    Conversion key = {NULL, p->needSpecs[e->first + (size_t)i]};
    MlirValue v = mlirOperationGetOperand(op, i);
    const Info *in = dtPropInfo(p, v);
    if (key.to.partial == NO_NEED_PARTIAL || !in || !in->isTensor || !in->known)
      continue;
    key.value = v.ptr;
    uint64_t hash = hashCSpec(dtHashMix(31, (uintptr_t)v.ptr), key.to);
    if (dtTableFind(&sum->seen, hash, sameConversion, &key))
      continue;
    Conversion *slot = dtTableInsert(&sum->seen, hash);
    if (slot)
      *slot = key;
    DtensorShardingSpec a = specOf(in), b;
    unpack(&key.to, in->rank, &b);
    sum->total += dtPropConvertCost(p, in, &a, &b);
  }
}

double dtPropModelledCost(Prop *p) {
  CostSum sum = {p, dtTableInit(sizeof(Conversion)), 0.0,
                 malloc(sizeof(DtRule)), malloc(sizeof(Choice))};
  dtTableForEach(&p->needs, addOpCost, &sum);
  dtTableFree(&sum.seen);
  free(sum.rule);
  free(sum.choice);
  return sum.total;
}

void dtPropRefine(Prop *p, MlirOperation func) {
  p->choiceSummary = "program order";
  if (p->choice == DT_CHOICE_ORDER || p->failed)
    return;
  if (p->numCostly == 0 && p->choice == DT_CHOICE_WHOLE && !p->autoShard) {
    p->choiceSummary = "no conversion";
    return;
  }
  Refine R;
  memset(&R, 0, sizeof(R));
  R.p = p;
  R.entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  R.index = dtTableInit(sizeof(VarSlot));
  R.memo = dtTableInit(sizeof(VisitMemo));
  R.scratch = malloc(sizeof(Choice) * 4);
  R.visitRule = malloc(sizeof(DtRule));
  R.failed = !R.scratch || !R.visitRule;
  /* Refinement from every op next to a conversion. */
  size_t numCostly = p->numCostly;
  for (size_t n = 0; n < numCostly && !R.failed; ++n) {
    enqueue(&R, dtRefineVarOf(&R, p->costly[n]));
    enqueueAround(&R, p->costly[n]);
  }
  while (R.numStack > 0 && !R.failed && !p->failed)
    visit(&R, R.stack[--R.numStack]);
  p->choiceSummary = "refined";
  /* Automatic sharding: every op with a strategy and every argument
   * without a layout, by an integer program. */
  if (p->autoShard && !R.failed && !p->failed) {
    p->choiceSummary = dtRefineAuto(&R, func);
    goto done;
  }
  /* The exact search on small functions. */
  int count = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(R.entry);
       !mlirOperationIsNull(op) && !R.failed && count <= kExactOps;
       op = mlirOperationGetNextInBlock(op))
    count += dtRefineVarOf(&R, op) >= 0;
  if (p->choice == DT_CHOICE_ENUMERATE && count > kExactOps)
    dtPropError(p, func,
                "choice=enumerate takes functions of at most %d ops with a "
                "strategy; this one has more",
                kExactOps);
  else if (count <= kExactOps && !R.failed && !p->failed) {
    R.order = malloc(sizeof(int) * (size_t)(count + 1));
    R.pick = malloc(sizeof(int) * (size_t)(count + 1));
    R.bestPick = malloc(sizeof(int) * (size_t)(count + 1));
    R.suffix = malloc(sizeof(double) * (size_t)(count + 1));
    if (!R.order || !R.pick || !R.bestPick || !R.suffix)
      R.failed = true;
    for (MlirOperation op = mlirBlockGetFirstOperation(R.entry);
         !mlirOperationIsNull(op) && !R.failed;
         op = mlirOperationGetNextInBlock(op)) {
      int v = dtRefineVarOf(&R, op);
      if (v < 0)
        continue;
      R.order[R.count++] = v;
      /* The few vars of the search keep their rules. */
      if (!(R.vars[v].rule = malloc(sizeof(DtRule))))
        R.failed = true;
      else
        dtPropRule(p, op, R.vars[v].rule);
    }
    if (!R.failed)
      p->choiceSummary = dtRefineExact(&R, p->choice == DT_CHOICE_ENUMERATE);
  }
done:
  if (R.failed)
    dtPropError(p, func, "out of memory");
  else
    finish(&R);
  for (size_t n = 0; n < R.numVars; ++n) {
    free(R.vars[n].rule);
    free(R.vars[n].choice);
    free(R.vars[n].cands);
    free(R.vars[n].links);
  }
  free(R.vars);
  free(R.stack);
  free(R.known);
  free(R.shared);
  free(R.scratch);
  free(R.visitRule);
  free(R.order);
  free(R.pick);
  free(R.bestPick);
  free(R.suffix);
  dtTableFree(&R.index);
  dtTableFree(&R.memo);
  free(R.memoBytes);
  free(R.key);
}
