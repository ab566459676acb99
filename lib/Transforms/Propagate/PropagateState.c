/* dtensor-propagate's state: the value table and decided set, the caches
 * of layout attributes, conversion costs, layout fits and rules (a model
 * repeats the same few of each), and message text. */
#include "PropagateState.h"
#include "Decisions.h"
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

/* ---- small helpers ------------------------------------------------------- */

/* A location as file:line:col when it is one, else as MLIR prints it. */
void dtPropLocText(MlirLocation loc, char *out, size_t capacity) {
  DtBuf b = dtBufInit(out, capacity);
  if (mlirLocationIsAFileLineColRange(loc)) {
    MlirStringRef f =
        mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
    dtBufPrintf(&b, "%.*s:%d:%d", (int)f.length, f.data,
                mlirLocationFileLineColRangeGetStartLine(loc),
                mlirLocationFileLineColRangeGetStartColumn(loc));
    return;
  }
  mlirLocationPrint(loc, dtBufSink, &b);
}

void dtPropOriginText(Origin o, char *out, size_t capacity) {
  char where[160] = "";
  if (!mlirLocationIsNull(o.at))
    dtPropLocText(o.at, where, sizeof(where));
  snprintf(out, capacity, "%s%s%s", o.text ? o.text : "",
           where[0] ? " at " : "", where);
}

void dtPropError(Prop *p, MlirOperation op, const char *format, ...) {
  va_list args;
  va_start(args, format);
  dtOpErrorV(op, format, args);
  va_end(args);
  p->failed = true;
}

/* Records a decision of `op` (an attribute, or in dtensor-spmd's table). */
void dtPropDecided(Prop *p, MlirOperation op, DtDecided kind,
                   MlirAttribute value) {
  if (!dtDecisionSet(p->decisions, op, kind, value))
    dtPropError(p, op, "out of memory");
}

/* A copy of a formatted string that lives as long as the function's
 * propagation; a string constant when out of memory. */
const char *dtPropKeep(Prop *p, const char *format, ...) {
  /* Whole, however long (auto-shard's summary outgrew a fixed buffer and
   * lost its peak, which bench/autoshard reads). */
  va_list args;
  va_start(args, format);
  int n = vsnprintf(NULL, 0, format, args);
  va_end(args);
  char *copy = n >= 0 ? malloc((size_t)n + 1) : NULL;
  char **slot = copy ? dtArrayPush((void **)&p->arena, &p->numArena,
                                   &p->capArena, sizeof(char *))
                     : NULL;
  if (!slot) {
    free(copy);
    return "(out of memory)";
  }
  va_start(args, format);
  vsnprintf(copy, (size_t)n + 1, format, args);
  va_end(args);
  *slot = copy;
  return copy;
}

/* ---- value table --------------------------------------------------------- */

static unsigned hashPtr(const void *ptr) {
  uint64_t k = (uint64_t)(uintptr_t)ptr;
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (unsigned)k;
}

static bool sameSlotValue(const void *entry, const void *key) {
  return ((const ValueSlot *)entry)->value == key;
}

static bool sameOp(const void *entry, const void *key) {
  return *(const void *const *)entry == key;
}

/* Whether values of type `t` get layouts: static ranked tensors of a known
 * element type. */
const TypeFacts *dtPropFacts(Prop *p, MlirType t) {
  TypeFacts *f = &p->typeFacts[hashPtr(t.ptr) & (TYPE_FACTS - 1)];
  if (f->type == t.ptr)
    return f;
  f->type = t.ptr;
  f->elementType = DTENSOR_F32;
  f->isTensor = mlirTypeIsARankedTensor(t) && mlirShapedTypeHasStaticShape(t) &&
                mlirShapedTypeGetRank(t) <= DTENSOR_MAX_TENSOR_RANK &&
                dtensorElementTypeFromMlir(mlirShapedTypeGetElementType(t),
                                           &f->elementType);
  f->rank = f->isTensor ? (int)mlirShapedTypeGetRank(t) : 0;
  return f;
}

