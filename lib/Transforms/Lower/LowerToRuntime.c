/* dtensor-lower-to-runtime: every dtensor collective of a per-device
 * program becomes calls of libdtensor_rt: dtrt_mlir_collective_start_<type>
 * as soon as its input is ready and dtrt_mlir_wait_<type> before its
 * result's first use (dtrt_mlir_permute_<type>, blocking, for permute, with
 * its pairs as a global) on
 * unranked memrefs (the input block through bufferization.to_buffer, the
 * output a fresh memref.alloc turned back into a tensor), with the mesh
 * shape and the group's axes as constant globals; dtensor.mesh_index
 * becomes calls of dtrt_mlir_mesh_coord. The mesh declarations go
 * (nothing below needs them). Then the usual bufferization and LLVM
 * conversion apply (pipeline dtensor-to-llvm, docs/runtime.md). */
#include "PassDef.h"
#include "RuntimeCall.h"
#include "Util.h"

#include "dtensor-c/Dialect.h"
#include "dtensor-rt/Runtime.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/Bufferization.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/MemRef.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Lower {
  DtRtBuilder b;
  bool failed;
} Lower;

static void fail(Lower *l, MlirOperation op, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(Lower *l, MlirOperation op, const char *format, ...) {
  va_list args;
  va_start(args, format);
  dtOpErrorV(op, format, args);
  va_end(args);
  l->failed = true;
}

static int64_t intAttr(MlirOperation op, const char *name, int64_t dflt) {
  MlirAttribute a = dtGetAttr(op, name);
  return !mlirAttributeIsNull(a) && mlirAttributeIsAInteger(a)
             ? mlirIntegerAttrGetValueInt(a)
             : dflt;
}

static int64_t reduceCode(MlirOperation op) {
  MlirAttribute a = dtGetAttr(op, "reduce");
  if (mlirAttributeIsNull(a) || !mlirAttributeIsAString(a))
    return DTRT_SUM;
  MlirStringRef s = mlirStringAttrGetValue(a);
  DtrtReduce r = DTRT_SUM; /* the attribute's names are the runtime's */
  dtrtReduceParse(s.data, s.length, &r);
  return r;
}

/* The constant global holding the shape of `op`'s mesh (created once):
 * its symbol in `sym`; returns the mesh rank. */
static int meshGlobal(Lower *l, MlirOperation op, char *sym, size_t size) {
  MlirStringRef meshName = mlirFlatSymbolRefAttrGetValue(dtGetAttr(op, "mesh"));
  MlirAttribute shapeAttr =
      dtGetAttr(dtensorMeshOpLookup(op, meshName), "shape");
  int meshRank = (int)mlirDenseArrayGetNumElements(shapeAttr);
  int64_t shape[16];
  for (int i = 0; i < meshRank && i < 16; ++i)
    shape[i] = mlirDenseI64ArrayGetElement(shapeAttr, i);
  snprintf(sym, size, "__dtensor_mesh_%.*s", (int)meshName.length,
           meshName.data);
  dtRtEnsureGlobal(&l->b, sym, meshRank, shape, mlirOperationGetLocation(op));
  return meshRank;
}

/* dtensor.mesh_index: one call of dtrt_mlir_mesh_coord per result. */
static void lowerMeshIndex(Lower *l, MlirOperation op) {
  MlirLocation loc = mlirOperationGetLocation(op);
  char meshSym[300];
  int meshRank = meshGlobal(l, op, meshSym, sizeof(meshSym));
  MlirAttribute axesAttr = dtGetAttr(op, "mesh_axes");
  MlirType i64 = mlirIntegerTypeGet(l->b.ctx, 64);
  MlirType index = mlirIndexTypeGet(l->b.ctx);
  MlirType inputs[2] = {i64,
                        mlirUnrankedMemRefTypeGet(i64, mlirAttributeGetNull())};
  dtRtEnsureCallee(&l->b, "dtrt_mlir_mesh_coord",
                   mlirFunctionTypeGet(l->b.ctx, 2, inputs, 1, &i64), loc);
  for (intptr_t k = 0; k < mlirOperationGetNumResults(op); ++k) {
    int64_t axis = mlirAttributeIsNull(axesAttr)
                       ? k
                       : mlirDenseI64ArrayGetElement(axesAttr, k);
    MlirValue args[2] = {dtRtConstI64(&l->b, axis, op),
                         dtRtGlobal(&l->b, meshSym, meshRank, op)};
    MlirValue coord =
        dtRtCallValue(&l->b, "dtrt_mlir_mesh_coord", loc, 2, args, i64, op);
    MlirValue cast =
        mlirOperationGetResult(dtRtBuild(&l->b, "arith.index_cast", loc, 1,
                                         &coord, 1, &index, 0, NULL, op),
                               0);
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, k), cast);
  }
  mlirOperationDestroy(op);
}

