/* dtensor-propagate: the factor strategies an op's rule allows, seeded by
 * its known operands and its results' demands, and the decision of an op
 * that has a rule (the cheapest strategy, replicated, a free op's demand,
 * an annotation or an explicit redistribute). */
#include "PropagateStrategy.h"
#include "Decisions.h"
#include "Propagate.h"
#include "PropagateRefine.h"
#include "PropagateRegions.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Func.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Splits the axes of a compound dim over its factors, major first: a factor
 * takes axes while their product divides its size, and the next factor
 * starts only once the previous one is fully split. An interleaved dim
 * (S0i3) leaves whole the leading factors that make its groups. Stops
 * where the axes do not fit (those are then not part of the strategy). */
static void strategyFromCompound(const DtRule *r, const DtCompound *c,
                                 const DtensorMesh *mesh,
                                 const DtensorShardingSpec *s, int d,
                                 Strategy *out) {
  int k = 0;
  if (s->interleave[d] > 1) {
    int64_t groups = 1;
    while (k < c->count && groups < s->interleave[d])
      groups *= r->factorSize[c->factor[k++]];
    if (groups != s->interleave[d])
      return;
  }
  for (int j = k; j < c->count; ++j)
    if (out->numAxes[c->factor[j]] > 0 || !r->shardable[c->factor[j]])
      return;
  int64_t prod = 1;
  for (int i = 0; i < s->numAxes[d]; ++i) {
    int a = s->axes[d][i];
    int64_t n = dtensorMeshGetAxisSize(mesh, a);
    while (k < c->count && r->factorSize[c->factor[k]] % (prod * n) != 0) {
      if (prod != r->factorSize[c->factor[k]])
        return;
      ++k;
      prod = 1;
    }
    if (k == c->count || (out->used & (1u << a)))
      return;
    int f = c->factor[k];
    out->axes[f][out->numAxes[f]++] = a;
    out->used |= 1u << a;
    prod *= n;
  }
}

/* The factor sharding a value's spec implies through `dimFactor`. */
static void strategyFrom(const DtRule *r, const DtensorMesh *mesh,
                         const int *dimFactor, int rank,
                         const DtensorShardingSpec *s, Strategy *out) {
  for (int d = 0; d < rank; ++d) {
    int f = dimFactor[d];
    if (f <= -2 && s->numAxes[d] > 0) {
      strategyFromCompound(r, &r->compound[-2 - f], mesh, s, d, out);
      continue;
    }
    if (f < 0 || !r->shardable[f] || out->numAxes[f] > 0 || s->numAxes[d] == 0)
      continue;
    unsigned axes = 0;
    for (int i = 0; i < s->numAxes[d]; ++i)
      axes |= 1u << s->axes[d][i];
    if (axes & out->used)
      continue;
    out->numAxes[f] = s->numAxes[d];
    memcpy(out->axes[f], s->axes[d], sizeof(int) * (size_t)s->numAxes[d]);
    out->interleave[f] = s->interleave[d] > 1 ? s->interleave[d] : 0;
    out->used |= axes;
  }
}

/* The axes of dim `f` (a factor, or a compound of them) under `st`; false
 * when a compound's factors are not split in order (a later one sharded
 * before an earlier one is full), which no layout of the dim expresses. */
