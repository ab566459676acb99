/* dtensor-gpu-loop-order (the GPU target, before the parallel loops are
 * tiled and mapped): every scf.parallel gets its dims in reverse order, the
 * innermost first. convert-linalg-to-parallel-loops makes the loops in the
 * order of the tensor's dims, the last one contiguous in memory; tiling
 * (sizes in dim order) and gpu-map-parallel-loops (the first dim to
 * blockIdx.x / threadIdx.x) then give the contiguous dim the first tile
 * size and threadIdx.x, so that neighbouring threads of a warp read
 * neighbouring elements (coalesced), whatever the loop's rank. In the
 * order MLIR makes them, a 2-d loop put rows on threadIdx.x (each warp
 * reading 16 rows), and a 4-d one (attention's scores) tiled only its two
 * outer dims. */
#include "PassDef.h"
#include "Util.h"

#include "mlir-c/BuiltinTypes.h"

#include <stdlib.h>

static MlirWalkResult collect(MlirOperation op, void *userData) {
  DtOpList *loops = userData;
  if (dtIsOp(op, "scf.parallel") && !dtOpListPush(loops, op))
    return MlirWalkResultInterrupt;
  return MlirWalkResultAdvance;
}

/* Reverses the dims of one scf.parallel: its bounds and steps (three
 * segments of `n` operands, before any init values) and its induction
 * variables, which are replaced by new ones in reverse order. */
static void reverseLoop(MlirOperation loop) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(loop, 0));
  intptr_t n = mlirBlockGetNumArguments(body);
  if (n < 2)
    return;
  for (intptr_t segment = 0; segment < 3; ++segment)
    for (intptr_t i = 0, j = n - 1; i < j; ++i, --j) {
      MlirValue a = mlirOperationGetOperand(loop, segment * n + i);
      MlirValue b = mlirOperationGetOperand(loop, segment * n + j);
      mlirOperationSetOperand(loop, segment * n + i, b);
      mlirOperationSetOperand(loop, segment * n + j, a);
    }
  MlirType index = mlirIndexTypeGet(mlirOperationGetContext(loop));
  MlirLocation loc = mlirOperationGetLocation(loop);
  /* New arguments n..2n-1: dim k of the new order is old dim n-1-k. */
  for (intptr_t k = 0; k < n; ++k)
    mlirBlockAddArgument(body, index, loc);
  for (intptr_t k = 0; k < n; ++k)
    mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(body, n - 1 - k),
                                  mlirBlockGetArgument(body, n + k));
  for (intptr_t k = 0; k < n; ++k)
    mlirBlockEraseArgument(body, 0);
}

static bool runGpuLoopOrder(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  DtOpList loops = {0};
  mlirOperationWalk(root, collect, &loops, MlirWalkPreOrder);
  for (size_t i = 0; i < loops.count; ++i)
    reverseLoop(loops.ops[i]);
  free(loops.ops);
  return true;
}

const DtPassDef dtGpuLoopOrderPass = {
    .info = {"dtensor-gpu-loop-order",
             "Put each scf.parallel's innermost dim first, so that tiling "
             "and GPU mapping give the contiguous dim threadIdx.x (coalesced "
             "memory accesses)",
             0, NULL},
    .verifyFirst = false,
    .run = runGpuLoopOrder,
    .numDependentDialects = 0,
};
