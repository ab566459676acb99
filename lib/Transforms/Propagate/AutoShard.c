/* dtensor-auto-shard: what dtensor-spmd does before propagation, then
 * dtensor-propagate with auto=true (PropagateAuto.c chooses;
 * docs/autoshard.md). Its output is the program
 * with a layout on every argument, result and value, ready for
 * dtensor-spmd, to be read, kept and edited. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"

#include <stdio.h>
#include <string.h>

/* Values that only initialize take their user's layout: no annotation. */
static bool initializes(MlirOperation op) {
  return dtIsOp(op, "tensor.empty") || dtIsOp(op, "linalg.fill") ||
         dtIsOp(op, "arith.constant") || dtIsOp(op, "tensor.splat");
}

static const char *const kDecided[] = {DT_ATTR_LAYOUT,
                                       "dtensor.operand_layouts",
                                       "dtensor.loop_axes", "dtensor.why"};

static MlirWalkResult strip(MlirOperation op, void *userData) {
  (void)userData;
  if (dtIsOp(op, "func.func") || dtIsOp(op, DT_OP_ANNOTATE))
    return MlirWalkResultAdvance;
  for (size_t i = 0; i < sizeof(kDecided) / sizeof(kDecided[0]); ++i)
    mlirOperationRemoveAttributeByName(
        op, mlirStringRefCreateFromCString(kDecided[i]));
  return MlirWalkResultAdvance;
}

/* The chosen layouts as annotations on the results of the entry block's
 * ops; propagation's attributes removed. */
static void annotateChoices(MlirOperation func, const DtIds *ids) {
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  if (mlirBlockIsNull(entry))
    return;
  MlirOperation term = mlirBlockGetTerminator(entry);
  for (MlirOperation op = mlirBlockGetFirstOperation(entry);
       !mlirOperationIsNull(op) && !mlirOperationEqual(op, term);) {
    MlirOperation next = mlirOperationGetNextInBlock(op);
    MlirAttribute layouts = dtGetAttr(op, DT_ATTR_LAYOUT);
    if (mlirAttributeIsNull(layouts) || initializes(op) ||
        dtIsOp(op, DT_OP_ANNOTATE) || dtIsOp(op, DT_OP_REDISTRIBUTE)) {
      op = next;
      continue;
    }
    for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j) {
      MlirAttribute l = mlirAttributeIsAArray(layouts)
                            ? (j < mlirArrayAttrGetNumElements(layouts)
                                   ? mlirArrayAttrGetElement(layouts, j)
                                   : (MlirAttribute){NULL})
                            : layouts;
      MlirValue r = mlirOperationGetResult(op, j);
      if (mlirAttributeIsNull(l) || mlirAttributeIsAUnit(l) ||
          !mlirTypeIsATensor(mlirValueGetType(r)) ||
          mlirOpOperandIsNull(mlirValueGetFirstUse(r)))
        continue;
      MlirOperation a =
          dtBuildAnnotate(ids, next, mlirOperationGetLocation(op), r, l);
      mlirValueReplaceAllUsesExcept(r, mlirOperationGetResult(a, 0), 1, &a);
    }
    op = next;
  }
  mlirOperationWalk(func, strip, NULL, MlirWalkPreOrder);
}

/* mesh=SHAPE: a program that declares no dtensor.mesh gets one of that
 * shape (named "mesh"); a program that declares one must have as many
 * devices (and, for a SHAPE of several axes, that shape): never a mesh
 * other than the one asked for. */