static bool dimAxes(Prop *p, const DtRule *r, const Strategy *st, int f,
                    DtensorShardingSpec *s, int d) {
  if (f >= 0) {
    s->numAxes[d] = st->numAxes[f];
    memcpy(s->axes[d], st->axes[f], sizeof(int) * (size_t)st->numAxes[f]);
    if (st->numAxes[f] > 0 && st->interleave[f] > 1)
      s->interleave[d] = st->interleave[f];
    return true;
  }
  if (f == -1)
    return true;
  const DtCompound *c = &r->compound[-2 - f];
  /* Leading factors left whole before a sharded one make interleaved
   * groups (a reshape of [3, H] sharded on H is S0i3 on the flat 3H). */
  int first = 0;
  int64_t groups = 1;
  while (p->interleaved && first < c->count &&
         st->numAxes[c->factor[first]] == 0)
    groups *= r->factorSize[c->factor[first++]];
  if (first == c->count)
    return true;
  if (groups > 1)
    s->interleave[d] = groups;
  bool open = false; /* a factor before is not fully split */
  for (int k = first; k < c->count; ++k) {
    int g = c->factor[k];
    if (st->interleave[g] > 1)
      return false; /* an interleaved factor inside a compound dim */
    int64_t prod = 1;
    for (int i = 0; i < st->numAxes[g]; ++i)
      prod *= dtensorMeshGetAxisSize(p->mesh, st->axes[g][i]);
    if (st->numAxes[g] > 0 && (open || r->factorSize[g] % prod != 0))
      return false;
    open |= prod != r->factorSize[g];
    for (int i = 0; i < st->numAxes[g]; ++i)
      s->axes[d][s->numAxes[d]++] = st->axes[g][i];
  }
  return true;
}

/* The dims of a value of `rank` whose dim d is factor (or compound)
 * `dimFactor[d]`, sharded as `st` says; false where no layout expresses it. */
static bool factorSpec(Prop *p, const DtRule *r, const Strategy *st,
                       const int *dimFactor, int rank, DtensorShardingSpec *s) {
  initSpec(rank, s);
  for (int d = 0; d < rank; ++d)
    if (!dimAxes(p, r, st, dimFactor[d], s, d))
      return false;
  int64_t groups;
  return interleavedDim(s, &groups) != -1;
}

/* Which Partial(sum) operands flow through unresolved under `st`, read
 * from the known operands: a linear operand's axes (DT_FLOW_ONE_LINEAR),
 * or the axes every input is Partial on alike (DT_FLOW_ALL_SUM). */
static void passOf(const DtRule *r, const Known *known, int numKnown,
                   const Strategy *st, unsigned *pass, int *passOperand) {
  *pass = 0;
  *passOperand = -1;
  if (r->flow == DT_FLOW_NONE)
    return;
  bool allAlike = true;
  unsigned first = 0;
  int count = 0;
  /* Inits follow the result (below), so only inputs decide. */
  int inputs = 0;
  for (int i = 0; i < r->numOperands; ++i)
    inputs += r->operandIsTensor[i] && !r->isInit[i];
  for (int k = 0; k < numKnown; ++k) {
    if (known[k].isResult || r->isInit[known[k].index])
      continue;
    const DtensorShardingSpec *s = &known[k].spec;
    unsigned m = 0;
    bool sums = true;
    for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
      if (s->partial[a] != DTENSOR_REDUCE_NONE) {
        m |= 1u << a;
        sums &= s->partial[a] == DTENSOR_REDUCE_SUM;
      }
    if (r->flow == DT_FLOW_ONE_LINEAR && m && sums && !(m & st->used) &&
        r->linear[known[k].index] && *passOperand < 0) {
      *passOperand = known[k].index;
      *pass = m;
    }
    if (count++ == 0)
      first = m;
    allAlike &= m == first && sums;
  }
  if (r->flow == DT_FLOW_ALL_SUM)
    *pass =
        allAlike && first && !(first & st->used) && count == inputs ? first : 0;
}

/* Whether the interleaved dim of `s` (if any) splits evenly: every group
 * into equal chunks (the partition of uneven shards does not slice
 * interleaved ones). */
static bool evenInterleave(Prop *p, const Info *in,
                           const DtensorShardingSpec *s) {
  int64_t groups;
  int d = interleavedDim(s, &groups);
  if (d < 0)
    return true;
  int64_t prod = 1;
  for (int i = 0; i < s->numAxes[d]; ++i)
    prod *= dtensorMeshGetAxisSize(p->mesh, s->axes[d][i]);
  int64_t size = mlirShapedTypeGetDimSize(mlirValueGetType(in->value), d);
  return size % groups == 0 && (size / groups) % prod == 0;
}

