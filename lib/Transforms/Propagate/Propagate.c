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
#include "Propagate.h"
#include "Decisions.h"
#include "PropagateRefine.h"
#include "PropagateRegions.h"
#include "PropagateStrategy.h"
#include "Solver/Ilp.h"
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

/* Decides `op` under its rule `r` (the body of decide). The deciders it
 * calls are never inlined: decideOp, dtPropDecideIf or dtPropDecideFor and
 * dtPropBlock are on the stack once per level of region nesting, their
 * buffers (several KB, more under ASan) must not be. */
static void decideOp(Prop *p, MlirOperation op, DtRule *r) {
  if (r->kind == DT_RULE_NONE)
    return;
  if (r->kind == DT_RULE_INVALID) {
    dtPropError(p, op, "%s", r->message);
    return;
  }
  Info *operands[DT_MAX_RULE_VALUES] = {NULL};
  Info *results[DT_MAX_RULE_VALUES] = {NULL};
  for (int i = 0; i < r->numOperands; ++i)
    if (r->operandIsTensor[i]) {
      operands[i] = dtPropInfo(p, mlirOperationGetOperand(op, i));
      if (operands[i] && !operands[i]->isTensor) {
        operands[i] = NULL;
        r->operandIsTensor[i] = false;
      }
    }
  for (int j = 0; j < r->numResults; ++j)
    if (r->resultIsTensor[j]) {
      results[j] = dtPropInfo(p, mlirOperationGetResult(op, j));
      if (results[j] && !results[j]->isTensor) {
        results[j] = NULL;
        r->resultIsTensor[j] = false;
      }
    }
  if ((dtIsOp(op, DT_OP_ANNOTATE) || dtIsOp(op, DT_OP_REDISTRIBUTE)) &&
      operands[0] && results[0]) {
    dtPropDecideExplicit(p, op, r, operands, results);
    return;
  }
  if (dtIsOp(op, "func.call")) {
    dtPropDecideCall(p, op, r, operands, results);
    return;
  }
  if (dtIsOp(op, "scf.for") && r->numResults <= DT_MAX_RULE_VALUES) {
    dtPropDecideFor(p, op, r, operands, results);
    return;
  }
  if (dtIsOp(op, "scf.if")) {
    dtPropDecideIf(p, op, r, operands, results);
    return;
  }
  if (dtIsOp(op, "scf.while")) {
    dtPropDecideWhile(p, op, r, operands, results);
    return;
  }
  switch (r->kind) {
  case DT_RULE_FACTORS:
    dtPropDecideFactors(p, op, r, operands, results);
    break;
  case DT_RULE_FREE:
    dtPropDecideFree(p, op, r, operands, results);
    break;
  default:
    dtPropDecideReplicated(p, op, r, operands, results);
    break;
  }
}

/* Decides one op; region ops (scf.for, scf.if) decide their bodies first,
 * so this recurses once per level of region nesting: the rule, several KB,
 * lives on the heap, and nesting deeper than DTENSOR_MAX_NESTING (the
 * parser's limit too) is an error at the op, never a stack overflow. */
void dtPropDecide(Prop *p, MlirOperation op) {
  if (dtPropIsDecided(p, op) || p->failed)
    return;
  if (!dtPropMarkDecided(p, op)) {
    dtPropError(p, op, "out of memory");
    return;
  }
  if (p->depth >= DTENSOR_MAX_NESTING) {
    dtPropError(p, op,
                "is nested in more than %d regions; dtensor-propagate "
                "handles at most that many levels",
                DTENSOR_MAX_NESTING);
    return;
  }
  DtRule *r = dtScratchTake(&p->scratch, sizeof(DtRule));
  if (!r) {
    dtPropError(p, op, "out of memory");
    return;
  }
  dtPropRule(p, op, r);
  ++p->depth;
  decideOp(p, op, r);
  --p->depth;
  dtScratchGive(&p->scratch, r);
}

/* Whether an op has something to go on: a known tensor operand or a result
 * with a demand. */
