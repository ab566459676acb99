/* Recognizing the contractions the runtime runs on BLAS (Contraction.h):
 * indexing maps and the body are all that is read, so named, transposed,
 * batched and generic forms are one case. */
#include "Contraction.h"
#include "RuntimeCall.h"
#include "Util.h"

#include "dtensor-rt/Runtime.h"
#include "mlir-c/AffineExpr.h"
#include "mlir-c/AffineMap.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Linalg.h"

#include <string.h>

/* The (A, B, C) element types the runtime has an entry for. */
static bool runtimeTakes(const char *a, const char *b, const char *c) {
  static const char *const kTypes[][3] = {
#define DT_CONTRACT_ROW(x, y, z) {#x, #y, #z},
      DTRT_CONTRACT_TYPES(DT_CONTRACT_ROW)
#undef DT_CONTRACT_ROW
  };
  for (size_t i = 0; i < sizeof(kTypes) / sizeof(kTypes[0]); ++i)
    if (!strcmp(kTypes[i][0], a) && !strcmp(kTypes[i][1], b) &&
        !strcmp(kTypes[i][2], c))
      return true;
  return false;
}

static bool valueIs(MlirValue v, MlirValue w) { return mlirValueEqual(v, w); }

/* `v` is block argument `arg`, or an arith.extf of it. */
static bool readsArg(MlirValue v, MlirValue arg) {
  if (valueIs(v, arg))
    return true;
  if (!mlirValueIsAOpResult(v))
    return false;
  MlirOperation def = mlirOpResultGetOwner(v);
  return dtIsOp(def, "arith.extf") &&
         valueIs(mlirOperationGetOperand(def, 0), arg);
}

/* The body is exactly yield(out + a * b), with extf on a and b allowed. */
static bool isMulAddBody(MlirOperation op) {
  if (mlirOperationGetNumRegions(op) != 1)
    return false;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (mlirBlockIsNull(body) || mlirBlockGetNumArguments(body) != 3)
    return false;
  MlirValue a = mlirBlockGetArgument(body, 0),
            b = mlirBlockGetArgument(body, 1),
            c = mlirBlockGetArgument(body, 2);
  MlirValue product = {NULL}, sum = {NULL};
  for (MlirOperation o = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (dtIsOp(o, "arith.extf")) {
      MlirValue x = mlirOperationGetOperand(o, 0);
      if (!valueIs(x, a) && !valueIs(x, b))
        return false;
    } else if (dtIsOp(o, "arith.mulf") && !product.ptr) {
      MlirValue x = mlirOperationGetOperand(o, 0),
                y = mlirOperationGetOperand(o, 1);
      if (!((readsArg(x, a) && readsArg(y, b)) ||
            (readsArg(x, b) && readsArg(y, a))))
        return false;
      product = mlirOperationGetResult(o, 0);
    } else if (dtIsOp(o, "arith.addf") && product.ptr && !sum.ptr) {
      MlirValue x = mlirOperationGetOperand(o, 0),
                y = mlirOperationGetOperand(o, 1);
      if (!((valueIs(x, c) && valueIs(y, product)) ||
            (valueIs(x, product) && valueIs(y, c))))
        return false;
      sum = mlirOperationGetResult(o, 0);
    } else if (dtIsOp(o, "linalg.yield")) {
      return sum.ptr && mlirOperationGetNumOperands(o) == 1 &&
             valueIs(mlirOperationGetOperand(o, 0), sum);
    } else {
      return false;
    }
  }
  return false;
}

/* The loops each operand's dims read, flattened after the loop count into
 * `out` (1 + the ranks); false when a map is not a projected permutation
 * or there are more loops than the runtime takes. */
