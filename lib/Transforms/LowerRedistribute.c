/* dtensor-lower-redistribute: each per-device `dtensor.redistribute` becomes
 * the collectives of its plan (the LayoutConverter), each with its padded
 * per-device result type. One planner (and its cache) per run. */
#include "Util.h"
#include "PassDef.h"

#include "Layout/Diag.h"
#include "dtensor-c/Dialect.h"
#include "dtensor-c/Planner.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MlirNamedAttribute named(MlirContext ctx, const char *name,
                                MlirAttribute value) {
  return mlirNamedAttributeGet(
      mlirIdentifierGet(ctx, mlirStringRefCreateFromCString(name)), value);
}

static void emitAt(MlirOperation op, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void emitAt(MlirOperation op, const char *format, ...) {
  char message[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  char full[1100];
  snprintf(full, sizeof(full), "'dtensor.redistribute' op %s", message);
  mlirEmitError(mlirOperationGetLocation(op), full);
}

/* Builds the collective of one plan step on `input`, before `before`. */
static MlirValue buildStep(MlirOperation before, MlirAttribute meshRef,
                           const DtensorPlanStep *step, MlirValue input,
                           const DtensorLayout *after) {
  MlirContext ctx = mlirOperationGetContext(before);
  MlirLocation loc = mlirOperationGetLocation(before);
  const DtensorCommSpec *c = &step->comm;
  char name[64];
  snprintf(name, sizeof(name), "dtensor.%s",
           dtensorCommPatternGetName(c->pattern));
  MlirOperationState state =
      mlirOperationStateGet(mlirStringRefCreateFromCString(name), loc);
  int64_t shape[DTENSOR_MAX_TENSOR_RANK], axes[DTENSOR_MAX_MESH_RANK];
  dtensorLayoutGetMaxLocalShape(after, shape);
  MlirType inType = mlirValueGetType(input);
  MlirType outType = mlirRankedTensorTypeGet(
      after->rank, shape, mlirShapedTypeGetElementType(inType),
      mlirAttributeGetNull());
  for (int i = 0; i < c->numAxes; ++i)
    axes[i] = c->axes[i];
  MlirType i64 = mlirIntegerTypeGet(ctx, 64);
  MlirNamedAttribute attrs[5];
  int n = 0;
  attrs[n++] = named(ctx, "mesh", meshRef);
  attrs[n++] =
      named(ctx, "mesh_axes", mlirDenseI64ArrayGet(ctx, c->numAxes, axes));
  if (c->gatherDim >= 0)
    attrs[n++] = named(ctx, "gather_dim",
                       mlirIntegerAttrGet(i64, (int64_t)c->gatherDim));
  if (c->shardDim >= 0)
    attrs[n++] = named(ctx, "shard_dim",
                       mlirIntegerAttrGet(i64, (int64_t)c->shardDim));
  if (c->reduce != DTENSOR_REDUCE_NONE)
    attrs[n++] = named(ctx, "reduce",
                       mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(
                                                  dtensorReduceKindGetName(
                                                      c->reduce))));
  mlirOperationStateAddOperands(&state, 1, &input);
  mlirOperationStateAddResults(&state, 1, &outType);
  mlirOperationStateAddAttributes(&state, n, attrs);
  MlirOperation op = mlirOperationCreate(&state);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before,
                                      op);
  return mlirOperationGetResult(op, 0);
}

