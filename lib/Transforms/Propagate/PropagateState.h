/* dtensor-propagate's state, which every file of the pass uses: the
 * per-function state (Prop), a value's packed layout and demand (Info),
 * the caches, and what PropagateState.c gives the others (the value table,
 * the caches of layout attributes, conversion costs, layout fits and
 * rules, and message text). The other files' headers: PropagateStrategy.h
 * (an op's strategies), PropagateRegions.h (calls, loops, branches),
 * PropagateRefine.h (the whole function's choice), Propagate.h (the walk). */
#ifndef DTENSOR_LIB_TRANSFORMS_PROPAGATE_STATE_H
#define DTENSOR_LIB_TRANSFORMS_PROPAGATE_STATE_H

#include "Decisions.h"
#include "PassDef.h"
#include "Rules.h"

#include "Support/Support.h"
#include "dtensor-c/Dialect.h"
#include "dtensor-c/Planner.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/IR.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define ORIGIN_SIZE 200

/* A spec packed into 16 bytes (a module has one value per tensor): one byte
 * per mesh axis (0 free, 1 Partial, 2 + 8 dim + position), the reduce
 * kind of each Partial axis in 4 bits, and at most one interleaved dim
 * (S0i3: `interleave` groups on dim `interleaveDim`; 0 when none).
 * Propagation reads no spec with more (dtPropReadLayout) and makes none
 * (factorSpec). */
typedef struct CSpec {
  uint64_t code;
  uint32_t partial;
  uint16_t interleave;
  uint8_t interleaveDim;
  uint8_t unused; /* zero, so specs compare and hash as bytes */
} CSpec;

/* Where a layout came from, for explanations and messages: `text`, then
 * " at <location>" when `at` is set (formatted only when shown: every
 * annotation has one, few are shown). `text` is in the arena or a string
 * constant. */
typedef struct Origin {
  const char *text;
  MlirLocation at;
} Origin;

static inline Origin originOf(const char *text) {
  Origin o = {text, {NULL}};
  return o;
}

typedef struct Info {
  MlirValue value;
  bool isTensor;
  int rank; /* the shape is read from the value's type when needed */
  DtensorElementType elementType;
  bool known, fixed;
  signed char isFree; /* PropagateRefine.c's isFreeValue: 0 not asked yet,
                         1 free, -1 not */
  CSpec spec;
  bool hasDemand;
  CSpec demand;
  int64_t demandPriority;
  MlirLocation demandLoc;
  Origin origin;
} Info;

/* dtensorShardingSpecInitReplicated for the hot paths: only what a spec of
 * `rank` dims is read for (every reader stops at the rank). */
static inline void initSpec(int rank, DtensorShardingSpec *s) {
  s->rank = rank;
  memset(s->numAxes, 0, sizeof(int) * (size_t)rank);
  memset(s->interleave, 0, sizeof(int64_t) * (size_t)rank);
  memset(s->partial, 0, sizeof(s->partial));
}

/* The interleaved dim of `s` and its groups (0 groups: none; -1 dim: more
 * than one interleaved dim, or too many groups, which CSpec cannot hold). */
static inline int interleavedDim(const DtensorShardingSpec *s,
                                 int64_t *groups) {
  int dim = -2;
  *groups = 0;
  for (int d = 0; d < s->rank; ++d)
    if (s->numAxes[d] > 0 && s->interleave[d] > 1) {
      if (dim != -2 || s->interleave[d] > 0xffff)
        return -1;
      dim = d;
      *groups = s->interleave[d];
    }
  return dim;
}

static inline void pack(const DtensorShardingSpec *s, CSpec *c) {
  c->code = 0;
  c->partial = 0;
  c->interleave = 0;
  c->interleaveDim = 0;
  c->unused = 0;
  for (int d = 0; d < s->rank; ++d) {
    for (int i = 0; i < s->numAxes[d]; ++i)
      c->code |= (uint64_t)(2 + 8 * d + i) << (8 * s->axes[d][i]);
    if (s->numAxes[d] > 0 && s->interleave[d] > 1) {
      c->interleave = (uint16_t)s->interleave[d];
      c->interleaveDim = (uint8_t)d;
    }
  }
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    if (s->partial[a] != DTENSOR_REDUCE_NONE) {
      c->code |= (uint64_t)1 << (8 * a);
      c->partial |= (uint32_t)s->partial[a] << (4 * a);
    }
}

