/* dtensor-propagate: gives every tensor value of a function a layout and
 * every op a strategy, from a few annotations.
 *
 * Values: a function argument with `dtensor.layout` and the result of a
 * `dtensor.annotate` are fixed (never changed). Uses state demands: an
 * annotate's operand wants the annotation's layout (with its priority), a
 * return operand wants the function result's layout (priority 0). Ops are
 * decided in program order: an op's candidate strategies (factor shardings,
 * see Rules.h) are seeded by each operand's layout and each result's demand
 * and merged with the others; the cheapest by the planner's cost model wins
 * (the cost of converting every known operand to what the strategy needs,
 * plus every result to its demand). An operand nobody has decided yet (an
 * unannotated argument, tensor.empty, a constant, a fill of one) takes the
 * layout its first user needs, deciding its producer backwards. What is
 * still undecided at the end is replicated.
 *
 * The result, read by dtensor-partition (docs/propagation.md):
 *  - `dtensor.layout` on every op with tensor results (one layout, or an
 *    array with `unit` for non-tensor results) and on every argument and
 *    result of the function;
 *  - `dtensor.operand_layouts` on every op with tensor operands: the layout
 *    each tensor operand must have (`unit` for the others);
 *  - `dtensor.loop_axes` on linalg ops: the mesh axes of each loop. */
#include "PassDef.h"
#include "Rules.h"
#include "Table.h"
#include "Util.h"

#include "Support/Support.h"
#include "dtensor-c/Dialect.h"
#include "dtensor-c/Planner.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Func.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORIGIN_SIZE 200

/* A spec packed into 12 bytes (a module has one value per tensor): one byte
 * per mesh axis (0 free, 1 Partial, 2 + 8 dim + position), and the reduce
 * kind of each Partial axis in 4 bits. Interleaved specs are not
 * propagated (readLayout rejects them), so nothing is lost. */
typedef struct CSpec {
  uint64_t code;
  uint32_t partial;
} CSpec;

/* Where a layout came from, for explanations and messages: `text`, then
 * " at <location>" when `at` is set (formatted only when shown: every
 * annotation has one, few are shown). `text` is in the arena or a string
 * constant. */
typedef struct Origin {
  const char *text;
  MlirLocation at;
} Origin;

static Origin originOf(const char *text) {
  Origin o = {text, {NULL}};
  return o;
}

typedef struct Info {
  MlirValue value;
  bool isTensor;
  int rank; /* the shape is read from the value's type when needed */
  DtensorElementType elementType;
  bool known, fixed;
  CSpec spec;
  bool hasDemand;
  CSpec demand;
  int64_t demandPriority;
  MlirLocation demandLoc;
  Origin origin;
} Info;

/* dtensorShardingSpecInitReplicated for the hot paths: only what a spec of
 * `rank` dims is read for (every reader stops at the rank). */
static void initSpec(int rank, DtensorShardingSpec *s) {
  s->rank = rank;
  memset(s->numAxes, 0, sizeof(int) * (size_t)rank);
  memset(s->interleave, 0, sizeof(int64_t) * (size_t)rank);
  memset(s->partial, 0, sizeof(s->partial));
}

static void pack(const DtensorShardingSpec *s, CSpec *c) {
  c->code = 0;
  c->partial = 0;
  for (int d = 0; d < s->rank; ++d)
    for (int i = 0; i < s->numAxes[d]; ++i)
      c->code |= (uint64_t)(2 + 8 * d + i) << (8 * s->axes[d][i]);
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    if (s->partial[a] != DTENSOR_REDUCE_NONE) {
      c->code |= (uint64_t)1 << (8 * a);
      c->partial |= (uint32_t)s->partial[a] << (4 * a);
    }
}

static void unpack(const CSpec *c, int rank, DtensorShardingSpec *s) {
  initSpec(rank, s);
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a) {
    int b = (int)((c->code >> (8 * a)) & 0xff);
    s->partial[a] = (DtensorReduceKind)((c->partial >> (4 * a)) & 0xf);
    if (b < 2)
      continue;
    int d = (b - 2) / 8, i = (b - 2) % 8;
    s->axes[d][i] = a;
    if (i + 1 > s->numAxes[d])
      s->numAxes[d] = i + 1;
  }
}

static void shapeOf(const Info *in, int64_t *out) {
  MlirType t = mlirValueGetType(in->value);
  for (int d = 0; d < in->rank; ++d)
    out[d] = mlirShapedTypeGetDimSize(t, d);
}

static DtensorShardingSpec specOf(const Info *in) {
  DtensorShardingSpec s;
  unpack(&in->spec, in->rank, &s);
  return s;
}

static DtensorShardingSpec demandOf(const Info *in) {
  DtensorShardingSpec s;
  unpack(&in->demand, in->rank, &s);
  return s;
}

static void setSpec(Info *in, const DtensorShardingSpec *s) {
  pack(s, &in->spec);
}

static void setDemand(Info *in, const DtensorShardingSpec *s) {
  pack(s, &in->demand);
}

/* The functions of the module: which are propagated, which are in progress
 * (a call to one of those is a recursive call). */
typedef struct Funcs {
  MlirSymbolTable symbols;
  void **done;
  int numDone, capDone;
  void **active;
  int numActive;
} Funcs;

/* What propagation needs of a value's type, looked up once per type (types
 * are uniqued and a program has few). */
typedef struct TypeFacts {
  const void *type;
  bool isTensor;
  int rank;
  DtensorElementType elementType;
} TypeFacts;

#define TYPE_FACTS 64

/* A modelled conversion cost: from one packed spec to another, for values
 * of one type. */
typedef struct CostEntry {
  const void *type;
  CSpec from, to;
  double cost;
} CostEntry;

/* Whether a packed spec fits values of a type. */
typedef struct FitEntry {
  const void *type;
  CSpec spec;
  bool fits;
} FitEntry;

typedef struct Prop {
  MlirContext ctx;
  TypeFacts typeFacts[TYPE_FACTS]; /* direct-mapped by type pointer */
  Funcs *funcs;
  MlirOperation func;
  MlirOperation meshOp;
  char meshName[256];
  DtensorMesh *mesh;
  DtensorPlanner *planner;
  Info *infos;
  int numInfos, capInfos;
  DtTable values;  /* ValueSlot: a value's index in infos */
  DtTable decided; /* ops decided so far (a pointer set) */
  bool strict, why;
  bool failed;
  int depth; /* ops being decided, one inside the other's regions */
  /* After registration the table must not grow: decisions hold pointers
   * into it. */
  bool frozen;
  const DtensorRuleRegistry *registry;
  DtDecisions *decisions; /* NULL: decisions become attributes */
  /* Strings that outlive a decision (origins). */
  char **arena;
  int numArena, capArena;
  /* Layout attributes read (attribute, type) -> spec, and built
   * spec -> attribute: both are uniqued, so each is worked out once. */
  DtTable attrs;  /* AttrCache */
  DtTable arrays; /* ArrayEntry */
  DtTable rules;  /* RuleEntry */
  DtTable costs;  /* CostEntry */
  DtTable fits;   /* FitEntry */
} Prop;

/* Rules of named linalg ops without a body of their own, which depend only
 * on the op's name, its operand and result types and its indexing_maps,
 * dimensions and permutation attributes (all uniqued): a model repeats the
 * same few, whose maps are costly to rebuild. (linalg.reduce's rule also
 * depends on its body's combiner, linalg.generic's on everything.) */
typedef struct RuleEntry {
  const void *key[2 * DT_MAX_RULE_VALUES + 4];
  int keyLength;
  DtRule rule;
} RuleEntry;

/* Arrays of attributes built before (the same few combinations recur on
 * every block of a model), keyed on their elements. */
typedef struct ArrayEntry {
  int count;
  const void *elems[DT_MAX_RULE_VALUES];
  MlirAttribute value;
} ArrayEntry;

typedef struct AttrCache {
  const void *attr, *type; /* read: both set; built: type = NULL */
  CSpec spec;
  int rank;
} AttrCache;

/* ---- small helpers ------------------------------------------------------- */

static void setAttr(MlirOperation op, const char *name, MlirAttribute value) {
  mlirOperationSetDiscardableAttributeByName(
      op, mlirStringRefCreateFromCString(name), value);
}

static void appendPiece(MlirStringRef piece, void *userData) {
  DtBuf *b = userData;
  dtBufPrintf(b, "%.*s", (int)piece.length, piece.data);
}

/* A location as file:line:col when it is one, else as MLIR prints it. */
static void locText(MlirLocation loc, char *out, size_t capacity) {
  DtBuf b = dtBufInit(out, capacity);
  if (mlirLocationIsAFileLineColRange(loc)) {
    MlirStringRef f =
        mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
    dtBufPrintf(&b, "%.*s:%d:%d", (int)f.length, f.data,
                mlirLocationFileLineColRangeGetStartLine(loc),
                mlirLocationFileLineColRangeGetStartColumn(loc));
    return;
  }
  mlirLocationPrint(loc, appendPiece, &b);
}