bool dtPropSpecsWith(Prop *p, const DtRule *r, Info **operands, Info **results,
                     const Strategy *st, unsigned pass, int passOperand,
                     Choice *c) {
  DtensorReduceKind partial[DTENSOR_MAX_MESH_RANK] = {DTENSOR_REDUCE_NONE};
  for (int f = 0; f < r->numFactors; ++f)
    for (int i = 0; i < st->numAxes[f]; ++i)
      if (r->reduce[f] != DTENSOR_REDUCE_NONE)
        partial[st->axes[f][i]] = r->reduce[f];
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    if (pass & (1u << a)) {
      if (partial[a] != DTENSOR_REDUCE_NONE)
        return false;
      partial[a] = DTENSOR_REDUCE_SUM;
    }
  for (int i = 0; i < r->numOperands; ++i) {
    if (!r->operandIsTensor[i] || !operands[i])
      continue;
    DtensorShardingSpec *s = &c->operands[i];
    if (!factorSpec(p, r, st, r->operandFactor[i], operands[i]->rank, s))
      return false;
    bool passes = r->flow == DT_FLOW_ALL_SUM ? pass != 0 : i == passOperand;
    for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a) {
      if (passes && (pass & (1u << a)))
        s->partial[a] = DTENSOR_REDUCE_SUM;
      if (r->isInit[i])
        s->partial[a] = partial[a];
    }
    if (!dtPropFits(p, operands[i], s) || !evenInterleave(p, operands[i], s))
      return false;
  }
  for (int j = 0; j < r->numResults; ++j) {
    if (!r->resultIsTensor[j] || !results[j])
      continue;
    DtensorShardingSpec *s = &c->results[j];
    if (!factorSpec(p, r, st, r->resultFactor[j], results[j]->rank, s))
      return false;
    for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
      s->partial[a] = partial[a];
    if (!dtPropFits(p, results[j], s) || !evenInterleave(p, results[j], s))
      return false;
  }
  c->strategy = *st;
  return true;
}

/* The operand and result specs of `st` on the op, Partial operands passing
 * as the known ones say; false if the strategy does not give valid
 * layouts. */
static bool specsOf(Prop *p, const DtRule *r, Info **operands, Info **results,
                    const Known *known, int numKnown, const Strategy *st,
                    Choice *c) {
  unsigned pass;
  int passOperand;
  passOf(r, known, numKnown, st, &pass, &passOperand);
  return dtPropSpecsWith(p, r, operands, results, st, pass, passOperand, c);
}

/* Whether another user of the operand needs `need` too (its conversion
 * is made anyway). */
static bool sharedNeed(const Known *k, const DtensorShardingSpec *need) {
  if (!k->numShared)
    return false;
  CSpec c;
  pack(need, &c);
  for (int i = 0; i < k->numShared; ++i)
    if (sameCSpec(k->shared[i], c))
      return true;
  return false;
}

double dtPropChoiceCost(Prop *p, Info **operands, Info **results,
                        const Known *known, int numKnown, const Choice *c) {
  double cost = 0.0;
  for (int k = 0; k < numKnown; ++k) {
    const Known *kv = &known[k];
    if (kv->isResult)
      cost += dtPropConvertCost(p, results[kv->index], &c->results[kv->index],
                                &kv->spec);
    else if (!sharedNeed(kv, &c->operands[kv->index]))
      cost += dtPropConvertCost(p, operands[kv->index], &kv->spec,
                                &c->operands[kv->index]);
  }
  return cost;
}

/* Whether `r` is a contraction: a sum over a factor of at least two
 * tensor inputs (not inits). */
static bool isContraction(const DtRule *r) {
  if (r->kind != DT_RULE_FACTORS)
    return false;
  int inputs = 0;
  for (int i = 0; i < r->numOperands; ++i)
    inputs += r->operandIsTensor[i] && !r->isInit[i];
  bool sums = false;
  for (int f = 0; f < r->numFactors; ++f)
    sums |= r->reduce[f] == DTENSOR_REDUCE_SUM;
  return inputs >= 2 && sums;
}

/* Factor `f`'s extent and the devices that share it under choice `c`
 * (the mesh axes on a dim that is the factor). */
