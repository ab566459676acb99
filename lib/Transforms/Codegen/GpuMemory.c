/* The GPU target's memory (dtensor-to-nvvm, docs/runtime.md).
 *
 * dtensor-gpu-memory, on a bufferized program before its loops are mapped
 * to the GPU: every buffer lives in device memory. memref.alloc and
 * memref.dealloc become gpu.alloc and gpu.dealloc, memref.copy becomes
 * gpu.memcpy, a memref.get_global (a constant) is copied to a device
 * buffer where it is read (and freed at the returns), and a public
 * function copies its memref arguments in at entry and its results out (to
 * host buffers) at each return, freeing the device copies it made there.
 * Private functions, and public ones under boundary=device, take and
 * return device buffers.
 *
 * dtensor-gpu-serial-kernels, after the parallel loops are mapped: what
 * still touches device memory on the host moves into a kernel of one
 * thread (below).
 *
 * dtensor-gpu-check-host, after the kernels are outlined: an op left in a
 * host function that reads or writes a device buffer (a runtime call for a
 * collective, host code that uses a value it read) is reported at its
 * location and the pass fails, instead of the program failing on the GPU at
 * run time. Buffers only the host touches (the deallocation lowering's
 * address arrays, the mesh's shape for the runtime) stay host memory. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Util.h"

#include "mlir-c/AffineMap.h"
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

/* Whether buffer `v`'s elements are contiguous (an identity layout). */
static bool contiguous(MlirValue v) {
  MlirType t = mlirValueGetType(v);
  return !mlirTypeIsAMemRef(t) ||
         mlirAffineMapIsIdentity(mlirMemRefTypeGetAffineMap(t));
}

/* dst = src: gpu.memcpy, or, when either is a strided view (a slice), a
 * linalg.copy, which becomes a kernel. */
static void copy(MlirOperation before, MlirValue dst, MlirValue src) {
  MlirValue operands[2] = {dst, src};
  if (contiguous(dst) && contiguous(src)) {
    build(before, "gpu.memcpy", 2, operands, NULL, 0, NULL);
    return;
  }
  MlirValue ins[2] = {src, dst};
  dtNamedLinalg(mlirOperationGetContext(before), "linalg.copy",
                mlirOperationGetLocation(before), 1, ins, (MlirType){NULL},
                (MlirAttribute){NULL}, before);
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

static bool isPrivate(MlirOperation func) {
  MlirAttribute visibility = dtGetAttr(func, "sym_visibility");
  return !mlirAttributeIsNull(visibility) &&
         !strncmp(mlirStringAttrGetValue(visibility).data, "private", 7);
}

static bool isMemref(MlirValue v) {
  return mlirTypeIsAMemRef(mlirValueGetType(v));
}

/* A use of a buffer that stays on the host: a call (the runtime's), or a
 * cast whose every use is one. */
static bool hostUse(MlirOperation owner) {
  if (dtIsOp(owner, "func.call"))
    return true;
  if (!dtIsOp(owner, "memref.cast"))
    return false;
  MlirValue cast = mlirOperationGetResult(owner, 0);
  for (MlirOpOperand use = mlirValueGetFirstUse(cast);
       !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use))
    if (!dtIsOp(mlirOpOperandGetOwner(use), "func.call"))
      return false;
  return true;
}

/* The op that makes the buffer `v` is a cast of (NULL for an argument). */
static MlirOperation rootOf(MlirValue v) {
  while (mlirValueIsAOpResult(v)) {
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!dtIsOp(def, "memref.cast"))
      return def;
    v = mlirOperationGetOperand(def, 0);
  }
  return (MlirOperation){NULL};
}

/* Whether `v` is (a cast of) a host buffer: a host-only allocation (the
 * allocations left after dtensor-gpu-memory) or a constant. */