/* The info of `v`, created on first use; NULL when out of memory. */
Info *dtPropInfo(Prop *p, MlirValue v) {
  uint64_t h = hashPtr(v.ptr);
  const ValueSlot *slot = dtTableFind(&p->values, h, sameSlotValue, v.ptr);
  if (slot)
    return &p->infos[slot->index];
  if (p->frozen)
    return NULL;
  if (p->numInfos == p->capInfos) {
    int cap = p->capInfos ? 2 * p->capInfos : 256;
    Info *infos = realloc(p->infos, sizeof(Info) * (size_t)cap);
    if (!infos)
      return NULL;
    p->infos = infos;
    p->capInfos = cap;
  }
  ValueSlot *fresh = dtTableInsert(&p->values, h);
  if (!fresh)
    return NULL;
  fresh->value = v.ptr;
  fresh->index = p->numInfos;
  Info *in = &p->infos[p->numInfos++];
  memset(in, 0, sizeof(*in));
  in->value = v;
  const TypeFacts *f = dtPropFacts(p, mlirValueGetType(v));
  in->isTensor = f->isTensor;
  in->elementType = f->elementType;
  if (in->isTensor) {
    in->rank = f->rank;
    in->origin = originOf("");
  }
  return in;
}

bool dtPropIsDecided(const Prop *p, MlirOperation op) {
  return dtTableFind(&p->decided, hashPtr(op.ptr), sameOp, op.ptr) != NULL;
}

bool dtPropMarkDecided(Prop *p, MlirOperation op) {
  const void **entry = dtTableInsert(&p->decided, hashPtr(op.ptr));
  if (entry)
    *entry = op.ptr;
  return entry != NULL;
}

/* Loop bodies are decided again: their ops leave the set. */
void dtPropUnmarkDecided(Prop *p, MlirOperation op) {
  void *entry = dtTableFind(&p->decided, hashPtr(op.ptr), sameOp, op.ptr);
  if (entry)
    dtTableRemove(&p->decided, entry);
}

/* ---- layouts and costs --------------------------------------------------- */

/* Layout attributes this pass builds, by (packed spec, rank). */
static uint64_t builtKey(const CSpec *c, int rank) {
  return dtHashMix(hashCSpec(2, *c), (uint64_t)rank);
}

static bool sameBuilt(const void *entry, const void *key) {
  const AttrCache *e = entry, *k = key;
  return e->rank == k->rank && sameCSpec(e->spec, k->spec);
}

/* Reads a layout through the dialect's cache; it must be on the function's
 * mesh, with at most one interleaved dim. */
bool dtPropReadLayout(Prop *p, MlirOperation at, MlirAttribute attr,
                      MlirType type, const char *what,
                      DtensorShardingSpec *out) {
  DtensorDiag diag;
  MlirIdentifier mesh;
  if (!dtLayoutCacheRead(&p->layouts, at, attr, type, out, &mesh, &diag)) {
    dtPropError(p, at, "%s: %s", what, diag.message);
    return false;
  }
  if (!mlirIdentifierEqual(mesh, p->meshId)) {
    MlirStringRef name = mlirIdentifierStr(mesh);
    dtPropError(p, at,
                "%s is on mesh '@%.*s' but this function is propagated on "
                "'@%s'; a function uses one mesh",
                what, (int)name.length, name.data, p->meshName);
    return false;
  }
  int64_t groups;
  int dim = interleavedDim(out, &groups);
  p->interleaved |= dim >= 0;
  if (dim == -1) {
    dtPropError(p, at,
                "%s has more than one interleaved dim (or more than 65535 "
                "groups); dtensor-propagate handles one",
                what);
    return false;
  }
  return true;
}

static bool sameArray(const void *entry, const void *key) {
  const ArrayEntry *e = entry, *k = key;
  return e->count == k->count &&
         !memcmp(e->elems, k->elems, sizeof(void *) * (size_t)k->count);
}