static void originText(Origin o, char *out, size_t capacity) {
  char where[160] = "";
  if (!mlirLocationIsNull(o.at))
    locText(o.at, where, sizeof(where));
  snprintf(out, capacity, "%s%s%s", o.text ? o.text : "",
           where[0] ? " at " : "", where);
}

static void opError(Prop *p, MlirOperation op, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static void opError(Prop *p, MlirOperation op, const char *format, ...) {
  va_list args;
  va_start(args, format);
  dtOpErrorV(op, format, args);
  va_end(args);
  p->failed = true;
}

/* Records a decision of `op` (an attribute, or in dtensor-spmd's table). */
static void decided(Prop *p, MlirOperation op, DtDecided kind,
                    MlirAttribute value) {
  if (!dtDecisionSet(p->decisions, op, kind, value))
    opError(p, op, "out of memory");
}

static void specText(const DtensorShardingSpec *s, char *out, size_t n) {
  dtensorShardingSpecPrint(s, out, n);
}

/* A copy of a formatted string that lives as long as the function's
 * propagation; a string constant when out of memory. */
static const char *keep(Prop *p, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static const char *keep(Prop *p, const char *format, ...) {
  char text[ORIGIN_SIZE];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  if (p->numArena == p->capArena) {
    int cap = p->capArena ? 2 * p->capArena : 64;
    char **arena = realloc(p->arena, sizeof(char *) * (size_t)cap);
    if (!arena)
      return "(out of memory)";
    p->arena = arena;
    p->capArena = cap;
  }
  char *copy = malloc(strlen(text) + 1);
  if (!copy)
    return "(out of memory)";
  strcpy(copy, text);
  p->arena[p->numArena++] = copy;
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

/* An entry of the value table, and of the decided set. */
typedef struct ValueSlot {
  const void *value;
  int index;
} ValueSlot;

static bool sameSlotValue(const void *entry, const void *key) {
  return ((const ValueSlot *)entry)->value == key;
}

static bool sameOp(const void *entry, const void *key) {
  return *(const void *const *)entry == key;
}

/* Whether values of type `t` get layouts: static ranked tensors of a known
 * element type. */
static const TypeFacts *factsOf(Prop *p, MlirType t) {
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
static Info *infoOf(Prop *p, MlirValue v) {
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
  const TypeFacts *f = factsOf(p, mlirValueGetType(v));
  in->isTensor = f->isTensor;
  in->elementType = f->elementType;
  if (in->isTensor) {
    in->rank = f->rank;
    in->origin = originOf("");
  }
  return in;
}

static bool isDecided(const Prop *p, MlirOperation op) {
  return dtTableFind(&p->decided, hashPtr(op.ptr), sameOp, op.ptr) != NULL;
}

static bool markDecided(Prop *p, MlirOperation op) {
  const void **entry = dtTableInsert(&p->decided, hashPtr(op.ptr));
  if (entry)
    *entry = op.ptr;
  return entry != NULL;
}

/* Loop bodies are decided again: their ops leave the set. */
static void unmarkDecided(Prop *p, MlirOperation op) {
  void *entry = dtTableFind(&p->decided, hashPtr(op.ptr), sameOp, op.ptr);
  if (entry)
    dtTableRemove(&p->decided, entry);
}

/* ---- layouts and costs --------------------------------------------------- */

/* Reads a layout attribute for a value of `type`; the mesh must be the
 * function's. */
/* Keys of the attribute cache: a read entry by (attr, type), a built one by
 * (spec, rank) with type NULL. */
static uint64_t readKey(const void *attr, const void *type) {
  return dtHashMix(dtHashMix(1, (uint64_t)(uintptr_t)attr),
                   (uint64_t)(uintptr_t)type);
}

static uint64_t builtKey(const CSpec *c, int rank) {
  return dtHashMix(dtHashMix(dtHashMix(2, c->code), c->partial),
                   (uint64_t)rank);
}

static bool sameRead(const void *entry, const void *key) {
  const AttrCache *e = entry, *k = key;
  return e->type && e->attr == k->attr && e->type == k->type;
}

static bool sameBuilt(const void *entry, const void *key) {
  const AttrCache *e = entry, *k = key;
  return !e->type && e->rank == k->rank && e->spec.code == k->spec.code &&
         e->spec.partial == k->spec.partial;
}

static void addAttr(Prop *p, const AttrCache *entry, uint64_t hash) {
  AttrCache *slot = dtTableInsert(&p->attrs, hash);
  if (slot) /* only a cache */
    *slot = *entry;
}

static bool readLayoutUncached(Prop *p, MlirOperation at, MlirAttribute attr,
                               MlirType type, const char *what,
                               DtensorShardingSpec *out);

static bool readLayout(Prop *p, MlirOperation at, MlirAttribute attr,
                       MlirType type, const char *what,
                       DtensorShardingSpec *out) {
  AttrCache key = {attr.ptr, type.ptr, {0, 0}, 0};
  uint64_t hash = readKey(attr.ptr, type.ptr);
  AttrCache *hit = dtTableFind(&p->attrs, hash, sameRead, &key);
  if (hit) {
    unpack(&hit->spec, hit->rank, out);
    return true;
  }
  if (!readLayoutUncached(p, at, attr, type, what, out))
    return false;
  AttrCache e = {attr.ptr, type.ptr, {0, 0}, out->rank};
  pack(out, &e.spec);
  addAttr(p, &e, hash);
  return true;
}

static bool readLayoutUncached(Prop *p, MlirOperation at, MlirAttribute attr,
                               MlirType type, const char *what,
                               DtensorShardingSpec *out) {
  DtensorLayoutAttrParts parts;
  if (!dtensorLayoutAttrGetParts(attr, &parts)) {
    opError(p, at, "%s must be a #dtensor.layout", what);
    return false;
  }
  if (strcmp(parts.mesh, p->meshName) != 0) {
    opError(p, at,
            "%s is on mesh '@%s' but this function is propagated on "
            "'@%s'; a function uses one mesh",
            what, parts.mesh, p->meshName);
    return false;
  }
  DtensorMesh *mesh = NULL;
  DtensorLayout layout;
  DtensorDiag diag;
  if (!dtensorLayoutFromAttr(at, attr, type, &mesh, &layout, &diag)) {
    opError(p, at, "%s: %s", what, diag.message);
    return false;
  }
  *out = layout.spec;
  dtensorMeshDestroy(mesh);
  for (int d = 0; d < out->rank; ++d)
    if (out->numAxes[d] > 0 && out->interleave[d] > 1) {
      opError(p, at,
              "%s is interleaved (S0i%lld); dtensor-propagate does not "
              "propagate interleaved shards yet",
              what, (long long)out->interleave[d]);
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
static MlirAttribute arrayOf(Prop *p, int n, const MlirAttribute *elems) {
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

static MlirAttribute layoutAttr(Prop *p, const DtensorShardingSpec *s) {
  AttrCache key = {NULL, NULL, {0, 0}, s->rank};
  pack(s, &key.spec);
  uint64_t hash = builtKey(&key.spec, s->rank);
  AttrCache *hit = dtTableFind(&p->attrs, hash, sameBuilt, &key);
  if (hit)
    return (MlirAttribute){hit->attr};
  MlirAttribute a = dtensorLayoutAttrGet(
      p->ctx, mlirStringRefCreateFromCString(p->meshName), s);
  if (!mlirAttributeIsNull(a)) {
    key.attr = a.ptr;
    addAttr(p, &key, hash);
  }
  return a;
}

/* `s` without Partial on the axes `base` is not Partial on: the local
 * Replicate → Partial step (a device keeps the value, the others take the
 * combiner's neutral element) needs no communication. */
static void dropCreatedPartial(const DtensorShardingSpec *base,
                               DtensorShardingSpec *s) {
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    if (base->partial[a] == DTENSOR_REDUCE_NONE)
      s->partial[a] = DTENSOR_REDUCE_NONE;
}

/* The modelled cost of converting a tensor of `in` from `from` to `to`;
 * INFINITY if impossible. */
static bool sameCost(const void *entry, const void *key) {
  const CostEntry *a = entry, *b = key;
  return a->type == b->type && a->from.code == b->from.code &&
         a->from.partial == b->from.partial && a->to.code == b->to.code &&
         a->to.partial == b->to.partial;
}

static double convertCost(Prop *p, const Info *in,
                          const DtensorShardingSpec *from,
                          const DtensorShardingSpec *to) {
  CostEntry key;
  pack(from, &key.from);
  pack(to, &key.to);
  if (key.from.code == key.to.code && key.from.partial == key.to.partial)
    return 0.0;
  /* The same conversions recur on every block of a model: each is costed
   * once per type (the cost depends on the shape and element type). */
  key.type = mlirValueGetType(in->value).ptr;
  uint64_t hash =
      dtHashMix(dtHashMix(dtHashMix(dtHashMix((uint64_t)(uintptr_t)key.type,
                                              key.from.code),
                                    key.from.partial),
                          key.to.code),
                key.to.partial);
  const CostEntry *hit = dtTableFind(&p->costs, hash, sameCost, &key);
  if (hit)
    return hit->cost;
  DtensorShardingSpec target = *to;
  dropCreatedPartial(from, &target);
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

/* ---- strategies ---------------------------------------------------------- */

typedef struct Strategy {
  int numAxes[DT_MAX_FACTORS];
  int axes[DT_MAX_FACTORS][DTENSOR_MAX_MESH_RANK];
  unsigned used; /* mesh axes taken by factors */
  int seed;      /* which known value it started from (-1: none) */
} Strategy;

/* Splits the axes of a compound dim over its factors, major first: a factor
 * takes axes while their product divides its size, and the next factor
 * starts only once the previous one is fully split. Stops where the axes
 * do not fit (those are then not part of the strategy). */
static void strategyFromCompound(const DtRule *r, const DtCompound *c,
                                 const DtensorMesh *mesh,
                                 const DtensorShardingSpec *s, int d,
                                 Strategy *out) {
  for (int k = 0; k < c->count; ++k)
    if (out->numAxes[c->factor[k]] > 0 || !r->shardable[c->factor[k]])
      return;
  int k = 0;
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
    return true;
  }
  if (f == -1)
    return true;
  const DtCompound *c = &r->compound[-2 - f];
  bool open = false; /* a factor before is not fully split */
  for (int k = 0; k < c->count; ++k) {
    int g = c->factor[k];
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

typedef struct Known {
  bool isResult;
  int index;
  DtensorShardingSpec spec;
  const Info *info;
  Origin origin; /* text NULL for a demand: formatted if it wins */
} Known;

typedef struct Choice {
  Strategy strategy;
  DtensorShardingSpec operands[DT_MAX_RULE_VALUES];
  DtensorShardingSpec results[DT_MAX_RULE_VALUES];
  double cost;
} Choice;

static bool sameFit(const void *entry, const void *key) {
  const FitEntry *a = entry, *b = key;
  return a->type == b->type && a->spec.code == b->spec.code &&
         a->spec.partial == b->spec.partial;
}

/* Whether `s` is a valid layout of the value of `in` on the mesh (asked
 * for every candidate strategy of every op: cached per type). */
static bool fits(Prop *p, const Info *in, const DtensorShardingSpec *s) {
  FitEntry key;
  key.type = mlirValueGetType(in->value).ptr;
  pack(s, &key.spec);
  uint64_t hash =
      dtHashMix(dtHashMix((uint64_t)(uintptr_t)key.type, key.spec.code),
                key.spec.partial);
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

/* The operand and result specs of `st` on the op; false if the strategy
 * does not give valid layouts. */
static bool specsOf(Prop *p, const DtRule *r, Info **operands, Info **results,
                    const Known *known, int numKnown, const Strategy *st,
                    Choice *c) {
  DtensorReduceKind partial[DTENSOR_MAX_MESH_RANK] = {DTENSOR_REDUCE_NONE};
  for (int f = 0; f < r->numFactors; ++f)
    for (int i = 0; i < st->numAxes[f]; ++i)
      if (r->reduce[f] != DTENSOR_REDUCE_NONE)
        partial[st->axes[f][i]] = r->reduce[f];
  /* Partial operands that flow through unresolved. */
  unsigned pass = 0;
  int passOperand = -1;
  if (r->flow != DT_FLOW_NONE) {
    bool allAlike = true;
    unsigned first = 0;
    int count = 0;
    for (int k = 0; k < numKnown; ++k) {
      if (known[k].isResult)
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
          r->linear[known[k].index] && passOperand < 0) {
        passOperand = known[k].index;
        pass = m;
      }
      if (count++ == 0)
        first = m;
      allAlike &= m == first && sums;
    }
    if (r->flow == DT_FLOW_ALL_SUM && allAlike && first &&
        !(first & st->used) && count == r->numOperands)
      pass = first;
    else if (r->flow == DT_FLOW_ALL_SUM)
      pass = 0;
  }
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
    initSpec(operands[i]->rank, s);
    for (int d = 0; d < operands[i]->rank; ++d)
      if (!dimAxes(p, r, st, r->operandFactor[i][d], s, d))
        return false;
    bool passes = r->flow == DT_FLOW_ALL_SUM ? pass != 0 : i == passOperand;
    for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a) {
      if (passes && (pass & (1u << a)))
        s->partial[a] = DTENSOR_REDUCE_SUM;
      if (r->isInit[i])
        s->partial[a] = partial[a];
    }
    if (!fits(p, operands[i], s))
      return false;
  }
  for (int j = 0; j < r->numResults; ++j) {
    if (!r->resultIsTensor[j] || !results[j])
      continue;
    DtensorShardingSpec *s = &c->results[j];
    initSpec(results[j]->rank, s);
    for (int d = 0; d < results[j]->rank; ++d)
      if (!dimAxes(p, r, st, r->resultFactor[j][d], s, d))
        return false;
    for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
      s->partial[a] = partial[a];
    if (!fits(p, results[j], s))
      return false;
  }
  c->strategy = *st;
  return true;
}

static double choiceCost(Prop *p, const DtRule *r, Info **operands,
                         Info **results, const Choice *c) {
  double cost = 0.0;
  for (int i = 0; i < r->numOperands; ++i)
    if (r->operandIsTensor[i] && operands[i] && operands[i]->known) {
      DtensorShardingSpec cur = specOf(operands[i]);
      cost += convertCost(p, operands[i], &cur, &c->operands[i]);
    }
  for (int j = 0; j < r->numResults; ++j)
    if (r->resultIsTensor[j] && results[j] && results[j]->hasDemand) {
      DtensorShardingSpec want = demandOf(results[j]);
      cost += convertCost(p, results[j], &c->results[j], &want);
    }
  return cost;
}

/* ---- deciding ops -------------------------------------------------------- */

static void decide(Prop *p, MlirOperation op);
static void ruleOf(Prop *p, MlirOperation op, DtRule *out);
static bool propagateOne(const Prop *base, MlirOperation func);
static bool funcListed(void *const *list, int count, MlirOperation f);
static bool hasBody(MlirOperation func);

/* A value nobody has decided takes the layout `want` its user needs; its
 * producer is decided with that as the demand on it. */
static void adopt(Prop *p, Info *in, const DtensorShardingSpec *want,
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
    if (!isDecided(p, producer))
      decide(p, producer);
    return;
  }
  /* An argument without a layout. */
  in->known = true;
  DtensorShardingSpec noPartial = demandOf(in);
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    noPartial.partial[a] = DTENSOR_REDUCE_NONE;
  setSpec(in, &noPartial); /* arguments arrive resolved */
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(user));
  char where[160];
  locText(mlirOperationGetLocation(user), where, sizeof(where));
  in->origin =
      originOf(p->why || p->strict ? keep(p, "what '%.*s' at %s needs",
                                          (int)name.length, name.data, where)
                                   : "what its user needs");
}

static void describeRedistribution(Prop *p, MlirOperation op, int i,
                                   const Info *in,
                                   const DtensorShardingSpec *want,
                                   DtBuf *why) {
  /* Naming the value builds an AsmState over the whole function: only do
   * it when the text is wanted. */
  if (!p->strict && !why)
    return;
  char from[256], to[256], value[128] = "";
  DtensorShardingSpec cur = specOf(in);
  specText(&cur, from, sizeof(from));
  specText(want, to, sizeof(to));
  DtBuf vb = dtBufInit(value, sizeof(value));
  MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
  MlirAsmState state = mlirAsmStateCreateForValue(in->value, flags);
  mlirValuePrintAsOperand(in->value, state, appendPiece, &vb);
  mlirAsmStateDestroy(state);
  mlirOpPrintingFlagsDestroy(flags);
  if (p->strict) {
    char origin[ORIGIN_SIZE];
    originText(in->origin, origin, sizeof(origin));
    opError(p, op,
            "operand %d (%s) has layout %s (from %s) but this op needs %s: an "
            "implicit redistribution, which strict mode forbids; annotate the "
            "value or change the layouts",
            i, value, from, origin, to);
  }
  if (why)
    dtBufPrintf(why, "; operand %d (%s): redistribute %s -> %s", i, value, from,
                to);
}

/* Writes the decision of an op and sets its results. Never inlined: its
 * buffers must not sit in the frames of decideIf and decideFor, which
 * recurse once per level of region nesting. */
__attribute__((noinline)) static void record(Prop *p, MlirOperation op,
                                             const DtRule *r, Info **operands,
                                             Info **results, const Choice *c,
                                             Origin origin) {
  char whyText[2048];
  DtBuf why = dtBufInit(whyText, sizeof(whyText));
  bool explain = p->why || r->kind == DT_RULE_REPLICATE;
  if (explain) {
    char text[ORIGIN_SIZE];
    originText(origin, text, sizeof(text));
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
    opAttrs[i] = layoutAttr(p, &c->operands[i]);
    Info *in = operands[i];
    if (!in->known)
      adopt(p, in, &c->operands[i], op);
    DtensorShardingSpec need = c->operands[i], cur = specOf(in);
    dropCreatedPartial(&cur, &need);
    if (in->known && !dtensorShardingSpecEqual(&cur, &need))
      describeRedistribution(p, op, i, in, &c->operands[i],
                             explain ? &why : NULL);
  }
  if (anyTensorOperand)
    decided(p, op, DT_DECIDED_OPERANDS, arrayOf(p, r->numOperands, opAttrs));
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
    resAttrs[j] = layoutAttr(p, &cur);
  }
  if (numTensorResults == 1 && r->numResults == 1)
    decided(p, op, DT_DECIDED_LAYOUT, resAttrs[0]);
  else if (numTensorResults > 0)
    decided(p, op, DT_DECIDED_LAYOUT, arrayOf(p, r->numResults, resAttrs));
  if (r->kind == DT_RULE_FACTORS && !strcmp(r->family, "linalg")) {
    MlirAttribute loops[DT_MAX_FACTORS];
    for (int f = 0; f < r->numFactors; ++f) {
      int64_t axes[DTENSOR_MAX_MESH_RANK];
      for (int i = 0; i < c->strategy.numAxes[f]; ++i)
        axes[i] = c->strategy.axes[f][i];
      loops[f] = mlirDenseI64ArrayGet(p->ctx, c->strategy.numAxes[f], axes);
    }
    decided(p, op, DT_DECIDED_LOOPS, arrayOf(p, r->numFactors, loops));
  }
  /* An op without a rule always says so: it is replicated, which may cost
   * communication the user did not expect. */
  if (explain)
    setAttr(op, "dtensor.why",
            mlirStringAttrGet(p->ctx, mlirStringRefCreateFromCString(whyText)));
}

__attribute__((noinline)) static void decideFactors(Prop *p, MlirOperation op,
                                                    const DtRule *r,
                                                    Info **operands,
                                                    Info **results) {
  Known *known = malloc(sizeof(Known) * 2 * DT_MAX_RULE_VALUES);
  Choice *choices = malloc(sizeof(Choice) * 2);
  if (!known || !choices) {
    free(known);
    free(choices);
    opError(p, op, "out of memory");
    return;
  }
  Choice *bestp = &choices[0], *trialp = &choices[1];
#define best (*bestp)
#define trial (*trialp)
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
      }
  bool have = false;
  Origin bestOrigin = originOf("no layout (replicated)");
  int bestSeed = -1;
  /* Every seed, then no seed at all (all replicated): the first of equally
   * cheap candidates wins. */
  for (int k = 0; k <= numKnown; ++k) {
    int seed = k < numKnown ? k : -1;
    Strategy st;
    memset(&st, 0, sizeof(st));
    st.seed = seed;
    int order[2 * DT_MAX_RULE_VALUES], n = 0;
    if (seed >= 0)
      order[n++] = seed;
    for (int k = 0; k < numKnown && seed >= 0; ++k)
      if (k != seed)
        order[n++] = k;
    for (int k = 0; k < n; ++k) {
      const Known *kv = &known[order[k]];
      const int *map = kv->isResult ? r->resultFactor[kv->index]
                                    : r->operandFactor[kv->index];
      strategyFrom(r, p->mesh, map, kv->info->rank, &kv->spec, &st);
    }
    if (!specsOf(p, r, operands, results, known, numKnown, &st, &trial))
      continue;
    trial.cost = choiceCost(p, r, operands, results, &trial);
    if (!have || trial.cost < best.cost) {
      Choice *swap = bestp; /* keep the better one without copying it */
      bestp = trialp;
      trialp = swap;
      have = true;
      bestSeed = seed;
    }
  }
  if (!have) {
    Strategy none;
    memset(&none, 0, sizeof(none));
    if (!specsOf(p, r, operands, results, NULL, 0, &none, &best)) {
      opError(p, op, "no strategy gives valid layouts for this op");
      free(known);
      free(choices);
      return;
    }
  }
  if (bestSeed >= 0 && known[bestSeed].origin.text)
    bestOrigin = known[bestSeed].origin;
  else if (bestSeed >= 0 && (p->why || p->strict)) {
    char where[160];
    locText(known[bestSeed].info->demandLoc, where, sizeof(where));
    bestOrigin = originOf(keep(p, "the layout wanted at %s", where));
  } else if (bestSeed >= 0)
    bestOrigin = originOf("the layout its users want");
  record(p, op, r, operands, results, &best, bestOrigin);
#undef best
#undef trial
  free(known);
  free(choices);
}

static Choice *newChoice(Prop *p, MlirOperation op) {
  Choice *c = malloc(sizeof(Choice));
  if (!c)
    opError(p, op, "out of memory");
  return c;
}

__attribute__((noinline)) static void
decideReplicated(Prop *p, MlirOperation op, const DtRule *r, Info **operands,
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
  record(p, op, r, operands, results, c,
         originOf(keep(p, "%s, so replicated", r->family)));
  free(c);
}

/* A free op (tensor.empty, constants) takes its demand, or replicated. */
__attribute__((noinline)) static void decideFree(Prop *p, MlirOperation op,
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
      for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
        c->results[j].partial[a] = DTENSOR_REDUCE_NONE;
      origin = originOf("what its user needs");
    }
  }
  record(p, op, r, operands, results, c, origin);
  free(c);
}

/* dtensor.annotate (the operand must have the annotation's layout, the
 * result has it) and a global-program dtensor.redistribute (src, dst). */
__attribute__((noinline)) static void decideExplicit(Prop *p, MlirOperation op,
                                                     const DtRule *r,
                                                     Info **operands,
                                                     Info **results) {
  Choice *c = malloc(sizeof(Choice));
  if (!c) {
    opError(p, op, "out of memory");
    return;
  }
  bool annotate = dtIsOp(op, "dtensor.annotate");
  MlirType type = mlirValueGetType(mlirOperationGetResult(op, 0));
  bool ok =
      readLayout(p, op, dtGetAttr(op, annotate ? "layout" : "src"), type,
                 annotate ? "the annotation" : "'src'", &c->operands[0]) &&
      readLayout(p, op, dtGetAttr(op, annotate ? "layout" : "dst"), type,
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
    record(p, op, &explicitRule, operands, results, c,
           annotate ? results[0]->origin
                    : originOf("an explicit redistribute"));
  }
  free(c);
}

/* The `dtensor.layout` of argument or result `i` of `func`, if it has one. */
static bool funcLayout(Prop *p, MlirOperation func, bool result, intptr_t i,
                       DtensorShardingSpec *out) {
  MlirAttribute list = dtGetAttr(func, result ? "res_attrs" : "arg_attrs");
  if (mlirAttributeIsNull(list) || i >= mlirArrayAttrGetNumElements(list))
    return false;
  MlirAttribute l = mlirDictionaryAttrGetElementByName(
      mlirArrayAttrGetElement(list, i),
      mlirStringRefCreateFromCString(DT_ATTR_LAYOUT));
  if (mlirAttributeIsNull(l))
    return false;
  MlirType fnType = mlirTypeAttrGetValue(dtGetAttr(func, "function_type"));
  MlirType t = result ? mlirFunctionTypeGetResult(fnType, i)
                      : mlirFunctionTypeGetInput(fnType, i);
  char what[96];
  snprintf(what, sizeof(what), "the layout of %s %ld of the callee",
           result ? "result" : "argument", (long)i);
  return readLayout(p, func, l, t, what, out);
}

/* func.call: the callee is propagated first (its unannotated arguments take
 * the layouts the call's operands have), then the call needs the callee's
 * argument layouts and its results have the callee's result layouts. A
 * recursive call, or a callee without a body, uses the layouts its
 * signature declares and replicates the rest. */
__attribute__((noinline)) static void decideCall(Prop *p, MlirOperation op,
                                                 const DtRule *r,
                                                 Info **operands,
                                                 Info **results) {
  MlirAttribute ref = dtGetAttr(op, "callee");
  MlirOperation callee = {NULL};
  if (!mlirAttributeIsNull(ref) && mlirAttributeIsAFlatSymbolRef(ref))
    callee = mlirSymbolTableLookup(p->funcs->symbols,
                                   mlirFlatSymbolRefAttrGetValue(ref));
  if (mlirOperationIsNull(callee) || !dtIsOp(callee, "func.func")) {
    opError(p, op, "calls a function that is not a func.func of this module");
    return;
  }
  bool recursive = funcListed(p->funcs->active, p->funcs->numActive, callee);
  if (hasBody(callee) && !recursive &&
      !funcListed(p->funcs->done, p->funcs->numDone, callee)) {
    for (int i = 0; i < r->numOperands; ++i) {
      DtensorShardingSpec declared;
      if (!operands[i] || !operands[i]->known ||
          funcLayout(p, callee, false, i, &declared))
        continue;
      DtensorShardingSpec s = specOf(operands[i]);
      for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
        s.partial[a] = DTENSOR_REDUCE_NONE; /* arguments arrive resolved */
      mlirFuncSetArgAttr(callee, i,
                         mlirStringRefCreateFromCString(DT_ATTR_LAYOUT),
                         layoutAttr(p, &s));
    }
    if (!propagateOne(p, callee)) {
      p->failed = true;
      return;
    }
  }
  Choice *c = malloc(sizeof(Choice));
  if (!c) {
    opError(p, op, "out of memory");
    return;
  }
  for (int i = 0; i < r->numOperands; ++i)
    if (operands[i] && !funcLayout(p, callee, false, i, &c->operands[i]))
      initSpec(operands[i]->rank, &c->operands[i]);
  for (int j = 0; j < r->numResults; ++j)
    if (results[j] && !funcLayout(p, callee, true, j, &c->results[j]))
      initSpec(results[j]->rank, &c->results[j]);
  if (!p->failed) {
    DtRule callRule = *r;
    callRule.kind = DT_RULE_FACTORS;
    callRule.family = "call";
    MlirStringRef name = mlirFlatSymbolRefAttrGetValue(ref);
    record(p, op, &callRule, operands, results, c,
           originOf(
               keep(p, "the signature of @%.*s", (int)name.length, name.data)));
  }
  free(c);
}

static bool sameRuleKey(const void *entry, const void *key) {
  const RuleEntry *e = entry, *k = key;
  return e->keyLength == k->keyLength &&
         !memcmp(e->key, k->key, sizeof(void *) * (size_t)k->keyLength);
}

static void ruleOf(Prop *p, MlirOperation op, DtRule *out) {
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  intptr_t nOperands = mlirOperationGetNumOperands(op);
  intptr_t nResults = mlirOperationGetNumResults(op);
  bool cacheable =
      name.length > 7 && !memcmp(name.data, "linalg.", 7) &&
      !mlirStringRefEqual(name,
                          mlirStringRefCreateFromCString("linalg.generic")) &&
      !mlirStringRefEqual(name,
                          mlirStringRefCreateFromCString("linalg.reduce")) &&
      nOperands + nResults <= 2 * DT_MAX_RULE_VALUES &&
      mlirAttributeIsNull(dtGetAttr(op, "dtensor.rule")) &&
      !dtRuleRegistryLookup(p->registry, name);
  if (!cacheable) {
    dtRuleGet(op, p->registry, out);
    return;
  }
  const void *key[2 * DT_MAX_RULE_VALUES + 4];
  int n = 0;
  key[n++] = mlirOperationGetName(op).ptr;
  key[n++] = dtGetAttr(op, "indexing_maps").ptr;
  key[n++] = dtGetAttr(op, "dimensions").ptr;
  key[n++] = dtGetAttr(op, "permutation").ptr;
  for (intptr_t i = 0; i < nOperands; ++i)
    key[n++] = mlirValueGetType(mlirOperationGetOperand(op, i)).ptr;
  for (intptr_t j = 0; j < nResults; ++j)
    key[n++] = mlirValueGetType(mlirOperationGetResult(op, j)).ptr;
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

/* ---- structured control flow --------------------------------------------- */

static void propagateBlock(Prop *p, MlirBlock block);

/* Forgets what a loop body decided, so it can be decided again with other
 * iteration-argument layouts: user annotations stay. */
static MlirWalkResult forget(MlirOperation op, void *userData) {
  Prop *p = userData;
  unmarkDecided(p, op);
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j) {
    Info *in = infoOf(p, mlirOperationGetResult(op, j));
    if (!in || !in->isTensor || in->fixed)
      continue;
    in->known = false;
    if (in->demandPriority == INT64_MAX)
      in->hasDemand = false;
  }
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r)
    for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
         !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
      for (intptr_t i = 0; i < mlirBlockGetNumArguments(b); ++i) {
        Info *in = infoOf(p, mlirBlockGetArgument(b, i));
        if (in && in->isTensor && !in->fixed)
          in->known = false;
      }
  return MlirWalkResultAdvance;
}