static bool ready(Prop *p, MlirOperation op) {
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    Info *in = dtPropInfo(p, mlirOperationGetOperand(op, i));
    if (in && in->isTensor && in->known)
      return true;
  }
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j) {
    Info *in = dtPropInfo(p, mlirOperationGetResult(op, j));
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
    dtensorShardingSpecPrint(&old, a, sizeof(a));
    dtensorShardingSpecPrint(want, b, sizeof(b));
    dtPropLocText(in->demandLoc, where, sizeof(where));
    dtPropError(p, at,
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
  if (!dtIsOp(op, DT_OP_ANNOTATE) || mlirOperationGetNumResults(op) != 1 ||
      mlirOperationGetNumOperands(op) != 1)
    return MlirWalkResultAdvance;
  Info *out = dtPropInfo(p, mlirOperationGetResult(op, 0));
  Info *in = dtPropInfo(p, mlirOperationGetOperand(op, 0));
  DtensorShardingSpec s;
  if (!out || !in || !out->isTensor ||
      !dtPropReadLayout(p, op, dtGetAttr(op, "layout"),
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
    Info *in = dtPropInfo(p, mlirBlockGetArgument(entry, i));
    if (!in || !in->isTensor)
      continue;
    in->origin = originOf(dtPropKeep(p, "argument %ld of @%.*s", (long)i,
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
    if (dtPropReadLayout(p, func, l, mlirFunctionTypeGetInput(fnType, i), what,
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
        if (dtPropReadLayout(p, func, l, mlirFunctionTypeGetResult(fnType, i),
                             what, &s)) {
          /* One value returned as several results wants several layouts:
           * each is a use, not a conflict; the first shapes the value. */
          Info *ri = dtPropInfo(p, mlirOperationGetOperand(op, i));
          if (ri && ri->isTensor && !ri->hasDemand)
            addDemand(p, op, ri, &s, 0);
        }
      }
    }
  }
}

/* Automatic sharding: the layout of the argument result `i` carries over
 * (a training step's parameters and state), when it has one. */
static bool tiedLayout(Prop *p, intptr_t i, DtensorShardingSpec *out) {
  if (p->tiedArg[i] < 0)
    return false;
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(p->func, 0));
  const Info *arg = dtPropInfo(p, mlirBlockGetArgument(entry, p->tiedArg[i]));
  if (!arg || !arg->known)
    return false;
  *out = specOf(arg);
  return true;
}

/* Automatic sharding: which results have no layout (chosen here), and
 * the argument of the same dtensor.name each carries over. */
static bool findAutoResults(Prop *p, MlirOperation func) {
  MlirType fnType = mlirTypeAttrGetValue(dtGetAttr(func, "function_type"));
  int n = (int)mlirFunctionTypeGetNumResults(fnType);
  int numArgs = (int)mlirFunctionTypeGetNumInputs(fnType);
  p->numResults = n;
  p->autoResult = calloc((size_t)n + 1, sizeof(bool));
  p->tiedArg = malloc(sizeof(int) * ((size_t)n + 1));
  if (!p->autoResult || !p->tiedArg)
    return false;
  for (int i = 0; i < n; ++i) {
    p->tiedArg[i] = -1;
    p->autoResult[i] =
        p->autoShard &&
        mlirAttributeIsNull(dtFuncArgAttr(func, true, i, DT_ATTR_LAYOUT)) &&
        mlirTypeIsATensor(mlirFunctionTypeGetResult(fnType, i));
    MlirAttribute name = dtFuncArgAttr(func, true, i, "dtensor.name");
    if (!p->autoResult[i] || mlirAttributeIsNull(name))
      continue;
    for (int a = 0; a < numArgs; ++a)
      if (mlirAttributeEqual(name,
                             dtFuncArgAttr(func, false, a, "dtensor.name")) &&
          mlirTypeEqual(mlirFunctionTypeGetInput(fnType, a),
                        mlirFunctionTypeGetResult(fnType, i)))
        p->tiedArg[i] = a;
  }
  return true;
}

/* The return: each operand must have the function result's layout (its
 * demand), or its own layout without Partial when the result has none; the
 * function's result attributes are completed. */
static void decideReturn(Prop *p, MlirOperation func, MlirOperation ret) {
  dtPropMarkDecided(p, ret);
  /* Any number of results (a training step returns every parameter and
   * its optimizer state). */
  intptr_t n = mlirOperationGetNumOperands(ret);
  MlirAttribute unit = mlirUnitAttrGet(p->ctx);
  DtensorShardingSpec *wants = malloc(sizeof(DtensorShardingSpec) * (size_t)n);
  MlirAttribute *opAttrs = malloc(sizeof(MlirAttribute) * (size_t)n);
  const DtensorShardingSpec **need =
      malloc(sizeof(DtensorShardingSpec *) * (size_t)n);
  if (n && (!wants || !opAttrs || !need)) {
    free(wants);
    free(opAttrs);
    free(need);
    dtPropError(p, ret, "out of memory");
    return;
  }
  bool any = false;
  for (intptr_t i = 0; i < n; ++i) {
    Info *in = dtPropInfo(p, mlirOperationGetOperand(ret, i));
    opAttrs[i] = unit;
    need[i] = NULL;
    if (!in || !in->isTensor)
      continue;
    any = true;
    DtensorShardingSpec want;
    bool chosen = i < p->numResults && p->autoResult[i];
    if (!chosen && dtPropFuncLayout(p, func, true, i, &want)) {
      if (!in->known)
        dtPropAdopt(p, in, &want, ret);
    } else if (chosen && tiedLayout(p, i, &want)) {
      if (!in->known)
        dtPropAdopt(p, in, &want, ret);
      mlirFuncSetResultAttr(func, i,
                            mlirStringRefCreateFromCString(DT_ATTR_LAYOUT),
                            dtPropLayoutAttr(p, &want));
    } else {
      if (!in->known) {
        DtensorShardingSpec replicated;
        initSpec(in->rank, &replicated);
        dtPropAdopt(p, in, &replicated, ret);
      }
      want = specOf(in);
      resolved(&want);
      mlirFuncSetResultAttr(func, i,
                            mlirStringRefCreateFromCString(DT_ATTR_LAYOUT),
                            dtPropLayoutAttr(p, &want));
    }
    opAttrs[i] = dtPropLayoutAttr(p, &want);
    wants[i] = want;
    need[i] = &wants[i];
    DtensorShardingSpec cur = specOf(in);
    if (in->known && !dtensorShardingSpecEqual(&cur, &want))
      dtPropDescribeRedistribution(p, ret, (int)i, in, &want, NULL);
  }
  if (any) {
    dtPropDecided(p, ret, DT_DECIDED_OPERANDS, dtPropArray(p, (int)n, opAttrs));
    dtPropNoteNeeds(p, ret, (int)n, need, false);
  }
  free(wants);
  free(opAttrs);
  free(need);
}

/* ---- the function walk --------------------------------------------------- */

static MlirWalkResult findAnnotationMesh(MlirOperation op, void *userData) {
  char *found = userData;
  DtensorLayoutAttrParts parts;
  if (dtIsOp(op, DT_OP_ANNOTATE) &&
      dtensorLayoutAttrGetParts(dtGetAttr(op, "layout"), &parts)) {
    snprintf(found, 256, "%s", parts.mesh);
    return MlirWalkResultInterrupt;
  }
  return MlirWalkResultAdvance;
}

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

/* Automatic sharding of a function without layouts: the module's mesh
 * (several: an error, the user names one by a layout; none: an error too,
 * never a program quietly left on one device). */
static bool onlyMesh(Prop *p, MlirOperation func, char found[256]) {
  MlirOperation module = mlirOperationGetParentOperation(func);
  if (mlirOperationIsNull(module))
    return false;
  int count = 0;
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (!dtIsOp(op, DT_OP_MESH))
      continue;
    MlirAttribute name = dtGetAttr(op, "sym_name");
    if (mlirAttributeIsNull(name) || !mlirAttributeIsAString(name))
      continue;
    if (count++ == 0) {
      MlirStringRef s = mlirStringAttrGetValue(name);
      snprintf(found, 256, "%.*s", (int)s.length, s.data);
    }
  }
  if (count > 1) {
    dtPropError(p, func,
                "automatic sharding: the module has %d meshes; put a layout "
                "on one argument of this function to say which it runs on",
                count);
    found[0] = 0;
    return false;
  }
  if (count == 0)
    dtPropError(p, func,
                "automatic sharding: the program declares no dtensor.mesh to "
                "split this function over; declare one, or give "
                "dtensor-auto-shard mesh=SHAPE (dtensor-run --auto and "
                "Python's auto= with n give their ranks)");
  return count == 1;
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
  if (!found[0] && p->autoShard && !onlyMesh(p, func, found))
    return false;
  if (!found[0])
    return false;
  snprintf(p->meshName, sizeof(p->meshName), "%s", found);
  p->meshId = mlirIdentifierGet(p->ctx, mlirStringRefCreateFromCString(found));
  p->meshOp = dtensorMeshOpLookup(func, mlirStringRefCreateFromCString(found));
  DtensorDiag diag;
  p->mesh = dtensorMeshCreateFromOp(p->meshOp, &diag);
  if (!p->mesh) {
    dtPropError(p, func, "mesh '@%s': %s", found, diag.message);
    return false;
  }
  if (p->calibration &&
      !dtensorCalibrationCheckMesh(p->calibration, p->mesh, &diag)) {
    dtPropError(p, mlirOperationIsNull(p->meshOp) ? func : p->meshOp,
                "mesh '@%s': %s", found, diag.message);
    return false;
  }
  return true;
}

/* Only values propagation gives a layout get an info. */
static void registerValue(Prop *p, MlirValue v) {
  if (dtPropFacts(p, mlirValueGetType(v))->isTensor)
    dtPropInfo(p, v);
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
  if (mlirOperationGetNumResults(op) == 1 && dtIsOp(op, DT_OP_ANNOTATE))
    seedAnnotation(op, p);
  return MlirWalkResultAdvance;
}

/* Decides the ops of a block in program order (a user decides what it
 * adopts backwards), then those that had nothing to go on. The terminator
 * is its owner's business. */
void dtPropBlock(Prop *p, MlirBlock block) {
  MlirOperation term = mlirBlockGetTerminator(block);
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op) && !p->failed;
       op = mlirOperationGetNextInBlock(op))
    if (!mlirOperationEqual(op, term) && ready(p, op))
      dtPropDecide(p, op);
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op) && !p->failed;
       op = mlirOperationGetNextInBlock(op))
    if (!mlirOperationEqual(op, term))
      dtPropDecide(p, op);
}

