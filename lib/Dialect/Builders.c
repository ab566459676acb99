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
