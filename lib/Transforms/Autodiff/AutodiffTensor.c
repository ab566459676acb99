/* dtensor-autodiff's adjoints of tensor ops (Autodiff.h): slices, pads,
 * concats and reshapes by their inverses, on static offsets and sizes (or
 * constant ones, as an unrolled loop's index makes them). */
#include "Autodiff.h"
#include "Dialect/DialectInternal.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

#include <stdio.h>
#include <string.h>

/* ---- tensor ops -------------------------------------------------------------
 */

/* Reads a static offsets / sizes / strides attribute into `out`; a dynamic
 * entry is the next of the op's operands from `*cursor` on, which must be a
 * constant (an unrolled loop's index). False otherwise. */
static bool staticList(MlirOperation op, const char *name, int64_t *out,
                       intptr_t *n, intptr_t *cursor) {
  MlirAttribute a = dtGetAttr(op, name);
  *n = mlirAttributeIsNull(a) ? 0 : mlirDenseArrayGetNumElements(a);
  for (intptr_t i = 0; i < *n; ++i) {
    out[i] = mlirDenseI64ArrayGetElement(a, i);
    if (out[i] == mlirShapedTypeGetDynamicSize() &&
        (*cursor >= mlirOperationGetNumOperands(op) ||
         !dtAdConstantIndex(mlirOperationGetOperand(op, (*cursor)++), &out[i])))
      return false;
  }
  return true;
}

/* Ends the template in `t` (its op's result type, then the return), and
 * adds what it makes of `args` (dy, then what else it takes) to the
 * adjoint of `x`. */
static void finish(DtAd *ad, MlirOperation op, DtBuf *t, MlirValue x,
                   const MlirValue *args) {
  MlirType tx = mlirValueGetType(x);
  MlirValue dx;
  dtAdTypeText(t, tx);
  dtBufPrintf(t, "\n  return %%r : ");
  dtAdTypeText(t, tx);
  dtBufPrintf(t, "\n}\n");
  if (dtAdEmit(ad, op, t, args, &dx, 1))
    dtAdAccumulate(ad, op, x, dx);
}

/* A static slice: offsets, sizes and strides of `n` dims. */
typedef struct Slice {
  int64_t off[16], size[16], stride[16];
  intptr_t n;
} Slice;

/* The slice attributes of extract_slice / insert_slice; false when one is
 * dynamic. */
static bool readSlice(MlirOperation op, intptr_t numTensors, Slice *sl) {
  intptr_t n2 = 0, n3 = 0, cursor = numTensors;
  return staticList(op, "static_offsets", sl->off, &sl->n, &cursor) &&
         staticList(op, "static_sizes", sl->size, &n2, &cursor) &&
         staticList(op, "static_strides", sl->stride, &n3, &cursor);
}

/* How an operand's adjoint comes from the result's, `dy`, by a slice. */
typedef enum SliceAdjoint {
  TAKE_SLICE,    /* the slice of dy (pad, concat, insert's source) */
  INTO_ZEROS,    /* dy inserted into zeros of the operand's type */
  ZERO_THE_SLICE /* dy with the slice zeroed (insert's destination) */
} SliceAdjoint;

/* Adds to operand `x`'s adjoint what `how` makes of `op`'s result adjoint
 * through `sl`; `piece`: the type of the slice (insert's source). */
static void sliceAdjoint(DtAd *ad, MlirOperation op, MlirValue x,
                         SliceAdjoint how, const Slice *sl, MlirType piece) {
  if (!dtAdActive(ad, x))
    return;
  MlirValue y = mlirOperationGetResult(op, 0), dy = dtAdAdjoint(ad, y);
  MlirType ty = mlirValueGetType(y), tx = mlirValueGetType(x);
  DtBuf t = dtBufInit(ad->text, DT_AD_TEXT_SIZE);
  dtBufPrintf(&t, "func.func @adj(%%dy: ");
  dtAdTypeText(&t, ty);
  dtBufPrintf(&t, ") -> ");
  dtAdTypeText(&t, tx);
  dtBufPrintf(&t, " {\n");
  if (how == TAKE_SLICE) {
    dtBufPrintf(&t, "  %%r = tensor.extract_slice %%dy");
  } else {
    dtAdZeros(&t, "z", how == INTO_ZEROS ? tx : piece);
    dtBufPrintf(&t, "  %%r = tensor.insert_slice %s",
                how == INTO_ZEROS ? "%dy into %z" : "%z into %dy");
  }
  dtBufPrintList(&t, sl->off, sl->n);
  dtBufPrintf(&t, " ");
  dtBufPrintList(&t, sl->size, sl->n);
  dtBufPrintf(&t, " ");
  dtBufPrintList(&t, sl->stride, sl->n);
  dtBufPrintf(&t, " : ");
  dtAdTypeText(&t, how == TAKE_SLICE ? ty : how == INTO_ZEROS ? ty : piece);
  dtBufPrintf(&t, how == TAKE_SLICE ? " to " : " into ");
  finish(ad, op, &t, x, &dy);
}