/* The first per-device op (a collective or mesh_index) under a function of
 * the global program, where nothing gives it a meaning. */
static MlirWalkResult findPerDevice(MlirOperation op, void *userData) {
  if (dtCollectiveOf(op) || dtIsOp(op, DT_OP_MESH_INDEX)) {
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
    dtPropError(p, func,
                "has several blocks; dtensor-propagate handles "
                "single-block functions");
    return;
  }
  char where[32];
  if (dtSignatureFind(func, true, where)) {
    dtPropError(p, func,
                "is already partitioned (%s has a dtensor.global_shape: "
                "its type is a device's block); dtensor-propagate and "
                "dtensor-partition take the global program",
                where);
    return;
  }
  MlirOperation perDevice = {NULL};
  mlirOperationWalk(func, findPerDevice, &perDevice, MlirWalkPreOrder);
  if (!mlirOperationIsNull(perDevice)) {
    dtPropError(
        p, perDevice,
        "works on a device's block, but this is the global "
        "program: state layouts here (dtensor.annotate, "
        "dtensor.redistribute) and dtensor-spmd inserts the collectives");
    return;
  }
  if (!dtPropSplitInits(func)) {
    dtPropError(p, func, "out of memory");
    return;
  }
  if (!findAutoResults(p, func)) {
    dtPropError(p, func, "out of memory");
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
  dtPropBlock(p, entry);
  if (!mlirOperationIsNull(ret) && !dtIsOp(ret, "func.return"))
    ret = (MlirOperation){NULL};
  if (!mlirOperationIsNull(ret) && !p->failed)
    decideReturn(p, func, ret);
  if (!p->failed)
    dtPropRefine(p, func);
  /* The results chosen with the arguments take their new layouts. */
  if (p->autoShard && !mlirOperationIsNull(ret) && !p->failed)
    decideReturn(p, func, ret);
  if (p->reportCost && !p->failed) {
    MlirStringRef name = mlirStringAttrGetValue(dtGetAttr(func, "sym_name"));
    fprintf(stderr, "dtensor-propagate: @%.*s: modelled cost %.6f us (%s)\n",
            (int)name.length, name.data, dtPropModelledCost(p),
            p->choiceSummary);
  }
  /* Arguments: record every layout (adopted ones, and replicated for the
   * unused). */
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry) && !p->failed; ++i) {
    Info *in = dtPropInfo(p, mlirBlockGetArgument(entry, i));
    if (!in || !in->isTensor || in->fixed)
      continue;
    DtensorShardingSpec cur = specOf(in);
    mlirFuncSetArgAttr(func, i, mlirStringRefCreateFromCString(DT_ATTR_LAYOUT),
                       dtPropLayoutAttr(p, &cur));
  }
}