static bool meshAsAsked(MlirOperation root, const char *text) {
  if (!text[0])
    return true;
  MlirLocation loc = mlirOperationGetLocation(root);
  DtensorDiag diag;
  DtensorMesh *asked = dtensorMeshParse(text, &diag);
  if (!asked) {
    char message[sizeof(diag.message) + 64];
    snprintf(message, sizeof(message), "mesh='%s': %s", text, diag.message);
    mlirEmitError(loc, message);
    return false;
  }
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  bool ok = true, any = false;
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       ok && !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (!dtIsOp(op, DT_OP_MESH))
      continue;
    any = true;
    DtensorMesh *have = dtensorMeshCreateFromOp(op, &diag);
    if (!have)
      continue; /* the verifier reports it */
    char haveText[256];
    dtensorMeshPrint(have, haveText, sizeof(haveText));
    bool sameCount =
        dtensorMeshGetNumDevices(have) == dtensorMeshGetNumDevices(asked);
    bool sameShape = dtensorMeshGetRank(asked) == 1 ||
                     dtensorMeshGetRank(asked) == dtensorMeshGetRank(have);
    for (int a = 0; sameShape && dtensorMeshGetRank(asked) > 1 &&
                    a < dtensorMeshGetRank(asked);
         ++a)
      sameShape =
          dtensorMeshGetAxisSize(asked, a) == dtensorMeshGetAxisSize(have, a);
    if (!sameCount || !sameShape) {
      char message[640];
      snprintf(message, sizeof(message),
               "the program's mesh is %s (%lld devices), not the mesh=%s "
               "asked for (%lld devices)",
               haveText, (long long)dtensorMeshGetNumDevices(have), text,
               (long long)dtensorMeshGetNumDevices(asked));
      mlirEmitError(mlirOperationGetLocation(op), message);
      ok = false;
    }
    dtensorMeshDestroy(have);
  }
  if (ok && !any)
    dtMeshOpCreate(root, loc, "mesh", asked);
  dtensorMeshDestroy(asked);
  return ok;
}

static bool runAutoShard(MlirOperation root, const DtPassOptions *options) {
  if (!meshAsAsked(root, dtPassOptionsGet(options, "mesh")))
    return false;
  char text[6 * DT_MAX_OPTION_VALUE + 128];
  snprintf(
      text, sizeof(text),
      "auto=true memory='%s' why=%s solver=%s time-limit='%s' "
      "calibration='%s' cost=%s layers=%s",
      dtPassOptionsGet(options, "memory"), dtPassOptionsGet(options, "why"),
      dtPassOptionsGet(options, "solver"),
      dtPassOptionsGet(options, "time-limit"),
      dtPassOptionsGet(options, "calibration"),
      dtPassOptionsGet(options, "cost"), dtPassOptionsGet(options, "layers"));
  DtPassOptions propagate;
  DtensorDiag diag;
  if (!dtPassOptionsParse(&dtPropagatePass.info,
                          mlirStringRefCreateFromCString(text), &propagate,
                          &diag)) {
    mlirEmitError(mlirOperationGetLocation(root), diag.message);
    return false;
  }
  propagate.context = options->context;
  propagate.decisions = options->decisions;
  if (!dtSpmdPrepare(root, &propagate) ||
      !dtPropagatePass.run(root, &propagate))
    return false;
  DtIds ids = dtIdsGet(mlirOperationGetContext(root));
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f))
    if (dtIsOp(f, "func.func") && mlirOperationGetNumRegions(f) == 1)
      annotateChoices(f, &ids);
  return true;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"mesh", DTENSOR_OPTION_STRING, "", NULL,
     "a program without a dtensor.mesh gets one of this shape (4, 2x4, "
     "'dp=2,tp=4'); one with a mesh must have as many devices"},
    {"memory", DTENSOR_OPTION_STRING, "", NULL,
     "the bytes each device may hold (512MB, 16GiB, 1048576); default "
     "unbounded"},
    {"why", DTENSOR_OPTION_BOOL, "false", NULL,
     "print per argument chosen its layout, bytes, conversions and the best "
     "plan with another layout; the step's modelled time and peak"},
    {"solver", DTENSOR_OPTION_ENUM, "default", "default|cbc|glpk",
     "the integer program solver (default: CBC when built, else GLPK)"},
    {"time-limit", DTENSOR_OPTION_STRING, "60", NULL,
     "the solver's seconds per function; then the best plan found and its "
     "gap"},
    {"calibration", DTENSOR_OPTION_STRING, "", NULL,
     "price collectives with this measured cost file (dtensor-run "
     "--calibrate)"},
    {"cost", DTENSOR_OPTION_BOOL, "false", NULL,
     "print each function's modelled cost and how it was chosen"},
    {"layers", DTENSOR_OPTION_ENUM, "alike", "alike|free",
     "repeated layers pick alike, solved once (alike), or each its own "
     "(free: the exact optimum, slower)"},
};

const DtPassDef dtAutoShardPass = {
    .info = {"dtensor-auto-shard",
             "Choose the layout of every argument, result and value without "
             "one on the function's mesh, minimizing the modelled step time "
             "within a memory budget (an integer program)",
             (int)(sizeof(kOptions) / sizeof(kOptions[0])), kOptions},
    .verifyFirst = true,
    .run = runAutoShard,
};
