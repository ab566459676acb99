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
 *     branch-and-bound search, for the optimum. choice=enumerate walks every
 *     combination instead, without pruning: the check of the search.
 *
 * Annotations, function signatures and ops with regions or callees are
 * fixed: their needs and layouts are the constraints. Ties keep the
 * program-order choice, which already honours priorities. */
#include "PropagateInternal.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Functions with at most this many ops with a strategy get the exact
 * search; choice=enumerate refuses more. */
enum { kExactOps = 12 };

/* Nodes the exact search may visit before it stops with what refinement
 * found (the default choice only). */
enum { kSearchBudget = 2000000 };

/* The most combinations choice=enumerate walks. */
#define kEnumerateLimit 3e7

/* ---- operand needs --------------------------------------------------------
 */

static bool sameNeedOp(const void *entry, const void *key) {
  return ((const NeedEntry *)entry)->op == key;
}

static uint64_t needHash(const void *op) {
  return dtHashMix(23, (uint64_t)(uintptr_t)op);
}

/* `need` without Partial on the axes `have` is not Partial on (a Partial
 * made locally, which costs nothing to model). */
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
    for (int i = 0; i < count; ++i)
      if (!dtArrayPush((void **)&p->needSpecs, &p->numNeedSpecs,
                       &p->capNeedSpecs, sizeof(CSpec))) {
        dtPropError(p, op, "out of memory");
        return;
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
      slot->code = 0;
      slot->partial = NO_NEED_PARTIAL;
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

static const NeedEntry *needEntryOf(const Prop *p, MlirOperation op) {
  return dtTableFind(&p->needs, needHash(op.ptr), sameNeedOp, op.ptr);
}

/* What `op` needs of its operands (count in `*count`), NULL if it was not
 * decided. */
static const CSpec *needsOf(const Prop *p, MlirOperation op, int *count) {
  const NeedEntry *e =
      dtTableFind(&p->needs, needHash(op.ptr), sameNeedOp, op.ptr);
  if (!e)
    return NULL;
  *count = e->count;
  return p->needSpecs + e->first;
}

/* ---- the ops with a strategy ------------------------------------------------
 */

/* A compact candidate of the exact search. */
typedef struct Cand {
  bool isCurrent;
  CSpec need[DT_MAX_RULE_VALUES];
  CSpec res[DT_MAX_RULE_VALUES];
  Strategy strategy;
  unsigned pass;
  int passOperand;
  double fixedCost; /* the uses whose other end is fixed */
} Cand;

/* An operand produced by another op with a strategy. */
/* The outcome of a visit, by the bytes of its key (R->memoBytes). */
typedef struct VisitMemo {
  size_t keyFirst, keyBytes;
  bool changed;
  Cand choice; /* when changed: the new needs, layouts and strategy */
} VisitMemo;

/* An operand of a var in the exact search: made by an earlier var
 * (`producer`, its place in the order) or fixed (-1); the needs of the
 * value's users that are not vars (`fixedNeeds`, in the search's shared
 * list), whose conversions are made anyway; the earlier vars that use the
 * value too (`sameValue`: links of earlier vars, as order * DT_MAX_RULE_VALUES
 * + link). */
typedef struct Link {
  int operand, producer, result;
  size_t fixedNeeds;
  int numFixedNeeds;
  int sameValue[DT_MAX_RULE_VALUES];
  int numSameValue;
} Link;

/* An op whose strategy may change. Large programs have many: its rule
 * (kilobytes) is read again when needed, except in the exact search. */
typedef struct Var {
  MlirOperation op;
  int numOperands, numResults;
  Info *operands[DT_MAX_RULE_VALUES];
  Info *results[DT_MAX_RULE_VALUES];
  bool freeOperand[DT_MAX_RULE_VALUES];
  bool queued;
  Cand *choice; /* the new choice once it changed */
  /* the exact search */
  DtRule *rule;
  Cand *cands;
  size_t numCands, capCands;
  int current; /* the candidate that is its current choice */
  Link *links;
  int numLinks;
  double minFixed;
} Var;

typedef struct VarSlot {
  const void *op;
  int index; /* -1: not an op with a strategy */
} VarSlot;

typedef struct Refine {
  Prop *p;
  MlirBlock entry;
  DtTable index; /* VarSlot */
  Var *vars;
  size_t numVars, capVars;
  int *stack;
  size_t numStack, capStack;
  Known *known;
  size_t numKnown, capKnown;
  CSpec *shared; /* the other users' needs of known operands */
  size_t numShared, capShared;
  Choice *scratch;   /* 4: three for dtPropBestChoice, one for the current */
  DtRule *visitRule; /* visit's and finish's */
  /* Outcomes of visits (VisitMemo), their keys' bytes, the current key. */
  DtTable memo;
  unsigned char *memoBytes, *key;
  size_t numMemoBytes, capMemoBytes, numKey, capKey;
  bool failed;
  /* the exact search */
  int *order; /* the vars in program order */
  int count;
  int *pick, *bestPick;
  double *suffix; /* lower bound of the vars from k on */
  double best;
  long nodes;
  bool prune, aborted;
} Refine;

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
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(def));
  if (name.length < 7 || memcmp(name.data, "linalg.", 7) ||
      mlirOperationGetNumResults(def) != 1 ||
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
static int varOf(Refine *R, MlirOperation op) {
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
    v->op = op;
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
      enqueue(R, varOf(R, mlirOpResultGetOwner(v)));
  }
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j)
    for (MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(op, j));
         !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u))
      enqueue(R, varOf(R, mlirOpOperandGetOwner(u)));
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

