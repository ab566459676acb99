/* dtensor-outer-parallel: of the scf.parallel loops affine-parallelize
 * found (dtensor-to-llvm{threads=true}), only those at the top of a
 * function body with at least kMinWork ops to run (the nest's iterations
 * times the ops each runs, as far as its bounds are constants) stay
 * parallel; the others become scf.for again. Each parallel loop is one
 * OpenMP region, whose start and end cost tens of microseconds on a busy
 * machine (workers that sleep at once after a loop, so that they leave
 * the cores to BLAS, must be woken: 50-80 us on the 2-core VM): one inside
 * another loop (a column sum's columns, inside its rows) is entered once
 * per outer iteration (a 512 x 128 column sum took 10 ms instead of
 * 20 us), and a small nest does not pay it back: a 512 x 512 add (about
 * 1.3 M ops, 36 us on one thread) took 104-120 us in 2 threads, while a
 * 512 x 512 tanh gelu (about 5 M ops) and a 4096 x 1024 layer norm + gelu
 * gain (the latter 1.8-2.1x in 2 threads). */
#include "PassDef.h"
#include "Util.h"

#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/SCF.h"

#include <stdint.h>
#include <stdlib.h>

enum { kMinWork = 1 << 22 };

/* The constant value of `v` (an arith.constant index), or -1. */
static int64_t constantOf(MlirValue v) {
  if (!mlirValueIsAOpResult(v))
    return -1;
  MlirOperation def = mlirOpResultGetOwner(v);
  if (!dtIsOp(def, "arith.constant"))
    return -1;
  MlirAttribute a = dtGetAttr(def, "value");
  return mlirAttributeIsAInteger(a) ? mlirIntegerAttrGetValueInt(a) : -1;
}

/* The trip count of loop `op` (scf.for or a one-dim scf.parallel: lower
 * bound, upper bound, step first), or -1 when its bounds are not
 * constants. */
static int64_t tripCount(MlirOperation op) {
  int64_t lo = constantOf(mlirOperationGetOperand(op, 0));
  int64_t hi = constantOf(mlirOperationGetOperand(op, 1));
  int64_t step = constantOf(mlirOperationGetOperand(op, 2));
  if (lo < 0 || hi < 0 || step <= 0)
    return -1;
  return hi > lo ? (hi - lo + step - 1) / step : 0;
}

/* The ops `block` runs: each op in it once, a loop's body as many times
 * as the loop's trip count (kMinWork, for a loop whose bounds are not
 * constants), at least 1. */
static int64_t work(MlirBlock block) {
  int64_t total = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (!dtIsOp(op, "scf.for") && !dtIsOp(op, "scf.parallel")) {
      ++total;
      continue;
    }
    int64_t trips = tripCount(op);
    if (trips < 0)
      trips = kMinWork;
    int64_t inner =
        work(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)));
    total += trips > INT64_MAX / 4 / inner ? INT64_MAX / 4 : trips * inner;
    if (total > INT64_MAX / 4)
      return INT64_MAX / 4;
  }
  return total > 0 ? total : 1;
}

static MlirWalkResult collect(MlirOperation op, void *userData) {
  DtOpList *nested = userData;
  if (!dtIsOp(op, "scf.parallel"))
    return MlirWalkResultAdvance;
  /* A single-dim parallel loop (affine-parallelize's): too small a nest
   * runs serially. */
  int64_t trips =
      mlirOperationGetNumOperands(op) == 3 ? tripCount(op) : (int64_t)-1;
  if (trips >= 0) {
    int64_t inner =
        work(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)));
    if (trips < kMinWork / inner + 1 && trips * inner < kMinWork) {
      dtOpListPush(nested, op);
      return MlirWalkResultAdvance;
    }
  }
  for (MlirOperation up = mlirOperationGetParentOperation(op);
       !mlirOperationIsNull(up) && !dtIsOp(up, "func.func");
       up = mlirOperationGetParentOperation(up))
    if (dtIsOp(up, "scf.for") || dtIsOp(up, "scf.parallel") ||
        dtIsOp(up, "scf.while")) {
      dtOpListPush(nested, op);
      break;
    }
  return MlirWalkResultAdvance;
}

/* The one-dim, reduction-free scf.parallel `op` as an scf.for with its
 * body; false (op untouched) for another form. */
static bool serialize(MlirOperation op) {
  /* Operands: lower bounds, upper bounds, steps, inits (none here). */
  if (mlirOperationGetNumOperands(op) != 3 ||
      mlirOperationGetNumResults(op) != 0)
    return false;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  MlirOperation reduce = mlirBlockGetTerminator(body);
  if (mlirBlockGetNumArguments(body) != 1 || mlirOperationIsNull(reduce) ||
      mlirOperationGetNumOperands(reduce) != 0)
    return false;
  MlirLocation loc = mlirOperationGetLocation(op);
  MlirContext ctx = mlirOperationGetContext(op);
  MlirType index = mlirIndexTypeGet(ctx);
  MlirBlock forBody = mlirBlockCreate(1, &index, &loc);
  MlirRegion region = mlirRegionCreate();
  mlirRegionAppendOwnedBlock(region, forBody);
  MlirValue bounds[3] = {mlirOperationGetOperand(op, 0),
                         mlirOperationGetOperand(op, 1),
                         mlirOperationGetOperand(op, 2)};
  MlirOperationState st =
      mlirOperationStateGet(mlirStringRefCreateFromCString("scf.for"), loc);
  mlirOperationStateAddOperands(&st, 3, bounds);
  mlirOperationStateAddOwnedRegions(&st, 1, &region);
  MlirOperation loop = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(op), op, loop);
  MlirOperationState yield =
      mlirOperationStateGet(mlirStringRefCreateFromCString("scf.yield"), loc);
  MlirOperation end = mlirOperationCreate(&yield);
  mlirBlockAppendOwnedOperation(forBody, end);
  for (MlirOperation o = mlirBlockGetFirstOperation(body);
       !mlirOperationEqual(o, reduce);) {
    MlirOperation next = mlirOperationGetNextInBlock(o);
    mlirOperationMoveBefore(o, end);
    o = next;
  }
  mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(body, 0),
                                mlirBlockGetArgument(forBody, 0));
  mlirOperationDestroy(op);
  return true;
}

static bool runOuterParallel(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  DtOpList nested = {NULL, 0, 0};
  mlirOperationWalk(root, collect, &nested, MlirWalkPostOrder);
  /* Post order: an inner loop before the loop around it. */
  for (size_t i = 0; i < nested.count; ++i)
    if (!serialize(nested.ops[i])) {
      mlirEmitError(mlirOperationGetLocation(nested.ops[i]),
                    "dtensor-outer-parallel: a nested scf.parallel of "
                    "several dims or with reductions (affine-parallelize "
                    "made none)");
      free(nested.ops);
      return false;
    }
  free(nested.ops);
  return true;
}

const DtPassDef dtOuterParallelPass = {
    .info = {"dtensor-outer-parallel",
             "Keep parallel only the scf.parallel loops at the top of a "
             "function body; make nested ones scf.for (one OpenMP region "
             "per nest, not per outer iteration)",
             0, NULL},
    .verifyFirst = false,
    .run = runOuterParallel,
    .numDependentDialects = 1,
    .dependentDialects = {mlirGetDialectHandle__scf__},
};
