/* Building runtime calls (RuntimeCall.h). */
#include "RuntimeCall.h"

#include "dtensor-c/Dialect.h"
#include "dtensor-rt/Runtime.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

#include <stdlib.h>
#include <string.h>

DtRtBuilder dtRtBuilderBegin(MlirOperation module) {
  return (DtRtBuilder){
      mlirOperationGetContext(module),
      mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)),
      mlirSymbolTableCreate(module)};
}

void dtRtBuilderEnd(DtRtBuilder *b) { mlirSymbolTableDestroy(b->symbols); }

MlirOperation dtRtBuild(DtRtBuilder *b, const char *name, MlirLocation loc,
                        int nOperands, const MlirValue *operands, int nResults,
                        const MlirType *results, int nAttrs,
                        const MlirNamedAttribute *attrs, MlirOperation before) {
  MlirOperation op = dtOpCreateDetached(loc, name, nOperands, operands,
                                        nResults, results, nAttrs, attrs);
  if (mlirOperationIsNull(before))
    mlirBlockInsertOwnedOperationBefore(b->top, mlirBlockGetTerminator(b->top),
                                        op);
  else
    mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before,
                                        op);
  return op;
}

void dtRtEnsureGlobal(DtRtBuilder *b, const char *sym, int n,
                      const int64_t *values, MlirLocation loc) {
  if (!mlirOperationIsNull(mlirSymbolTableLookup(
          b->symbols, mlirStringRefCreateFromCString(sym))))
    return;
  int64_t shape[1] = {n};
  MlirType i64 = mlirIntegerTypeGet(b->ctx, 64);
  MlirType tensor =
      mlirRankedTensorTypeGet(1, shape, i64, mlirAttributeGetNull());
  MlirType memref =
      mlirMemRefTypeContiguousGet(i64, 1, shape, mlirAttributeGetNull());
  MlirAttribute *elems = malloc(sizeof(MlirAttribute) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; ++i)
    elems[i] = mlirIntegerAttrGet(i64, values[i]);
  MlirNamedAttribute attrs[5] = {
      dtNamedAttr(
          b->ctx, "sym_name",
          mlirStringAttrGet(b->ctx, mlirStringRefCreateFromCString(sym))),
      dtNamedAttr(
          b->ctx, "sym_visibility",
          mlirStringAttrGet(b->ctx, mlirStringRefCreateFromCString("private"))),
      dtNamedAttr(b->ctx, "type", mlirTypeAttrGet(memref)),
      dtNamedAttr(b->ctx, "initial_value",
                  mlirDenseElementsAttrGet(tensor, n, elems)),
      dtNamedAttr(b->ctx, "constant", mlirUnitAttrGet(b->ctx)),
  };
  free(elems);
  MlirOperation g = dtRtBuild(b, "memref.global", loc, 0, NULL, 0, NULL, 5,
                              attrs, mlirBlockGetFirstOperation(b->top));
  mlirSymbolTableInsert(b->symbols, g);
}

void dtRtEnsureCallee(DtRtBuilder *b, const char *sym, MlirType fn,
                      MlirLocation loc) {
  if (!mlirOperationIsNull(mlirSymbolTableLookup(
          b->symbols, mlirStringRefCreateFromCString(sym))))
    return;
  MlirNamedAttribute attrs[3] = {
      dtNamedAttr(
          b->ctx, "sym_name",
          mlirStringAttrGet(b->ctx, mlirStringRefCreateFromCString(sym))),
      dtNamedAttr(b->ctx, "function_type", mlirTypeAttrGet(fn)),
      dtNamedAttr(
          b->ctx, "sym_visibility",
          mlirStringAttrGet(b->ctx, mlirStringRefCreateFromCString("private"))),
  };
  MlirOperationState st =
      mlirOperationStateGet(mlirStringRefCreateFromCString("func.func"), loc);
  mlirOperationStateAddAttributes(&st, 3, attrs);
  MlirRegion body = mlirRegionCreate();
  mlirOperationStateAddOwnedRegions(&st, 1, &body);
  MlirOperation f = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(b->top, mlirBlockGetTerminator(b->top),
                                      f);
  mlirSymbolTableInsert(b->symbols, f);
}