static bool hasCSpec(const CSpec *list, size_t count, CSpec c) {
  for (size_t i = 0; i < count; ++i)
    if (sameCSpec(list[i], c))
      return true;
  return false;
}

/* The distinct needs of the users of `v` other than operand `skipIndex`
 * of `skipOp` (and, when `skipVars`, other than vars), appended to the
 * refinement's shared list; false when out of memory. */
static bool otherNeeds(Refine *R, MlirValue v, MlirOperation skipOp,
                       intptr_t skipIndex, bool skipVars, size_t *first) {
  *first = R->numShared;
  for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u);
       u = mlirOpOperandGetNextUse(u)) {
    MlirOperation user = mlirOpOperandGetOwner(u);
    intptr_t n = mlirOpOperandGetOperandNumber(u);
    CSpec c;
    if ((mlirOperationEqual(user, skipOp) && n == skipIndex) ||
        (skipVars && varOf(R, user) >= 0) || !needAt(R->p, user, n, &c) ||
        hasCSpec(R->shared + *first, R->numShared - *first, c))
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
    if (!otherNeeds(R, v->operands[i]->value, v->op, i, false, &firsts[i]))
      return false;
    Known *k = pushKnown(R);
    if (!k)
      return false;
    k->isResult = false;
    k->index = i;
    k->spec = specOf(v->operands[i]);
    k->info = v->operands[i];
    k->origin = v->operands[i]->origin;
    k->weight = 1.0;
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
      kn->weight = 1.0;
      kn->numShared = 0;
      kn->noSeed = false;
    }
  }
  return true;
}

/* The current choice of `v`: what it needs (as noted) and its results'
 * layouts. */