static inline void unpack(const CSpec *c, int rank, DtensorShardingSpec *s) {
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
  if (c->interleave > 1 && c->interleaveDim < rank)
    s->interleave[c->interleaveDim] = c->interleave;
}

/* Whether two packed specs are the same spec. */
static inline bool sameCSpec(CSpec a, CSpec b) {
  return a.code == b.code && a.partial == b.partial &&
         a.interleave == b.interleave && a.interleaveDim == b.interleaveDim;
}

/* A hash of a packed spec. */
static inline uint64_t hashCSpec(uint64_t h, CSpec c) {
  return dtHashMix(dtHashMix(h, c.code), (uint64_t)c.partial |
                                             (uint64_t)c.interleave << 32 |
                                             (uint64_t)c.interleaveDim << 48);
}

static inline void shapeOf(const Info *in, int64_t *out) {
  MlirType t = mlirValueGetType(in->value);
  for (int d = 0; d < in->rank; ++d)
    out[d] = mlirShapedTypeGetDimSize(t, d);
}

static inline DtensorShardingSpec specOf(const Info *in) {
  DtensorShardingSpec s;
  unpack(&in->spec, in->rank, &s);
  return s;
}

static inline DtensorShardingSpec demandOf(const Info *in) {
  DtensorShardingSpec s;
  unpack(&in->demand, in->rank, &s);
  return s;
}

/* `s` without pending reductions (what arguments, fresh values and results
 * of a function hold). */
static inline void resolved(DtensorShardingSpec *s) {
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    s->partial[a] = DTENSOR_REDUCE_NONE;
}

static inline void setSpec(Info *in, const DtensorShardingSpec *s) {
  pack(s, &in->spec);
}

