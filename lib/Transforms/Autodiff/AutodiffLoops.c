/* dtensor-autodiff's loops (Autodiff.h): an scf.for on the gradient's path
 * is unrolled, so that every iteration's values stay in the function (the
 * stored activations) and the reverse sweep visits them like any other
 * ops. Its bounds must be constants and its trip count at most
 * DT_AD_MAX_UNROLL (a model's layers, a pipeline's micro-batches). */
#include "Autodiff.h"
#include "Dialect/DialectInternal.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

#include <stdlib.h>

/* Old -> new values while iterations are copied. */
typedef struct Pair {
  MlirValue from, to;
} Pair;

typedef struct Remap {
  Pair *pairs;
  size_t count, capacity;
} Remap;

static bool remapAdd(Remap *m, MlirValue from, MlirValue to) {
  Pair *p =
      dtArrayPush((void **)&m->pairs, &m->count, &m->capacity, sizeof(Pair));
  if (p)
    *p = (Pair){from, to};
  return p != NULL;
}

static MlirValue remapGet(const Remap *m, MlirValue v) {
  for (size_t i = m->count; i-- > 0;)
    if (mlirValueEqual(m->pairs[i].from, v))
      return m->pairs[i].to;
  return v;
}

static MlirWalkResult remapNested(MlirOperation op, void *user) {
  const Remap *m = user;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i)
    mlirOperationSetOperand(op, i, remapGet(m, mlirOperationGetOperand(op, i)));
  return MlirWalkResultAdvance;
}

bool dtAdConstantIndex(MlirValue v, int64_t *out) {
  if (!mlirValueIsAOpResult(v))
    return false;
  MlirOperation def = mlirOpResultGetOwner(v);
  MlirAttribute value = dtGetAttr(def, "value");
  if (!dtIsOp(def, "arith.constant") || mlirAttributeIsNull(value) ||
      !mlirAttributeIsAInteger(value))
    return false;
  *out = mlirIntegerAttrGetValueInt(value);
  return true;
}

static MlirValue indexConstant(MlirOperation before, int64_t value) {
  MlirContext ctx = mlirOperationGetContext(before);
  MlirType index = mlirIndexTypeGet(ctx);
  MlirNamedAttribute attr =
      dtNamedAttr(ctx, "value", mlirIntegerAttrGet(index, value));
  MlirOperationState st =
      mlirOperationStateGet(mlirStringRefCreateFromCString("arith.constant"),
                            mlirOperationGetLocation(before));
  mlirOperationStateAddResults(&st, 1, &index);
  mlirOperationStateAddAttributes(&st, 1, &attr);
  MlirOperation c = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before, c);
  return mlirOperationGetResult(c, 0);
}

bool dtAdUnrollLoop(MlirOperation loop) {
  int64_t lb, ub, step;
  if (!dtAdConstantIndex(mlirOperationGetOperand(loop, 0), &lb) ||
      !dtAdConstantIndex(mlirOperationGetOperand(loop, 1), &ub) ||
      !dtAdConstantIndex(mlirOperationGetOperand(loop, 2), &step) ||
      step <= 0) {
    dtOpError(loop, "is on the gradient's path with bounds that are not "
                    "constants; dtensor-autodiff unrolls loops of constant "
                    "trip count to keep each iteration's values");
    return false;
  }
  int64_t trips = ub > lb ? (ub - lb + step - 1) / step : 0;
  if (trips > DT_AD_MAX_UNROLL) {
    dtOpError(loop,
              "runs %lld times; dtensor-autodiff unrolls loops of at "
              "most %d iterations to keep each one's values",
              (long long)trips, DT_AD_MAX_UNROLL);
    return false;
  }
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(loop, 0));
  intptr_t numCarried = mlirOperationGetNumResults(loop);
  MlirValue *carried = malloc(sizeof(MlirValue) * (size_t)(numCarried + 1));
  if (!carried)
    return false;
  for (intptr_t i = 0; i < numCarried; ++i)
    carried[i] = mlirOperationGetOperand(loop, 3 + i);
  MlirBlock block = mlirOperationGetBlock(loop);
  bool ok = true;
  for (int64_t k = 0; k < trips && ok; ++k) {
    Remap map = {NULL, 0, 0};
    ok = remapAdd(&map, mlirBlockGetArgument(body, 0),
                  indexConstant(loop, lb + k * step));
    for (intptr_t i = 0; i < numCarried && ok; ++i)
      ok = remapAdd(&map, mlirBlockGetArgument(body, 1 + i), carried[i]);
    MlirOperation yield = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body);
         ok && !mlirOperationEqual(op, yield);
         op = mlirOperationGetNextInBlock(op)) {
      MlirOperation copy = mlirOperationClone(op);
      mlirOperationWalk(copy, remapNested, &map, MlirWalkPreOrder);
      mlirBlockInsertOwnedOperationBefore(block, loop, copy);
      for (intptr_t r = 0; r < mlirOperationGetNumResults(op) && ok; ++r)
        ok = remapAdd(&map, mlirOperationGetResult(op, r),
                      mlirOperationGetResult(copy, r));
    }
    for (intptr_t i = 0; i < numCarried && ok; ++i)
      carried[i] = remapGet(&map, mlirOperationGetOperand(yield, i));
    free(map.pairs);
  }
  if (ok) {
    for (intptr_t i = 0; i < numCarried; ++i)
      mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(loop, i),
                                    carried[i]);
    mlirOperationDestroy(loop);
  }
  free(carried);
  return ok;
}
