/* dtensor-auto-shard: what dtensor-spmd does before propagation, then
 * dtensor-propagate with auto=true (PropagateAuto.c chooses;
 * docs/autoshard.md). Its output is the program
 * with a layout on every argument, result and value, ready for
 * dtensor-spmd, to be read, kept and edited. */
#include "Dialect/DialectInternal.h"
#include "Inspect/Memory.h"
#include "PassDef.h"
#include "Support/Support.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"

#include <stdint.h>
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

/* The layout value `v` has where it is made: an annotation's, an
 * argument's, or its maker's choice (null where none is known). */
static MlirAttribute layoutMade(MlirOperation func, MlirValue v) {
  if (mlirValueIsABlockArgument(v))
    return dtFuncArgAttr(func, false, mlirBlockArgumentGetArgNumber(v),
                         DT_ATTR_LAYOUT);
  MlirOperation maker = mlirOpResultGetOwner(v);
  MlirAttribute l = dtGetAttr(
      maker, dtIsOp(maker, DT_OP_ANNOTATE) ? "layout" : DT_ATTR_LAYOUT);
  if (mlirAttributeIsNull(l) || !mlirAttributeIsAArray(l))
    return l;
  intptr_t j = mlirOpResultGetResultNumber(v);
  return j < mlirArrayAttrGetNumElements(l) ? mlirArrayAttrGetElement(l, j)
                                            : mlirAttributeGetNull();
}

/* A value converted to a layout for its users: one conversion each. */
typedef struct Converted {
  const void *value, *layout;
  MlirValue annotated;
} Converted;

static bool sameConverted(const void *entry, const void *key) {
  const Converted *a = entry, *b = key;
  return a->value == b->value && a->layout == b->layout;
}

/* What `op` needs of its operands (its dtensor.operand_layouts) where that
 * is not what they are made in: a dtensor.redistribute to the needed
 * layout before the first such user, shared by the later ones. The results'
 * annotations alone left propagation free to choose the ops' strategies again,
 * and on a training step it chose others: reductions the plan keeps replicated
 * (their operand converted once for all its users) made Partial and
 * reduced at their annotations, 1231 us against the solver's 1003 on the
 * GPT Adam step on mesh 4. Values that only initialize follow their user
 * and get none. */
static void annotateNeeds(MlirOperation func, const DtIds *ids,
                          MlirOperation op, DtTable *converted) {
  MlirAttribute needs = dtGetAttr(op, "dtensor.operand_layouts");
  if (mlirAttributeIsNull(needs) || !mlirAttributeIsAArray(needs))
    return;
  intptr_t n = mlirOperationGetNumOperands(op);
  for (intptr_t i = 0; i < n && i < mlirArrayAttrGetNumElements(needs); ++i) {
    MlirAttribute need = mlirArrayAttrGetElement(needs, i);
    MlirValue v = mlirOperationGetOperand(op, i);
    if (!dtensorAttributeIsALayout(need) ||
        !mlirTypeIsATensor(mlirValueGetType(v)) ||
        (mlirValueIsAOpResult(v) && initializes(mlirOpResultGetOwner(v))))
      continue;
    MlirAttribute made = layoutMade(func, v);
    if (mlirAttributeIsNull(made) || mlirAttributeEqual(made, need))
      continue;
    Converted key = {v.ptr, need.ptr, {NULL}};
    uint64_t hash =
        dtHashMix(dtHashMix(43, (uintptr_t)v.ptr), (uintptr_t)need.ptr);
    Converted *hit = dtTableFind(converted, hash, sameConverted, &key);
    if (!hit) {
      /* An explicit conversion: a second annotation of the value would
       * be another claim on its own layout. */
      MlirNamedAttribute attrs[2] = {mlirNamedAttributeGet(ids->dst, need),
                                     mlirNamedAttributeGet(ids->src, made)};
      MlirType type = mlirValueGetType(v);
      MlirOperation a =
          dtOpCreateDetached(mlirOperationGetLocation(op), DT_OP_REDISTRIBUTE,
                             1, &v, 1, &type, 2, attrs);
      mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(op), op, a);
      hit = dtTableInsert(converted, hash);
      if (!hit)
        return;
      *hit = key;
      hit->annotated = mlirOperationGetResult(a, 0);
    }
    mlirOperationSetOperand(op, i, hit->annotated);
  }
}

/* The chosen layouts as annotations on the results of the entry block's
 * ops, and the conversions of operands the plan makes; propagation's
 * attributes removed. */