static bool hostBuffer(MlirValue v) {
  MlirOperation root = rootOf(v);
  return !mlirOperationIsNull(root) &&
         (dtIsOp(root, "memref.alloc") || dtIsOp(root, "memref.get_global"));
}

/* MLIR's deallocation lowering makes private helpers (dealloc_helper...)
 * that compare buffer addresses on the host, on index and i1 arrays of its
 * own: they stay host code. */
static bool deallocHelperCall(MlirOperation op) {
  if (!dtIsOp(op, "func.call"))
    return false;
  MlirStringRef name = dtCalleeName(op);
  return name.length >= 14 && !memcmp(name.data, "dealloc_helper", 14);
}

/* A buffer only the host touches (the deallocation lowering's address
 * arrays): read, written, sized, freed or handed to a helper. */
static bool hostOnly(MlirValue buffer) {
  for (MlirOpOperand use = mlirValueGetFirstUse(buffer);
       !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use)) {
    MlirOperation owner = mlirOpOperandGetOwner(use);
    if (dtIsOp(owner, "memref.cast")) {
      if (!hostOnly(mlirOperationGetResult(owner, 0)))
        return false;
    } else if (!dtIsOp(owner, "memref.load") &&
               !dtIsOp(owner, "memref.store") && !dtIsOp(owner, "memref.dim") &&
               !dtIsOp(owner, "memref.dealloc") && !deallocHelperCall(owner))
      return false;
  }
  return true;
}

/* Whether `v` is (a cast of) a host constant, memref.get_global. */
static bool hostConstant(MlirValue v) {
  MlirOperation root = rootOf(v);
  return !mlirOperationIsNull(root) && dtIsOp(root, "memref.get_global");
}

/* Whether the value `v` returned by a function is (a cast of) the result of
 * `op`. */
static bool returns(MlirOperation ret, MlirOperation op) {
  for (intptr_t r = 0; r < mlirOperationGetNumOperands(ret); ++r)
    if (mlirOperationEqual(rootOf(mlirOperationGetOperand(ret, r)), op))
      return true;
  return false;
}

/* `hostBoundary`: public functions take and give host buffers. */
static bool convertFunc(MlirOperation func, bool hostBoundary) {
  Func f;
  memset(&f, 0, sizeof(f));
  mlirOperationWalk(func, collect, &f, MlirWalkPostOrder);
  DtOpList freeAtReturn = {0};
  bool ok = !f.failed;
  for (size_t i = 0; ok && i < f.allocs.count; ++i) {
    MlirOperation op = f.allocs.ops[i];
    if (hostOnly(mlirOperationGetResult(op, 0)))
      continue;
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
    MlirValue freed = mlirOperationGetOperand(op, 0);
    if (mlirValueIsAOpResult(freed) &&
        dtIsOp(mlirOpResultGetOwner(freed), "memref.alloc"))
      continue; /* a host-only buffer */
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
    MlirValue host = mlirOperationGetResult(op, 0);
    bool deviceUse = false;
    for (MlirOpOperand use = mlirValueGetFirstUse(host);
         !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use))
      deviceUse |= !hostUse(mlirOpOperandGetOwner(use));
    if (!deviceUse)
      continue;
    MlirValue d = deviceCopyOf(mlirOperationGetNextInBlock(op), host);
    /* Uses that become device code read the device copy; the runtime's
     * calls (the mesh's shape) keep the host constant. */
    MlirOpOperand use = mlirValueGetFirstUse(host);
    while (!mlirOpOperandIsNull(use)) {
      MlirOpOperand nextUse = mlirOpOperandGetNextUse(use);
      MlirOperation owner = mlirOpOperandGetOwner(use);
      if (!dtIsOp(owner, "gpu.memcpy") && !hostUse(owner))
        mlirOperationSetOperand(owner, mlirOpOperandGetOperandNumber(use), d);
      use = nextUse;
    }
    ok = dtOpListPush(&freeAtReturn, mlirOpResultGetOwner(d));
  }
  /* Public functions take and give host buffers (boundary=host). */
  bool copyInOut = hostBoundary && !isPrivate(func);
  MlirRegion body = mlirOperationGetRegion(func, 0);
  MlirBlock entry = mlirRegionGetFirstBlock(body);
  if (ok && copyInOut && !mlirBlockIsNull(entry)) {
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
        /* The sizes of the copy's allocation read the argument. */
        bool ownSize = false;
        MlirOperation alloc = mlirOpResultGetOwner(d);
        for (intptr_t k = 0; k < mlirOperationGetNumOperands(alloc); ++k) {
          MlirValue size = mlirOperationGetOperand(alloc, k);
          ownSize |= mlirValueIsAOpResult(size) &&
                     mlirOperationEqual(mlirOpResultGetOwner(size), owner);
        }
        if (!ownCopy && !ownSize)
          mlirOperationSetOperand(owner, mlirOpOperandGetOperandNumber(use), d);
        use = nextUse;
      }
      ok = dtOpListPush(&freeAtReturn, mlirOpResultGetOwner(d));
    }
  }
  for (size_t i = 0; ok && i < f.returns.count; ++i) {
    MlirOperation ret = f.returns.ops[i];
    for (intptr_t r = 0; copyInOut && r < mlirOperationGetNumOperands(ret);
         ++r) {
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
    /* The copies made here end here, unless returned as they are. */
    for (size_t k = 0; k < freeAtReturn.count; ++k)
      if (!returns(ret, freeAtReturn.ops[k]))
        deviceFree(ret, mlirOperationGetResult(freeAtReturn.ops[k], 0));
  }
  free(f.allocs.ops);
  free(f.deallocs.ops);
  free(f.copies.ops);
  free(f.globals.ops);
  free(f.returns.ops);
  free(freeAtReturn.ops);
  return ok;
}