static void resolved(DtensorShardingSpec *s) {
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    s->partial[a] = DTENSOR_REDUCE_NONE;
}

/* A region's yield: operand k must have `want[k]`. Never inlined (into
 * decideIf and decideFor, which recurse per nesting level). */
__attribute__((noinline)) static void
decideYield(Prop *p, MlirOperation yield, const DtensorShardingSpec *want,
            int count) {
  markDecided(p, yield);
  MlirAttribute attrs[DT_MAX_RULE_VALUES];
  MlirAttribute unit = mlirUnitAttrGet(p->ctx);
  bool any = false;
  for (int k = 0; k < count; ++k) {
    Info *in = infoOf(p, mlirOperationGetOperand(yield, k));
    attrs[k] = unit;
    if (!in || !in->isTensor)
      continue;
    any = true;
    if (!in->known)
      adopt(p, in, &want[k], yield);
    attrs[k] = layoutAttr(p, &want[k]);
    DtensorShardingSpec cur = specOf(in);
    if (in->known && !dtensorShardingSpecEqual(&cur, &want[k]))
      describeRedistribution(p, yield, k, in, &want[k], NULL);
  }
  if (any)
    decided(p, yield, DT_DECIDED_OPERANDS, arrayOf(p, count, attrs));
}

/* scf.for: the iteration arguments start with the layouts of the inits
 * (or of what the results are wanted as); the body is propagated; while
 * the yielded layouts differ, they become the iteration arguments' and the
 * body is propagated again (a fixed point, at most 4 rounds); what still
 * differs is redistributed at the yield. */
