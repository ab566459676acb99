/* dtensor-propagate: the exact search of the whole function's choice, on
 * functions of at most kExactOps ops with a strategy. Every strategy of
 * every op (each mesh axis on no factor or on one, in any order; every set
 * of axes a Partial(sum) operand may flow on; interleaved strategies only
 * as an op's current choice), the ops taken in program order, bounded by
 * the refined choice and by the cheapest fixed-end cost of the ops still
 * to pick. choice=enumerate walks every combination without pruning. */
#include "PropagateRefine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Nodes the exact search may visit before it stops with what refinement
 * found (the default choice only). */
enum { kSearchBudget = 2000000 };

/* The most combinations choice=enumerate walks. */
#define kEnumerateLimit 3e7

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

/* An argument's candidate `s` (a layout). */
static bool addArgCand(Var *v, const DtensorShardingSpec *s) {
  Cand k;
  memset(&k, 0, sizeof(k));
  pack(s, &k.res[0]);
  for (size_t n = 0; n < v->numCands; ++n)
    if (sameCSpec(v->cands[n].res[0], k.res[0]))
      return true;
  Cand *slot =
      dtArrayPush((void **)&v->cands, &v->numCands, &v->capCands, sizeof(Cand));
  if (!slot)
    return false;
  *slot = k;
  return true;
}

/* Every layout of an argument: each mesh axis on no dim or on one, in any
 * order; those that fit its shape. */
static bool enumerateArgLayouts(Refine *R, Var *v, int axis,
                                DtensorShardingSpec *s) {
  int rank = dtensorMeshGetRank(R->p->mesh);
  if (axis == rank)
    return !dtPropFits(R->p, v->results[0], s) || addArgCand(v, s);
  if (!enumerateArgLayouts(R, v, axis + 1, s))
    return false;
  for (int d = 0; d < s->rank; ++d) {
    s->axes[d][s->numAxes[d]++] = axis;
    bool ok = enumerateArgLayouts(R, v, axis + 1, s);
    --s->numAxes[d];
    if (!ok)
      return false;
  }
  return true;
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
  /* The candidate's compute (a contraction's), from its layouts. */
  Choice *c = &R->scratch[2];
  for (int i = 0; i < v->numOperands; ++i)
    if (v->operands[i])
      unpack(&k->need[i], v->operands[i]->rank, &c->operands[i]);
  for (int j = 0; j < v->numResults; ++j)
    if (v->results[j])
      unpack(&k->res[j], v->results[j]->rank, &c->results[j]);
  double cost = v->rule
                    ? dtPropComputeUs(R->p, v->rule, v->operands, v->results, c)
                    : 0.0;
  for (int j = 0; j < v->numResults; ++j) {
    if (!v->results[j])
      continue;
    DtensorShardingSpec a, b;
    unpack(&k->res[j], v->results[j]->rank, &a);
    size_t first;
    if (!dtRefineOtherNeeds(R, v->results[j]->value, (MlirOperation){NULL}, -1,
                            true, &first))
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
    if (dtRefineHasCSpec(R->shared + ln->fixedNeeds, (size_t)ln->numFixedNeeds,
                         target))
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
  if (R->prune && !dtRefineLower(partial + R->suffix[k], R->best))
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
  if (v->arg >= 0) {
    DtensorShardingSpec s = specOf(v->results[0]);
    if (!addArgCand(v, &s))
      return false;
    v->cands[0].isCurrent = true;
    return true;
  }
  Choice *c = &R->scratch[3];
  dtRefineCurrentChoice(R, v, c);
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
    int argVar = dtRefineArgVarOf(R, o);
    if (argVar >= 0) {
      for (int q = 0; q < k; ++q)
        if (R->order[q] == argVar)
          ln->producer = q;
      if (ln->producer < 0)
        return false;
    } else if (mlirValueIsAOpResult(o)) {
      int pv = dtRefineVarOf(R, mlirOpResultGetOwner(o));
      ln->result = (int)mlirOpResultGetResultNumber(o);
      for (int q = 0; q < k && pv >= 0; ++q)
        if (R->order[q] == pv)
          ln->producer = q;
      if (pv >= 0 && ln->producer < 0) /* not before it in the block */
        return false;
    }
    if (!dtRefineOtherNeeds(R, o, (MlirOperation){NULL}, -1, true,
                            &ln->fixedNeeds))
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
bool dtRefinePrepare(Refine *R) {
  for (int k = 0; k < R->count; ++k) {
    Var *v = &R->vars[R->order[k]];
    Strategy st;
    memset(&st, 0, sizeof(st));
    st.seed = -1;
    DtensorShardingSpec s;
    if (v->arg >= 0)
      initSpec(v->results[0]->rank, &s);
    if (!addCurrent(R, v) || !(v->arg >= 0 ? enumerateArgLayouts(R, v, 0, &s)
                                           : enumerateStrategies(R, v, 0, &st)))
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
double dtRefineCurrentTotal(Refine *R) {
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
const char *dtRefineExact(Refine *R, bool enumerate) {
  Prop *p = R->p;
  if (!dtRefinePrepare(R)) {
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
  double now = dtRefineCurrentTotal(R);
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
  if (R->count == 0 || R->bestPick[0] < 0 || !dtRefineLower(R->best, now))
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
    dtRefineCurrentChoice(R, v, cur);
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
      dtRefineApply(R, v, ch);
  }
  return summary;
}