/* The whole of operand `x` (static) at `at` along `dim`. */
static void wholeAt(MlirType tx, int dim, int64_t at, Slice *sl) {
  sl->n = mlirShapedTypeGetRank(tx);
  for (intptr_t d = 0; d < sl->n; ++d) {
    sl->off[d] = d == dim ? at : 0;
    sl->size[d] = mlirShapedTypeGetDimSize(tx, d);
    sl->stride[d] = 1;
  }
}

static void dynamicError(DtAd *ad, MlirOperation op) {
  dtOpError(op, "has dynamic offsets or sizes; dtensor-autodiff "
                "differentiates static ones");
  ad->failed = true;
}

/* Unary ops that only change the type (cast, annotate) or the shape
 * (reshapes): the adjoint is dy changed back by the op `prefix` names,
 * with `reassociation` and the operand's shape as output_shape when asked. */
static void unaryAdjoint(DtAd *ad, MlirOperation op, const char *prefix,
                         MlirAttribute reassociation, bool outputShape) {
  MlirValue y = mlirOperationGetResult(op, 0), dy = dtAdAdjoint(ad, y);
  MlirValue x = mlirOperationGetOperand(op, 0);
  MlirType ty = mlirValueGetType(y), tx = mlirValueGetType(x);
  if (mlirTypeEqual(tx, ty)) {
    dtAdAccumulate(ad, op, x, dy);
    return;
  }
  DtBuf t = dtBufInit(ad->text, DT_AD_TEXT_SIZE);
  dtBufPrintf(&t, "func.func @adj(%%dy: ");
  dtAdTypeText(&t, ty);
  dtBufPrintf(&t, ") -> ");
  dtAdTypeText(&t, tx);
  dtBufPrintf(&t, " {\n  %%r = %s %%dy", prefix);
  if (!mlirAttributeIsNull(reassociation)) {
    dtBufPrintf(&t, " ");
    mlirAttributePrint(reassociation, dtBufSink, &t);
  }
  if (outputShape) {
    dtBufPrintf(&t, " output_shape [");
    for (intptr_t d = 0; d < mlirShapedTypeGetRank(tx); ++d)
      dtBufPrintf(&t, "%s%lld", d ? ", " : "",
                  (long long)mlirShapedTypeGetDimSize(tx, d));
    dtBufPrintf(&t, "]");
  }
  dtBufPrintf(&t, " : ");
  dtAdTypeText(&t, ty);
  dtBufPrintf(&t, mlirAttributeIsNull(reassociation) ? " to " : " into ");
  finish(ad, op, &t, x, &dy);
}

/* `dims` of a gather or scatter_add from `d`: the table (destination),
 * the index tensors, then `last` for the other side. */
static void dimsText(DtBuf *t, const DtGatherDims *d, bool scatter) {
  dtBufPrintf(t, "\"%s", d->table);
  for (int k = 0; k < d->numIndices; ++k)
    dtBufPrintf(t, ",%s", d->index[k]);
  if (scatter)
    dtBufPrintf(t, ",%s->%s\"", d->other, d->table);
  else
    dtBufPrintf(t, "->%s\"", d->other);
}

/* A gather's adjoint adds dy into zeros of the table at the same indices
 * (a scatter_add); a scatter_add's passes dy to the destination and gives
 * the updates dy looked up at the indices (a gather). */
static void gatherAdjoint(DtAd *ad, MlirOperation op) {
  DtGatherDims d;
  if (!dtGatherDimsOf(op, &d)) {
    ad->failed = true;
    return;
  }
  MlirValue y = mlirOperationGetResult(op, 0), dy = dtAdAdjoint(ad, y);
  MlirType ty = mlirValueGetType(y);
  MlirValue x = mlirOperationGetOperand(op, d.scatter ? 1 + d.numIndices : 0);
  if (d.scatter)
    dtAdAccumulate(ad, op, mlirOperationGetOperand(op, 0), dy);
  if (!dtAdActive(ad, x))
    return;
  if (d.scatter) {
    for (const char *c = d.other; *c; ++c) {
      bool known = strchr(d.table, *c) != NULL;
      for (int k = 0; k < d.numIndices && !known; ++k)
        known = strchr(d.index[k], *c) != NULL;
      if (!known) {
        dtOpError(op,
                  "has updates dim '%c' that neither the destination nor "
                  "an index tensor has; dtensor-autodiff has no "
                  "derivative for such a scatter_add",
                  *c);
        ad->failed = true;
        return;
      }
    }
  }
  MlirType tx = mlirValueGetType(x);
  MlirValue args[1 + DT_MAX_GATHER_INDICES];
  args[0] = dy;
  DtBuf t = dtBufInit(ad->text, DT_AD_TEXT_SIZE);
  dtBufPrintf(&t, "func.func @adj(%%dy: ");
  dtAdTypeText(&t, ty);
  for (int k = 0; k < d.numIndices; ++k) {
    args[1 + k] = mlirOperationGetOperand(op, dtGatherIndexOperand(k));
    dtBufPrintf(&t, ", %%i%d: ", k);
    dtAdTypeText(&t, mlirValueGetType(args[1 + k]));
  }
  dtBufPrintf(&t, ") -> ");
  dtAdTypeText(&t, tx);
  dtBufPrintf(&t, " {\n");
  if (!d.scatter)
    dtAdZeros(&t, "z", tx);
  dtBufPrintf(&t, "  %%r = \"%s\"(%s",
              d.scatter ? DT_OP_GATHER : DT_OP_SCATTER_ADD,
              d.scatter ? "%dy" : "%z");
  for (int k = 0; k < d.numIndices; ++k)
    dtBufPrintf(&t, ", %%i%d", k);
  dtBufPrintf(&t, "%s) {dims = ", d.scatter ? "" : ", %dy");
  dimsText(&t, &d, !d.scatter);
  dtBufPrintf(&t, "} : (");
  dtAdTypeText(&t, d.scatter ? ty : tx);
  for (int k = 0; k < d.numIndices; ++k) {
    dtBufPrintf(&t, ", ");
    dtAdTypeText(&t, mlirValueGetType(args[1 + k]));
  }
  if (!d.scatter) {
    dtBufPrintf(&t, ", ");
    dtAdTypeText(&t, ty);
  }
  dtBufPrintf(&t, ") -> ");
  finish(ad, op, &t, x, args);
}