static void factorOf(Prop *p, const DtRule *r, Info **operands, Info **results,
                     const Choice *c, int f, double *extent, double *shares) {
  *extent = *shares = 1.0;
  for (int side = 0; side < 2; ++side) {
    int n = side ? r->numResults : r->numOperands;
    for (int i = 0; i < n; ++i) {
      Info *in = side ? results[i] : operands[i];
      const int *factor = side ? r->resultFactor[i] : r->operandFactor[i];
      const DtensorShardingSpec *spec = side ? &c->results[i] : &c->operands[i];
      if (!in || !in->isTensor)
        continue;
      for (int d = 0; d < in->rank; ++d)
        if (factor[d] == f) {
          int64_t e = mlirShapedTypeGetDimSize(mlirValueGetType(in->value), d);
          *extent = e > 0 ? (double)e : 1.0;
          for (int k = 0; k < spec->numAxes[d]; ++k)
            *shares *=
                (double)dtensorMeshGetAxisSize(p->mesh, spec->axes[d][k]);
          return;
        }
    }
  }
}

double dtPropComputeUs(Prop *p, const DtRule *r, Info **operands,
                       Info **results, const Choice *c) {
  if (!isContraction(r))
    return 0.0;
  double points = 1.0;
  for (int f = 0; f < r->numFactors; ++f) {
    double extent, shares;
    factorOf(p, r, operands, results, c, f, &extent, &shares);
    points *= extent / shares;
  }
  double overheadUs, gmacs;
  if (dtensorCalibrationGetContract(p->calibration, &overheadUs, &gmacs))
    return overheadUs + points / (gmacs * 1e3);
  return points * DT_PROP_POINT_US;
}

static void setAttr(MlirOperation op, const char *name, MlirAttribute value) {
  mlirOperationSetDiscardableAttributeByName(
      op, mlirStringRefCreateFromCString(name), value);
}

/* A value nobody has decided takes the layout `want` its user needs; its
 * producer is decided with that as the demand on it. */
void dtPropAdopt(Prop *p, Info *in, const DtensorShardingSpec *want,
                 MlirOperation user) {
  if (in->known || !in->isTensor)
    return;
  if (!in->hasDemand) {
    in->hasDemand = true;
    setDemand(in, want);
    in->demandPriority = INT64_MAX;
    in->demandLoc = mlirOperationGetLocation(user);
  }
  MlirValue v = in->value;
  if (mlirValueIsAOpResult(v)) {
    MlirOperation producer = mlirOpResultGetOwner(v);
    if (!dtPropIsDecided(p, producer))
      dtPropDecide(p, producer);
    return;
  }
  /* An argument without a layout. */
  in->known = true;
  DtensorShardingSpec noPartial = demandOf(in);
  resolved(&noPartial);
  setSpec(in, &noPartial); /* arguments arrive resolved */
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(user));
  char where[160];
  dtPropLocText(mlirOperationGetLocation(user), where, sizeof(where));
  in->origin = originOf(p->why || p->strict
                            ? dtPropKeep(p, "what '%.*s' at %s needs",
                                         (int)name.length, name.data, where)
                            : "what its user needs");
}

void dtPropDescribeRedistribution(Prop *p, MlirOperation op, int i,
                                  const Info *in,
                                  const DtensorShardingSpec *want, DtBuf *why) {
  /* Naming the value builds an AsmState over the whole function: only do
   * it when the text is wanted. */
  if (!p->strict && !why)
    return;
  char from[256], to[256], value[128] = "";
  DtensorShardingSpec cur = specOf(in);
  dtensorShardingSpecPrint(&cur, from, sizeof(from));
  dtensorShardingSpecPrint(want, to, sizeof(to));
  DtBuf vb = dtBufInit(value, sizeof(value));
  MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
  MlirAsmState state = mlirAsmStateCreateForValue(in->value, flags);
  mlirValuePrintAsOperand(in->value, state, dtBufSink, &vb);
  mlirAsmStateDestroy(state);
  mlirOpPrintingFlagsDestroy(flags);
  if (p->strict) {
    char origin[ORIGIN_SIZE];
    dtPropOriginText(in->origin, origin, sizeof(origin));
    dtPropError(
        p, op,
        "operand %d (%s) has layout %s (from %s) but this op needs %s: an "
        "implicit redistribution, which strict mode forbids; annotate the "
        "value or change the layouts",
        i, value, from, origin, to);
  }
  if (why)
    dtBufPrintf(why, "; operand %d (%s): redistribute %s -> %s", i, value, from,
                to);
}

