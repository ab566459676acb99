/* dtensor-prepare-contractions: on tensors, before elementwise fusion and
 * bufferization, the contractions the runtime runs on BLAS are made ready
 * for it; the program means the same before and after.
 * - A linalg.generic contraction becomes a linalg.contract with the same
 *   maps (when linalg.contract takes them: every loop either in the
 *   output or in both inputs, one at least reduced): linalg's elementwise
 *   fusion folds an elementwise producer into a generic consumer, which
 *   would turn a GEMM into a loop nest BLAS cannot run, and leaves named
 *   ops alone.
 * - A contraction whose output starts as a zero linalg.fill gets a zero
 *   fill of its own, right before it. A fill shared by several
 *   contractions (what cse makes of a program, and of every partitioned
 *   one) bufferizes into one buffer copied for each user, so
 *   dtensor-lower-contractions would not see the zeros; with its own fill
 *   the contraction's buffer is filled just before it, and the BLAS call
 *   overwrites it instead (beta = 0), the fill dropped. */
#include "Contraction.h"
#include "PassDef.h"
#include "RuntimeCall.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Linalg.h"
#include "mlir-c/Dialect/Tensor.h"

#include <stdlib.h>

static MlirWalkResult collect(MlirOperation op, void *userData) {
  if (mlirLinalgIsAContractionOp(op) && mlirOperationGetNumResults(op) == 1 &&
      !dtOpListPush(userData, op))
    return MlirWalkResultInterrupt;
  return MlirWalkResultAdvance;
}

MlirOperation dtNamedLinalg(MlirContext ctx, const char *name, MlirLocation loc,
                            int numIns, const MlirValue *operands,
                            MlirType type, MlirAttribute maps,
                            MlirOperation before) {
  int32_t segments[2] = {numIns, 1};
  MlirNamedAttribute attrs[2] = {
      dtNamedAttr(ctx, "operandSegmentSizes",
                  mlirDenseI32ArrayGet(ctx, 2, segments)),
      dtNamedAttr(ctx, "indexing_maps", maps)};
  MlirOperationState st =
      mlirOperationStateGet(mlirStringRefCreateFromCString(name), loc);
  mlirOperationStateAddOperands(&st, numIns + 1, operands);
  if (!mlirTypeIsNull(type))
    mlirOperationStateAddResults(&st, 1, &type);
  mlirOperationStateAddAttributes(&st, mlirAttributeIsNull(maps) ? 1 : 2,
                                  attrs);
  MlirRegion body = mlirRegionCreate();
  mlirOperationStateAddOwnedRegions(&st, 1, &body);
  MlirOperation op = mlirOperationCreate(&st);
  mlirLinalgFillBuiltinNamedOpRegion(op);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before,
                                      op);
  return op;
}

/* The result of a new `tensor.empty` + zero `linalg.fill` like `fill`,
 * before `before`. */
static MlirValue freshFill(DtRtBuilder *b, MlirOperation fill,
                           MlirOperation before) {
  MlirLocation loc = mlirOperationGetLocation(fill);
  MlirType type = mlirValueGetType(mlirOperationGetResult(fill, 0));
  MlirValue empty = mlirOperationGetResult(
      dtRtBuild(b, "tensor.empty", loc, 0, NULL, 1, &type, 0, NULL, before), 0);
  MlirValue operands[2] = {dtZeroFillValue(fill), empty};
  return mlirOperationGetResult(dtNamedLinalg(b->ctx, "linalg.fill", loc, 1,
                                              operands, type,
                                              mlirAttributeGetNull(), before),
                                0);
}

/* linalg.contract takes these maps: every loop in the output or in both
 * inputs, and one loop at least in both inputs and not the output. */
static bool contractTakes(MlirOperation op, const int64_t *maps) {
  bool in[3][DT_CONTRACTION_MAX_LOOPS] = {{false}};
  int at = 1;
  for (int o = 0; o < 3; ++o) {
    intptr_t rank =
        mlirShapedTypeGetRank(mlirValueGetType(mlirOperationGetOperand(op, o)));
    for (intptr_t d = 0; d < rank; ++d)
      in[o][maps[at++]] = true;
  }
  bool reduced = false;
  for (int64_t l = 0; l < maps[0]; ++l) {
    bool both = in[0][l] && in[1][l];
    if (!in[2][l] && !both)
      return false;
    reduced |= both && !in[2][l];
  }
  return reduced;
}

/* `generic` as a linalg.contract with the same operands and maps. */
static MlirOperation toContract(MlirOperation generic) {
  MlirValue operands[3];
  for (int i = 0; i < 3; ++i)
    operands[i] = mlirOperationGetOperand(generic, i);
  MlirOperation contract =
      dtNamedLinalg(mlirOperationGetContext(generic), "linalg.contract",
                    mlirOperationGetLocation(generic), 2, operands,
                    mlirValueGetType(mlirOperationGetResult(generic, 0)),
                    dtGetAttr(generic, "indexing_maps"), generic);
  mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(generic, 0),
                                mlirOperationGetResult(contract, 0));
  mlirOperationDestroy(generic);
  return contract;
}

static bool runPrepareContractions(MlirOperation root,
                                   const DtPassOptions *options) {
  (void)options;
  DtOpList found = {NULL, 0, 0};
  mlirOperationWalk(root, collect, &found, MlirWalkPreOrder);
  DtRtBuilder b = dtRtBuilderBegin(root);
  for (size_t i = 0; i < found.count; ++i) {
    MlirOperation op = found.ops[i];
    const char *names[3];
    int64_t maps[DT_CONTRACTION_MAPS];
    int numMaps;
    MlirValue init = mlirOperationGetOperand(op, 2);
    if (!dtContractionMatchBlas(op, names, maps, &numMaps))
      continue;
    if (dtIsOp(op, "linalg.generic") && contractTakes(op, maps))
      op = toContract(op);
    if (!mlirValueIsAOpResult(init) ||
        !mlirShapedTypeHasStaticShape(mlirValueGetType(init)))
      continue;
    MlirOperation fill = mlirOpResultGetOwner(init);
    if (!dtIsZeroFill(fill) || !mlirTypeIsARankedTensor(mlirValueGetType(init)))
      continue;
    /* Already its own: the fill's only use, right before it. */
    MlirOpOperand use = mlirValueGetFirstUse(init);
    if (mlirOpOperandIsNull(mlirOpOperandGetNextUse(use)) &&
        mlirOperationEqual(mlirOperationGetNextInBlock(fill), op))
      continue;
    mlirOperationSetOperand(op, 2, freshFill(&b, fill, op));
    if (mlirOpOperandIsNull(mlirValueGetFirstUse(init)))
      mlirOperationDestroy(fill);
  }
  free(found.ops);
  dtRtBuilderEnd(&b);
  return true;
}

const DtPassDef dtPrepareContractionsPass = {
    .info = {"dtensor-prepare-contractions",
             "Give every BLAS contraction on tensors whose output starts as "
             "a zero fill a fill of its own right before it (so that "
             "dtensor-lower-contractions overwrites instead of adding)",
             0, NULL},
    .verifyFirst = false,
    .run = runPrepareContractions,
    .numDependentDialects = 2,
    .dependentDialects = {mlirGetDialectHandle__tensor__,
                          mlirGetDialectHandle__linalg__},
};
