/* dtensor-profile: on buffers, each op of a function body that costs time
 * (a linalg op, a runtime call — a BLAS contraction, a collective's start
 * or wait —, a copy, a loop) gets calls of libdtensor_rt's
 * dtrt_profile_begin and dtrt_profile_end with its number around it; the
 * module's `dtensor.profile_ops` lists what each number is ("linalg.generic
 * memref<64x128xf32>, ... at prog.mlir:12:5"), for the runner to name the
 * events (dtensor-run --profile). dtensor-to-llvm{profile=true} runs it
 * after the contractions became calls. */
#include "Lower/RuntimeCall.h"
#include "PassDef.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Func.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ops that only name memory or compute an index: not timed. */
static bool cheap(MlirOperation op) {
  static const char *const kCheap[] = {
      "memref.alloc",         "memref.alloca",
      "memref.dealloc",       "memref.subview",
      "memref.cast",          "memref.reinterpret_cast",
      "memref.expand_shape",  "memref.collapse_shape",
      "memref.get_global",    "memref.extract_strided_metadata",
      "memref.view",          "memref.dim",
      "memref.load",          "memref.store",
      "func.return",          "builtin.unrealized_conversion_cast",
      "bufferization.dealloc"};
  if (dtIsOpIn(op, "arith."))
    return true;
  for (size_t k = 0; k < sizeof(kCheap) / sizeof(kCheap[0]); ++k)
    if (dtIsOp(op, kCheap[k]))
      return true;
  if (dtIsOp(op, "func.call")) {
    MlirStringRef callee =
        mlirFlatSymbolRefAttrGetValue(mlirOperationGetAttributeByName(
            op, mlirStringRefCreateFromCString("callee")));
    return callee.length > 12 && !memcmp(callee.data, "dtrt_profile", 12);
  }
  return false;
}

/* What the event of `op` is called: its name (a call: the callee), its
 * operands' types and its location. */
static void describe(MlirOperation op, DtBuf *t) {
  if (dtIsOp(op, "func.call")) {
    MlirStringRef callee =
        mlirFlatSymbolRefAttrGetValue(mlirOperationGetAttributeByName(
            op, mlirStringRefCreateFromCString("callee")));
    dtBufPrintf(t, "call %.*s", (int)callee.length, callee.data);
  } else {
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
    dtBufAppend(t, name.data, name.length);
  }
  int shown = 0;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op) && shown < 4; ++i) {
    /* A runtime call's buffers are cast to unranked memrefs: the shapes are
     * the casts' sources'; a constant global (a contraction's maps) is not
     * data. */
    MlirValue v = mlirOperationGetOperand(op, i);
    MlirOperation def = mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v)
                                                : (MlirOperation){NULL};
    if (!mlirOperationIsNull(def) && dtIsOp(def, "memref.cast")) {
      v = mlirOperationGetOperand(def, 0);
      def = mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v)
                                    : (MlirOperation){NULL};
    }
    if (!mlirOperationIsNull(def) && dtIsOp(def, "memref.get_global"))
      continue;
    MlirType type = mlirValueGetType(v);
    if (!mlirTypeIsAShaped(type))
      continue;
    dtBufAppend(t, shown ? ", " : " ", shown ? 2 : 1);
    mlirTypePrint(type, dtBufAppendCallback, t);
    ++shown;
  }
  MlirLocation loc = mlirOperationGetLocation(op);
  if (mlirLocationIsAFileLineColRange(loc)) {
    MlirStringRef file =
        mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
    dtBufPrintf(t, " at %.*s:%d:%d", (int)file.length, file.data,
                mlirLocationFileLineColRangeGetStartLine(loc),
                mlirLocationFileLineColRangeGetStartColumn(loc));
  }
}

static bool runProfile(MlirOperation module, const DtPassOptions *options) {
  (void)options;
  DtRtBuilder b = dtRtBuilderBegin(module);
  MlirType i64 = mlirIntegerTypeGet(b.ctx, 64);
  MlirType fn = mlirFunctionTypeGet(b.ctx, 1, &i64, 0, NULL);
  MlirLocation unknown = mlirLocationUnknownGet(b.ctx);
  dtRtEnsureCallee(&b, "dtrt_profile_begin", fn, unknown);
  dtRtEnsureCallee(&b, "dtrt_profile_end", fn, unknown);
  DtOpList timed = {NULL, 0, 0};
  bool ok = true;
  for (MlirOperation f = mlirBlockGetFirstOperation(b.top);
       !mlirOperationIsNull(f) && ok; f = mlirOperationGetNextInBlock(f)) {
    if (!dtIsOp(f, "func.func") ||
        mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0))))
      continue;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body);
         !mlirOperationIsNull(op) && ok; op = mlirOperationGetNextInBlock(op))
      if (!cheap(op))
        ok = dtOpListPush(&timed, op);
  }
  MlirAttribute *names =
      ok ? calloc(timed.count + 1, sizeof(MlirAttribute)) : NULL;
  ok = ok && names;
  char text[1024];
  for (size_t k = 0; k < timed.count && ok; ++k) {
    MlirOperation op = timed.ops[k];
    DtBuf t = dtBufInit(text, sizeof(text));
    describe(op, &t);
    names[k] = mlirStringAttrGet(
        b.ctx,
        mlirStringRefCreate(text, t.length < sizeof(text) ? t.length
                                                          : sizeof(text) - 1));
    MlirValue id = dtRtConstI64(&b, (int64_t)k, op);
    MlirLocation loc = mlirOperationGetLocation(op);
    dtRtCall(&b, "dtrt_profile_begin", loc, 1, &id, op);
    dtRtCall(&b, "dtrt_profile_end", loc, 1, &id,
             mlirOperationGetNextInBlock(op));
  }
  if (ok)
    mlirOperationSetAttributeByName(
        module, mlirStringRefCreateFromCString("dtensor.profile_ops"),
        mlirArrayAttrGet(b.ctx, (intptr_t)timed.count, names));
  else
    mlirEmitError(mlirOperationGetLocation(module),
                  "dtensor-profile: out of memory");
  free(names);
  free(timed.ops);
  dtRtBuilderEnd(&b);
  return ok;
}

const DtPassDef dtProfilePass = {
    .info = {"dtensor-profile",
             "Time each op of the function bodies that costs time (calls of "
             "dtrt_profile_begin/end; the module's dtensor.profile_ops names "
             "them): dtensor-to-llvm{profile=true}, dtensor-run --profile",
             0, NULL},
    .verifyFirst = false,
    .run = runProfile,
    .numDependentDialects = 1,
    .dependentDialects = {mlirGetDialectHandle__func__},
};