/* Whether a decision is the op's own factor rule's (not an annotation's,
 * a redistribute's, a callee's or a region's, which propagation fixes). */
static bool decidedByRule(const DtRule *r) {
  static const char *const fixed[] = {
      "annotation", "redistribute", "call", "scf.for", "scf.if", "scf.while"};
  if (r->kind != DT_RULE_FACTORS)
    return false;
  for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); ++i)
    if (!strcmp(r->family, fixed[i]))
      return false;
  return true;
}

/* Writes the decision of an op and sets its results. Never inlined: its
 * buffers must not sit in the frames of dtPropDecideIf and dtPropDecideFor,
 * which recurse once per level of region nesting. */
__attribute__((noinline)) void dtPropRecord(Prop *p, MlirOperation op,
                                            const DtRule *r, Info **operands,
                                            Info **results, const Choice *c,
                                            Origin origin) {
  char whyText[2048];
  DtBuf why = dtBufInit(whyText, sizeof(whyText));
  bool explain = p->why || r->kind == DT_RULE_REPLICATE;
  if (explain) {
    char text[ORIGIN_SIZE];
    dtPropOriginText(origin, text, sizeof(text));
    dtBufPrintf(&why, "%s: from %s", r->family, text);
  }
  MlirAttribute unit = mlirUnitAttrGet(p->ctx);
  MlirAttribute opAttrs[DT_MAX_RULE_VALUES];
  bool anyTensorOperand = false;
  for (int i = 0; i < r->numOperands; ++i) {
    if (!r->operandIsTensor[i] || !operands[i]) {
      opAttrs[i] = unit;
      continue;
    }
    anyTensorOperand = true;
    opAttrs[i] = dtPropLayoutAttr(p, &c->operands[i]);
    Info *in = operands[i];
    if (!in->known)
      dtPropAdopt(p, in, &c->operands[i], op);
    DtensorShardingSpec need = c->operands[i], cur = specOf(in);
    dtPropDropCreatedPartial(&cur, &need);
    if (in->known && !dtensorShardingSpecEqual(&cur, &need))
      dtPropDescribeRedistribution(p, op, i, in, &c->operands[i],
                                   explain ? &why : NULL);
  }
  if (anyTensorOperand) {
    dtPropDecided(p, op, DT_DECIDED_OPERANDS,
                  dtPropArray(p, r->numOperands, opAttrs));
    const DtensorShardingSpec *need[DT_MAX_RULE_VALUES];
    for (int i = 0; i < r->numOperands; ++i)
      need[i] = r->operandIsTensor[i] && operands[i] ? &c->operands[i] : NULL;
    dtPropNoteNeeds(p, op, r->numOperands, need, decidedByRule(r));
  }
  MlirAttribute resAttrs[DT_MAX_RULE_VALUES];
  int numTensorResults = 0;
  for (int j = 0; j < r->numResults; ++j) {
    if (!r->resultIsTensor[j] || !results[j]) {
      resAttrs[j] = unit;
      continue;
    }
    ++numTensorResults;
    Info *res = results[j];
    if (!res->fixed) {
      res->known = true;
      setSpec(res, &c->results[j]);
      res->origin = origin;
    }
    DtensorShardingSpec cur = specOf(res);
    resAttrs[j] = dtPropLayoutAttr(p, &cur);
  }
  if (numTensorResults == 1 && r->numResults == 1)
    dtPropDecided(p, op, DT_DECIDED_LAYOUT, resAttrs[0]);
  else if (numTensorResults > 0)
    dtPropDecided(p, op, DT_DECIDED_LAYOUT,
                  dtPropArray(p, r->numResults, resAttrs));
  /* Partition offsets a sharded loop's indices: a linalg body's
   * linalg.index, a gather's lookups. */
  if (r->kind == DT_RULE_FACTORS &&
      (!strcmp(r->family, "linalg") || !strcmp(r->family, "gather"))) {
    MlirAttribute loops[DT_MAX_FACTORS];
    for (int f = 0; f < r->numFactors; ++f) {
      int64_t axes[DTENSOR_MAX_MESH_RANK];
      for (int i = 0; i < c->strategy.numAxes[f]; ++i)
        axes[i] = c->strategy.axes[f][i];
      loops[f] = mlirDenseI64ArrayGet(p->ctx, c->strategy.numAxes[f], axes);
    }
    dtPropDecided(p, op, DT_DECIDED_LOOPS,
                  dtPropArray(p, r->numFactors, loops));
  }
  /* An op without a rule always says so: it is replicated, which may cost
   * communication the user did not expect. */
  if (explain)
    setAttr(op, DT_ATTR_WHY,
            mlirStringAttrGet(p->ctx, mlirStringRefCreateFromCString(whyText)));
}

