/* dtensor-inits-to-inputs: on tensors, before elementwise fusion, a
 * linalg.generic whose loops are all parallel and whose body reads an init
 * (outs) operand takes that tensor as an input instead, and writes into a
 * tensor.empty; the program means the same before and after.
 *
 * Why: MLIR's linalg-fuse-elementwise-ops (LLVM 22) fuses such a producer
 * into a consumer with more loops, e.g. p[i] = init[i] + d[i] broadcast
 * into c[i, j] = p[i], as one op that keeps p as a result indexed by i
 * alone, so p[i] is computed into init's buffer once per j: init[i] + 4
 * d[i] for 4 columns instead of init[i] + d[i]. A program that adds into a
 * filled init elementwise (an accumulated gradient, a residual written into
 * its input) was silently wrong after dtensor-to-llvm. With the init read
 * as an input, fusion has nothing to accumulate into. Upstream's
 * MoveInitOperandsToInput pattern does the same; it is not a pass. */
#include "Lower/RuntimeCall.h"
#include "PassDef.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Linalg.h"
#include "mlir-c/Dialect/Tensor.h"

#include <stdlib.h>
#include <string.h>

#define MAX_OPERANDS 64

static bool allParallel(MlirOperation op) {
  MlirAttribute iters = dtGetAttr(op, "iterator_types");
  if (mlirAttributeIsNull(iters) || !mlirAttributeIsAArray(iters))
    return false;
  for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(iters); ++i) {
    char text[64];
    dtAttributePrint(mlirArrayAttrGetElement(iters, i), text, sizeof(text));
    if (!strstr(text, "parallel"))
      return false;
  }
  return true;
}

/* Whether `op` reads one of its inits (static shapes only: the
 * tensor.empty that replaces it needs no sizes). */
static bool readsInit(MlirOperation op, int numIns, int numOuts) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  bool reads = false;
  for (int k = 0; k < numOuts; ++k) {
    MlirValue arg = mlirBlockGetArgument(body, numIns + k);
    MlirType t = mlirValueGetType(mlirOperationGetOperand(op, numIns + k));
    if (!mlirOpOperandIsNull(mlirValueGetFirstUse(arg)) &&
        mlirTypeIsARankedTensor(t) && mlirShapedTypeHasStaticShape(t))
      reads = true;
  }
  return reads;
}

static MlirWalkResult collect(MlirOperation op, void *userData) {
  if (!dtIsOp(op, "linalg.generic") || !allParallel(op))
    return MlirWalkResultAdvance;
  int numOuts = (int)mlirOperationGetNumResults(op);
  int numIns = (int)mlirOperationGetNumOperands(op) - numOuts;
  if (numOuts > 0 && numIns + 2 * numOuts <= MAX_OPERANDS &&
      readsInit(op, numIns, numOuts) && !dtOpListPush(userData, op))
    return MlirWalkResultInterrupt;
  return MlirWalkResultAdvance;
}

/* Rebuilds `op` with each init its body reads as an extra input. */
static void moveInits(DtRtBuilder *b, MlirOperation op) {
  int numOuts = (int)mlirOperationGetNumResults(op);
  int numIns = (int)mlirOperationGetNumOperands(op) - numOuts;
  MlirLocation loc = mlirOperationGetLocation(op);
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  MlirAttribute maps = dtGetAttr(op, "indexing_maps");
  MlirValue operands[MAX_OPERANDS];
  MlirAttribute newMaps[MAX_OPERANDS];
  int n = 0;
  for (int i = 0; i < numIns; ++i) {
    operands[n] = mlirOperationGetOperand(op, i);
    newMaps[n++] = mlirArrayAttrGetElement(maps, i);
  }
  /* Each read init: an input (its block argument goes after the inputs),
   * and a tensor.empty as the output. */
  MlirValue outs[MAX_OPERANDS];
  for (int k = 0; k < numOuts; ++k) {
    MlirValue init = mlirOperationGetOperand(op, numIns + k);
    MlirType type = mlirValueGetType(init);
    MlirValue arg = mlirBlockGetArgument(body, n + k);
    outs[k] = init;
    if (mlirOpOperandIsNull(mlirValueGetFirstUse(arg)) ||
        !mlirShapedTypeHasStaticShape(type))
      continue;
    MlirValue in = mlirBlockInsertArgument(body, n, mlirValueGetType(arg),
                                           mlirValueGetLocation(arg));
    mlirValueReplaceAllUsesOfWith(arg, in);
    operands[n] = init;
    newMaps[n++] = mlirArrayAttrGetElement(maps, numIns + k);
    outs[k] = mlirOperationGetResult(
        dtRtBuild(b, "tensor.empty", loc, 0, NULL, 1, &type, 0, NULL, op), 0);
  }
  int numNewIns = n;
  for (int k = 0; k < numOuts; ++k) {
    operands[n] = outs[k];
    newMaps[n++] = mlirArrayAttrGetElement(maps, numIns + k);
  }
  dtGenericRebuild(op, n, operands, newMaps, numNewIns);
}