/* The buffer of tensor `in` (bufferization.to_buffer), made before `at`. */
/* The buffer of a collective's input, read only (the runtime's send
 * buffers are const): without it bufferization copied every input. */
static MlirValue toBuffer(Lower *l, MlirLocation loc, MlirValue in,
                          MlirType inMem, MlirOperation at) {
  MlirNamedAttribute readOnly =
      dtNamedAttr(l->b.ctx, "read_only", mlirUnitAttrGet(l->b.ctx));
  return mlirOperationGetResult(dtRtBuild(&l->b, "bufferization.to_buffer", loc,
                                          1, &in, 1, &inMem, 1, &readOnly, at),
                                0);
}

/* A collective's buffers, made before `at`: the input block's and a fresh
 * output (memref.alloc). */
static void buffers(Lower *l, MlirLocation loc, MlirValue in, MlirType inMem,
                    MlirType outMem, MlirOperation at, MlirValue *inBuf,
                    MlirValue *outBuf) {
  *inBuf = toBuffer(l, loc, in, inMem, at);
  int32_t segments[2] = {0, 0};
  MlirNamedAttribute allocAttrs[1] = {
      dtNamedAttr(l->b.ctx, "operandSegmentSizes",
                  mlirDenseI32ArrayGet(l->b.ctx, 2, segments))};
  *outBuf =
      mlirOperationGetResult(dtRtBuild(&l->b, "memref.alloc", loc, 0, NULL, 1,
                                       &outMem, 1, allocAttrs, at),
                             0);
}

/* Replaces `op`'s result by the tensor of its output buffer, made before
 * `at` (where the buffer holds the result), and erases `op`. */
static void replaceByBuffer(Lower *l, MlirLocation loc, MlirOperation op,
                            MlirValue outBuf, MlirOperation at) {
  MlirValue result = mlirOperationGetResult(op, 0);
  MlirType outType = mlirValueGetType(result);
  MlirNamedAttribute tensorAttrs[2] = {
      dtNamedAttr(l->b.ctx, "restrict", mlirUnitAttrGet(l->b.ctx)),
      dtNamedAttr(l->b.ctx, "writable", mlirUnitAttrGet(l->b.ctx))};
  MlirValue out = mlirOperationGetResult(
      dtRtBuild(&l->b, "bufferization.to_tensor", loc, 1, &outBuf, 1, &outType,
                2, tensorAttrs, at),
      0);
  mlirValueReplaceAllUsesOfWith(result, out);
  mlirOperationDestroy(op);
}

typedef struct UseFind {
  MlirValue value;
  bool found;
} UseFind;

static MlirWalkResult findUse(MlirOperation op, void *user) {
  UseFind *u = user;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op) && !u->found; ++i)
    u->found = mlirValueEqual(mlirOperationGetOperand(op, i), u->value);
  return u->found ? MlirWalkResultInterrupt : MlirWalkResultAdvance;
}

/* Whether `o` is one of the setup ops a block may start with: the
 * function's dtrt_mlir_init, constants, and the starts of collectives of
 * block arguments with the ops that make their arguments. */