/* Whether two candidates need and give the same layouts. */
static bool sameChoice(const DtRule *r, const Choice *a, const Choice *b) {
  for (int i = 0; i < r->numOperands; ++i)
    if (r->operandIsTensor[i] &&
        !dtensorShardingSpecEqual(&a->operands[i], &b->operands[i]))
      return false;
  for (int j = 0; j < r->numResults; ++j)
    if (r->resultIsTensor[j] &&
        !dtensorShardingSpecEqual(&a->results[j], &b->results[j]))
      return false;
  return true;
}

/* why=true on an op that needs communication: the cheapest candidate it
 * did not take, with both modelled costs. */
static void explainAlternative(Prop *p, MlirOperation op, const DtRule *r,
                               const Choice *chosen, const Choice *other) {
  char text[3072];
  DtBuf b = dtBufInit(text, sizeof(text));
  MlirAttribute why = dtGetAttr(op, DT_ATTR_WHY);
  if (mlirAttributeIsAString(why)) {
    MlirStringRef v = mlirStringAttrGetValue(why);
    dtBufPrintf(&b, "%.*s; ", (int)v.length, v.data);
  }
  dtBufPrintf(&b,
              "chosen: %.3f us modelled; cheapest alternative:", chosen->cost);
  for (int i = 0; i < r->numOperands; ++i)
    if (r->operandIsTensor[i]) {
      char spec[256];
      dtensorShardingSpecPrint(&other->operands[i], spec, sizeof(spec));
      dtBufPrintf(&b, " operand %d %s,", i, spec);
    }
  for (int j = 0; j < r->numResults; ++j)
    if (r->resultIsTensor[j]) {
      char spec[256];
      dtensorShardingSpecPrint(&other->results[j], spec, sizeof(spec));
      dtBufPrintf(&b, " result %d %s,", j, spec);
    }
  if (isinf(other->cost))
    dtBufPrintf(&b, " not possible here");
  else
    dtBufPrintf(&b, " %.3f us", other->cost);
  setAttr(op, DT_ATTR_WHY,
          mlirStringAttrGet(p->ctx, mlirStringRefCreateFromCString(text)));
}