MlirOperation dtGenericRebuild(MlirOperation op, int n,
                               const MlirValue *operands,
                               const MlirAttribute *maps, int numIns) {
  MlirContext ctx = mlirOperationGetContext(op);
  int numOuts = (int)mlirOperationGetNumResults(op);
  MlirType results[MAX_OPERANDS];
  MlirNamedAttribute attrs[MAX_OPERANDS];
  int numAttrs = 0;
  for (int k = 0; k < numOuts && k < MAX_OPERANDS; ++k)
    results[k] = mlirValueGetType(mlirOperationGetResult(op, k));
  for (intptr_t a = 0;
       a < mlirOperationGetNumAttributes(op) && numAttrs < MAX_OPERANDS - 2;
       ++a) {
    MlirNamedAttribute na = mlirOperationGetAttribute(op, a);
    MlirStringRef name = mlirIdentifierStr(na.name);
    if ((name.length == 13 && !memcmp(name.data, "indexing_maps", 13)) ||
        (name.length == 19 && !memcmp(name.data, "operandSegmentSizes", 19)))
      continue;
    attrs[numAttrs++] = na;
  }
  int32_t segments[2] = {numIns, numOuts};
  attrs[numAttrs++] = dtNamedAttr(ctx, "operandSegmentSizes",
                                  mlirDenseI32ArrayGet(ctx, 2, segments));
  attrs[numAttrs++] =
      dtNamedAttr(ctx, "indexing_maps", mlirArrayAttrGet(ctx, n, maps));
  MlirOperationState st =
      mlirOperationStateGet(mlirStringRefCreateFromCString("linalg.generic"),
                            mlirOperationGetLocation(op));
  mlirOperationStateAddOperands(&st, n, operands);
  mlirOperationStateAddResults(&st, numOuts, results);
  mlirOperationStateAddAttributes(&st, numAttrs, attrs);
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  MlirRegion region = mlirRegionCreate();
  mlirBlockDetach(body);
  mlirRegionAppendOwnedBlock(region, body);
  mlirOperationStateAddOwnedRegions(&st, 1, &region);
  MlirOperation generic = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(op), op, generic);
  for (int k = 0; k < numOuts; ++k)
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, k),
                                  mlirOperationGetResult(generic, k));
  mlirOperationDestroy(op);
  return generic;
}

static bool runInitsToInputs(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  DtOpList found = {NULL, 0, 0};
  mlirOperationWalk(root, collect, &found, MlirWalkPreOrder);
  DtRtBuilder b = dtRtBuilderBegin(root);
  for (size_t i = 0; i < found.count; ++i)
    moveInits(&b, found.ops[i]);
  dtRtBuilderEnd(&b);
  free(found.ops);
  return true;
}

const DtPassDef dtInitsToInputsPass = {
    .info = {"dtensor-inits-to-inputs",
             "An all-parallel linalg.generic that reads its init takes it "
             "as an input and writes into a tensor.empty (before elementwise "
             "fusion, which would otherwise accumulate into the init)",
             0, NULL},
    .verifyFirst = false,
    .run = runInitsToInputs,
    .numDependentDialects = 2,
    .dependentDialects = {mlirGetDialectHandle__tensor__,
                          mlirGetDialectHandle__linalg__},
};
