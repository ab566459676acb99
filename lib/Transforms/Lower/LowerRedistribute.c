/* dtensor-lower-redistribute: each per-device `dtensor.redistribute` becomes
 * the collectives of its plan (the LayoutConverter), each with its padded
 * per-device result type. One planner (and its cache) per run. */
#include "PassDef.h"
#include "Util.h"

#include "Planner/PlannerInternal.h"
#include "Support/Support.h"
#include "dtensor-c/Dialect.h"
#include "dtensor-c/Planner.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The local type of `input`'s elements in layout `l`'s largest block. */
static MlirType localType(const DtensorLayout *l, MlirValue input) {
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  dtensorLayoutGetMaxLocalShape(l, shape);
  return mlirRankedTensorTypeGet(
      l->rank, shape, mlirShapedTypeGetElementType(mlirValueGetType(input)),
      mlirAttributeGetNull());
}

/* Builds the collective of one plan step on `input`, before `before`. */
static MlirValue buildStep(const DtIds *ids, MlirOperation before,
                           MlirAttribute meshRef, const DtensorPlanStep *step,
                           MlirValue input, const DtensorLayout *after) {
  /* Over mesh axes of size 1 every step is the identity (a mesh of one
   * device, or a program written for a larger mesh run on one). */
  if (dtGroupSize(after->mesh, step->comm.numAxes, step->comm.axes) == 1)
    return input;
  MlirType outType = localType(after, input);
  /* A Partial made locally: a select, no collective. */
  if (step->comm.pattern == DTENSOR_COMM_LOCAL_PARTIAL)
    return dtBuildKeepOnFirst(before, before, meshRef, step->comm.numAxes,
                              step->comm.axes, step->comm.reduce, input);
  MlirOperation op =
      dtBuildCollective(ids, before, meshRef, &step->comm, input, outType);
  return mlirOperationIsNull(op) ? input : mlirOperationGetResult(op, 0);
}

/* Views the local block `input` (of a tensor of `rank` dims) with `dim` cut
 * in two (expand) or back (collapse), as a plan's step asks (interleaved
 * shards, lib/Planner/Interleave.c), into layout `l`'s block. */
static MlirValue reView(MlirOperation before, bool expand, int rank, int dim,
                        MlirValue input, const DtensorLayout *l) {
  MlirContext ctx = mlirOperationGetContext(before);
  MlirType i64 = mlirIntegerTypeGet(ctx, 64);
  MlirAttribute groups[DTENSOR_MAX_TENSOR_RANK];
  for (int d = 0, o = 0; d < rank; ++d) {
    MlirAttribute idx[2];
    int n = 0;
    idx[n++] = mlirIntegerAttrGet(i64, o++);
    if (d == dim)
      idx[n++] = mlirIntegerAttrGet(i64, o++);
    groups[d] = mlirArrayAttrGet(ctx, n, idx);
  }
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  dtensorLayoutGetMaxLocalShape(l, shape);
  MlirType type = mlirRankedTensorTypeGet(
      l->rank, shape, mlirShapedTypeGetElementType(mlirValueGetType(input)),
      mlirAttributeGetNull());
  MlirNamedAttribute attrs[2] = {
      dtNamedAttr(ctx, "reassociation", mlirArrayAttrGet(ctx, rank, groups)),
      dtNamedAttr(ctx, "static_output_shape",
                  mlirDenseI64ArrayGet(ctx, l->rank, shape))};
  MlirOperationState st = mlirOperationStateGet(
      mlirStringRefCreateFromCString(expand ? "tensor.expand_shape"
                                            : "tensor.collapse_shape"),
      mlirOperationGetLocation(before));
  mlirOperationStateAddOperands(&st, 1, &input);
  mlirOperationStateAddResults(&st, 1, &type);
  mlirOperationStateAddAttributes(&st, expand ? 2 : 1, attrs);
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before,
                                      op);
  return mlirOperationGetResult(op, 0);
}

/* Moves `*value` (in layout `*cur`, in view (*dim, *groups) of `base`,
 * the plan's source layout; groups <= 1: none) to view (dim, groups). */
static bool moveView(MlirOperation before, const DtensorLayout *base,
                     DtensorLayout *cur, int *curDim, int64_t *curGroups,
                     int dim, int64_t groups, MlirValue *value) {
  if (*curGroups == groups && (groups <= 1 || *curDim == dim))
    return true;
  DtensorDiag diag;
  if (*curGroups > 1) {
    DtensorLayout flat;
    if (!dtLayoutUnview(base, &cur->spec, *curDim, *curGroups, &flat, &diag)) {
      dtOpError(before, "%s", diag.message);
      return false;
    }
    *value = reView(before, false, base->rank, *curDim, *value, &flat);
    *cur = flat;
  }
  if (groups > 1) {
    DtensorLayout viewed;
    if (!dtLayoutView(cur, dim, groups, &viewed, &diag)) {
      dtOpError(before, "%s", diag.message);
      return false;
    }
    *value = reView(before, true, base->rank, dim, *value, &viewed);
    *cur = viewed;
  }
  *curDim = dim;
  *curGroups = groups;
  return true;
}

