/* dtensor-partition on uneven shards: the inputs of reductions over
 * uneven sharded dims are sliced to the device's real extent (so padding
 * is never reduced), and linalg.index of sharded loops gets the device's
 * block offset; the index values they need (shard index, block offset,
 * real extent) are computed once per function. */
#include "PartitionInternal.h"
#include "Propagate/Rules.h"
#include "Util.h"

#include "Support/Support.h"
#include "dtensor-c/Dialect.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

#include <string.h>

typedef struct Indices {
  MlirOperation ops[64];
  int count;
  bool overflow;
} Indices;

static MlirWalkResult findIndex(MlirOperation op, void *userData) {
  Indices *found = userData;
  if (dtIsOp(op, "linalg.index")) {
    if (found->count == 64) {
      found->overflow = true;
      return MlirWalkResultInterrupt;
    }
    found->ops[found->count++] = op;
  }
  return MlirWalkResultAdvance;
}

/* ---- uneven shards: padding out of reductions --------------------------- */

/* A padded block's padding holds anything (collectives and elementwise ops
 * leave it as it comes), which is harmless wherever a dim is parallel. A
 * reduction loop sharded over an uneven dim must not visit it: each such
 * input is sliced to the device's real extent along the dim,
 * clamp(size - shard * chunk, 0, chunk) with the shard index from
 * dtensor.mesh_index, so the local op runs on a dynamic size and counts
 * exactly the real elements, whatever its body computes (a device with
 * no real elements leaves the neutral init). */

/* Index values computed once per function at its entry, by what they are:
 * a shard index (kind 0), a block offset (1: shard * chunk) or a real
 * extent (2: clamp(size - shard * chunk, 0, chunk)), over a list of axes. */
static MlirValue *cached(Part *p, int kind, int64_t size, int64_t chunk,
                         int numAxes, const int *axes) {
  for (int k = 0; k < p->numExtents; ++k) {
    Extent *e = &p->extents[k];
    if (e->kind == kind && e->size == size && e->chunk == chunk &&
        e->numAxes == numAxes &&
        !memcmp(e->axes, axes, sizeof(int) * (size_t)numAxes))
      return &e->value;
  }
  if (p->numExtents == MAX_EXTENTS)
    return NULL;
  Extent *e = &p->extents[p->numExtents++];
  e->kind = kind;
  e->size = size;
  e->chunk = chunk;
  e->numAxes = numAxes;
  memcpy(e->axes, axes, sizeof(int) * (size_t)numAxes);
  e->value = (MlirValue){NULL};
  return &e->value;
}

/* This device's shard index over `axes` (row-major). */
static MlirValue shardIndex(Part *p, int numAxes, const int *axes) {
  MlirValue *slot = cached(p, 0, 0, 0, numAxes, axes);
  if (slot && !mlirValueIsNull(*slot))
    return *slot;
  MlirOperation at = p->entryFirst;
  MlirOperation coords = dtPartMeshIndex(p, at, numAxes, axes);
  MlirValue shard = mlirOperationGetResult(coords, 0);
  for (int k = 1; k < numAxes; ++k) {
    MlirValue size =
        dtPartIndexConst(p, at, dtensorMeshGetAxisSize(p->mesh, axes[k]));
    shard = dtPartBinary(p, at, "arith.addi",
                         dtPartBinary(p, at, "arith.muli", shard, size),
                         mlirOperationGetResult(coords, k));
  }
  if (slot)
    *slot = shard;
  return shard;
}

/* The offset of this device's block: shard * chunk. */
static MlirValue blockOffset(Part *p, int64_t chunk, int numAxes,
                             const int *axes) {
  MlirValue *slot = cached(p, 1, 0, chunk, numAxes, axes);
  if (slot && !mlirValueIsNull(*slot))
    return *slot;
  MlirOperation at = p->entryFirst;
  MlirValue offset =
      dtPartBinary(p, at, "arith.muli", shardIndex(p, numAxes, axes),
                   dtPartIndexConst(p, at, chunk));
  if (slot)
    *slot = offset;
  return offset;
}