__attribute__((noinline)) static void decideFor(Prop *p, MlirOperation op,
                                                DtRule *r, Info **operands,
                                                Info **results) {
  int n = r->numResults, first = r->numOperands - n;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (first < 0 || mlirBlockIsNull(body) ||
      mlirBlockGetNumArguments(body) != n + 1) {
    opError(p, op, "has a form dtensor-propagate does not know");
    return;
  }
  Choice *c = malloc(sizeof(Choice));
  if (!c) {
    opError(p, op, "out of memory");
    return;
  }
  for (int k = 0; k < n; ++k) {
    Info *init = operands[first + k], *res = results[k];
    if (!res)
      continue;
    if (init && init->known)
      c->results[k] = specOf(init);
    else if (res->hasDemand)
      c->results[k] = demandOf(res);
    else
      initSpec(res->rank, &c->results[k]);
    resolved(&c->results[k]);
  }
  MlirOperation yield = mlirBlockGetTerminator(body);
  for (int round = 0; round < 4 && !p->failed; ++round) {
    if (round > 0)
      for (MlirOperation o = mlirBlockGetFirstOperation(body);
           !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o))
        mlirOperationWalk(o, forget, p, MlirWalkPreOrder);
    for (int k = 0; k < n; ++k) {
      Info *arg = infoOf(p, mlirBlockGetArgument(body, k + 1));
      if (!arg || !arg->isTensor)
        continue;
      arg->known = true;
      setSpec(arg, &c->results[k]);
      arg->origin = originOf("an iteration argument");
    }
    propagateBlock(p, body);
    bool stable = true;
    for (int k = 0; k < n; ++k) {
      Info *y = infoOf(p, mlirOperationGetOperand(yield, k));
      if (!results[k] || !y || !y->known)
        continue;
      DtensorShardingSpec next = specOf(y);
      resolved(&next);
      if (!dtensorShardingSpecEqual(&next, &c->results[k])) {
        stable = false;
        if (round < 3)
          c->results[k] = next;
      }
    }
    if (stable)
      break;
  }
  decideYield(p, yield, c->results, n);
  for (int k = 0; k < n; ++k)
    if (operands[first + k])
      c->operands[first + k] = c->results[k];
  r->kind = DT_RULE_FACTORS; /* as in decideIf */
  r->family = "scf.for";
  if (!p->failed)
    record(p, op, r, operands, results, c,
           originOf("the loop's iteration arguments"));
  free(c);
}