static bool isDeallocHelper(MlirOperation func) {
  MlirAttribute name = dtGetAttr(func, "sym_name");
  return !mlirAttributeIsNull(name) &&
         !strncmp(mlirStringAttrGetValue(name).data, "dealloc_helper", 14);
}

static bool runGpuMemory(MlirOperation root, const DtPassOptions *options) {
  bool hostBoundary = !strcmp(dtPassOptionsGet(options, "boundary"), "host");
  mlirContextGetOrLoadDialect(mlirOperationGetContext(root),
                              mlirStringRefCreateFromCString("gpu"));
  bool ok = true;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (dtIsOp(op, "func.func") && !isDeallocHelper(op))
      ok = convertFunc(op, hostBoundary) && ok;
  return ok;
}

static const DtensorPassOptionInfo kGpuMemoryOptions[] = {
    {"boundary", DTENSOR_OPTION_ENUM, "host", "host|device",
     "what public functions take and return: host buffers, copied in and "
     "out (host), or device buffers the caller allocates with mgpuMemAlloc "
     "and frees with mgpuMemFree, results included (device)"},
};

const DtPassDef dtGpuMemoryPass = {
    .info = {"dtensor-gpu-memory",
             "Keep a bufferized program's buffers in GPU device memory: "
             "gpu.alloc/dealloc/memcpy, arguments copied in and results "
             "copied out at public functions (boundary=host)",
             1, kGpuMemoryOptions},
    .verifyFirst = false,
    .run = runGpuMemory,
    .numDependentDialects = 0,
};

/* ---- dtensor-gpu-serial-kernels ------------------------------------------
 */

/* After the parallel loops are mapped, what still reads or writes device
 * memory on the host (a loop with no parallel dim: a reduction to a
 * scalar; a loop of one iteration the canonicalizer unrolled) moves into a
 * kernel of one thread: slow, but on the device, where its buffers are.
 * A nest that holds a kernel launch is entered instead, and an op whose
 * results the host uses stays (dtensor-gpu-check-host reports it). */