/* The device's real extent of a dim of `size` cut in blocks of `chunk`. */
static MlirValue realExtent(Part *p, int64_t size, int64_t chunk, int numAxes,
                            const int *axes) {
  MlirValue *slot = cached(p, 2, size, chunk, numAxes, axes);
  if (slot && !mlirValueIsNull(*slot))
    return *slot;
  MlirOperation at = p->entryFirst;
  MlirValue rem =
      dtPartBinary(p, at, "arith.subi", dtPartIndexConst(p, at, size),
                   blockOffset(p, chunk, numAxes, axes));
  MlirValue real = dtPartBinary(
      p, at, "arith.minsi",
      dtPartBinary(p, at, "arith.maxsi", rem, dtPartIndexConst(p, at, 0)),
      dtPartIndexConst(p, at, chunk));
  if (slot)
    *slot = real;
  return real;
}

/* Operand `i` of `op` becomes its slice [0, real extent) along dim `d`. */
static void sliceOperand(Part *p, MlirOperation op, intptr_t i, int d,
                         const Value *v) {
  MlirValue x = mlirOperationGetOperand(op, i);
  MlirType t = mlirValueGetType(x);
  int rank = (int)mlirShapedTypeGetRank(t);
  MlirValue real = realExtent(p, v->shape[d], mlirShapedTypeGetDimSize(t, d),
                              v->spec.numAxes[d], v->spec.axes[d]);
  int64_t offsets[DTENSOR_MAX_TENSOR_RANK], sizes[DTENSOR_MAX_TENSOR_RANK],
      strides[DTENSOR_MAX_TENSOR_RANK];
  for (int k = 0; k < rank; ++k) {
    offsets[k] = 0;
    sizes[k] = k == d ? mlirShapedTypeGetDynamicSize()
                      : mlirShapedTypeGetDimSize(t, k);
    strides[k] = 1;
  }
  MlirType sliced = mlirRankedTensorTypeGet(
      rank, sizes, mlirShapedTypeGetElementType(t), mlirAttributeGetNull());
  int32_t segments[4] = {1, 0, 1, 0};
  MlirNamedAttribute attrs[4] = {
      dtNamedAttr(p->ctx, "static_offsets",
                  mlirDenseI64ArrayGet(p->ctx, rank, offsets)),
      dtNamedAttr(p->ctx, "static_sizes",
                  mlirDenseI64ArrayGet(p->ctx, rank, sizes)),
      dtNamedAttr(p->ctx, "static_strides",
                  mlirDenseI64ArrayGet(p->ctx, rank, strides)),
      dtNamedAttr(p->ctx, "operandSegmentSizes",
                  mlirDenseI32ArrayGet(p->ctx, 4, segments)),
  };
  MlirValue operands[2] = {x, real};
  mlirOperationSetOperand(
      op, i,
      mlirOperationGetResult(dtOpCreate(op, mlirOperationGetLocation(op),
                                        "tensor.extract_slice", 2, operands, 1,
                                        &sliced, 4, attrs),
                             0));
}

static int64_t numShards(const Part *p, const DtensorShardingSpec *s, int d) {
  int64_t n = 1;
  for (int k = 0; k < s->numAxes[d]; ++k)
    n *= dtensorMeshGetAxisSize(p->mesh, s->axes[d][k]);
  return n;
}

/* Slices the inputs of an op along its sharded reduction loops where their
 * dims are uneven. */