bool dtPropFuncListed(void *const *list, int count, MlirOperation f) {
  for (int i = 0; i < count; ++i)
    if (list[i] == f.ptr)
      return true;
  return false;
}

bool dtPropHasBody(MlirOperation func) {
  return dtIsOp(func, "func.func") && mlirOperationGetNumRegions(func) == 1 &&
         !mlirBlockIsNull(
             mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0)));
}

/* Propagates one function with the shared state of `base`; false after an
 * error. A function is propagated once. */
bool dtPropFunction(const Prop *base, MlirOperation func) {
  Funcs *fs = base->funcs;
  if (dtPropFuncListed(fs->done, fs->numDone, func))
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
  p.calibration = base->calibration;
  p.attrs = dtTableInit(sizeof(AttrCache));
  p.layouts = dtLayoutCacheInit();
  p.arrays = dtTableInit(sizeof(ArrayEntry));
  p.rules = dtTableInit(sizeof(RuleEntry));
  p.costs = dtTableInit(sizeof(CostEntry));
  p.fits = dtTableInit(sizeof(FitEntry));
  p.needs = dtTableInit(sizeof(NeedEntry));
  p.choice = base->choice;
  p.autoShard = base->autoShard;
  p.autoWhy = base->autoWhy;
  p.layersAlike = base->layersAlike;
  p.memoryBudget = base->memoryBudget;
  p.solver = base->solver;
  p.timeLimit = base->timeLimit;
  p.reportCost = base->reportCost;
  p.values = dtTableInit(sizeof(ValueSlot));
  p.decided = dtTableInit(sizeof(const void *));
  p.func = func;
  propagateFunction(&p, func);
  bool ok = !p.failed;
  dtTableFree(&p.values);
  dtTableFree(&p.decided);
  free(p.infos);
  dtTableFree(&p.attrs);
  dtLayoutCacheFree(&p.layouts);
  dtTableFree(&p.arrays);
  dtTableFree(&p.rules);
  dtTableFree(&p.costs);
  dtTableFree(&p.fits);
  dtTableFree(&p.needs);
  free(p.needSpecs);
  free(p.costly);
  free(p.autoResult);
  free(p.tiedArg);
  dtScratchFree(&p.scratch);
  for (size_t i = 0; i < p.numArena; ++i)
    free(p.arena[i]);
  free(p.arena);
  dtensorMeshDestroy(p.mesh);
  --fs->numActive;
  return ok;
}