int dtPropBestChoice(Prop *p, const DtRule *r, Info **operands, Info **results,
                     const Known *known, int numKnown, Choice *choices,
                     Choice **best, Choice **alt) {
  /* The best candidate, the one being tried, and (when `alt` is wanted)
   * the cheapest other one; swapped by pointer, never copied. */
  Choice *bestp = &choices[0], *trialp = &choices[1], *altp = &choices[2];
  bool have = false, haveAlt = false;
  int bestSeed = -1;
  /* Every seed, then no seed at all (all replicated): the first of equally
   * cheap candidates wins. */
  for (int k = 0; k <= numKnown; ++k) {
    int seed = k < numKnown ? k : -1;
    if (seed >= 0 && known[seed].noSeed)
      continue;
    Strategy st;
    memset(&st, 0, sizeof(st));
    st.seed = seed;
    if (seed >= 0) {
      const Known *kv = &known[seed];
      strategyFrom(r, p->mesh,
                   kv->isResult ? r->resultFactor[kv->index]
                                : r->operandFactor[kv->index],
                   kv->info->rank, &kv->spec, &st);
      for (int o = 0; o < numKnown; ++o) {
        if (o == seed)
          continue;
        kv = &known[o];
        strategyFrom(r, p->mesh,
                     kv->isResult ? r->resultFactor[kv->index]
                                  : r->operandFactor[kv->index],
                     kv->info->rank, &kv->spec, &st);
      }
    }
    if (!specsOf(p, r, operands, results, known, numKnown, &st, trialp))
      continue;
    trialp->compute = dtPropComputeUs(p, r, operands, results, trialp);
    trialp->cost =
        dtPropChoiceCost(p, operands, results, known, numKnown, trialp) +
        trialp->compute;
    if (have && sameChoice(r, trialp, bestp))
      continue;
    if (!have || trialp->cost < bestp->cost) {
      Choice *swap = bestp;
      bestp = trialp;
      trialp = swap;
      /* The old best becomes the alternative. */
      if (have && alt && (!haveAlt || trialp->cost < altp->cost)) {
        Choice *keep = altp;
        altp = trialp;
        trialp = keep;
        haveAlt = true;
      }
      have = true;
      bestSeed = seed;
    } else if (alt && (!haveAlt || trialp->cost < altp->cost) &&
               !sameChoice(r, trialp, altp)) {
      Choice *swap = altp;
      altp = trialp;
      trialp = swap;
      haveAlt = true;
    }
  }
  *best = have ? bestp : NULL;
  if (alt)
    *alt = haveAlt ? altp : NULL;
  return bestSeed;
}

__attribute__((noinline)) void dtPropDecideFactors(Prop *p, MlirOperation op,
                                                   const DtRule *r,
                                                   Info **operands,
                                                   Info **results) {
  Known *known =
      dtScratchTake(&p->scratch, sizeof(Known) * 2 * DT_MAX_RULE_VALUES);
  Choice *choices =
      known ? dtScratchTake(&p->scratch, sizeof(Choice) * 3) : NULL;
  if (!choices) {
    if (known)
      dtScratchGive(&p->scratch, known);
    dtPropError(p, op, "out of memory");
    return;
  }
  int numKnown = 0;
  /* Seeds: result demands (strongest first), then known operands (fixed
   * first). */
  for (int pass = 0; pass < 2; ++pass)
    for (int j = 0; j < r->numResults; ++j)
      if (results[j] && results[j]->hasDemand &&
          (results[j]->demandPriority != INT64_MAX) == (pass == 0)) {
        Known *k = &known[numKnown++];
        k->isResult = true;
        k->index = j;
        k->spec = demandOf(results[j]);
        k->info = results[j];
        k->origin = originOf(NULL);
        k->numShared = 0;
        k->noSeed = false;
      }
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < r->numOperands; ++i)
      if (operands[i] && operands[i]->known &&
          operands[i]->fixed == (pass == 0)) {
        Known *k = &known[numKnown++];
        k->isResult = false;
        k->index = i;
        k->spec = specOf(operands[i]);
        k->info = operands[i];
        k->origin = operands[i]->origin;
        k->numShared = 0;
        k->noSeed = false;
      }
  Choice *best, *alt = NULL;
  int bestSeed = dtPropBestChoice(p, r, operands, results, known, numKnown,
                                  choices, &best, p->why ? &alt : NULL);
  if (!best) {
    Strategy none;
    memset(&none, 0, sizeof(none));
    best = &choices[0];
    if (!specsOf(p, r, operands, results, NULL, 0, &none, best)) {
      dtPropError(p, op, "no strategy gives valid layouts for this op");
      dtScratchGive(&p->scratch, known);
      return;
    }
    best->cost = best->compute = 0.0;
  }
  Origin bestOrigin = originOf("no layout (replicated)");
  if (bestSeed >= 0 && known[bestSeed].origin.text)
    bestOrigin = known[bestSeed].origin;
  else if (bestSeed >= 0 && (p->why || p->strict)) {
    char where[160];
    dtPropLocText(known[bestSeed].info->demandLoc, where, sizeof(where));
    bestOrigin = originOf(dtPropKeep(p, "the layout wanted at %s", where));
  } else if (bestSeed >= 0)
    bestOrigin = originOf("the layout its users want");
  dtPropRecord(p, op, r, operands, results, best, bestOrigin);
  if (alt && best->cost - best->compute > 0)
    explainAlternative(p, op, r, best, alt);
  /* A contraction that leaves mesh axes off its loops repeats work on
   * those devices: the refinement looks at it as at a conversion. */
  unsigned all = (1u << dtensorMeshGetRank(p->mesh)) - 1;
  if (best->compute > 0 && (best->strategy.used & all) != all) {
    MlirOperation *slot = dtArrayPush((void **)&p->costly, &p->numCostly,
                                      &p->capCostly, sizeof(MlirOperation));
    if (slot)
      *slot = op;
  }
  dtScratchGive(&p->scratch, known);
}