/* The layouts of a (src, dst, global type) triple, read once: a program
 * has many redistributes and few distinct ones. */
typedef struct Pair {
  const void *src, *dst, *type;
  DtensorMesh *mesh;
  DtensorLayout from, to;
  MlirAttribute meshRef;
} Pair;

typedef struct Lower {
  DtensorPlanner *planner;
  const DtensorCalibration *calibration; /* NULL: the mesh's link model */
  bool report;
  DtTable pairs; /* Pair */
  DtIds ids;
} Lower;

static bool samePair(const void *entry, const void *key) {
  const Pair *a = entry, *b = key;
  return a->src == b->src && a->dst == b->dst && a->type == b->type;
}

static uint64_t pairHash(const Pair *k) {
  return dtHashMix(dtHashMix(dtHashMix(7, (uint64_t)(uintptr_t)k->src),
                             (uint64_t)(uintptr_t)k->dst),
                   (uint64_t)(uintptr_t)k->type);
}

/* The pair of `op`'s layouts for `globalType`, or NULL after an error. */
static const Pair *pairOf(Lower *l, MlirOperation op, MlirType globalType) {
  MlirAttribute srcAttr = dtGetAttr(op, "src"), dstAttr = dtGetAttr(op, "dst");
  Pair key = {srcAttr.ptr, dstAttr.ptr, globalType.ptr, NULL, {0}, {0}, {NULL}};
  uint64_t hash = pairHash(&key);
  const Pair *known = dtTableFind(&l->pairs, hash, samePair, &key);
  if (known)
    return known;
  DtensorMesh *mesh = NULL, *dstMesh = NULL;
  DtensorDiag diag;
  if (!dtensorLayoutFromAttr(op, srcAttr, globalType, &mesh, &key.from,
                             &diag) ||
      !dtensorLayoutFromAttr(op, dstAttr, globalType, &dstMesh, &key.to,
                             &diag)) {
    dtOpError(op, "%s", diag.message);
    dtensorMeshDestroy(mesh);
    return NULL;
  }
  dtensorMeshDestroy(dstMesh);
  key.to.mesh = mesh;
  DtensorLayoutAttrParts src, dst;
  dtensorLayoutAttrGetParts(srcAttr, &src);
  dtensorLayoutAttrGetParts(dstAttr, &dst);
  if (strcmp(src.mesh, dst.mesh)) {
    dtOpError(op,
              "redistributes from mesh '@%s' to mesh '@%s'; both layouts "
              "must be on one mesh",
              src.mesh, dst.mesh);
    dtensorMeshDestroy(mesh);
    return NULL;
  }
  if (l->calibration &&
      !dtensorCalibrationCheckMesh(l->calibration, mesh, &diag)) {
    dtOpError(op, "mesh '@%s': %s", src.mesh, diag.message);
    dtensorMeshDestroy(mesh);
    return NULL;
  }
  key.mesh = mesh;
  key.meshRef = mlirFlatSymbolRefAttrGet(
      mlirOperationGetContext(op), mlirStringRefCreateFromCString(src.mesh));
  Pair *slot = dtTableInsert(&l->pairs, hash);
  if (!slot) {
    dtOpError(op, "out of memory");
    dtensorMeshDestroy(mesh);
    return NULL;
  }
  *slot = key;
  return slot;
}

/* Lowers one redistribute; returns false after an error. */
static bool lowerOne(Lower *l, MlirOperation op) {
  MlirAttribute global = dtGetAttr(op, "global_shape");
  if (mlirAttributeIsNull(global)) {
    dtOpError(op, "has no 'global_shape': it is still in a global program; "
                  "partition the program first (dtensor-partition), or give "
                  "'global_shape' and per-device types");
    return false;
  }
  MlirValue input = mlirOperationGetOperand(op, 0);
  MlirType inType = mlirValueGetType(input);
  int rank = (int)mlirShapedTypeGetRank(inType);
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  for (int d = 0; d < rank; ++d)
    shape[d] = mlirDenseI64ArrayGetElement(global, d);
  MlirType globalType =
      mlirRankedTensorTypeGet(rank, shape, mlirShapedTypeGetElementType(inType),
                              mlirAttributeGetNull());
  const Pair *pair = pairOf(l, op, globalType);
  if (!pair)
    return false;
  DtensorDiag diag;
  const DtensorPlan *plan =
      dtensorPlannerPlan(l->planner, &pair->from, &pair->to.spec, &diag);
  if (!plan) {
    char a[256], b[256];
    dtensorShardingSpecPrint(&pair->from.spec, a, sizeof(a));
    dtensorShardingSpecPrint(&pair->to.spec, b, sizeof(b));
    dtOpError(op, "cannot redistribute %s to %s: %s", a, b, diag.message);
    return false;
  }
  MlirContext ctx = mlirOperationGetContext(op);
  MlirValue value = input;
  DtensorLayout after = pair->from;
  MlirOperation last = {NULL};
  int viewDim = 0;
  int64_t viewGroups = 0;
  for (int i = 0; i < plan->numSteps; ++i) {
    const DtensorPlanStep *step = &plan->steps[i];
    if (!moveView(op, &pair->from, &after, &viewDim, &viewGroups, step->viewDim,
                  step->viewGroups, &value))
      return false;
    after.spec = step->after;
    value = buildStep(&l->ids, op, pair->meshRef, step, value, &after);
    last = mlirOpResultGetOwner(value);
  }
  if (!moveView(op, &pair->from, &after, &viewDim, &viewGroups, 0, 0, &value))
    return false;
  if (l->report && !mlirOperationIsNull(last)) {
    char text[256];
    snprintf(text, sizeof(text), "%d steps, forward %.3f us, backward %.3f us",
             plan->numSteps, plan->forwardUs, plan->backwardUs);
    mlirOperationSetDiscardableAttributeByName(
        last, mlirStringRefCreateFromCString(DT_ATTR_PLAN_COST),
        mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(text)));
  }
  mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0), value);
  mlirOperationDestroy(op);
  return true;
}