static bool isSetup(MlirOperation o) {
  static const char *const kCallees[] = {"dtrt_mlir_init",
                                         "dtrt_mlir_collective_start_"};
  if (dtIsOp(o, "memref.get_global") || dtIsOp(o, "memref.cast") ||
      dtIsOp(o, "arith.constant") || dtIsOp(o, "bufferization.to_buffer") ||
      dtIsOp(o, "memref.alloc"))
    return true;
  if (!dtIsOp(o, "func.call"))
    return false;
  MlirStringRef callee = dtCalleeName(o);
  for (int i = 0; i < 2; ++i)
    if (callee.length >= strlen(kCallees[i]) &&
        !memcmp(callee.data, kCallees[i], strlen(kCallees[i])))
      return true;
  return false;
}

/* Where a collective starts: right after its input is made (in `op`'s
 * block), or for a block argument after the block's setup ops (so after
 * the function's dtrt_mlir_init, and block arguments' collectives start in
 * program order). */
static MlirOperation startPoint(MlirOperation op, MlirValue in) {
  MlirBlock block = mlirOperationGetBlock(op);
  if (mlirValueIsAOpResult(in)) {
    MlirOperation def = mlirOpResultGetOwner(in);
    if (mlirBlockEqual(mlirOperationGetBlock(def), block))
      return mlirOperationGetNextInBlock(def);
    /* Made in an enclosing block: as early as this block allows. */
  }
  MlirOperation o = mlirBlockGetFirstOperation(block);
  while (!mlirOperationEqual(o, op) && isSetup(o))
    o = mlirOperationGetNextInBlock(o);
  return o;
}

/* Where it is waited for: right before the first op of its block that
 * uses `result` (in a region too), else before the terminator. */
static MlirOperation waitPoint(MlirOperation op, MlirValue result) {
  MlirOperation o = mlirOperationGetNextInBlock(op);
  for (; !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    UseFind u = {result, false};
    mlirOperationWalk(o, findUse, &u, MlirWalkPreOrder);
    if (u.found || mlirOperationIsNull(mlirOperationGetNextInBlock(o)))
      return o;
  }
  return op;
}

/* A collective but permute: started as soon as its input is ready
 * (dtrt_mlir_collective_start_<type>, returning a request), waited for
 * right before its result's first use (dtrt_mlir_wait_<type>, which takes
 * the input block again so bufferization keeps it intact until then), so
 * that the ops in between run while it is in flight. */
static void lowerStarted(Lower *l, MlirOperation op, int64_t kind,
                         const char *suffix, const char *meshSym, int meshRank,
                         const char *axesSym, int numAxes, MlirType inMem,
                         MlirType outMem) {
  MlirLocation loc = mlirOperationGetLocation(op);
  MlirValue in = mlirOperationGetOperand(op, 0);
  MlirValue result = mlirOperationGetResult(op, 0);
  MlirType i64 = mlirIntegerTypeGet(l->b.ctx, 64);
  MlirType data = mlirUnrankedMemRefTypeGet(
      mlirShapedTypeGetElementType(mlirValueGetType(in)),
      mlirAttributeGetNull());
  MlirType ints = mlirUnrankedMemRefTypeGet(i64, mlirAttributeGetNull());
  char start[64], wait[64];
  snprintf(start, sizeof(start), "dtrt_mlir_collective_start_%s", suffix);
  snprintf(wait, sizeof(wait), "dtrt_mlir_wait_%s", suffix);
  MlirType startIn[9] = {i64, i64, i64, i64, i64, data, data, ints, ints};
  MlirType waitIn[2] = {i64, data};
  dtRtEnsureCallee(&l->b, start,
                   mlirFunctionTypeGet(l->b.ctx, 9, startIn, 1, &i64), loc);
  dtRtEnsureCallee(&l->b, wait,
                   mlirFunctionTypeGet(l->b.ctx, 2, waitIn, 0, NULL), loc);
  MlirOperation at = startPoint(op, in);
  MlirOperation until = waitPoint(op, result);
  MlirValue inBuf, outBuf;
  buffers(l, loc, in, inMem, outMem, at, &inBuf, &outBuf);
  MlirValue args[9] = {dtRtConstI64(&l->b, kind, at),
                       dtRtConstI64(&l->b, reduceCode(op), at),
                       dtRtConstI64(&l->b, intAttr(op, "gather_dim", -1), at),
                       dtRtConstI64(&l->b, intAttr(op, "shard_dim", -1), at),
                       dtRtConstI64(&l->b, intAttr(op, "root", 0), at),
                       dtRtCastUnranked(&l->b, inBuf, at),
                       dtRtCastUnranked(&l->b, outBuf, at),
                       dtRtGlobal(&l->b, meshSym, meshRank, at),
                       dtRtGlobal(&l->b, axesSym, numAxes, at)};
  MlirValue request = dtRtCallValue(&l->b, start, loc, 9, args, i64, at);
  MlirValue waitArgs[2] = {
      request,
      dtRtCastUnranked(&l->b, toBuffer(l, loc, in, inMem, until), until)};
  dtRtCall(&l->b, wait, loc, 2, waitArgs, until);
  replaceByBuffer(l, loc, op, outBuf, until);
}