MlirValue dtRtConstI64(DtRtBuilder *b, int64_t v, MlirOperation before) {
  MlirType i64 = mlirIntegerTypeGet(b->ctx, 64);
  MlirNamedAttribute a =
      dtNamedAttr(b->ctx, "value", mlirIntegerAttrGet(i64, v));
  return mlirOperationGetResult(dtRtBuild(b, "arith.constant",
                                          mlirOperationGetLocation(before), 0,
                                          NULL, 1, &i64, 1, &a, before),
                                0);
}

MlirValue dtRtCastUnranked(DtRtBuilder *b, MlirValue memref,
                           MlirOperation before) {
  MlirType t = mlirValueGetType(memref);
  MlirType u = mlirUnrankedMemRefTypeGet(mlirShapedTypeGetElementType(t),
                                         mlirAttributeGetNull());
  return mlirOperationGetResult(dtRtBuild(b, "memref.cast",
                                          mlirOperationGetLocation(before), 1,
                                          &memref, 1, &u, 0, NULL, before),
                                0);
}

MlirValue dtRtGlobal(DtRtBuilder *b, const char *sym, int n,
                     MlirOperation before) {
  int64_t shape[1] = {n};
  MlirType i64 = mlirIntegerTypeGet(b->ctx, 64);
  MlirType memref =
      mlirMemRefTypeContiguousGet(i64, 1, shape, mlirAttributeGetNull());
  MlirNamedAttribute a = dtNamedAttr(
      b->ctx, "name",
      mlirFlatSymbolRefAttrGet(b->ctx, mlirStringRefCreateFromCString(sym)));
  MlirValue g = mlirOperationGetResult(
      dtRtBuild(b, "memref.get_global", mlirOperationGetLocation(before), 0,
                NULL, 1, &memref, 1, &a, before),
      0);
  return dtRtCastUnranked(b, g, before);
}

static MlirOperation buildCall(DtRtBuilder *b, const char *callee,
                               MlirLocation loc, int nArgs,
                               const MlirValue *args, int nResults,
                               const MlirType *results, MlirOperation before) {
  MlirNamedAttribute attr = dtNamedAttr(
      b->ctx, "callee",
      mlirFlatSymbolRefAttrGet(b->ctx, mlirStringRefCreateFromCString(callee)));
  return dtRtBuild(b, "func.call", loc, nArgs, args, nResults, results, 1,
                   &attr, before);
}

void dtRtCall(DtRtBuilder *b, const char *callee, MlirLocation loc, int nArgs,
              const MlirValue *args, MlirOperation before) {
  buildCall(b, callee, loc, nArgs, args, 0, NULL, before);
}

MlirValue dtRtCallValue(DtRtBuilder *b, const char *callee, MlirLocation loc,
                        int nArgs, const MlirValue *args, MlirType result,
                        MlirOperation before) {
  return mlirOperationGetResult(
      buildCall(b, callee, loc, nArgs, args, 1, &result, before), 0);
}

const char *dtRtTypeName(MlirType t, int64_t *outCode) {
  /* The compiler's and the runtime's types share their names; the
   * runtime's list is read from its header (the compiler does not link
   * the runtime). */
  DtensorElementType et;
  if (!dtensorElementTypeFromMlir(t, &et))
    return NULL;
  const char *name = dtensorElementTypeGetName(et);
#define DT_RT_TYPE(e, text, size)                                              \
  if (!strcmp(name, text)) {                                                   \
    if (outCode)                                                               \
      *outCode = e;                                                            \
    return text;                                                               \
  }
  DTRT_DTYPE_LIST(DT_RT_TYPE)
#undef DT_RT_TYPE
  return NULL;
}