static bool isDeviceAccess(MlirOperation op) {
  if (dtIsOp(op, "memref.load") || dtIsOp(op, "memref.generic_atomic_rmw"))
    return !hostBuffer(mlirOperationGetOperand(op, 0));
  if (dtIsOp(op, "memref.store") || dtIsOp(op, "memref.atomic_rmw"))
    return !hostBuffer(mlirOperationGetOperand(op, 1));
  return false;
}

typedef struct Scan {
  bool access, launch;
} Scan;

static MlirWalkResult scan(MlirOperation op, void *userData) {
  Scan *s = userData;
  s->launch |= dtIsOp(op, "gpu.launch");
  s->access |= isDeviceAccess(op);
  return MlirWalkResultAdvance;
}

static bool resultsUsed(MlirOperation op) {
  for (intptr_t i = 0; i < mlirOperationGetNumResults(op); ++i)
    if (!mlirOpOperandIsNull(
            mlirValueGetFirstUse(mlirOperationGetResult(op, i))))
      return true;
  return false;
}

/* Wraps `op` into gpu.launch of one block of one thread. */
static void wrapInKernel(MlirOperation op) {
  MlirContext ctx = mlirOperationGetContext(op);
  MlirLocation loc = mlirOperationGetLocation(op);
  MlirType index = mlirIndexTypeGet(ctx);
  MlirNamedAttribute value =
      dtNamedAttr(ctx, "value", mlirIntegerAttrGet(index, 1));
  MlirValue one = mlirOperationGetResult(
      build(op, "arith.constant", 0, NULL, &index, 1, &value), 0);
  MlirValue sizes[6] = {one, one, one, one, one, one};
  int32_t segments[11] = {0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
  MlirNamedAttribute attr = dtNamedAttr(
      ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(ctx, 11, segments));
  MlirType types[12];
  MlirLocation locs[12];
  for (int i = 0; i < 12; ++i) {
    types[i] = index;
    locs[i] = loc;
  }
  MlirRegion region = mlirRegionCreate();
  MlirBlock block = mlirBlockCreate(12, types, locs);
  mlirRegionAppendOwnedBlock(region, block);
  MlirOperationState term = mlirOperationStateGet(
      mlirStringRefCreateFromCString("gpu.terminator"), loc);
  MlirOperation terminator = mlirOperationCreate(&term);
  mlirBlockAppendOwnedOperation(block, terminator);
  MlirOperationState st =
      mlirOperationStateGet(mlirStringRefCreateFromCString("gpu.launch"), loc);
  mlirOperationStateAddOperands(&st, 6, sizes);
  mlirOperationStateAddAttributes(&st, 1, &attr);
  mlirOperationStateAddOwnedRegions(&st, 1, &region);
  MlirOperation launch = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(op), op, launch);
  mlirOperationMoveBefore(op, terminator);
}

static void serialBlock(MlirBlock block) {
  MlirOperation op = mlirBlockGetFirstOperation(block);
  while (!mlirOperationIsNull(op)) {
    MlirOperation next = mlirOperationGetNextInBlock(op);
    Scan s = {false, false};
    if (!dtIsOp(op, "gpu.launch"))
      mlirOperationWalk(op, scan, &s, MlirWalkPreOrder);
    if (s.access && s.launch) {
      for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r)
        for (MlirBlock b =
                 mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
             !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
          serialBlock(b);
    } else if (s.access && !resultsUsed(op))
      wrapInKernel(op);
    op = next;
  }
}

static bool runGpuSerialKernels(MlirOperation root,
                                const DtPassOptions *options) {
  (void)options;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (dtIsOp(op, "func.func") && !isDeallocHelper(op))
      for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
           !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
        serialBlock(b);
  return true;
}

const DtPassDef dtGpuSerialKernelsPass = {
    .info = {"dtensor-gpu-serial-kernels",
             "Move what still reads or writes device memory on the host into "
             "kernels of one thread (after the parallel loops are mapped)",
             0, NULL},
    .verifyFirst = false,
    .run = runGpuSerialKernels,
    .numDependentDialects = 0,
};