/* A collective: started and waited for (lowerStarted), or for permute a
 * call of dtrt_mlir_permute_<type>(in, out, mesh, axes, pairs). */
static void lowerCollective(Lower *l, MlirOperation op, int64_t kind) {
  bool permute = kind < 0;
  MlirLocation loc = mlirOperationGetLocation(op);
  MlirValue in = mlirOperationGetOperand(op, 0);
  MlirType inType = mlirValueGetType(in);
  MlirType outType = mlirValueGetType(mlirOperationGetResult(op, 0));
  const char *suffix = dtRtTypeName(mlirShapedTypeGetElementType(inType), NULL);
  if (!suffix) {
    fail(l, op,
         "has an element type the runtime does not carry (valid: "
         "f32, f64, f16, bf16, i32, i64)");
    return;
  }
  /* The mesh and the group's axes, as globals. */
  char meshSym[300], axesSym[400];
  int meshRank = meshGlobal(l, op, meshSym, sizeof(meshSym));
  MlirAttribute axesAttr = dtGetAttr(op, "mesh_axes");
  int numAxes = (int)mlirDenseArrayGetNumElements(axesAttr);
  int64_t axes[16];
  int n = snprintf(axesSym, sizeof(axesSym), "%s_axes", meshSym);
  for (int i = 0; i < numAxes && i < 16; ++i) {
    axes[i] = mlirDenseI64ArrayGetElement(axesAttr, i);
    n += snprintf(axesSym + n, sizeof(axesSym) - (size_t)n, "_%lld",
                  (long long)axes[i]);
  }
  dtRtEnsureGlobal(&l->b, axesSym, numAxes, axes, loc);
  /* The buffers. */
  int rank = (int)mlirShapedTypeGetRank(inType);
  int64_t inShape[16], outShape[16];
  for (int d = 0; d < rank; ++d) {
    inShape[d] = mlirShapedTypeGetDimSize(inType, d);
    outShape[d] = mlirShapedTypeGetDimSize(outType, d);
  }
  MlirType elt = mlirShapedTypeGetElementType(inType);
  MlirType inMem =
      mlirMemRefTypeContiguousGet(elt, rank, inShape, mlirAttributeGetNull());
  MlirType outMem =
      mlirMemRefTypeContiguousGet(elt, rank, outShape, mlirAttributeGetNull());
  if (!permute) {
    lowerStarted(l, op, kind, suffix, meshSym, meshRank, axesSym, numAxes,
                 inMem, outMem);
    return;
  }
  /* Permute's pairs: one global per distinct list. */
  MlirAttribute pairsAttr = dtGetAttr(op, "pairs");
  int numPairs = (int)mlirDenseArrayGetNumElements(pairsAttr);
  if (numPairs > 256 || numPairs % 2) {
    fail(l, op,
         "has %d pair entries; the runtime takes an even number up "
         "to 256",
         numPairs);
    return;
  }
  char pairsSym[600];
  int64_t pairs[256];
  int k = snprintf(pairsSym, sizeof(pairsSym), "%s_pairs", axesSym);
  uint64_t h = 1469598103934665603ULL;
  for (int i = 0; i < numPairs; ++i) {
    pairs[i] = mlirDenseI64ArrayGetElement(pairsAttr, i);
    h = (h ^ (uint64_t)(pairs[i] + 1)) * 1099511628211ULL;
  }
  snprintf(pairsSym + k, sizeof(pairsSym) - (size_t)k, "_%d_%016llx", numPairs,
           (unsigned long long)h);
  dtRtEnsureGlobal(&l->b, pairsSym, numPairs, pairs, loc);
  char callee[64];
  snprintf(callee, sizeof(callee), "dtrt_mlir_permute_%s", suffix);
  MlirType ints = mlirUnrankedMemRefTypeGet(mlirIntegerTypeGet(l->b.ctx, 64),
                                            mlirAttributeGetNull());
  MlirType data = mlirUnrankedMemRefTypeGet(elt, mlirAttributeGetNull());
  MlirType permuteInputs[5] = {data, data, ints, ints, ints};
  dtRtEnsureCallee(&l->b, callee,
                   mlirFunctionTypeGet(l->b.ctx, 5, permuteInputs, 0, NULL),
                   loc);
  MlirValue inBuf, outBuf;
  buffers(l, loc, in, inMem, outMem, op, &inBuf, &outBuf);
  MlirValue args[5] = {dtRtCastUnranked(&l->b, inBuf, op),
                       dtRtCastUnranked(&l->b, outBuf, op),
                       dtRtGlobal(&l->b, meshSym, meshRank, op),
                       dtRtGlobal(&l->b, axesSym, numAxes, op),
                       dtRtGlobal(&l->b, pairsSym, numPairs, op)};
  dtRtCall(&l->b, callee, loc, 5, args, op);
  replaceByBuffer(l, loc, op, outBuf, op);
}