/* mlirArrayAttrGet through the cache. */
MlirAttribute dtPropArray(Prop *p, int n, const MlirAttribute *elems) {
  if (n == 0 || n > DT_MAX_RULE_VALUES)
    return mlirArrayAttrGet(p->ctx, n, elems);
  ArrayEntry key;
  key.count = n;
  uint64_t hash = (uint64_t)n;
  for (int i = 0; i < n; ++i) {
    key.elems[i] = elems[i].ptr;
    hash = dtHashMix(hash, (uint64_t)(uintptr_t)elems[i].ptr);
  }
  ArrayEntry *hit = dtTableFind(&p->arrays, hash, sameArray, &key);
  if (hit)
    return hit->value;
  key.value = mlirArrayAttrGet(p->ctx, n, elems);
  ArrayEntry *slot = dtTableInsert(&p->arrays, hash);
  if (slot)
    *slot = key;
  return key.value;
}

MlirAttribute dtPropLayoutAttr(Prop *p, const DtensorShardingSpec *s) {
  AttrCache key = {NULL, {0, 0, 0, 0, 0}, s->rank};
  pack(s, &key.spec);
  uint64_t hash = builtKey(&key.spec, s->rank);
  AttrCache *hit = dtTableFind(&p->attrs, hash, sameBuilt, &key);
  if (hit)
    return (MlirAttribute){hit->attr};
  MlirAttribute a = dtensorLayoutAttrGet(
      p->ctx, mlirStringRefCreateFromCString(p->meshName), s);
  AttrCache *slot =
      mlirAttributeIsNull(a) ? NULL : dtTableInsert(&p->attrs, hash);
  if (slot) { /* only a cache */
    key.attr = a.ptr;
    *slot = key;
  }
  return a;
}

/* `s` without Partial on the axes `base` is not Partial on: the local
 * Replicate → Partial step (a device keeps the value, the others take the
 * combiner's neutral element) needs no communication. */
void dtPropDropCreatedPartial(const DtensorShardingSpec *base,
                              DtensorShardingSpec *s) {
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    if (base->partial[a] == DTENSOR_REDUCE_NONE)
      s->partial[a] = DTENSOR_REDUCE_NONE;
}

/* The modelled cost of converting a tensor of `in` from `from` to `to`;
 * INFINITY if impossible. */
static bool sameCost(const void *entry, const void *key) {
  const CostEntry *a = entry, *b = key;
  return a->type == b->type && sameCSpec(a->from, b->from) &&
         sameCSpec(a->to, b->to);
}

double dtPropConvertCost(Prop *p, const Info *in,
                         const DtensorShardingSpec *from,
                         const DtensorShardingSpec *to) {
  CostEntry key;
  pack(from, &key.from);
  pack(to, &key.to);
  if (sameCSpec(key.from, key.to))
    return 0.0;
  /* The same conversions recur on every block of a model: each is costed
   * once per type (the cost depends on the shape and element type). */
  key.type = mlirValueGetType(in->value).ptr;
  uint64_t hash =
      hashCSpec(hashCSpec((uint64_t)(uintptr_t)key.type, key.from), key.to);
  const CostEntry *hit = dtTableFind(&p->costs, hash, sameCost, &key);
  if (hit)
    return hit->cost;
  DtensorShardingSpec target = *to;
  dtPropDropCreatedPartial(from, &target);
  key.cost = INFINITY;
  DtensorLayout layout;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  shapeOf(in, shape);
  if (dtensorShardingSpecEqual(from, &target))
    key.cost = 0.0;
  else if (dtensorLayoutInit(p->mesh, from, in->rank, shape, in->elementType,
                             &layout, NULL)) {
    const DtensorPlan *plan =
        dtensorPlannerPlan(p->planner, &layout, &target, NULL);
    if (plan)
      key.cost = plan->forwardUs;
  }
  CostEntry *slot = dtTableInsert(&p->costs, hash);
  if (slot)
    *slot = key;
  return key.cost;
}