static bool readMaps(MlirOperation op, int64_t *out, int *outCount) {
  MlirAttribute maps = mlirLinalgGetIndexingMapsAttribute(op);
  if (mlirAttributeIsNull(maps) || mlirArrayAttrGetNumElements(maps) != 3)
    return false;
  int n = 1;
  for (intptr_t i = 0; i < 3; ++i) {
    MlirAffineMap map =
        mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, i));
    intptr_t loops = mlirAffineMapGetNumDims(map);
    if (loops > DT_CONTRACTION_MAX_LOOPS || mlirAffineMapGetNumSymbols(map))
      return false;
    out[0] = loops;
    for (intptr_t r = 0; r < mlirAffineMapGetNumResults(map); ++r) {
      MlirAffineExpr e = mlirAffineMapGetResult(map, r);
      if (!mlirAffineExprIsADim(e) || n >= DT_CONTRACTION_MAPS)
        return false;
      out[n++] = mlirAffineDimExprGetPosition(e);
    }
  }
  *outCount = n;
  return true;
}

/* The value a fill writes: linalg.fill's scalar, or what a linalg.generic
 * with one output and no tensor input yields for every element (its
 * scalar input, or a value from outside: linalg.fill generalized, as the
 * GPU target's linalg-generalize-named-ops and fusion leave it); null
 * otherwise. */
static MlirValue fillValue(MlirOperation op) {
  MlirValue none = {NULL};
  if (dtIsOp(op, "linalg.fill"))
    return mlirOperationGetNumOperands(op) == 2 ? mlirOperationGetOperand(op, 0)
                                                : none;
  intptr_t n = mlirOperationGetNumOperands(op);
  if (!dtIsOp(op, "linalg.generic") || n < 1 || n > 2 ||
      (n == 2 &&
       mlirTypeIsAShaped(mlirValueGetType(mlirOperationGetOperand(op, 0)))))
    return none;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (mlirBlockIsNull(body))
    return none;
  MlirOperation yield = mlirBlockGetFirstOperation(body);
  if (!dtIsOp(yield, "linalg.yield") || mlirOperationGetNumOperands(yield) != 1)
    return none;
  MlirValue v = mlirOperationGetOperand(yield, 0);
  if (n == 2 && mlirValueEqual(v, mlirBlockGetArgument(body, 0)))
    return mlirOperationGetOperand(op, 0);
  return mlirValueIsAOpResult(v) &&
                 !mlirOperationEqual(
                     mlirBlockGetParentOperation(
                         mlirOperationGetBlock(mlirOpResultGetOwner(v))),
                     op)
             ? v
             : none;
}

MlirValue dtZeroFillValue(MlirOperation fill) {
  MlirValue none = {NULL};
  if (mlirOperationIsNull(fill))
    return none;
  MlirValue v = fillValue(fill);
  if (mlirValueIsNull(v) || !mlirValueIsAOpResult(v) ||
      !dtIsOp(mlirOpResultGetOwner(v), "arith.constant"))
    return none;
  MlirAttribute a = dtGetAttr(mlirOpResultGetOwner(v), "value");
  if (mlirAttributeIsNull(a) || !mlirAttributeIsAFloat(a) ||
      mlirFloatAttrGetValueDouble(a) != 0.0)
    return none;
  return v;
}

MlirValue dtZeroFillOutput(MlirOperation fill) {
  MlirValue none = {NULL};
  return mlirValueIsNull(dtZeroFillValue(fill))
             ? none
             : mlirOperationGetOperand(fill,
                                       mlirOperationGetNumOperands(fill) - 1);
}

bool dtIsZeroFill(MlirOperation fill) {
  return !mlirValueIsNull(dtZeroFillOutput(fill));
}

bool dtContractionMatchBlas(MlirOperation op, const char *names[3],
                            int64_t *maps, int *numMaps) {
  if (mlirOperationGetNumOperands(op) != 3 || !isMulAddBody(op))
    return false;
  for (int i = 0; i < 3; ++i) {
    MlirType t = mlirValueGetType(mlirOperationGetOperand(op, i));
    int64_t code;
    if (!mlirTypeIsAShaped(t) ||
        !(names[i] = dtRtTypeName(mlirShapedTypeGetElementType(t), &code)))
      return false;
  }
  return runtimeTakes(names[0], names[1], names[2]) &&
         readMaps(op, maps, numMaps);
}