/* scf.if: both branches are propagated; each result has the layout the
 * then-branch yields (or the else-branch's, or its demand), and both yields
 * must give it. */
__attribute__((noinline)) static void decideIf(Prop *p, MlirOperation op,
                                               DtRule *r, Info **operands,
                                               Info **results) {
  MlirBlock branch[2] = {{NULL}, {NULL}};
  for (int b = 0; b < 2 && b < mlirOperationGetNumRegions(op); ++b) {
    branch[b] = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, b));
    if (!mlirBlockIsNull(branch[b]))
      propagateBlock(p, branch[b]);
  }
  Choice *c = malloc(sizeof(Choice));
  if (!c) {
    opError(p, op, "out of memory");
    return;
  }
  int n = r->numResults;
  for (int k = 0; k < n; ++k) {
    if (!results[k])
      continue;
    bool set = false;
    if (results[k]->hasDemand) {
      c->results[k] = demandOf(results[k]);
      set = true;
    }
    for (int b = 0; b < 2 && !set; ++b) {
      if (mlirBlockIsNull(branch[b]))
        continue;
      Info *y = infoOf(
          p, mlirOperationGetOperand(mlirBlockGetTerminator(branch[b]), k));
      if (y && y->known) {
        c->results[k] = specOf(y);
        set = true;
      }
    }
    if (!set)
      initSpec(results[k]->rank, &c->results[k]);
    resolved(&c->results[k]);
  }
  for (int b = 0; b < 2; ++b)
    if (!mlirBlockIsNull(branch[b]) && n > 0)
      decideYield(p, mlirBlockGetTerminator(branch[b]), c->results, n);
  /* Recorded as a factor rule of its own family (the rule is decide's, on
   * the heap: a copy here would put it in every level's frame). */
  r->kind = DT_RULE_FACTORS;
  r->family = "scf.if";
  if (!p->failed)
    record(p, op, r, operands, results, c, originOf("the branches' results"));
  free(c);
}

