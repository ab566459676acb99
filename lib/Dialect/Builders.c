/* Building ops: the generic builder every pass uses, and the dialect's ops
 * (redistribute, annotate, a collective from a CommSpec) with their
 * attributes in MLIR's sorted order and identifiers made once (DtIds). */
#include "DialectInternal.h"

#include "dtensor-c/Planner.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

MlirNamedAttribute dtNamedAttr(MlirContext ctx, const char *name,
                               MlirAttribute value) {
  return mlirNamedAttributeGet(
      mlirIdentifierGet(ctx, mlirStringRefCreateFromCString(name)), value);
}

MlirOperation dtOpCreateDetached(MlirLocation loc, const char *name,
                                 int nOperands, const MlirValue *operands,
                                 int nResults, const MlirType *results,
                                 int nAttrs, const MlirNamedAttribute *attrs) {
  MlirOperationState st =
      mlirOperationStateGet(mlirStringRefCreateFromCString(name), loc);
  if (nOperands)
    mlirOperationStateAddOperands(&st, nOperands, operands);
  if (nResults)
    mlirOperationStateAddResults(&st, nResults, results);
  if (nAttrs)
    mlirOperationStateAddAttributes(&st, nAttrs, attrs);
  return mlirOperationCreate(&st);
}

MlirOperation dtOpCreate(MlirOperation before, MlirLocation loc,
                         const char *name, int nOperands,
                         const MlirValue *operands, int nResults,
                         const MlirType *results, int nAttrs,
                         const MlirNamedAttribute *attrs) {
  MlirOperation op = dtOpCreateDetached(loc, name, nOperands, operands,
                                        nResults, results, nAttrs, attrs);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before,
                                      op);
  return op;
}

DtIds dtIdsGet(MlirContext ctx) {
#define DT_ID(text) mlirIdentifierGet(ctx, mlirStringRefCreateFromCString(text))
  DtIds ids = {DT_ID("dst"),    DT_ID("gather_dim"), DT_ID("global_shape"),
               DT_ID("layout"), DT_ID("mesh"),       DT_ID("mesh_axes"),
               DT_ID("reduce"), DT_ID("shard_dim"),  DT_ID("src")};
#undef DT_ID
  return ids;
}

MlirOperation dtBuildRedistribute(const DtIds *ids, MlirOperation before,
                                  MlirLocation loc, MlirValue value,
                                  MlirType result, MlirAttribute src,
                                  MlirAttribute dst,
                                  MlirAttribute globalShape) {
  MlirNamedAttribute attrs[3] = {
      mlirNamedAttributeGet(ids->dst, dst),
      mlirNamedAttributeGet(ids->globalShape, globalShape),
      mlirNamedAttributeGet(ids->src, src),
  };
  return dtOpCreate(before, loc, DT_OP_REDISTRIBUTE, 1, &value, 1, &result, 3,
                    attrs);
}

MlirOperation dtBuildAnnotate(const DtIds *ids, MlirOperation before,
                              MlirLocation loc, MlirValue value,
                              MlirAttribute layout) {
  MlirNamedAttribute attr = mlirNamedAttributeGet(ids->layout, layout);
  MlirType type = mlirValueGetType(value);
  return dtOpCreate(before, loc, DT_OP_ANNOTATE, 1, &value, 1, &type, 1, &attr);
}

MlirOperation dtBuildCollective(const DtIds *ids, MlirOperation before,
                                MlirAttribute meshRef, const DtensorCommSpec *c,
                                MlirValue input, MlirType result) {
  MlirContext ctx = mlirOperationGetContext(before);
  const DtCollectiveInfo *row = dtCollectiveOfPattern(c->pattern);
  if (!row) /* identity: nothing to build */
    return (MlirOperation){NULL};
  int64_t axes[DTENSOR_MAX_MESH_RANK];
  for (int i = 0; i < c->numAxes; ++i)
    axes[i] = c->axes[i];
  MlirType i64 = mlirIntegerTypeGet(ctx, 64);
  MlirNamedAttribute attrs[5];
  int n = 0;
  if (c->gatherDim >= 0)
    attrs[n++] = mlirNamedAttributeGet(
        ids->gatherDim, mlirIntegerAttrGet(i64, (int64_t)c->gatherDim));
  attrs[n++] = mlirNamedAttributeGet(ids->mesh, meshRef);
  attrs[n++] = mlirNamedAttributeGet(
      ids->meshAxes, mlirDenseI64ArrayGet(ctx, c->numAxes, axes));
  if (c->reduce != DTENSOR_REDUCE_NONE)
    attrs[n++] = mlirNamedAttributeGet(
        ids->reduce,
        mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(
                                   dtensorReduceKindGetName(c->reduce))));
  if (c->shardDim >= 0)
    attrs[n++] = mlirNamedAttributeGet(
        ids->shardDim, mlirIntegerAttrGet(i64, (int64_t)c->shardDim));
  return dtOpCreate(before, mlirOperationGetLocation(before), row->name, 1,
                    &input, 1, &result, n, attrs);
}

