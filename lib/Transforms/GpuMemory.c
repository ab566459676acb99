/* The GPU target's memory (dtensor-to-nvvm, docs/runtime.md).
 *
 * dtensor-gpu-memory, on a bufferized program before its loops are mapped
 * to the GPU: every buffer lives in device memory. memref.alloc and
 * memref.dealloc become gpu.alloc and gpu.dealloc, memref.copy becomes
 * gpu.memcpy, a memref.get_global (a constant) is copied to a device
 * buffer where it is read, and a public function copies its memref
 * arguments in at entry and its results out (to host buffers) at each
 * return, freeing the device copies it made there. Private functions pass
 * device buffers.
 *
 * dtensor-gpu-check-host, after the kernels are outlined: an op left in a
 * host function that reads or writes a buffer (a loop the mapping left on
 * the host, such as a reduction to a scalar, or a runtime call) would touch
 * device memory from the host; each is reported at its location and the
 * pass fails, instead of the program failing on the GPU at run time. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Table.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/GPU.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Creates `name` before `before` with `n` operands, at most one result and
 * the attributes given. */
static MlirOperation build(MlirOperation before, const char *name, int n,
                           const MlirValue *operands, MlirType *result,
                           int numAttrs, const MlirNamedAttribute *attrs) {
  MlirOperationState st = mlirOperationStateGet(
      mlirStringRefCreateFromCString(name), mlirOperationGetLocation(before));
  mlirOperationStateAddOperands(&st, n, operands);
  if (result)
    mlirOperationStateAddResults(&st, 1, result);
  mlirOperationStateAddAttributes(&st, numAttrs, attrs);
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before,
                                      op);
  return op;
}

/* gpu.alloc of `type` with the dynamic sizes `sizes` before `before`. */
static MlirValue deviceAlloc(MlirOperation before, MlirType type, int numSizes,
                             const MlirValue *sizes, int numSymbols) {
  MlirContext ctx = mlirOperationGetContext(before);
  int32_t segments[3] = {0, numSizes - numSymbols, numSymbols};
  MlirNamedAttribute attr = dtNamedAttr(ctx, "operandSegmentSizes",
                                        mlirDenseI32ArrayGet(ctx, 3, segments));
  return mlirOperationGetResult(
      build(before, "gpu.alloc", numSizes, sizes, &type, 1, &attr), 0);
}

static void copy(MlirOperation before, MlirValue dst, MlirValue src) {
  MlirValue operands[2] = {dst, src};
  build(before, "gpu.memcpy", 2, operands, NULL, 0, NULL);
}

static void deviceFree(MlirOperation before, MlirValue buffer) {
  build(before, "gpu.dealloc", 1, &buffer, NULL, 0, NULL);
}

/* The dims of `type` that are dynamic, as memref.dim values before
 * `before` (into `out`); their number. */
static int dynamicSizes(MlirOperation before, MlirValue buffer,
                        MlirValue *out) {
  MlirType type = mlirValueGetType(buffer);
  MlirContext ctx = mlirOperationGetContext(before);
  MlirType index = mlirIndexTypeGet(ctx);
  int n = 0;
  for (intptr_t d = 0; d < mlirShapedTypeGetRank(type); ++d) {
    if (!mlirShapedTypeIsDynamicDim(type, d))
      continue;
    MlirNamedAttribute value =
        dtNamedAttr(ctx, "value", mlirIntegerAttrGet(index, d));
    MlirValue dim = mlirOperationGetResult(
        build(before, "arith.constant", 0, NULL, &index, 1, &value), 0);
    MlirValue operands[2] = {buffer, dim};
    out[n++] = mlirOperationGetResult(
        build(before, "memref.dim", 2, operands, &index, 0, NULL), 0);
  }
  return n;
}

/* A device copy of `buffer` before `before` (a new device buffer of its
 * type, filled from it). */
static MlirValue deviceCopyOf(MlirOperation before, MlirValue buffer) {
  MlirValue sizes[16];
  int n = dynamicSizes(before, buffer, sizes);
  MlirValue d = deviceAlloc(before, mlirValueGetType(buffer), n, sizes, 0);
  copy(before, d, buffer);
  return d;
}

typedef struct Func {
  DtOpList allocs, deallocs, copies, globals, returns;
  bool failed;
} Func;