static inline void setDemand(Info *in, const DtensorShardingSpec *s) {
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

/* How op strategies are chosen (the option `choice`). */
typedef enum DtChoiceMode {
  DT_CHOICE_WHOLE = 0, /* program order, then the whole function's choice */
  DT_CHOICE_ORDER,     /* program order only */
  DT_CHOICE_ENUMERATE, /* every combination of every op's strategies */
} DtChoiceMode;

/* Where an op's operand needs start in Prop.needSpecs. */
typedef struct NeedEntry {
  const void *op;
  size_t first;
  int count;
  bool byRule; /* decided by its factor rule (its strategy may change) */
} NeedEntry;

/* A CSpec that stands for a non-tensor operand (no need). */
#define NO_NEED_PARTIAL UINT32_MAX

typedef struct Prop {
  MlirContext ctx;
  TypeFacts typeFacts[TYPE_FACTS]; /* direct-mapped by type pointer */
  Funcs *funcs;
  MlirOperation func;
  MlirOperation meshOp;
  char meshName[256];
  DtensorMesh *mesh;
  DtensorPlanner *planner;
  const DtensorCalibration *calibration; /* NULL: the link model */
  Info *infos;
  int numInfos, capInfos;
  DtTable values;  /* ValueSlot: a value's index in infos */
  DtTable decided; /* ops decided so far (a pointer set) */
  bool strict, why;
  /* A layout read so far is interleaved: only then do compound dims make
   * interleaved layouts (the planner cannot redistribute them, so a
   * program that never asked for one never gets one). */
  bool interleaved;
  bool failed;
  int depth; /* ops being decided, one inside the other's regions */
  /* After registration the table must not grow: decisions hold pointers
   * into it. */
  bool frozen;
  const DtensorRuleRegistry *registry;
  DtDecisions *decisions; /* NULL: decisions become attributes */
  /* The rule and candidate layouts of the ops being decided, one frame
   * per op (decisions recurse into producers). */
  DtScratch scratch;
  /* Strings that outlive a decision (origins). */
  char **arena;
  size_t numArena, capArena;
  DtLayoutCache layouts; /* the layouts read (the dialect's cache) */
  MlirIdentifier meshId; /* meshName, uniqued */
  DtTable attrs;         /* AttrCache: the layouts built, by spec */
  DtTable arrays;        /* ArrayEntry */
  DtTable rules;         /* RuleEntry */
  DtTable costs;         /* CostEntry */
  DtTable fits;          /* FitEntry */
  /* What each decided op needs of its operands (NeedEntry), and the ops
   * that needed a conversion: what the whole-function choice revisits
   * (PropagateRefine.c). */
  DtTable needs;
  CSpec *needSpecs;
  size_t numNeedSpecs, capNeedSpecs;
  MlirOperation *costly;
  size_t numCostly, capCostly;
  DtChoiceMode choice;
  /* Automatic sharding (dtensor-auto-shard; PropagateAuto.c): arguments
   * without a layout are chosen too, with the function results that have
   * none (`autoResult`), each equal to the argument of the same
   * dtensor.name when there is one (`tiedArg`, -1: none). */
  bool autoShard, autoWhy;
  bool layersAlike;     /* repeated layers pick alike */
  int64_t memoryBudget; /* bytes per device; 0: unbounded */
  int solver;           /* a DtIlpSolver */
  double timeLimit;     /* the solver's seconds */
  int numResults;
  bool *autoResult;
  int *tiedArg;
  bool reportCost;           /* cost=true: print each function's cost */
  const char *choiceSummary; /* how the choice was made, for cost=true */
} Prop;

/* Rules of named linalg ops without a body of their own, which depend only
 * on the op's name, its operand and result types and its indexing_maps,
 * dimensions and permutation attributes (all uniqued): a model repeats the
 * same few, whose maps are costly to rebuild. (linalg.reduce's rule also
 * depends on its body's combiner, linalg.generic's on everything.) */
#define DT_RULE_KEY_MAX (2 * DT_MAX_RULE_VALUES + 5)

typedef struct RuleEntry {
  const void *key[DT_RULE_KEY_MAX];
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
  const void *attr;
  CSpec spec;
  int rank;
} AttrCache;

/* An entry of the value table (a value's index in infos), and of the
 * decided set. */
typedef struct ValueSlot {
  const void *value;
  int index;
} ValueSlot;

/* ---- PropagateState.c ---------------------------------------------------- */

/// A location as file:line:col when it is one, else as MLIR prints it.
void dtPropLocText(MlirLocation loc, char *out, size_t capacity);

/// "<text> at <location>" for an origin.
void dtPropOriginText(Origin o, char *out, size_t capacity);

/// Emits an error at `op` and fails the propagation.
void dtPropError(Prop *p, MlirOperation op, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/// Records a decision of `op` (an attribute, or in dtensor-spmd's table).
void dtPropDecided(Prop *p, MlirOperation op, DtDecided kind,
                   MlirAttribute value);

/// A formatted string that lives as long as the function's propagation.
const char *dtPropKeep(Prop *p, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// What propagation needs of a type (cached per type).
const TypeFacts *dtPropFacts(Prop *p, MlirType t);

/// The info of `v`, created on first use; NULL when out of memory or once
/// the table is frozen.
Info *dtPropInfo(Prop *p, MlirValue v);

/// The set of decided ops.
bool dtPropIsDecided(const Prop *p, MlirOperation op);
bool dtPropMarkDecided(Prop *p, MlirOperation op);
void dtPropUnmarkDecided(Prop *p, MlirOperation op);

/// Reads a layout attribute for a value of `type` on the function's mesh
/// (`what` names it in errors); false after an error.
bool dtPropReadLayout(Prop *p, MlirOperation at, MlirAttribute attr,
                      MlirType type, const char *what,
                      DtensorShardingSpec *out);

/// mlirArrayAttrGet through a cache.
MlirAttribute dtPropArray(Prop *p, int n, const MlirAttribute *elems);

/// The #dtensor.layout of `s` on the function's mesh (cached).
MlirAttribute dtPropLayoutAttr(Prop *p, const DtensorShardingSpec *s);

/// `s` without Partial on the axes `base` is not Partial on.
void dtPropDropCreatedPartial(const DtensorShardingSpec *base,
                              DtensorShardingSpec *s);

/// The modelled cost of converting the value of `in` from `from` to `to`;
/// INFINITY if impossible (cached per type).
double dtPropConvertCost(Prop *p, const Info *in,
                         const DtensorShardingSpec *from,
                         const DtensorShardingSpec *to);

/// Whether `s` is a valid layout of the value of `in` (cached per type).
bool dtPropFits(Prop *p, const Info *in, const DtensorShardingSpec *s);

/// The sharding rule of `op` (cached for named linalg ops).
void dtPropRule(Prop *p, MlirOperation op, DtRule *out);

/// What the rule of `op` depends on, into `key` (DT_RULE_KEY_MAX entries,
/// all uniqued pointers), and its length; -1 when the rule depends on more
/// (a body, a registry) and is not cached.
int dtPropRuleKey(Prop *p, MlirOperation op, const void **key);

#endif