/* The names of every function some func.call calls. */
typedef struct Called {
  MlirStringRef *names;
  size_t count, capacity;
} Called;

static MlirWalkResult collectCallee(MlirOperation op, void *userData) {
  Called *c = userData;
  MlirAttribute ref = dtGetAttr(op, "callee");
  if (!dtIsOp(op, "func.call") || mlirAttributeIsNull(ref) ||
      !mlirAttributeIsAFlatSymbolRef(ref))
    return MlirWalkResultAdvance;
  MlirStringRef *name = dtArrayPush((void **)&c->names, &c->count, &c->capacity,
                                    sizeof(MlirStringRef));
  if (!name)
    return MlirWalkResultInterrupt;
  *name = mlirFlatSymbolRefAttrGetValue(ref);
  return MlirWalkResultAdvance;
}

static bool isCalled(const Called *c, MlirOperation func) {
  MlirAttribute name = dtGetAttr(func, "sym_name");
  if (mlirAttributeIsNull(name))
    return false;
  MlirStringRef n = mlirStringAttrGetValue(name);
  for (size_t i = 0; i < c->count; ++i)
    if (mlirStringRefEqual(c->names[i], n))
      return true;
  return false;
}

/* auto, memory, solver and time-limit. */
static bool readAutoOptions(MlirOperation root, const DtPassOptions *options,
                            Prop *p) {
  p->autoShard = dtPassOptionsGetBool(options, "auto");
  p->autoWhy = p->autoShard && p->why;
  p->layersAlike = !strcmp(dtPassOptionsGet(options, "layers"), "alike");
  const char *memory = dtPassOptionsGet(options, "memory");
  const char *solver = dtPassOptionsGet(options, "solver");
  p->solver = !strcmp(solver, "glpk")  ? DT_ILP_GLPK
              : !strcmp(solver, "cbc") ? DT_ILP_CBC
                                       : DT_ILP_DEFAULT;
  const char *limit = dtPassOptionsGet(options, "time-limit");
  p->timeLimit = dtRealNumber(limit, 0.01, 1e6);
  if (isnan(p->timeLimit)) {
    char msg[DT_MAX_OPTION_VALUE + 96];
    snprintf(msg, sizeof(msg),
             "dtensor-propagate: time-limit='%s' is not a number of seconds "
             "in [0.01, 1e6]",
             limit);
    mlirEmitError(mlirOperationGetLocation(root), msg);
    return false;
  }
  if (memory[0]) {
    if (!dtPassReadBudget(root, "dtensor-propagate", options, &p->memoryBudget))
      return false;
    if (!p->autoShard) {
      mlirEmitError(mlirOperationGetLocation(root),
                    "dtensor-propagate: memory= is a budget for automatic "
                    "sharding (auto=true)");
      return false;
    }
  }
  return true;
}