void dtPartSliceReductions(Part *p, MlirOperation op) {
  MlirAttribute loops = dtDecisionGet(p->decisions, op, DT_DECIDED_LOOPS);
  if (mlirAttributeIsNull(loops) || !mlirAttributeIsAArray(loops))
    return;
  /* Deriving the rule costs more than the rest of the op's rewrite: only
   * an operand with an uneven sharded dim needs it. */
  bool uneven = false;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op) && !uneven; ++i) {
    const Value *v = dtPartValueOf(p, mlirOperationGetOperand(op, i));
    for (int d = 0; v && d < v->rank && !uneven; ++d)
      uneven = v->spec.numAxes[d] > 0 &&
               v->shape[d] % numShards(p, &v->spec, d) != 0;
  }
  if (!uneven)
    return;
  DtRule r;
  dtRuleGet(op, NULL, &r);
  /* A gather's sum over a sharded table dim adds one block's lookup
   * to zeros: padding is never looked up. */
  if (r.kind != DT_RULE_FACTORS || dtIsOp(op, DT_OP_GATHER))
    return;
  bool linalg =
      mlirOperationGetNumRegions(op) == 1 &&
      !strncmp(mlirIdentifierStr(mlirOperationGetName(op)).data, "linalg.", 7);
  for (int i = 0; i < r.numOperands && !p->failed; ++i) {
    if (!r.operandIsTensor[i] || r.isInit[i])
      continue;
    const Value *v = dtPartValueOf(p, mlirOperationGetOperand(op, i));
    if (!v)
      continue;
    for (int d = 0; d < v->rank && !p->failed; ++d) {
      int f = r.operandFactor[i][d];
      if (f < 0 || f >= mlirArrayAttrGetNumElements(loops) ||
          r.reduce[f] == DTENSOR_REDUCE_NONE ||
          mlirDenseArrayGetNumElements(mlirArrayAttrGetElement(loops, f)) == 0)
        continue;
      if (v->spec.numAxes[d] == 0 ||
          v->shape[d] % numShards(p, &v->spec, d) == 0)
        continue;
      if (!linalg) {
        dtPartError(p, op,
                    "reduces over dim %d of operand %d, sharded unevenly "
                    "(%lld over %lld); only linalg ops run reductions on "
                    "uneven shards so far",
                    d, i, (long long)v->shape[d],
                    (long long)numShards(p, &v->spec, d));
        return;
      }
      sliceOperand(p, op, i, d, v);
    }
  }
}

/* The mesh axes loop `f` is sharded over (propagation's decision
 * `loops`), in `axes`; returns how many (0 for a loop out of range). */
static int loopAxes(MlirAttribute loops, int64_t f, int *axes) {
  if (f < 0 || f >= mlirArrayAttrGetNumElements(loops))
    return 0;
  MlirAttribute a = mlirArrayAttrGetElement(loops, f);
  int n = (int)mlirDenseArrayGetNumElements(a);
  for (int i = 0; i < n && i < DTENSOR_MAX_MESH_RANK; ++i)
    axes[i] = (int)mlirDenseI64ArrayGetElement(a, i);
  return n < DTENSOR_MAX_MESH_RANK ? n : DTENSOR_MAX_MESH_RANK;
}

/* A linalg body reads global loop indices: each linalg.index of a sharded
 * loop gets this device's block offset added (shard * chunk, the chunk
 * being the loop's padded local size), so a program that computes values
 * from indices computes the same ones on every layout. */