static MlirWalkResult collect(MlirOperation op, void *userData) {
  Func *f = userData;
  DtOpList *list = dtIsOp(op, "memref.alloc")        ? &f->allocs
                   : dtIsOp(op, "memref.dealloc")    ? &f->deallocs
                   : dtIsOp(op, "memref.copy")       ? &f->copies
                   : dtIsOp(op, "memref.get_global") ? &f->globals
                   : dtIsOp(op, "func.return")       ? &f->returns
                                                     : NULL;
  if (dtIsOp(op, "memref.alloca")) {
    dtOpError(op, "stack buffers are not supported by the GPU target yet");
    f->failed = true;
  }
  if (list && !dtOpListPush(list, op)) {
    f->failed = true;
    return MlirWalkResultInterrupt;
  }
  return MlirWalkResultAdvance;
}

static bool isMemref(MlirValue v) {
  return mlirTypeIsAMemRef(mlirValueGetType(v));
}

static bool convertFunc(MlirOperation func) {
  Func f;
  memset(&f, 0, sizeof(f));
  mlirOperationWalk(func, collect, &f, MlirWalkPostOrder);
  DtOpList freeAtReturn = {0};
  bool ok = !f.failed;
  for (size_t i = 0; ok && i < f.allocs.count; ++i) {
    MlirOperation op = f.allocs.ops[i];
    MlirValue sizes[16];
    int n = (int)mlirOperationGetNumOperands(op);
    if (n > 16) {
      dtOpError(op, "too many dynamic sizes for the GPU target");
      ok = false;
      break;
    }
    for (int k = 0; k < n; ++k)
      sizes[k] = mlirOperationGetOperand(op, k);
    MlirAttribute seg = dtGetAttr(op, "operandSegmentSizes");
    int symbols =
        mlirAttributeIsNull(seg) ? 0 : (int)mlirDenseI32ArrayGetElement(seg, 1);
    MlirValue d = deviceAlloc(
        op, mlirValueGetType(mlirOperationGetResult(op, 0)), n, sizes, symbols);
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0), d);
    mlirOperationDestroy(op);
  }
  for (size_t i = 0; ok && i < f.deallocs.count; ++i) {
    MlirOperation op = f.deallocs.ops[i];
    deviceFree(op, mlirOperationGetOperand(op, 0));
    mlirOperationDestroy(op);
  }
  for (size_t i = 0; ok && i < f.copies.count; ++i) {
    MlirOperation op = f.copies.ops[i];
    copy(op, mlirOperationGetOperand(op, 1), mlirOperationGetOperand(op, 0));
    mlirOperationDestroy(op);
  }
  for (size_t i = 0; ok && i < f.globals.count; ++i) {
    MlirOperation op = f.globals.ops[i];
    MlirOperation next = mlirOperationGetNextInBlock(op);
    MlirValue host = mlirOperationGetResult(op, 0);
    MlirValue d = deviceCopyOf(next, host);
    /* Every use but the copy's own reads the device copy. */
    MlirOpOperand use = mlirValueGetFirstUse(host);
    while (!mlirOpOperandIsNull(use)) {
      MlirOpOperand nextUse = mlirOpOperandGetNextUse(use);
      MlirOperation owner = mlirOpOperandGetOwner(use);
      if (!dtIsOp(owner, "gpu.memcpy"))
        mlirOperationSetOperand(owner, mlirOpOperandGetOperandNumber(use), d);
      use = nextUse;
    }
    ok = dtOpListPush(&freeAtReturn, mlirOpResultGetOwner(d));
  }
  /* Public functions take and give host buffers. */
  MlirAttribute visibility = dtGetAttr(func, "sym_visibility");
  bool isPublic =
      mlirAttributeIsNull(visibility) ||
      strncmp(mlirStringAttrGetValue(visibility).data, "private", 7);
  MlirRegion body = mlirOperationGetRegion(func, 0);
  MlirBlock entry = mlirRegionGetFirstBlock(body);
  if (ok && isPublic && !mlirBlockIsNull(entry)) {
    MlirOperation first = mlirBlockGetFirstOperation(entry);
    for (intptr_t a = 0; ok && a < mlirBlockGetNumArguments(entry); ++a) {
      MlirValue arg = mlirBlockGetArgument(entry, a);
      if (!isMemref(arg) || mlirOpOperandIsNull(mlirValueGetFirstUse(arg)))
        continue;
      MlirValue d = deviceCopyOf(first, arg);
      MlirOpOperand use = mlirValueGetFirstUse(arg);
      while (!mlirOpOperandIsNull(use)) {
        MlirOpOperand nextUse = mlirOpOperandGetNextUse(use);
        MlirOperation owner = mlirOpOperandGetOwner(use);
        bool ownCopy = dtIsOp(owner, "gpu.memcpy") &&
                       mlirValueEqual(mlirOperationGetOperand(owner, 0), d);
        bool ownSize = dtIsOp(owner, "memref.dim") &&
                       mlirOperationEqual(mlirOperationGetNextInBlock(owner),
                                          mlirOpResultGetOwner(d));
        if (!ownCopy && !ownSize)
          mlirOperationSetOperand(owner, mlirOpOperandGetOperandNumber(use), d);
        use = nextUse;
      }
      ok = dtOpListPush(&freeAtReturn, mlirOpResultGetOwner(d));
    }
    for (size_t i = 0; ok && i < f.returns.count; ++i) {
      MlirOperation ret = f.returns.ops[i];
      for (intptr_t r = 0; r < mlirOperationGetNumOperands(ret); ++r) {
        MlirValue v = mlirOperationGetOperand(ret, r);
        if (!isMemref(v))
          continue;
        MlirValue sizes[16];
        int n = dynamicSizes(ret, v, sizes);
        MlirType type = mlirValueGetType(v);
        int32_t segments[2] = {n, 0};
        MlirContext ctx = mlirOperationGetContext(ret);
        MlirNamedAttribute attr = dtNamedAttr(
            ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(ctx, 2, segments));
        MlirValue host = mlirOperationGetResult(
            build(ret, "memref.alloc", n, sizes, &type, 1, &attr), 0);
        copy(ret, host, v);
        mlirOperationSetOperand(ret, r, host);
        /* The device buffer of the result, made here, ends here. */
        if (mlirValueIsAOpResult(v) &&
            dtIsOp(mlirOpResultGetOwner(v), "gpu.alloc"))
          deviceFree(ret, v);
      }
      for (size_t k = 0; k < freeAtReturn.count; ++k)
        deviceFree(ret, mlirOperationGetResult(freeAtReturn.ops[k], 0));
    }
  }
  free(f.allocs.ops);
  free(f.deallocs.ops);
  free(f.copies.ops);
  free(f.globals.ops);
  free(f.returns.ops);
  free(freeAtReturn.ops);
  return ok;
}