static bool sameFit(const void *entry, const void *key) {
  const FitEntry *a = entry, *b = key;
  return a->type == b->type && sameCSpec(a->spec, b->spec);
}

/* Whether `s` is a valid layout of the value of `in` on the mesh (asked
 * for every candidate strategy of every op: cached per type). */
bool dtPropFits(Prop *p, const Info *in, const DtensorShardingSpec *s) {
  FitEntry key;
  key.type = mlirValueGetType(in->value).ptr;
  pack(s, &key.spec);
  uint64_t hash = hashCSpec((uint64_t)(uintptr_t)key.type, key.spec);
  const FitEntry *hit = dtTableFind(&p->fits, hash, sameFit, &key);
  if (hit)
    return hit->fits;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  shapeOf(in, shape);
  key.fits = dtensorShardingSpecCheck(s, p->mesh, in->rank, shape, NULL);
  FitEntry *slot = dtTableInsert(&p->fits, hash);
  if (slot)
    *slot = key;
  return key.fits;
}

static bool sameRuleKey(const void *entry, const void *key) {
  const RuleEntry *e = entry, *k = key;
  return e->keyLength == k->keyLength &&
         !memcmp(e->key, k->key, sizeof(void *) * (size_t)k->keyLength);
}

int dtPropRuleKey(Prop *p, MlirOperation op, const void **key) {
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  intptr_t nOperands = mlirOperationGetNumOperands(op);
  intptr_t nResults = mlirOperationGetNumResults(op);
  bool cacheable =
      name.length > 7 && !memcmp(name.data, "linalg.", 7) &&
      !mlirStringRefEqual(name,
                          mlirStringRefCreateFromCString("linalg.generic")) &&
      !mlirStringRefEqual(name,
                          mlirStringRefCreateFromCString("linalg.reduce")) &&
      /* a map's linearity is read from its body, which no key holds */
      !mlirStringRefEqual(name, mlirStringRefCreateFromCString("linalg.map")) &&
      nOperands + nResults <= 2 * DT_MAX_RULE_VALUES &&
      mlirAttributeIsNull(dtGetAttr(op, DT_ATTR_RULE)) &&
      !dtRuleRegistryLookup(p->registry, name);
  if (!cacheable)
    return -1;
  int n = 0;
  key[n++] = mlirOperationGetName(op).ptr;
  key[n++] = dtGetAttr(op, "indexing_maps").ptr;
  key[n++] = dtGetAttr(op, "dimensions").ptr;
  key[n++] = dtGetAttr(op, "permutation").ptr;
  key[n++] = dtGetAttr(op, "dimension").ptr; /* linalg.softmax */
  for (intptr_t i = 0; i < nOperands; ++i)
    key[n++] = mlirValueGetType(mlirOperationGetOperand(op, i)).ptr;
  for (intptr_t j = 0; j < nResults; ++j)
    key[n++] = mlirValueGetType(mlirOperationGetResult(op, j)).ptr;
  return n;
}

void dtPropRule(Prop *p, MlirOperation op, DtRule *out) {
  const void *key[DT_RULE_KEY_MAX];
  int n = dtPropRuleKey(p, op, key);
  if (n < 0) {
    dtRuleGet(op, p->registry, out);
    return;
  }
  RuleEntry probe;
  probe.keyLength = n;
  memcpy(probe.key, key, sizeof(void *) * (size_t)n);
  uint64_t hash = (uint64_t)n;
  for (int i = 0; i < n; ++i)
    hash = dtHashMix(hash, (uint64_t)(uintptr_t)key[i]);
  RuleEntry *hit = dtTableFind(&p->rules, hash, sameRuleKey, &probe);
  if (hit) {
    *out = hit->rule;
    return;
  }
  dtRuleGet(op, p->registry, out);
  RuleEntry *slot = dtTableInsert(&p->rules, hash);
  if (slot) {
    slot->keyLength = n;
    memcpy(slot->key, key, sizeof(void *) * (size_t)n);
    slot->rule = *out;
  }
}