void dtPartOffsetIndices(Part *p, MlirOperation op) {
  MlirAttribute loops = dtDecisionGet(p->decisions, op, DT_DECIDED_LOOPS);
  if (mlirAttributeIsNull(loops) || !mlirAttributeIsAArray(loops))
    return;
  bool sharded = false;
  for (intptr_t f = 0; f < mlirArrayAttrGetNumElements(loops); ++f)
    sharded |=
        mlirDenseArrayGetNumElements(mlirArrayAttrGetElement(loops, f)) > 0;
  if (!sharded)
    return;
  Indices found = {.count = 0, .overflow = false};
  mlirOperationWalk(op, findIndex, &found, MlirWalkPreOrder);
  if (found.overflow) {
    dtPartError(p, op,
                "reads more than 64 linalg.index in a body whose loops "
                "are sharded");
    return;
  }
  if (!found.count)
    return;
  DtRule r;
  dtRuleGet(op, NULL, &r);
  for (int k = 0; k < found.count; ++k) {
    MlirOperation index = found.ops[k];
    int64_t f = mlirIntegerAttrGetValueInt(dtGetAttr(index, "dim"));
    int axes[DTENSOR_MAX_MESH_RANK];
    int numAxes = loopAxes(loops, f, axes);
    if (numAxes == 0)
      continue;
    int64_t shards = 1;
    for (int i = 0; i < numAxes; ++i)
      shards *= dtensorMeshGetAxisSize(p->mesh, axes[i]);
    /* The loop's global size: a dim of an operand or result it spans. */
    int64_t size = -1;
    for (int i = 0; i < r.numOperands && size < 0; ++i) {
      const Value *v = r.operandIsTensor[i]
                           ? dtPartValueOf(p, mlirOperationGetOperand(op, i))
                           : NULL;
      for (int d = 0; v && d < v->rank && size < 0; ++d)
        if (r.operandFactor[i][d] == f)
          size = v->shape[d];
    }
    if (size < 0) {
      dtPartError(p, op,
                  "reads linalg.index %lld of a sharded loop that no "
                  "operand spans",
                  (long long)f);
      return;
    }
    MlirValue offset =
        blockOffset(p, (size + shards - 1) / shards, numAxes, axes);
    MlirValue local = mlirOperationGetResult(index, 0);
    MlirValue ops[2] = {local, offset};
    MlirType indexType = mlirIndexTypeGet(p->ctx);
    MlirOperation add =
        dtOpCreateDetached(mlirOperationGetLocation(index), "arith.addi", 2,
                           ops, 1, &indexType, 0, NULL);
    mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(index), index,
                                       add);
    mlirValueReplaceAllUsesExcept(local, mlirOperationGetResult(add, 0), 1,
                                  &add);
  }
}

void dtPartFixGather(Part *p, MlirOperation op) {
  MlirAttribute loops = dtDecisionGet(p->decisions, op, DT_DECIDED_LOOPS);
  if (mlirAttributeIsNull(loops) || !mlirAttributeIsAArray(loops))
    return;
  DtGatherDims d;
  if (!dtGatherDimsOf(op, &d)) {
    p->failed = true;
    return;
  }
  DtRule r;
  dtRuleGet(op, NULL, &r);
  MlirLocation loc = mlirOperationGetLocation(op);
  /* The table is local now: its gathered dim is one block (padded). */
  MlirType table = mlirValueGetType(mlirOperationGetOperand(op, 0));
  for (int k = 0; k < d.numIndices; ++k) {
    int axes[DTENSOR_MAX_MESH_RANK];
    int numAxes = loopAxes(loops, r.operandFactor[0][d.gathered[k]], axes);
    if (numAxes == 0)
      continue;
    MlirValue offset = blockOffset(
        p, mlirShapedTypeGetDimSize(table, d.gathered[k]), numAxes, axes);
    /* index - offset, elementwise on the local index tensor. */
    intptr_t at = dtGatherIndexOperand(k);
    MlirValue index = mlirOperationGetOperand(op, at);
    MlirType type = mlirValueGetType(index);
    MlirType elem = mlirShapedTypeGetElementType(type);
    MlirValue scalar = offset;
    if (!mlirTypeIsAIndex(elem))
      scalar = mlirOperationGetResult(dtOpCreate(op, loc, "arith.index_cast", 1,
                                                 &offset, 1, &elem, 0, NULL),
                                      0);
    MlirValue splat = mlirOperationGetResult(
        dtOpCreate(op, loc, "tensor.splat", 1, &scalar, 1, &type, 0, NULL), 0);
    MlirValue pair[2] = {index, splat};
    MlirValue local = mlirOperationGetResult(
        dtOpCreate(op, loc, "arith.subi", 2, pair, 1, &type, 0, NULL), 0);
    mlirOperationSetOperand(op, at, local);
  }
}