static bool runGpuMemory(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  mlirContextGetOrLoadDialect(mlirOperationGetContext(root),
                              mlirStringRefCreateFromCString("gpu"));
  bool ok = true;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (dtIsOp(op, "func.func"))
      ok = convertFunc(op) && ok;
  return ok;
}

const DtPassDef dtGpuMemoryPass = {
    .info = {"dtensor-gpu-memory",
             "Keep a bufferized program's buffers in GPU device memory: "
             "gpu.alloc/dealloc/memcpy, arguments copied in and results "
             "copied out at public functions",
             0, NULL},
    .verifyFirst = false,
    .run = runGpuMemory,
    .numDependentDialects = 0,
};

/* ---- dtensor-gpu-check-host ---------------------------------------------- */

typedef struct Host {
  int reported;
} Host;

static bool touchesBuffer(MlirOperation op) {
  if (dtIsOp(op, "memref.load") || dtIsOp(op, "memref.store") ||
      dtIsOp(op, "memref.atomic_rmw") ||
      dtIsOp(op, "memref.generic_atomic_rmw"))
    return true;
  if (!dtIsOp(op, "func.call"))
    return false;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    MlirType t = mlirValueGetType(mlirOperationGetOperand(op, i));
    if (mlirTypeIsAMemRef(t) || mlirTypeIsAUnrankedMemRef(t))
      return true;
  }
  return false;
}

static MlirWalkResult checkHost(MlirOperation op, void *userData) {
  Host *h = userData;
  if (dtIsOp(op, "gpu.module") || dtIsOp(op, "gpu.launch"))
    return MlirWalkResultSkip;
  if (!touchesBuffer(op))
    return MlirWalkResultAdvance;
  dtOpError(op, "would run on the host over device memory: the GPU target "
                "maps loops with a parallel dim to kernels (a reduction to a "
                "scalar is not mapped yet) and does not call the runtime "
                "(collectives) yet");
  return ++h->reported >= 10 ? MlirWalkResultInterrupt : MlirWalkResultAdvance;
}

static bool runGpuCheckHost(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  Host h = {0};
  mlirOperationWalk(root, checkHost, &h, MlirWalkPreOrder);
  return h.reported == 0;
}

const DtPassDef dtGpuCheckHostPass = {
    .info = {"dtensor-gpu-check-host",
             "Report every op left on the host that reads or writes a "
             "buffer (device memory on the GPU target)",
             0, NULL},
    .verifyFirst = false,
    .run = runGpuCheckHost,
    .numDependentDialects = 0,
};