MlirValue dtBuildIndexConst(MlirOperation before, int64_t v) {
  MlirContext ctx = mlirOperationGetContext(before);
  MlirType index = mlirIndexTypeGet(ctx);
  MlirNamedAttribute a =
      dtNamedAttr(ctx, "value", mlirIntegerAttrGet(index, v));
  return mlirOperationGetResult(
      dtOpCreate(before, mlirOperationGetLocation(before), "arith.constant", 0,
                 NULL, 1, &index, 1, &a),
      0);
}

MlirValue dtBuildIndexBinary(MlirOperation before, const char *name,
                             MlirValue a, MlirValue b) {
  MlirValue ops[2] = {a, b};
  MlirType index = mlirIndexTypeGet(mlirOperationGetContext(before));
  return mlirOperationGetResult(dtOpCreate(before,
                                           mlirOperationGetLocation(before),
                                           name, 2, ops, 1, &index, 0, NULL),
                                0);
}

MlirOperation dtBuildMeshIndex(MlirOperation before, MlirAttribute meshRef,
                               int numAxes, const int *axes) {
  MlirContext ctx = mlirOperationGetContext(before);
  int64_t list[DTENSOR_MAX_MESH_RANK];
  MlirType types[DTENSOR_MAX_MESH_RANK];
  for (int k = 0; k < numAxes; ++k) {
    list[k] = axes[k];
    types[k] = mlirIndexTypeGet(ctx);
  }
  MlirNamedAttribute attrs[2] = {
      dtNamedAttr(ctx, "mesh", meshRef),
      dtNamedAttr(ctx, "mesh_axes", mlirDenseI64ArrayGet(ctx, numAxes, list))};
  return dtOpCreate(before, mlirOperationGetLocation(before), DT_OP_MESH_INDEX,
                    0, NULL, numAxes, types, 2, attrs);
}

/* The neutral element of `kind` for elements of `t`. */
static MlirAttribute neutral(MlirType t, DtensorReduceKind kind) {
  if (!mlirTypeIsAInteger(t))
    return mlirFloatAttrDoubleGet(mlirTypeGetContext(t), t,
                                  kind == DTENSOR_REDUCE_PROD ? 1.0 : 0.0);
  return mlirIntegerAttrGet(t, kind == DTENSOR_REDUCE_PROD ? 1 : 0);
}

MlirValue dtBuildKeepOnFirst(MlirOperation coordsAt, MlirOperation before,
                             MlirAttribute meshRef, int numAxes,
                             const int *axes, DtensorReduceKind kind,
                             MlirValue x) {
  if (kind != DTENSOR_REDUCE_SUM && kind != DTENSOR_REDUCE_PROD)
    return x; /* max, min, avg of equal contributions: the value itself */
  MlirContext ctx = mlirOperationGetContext(before);
  MlirOperation coords = dtBuildMeshIndex(coordsAt, meshRef, numAxes, axes);
  /* The sum of coordinates is 0 exactly when each is. */
  MlirValue sum = mlirOperationGetResult(coords, 0);
  for (int k = 1; k < numAxes; ++k)
    sum = dtBuildIndexBinary(coordsAt, "arith.addi", sum,
                             mlirOperationGetResult(coords, k));
  MlirType i1 = mlirIntegerTypeGet(ctx, 1);
  MlirValue cmp[2] = {sum, dtBuildIndexConst(coordsAt, 0)};
  MlirNamedAttribute pred = dtNamedAttr(
      ctx, "predicate", mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), 0));
  MlirValue first = mlirOperationGetResult(
      dtOpCreate(coordsAt, mlirOperationGetLocation(coordsAt), "arith.cmpi", 2,
                 cmp, 1, &i1, 1, &pred),
      0);
  MlirType t = mlirValueGetType(x);
  MlirType elt = mlirShapedTypeGetElementType(t);
  MlirNamedAttribute value = dtNamedAttr(
      ctx, "value", mlirDenseElementsAttrSplatGet(t, neutral(elt, kind)));
  MlirValue other = mlirOperationGetResult(
      dtOpCreate(before, mlirOperationGetLocation(before), "arith.constant", 0,
                 NULL, 1, &t, 1, &value),
      0);
  MlirValue ops[3] = {first, x, other};
  return mlirOperationGetResult(
      dtOpCreate(before, mlirOperationGetLocation(before), "arith.select", 3,
                 ops, 1, &t, 0, NULL),
      0);
}