static void annotateChoices(MlirOperation func, const DtIds *ids) {
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  if (mlirBlockIsNull(entry))
    return;
  MlirOperation term = mlirBlockGetTerminator(entry);
  DtTable converted = dtTableInit(sizeof(Converted));
  for (MlirOperation op = mlirBlockGetFirstOperation(entry);
       !mlirOperationIsNull(op) && !mlirOperationEqual(op, term);) {
    MlirOperation next = mlirOperationGetNextInBlock(op);
    MlirAttribute layouts = dtGetAttr(op, DT_ATTR_LAYOUT);
    if (mlirAttributeIsNull(layouts) || initializes(op) ||
        dtIsOp(op, DT_OP_ANNOTATE) || dtIsOp(op, DT_OP_REDISTRIBUTE)) {
      op = next;
      continue;
    }
    annotateNeeds(func, ids, op, &converted);
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
  dtTableFree(&converted);
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
  bool ok = true, any = false, placed = false;
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       ok && !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    /* A mesh it declares takes the first function's place in the source,
     * so that what is said of it later (a calibration for another mesh)
     * is located in the user's file (an implicit module has none). */
    if (!placed && dtIsOp(op, "func.func")) {
      loc = mlirOperationGetLocation(op);
      placed = true;
    }
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

/* One solve: what dtensor-spmd does before propagation, then propagation
 * with auto=true and `memory` as the model's budget; the choices written
 * as annotations. */
static bool solveOnce(MlirOperation root, const DtPassOptions *options,
                      const char *memory) {
  char text[6 * DT_MAX_OPTION_VALUE + 128];
  snprintf(text, sizeof(text),
           "auto=true memory='%s' why=%s solver=%s time-limit='%s' "
           "calibration='%s' cost=%s layers=%s",
           memory, dtPassOptionsGet(options, "why"),
           dtPassOptionsGet(options, "solver"),
           dtPassOptionsGet(options, "time-limit"),
           dtPassOptionsGet(options, "calibration"),
           dtPassOptionsGet(options, "cost"),
           dtPassOptionsGet(options, "layers"));
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

static void forgetModelledPeaks(MlirOperation root) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f))
    mlirOperationRemoveAttributeByName(
        f, mlirStringRefCreateFromCString(DT_ATTR_AUTO_PEAK));
}

/* The most bytes by which a function of the plan `root`, compiled by
 * dtensor-spmd (on a copy), needs more than `budget` at its peak
 * (dtensor-report's count): <= 0 when every function fits. `*peakBytes`
 * and `*where` describe that function. False if the copy did not compile
 * (its errors reported). */
static bool compiledOvershoot(MlirOperation root, const DtPassOptions *options,
                              int64_t budget, int64_t *over, int64_t *peakBytes,
                              MlirLocation *where, int64_t *modelled) {
  /* The schedule of collectives stays within the budget too. */
  char text[DT_MAX_OPTION_VALUE + 64];
  snprintf(text, sizeof(text), "calibration='%s' memory=%lld",
           dtPassOptionsGet(options, "calibration"), (long long)budget);
  DtPassOptions spmd;
  if (!dtPassOptionsParse(&dtSpmdPass.info,
                          mlirStringRefCreateFromCString(text), &spmd, NULL))
    return false;
  spmd.context = options->context;
  MlirOperation copy = mlirOperationClone(root);
  bool ok = dtSpmdPass.run(copy, &spmd);
  DtMemoryPeak peak;
  MlirOperation f;
  *over = INT64_MIN;
  if (ok && dtMemoryLargestPeak(copy, &peak, &f)) {
    *over = peak.peakBytes - budget;
    *peakBytes = peak.peakBytes;
    MlirAttribute m = dtGetAttr(f, DT_ATTR_AUTO_PEAK);
    *modelled =
        mlirAttributeIsAInteger(m) ? mlirIntegerAttrGetValueInt(m) : budget;
    *where =
        mlirOperationGetLocation(mlirOperationIsNull(peak.at) ? f : peak.at);
  }
  mlirOperationDestroy(copy);
  return ok;
}

/* `root`'s top-level ops replaced by those of `from` (consumed). */
static void replaceBody(MlirOperation root, MlirOperation from) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirBlockGetFirstOperation(top))
    mlirOperationDestroy(op);
  MlirBlock src = mlirRegionGetFirstBlock(mlirOperationGetRegion(from, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(src);
       !mlirOperationIsNull(op); op = mlirBlockGetFirstOperation(src)) {
    mlirOperationRemoveFromParent(op);
    mlirBlockAppendOwnedOperation(top, op);
  }
  mlirOperationDestroy(from);
}

/* The budget, on every function planned under it (DT_ATTR_MEMORY). */
static void keepBudget(MlirOperation root, int64_t budget) {
  MlirContext ctx = mlirOperationGetContext(root);
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f))
    if (dtIsOp(f, "func.func") &&
        !mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0))))
      mlirOperationSetDiscardableAttributeByName(
          f, mlirStringRefCreateFromCString(DT_ATTR_MEMORY),
          mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), budget));
}