/* Lowers one redistribute; returns false after an error. */
static bool lowerOne(MlirOperation op, DtensorPlanner *planner, bool report) {
  MlirAttribute global = dtGetAttr(op, "global_shape");
  if (mlirAttributeIsNull(global)) {
    emitAt(op, "has no 'global_shape': it is still in a global program; "
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
  MlirType globalType = mlirRankedTensorTypeGet(
      rank, shape, mlirShapedTypeGetElementType(inType),
      mlirAttributeGetNull());
  DtensorMesh *mesh = NULL, *dstMesh = NULL;
  DtensorLayout src, dst;
  DtensorDiag diag;
  if (!dtensorLayoutFromAttr(op, dtGetAttr(op, "src"), globalType, &mesh, &src,
                             &diag) ||
      !dtensorLayoutFromAttr(op, dtGetAttr(op, "dst"), globalType, &dstMesh,
                             &dst, &diag)) {
    emitAt(op, "%s", diag.message);
    dtensorMeshDestroy(mesh);
    return false;
  }
  const DtensorPlan *plan = dtensorPlannerPlan(planner, &src, &dst.spec, &diag);
  if (!plan) {
    char a[256], b[256];
    dtensorShardingSpecPrint(&src.spec, a, sizeof(a));
    dtensorShardingSpecPrint(&dst.spec, b, sizeof(b));
    emitAt(op, "cannot redistribute %s to %s: %s", a, b, diag.message);
    dtensorMeshDestroy(mesh);
    dtensorMeshDestroy(dstMesh);
    return false;
  }
  DtensorLayoutAttrParts parts;
  dtensorLayoutAttrGetParts(dtGetAttr(op, "src"), &parts);
  MlirContext ctx = mlirOperationGetContext(op);
  MlirAttribute meshRef = mlirFlatSymbolRefAttrGet(
      ctx, mlirStringRefCreateFromCString(parts.mesh));
  MlirValue value = input;
  DtensorLayout after = src;
  MlirOperation last = {NULL};
  for (int i = 0; i < plan->numSteps; ++i) {
    after.spec = plan->steps[i].after;
    value = buildStep(op, meshRef, &plan->steps[i], value, &after);
    last = mlirOpResultGetOwner(value);
  }
  if (report && !mlirOperationIsNull(last)) {
    char text[256];
    snprintf(text, sizeof(text), "%d steps, forward %.3f us, backward %.3f us",
             plan->numSteps, plan->forwardUs, plan->backwardUs);
    mlirOperationSetDiscardableAttributeByName(
        last, mlirStringRefCreateFromCString("dtensor.plan_cost"),
        mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(text)));
  }
  mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0), value);
  mlirOperationDestroy(op);
  dtensorMeshDestroy(mesh);
  dtensorMeshDestroy(dstMesh);
  return true;
}

typedef struct Collected {
  MlirOperation *ops;
  size_t count, capacity;
  bool failed;
} Collected;

static MlirWalkResult collect(MlirOperation op, void *userData) {
  Collected *c = userData;
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  if (!mlirStringRefEqual(name, mlirStringRefCreateFromCString(
                                    "dtensor.redistribute")))
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

static bool runLowerRedistribute(MlirOperation root,
                                 const DtPassOptions *options) {
  DtensorPlanOptions planOptions;
  dtensorPlanOptionsInit(&planOptions);
  if (!strcmp(dtPassOptionsGet(options, "strategy"), "greedy"))
    planOptions.strategy = DTENSOR_STRATEGY_GREEDY;
  if (!strcmp(dtPassOptionsGet(options, "objective"), "forward+backward"))
    planOptions.objective = DTENSOR_OBJECTIVE_FORWARD_BACKWARD;
  bool report = dtPassOptionsGetBool(options, "report");
  Collected found = {NULL, 0, 0, false};
  mlirOperationWalk(root, collect, &found, MlirWalkPostOrder);
  DtensorPlanner *planner = dtensorPlannerCreate(&planOptions);
  bool ok = !found.failed && planner;
  if (!ok)
    mlirEmitError(mlirOperationGetLocation(root),
                  "dtensor-lower-redistribute: out of memory");
  /* Every redistribute is tried, so one run reports all that fail. */
  if (ok)
    for (size_t i = 0; i < found.count; ++i)
      ok = lowerOne(found.ops[i], planner, report) && ok;
  dtensorPlannerDestroy(planner);
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
};

const DtPassDef dtLowerRedistributePass = {
    .info = {"dtensor-lower-redistribute",
             "Replace each per-device dtensor.redistribute by the "
             "collectives of its minimum-cost plan",
             (int)(sizeof(kOptions) / sizeof(kOptions[0])), kOptions},
    .verifyFirst = true,
    .run = runLowerRedistribute,
};