typedef struct Collected {
  MlirOperation *ops;
  size_t count, capacity;
  bool failed;
} Collected;

static MlirWalkResult collect(MlirOperation op, void *userData) {
  Collected *c = userData;
  if (!dtIsOp(op, DT_OP_REDISTRIBUTE))
    return MlirWalkResultAdvance;
  if (c->count == c->capacity) {
    size_t cap = c->capacity ? 2 * c->capacity : 16;
    MlirOperation *ops = realloc(c->ops, sizeof(MlirOperation) * cap);
    if (!ops) {
      c->failed = true;
      return MlirWalkResultInterrupt;
    }
    c->ops = ops;
    c->capacity = cap;
  }
  c->ops[c->count++] = op;
  return MlirWalkResultAdvance;
}

static void destroyPairMesh(void *entry, void *user) {
  (void)user;
  dtensorMeshDestroy(((Pair *)entry)->mesh);
}

static bool runLowerRedistribute(MlirOperation root,
                                 const DtPassOptions *options) {
  DtensorPlanOptions planOptions;
  dtensorPlanOptionsInit(&planOptions);
  if (!strcmp(dtPassOptionsGet(options, "strategy"), "greedy"))
    planOptions.strategy = DTENSOR_STRATEGY_GREEDY;
  if (!strcmp(dtPassOptionsGet(options, "objective"), "forward+backward"))
    planOptions.objective = DTENSOR_OBJECTIVE_FORWARD_BACKWARD;
  bool report = dtPassOptionsGetBool(options, "report");
  DtensorCalibration *cal = NULL;
  if (!dtPassReadCalibration(root, "dtensor-lower-redistribute", options, &cal))
    return false;
  planOptions.calibration = cal;
  /* Views of interleaved shards are tensor reshapes: the dialect may not
   * be loaded yet in a program without tensor ops. */
  mlirContextGetOrLoadDialect(mlirOperationGetContext(root),
                              mlirStringRefCreateFromCString("tensor"));
  Collected found = {NULL, 0, 0, false};
  mlirOperationWalk(root, collect, &found, MlirWalkPostOrder);
  Lower l = {dtensorPlannerCreate(&planOptions), cal, report,
             dtTableInit(sizeof(Pair)),
             dtIdsGet(mlirOperationGetContext(root))};
  bool ok = !found.failed && l.planner;
  if (!ok)
    mlirEmitError(mlirOperationGetLocation(root),
                  "dtensor-lower-redistribute: out of memory");
  /* Every redistribute is tried, so one run reports all that fail. */
  if (ok)
    for (size_t i = 0; i < found.count; ++i)
      ok = lowerOne(&l, found.ops[i]) && ok;
  dtTableForEach(&l.pairs, destroyPairMesh, NULL);
  dtTableFree(&l.pairs);
  dtensorPlannerDestroy(l.planner);
  dtensorCalibrationDestroy(cal);
  free(found.ops);
  return ok;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"strategy", DTENSOR_OPTION_ENUM, "optimal", "optimal|greedy",
     "how plans are searched: the minimum-cost plan, or the seed's greedy "
     "walk (for comparison)"},
    {"objective", DTENSOR_OPTION_ENUM, "forward", "forward|forward+backward",
     "what the optimal search minimizes"},
    {"report", DTENSOR_OPTION_BOOL, "false", NULL,
     "attach each plan's modelled cost to its last collective as the "
     "'dtensor.plan_cost' attribute"},
    {"calibration", DTENSOR_OPTION_STRING, "", NULL,
     "price collectives with this measured cost file (dtensor-run "
     "--calibrate) instead of the mesh's link model"},
};

const DtPassDef dtLowerRedistributePass = {
    .info = {"dtensor-lower-redistribute",
             "Replace each per-device dtensor.redistribute by the "
             "collectives of its minimum-cost plan",
             (int)(sizeof(kOptions) / sizeof(kOptions[0])), kOptions},
    .verifyFirst = true,
    .run = runLowerRedistribute,
};