/* A retry's diagnostics are not the user's: a budget the model was given
 * that no layouts fit is a step of the search, said in its own words. */
static MlirLogicalResult swallowErrors(MlirDiagnostic d, void *userData) {
  (void)d;
  (void)userData;
  return mlirLogicalResultSuccess();
}

static bool solveQuietly(MlirOperation root, const DtPassOptions *options,
                         const char *memory) {
  MlirContext ctx = mlirOperationGetContext(root);
  MlirDiagnosticHandlerID handler =
      mlirContextAttachDiagnosticHandler(ctx, swallowErrors, NULL, NULL);
  bool ok = solveOnce(root, options, memory);
  mlirContextDetachDiagnosticHandler(ctx, handler);
  return ok;
}

/* Solves with tighter budgets until the compiled plan needs no more than
 * the given one: the plan's model estimates memory before partitioning
 * and may count some buffers short (a fill read as an input, not written
 * into, holds its bytes while its user runs), so its plan is compiled and
 * measured. Over the budget, the model's budget goes below the peak it
 * gave that plan by the excess; where no layouts fit that, halfway back
 * to the last budget that gave a plan; a few solves at most, and never a
 * plan over the budget in silence. */
enum { kMaxSolves = 5 };

static bool runAutoShard(MlirOperation root, const DtPassOptions *options) {
  if (!meshAsAsked(root, dtPassOptionsGet(options, "mesh")))
    return false;
  const char *memory = dtPassOptionsGet(options, "memory");
  int64_t budget = memory[0] ? dtByteCount(memory) : -1;
  if (budget < 0) {
    bool ok = solveOnce(root, options, memory);
    forgetModelledPeaks(root);
    return ok;
  }
  MlirOperation original = mlirOperationClone(root);
  /* `over`: the lowest model budget whose plan compiled over the budget
   * (its modelled peak); `none`: the highest one no layouts fit. */
  int64_t planned = budget, over = budget, none = 0;
  int64_t lastPeak = 0, lastModelled = 0;
  MlirLocation lastWhere = mlirOperationGetLocation(root);
  bool ok = false;
  for (int solve = 1;; ++solve) {
    char plannedText[32];
    snprintf(plannedText, sizeof(plannedText), "%lld", (long long)planned);
    int64_t excess = 0, peak = 0, modelled = planned;
    MlirLocation where = mlirOperationGetLocation(root);
    bool solved = solve == 1 ? solveOnce(root, options, memory)
                             : solveQuietly(root, options, plannedText);
    if (solved && !compiledOvershoot(root, options, budget, &excess, &peak,
                                     &where, &modelled))
      break;
    if (solve == 1 && !solved)
      break; /* its errors are the user's */
    if (solved) {
      lastPeak = peak;
      lastModelled = modelled;
      lastWhere = where;
      forgetModelledPeaks(root);
      if (excess <= 0) {
        ok = true;
        keepBudget(root, budget);
        break;
      }
      over = modelled < planned ? modelled : planned;
    } else {
      none = planned;
    }
    /* The next model budget: below the last plan's modelled peak by the
     * excess, or halfway to it from one no layouts fit. */
    int64_t next = solved ? over - excess : none + (over - none) / 2;
    if (next <= none)
      next = none + (over - none) / 2;
    if (solve == kMaxSolves || next <= none || next >= over) {
      char msg[2 * DT_MAX_OPTION_VALUE + 512];
      snprintf(msg, sizeof(msg),
               "dtensor-auto-shard: no plan found within memory=%s (%lld "
               "bytes): the plan the model fit in it needs %lld bytes per "
               "device compiled (the model counted %lld), and after %d solves "
               "with the model's budget lowered none compiled within it (no "
               "layouts fit a model's budget of %lld bytes); "
               "dtensor-report{memory=%s} on the plan names the largest values",
               memory, (long long)budget, (long long)lastPeak,
               (long long)lastModelled, solve, (long long)(none ? none : next),
               memory);
      mlirEmitError(lastWhere, msg);
      break;
    }
    bool verbose = dtPassOptionsGetBool(options, "cost") ||
                   dtPassOptionsGetBool(options, "why");
    if (verbose && solved)
      fprintf(stderr,
              "dtensor-auto-shard: the compiled plan needs %lld bytes per "
              "device, %lld over memory=%s: solving again with %lld for the "
              "model\n",
              (long long)peak, (long long)excess, memory, (long long)next);
    else if (verbose)
      fprintf(stderr,
              "dtensor-auto-shard: no layouts fit %lld bytes for the model: "
              "solving again with %lld\n",
              (long long)planned, (long long)next);
    planned = next;
    replaceBody(root, mlirOperationClone(original));
  }
  mlirOperationDestroy(original);
  return ok;
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