/* Decides `op` under its rule `r` (the body of decide). The deciders it
 * calls are never inlined: decideOp, decideIf or decideFor and
 * propagateBlock are on the stack once per level of region nesting, their
 * buffers (several KB, more under ASan) must not be. */
static void decideOp(Prop *p, MlirOperation op, DtRule *r) {
  if (r->kind == DT_RULE_NONE)
    return;
  if (r->kind == DT_RULE_INVALID) {
    opError(p, op, "%s", r->message);
    return;
  }
  Info *operands[DT_MAX_RULE_VALUES] = {NULL};
  Info *results[DT_MAX_RULE_VALUES] = {NULL};
  for (int i = 0; i < r->numOperands; ++i)
    if (r->operandIsTensor[i]) {
      operands[i] = infoOf(p, mlirOperationGetOperand(op, i));
      if (operands[i] && !operands[i]->isTensor) {
        operands[i] = NULL;
        r->operandIsTensor[i] = false;
      }
    }
  for (int j = 0; j < r->numResults; ++j)
    if (r->resultIsTensor[j]) {
      results[j] = infoOf(p, mlirOperationGetResult(op, j));
      if (results[j] && !results[j]->isTensor) {
        results[j] = NULL;
        r->resultIsTensor[j] = false;
      }
    }
  if ((dtIsOp(op, "dtensor.annotate") || dtIsOp(op, "dtensor.redistribute")) &&
      operands[0] && results[0]) {
    decideExplicit(p, op, r, operands, results);
    return;
  }
  if (dtIsOp(op, "func.call")) {
    decideCall(p, op, r, operands, results);
    return;
  }
  if (dtIsOp(op, "scf.for") && r->numResults <= DT_MAX_RULE_VALUES) {
    decideFor(p, op, r, operands, results);
    return;
  }
  if (dtIsOp(op, "scf.if")) {
    decideIf(p, op, r, operands, results);
    return;
  }
  switch (r->kind) {
  case DT_RULE_FACTORS:
    decideFactors(p, op, r, operands, results);
    break;
  case DT_RULE_FREE:
    decideFree(p, op, r, operands, results);
    break;
  default:
    decideReplicated(p, op, r, operands, results);
    break;
  }
}

/* Decides one op; region ops (scf.for, scf.if) decide their bodies first,
 * so this recurses once per level of region nesting: the rule, several KB,
 * lives on the heap, and nesting deeper than DTENSOR_MAX_NESTING (the
 * parser's limit too) is an error at the op, never a stack overflow. */
static void decide(Prop *p, MlirOperation op) {
  if (isDecided(p, op) || p->failed)
    return;
  if (!markDecided(p, op)) {
    opError(p, op, "out of memory");
    return;
  }
  if (p->depth >= DTENSOR_MAX_NESTING) {
    opError(p, op,
            "is nested in more than %d regions; dtensor-propagate "
            "handles at most that many levels",
            DTENSOR_MAX_NESTING);
    return;
  }
  DtRule *r = malloc(sizeof(DtRule));
  if (!r) {
    opError(p, op, "out of memory");
    return;
  }
  ruleOf(p, op, r);
  ++p->depth;
  decideOp(p, op, r);
  --p->depth;
  free(r);
}

/* Whether an op has something to go on: a known tensor operand or a result
 * with a demand. */
static bool ready(Prop *p, MlirOperation op) {
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    Info *in = infoOf(p, mlirOperationGetOperand(op, i));
    if (in && in->isTensor && in->known)
      return true;
  }
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j) {
    Info *in = infoOf(p, mlirOperationGetResult(op, j));
    if (in && in->isTensor && in->hasDemand)
      return true;
  }
  return false;
}

/* ---- annotations and demands --------------------------------------------- */

static void addDemand(Prop *p, MlirOperation at, Info *in,
                      const DtensorShardingSpec *want, int64_t priority) {
  if (!in || !in->isTensor)
    return;
  DtensorShardingSpec old = demandOf(in);
  if (in->hasDemand && in->demandPriority == priority &&
      !dtensorShardingSpecEqual(&old, want)) {
    char a[256], b[256], where[256];
    specText(&old, a, sizeof(a));
    specText(want, b, sizeof(b));
    locText(in->demandLoc, where, sizeof(where));
    opError(p, at,
            "conflicting layouts for one value at equal priority %lld: %s "
            "here and %s at %s; give one of them a weaker priority",
            (long long)priority, b, a, where);
    return;
  }
  if (!in->hasDemand || priority < in->demandPriority) {
    in->hasDemand = true;
    setDemand(in, want);
    in->demandPriority = priority;
    in->demandLoc = mlirOperationGetLocation(at);
  }
}

/* An annotation anywhere in the function: its result is fixed, its operand
 * wants the layout. */
static MlirWalkResult seedAnnotation(MlirOperation op, void *userData) {
  Prop *p = userData;
  if (!dtIsOp(op, "dtensor.annotate") || mlirOperationGetNumResults(op) != 1 ||
      mlirOperationGetNumOperands(op) != 1)
    return MlirWalkResultAdvance;
  Info *out = infoOf(p, mlirOperationGetResult(op, 0));
  Info *in = infoOf(p, mlirOperationGetOperand(op, 0));
  DtensorShardingSpec s;
  if (!out || !in || !out->isTensor ||
      !readLayout(p, op, dtGetAttr(op, "layout"),
                  mlirValueGetType(mlirOperationGetResult(op, 0)),
                  "the annotation", &s))
    return MlirWalkResultAdvance;
  setSpec(out, &s);
  out->known = out->fixed = true;
  out->origin.text = "the annotation";
  out->origin.at = mlirOperationGetLocation(op);
  MlirAttribute pr = dtGetAttr(op, "priority");
  int64_t priority =
      mlirAttributeIsNull(pr) ? 0 : mlirIntegerAttrGetValueInt(pr);
  addDemand(p, op, in, &s, priority);
  return MlirWalkResultAdvance;
}

