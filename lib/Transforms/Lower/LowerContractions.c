/* dtensor-lower-contractions: after bufferization, every contraction the
 * runtime runs on BLAS (Contraction.h: read from indexing maps and the body
 * alone, so named, transposed, batched and generic forms alike, on any
 * strided view) becomes a call of libdtensor_rt's
 * dtrt_mlir_contract_<a>_<b>_<c> (lib/Runtime/Contract.c) with the maps as
 * a constant global; when a zero linalg.fill of the output comes right
 * before it, the call overwrites the output and the fill goes. Everything
 * else stays linalg, for convert-linalg-to-loops. */
#include "Contraction.h"
#include "PassDef.h"
#include "RuntimeCall.h"
#include "Util.h"

#include "dtensor-rt/Runtime.h"
#include "mlir-c/AffineExpr.h"
#include "mlir-c/AffineMap.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/Linalg.h"
#include "mlir-c/Dialect/MemRef.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Lower {
  DtRtBuilder b;
  bool failed;
} Lower;

/* The buffer `v` is a reshape of (memref.expand_shape/collapse_shape: the
 * same memory, all of it), or `v` itself. */
static MlirValue wholeBuffer(MlirValue v) {
  while (mlirValueIsAOpResult(v)) {
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!dtIsOp(def, "memref.expand_shape") &&
        !dtIsOp(def, "memref.collapse_shape"))
      break;
    v = mlirOperationGetOperand(def, 0);
  }
  return v;
}

/* `prev` (the op before a contraction, or null) fills the contraction's
 * output with zeros: then the call overwrites C and the fill can go. */
static bool isZeroFillOf(MlirOperation prev, MlirValue out) {
  return dtIsZeroFill(prev) &&
         mlirValueEqual(wholeBuffer(dtZeroFillOutput(prev)), wholeBuffer(out));
}

/* One contraction on memrefs to a runtime call (`prev`: the op before it
 * in its block, or null); false when it stays a linalg op. */
static bool lowerOne(Lower *l, MlirOperation op, MlirOperation prev) {
  const char *names[3];
  int64_t maps[DT_CONTRACTION_MAPS];
  int numMaps;
  if (!dtContractionMatchBlas(op, names, maps, &numMaps))
    return false;
  MlirType types[3];
  for (int i = 0; i < 3; ++i)
    types[i] = mlirValueGetType(mlirOperationGetOperand(op, i));
  /* One global per distinct set of maps: __dtensor_contract_<values>. */
  char sym[32 + 21 * DT_CONTRACTION_MAPS] = "__dtensor_contract";
  size_t at = strlen(sym);
  for (int i = 0; i < numMaps; ++i)
    at += (size_t)snprintf(sym + at, sizeof(sym) - at, "_%lld",
                           (long long)maps[i]);
  MlirLocation loc = mlirOperationGetLocation(op);
  dtRtEnsureGlobal(&l->b, sym, numMaps, maps, loc);
  char callee[64];
  snprintf(callee, sizeof(callee), "dtrt_mlir_contract_%s_%s_%s", names[0],
           names[1], names[2]);
  MlirType inputs[5] = {
      mlirIntegerTypeGet(l->b.ctx, 64),
      mlirUnrankedMemRefTypeGet(mlirIntegerTypeGet(l->b.ctx, 64),
                                mlirAttributeGetNull())};
  for (int i = 0; i < 3; ++i)
    inputs[2 + i] = mlirUnrankedMemRefTypeGet(
        mlirShapedTypeGetElementType(types[i]), mlirAttributeGetNull());
  dtRtEnsureCallee(&l->b, callee,
                   mlirFunctionTypeGet(l->b.ctx, 5, inputs, 0, NULL), loc);
  bool overwrite = isZeroFillOf(prev, mlirOperationGetOperand(op, 2));
  MlirValue args[5] = {dtRtConstI64(&l->b, overwrite, op),
                       dtRtGlobal(&l->b, sym, numMaps, op)};
  for (int i = 0; i < 3; ++i)
    args[2 + i] = dtRtCastUnranked(&l->b, mlirOperationGetOperand(op, i), op);
  dtRtCall(&l->b, callee, loc, 5, args, op);
  mlirOperationDestroy(op);
  if (overwrite)
    mlirOperationDestroy(prev);
  return true;
}

/* Collects the contractions under `block` in pairs (op, the zero fill
 * before it in its block with only views and constants between, or null:
 * nothing else is kept, since lowering destroys ops). */
static bool collect(MlirBlock block, DtOpList *found) {
  MlirOperation prev = {NULL};
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (mlirLinalgIsAContractionOp(op) &&
        (!dtOpListPush(found, op) || !dtOpListPush(found, prev)))
      return false;
    for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r)
      for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
           !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
        if (!collect(b, found))
          return false;
    /* Views and constants between the fill and the contraction touch no
     * memory (bufferization puts reshapes of the output there). */
    if (dtIsZeroFill(op))
      prev = op;
    else if (!dtIsOp(op, "memref.expand_shape") &&
             !dtIsOp(op, "memref.collapse_shape") &&
             !dtIsOp(op, "memref.cast") && !dtIsOp(op, "arith.constant"))
      prev = (MlirOperation){NULL};
  }
  return true;
}

static bool runLowerContractions(MlirOperation root,
                                 const DtPassOptions *options) {
  (void)options;
  Lower l = {dtRtBuilderBegin(root), false};
  DtOpList found = {NULL, 0, 0};
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(root); ++r)
    for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, r));
         !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
      if (!collect(b, &found)) {
        mlirEmitError(mlirOperationGetLocation(root),
                      "dtensor-lower-contractions: out of memory");
        l.failed = true;
      }
  for (size_t i = 0; i + 1 < found.count; i += 2) {
    MlirOperation op = found.ops[i], prev = found.ops[i + 1];
    if (mlirOperationGetNumResults(op) > 0) {
      MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
      char message[256];
      snprintf(message, sizeof(message),
               "'%.*s' op is on tensors: dtensor-lower-contractions runs on "
               "memrefs, after one-shot-bufferize",
               (int)name.length, name.data);
      mlirEmitError(mlirOperationGetLocation(op), message);
      l.failed = true;
      break;
    }
    lowerOne(&l, op, prev);
  }
  free(found.ops);
  dtRtBuilderEnd(&l.b);
  return !l.failed;
}

const DtPassDef dtLowerContractionsPass = {
    .info = {"dtensor-lower-contractions",
             "Turn every floating-point contraction on memrefs (matmul, "
             "batch_matmul, matvec, dot, transposed or generic) into a BLAS "
             "call of libdtensor_rt (dtrt_mlir_contract_<types>)",
             0, NULL},
    .verifyFirst = false,
    .run = runLowerContractions,
    .numDependentDialects = 3,
    .dependentDialects = {mlirGetDialectHandle__memref__,
                          mlirGetDialectHandle__arith__,
                          mlirGetDialectHandle__func__},
};
