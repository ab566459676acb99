/* dtensor-reassociate-reductions: the floating-point sums and products a
 * linalg.generic reduces into its outputs get arith's `reassoc` flag, so
 * that LLVM may reorder them and vectorize the loop (in program order a
 * float sum is a chain of dependent adds, one element per cycle at best).
 * A reduction is an output whose indexing map lacks a loop; its combiner
 * is the arith.addf or arith.mulf of the output's block argument that the
 * body yields. Results may differ from the sequential order in the last
 * bits, as BLAS's and numpy's sums do; integer and max/min reductions are
 * exact in any order and are left alone. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Util.h"

#include "mlir-c/AffineMap.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/Linalg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MlirWalkResult collect(MlirOperation op, void *userData) {
  if (dtIsOp(op, "linalg.generic") && !dtOpListPush(userData, op))
    return MlirWalkResultInterrupt;
  return MlirWalkResultAdvance;
}

/* Adds `reassoc` to `op`'s fastmath flags. */
static void addReassoc(MlirOperation op) {
  MlirContext ctx = mlirOperationGetContext(op);
  MlirAttribute old = dtGetAttr(op, "fastmath");
  char flags[200] = "reassoc";
  if (!mlirAttributeIsNull(old)) {
    char printed[160]; /* #arith.fastmath<a,b> */
    if (dtAttributePrint(old, printed, sizeof(printed)) >= sizeof(printed))
      return;
    char *open = strchr(printed, '<'), *close = strrchr(printed, '>');
    if (!open || !close || close < open)
      return;
    *close = '\0';
    if (strstr(open + 1, "reassoc") || strstr(open + 1, "fast"))
      return;
    if (strcmp(open + 1, "none"))
      snprintf(flags, sizeof(flags), "%s,reassoc", open + 1);
  }
  char text[256];
  snprintf(text, sizeof(text), "#arith.fastmath<%s>", flags);
  MlirAttribute attr =
      mlirAttributeParseGet(ctx, mlirStringRefCreateFromCString(text));
  if (!mlirAttributeIsNull(attr))
    mlirOperationSetAttributeByName(
        op, mlirStringRefCreateFromCString("fastmath"), attr);
}

MlirOperation dtReductionCombiner(MlirOperation op, int numInputs, int o,
                                  MlirValue *outAcc) {
  MlirOperation none = {NULL};
  if (mlirOperationGetNumRegions(op) < 1)
    return none;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (mlirBlockIsNull(body) ||
      mlirBlockGetNumArguments(body) <= (intptr_t)numInputs + o)
    return none;
  MlirOperation yield = mlirBlockGetTerminator(body);
  if (mlirOperationIsNull(yield) || mlirOperationGetNumOperands(yield) <= o)
    return none;
  MlirValue yielded = mlirOperationGetOperand(yield, o);
  if (!mlirValueIsAOpResult(yielded))
    return none;
  MlirOperation combiner = mlirOpResultGetOwner(yielded);
  MlirValue acc = mlirBlockGetArgument(body, numInputs + o);
  if (mlirOperationGetNumOperands(combiner) != 2 ||
      !(mlirValueEqual(mlirOperationGetOperand(combiner, 0), acc) ||
        mlirValueEqual(mlirOperationGetOperand(combiner, 1), acc)))
    return none;
  *outAcc = acc;
  return combiner;
}

static void reassociate(MlirOperation op) {
  MlirAttribute segments = dtGetAttr(op, "operandSegmentSizes");
  MlirAttribute maps = mlirLinalgGetIndexingMapsAttribute(op);
  if (mlirAttributeIsNull(segments) || mlirAttributeIsNull(maps) ||
      mlirDenseArrayGetNumElements(segments) != 2)
    return;
  int inputs = mlirDenseI32ArrayGetElement(segments, 0),
      outputs = mlirDenseI32ArrayGetElement(segments, 1);
  for (int o = 0; o < outputs; ++o) {
    MlirAffineMap map =
        mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, inputs + o));
    if (mlirAffineMapGetNumResults(map) >= mlirAffineMapGetNumDims(map))
      continue; /* every loop in the output: no reduction into it */
    MlirValue acc;
    MlirOperation combiner = dtReductionCombiner(op, inputs, o, &acc);
    if (!mlirOperationIsNull(combiner) &&
        (dtIsOp(combiner, "arith.addf") || dtIsOp(combiner, "arith.mulf")))
      addReassoc(combiner);
  }
}

static bool runReassociateReductions(MlirOperation root,
                                     const DtPassOptions *options) {
  (void)options;
  DtOpList found = {NULL, 0, 0};
  mlirOperationWalk(root, collect, &found, MlirWalkPreOrder);
  for (size_t i = 0; i < found.count; ++i)
    reassociate(found.ops[i]);
  free(found.ops);
  return true;
}

const DtPassDef dtReassociateReductionsPass = {
    .info = {"dtensor-reassociate-reductions",
             "Let the float sums and products linalg.generic reductions "
             "compute be reordered (arith fastmath reassoc on their "
             "combiner), so that they vectorize",
             0, NULL},
    .verifyFirst = false,
    .run = runReassociateReductions,
    .numDependentDialects = 1,
    .dependentDialects = {mlirGetDialectHandle__arith__},
};