/* Reads the function's argument and result layouts and every annotation. */
static void seed(Prop *p, MlirOperation func) {
  MlirRegion body = mlirOperationGetRegion(func, 0);
  MlirBlock entry = mlirRegionGetFirstBlock(body);
  MlirType fnType = mlirTypeAttrGetValue(dtGetAttr(func, "function_type"));
  MlirAttribute argAttrs = dtGetAttr(func, "arg_attrs");
  MlirStringRef fname = mlirStringAttrGetValue(dtGetAttr(func, "sym_name"));
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry); ++i) {
    Info *in = infoOf(p, mlirBlockGetArgument(entry, i));
    if (!in || !in->isTensor)
      continue;
    in->origin = originOf(keep(p, "argument %ld of @%.*s", (long)i,
                               (int)fname.length, fname.data));
    if (mlirAttributeIsNull(argAttrs) ||
        i >= mlirArrayAttrGetNumElements(argAttrs))
      continue;
    MlirAttribute dict = mlirArrayAttrGetElement(argAttrs, i);
    MlirAttribute l = mlirDictionaryAttrGetElementByName(
        dict, mlirStringRefCreateFromCString(DT_ATTR_LAYOUT));
    if (mlirAttributeIsNull(l))
      continue;
    char what[64];
    snprintf(what, sizeof(what), "the layout of argument %ld", (long)i);
    DtensorShardingSpec argSpec;
    if (readLayout(p, func, l, mlirFunctionTypeGetInput(fnType, i), what,
                   &argSpec)) {
      setSpec(in, &argSpec);
      in->known = in->fixed = true;
    }
  }
  MlirAttribute resAttrs = dtGetAttr(func, "res_attrs");
  for (MlirOperation op = mlirBlockGetFirstOperation(entry);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (dtIsOp(op, "func.return") && !mlirAttributeIsNull(resAttrs)) {
      for (intptr_t i = 0; i < mlirOperationGetNumOperands(op) &&
                           i < mlirArrayAttrGetNumElements(resAttrs);
           ++i) {
        MlirAttribute l = mlirDictionaryAttrGetElementByName(
            mlirArrayAttrGetElement(resAttrs, i),
            mlirStringRefCreateFromCString(DT_ATTR_LAYOUT));
        if (mlirAttributeIsNull(l))
          continue;
        char what[64];
        snprintf(what, sizeof(what), "the layout of result %ld", (long)i);
        DtensorShardingSpec s;
        if (readLayout(p, func, l, mlirFunctionTypeGetResult(fnType, i), what,
                       &s)) {
          /* One value returned as several results wants several layouts:
           * each is a use, not a conflict; the first shapes the value. */
          Info *ri = infoOf(p, mlirOperationGetOperand(op, i));
          if (ri && ri->isTensor && !ri->hasDemand)
            addDemand(p, op, ri, &s, 0);
        }
      }
    }
  }
}

/* The return: each operand must have the function result's layout (its
 * demand), or its own layout without Partial when the result has none; the
 * function's result attributes are completed. */
static void decideReturn(Prop *p, MlirOperation func, MlirOperation ret) {
  markDecided(p, ret);
  intptr_t n = mlirOperationGetNumOperands(ret);
  if (n > DT_MAX_RULE_VALUES) {
    opError(p, ret, "more results than the propagator handles");
    return;
  }
  MlirAttribute opAttrs[DT_MAX_RULE_VALUES];
  MlirAttribute unit = mlirUnitAttrGet(p->ctx);
  bool any = false;
  for (intptr_t i = 0; i < n; ++i) {
    Info *in = infoOf(p, mlirOperationGetOperand(ret, i));
    opAttrs[i] = unit;
    if (!in || !in->isTensor)
      continue;
    any = true;
    DtensorShardingSpec want;
    if (funcLayout(p, func, true, i, &want)) {
      if (!in->known)
        adopt(p, in, &want, ret);
    } else {
      if (!in->known) {
        DtensorShardingSpec replicated;
        initSpec(in->rank, &replicated);
        adopt(p, in, &replicated, ret);
      }
      want = specOf(in);
      for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
        want.partial[a] = DTENSOR_REDUCE_NONE;
      mlirFuncSetResultAttr(func, i,
                            mlirStringRefCreateFromCString(DT_ATTR_LAYOUT),
                            layoutAttr(p, &want));
    }
    opAttrs[i] = layoutAttr(p, &want);
    DtensorShardingSpec cur = specOf(in);
    if (in->known && !dtensorShardingSpecEqual(&cur, &want))
      describeRedistribution(p, ret, (int)i, in, &want, NULL);
  }
  if (any)
    decided(p, ret, DT_DECIDED_OPERANDS, arrayOf(p, (int)n, opAttrs));
}

/* ---- the function walk --------------------------------------------------- */

static MlirWalkResult findAnnotationMesh(MlirOperation op, void *userData) {
  char *found = userData;
  DtensorLayoutAttrParts parts;
  if (dtIsOp(op, "dtensor.annotate") &&
      dtensorLayoutAttrGetParts(dtGetAttr(op, "layout"), &parts)) {
    snprintf(found, 256, "%s", parts.mesh);
    return MlirWalkResultInterrupt;
  }
  return MlirWalkResultAdvance;
}

/* Finds the mesh the function's layouts name; false if it has none. */
/* The mesh of the first layout on `func`'s signature, into `found`. */
static void signatureMesh(MlirOperation func, char found[256]) {
  const char *keys[2] = {"arg_attrs", "res_attrs"};
  for (int k = 0; k < 2 && !found[0]; ++k) {
    MlirAttribute list = dtGetAttr(func, keys[k]);
    for (intptr_t i = 0; !mlirAttributeIsNull(list) &&
                         i < mlirArrayAttrGetNumElements(list) && !found[0];
         ++i) {
      MlirAttribute l = mlirDictionaryAttrGetElementByName(
          mlirArrayAttrGetElement(list, i),
          mlirStringRefCreateFromCString(DT_ATTR_LAYOUT));
      DtensorLayoutAttrParts parts;
      if (!mlirAttributeIsNull(l) && dtensorLayoutAttrGetParts(l, &parts))
        snprintf(found, 256, "%s", parts.mesh);
    }
  }
}

typedef struct CalleeMesh {
  MlirSymbolTable symbols;
  char *found;
} CalleeMesh;

/* The mesh of a called function's signature (a driver without layouts of
 * its own calls an annotated function: it is partitioned too, or its call
 * would pass global types to a partitioned callee). */
static MlirWalkResult findCalleeMesh(MlirOperation op, void *userData) {
  CalleeMesh *c = userData;
  if (!dtIsOp(op, "func.call"))
    return MlirWalkResultAdvance;
  MlirAttribute callee = dtGetAttr(op, "callee");
  if (mlirAttributeIsNull(callee) || !mlirAttributeIsAFlatSymbolRef(callee))
    return MlirWalkResultAdvance;
  MlirOperation f =
      mlirSymbolTableLookup(c->symbols, mlirFlatSymbolRefAttrGetValue(callee));
  if (!mlirOperationIsNull(f))
    signatureMesh(f, c->found);
  return c->found[0] ? MlirWalkResultInterrupt : MlirWalkResultAdvance;
}

static bool findMesh(Prop *p, MlirOperation func) {
  char found[256] = "";
  signatureMesh(func, found);
  if (!found[0])
    mlirOperationWalk(func, findAnnotationMesh, found, MlirWalkPreOrder);
  MlirOperation module = mlirOperationGetParentOperation(func);
  if (!found[0] && !mlirOperationIsNull(module)) {
    CalleeMesh c = {mlirSymbolTableCreate(module), found};
    if (!mlirSymbolTableIsNull(c.symbols)) {
      mlirOperationWalk(func, findCalleeMesh, &c, MlirWalkPreOrder);
      mlirSymbolTableDestroy(c.symbols);
    }
  }
  if (!found[0])
    return false;
  snprintf(p->meshName, sizeof(p->meshName), "%s", found);
  p->meshOp = dtensorMeshOpLookup(func, mlirStringRefCreateFromCString(found));
  DtensorDiag diag;
  p->mesh = dtensorMeshCreateFromOp(p->meshOp, &diag);
  if (!p->mesh) {
    opError(p, func, "mesh '@%s': %s", found, diag.message);
    return false;
  }
  return true;
}

/* Only values propagation gives a layout get an info. */
static void registerValue(Prop *p, MlirValue v) {
  if (factsOf(p, mlirValueGetType(v))->isTensor)
    infoOf(p, v);
}

static MlirWalkResult registerValues(MlirOperation op, void *userData) {
  Prop *p = userData;
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r)
    for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
         !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
      for (intptr_t i = 0; i < mlirBlockGetNumArguments(b); ++i)
        registerValue(p, mlirBlockGetArgument(b, i));
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j)
    registerValue(p, mlirOperationGetResult(op, j));
  /* Values are registered in order, so an annotation's are there now. */
  if (mlirOperationGetNumResults(op) == 1 && dtIsOp(op, "dtensor.annotate"))
    seedAnnotation(op, p);
  return MlirWalkResultAdvance;
}

/* Decides the ops of a block in program order (a user decides what it
 * adopts backwards), then those that had nothing to go on. The terminator
 * is its owner's business. */
static void propagateBlock(Prop *p, MlirBlock block) {
  MlirOperation term = mlirBlockGetTerminator(block);
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op) && !p->failed;
       op = mlirOperationGetNextInBlock(op))
    if (!mlirOperationEqual(op, term) && ready(p, op))
      decide(p, op);
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op) && !p->failed;
       op = mlirOperationGetNextInBlock(op))
    if (!mlirOperationEqual(op, term))
      decide(p, op);
}

/* The first per-device op (a collective or mesh_index) under a function of
 * the global program, where nothing gives it a meaning. */
static MlirWalkResult findPerDevice(MlirOperation op, void *userData) {
  if (dtCollectiveOf(op) || dtIsOp(op, "dtensor.mesh_index")) {
    *(MlirOperation *)userData = op;
    return MlirWalkResultInterrupt;
  }
  return MlirWalkResultAdvance;
}