static void currentChoice(Refine *R, const Var *v, Choice *c) {
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
static void apply(Refine *R, Var *v, const Choice *c) {
  Prop *p = R->p;
  if (!v->choice && !(v->choice = calloc(1, sizeof(Cand)))) {
    R->failed = true;
    return;
  }
  NeedEntry *e =
      dtTableFind(&p->needs, needHash(v->op.ptr), sameNeedOp, v->op.ptr);
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

static bool lower(double candidate, double current) {
  if (isinf(current))
    return candidate < current;
  return candidate < current - 1e-9 * fmax(1.0, fabs(current));
}

/* Revisits `v`: the cheapest of the candidates its neighbours seed, taken
 * if it lowers the cost of the uses `v` touches. */
/* Appends `n` bytes to `*buf` (`*count` used of `*capacity`). */
static bool appendBytes(unsigned char **buf, size_t *count, size_t *capacity,
                        const void *bytes, size_t n) {
  if (*count + n > *capacity) {
    size_t cap = *capacity ? *capacity : 256;
    while (cap < *count + n)
      cap *= 2;
    unsigned char *grown = realloc(*buf, cap);
    if (!grown)
      return false;
    *buf = grown;
    *capacity = cap;
  }
  if (n)
    memcpy(*buf + *count, bytes, n);
  *count += n;
  return true;
}

static void keyAdd(Refine *R, const void *bytes, size_t n) {
  if (!appendBytes(&R->key, &R->numKey, &R->capKey, bytes, n))
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
  uint64_t h = R->numKey;
  for (size_t i = 0; i + 8 <= R->numKey; i += 8) {
    uint64_t w;
    memcpy(&w, R->key + i, 8);
    h = dtHashMix(h, w);
  }
  for (size_t i = R->numKey & ~(size_t)7; i < R->numKey; ++i)
    h = dtHashMix(h, R->key[i]);
  *hash = h;
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
  if (!appendBytes(&R->memoBytes, &R->numMemoBytes, &R->capMemoBytes, R->key,
                   R->numKey))
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
  currentChoice(R, v, cur);
  double now = dtPropChoiceCost(R->p, v->operands, v->results, R->known,
                                (int)R->numKnown, cur);
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
    dtPropBestChoice(R->p, ruleOf(R, v, R->visitRule), v->operands, v->results,
                     R->known, (int)R->numKnown, R->scratch, &best, NULL);
    if (best && !lower(best->cost, now))
      best = NULL;
    if (keyed)
      remember(R, hash, v, best);
    if (!best)
      return;
  }
  apply(R, v, best);
  enqueueAround(R, v->op);
}

/* ---- the exact search ---------------------------------------------------- */

static bool addCand(Var *v, const Choice *c, const Strategy *st, unsigned pass,
                    int passOperand) {
  const DtRule *r = v->rule;
  Cand k;
  memset(&k, 0, sizeof(k));
  for (int i = 0; i < r->numOperands; ++i)
    if (v->operands[i])
      pack(&c->operands[i], &k.need[i]);
  for (int j = 0; j < r->numResults; ++j)
    if (v->results[j])
      pack(&c->results[j], &k.res[j]);
  for (size_t n = 0; n < v->numCands; ++n)
    if (!memcmp(v->cands[n].need, k.need, sizeof(k.need)) &&
        !memcmp(v->cands[n].res, k.res, sizeof(k.res)))
      return true;
  k.strategy = *st;
  k.pass = pass;
  k.passOperand = passOperand;
  Cand *slot =
      dtArrayPush((void **)&v->cands, &v->numCands, &v->capCands, sizeof(Cand));
  if (!slot)
    return false;
  *slot = k;
  return true;
}

/* Every way Partial(sum) operands may flow through `v` under `st`. */
static bool addPassVariants(Refine *R, Var *v, const Strategy *st) {
  const DtRule *r = v->rule;
  Choice *c = &R->scratch[0];
  int rank = dtensorMeshGetRank(R->p->mesh);
  unsigned free = ((1u << rank) - 1) & ~st->used;
  for (unsigned pass = free;; pass = (pass - 1) & free) {
    if (pass == 0 || r->flow == DT_FLOW_ALL_SUM) {
      if ((pass == 0 || r->flow != DT_FLOW_NONE) &&
          dtPropSpecsWith(R->p, r, v->operands, v->results, st, pass, -1, c) &&
          !addCand(v, c, st, pass, -1))
        return false;
    } else if (r->flow == DT_FLOW_ONE_LINEAR) {
      for (int i = 0; i < r->numOperands; ++i)
        if (v->operands[i] && r->linear[i] && !r->isInit[i] &&
            dtPropSpecsWith(R->p, r, v->operands, v->results, st, pass, i, c) &&
            !addCand(v, c, st, pass, i))
          return false;
    }
    if (pass == 0)
      return true;
  }
}

/* Every strategy: each mesh axis on no factor or on one, in any order. */
static bool enumerateStrategies(Refine *R, Var *v, int f, Strategy *st) {
  const DtRule *r = v->rule;
  if (f == r->numFactors)
    return addPassVariants(R, v, st);
  if (!enumerateStrategies(R, v, f + 1, st))
    return false;
  if (!r->shardable[f])
    return true;
  int rank = dtensorMeshGetRank(R->p->mesh);
  for (int a = 0; a < rank; ++a) {
    if (st->used & (1u << a))
      continue;
    st->axes[f][st->numAxes[f]++] = a;
    st->used |= 1u << a;
    bool ok = enumerateStrategies(R, v, f, st);
    st->used &= ~(1u << a);
    --st->numAxes[f];
    if (!ok)
      return false;
  }
  return true;
}

/* The conversions of a candidate's results to what the users that are
 * not vars need (each distinct layout once). */
static double fixedCost(Refine *R, Var *v, const Cand *k) {
  double cost = 0.0;
  for (int j = 0; j < v->numResults; ++j) {
    if (!v->results[j])
      continue;
    DtensorShardingSpec a, b;
    unpack(&k->res[j], v->results[j]->rank, &a);
    size_t first;
    if (!otherNeeds(R, v->results[j]->value, (MlirOperation){NULL}, -1, true,
                    &first))
      return INFINITY;
    for (size_t n = first; n < R->numShared; ++n) {
      unpack(&R->shared[n], v->results[j]->rank, &b);
      cost += dtPropConvertCost(R->p, v->results[j], &a, &b);
    }
    R->numShared = first;
  }
  return cost;
}

/* The conversions of the operands of var `k` under candidate `c`, the
 * earlier vars' candidates picked: each layout a value is converted to is
 * paid once, by its first var user, unless a fixed user needs it too. */
static double linkCost(Refine *R, int k, const Cand *c) {
  const Var *v = &R->vars[R->order[k]];
  double cost = 0.0;
  for (int l = 0; l < v->numLinks; ++l) {
    const Link *ln = &v->links[l];
    CSpec target = c->need[ln->operand];
    if (hasCSpec(R->shared + ln->fixedNeeds, (size_t)ln->numFixedNeeds, target))
      continue;
    bool paid = false;
    for (int e = 0; e < ln->numSameValue && !paid; ++e) {
      int q = ln->sameValue[e] / DT_MAX_RULE_VALUES;
      const Var *qv = &R->vars[R->order[q]];
      const Link *ql = &qv->links[ln->sameValue[e] % DT_MAX_RULE_VALUES];
      paid = sameCSpec(qv->cands[R->pick[q]].need[ql->operand], target);
    }
    if (paid)
      continue;
    const Info *in = v->operands[ln->operand];
    DtensorShardingSpec a, b;
    if (ln->producer >= 0) {
      const Var *pv = &R->vars[R->order[ln->producer]];
      unpack(&pv->cands[R->pick[ln->producer]].res[ln->result], in->rank, &a);
    } else
      a = specOf(in);
    unpack(&target, in->rank, &b);
    cost += dtPropConvertCost(R->p, in, &a, &b);
  }
  return cost;
}

static void search(Refine *R, int k, double partial) {
  if (R->aborted)
    return;
  if (R->prune && ++R->nodes > kSearchBudget) {
    R->aborted = true;
    return;
  }
  if (k == R->count) {
    if (partial < R->best) {
      R->best = partial;
      memcpy(R->bestPick, R->pick, sizeof(int) * (size_t)R->count);
    }
    return;
  }
  if (R->prune && !lower(partial + R->suffix[k], R->best))
    return;
  const Var *v = &R->vars[R->order[k]];
  for (size_t n = 0; n < v->numCands && !R->aborted; ++n) {
    R->pick[k] = (int)n;
    double cost = v->cands[n].fixedCost + linkCost(R, k, &v->cands[n]);
    search(R, k + 1, partial + cost);
  }
}

static int compareCands(const void *x, const void *y) {
  const Cand *a = x, *b = y;
  return (a->fixedCost > b->fixedCost) - (a->fixedCost < b->fixedCost);
}

/* The current choice of `v` as a candidate (its strategy is never needed:
 * it is not rewritten). */
static bool addCurrent(Refine *R, Var *v) {
  Choice *c = &R->scratch[3];
  currentChoice(R, v, c);
  Strategy none;
  memset(&none, 0, sizeof(none));
  if (!addCand(v, c, &none, 0, -1))
    return false;
  v->cands[0].isCurrent = true;
  return true;
}

/* The links of var `k`: its operands that are not free. */
static bool linkOperands(Refine *R, int k, Var *v) {
  v->numLinks = 0;
  if (!v->links && !(v->links = calloc(DT_MAX_RULE_VALUES, sizeof(Link))))
    return false;
  for (int i = 0; i < v->numOperands; ++i) {
    if (!v->operands[i] || v->freeOperand[i])
      continue;
    MlirValue o = v->operands[i]->value;
    Link *ln = &v->links[v->numLinks];
    memset(ln, 0, sizeof(*ln));
    ln->operand = i;
    ln->producer = -1;
    if (mlirValueIsAOpResult(o)) {
      int pv = varOf(R, mlirOpResultGetOwner(o));
      ln->result = (int)mlirOpResultGetResultNumber(o);
      for (int q = 0; q < k && pv >= 0; ++q)
        if (R->order[q] == pv)
          ln->producer = q;
      if (pv >= 0 && ln->producer < 0) /* not before it in the block */
        return false;
    }
    if (!otherNeeds(R, o, (MlirOperation){NULL}, -1, true, &ln->fixedNeeds))
      return false;
    ln->numFixedNeeds = (int)(R->numShared - ln->fixedNeeds);
    for (int q = 0; q < k; ++q) {
      const Var *qv = &R->vars[R->order[q]];
      for (int l = 0; l < qv->numLinks; ++l)
        if (mlirValueEqual(qv->operands[qv->links[l].operand]->value, o) &&
            ln->numSameValue < DT_MAX_RULE_VALUES)
          ln->sameValue[ln->numSameValue++] = q * DT_MAX_RULE_VALUES + l;
    }
    ++v->numLinks;
  }
  return true;
}

/* The candidates of each var (its current choice first), their links to
 * earlier vars and the bounds. False when out of memory. */
static bool prepareSearch(Refine *R) {
  for (int k = 0; k < R->count; ++k) {
    Var *v = &R->vars[R->order[k]];
    Strategy st;
    memset(&st, 0, sizeof(st));
    st.seed = -1;
    if (!addCurrent(R, v) || !enumerateStrategies(R, v, 0, &st))
      return false;
    v->minFixed = INFINITY;
    for (size_t n = 0; n < v->numCands; ++n) {
      v->cands[n].fixedCost = fixedCost(R, v, &v->cands[n]);
      v->minFixed = fmin(v->minFixed, v->cands[n].fixedCost);
    }
    /* Cheap candidates first: a good bound early. */
    qsort(v->cands, v->numCands, sizeof(Cand), compareCands);
    for (size_t n = 0; n < v->numCands; ++n)
      if (v->cands[n].isCurrent)
        v->current = (int)n;
    if (!linkOperands(R, k, v))
      return false;
  }
  R->suffix[R->count] = 0.0;
  for (int k = R->count - 1; k >= 0; --k)
    R->suffix[k] = R->suffix[k + 1] + R->vars[R->order[k]].minFixed;
  return !R->failed;
}

/* The cost of the current choices, as the search counts it. */
static double currentTotal(Refine *R) {
  double total = 0.0;
  for (int k = 0; k < R->count; ++k)
    R->pick[k] = R->vars[R->order[k]].current;
  for (int k = 0; k < R->count; ++k) {
    const Var *v = &R->vars[R->order[k]];
    total +=
        v->cands[v->current].fixedCost + linkCost(R, k, &v->cands[v->current]);
  }
  return total;
}

/* The optimum over every combination of the vars' strategies (pruned
 * unless enumerating), applied where it is cheaper than the current
 * choices. Returns a summary for cost=true. */
static const char *exactChoice(Refine *R, bool enumerate) {
  Prop *p = R->p;
  if (!prepareSearch(R)) {
    R->failed = true;
    return "out of memory";
  }
  if (enumerate) {
    double combinations = 1.0;
    for (int k = 0; k < R->count; ++k)
      combinations *= (double)R->vars[R->order[k]].numCands;
    if (combinations > kEnumerateLimit) {
      dtPropError(p, R->vars[R->order[0]].op,
                  "choice=enumerate: the %d ops of this function have %.3g "
                  "combinations of strategies, more than the %.0e it walks",
                  R->count, combinations, (double)kEnumerateLimit);
      return "too many combinations";
    }
  }
  double now = currentTotal(R);
  R->prune = !enumerate;
  R->best = enumerate ? INFINITY : now;
  for (int k = 0; k < R->count; ++k)
    R->bestPick[k] = -1;
  search(R, 0, 0.0);
  if (R->aborted)
    return dtPropKeep(p,
                      "refined; the exact search over %d ops stopped "
                      "after %d nodes",
                      R->count, (int)kSearchBudget);
  const char *summary = dtPropKeep(p, "optimal over %d ops (%s)", R->count,
                                   enumerate ? "enumerated" : "exact search");
  /* Nothing cheaper than the current choices: they are optimal. */
  if (R->count == 0 || R->bestPick[0] < 0 || !lower(R->best, now))
    return summary;
  for (int k = 0; k < R->count; ++k) {
    Var *v = &R->vars[R->order[k]];
    const Cand *c = &v->cands[R->bestPick[k]];
    if (c->isCurrent)
      continue;
    Choice *ch = &R->scratch[1];
    if (!dtPropSpecsWith(p, v->rule, v->operands, v->results, &c->strategy,
                         c->pass, c->passOperand, ch)) {
      R->failed = true;
      return "inconsistent candidate";
    }
    Choice *cur = &R->scratch[3];
    currentChoice(R, v, cur);
    bool same = true;
    for (int i = 0; i < v->numOperands; ++i)
      if (v->operands[i] &&
          !dtensorShardingSpecEqual(&cur->operands[i], &ch->operands[i]))
        same = false;
    for (int j = 0; j < v->numResults; ++j)
      if (v->results[j] &&
          !dtensorShardingSpecEqual(&cur->results[j], &ch->results[j]))
        same = false;
    if (!same)
      apply(R, v, ch);
  }
  return summary;
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
    if (!v->choice)
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
} CostSum;

static void addOpCost(void *entry, void *user) {
  const NeedEntry *e = entry;
  CostSum *sum = user;
  Prop *p = sum->p;
  MlirOperation op = {(void *)e->op};
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
  CostSum sum = {p, dtTableInit(sizeof(Conversion)), 0.0};
  dtTableForEach(&p->needs, addOpCost, &sum);
  dtTableFree(&sum.seen);
  return sum.total;
}

void dtPropRefine(Prop *p, MlirOperation func) {
  p->choiceSummary = "program order";
  if (p->choice == DT_CHOICE_ORDER || p->failed)
    return;
  if (p->numCostly == 0 && p->choice == DT_CHOICE_WHOLE) {
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
    enqueue(&R, varOf(&R, p->costly[n]));
    enqueueAround(&R, p->costly[n]);
  }
  while (R.numStack > 0 && !R.failed && !p->failed)
    visit(&R, R.stack[--R.numStack]);
  p->choiceSummary = "refined";
  /* The exact search on small functions. */
  int count = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(R.entry);
       !mlirOperationIsNull(op) && !R.failed && count <= kExactOps;
       op = mlirOperationGetNextInBlock(op))
    count += varOf(&R, op) >= 0;
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
      int v = varOf(&R, op);
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
      p->choiceSummary = exactChoice(&R, p->choice == DT_CHOICE_ENUMERATE);
  }
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