/* ---- dtensor-gpu-check-host ----------------------------------------------
 */

typedef struct Host {
  int reported;
  DtOpList deviceFuncs; /* private functions with a body: device buffers */
} Host;

/* A call of a private function of the module: it takes device buffers. */
static bool deviceCall(const Host *h, MlirOperation op) {
  MlirStringRef name = dtCalleeName(op);
  for (size_t i = 0; i < h->deviceFuncs.count; ++i) {
    MlirStringRef f =
        mlirStringAttrGetValue(dtGetAttr(h->deviceFuncs.ops[i], "sym_name"));
    if (f.length == name.length && !memcmp(f.data, name.data, f.length))
      return true;
  }
  return false;
}
/* A call of the runtime's entry points that take device buffers: the
 * collectives (on the nccl backend; their starts, dtrt_mlir_collective_start_*,
 * complete them on device buffers, and the waits) and contractions (on
 * cuBLAS; docs/runtime.md). */
static bool deviceRuntimeCall(MlirOperation op) {
  MlirStringRef name = dtCalleeName(op);
  static const char *const kPrefixes[] = {
      "dtrt_mlir_collective_", "dtrt_mlir_permute_", "dtrt_mlir_contract_",
      "dtrt_mlir_wait_"};
  for (size_t i = 0; i < sizeof(kPrefixes) / sizeof(kPrefixes[0]); ++i)
    if (name.length > strlen(kPrefixes[i]) &&
        !memcmp(name.data, kPrefixes[i], strlen(kPrefixes[i])))
      return true;
  return false;
}

static bool touchesBuffer(const Host *h, MlirOperation op) {
  if (dtIsOp(op, "memref.load") || dtIsOp(op, "memref.store") ||
      dtIsOp(op, "memref.atomic_rmw") ||
      dtIsOp(op, "memref.generic_atomic_rmw"))
    return !hostBuffer(
        mlirOperationGetOperand(op, dtIsOp(op, "memref.store") ? 1 : 0));
  if (!dtIsOp(op, "func.call") || deallocHelperCall(op) || deviceCall(h, op) ||
      deviceRuntimeCall(op))
    return false;
  /* A runtime call on host constants (the mesh's shape) is fine. */
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    MlirValue v = mlirOperationGetOperand(op, i);
    MlirType t = mlirValueGetType(v);
    if ((mlirTypeIsAMemRef(t) || mlirTypeIsAUnrankedMemRef(t)) &&
        !hostConstant(v))
      return true;
  }
  return false;
}

static MlirWalkResult checkHost(MlirOperation op, void *userData) {
  Host *h = userData;
  if (dtIsOp(op, "gpu.module") || dtIsOp(op, "gpu.launch") ||
      (dtIsOp(op, "func.func") && isDeallocHelper(op)))
    return MlirWalkResultSkip;
  if (!touchesBuffer(h, op))
    return MlirWalkResultAdvance;
  dtOpError(op, "would run on the host over device memory: the GPU target "
                "does not call the runtime on device buffers (collectives) "
                "yet, and host code that uses what it reads cannot move into "
                "a kernel");
  return ++h->reported >= 10 ? MlirWalkResultInterrupt : MlirWalkResultAdvance;
}

static bool runGpuCheckHost(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  Host h = {0, {0}};
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (dtIsOp(op, "func.func") && isPrivate(op) &&
        !mlirBlockIsNull(
            mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0))) &&
        !dtOpListPush(&h.deviceFuncs, op)) {
      mlirEmitError(mlirOperationGetLocation(root),
                    "dtensor-gpu-check-host: out of memory");
      free(h.deviceFuncs.ops);
      return false;
    }
  }
  mlirOperationWalk(root, checkHost, &h, MlirWalkPreOrder);
  free(h.deviceFuncs.ops);
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