/* A candidate on the scratch stack (dtScratchGive it). */
static Choice *newChoice(Prop *p, MlirOperation op) {
  Choice *c = dtScratchTake(&p->scratch, sizeof(Choice));
  if (!c)
    dtPropError(p, op, "out of memory");
  return c;
}

__attribute__((noinline)) void dtPropDecideReplicated(Prop *p, MlirOperation op,
                                                      const DtRule *r,
                                                      Info **operands,
                                                      Info **results) {
  Choice *c = newChoice(p, op);
  if (!c)
    return;
  for (int i = 0; i < r->numOperands; ++i)
    if (operands[i])
      initSpec(operands[i]->rank, &c->operands[i]);
  for (int j = 0; j < r->numResults; ++j)
    if (results[j])
      initSpec(results[j]->rank, &c->results[j]);
  dtPropRecord(p, op, r, operands, results, c,
               originOf(dtPropKeep(p, "%s, so replicated", r->family)));
  dtScratchGive(&p->scratch, c);
}

/* A free op (tensor.empty, constants) takes its demand, or replicated. */
__attribute__((noinline)) void dtPropDecideFree(Prop *p, MlirOperation op,
                                                const DtRule *r,
                                                Info **operands,
                                                Info **results) {
  Choice *c = newChoice(p, op);
  if (!c)
    return;
  Origin origin = originOf("no user with a layout (replicated)");
  for (int j = 0; j < r->numResults; ++j) {
    if (!results[j])
      continue;
    initSpec(results[j]->rank, &c->results[j]);
    if (results[j]->hasDemand) {
      c->results[j] = demandOf(results[j]);
      /* A fresh value holds no pending reduction. */
      resolved(&c->results[j]);
      origin = originOf("what its user needs");
    }
  }
  dtPropRecord(p, op, r, operands, results, c, origin);
  dtScratchGive(&p->scratch, c);
}

/* dtensor.annotate (the operand must have the annotation's layout, the
 * result has it) and a global-program dtensor.redistribute (src, dst). */
__attribute__((noinline)) void dtPropDecideExplicit(Prop *p, MlirOperation op,
                                                    const DtRule *r,
                                                    Info **operands,
                                                    Info **results) {
  Choice *c = newChoice(p, op);
  if (!c)
    return;
  bool annotate = dtIsOp(op, DT_OP_ANNOTATE);
  MlirType type = mlirValueGetType(mlirOperationGetResult(op, 0));
  bool ok =
      dtPropReadLayout(p, op, dtGetAttr(op, annotate ? "layout" : "src"), type,
                       annotate ? "the annotation" : "'src'",
                       &c->operands[0]) &&
      dtPropReadLayout(p, op, dtGetAttr(op, annotate ? "layout" : "dst"), type,
                       annotate ? "the annotation" : "'dst'", &c->results[0]);
  if (ok) {
    if (!annotate) {
      results[0]->fixed = results[0]->known = true;
      setSpec(results[0], &c->results[0]);
      results[0]->origin = originOf("an explicit redistribute");
    }
    DtRule explicitRule = *r;
    explicitRule.kind = DT_RULE_FACTORS;
    explicitRule.family = annotate ? "annotation" : "redistribute";
    dtPropRecord(p, op, &explicitRule, operands, results, c,
                 annotate ? results[0]->origin
                          : originOf("an explicit redistribute"));
  }
  dtScratchGive(&p->scratch, c);
}