static bool runPropagate(MlirOperation root, const DtPassOptions *options) {
  Prop p;
  memset(&p, 0, sizeof(p));
  Funcs funcs;
  memset(&funcs, 0, sizeof(funcs));
  p.ctx = mlirOperationGetContext(root);
  p.strict = dtPassOptionsGetBool(options, "strict");
  p.why = dtPassOptionsGetBool(options, "why");
  p.reportCost = dtPassOptionsGetBool(options, "cost");
  const char *choice = dtPassOptionsGet(options, "choice");
  p.choice = !strcmp(choice, "order")       ? DT_CHOICE_ORDER
             : !strcmp(choice, "enumerate") ? DT_CHOICE_ENUMERATE
                                            : DT_CHOICE_WHOLE;
  p.registry = options->context;
  p.decisions = options->decisions;
  if (!readAutoOptions(root, options, &p))
    return false;
  DtensorCalibration *cal = NULL;
  if (!dtPassReadCalibration(root, "dtensor-propagate", options, &cal))
    return false;
  DtensorPlanOptions planOptions;
  dtensorPlanOptionsInit(&planOptions);
  planOptions.calibration = p.calibration = cal;
  p.planner = dtensorPlannerCreate(&planOptions);
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
      if (dtPropHasBody(op) && (pass == 1 || !isCalled(&called, op)))
        ok = dtPropFunction(&p, op);
  free(called.names);
  if (!mlirSymbolTableIsNull(funcs.symbols))
    mlirSymbolTableDestroy(funcs.symbols);
  free(funcs.done);
  free(funcs.active);
  dtensorPlannerDestroy(p.planner);
  dtensorCalibrationDestroy(cal);
  return ok;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"strict", DTENSOR_OPTION_BOOL, "false", NULL,
     "report an error wherever an implicit redistribution would be needed "
     "(veScale's no implicit resharding)"},
    {"why", DTENSOR_OPTION_BOOL, "false", NULL,
     "attach to every op a 'dtensor.why' string: where its layout came from "
     "and each redistribution it needs"},
    {"calibration", DTENSOR_OPTION_STRING, "", NULL,
     "choose by this measured cost file (dtensor-run --calibrate) instead "
     "of the mesh's link model"},
    {"choice", DTENSOR_OPTION_ENUM, "whole", "whole|order|enumerate",
     "how op strategies are chosen: whole (program order, then revisited "
     "around every conversion until no single change lowers the modelled "
     "cost; the optimum by an exact search on functions of at most 12 ops), "
     "order (program order only), enumerate (every combination, for "
     "checking; at most 12 ops)"},
    {"cost", DTENSOR_OPTION_BOOL, "false", NULL,
     "print each function's modelled communication cost and how its "
     "strategies were chosen"},
    {"auto", DTENSOR_OPTION_BOOL, "false", NULL,
     "automatic sharding: also choose the layout of every argument and "
     "result without one, by an integer program (docs/autoshard.md)"},
    {"memory", DTENSOR_OPTION_STRING, "", NULL,
     "with auto=true: the bytes each device may hold (512MB, 16GiB); "
     "default unbounded"},
    {"solver", DTENSOR_OPTION_ENUM, "default", "default|cbc|glpk",
     "with auto=true: the integer program solver (default: CBC when built)"},
    {"time-limit", DTENSOR_OPTION_STRING, "60", NULL,
     "with auto=true: the solver's seconds per function; then the best "
     "plan found and its gap"},
    {"layers", DTENSOR_OPTION_ENUM, "alike", "alike|free",
     "with auto=true: ops alike in kind, candidates and neighbours "
     "(repeated layers) pick alike, solved once (alike), or each its own "
     "(free: the exact optimum, slower)"},
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