void dtAdTensorAdjoint(DtAd *ad, MlirOperation op) {
  if (dtIsOp(op, DT_OP_GATHER) || dtIsOp(op, DT_OP_SCATTER_ADD))
    return gatherAdjoint(ad, op);
  MlirType ty = mlirValueGetType(mlirOperationGetResult(op, 0));
  Slice sl;
  if (dtIsOp(op, DT_OP_ANNOTATE) || dtIsOp(op, "tensor.cast"))
    return unaryAdjoint(ad, op, "tensor.cast", (MlirAttribute){NULL}, false);
  if (dtIsOp(op, "tensor.extract_slice")) {
    if (!readSlice(op, 1, &sl))
      return dynamicError(ad, op);
    return sliceAdjoint(ad, op, mlirOperationGetOperand(op, 0), INTO_ZEROS, &sl,
                        ty);
  }
  if (dtIsOp(op, "tensor.insert_slice")) {
    MlirValue src = mlirOperationGetOperand(op, 0);
    if (!readSlice(op, 2, &sl))
      return dynamicError(ad, op);
    sliceAdjoint(ad, op, src, TAKE_SLICE, &sl, ty);
    return sliceAdjoint(ad, op, mlirOperationGetOperand(op, 1), ZERO_THE_SLICE,
                        &sl, mlirValueGetType(src));
  }
  if (dtIsOp(op, "tensor.pad")) {
    MlirValue x = mlirOperationGetOperand(op, 0);
    intptr_t n = 0, cursor = 1;
    int64_t low[16];
    if (!staticList(op, "static_low", low, &n, &cursor) ||
        !mlirShapedTypeHasStaticShape(mlirValueGetType(x)))
      return dynamicError(ad, op);
    wholeAt(mlirValueGetType(x), -1, 0, &sl);
    memcpy(sl.off, low, sizeof(int64_t) * (size_t)n);
    return sliceAdjoint(ad, op, x, TAKE_SLICE, &sl, ty);
  }
  if (dtIsOp(op, "tensor.concat")) {
    int dim = (int)mlirIntegerAttrGetValueInt(dtGetAttr(op, "dim"));
    int64_t at = 0;
    for (intptr_t k = 0; k < mlirOperationGetNumOperands(op); ++k) {
      MlirValue x = mlirOperationGetOperand(op, k);
      if (!mlirShapedTypeHasStaticShape(mlirValueGetType(x)))
        return dynamicError(ad, op);
      wholeAt(mlirValueGetType(x), dim, at, &sl);
      at += sl.size[dim];
      sliceAdjoint(ad, op, x, TAKE_SLICE, &sl, ty);
    }
    return;
  }
  /* expand_shape and collapse_shape: the other one, same reassociation. */
  bool expand = dtIsOp(op, "tensor.expand_shape");
  if (!mlirShapedTypeHasStaticShape(
          mlirValueGetType(mlirOperationGetOperand(op, 0))) ||
      !mlirShapedTypeHasStaticShape(ty))
    return dynamicError(ad, op);
  unaryAdjoint(ad, op, expand ? "tensor.collapse_shape" : "tensor.expand_shape",
               dtGetAttr(op, "reassociation"), !expand);
}

bool dtAdIsTensorOp(MlirOperation op) {
  static const char *kNames[] = {
      "tensor.extract_slice", "tensor.insert_slice", "tensor.pad",
      "tensor.concat",        "tensor.expand_shape", "tensor.collapse_shape",
      "tensor.cast",          DT_OP_ANNOTATE,        DT_OP_GATHER,
      DT_OP_SCATTER_ADD};
  for (size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i)
    if (dtIsOp(op, kNames[i]))
      return true;
  return false;
}