/* Functions that already start with dtrt_mlir_init of a mesh. */
typedef struct Inited {
  MlirOperation func;
  MlirAttribute mesh; /* the op's mesh symbol reference (uniqued) */
} Inited;

/* The first use of a mesh in a function makes the function start with
 * dtrt_mlir_init(mesh shape): the runtime is set up and the mesh checked
 * against the job's ranks before any computation. */
static void ensureInit(Lower *l, MlirOperation op, Inited *done, int *numDone,
                       int cap) {
  MlirOperation func = mlirOperationGetParentOperation(op);
  while (!mlirOperationIsNull(func) && !dtIsOp(func, "func.func"))
    func = mlirOperationGetParentOperation(func);
  if (mlirOperationIsNull(func))
    return;
  MlirAttribute meshRef = dtGetAttr(op, "mesh");
  for (int i = 0; i < *numDone; ++i)
    if (mlirOperationEqual(done[i].func, func) &&
        mlirAttributeEqual(done[i].mesh, meshRef))
      return;
  if (*numDone == cap)
    return; /* the calls at the collectives still set up the runtime */
  done[*numDone].func = func;
  done[*numDone].mesh = meshRef;
  ++*numDone;
  char meshSym[300];
  int meshRank = meshGlobal(l, op, meshSym, sizeof(meshSym));
  MlirLocation loc = mlirOperationGetLocation(func);
  MlirType ints = mlirUnrankedMemRefTypeGet(mlirIntegerTypeGet(l->b.ctx, 64),
                                            mlirAttributeGetNull());
  dtRtEnsureCallee(&l->b, "dtrt_mlir_init",
                   mlirFunctionTypeGet(l->b.ctx, 1, &ints, 0, NULL), loc);
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  MlirOperation first = mlirBlockGetFirstOperation(entry);
  MlirValue shape = dtRtGlobal(&l->b, meshSym, meshRank, first);
  dtRtCall(&l->b, "dtrt_mlir_init", loc, 1, &shape, first);
}

