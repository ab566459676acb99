/* dtensor-widen-reductions: a sum or product that a linalg op reduces into
 * an f16 or bf16 output accumulates in f32 and is rounded once at the end,
 * as PyTorch and cuBLAS do. Accumulated in the output's own type, a sum of
 * 40 960 halves was 4 ulp off, and reassociation for vectorization
 * (dtensor-reassociate-reductions) made the rounding depend on the order
 * further. On tensors, before the elementwise ops become linalg:
 *
 *   %r = linalg.generic ... outs(%init : tensor<Sxf16>) {
 *     ^bb0(..., %x: f16, %acc: f16): %s = arith.addf %acc, %x ...
 *
 * becomes arith.extf of %init to f32, the op retyped to f32 (its output's
 * block argument and combiner; the combiner's other operand extended), and
 * arith.truncf of its result for its users. Only a reduction whose
 * accumulator feeds its combiner alone, and whose combiner is only
 * yielded, is widened; others keep their type. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Util.h"

#include "mlir-c/AffineMap.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/Linalg.h"

#include <stdlib.h>

static MlirWalkResult collect(MlirOperation op, void *userData) {
  if ((dtIsOp(op, "linalg.generic") || dtIsOp(op, "linalg.reduce")) &&
      !dtOpListPush(userData, op))
    return MlirWalkResultInterrupt;
  return MlirWalkResultAdvance;
}

static bool isHalf(MlirType t) {
  return mlirTypeIsAF16(t) || mlirTypeIsABF16(t);
}

/* One use only, by `user`. */
static bool onlyUsedBy(MlirValue v, MlirOperation user) {
  MlirOpOperand use = mlirValueGetFirstUse(v);
  return !mlirOpOperandIsNull(use) &&
         mlirOperationEqual(mlirOpOperandGetOwner(use), user) &&
         mlirOpOperandIsNull(mlirOpOperandGetNextUse(use));
}

/* `name` (arith.extf or arith.truncf) of `value` to `type`, before `at`. */
static MlirValue convert(const char *name, MlirValue value, MlirType type,
                         MlirOperation at) {
  MlirLocation loc = mlirOperationGetLocation(at);
  MlirOperationState state =
      mlirOperationStateGet(mlirStringRefCreateFromCString(name), loc);
  mlirOperationStateAddOperands(&state, 1, &value);
  mlirOperationStateAddResults(&state, 1, &type);
  MlirOperation op = mlirOperationCreate(&state);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(at), at, op);
  return mlirOperationGetResult(op, 0);
}

/* The ranked tensor `t` with element type `e`. */
static MlirType withElement(MlirType t, MlirType e) {
  int rank = (int)mlirShapedTypeGetRank(t);
  int64_t shape[16];
  for (int d = 0; d < rank && d < 16; ++d)
    shape[d] = mlirShapedTypeGetDimSize(t, d);
  return mlirRankedTensorTypeGet(rank, shape, e, mlirAttributeGetNull());
}

static void widen(MlirOperation op) {
  if (mlirOperationGetNumResults(op) != 1 ||
      mlirOperationGetNumRegions(op) != 1)
    return;
  MlirValue result = mlirOperationGetResult(op, 0);
  MlirType type = mlirValueGetType(result);
  if (!mlirTypeIsARankedTensor(type) ||
      !isHalf(mlirShapedTypeGetElementType(type)) ||
      mlirShapedTypeGetRank(type) > 16)
    return;
  intptr_t numOperands = mlirOperationGetNumOperands(op);
  MlirValue init = mlirOperationGetOperand(op, numOperands - 1);
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (mlirBlockIsNull(body) || mlirBlockGetNumArguments(body) != numOperands ||
      !mlirTypeEqual(mlirValueGetType(init), type))
    return;
  /* A reduction: some loop the output's map leaves out (linalg.reduce has
   * no maps: it always reduces). */
  MlirAttribute maps = mlirLinalgGetIndexingMapsAttribute(op);
  if (!mlirAttributeIsNull(maps)) {
    MlirAffineMap out = mlirAffineMapAttrGetValue(
        mlirArrayAttrGetElement(maps, numOperands - 1));
    if (mlirAffineMapGetNumResults(out) >= mlirAffineMapGetNumDims(out))
      return;
  }
  MlirValue acc = mlirBlockGetArgument(body, numOperands - 1);
  MlirOperation yield = mlirBlockGetTerminator(body);
  MlirValue yielded = mlirOperationGetOperand(yield, 0);
  if (!mlirValueIsAOpResult(yielded))
    return;
  MlirOperation combiner = mlirOpResultGetOwner(yielded);
  if (!(dtIsOp(combiner, "arith.addf") || dtIsOp(combiner, "arith.mulf")) ||
      !onlyUsedBy(acc, combiner) || !onlyUsedBy(yielded, yield))
    return;
  int accAt = mlirValueEqual(mlirOperationGetOperand(combiner, 0), acc)   ? 0
              : mlirValueEqual(mlirOperationGetOperand(combiner, 1), acc) ? 1
                                                                          : -1;
  MlirValue other = mlirOperationGetOperand(combiner, 1 - accAt);
  if (accAt < 0 || mlirValueEqual(other, acc) ||
      !mlirTypeEqual(mlirValueGetType(other), mlirValueGetType(acc)))
    return;
  MlirContext ctx = mlirOperationGetContext(op);
  MlirType f32 = mlirF32TypeGet(ctx), wide = withElement(type, f32);
  /* The op reads its init in f32 and produces f32. */
  mlirOperationSetOperand(op, numOperands - 1,
                          convert("arith.extf", init, wide, op));
  mlirValueSetType(result, wide);
  mlirBlockArgumentSetType(acc, f32);
  mlirOperationSetOperand(combiner, 1 - accAt,
                          convert("arith.extf", other, f32, combiner));
  mlirValueSetType(yielded, f32);
  /* Its users read it rounded once. */
  MlirOperation next = mlirOperationGetNextInBlock(op);
  MlirValue narrow = convert("arith.truncf", result, type, next);
  MlirOperation truncOp = mlirOpResultGetOwner(narrow);
  mlirValueReplaceAllUsesExcept(result, narrow, 1, &truncOp);
}

static bool runWidenReductions(MlirOperation root,
                               const DtPassOptions *options) {
  (void)options;
  DtOpList found = {NULL, 0, 0};
  mlirOperationWalk(root, collect, &found, MlirWalkPreOrder);
  for (size_t i = 0; i < found.count; ++i)
    widen(found.ops[i]);
  free(found.ops);
  return true;
}

const DtPassDef dtWidenReductionsPass = {
    .info = {"dtensor-widen-reductions",
             "Accumulate the sums and products linalg ops reduce into f16 "
             "or bf16 outputs in f32, rounded once at the end",
             0, NULL},
    .verifyFirst = false,
    .run = runWidenReductions,
    .numDependentDialects = 1,
    .dependentDialects = {mlirGetDialectHandle__arith__},
};