static void propagateFunction(Prop *p, MlirOperation func) {
  MlirRegion body = mlirOperationGetRegion(func, 0);
  MlirBlock entry = mlirRegionGetFirstBlock(body);
  if (mlirBlockIsNull(entry) || !findMesh(p, func))
    return;
  if (!mlirBlockIsNull(mlirBlockGetNextInRegion(entry))) {
    opError(p, func,
            "has several blocks; dtensor-propagate handles "
            "single-block functions");
    return;
  }
  char where[32];
  if (dtSignatureFind(func, true, where)) {
    opError(p, func,
            "is already partitioned (%s has a dtensor.global_shape: "
            "its type is a device's block); dtensor-propagate and "
            "dtensor-partition take the global program",
            where);
    return;
  }
  MlirOperation perDevice = {NULL};
  mlirOperationWalk(func, findPerDevice, &perDevice, MlirWalkPreOrder);
  if (!mlirOperationIsNull(perDevice)) {
    opError(p, perDevice,
            "works on a device's block, but this is the global "
            "program: state layouts here (dtensor.annotate, "
            "dtensor.redistribute) and dtensor-spmd inserts the collectives");
    return;
  }
  /* Every value gets its info now (nested regions too): the table must
   * not move later. */
  mlirOperationWalk(func, registerValues, p, MlirWalkPreOrder);
  p->frozen = true;
  seed(p, func); /* the annotations were seeded by the walk */
  if (p->failed)
    return;
  MlirOperation ret = mlirBlockGetTerminator(entry);
  propagateBlock(p, entry);
  if (!mlirOperationIsNull(ret) && !dtIsOp(ret, "func.return"))
    ret = (MlirOperation){NULL};
  if (!mlirOperationIsNull(ret) && !p->failed)
    decideReturn(p, func, ret);
  /* Arguments: record every layout (adopted ones, and replicated for the
   * unused). */
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry) && !p->failed; ++i) {
    Info *in = infoOf(p, mlirBlockGetArgument(entry, i));
    if (!in || !in->isTensor || in->fixed)
      continue;
    DtensorShardingSpec cur = specOf(in);
    mlirFuncSetArgAttr(func, i, mlirStringRefCreateFromCString(DT_ATTR_LAYOUT),
                       layoutAttr(p, &cur));
  }
}

static bool funcListed(void *const *list, int count, MlirOperation f) {
  for (int i = 0; i < count; ++i)
    if (list[i] == f.ptr)
      return true;
  return false;
}

static bool hasBody(MlirOperation func) {
  return dtIsOp(func, "func.func") && mlirOperationGetNumRegions(func) == 1 &&
         !mlirBlockIsNull(
             mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0)));
}

/* Propagates one function with the shared state of `base`; false after an
 * error. A function is propagated once. */
static bool propagateOne(const Prop *base, MlirOperation func) {
  Funcs *fs = base->funcs;
  if (funcListed(fs->done, fs->numDone, func))
    return true;
  if (fs->numDone == fs->capDone) {
    int cap = fs->capDone ? 2 * fs->capDone : 16;
    void **done = realloc(fs->done, sizeof(void *) * (size_t)cap);
    void **active = realloc(fs->active, sizeof(void *) * (size_t)cap);
    if (done)
      fs->done = done;
    if (active)
      fs->active = active;
    if (!done || !active) {
      mlirEmitError(mlirOperationGetLocation(func), "out of memory");
      return false;
    }
    fs->capDone = cap;
  }
  fs->done[fs->numDone++] = func.ptr;
  fs->active[fs->numActive++] = func.ptr;
  Prop p;
  memset(&p, 0, sizeof(p));
  p.ctx = base->ctx;
  p.funcs = fs;
  p.strict = base->strict;
  p.why = base->why;
  p.registry = base->registry;
  p.decisions = base->decisions;
  p.planner = base->planner;
  p.attrs = dtTableInit(sizeof(AttrCache));
  p.arrays = dtTableInit(sizeof(ArrayEntry));
  p.rules = dtTableInit(sizeof(RuleEntry));
  p.costs = dtTableInit(sizeof(CostEntry));
  p.fits = dtTableInit(sizeof(FitEntry));
  p.values = dtTableInit(sizeof(ValueSlot));
  p.decided = dtTableInit(sizeof(const void *));
  p.func = func;
  propagateFunction(&p, func);
  bool ok = !p.failed;
  dtTableFree(&p.values);
  dtTableFree(&p.decided);
  free(p.infos);
  dtTableFree(&p.attrs);
  dtTableFree(&p.arrays);
  dtTableFree(&p.rules);
  dtTableFree(&p.costs);
  dtTableFree(&p.fits);
  for (int i = 0; i < p.numArena; ++i)
    free(p.arena[i]);
  free(p.arena);
  dtensorMeshDestroy(p.mesh);
  --fs->numActive;
  return ok;
}

/* The names of every function some func.call calls. */
typedef struct Called {
  MlirStringRef *names;
  int count, capacity;
} Called;

static MlirWalkResult collectCallee(MlirOperation op, void *userData) {
  Called *c = userData;
  MlirAttribute ref = dtGetAttr(op, "callee");
  if (!dtIsOp(op, "func.call") || mlirAttributeIsNull(ref) ||
      !mlirAttributeIsAFlatSymbolRef(ref))
    return MlirWalkResultAdvance;
  if (c->count == c->capacity) {
    int cap = c->capacity ? 2 * c->capacity : 16;
    MlirStringRef *names =
        realloc(c->names, sizeof(MlirStringRef) * (size_t)cap);
    if (!names)
      return MlirWalkResultInterrupt;
    c->names = names;
    c->capacity = cap;
  }
  c->names[c->count++] = mlirFlatSymbolRefAttrGetValue(ref);
  return MlirWalkResultAdvance;
}

static bool isCalled(const Called *c, MlirOperation func) {
  MlirAttribute name = dtGetAttr(func, "sym_name");
  if (mlirAttributeIsNull(name))
    return false;
  MlirStringRef n = mlirStringAttrGetValue(name);
  for (int i = 0; i < c->count; ++i)
    if (mlirStringRefEqual(c->names[i], n))
      return true;
  return false;
}

static bool runPropagate(MlirOperation root, const DtPassOptions *options) {
  Prop p;
  memset(&p, 0, sizeof(p));
  Funcs funcs;
  memset(&funcs, 0, sizeof(funcs));
  p.ctx = mlirOperationGetContext(root);
  p.strict = dtPassOptionsGetBool(options, "strict");
  p.why = dtPassOptionsGetBool(options, "why");
  p.registry = options->context;
  p.decisions = options->decisions;
  p.planner = dtensorPlannerCreate(NULL);
  p.funcs = &funcs;
  funcs.symbols = mlirSymbolTableCreate(root);
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  bool ok = p.planner != NULL && !mlirSymbolTableIsNull(funcs.symbols);
  /* Callers first: a callee is propagated at its first call, with the
   * layouts of the call's operands; then whatever no call reached. */
  Called called = {NULL, 0, 0};
  if (ok)
    mlirOperationWalk(root, collectCallee, &called, MlirWalkPreOrder);
  for (int pass = 0; pass < 2; ++pass)
    for (MlirOperation op = mlirBlockIsNull(top)
                                ? (MlirOperation){NULL}
                                : mlirBlockGetFirstOperation(top);
         ok && !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
      if (hasBody(op) && (pass == 1 || !isCalled(&called, op)))
        ok = propagateOne(&p, op);
  free(called.names);
  if (!mlirSymbolTableIsNull(funcs.symbols))
    mlirSymbolTableDestroy(funcs.symbols);
  free(funcs.done);
  free(funcs.active);
  dtensorPlannerDestroy(p.planner);
  return ok;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"strict", DTENSOR_OPTION_BOOL, "false", NULL,
     "report an error wherever an implicit redistribution would be needed "
     "(veScale's no implicit resharding)"},
    {"why", DTENSOR_OPTION_BOOL, "false", NULL,
     "attach to every op a 'dtensor.why' string: where its layout came from "
     "and each redistribution it needs"},
};

const DtPassDef dtPropagatePass = {
    .info = {"dtensor-propagate",
             "Give every tensor value a layout and every op a strategy, from "
             "the annotations, choosing by modelled redistribution cost",
             (int)(sizeof(kOptions) / sizeof(kOptions[0])), kOptions},
    .verifyFirst = true,
    .run = runPropagate,
};

MlirPass dtensorCreatePropagatePass(const DtensorRuleRegistry *registry,
                                    MlirStringRef options,
                                    DtensorDiag *outDiag) {
  return dtPassCreateWithContext(
      mlirStringRefCreateFromCString("dtensor-propagate"), options, registry,
      outDiag);
}