static MlirWalkResult collect(MlirOperation op, void *userData) {
  if (!dtIsOpIn(op, "dtensor."))
    return MlirWalkResultAdvance;
  return dtOpListPush(userData, op) ? MlirWalkResultAdvance
                                    : MlirWalkResultInterrupt;
}

static bool runLowerToRuntime(MlirOperation root,
                              const DtPassOptions *options) {
  (void)options;
  Lower l = {dtRtBuilderBegin(root), false};
  DtOpList found = {NULL, 0, 0};
  mlirOperationWalk(root, collect, &found, MlirWalkPreOrder);
  MlirOperation meshes[64];
  int numMeshes = 0;
  Inited *inited = calloc(256, sizeof(Inited));
  int numInited = 0;
  for (size_t i = 0; i < found.count; ++i) {
    MlirOperation op = found.ops[i];
    if (dtIsOp(op, DT_OP_MESH)) {
      if (numMeshes < 64)
        meshes[numMeshes++] = op;
      continue;
    }
    /* Gathers are local computations, lowered with the code
     * (dtensor-lower-gathers). */
    if (dtIsOp(op, DT_OP_GATHER) || dtIsOp(op, DT_OP_SCATTER_ADD))
      continue;
    if (!dtIsOp(op, DT_OP_REDISTRIBUTE) && !dtIsOp(op, DT_OP_ANNOTATE))
      ensureInit(&l, op, inited, &numInited, 256);
    bool done = false;
    const DtCollectiveInfo *info = dtCollectiveOf(op);
    if (info) {
      lowerCollective(&l, op, info->runtimeKind);
      done = true;
    }
    if (!done && dtIsOp(op, DT_OP_MESH_INDEX)) {
      lowerMeshIndex(&l, op);
      done = true;
    }
    if (!done)
      fail(&l, op, "is not lowered to the runtime (%s)",
           dtIsOp(op, DT_OP_REDISTRIBUTE)
               ? "run dtensor-lower-redistribute first"
               : "annotations are removed by dtensor-partition");
  }
  /* Function arguments and results lose their dtensor attributes (the LLVM
   * translation does not know them). */
  for (MlirOperation f = mlirBlockGetFirstOperation(l.b.top);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f))
    if (dtIsOp(f, "func.func")) {
      /* Layouts without the global shapes partition adds: a global
       * program, which lowered as it is would run whole on every rank
       * under a signature that claims blocks. */
      char where[32];
      if (dtSignatureFind(f, false, where))
        fail(&l, f,
             "was not partitioned: %s has a dtensor.layout but no "
             "dtensor.global_shape; run dtensor-spmd (or dtensor-partition) "
             "first",
             where);
      dtStripSignatureAttrs(f);
    }
  /* The meshes have served; nothing below the runtime calls needs them. */
  for (int i = 0; i < numMeshes && !l.failed; ++i)
    mlirOperationDestroy(meshes[i]);
  free(found.ops);
  free(inited);
  dtRtBuilderEnd(&l.b);
  return !l.failed;
}

const DtPassDef dtLowerToRuntimePass = {
    .info = {"dtensor-lower-to-runtime",
             "Turn every dtensor collective into calls of libdtensor_rt "
             "on memrefs: started as soon as its input is ready, waited for "
             "before its result's first use",
             0, NULL},
    .verifyFirst = true,
    .run = runLowerToRuntime,
    .numDependentDialects = 4,
    .dependentDialects = {mlirGetDialectHandle__bufferization__,
                          mlirGetDialectHandle__memref__,
                          mlirGetDialectHandle__arith__,
                          mlirGetDialectHandle__func__},
};
