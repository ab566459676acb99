/* dtensor-partition: from the propagated global program to the program each
 * device runs (docs/partition.md).
 *
 * It reads what dtensor-propagate decided (`dtensor.layout` on values,
 * `dtensor.operand_layouts` on uses: attributes, or inside dtensor-spmd the
 * same in a DtDecisions table), then
 *  - gives every tensor value the padded local type of its layout
 *    (function arguments and results too: the calling convention);
 *  - inserts a per-device `dtensor.redistribute` wherever an operand's
 *    layout differs from the one its user needs (dtensor-lower-redistribute
 *    turns each into collectives: Partial values become all_reduce, or
 *    reduce_scatter where the user wants a shard);
 *  - fixes the ops whose attributes hold global sizes (slices, reshapes,
 *    splat constants) and removes annotations;
 *  - slices the inputs of reductions over uneven sharded dims to the
 *    device's real extent, so padding is never reduced;
 *  - drops the propagation attributes, keeping `dtensor.layout` and
 *    `dtensor.global_shape` on the function's arguments and results.
 *  - makes replicated values Partial where a user needs it (kept at mesh
 *    coordinate 0, the neutral element elsewhere).
 *  - adds the device's block offset to linalg.index of sharded loops.
 * A sharded non-splat constant is an error at the op. */
#include "Decisions.h"
#include "PassDef.h"
#include "Propagate/Rules.h"
#include "Util.h"

#include "Support/Support.h"
#include "dtensor-c/Dialect.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Func.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "PartitionInternal.h"

void dtPartError(Part *p, MlirOperation op, const char *format, ...) {
  va_list args;
  va_start(args, format);
  dtOpErrorV(op, format, args);
  va_end(args);
  p->failed = true;
}

static uint64_t ptrHash(const void *v) {
  return dtHashMix(0x51, (uint64_t)(uintptr_t)v);
}

static bool sameValue(const void *entry, const void *key) {
  return ((const ValueEntry *)entry)->value == key;
}

const Value *dtPartValueOf(const Part *p, MlirValue v) {
  const ValueEntry *e =
      dtTableFind(&p->values, ptrHash(v.ptr), sameValue, v.ptr);
  return e ? e->info : NULL;
}

/* Gives value `v` the shared `info`. */
static void setValue(Part *p, MlirOperation at, const void *v,
                     const Value *info) {
  ValueEntry *e = dtTableInsert(&p->values, ptrHash(v));
  if (!e) {
    dtPartError(p, at, "out of memory");
    return;
  }
  e->value = v;
  e->info = info;
}

static bool sameInterned(const void *entry, const void *key) {
  const Interned *a = entry, *b = key;
  return a->attr == b->attr && a->type == b->type;
}

static bool isTensor(MlirType t) {
  return mlirTypeIsARankedTensor(t) && mlirShapedTypeHasStaticShape(t) &&
         mlirShapedTypeGetRank(t) <= DTENSOR_MAX_TENSOR_RANK;
}

/* The padded local type of layout `l` for elements of `global`'s type. */
static MlirType blockType(const DtensorLayout *l, MlirType global) {
  int64_t local[DTENSOR_MAX_TENSOR_RANK];
  dtensorLayoutGetMaxLocalShape(l, local);
  return mlirRankedTensorTypeGet(l->rank, local,
                                 mlirShapedTypeGetElementType(global),
                                 mlirAttributeGetNull());
}

/* The padded local type of a tensor of `type` (global) under `spec`. */
static MlirType localType(const Part *p, MlirType type,
                          const DtensorShardingSpec *spec) {
  DtensorLayout l;
  int rank = (int)mlirShapedTypeGetRank(type);
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  for (int d = 0; d < rank; ++d)
    shape[d] = mlirShapedTypeGetDimSize(type, d);
  DtensorElementType et = DTENSOR_F32;
  dtensorElementTypeFromMlir(mlirShapedTypeGetElementType(type), &et);
  if (!dtensorLayoutInit(p->mesh, spec, rank, shape, et, &l, NULL))
    return type;
  return blockType(&l, type);
}

/* The local type of a value of global `type` that has info `v`. */
static MlirType localOf(const Part *p, const Value *v, MlirType type) {
  return mlirTypeEqual(type, v->global) ? v->local
                                        : localType(p, type, &v->spec);
}

/* Records the layout of `v` (of global type), checking it; returns the
 * shared info (NULL after an error or for a non-tensor). A null `v` only
 * looks the info up. */
static const Value *recordAs(Part *p, MlirOperation at, MlirValue v,
                             MlirAttribute attr, MlirType type);

static void record(Part *p, MlirOperation at, MlirValue v, MlirAttribute attr) {
  (void)recordAs(p, at, v, attr, mlirValueGetType(v));
}

/* Records `v` as a value of global `type` with layout `attr`. */
static const Value *recordAs(Part *p, MlirOperation at, MlirValue v,
                             MlirAttribute attr, MlirType type) {
  if (mlirAttributeIsNull(attr) || mlirAttributeIsAUnit(attr) ||
      !isTensor(type))
    return NULL;
  Interned key = {attr.ptr, type.ptr, NULL};
  uint64_t hash = dtHashMix(ptrHash(attr.ptr), ptrHash(type.ptr));
  const Interned *known = dtTableFind(&p->interned, hash, sameInterned, &key);
  if (known) {
    if (!mlirValueIsNull(v))
      setValue(p, at, v.ptr, known->info);
    return known->info;
  }
  DtensorDiag diag;
  DtensorShardingSpec spec;
  MlirIdentifier meshId;
  if (!dtLayoutCacheRead(&p->layouts, at, attr, type, &spec, &meshId, &diag)) {
    dtPartError(p, at, "%s", diag.message);
    return NULL;
  }
  if (!p->mesh) {
    DtensorLayout first;
    DtensorMesh *mesh = NULL;
    if (!dtensorLayoutFromAttr(at, attr, type, &mesh, &first, &diag)) {
      dtPartError(p, at, "%s", diag.message);
      return NULL;
    }
    p->mesh = mesh;
    p->meshId = meshId;
    MlirStringRef name = mlirIdentifierStr(meshId);
    snprintf(p->meshName, sizeof(p->meshName), "%.*s", (int)name.length,
             name.data);
  } else if (!mlirIdentifierEqual(meshId, p->meshId)) {
    MlirStringRef name = mlirIdentifierStr(meshId);
    dtPartError(p, at,
                "uses mesh '@%s' and '@%.*s'; a function is partitioned "
                "on one mesh",
                p->meshName, (int)name.length, name.data);
    return NULL;
  }
  DtensorLayout layout;
  int rank = (int)mlirShapedTypeGetRank(type);
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  for (int d = 0; d < rank; ++d)
    shape[d] = mlirShapedTypeGetDimSize(type, d);
  DtensorElementType et = DTENSOR_F32;
  dtensorElementTypeFromMlir(mlirShapedTypeGetElementType(type), &et);
  if (!dtensorLayoutInit(p->mesh, &spec, rank, shape, et, &layout, &diag)) {
    dtPartError(p, at, "%s", diag.message);
    return NULL;
  }
  Value *info = malloc(sizeof(Value));
  Interned *slot = info ? dtTableInsert(&p->interned, hash) : NULL;
  if (!slot) {
    free(info);
    dtPartError(p, at, "out of memory");
    return NULL;
  }
  info->layout = attr;
  info->spec = layout.spec;
  info->rank = layout.rank;
  memcpy(info->shape, layout.shape, sizeof(int64_t) * (size_t)layout.rank);
  info->global = type;
  info->local = blockType(&layout, type);
  *slot = key;
  slot->info = info;
  if (!mlirValueIsNull(v))
    setValue(p, at, v.ptr, info);
  return info;
}

static MlirAttribute listElement(MlirAttribute list, intptr_t i) {
  if (mlirAttributeIsNull(list))
    return list;
  if (!mlirAttributeIsAArray(list))
    return i == 0 ? list : mlirAttributeGetNull();
  return i < mlirArrayAttrGetNumElements(list)
             ? mlirArrayAttrGetElement(list, i)
             : mlirAttributeGetNull();
}

static MlirAttribute argLayout(MlirOperation func, const char *key,
                               intptr_t i) {
  MlirAttribute list = dtGetAttr(func, key);
  if (mlirAttributeIsNull(list) || i >= mlirArrayAttrGetNumElements(list))
    return mlirAttributeGetNull();
  return mlirDictionaryAttrGetElementByName(
      mlirArrayAttrGetElement(list, i),
      mlirStringRefCreateFromCString(DT_ATTR_LAYOUT));
}

/* Whether propagation decided for `op` (given its result layouts): an op
 * with a tensor result needs its layouts, an op that reads a value with a
 * layout needs its operand layouts. Without them partition would keep the
 * op's global types beside local operands, or return a block in a layout
 * the signature does not declare; it says so instead. */
static bool notPropagated(Part *p, MlirOperation op, MlirAttribute layouts) {
  const char *what = NULL;
  if (mlirAttributeIsNull(layouts))
    for (intptr_t j = 0; !what && j < mlirOperationGetNumResults(op); ++j)
      if (isTensor(mlirValueGetType(mlirOperationGetResult(op, j))))
        what = "result";
  if (!what &&
      mlirAttributeIsNull(dtDecisionGet(p->decisions, op, DT_DECIDED_OPERANDS)))
    for (intptr_t i = 0; !what && i < mlirOperationGetNumOperands(op); ++i)
      if (dtPartValueOf(p, mlirOperationGetOperand(op, i)))
        what = "operand";
  if (!what)
    return true;
  /* Inside an op propagation does not enter, running it again would not
   * help: name that op. */
  for (MlirOperation up = mlirOperationGetParentOperation(op);
       !mlirOperationIsNull(up) && !mlirOperationEqual(up, p->func);
       up = mlirOperationGetParentOperation(up)) {
    if (dtIsOp(up, "scf.for") || dtIsOp(up, "scf.if") ||
        dtIsOp(up, "scf.while"))
      continue;
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(up));
    dtPartError(p, op,
                "has no %s layout: it is inside '%.*s', which "
                "dtensor-propagate does not enter (it handles regions of "
                "scf.for, scf.if and scf.while; a linalg body must not read "
                "whole tensors)",
                what, (int)name.length, name.data);
    return false;
  }
  /* A value of an element type layouts do not carry was never given one:
   * say so rather than blame the pipeline. */
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j) {
    MlirType t = mlirValueGetType(mlirOperationGetResult(op, j));
    DtensorElementType et;
    if (isTensor(t) &&
        !dtensorElementTypeFromMlir(mlirShapedTypeGetElementType(t), &et)) {
      char name[64];
      dtTypePrint(mlirShapedTypeGetElementType(t), name, sizeof(name));
      dtPartError(p, op,
                  "has a result of element type %s, which dtensor-propagate "
                  "does not lay out (it lays out f32, f64, f16, bf16, "
                  "f8E4M3FN, f8E5M2, i1, i8, i16, i32, i64 and ui8): a "
                  "program on sharded %s "
                  "values is not supported",
                  name, name);
      return false;
    }
  }
  dtPartError(p, op,
              "has no %s layout: it was not propagated; run "
              "dtensor-propagate before dtensor-partition",
              what);
  return false;
}

static MlirWalkResult collect(MlirOperation op, void *userData) {
  Part *p = userData;
  if (mlirOperationEqual(op, p->func))
    return MlirWalkResultAdvance;
  if (p->numOps == p->capOps) {
    size_t cap = p->capOps ? 2 * p->capOps : 256;
    MlirOperation *ops = realloc(p->ops, sizeof(MlirOperation) * cap);
    if (!ops) {
      dtPartError(p, op, "out of memory");
      return MlirWalkResultInterrupt;
    }
    p->ops = ops;
    p->capOps = cap;
  }
  p->ops[p->numOps++] = op;
  MlirAttribute layouts = dtDecisionGet(p->decisions, op, DT_DECIDED_LAYOUT);
  if (!notPropagated(p, op, layouts))
    return MlirWalkResultInterrupt;
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j)
    record(p, op, mlirOperationGetResult(op, j), listElement(layouts, j));
  /* A loop's iteration arguments have its result layouts (a while loop's
   * arguments in both regions: it carries replicated values). */
  if (dtIsOp(op, "scf.for")) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
    for (intptr_t k = 0; k + 1 < mlirBlockGetNumArguments(body); ++k)
      record(p, op, mlirBlockGetArgument(body, k + 1), listElement(layouts, k));
  }
  if (dtIsOp(op, "scf.while"))
    for (intptr_t r = 0; r < 2; ++r) {
      MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
      for (intptr_t k = 0; k < mlirBlockGetNumArguments(b); ++k)
        record(p, op, mlirBlockGetArgument(b, k), listElement(layouts, k));
    }
  return p->failed ? MlirWalkResultInterrupt : MlirWalkResultAdvance;
}

/* ---- building ops -------------------------------------------------------- */

MlirValue dtPartIndexConst(Part *p, MlirOperation before, int64_t v) {
  (void)p;
  return dtBuildIndexConst(before, v);
}

MlirValue dtPartBinary(Part *p, MlirOperation before, const char *name,
                       MlirValue a, MlirValue b) {
  (void)p;
  return dtBuildIndexBinary(before, name, a, b);
}

/* ---- rewriting ----------------------------------------------------------- */

static MlirAttribute i64Array(Part *p, int n, const int64_t *v) {
  return mlirDenseI64ArrayGet(p->ctx, n, v);
}

/* Whether `init` is a fill with the neutral element of `kind`, which makes
 * it a valid Partial value as it stands on every device. */
static bool neutralInit(MlirValue init, DtensorReduceKind kind) {
  if (kind == DTENSOR_REDUCE_MAX || kind == DTENSOR_REDUCE_MIN ||
      kind == DTENSOR_REDUCE_AVG)
    return true; /* the same init on every device combines to itself */
  if (!mlirValueIsAOpResult(init))
    return false;
  MlirOperation fill = mlirOpResultGetOwner(init);
  if (!dtIsOp(fill, "linalg.fill"))
    return false;
  MlirValue scalar = mlirOperationGetOperand(fill, 0);
  if (!mlirValueIsAOpResult(scalar) ||
      !dtIsOp(mlirOpResultGetOwner(scalar), "arith.constant"))
    return false;
  MlirAttribute v = dtGetAttr(mlirOpResultGetOwner(scalar), "value");
  double x;
  if (mlirAttributeIsAFloat(v))
    x = mlirFloatAttrGetValueDouble(v);
  else if (mlirAttributeIsAInteger(v))
    x = (double)mlirIntegerAttrGetValueInt(v);
  else
    return false;
  return kind == DTENSOR_REDUCE_SUM ? x == 0.0 : x == 1.0;
}

static bool sameConversion(const void *entry, const void *key) {
  const Converted *a = entry, *b = key;
  return a->value == b->value && a->dst == b->dst;
}

/* Whether an op at the end of `block` (so far) dominates `op`: `block`
 * holds `op` or one of its ancestors (ops are rewritten in program order,
 * so what was inserted there comes first). */
static bool dominates(MlirBlock block, MlirOperation op) {
  for (MlirOperation at = op; !mlirOperationIsNull(at);
       at = mlirOperationGetParentOperation(at))
    if (mlirBlockEqual(mlirOperationGetBlock(at), block))
      return true;
  return false;
}

/* A dtensor.redistribute of operand `i` of `op` from `have` to `need`
 * (`wantAttr`, or built from `need` when null). */
static void insertRedistribute(Part *p, MlirOperation op, intptr_t i,
                               const Value *have,
                               const DtensorShardingSpec *need,
                               MlirAttribute wantAttr) {
  MlirValue v = mlirOperationGetOperand(op, i);
  MlirAttribute dst =
      mlirAttributeIsNull(wantAttr)
          ? dtensorLayoutAttrGet(
                p->ctx, mlirStringRefCreateFromCString(p->meshName), need)
          : wantAttr;
  /* The same value converted to the same layout by an op that dominates
   * this one is reused (CSE does not merge dtensor ops). */
  Converted key = {v.ptr, dst.ptr, {NULL}, {NULL}};
  uint64_t hash = dtHashMix(ptrHash(v.ptr), ptrHash(dst.ptr));
  Converted *done = dtTableFind(&p->converted, hash, sameConversion, &key);
  if (done && dominates(done->block, op)) {
    mlirOperationSetOperand(op, i, done->result);
    return;
  }
  /* The target's info: the result's local type, and the layout what
   * follows (slicing reductions, offsetting indices) reads. */
  const Value *target = recordAs(p, op, (MlirValue){NULL}, dst, have->global);
  if (!target)
    return;
  MlirOperation r = dtBuildRedistribute(
      &p->ids, op, mlirOperationGetLocation(op), v, target->local, have->layout,
      dst, i64Array(p, have->rank, have->shape));
  MlirValue result = mlirOperationGetResult(r, 0);
  mlirOperationSetOperand(op, i, result);
  setValue(p, op, result.ptr, target);
  if (!done)
    done = dtTableInsert(&p->converted, hash);
  if (done) {
    *done = key;
    done->result = result;
    done->block = mlirOperationGetBlock(op);
  }
}

static MlirAttribute meshRefOf(Part *p) {
  return mlirFlatSymbolRefAttrGet(p->ctx,
                                  mlirStringRefCreateFromCString(p->meshName));
}

MlirOperation dtPartMeshIndex(Part *p, MlirOperation at, int numAxes,
                              const int *axes) {
  return dtBuildMeshIndex(at, meshRefOf(p), numAxes, axes);
}

/* Operand `i` of `op` (replicated over the `axes` mask) becomes Partial
 * (`kind`, sum or prod) over them: kept where this device's coordinates on
 * those axes are all 0, the neutral element elsewhere (the coordinates
 * computed once, at the function's entry). */
static void keepOnFirst(Part *p, MlirOperation op, intptr_t i, unsigned axes,
                        DtensorReduceKind kind) {
  int list[DTENSOR_MAX_MESH_RANK];
  int n = 0;
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    if (axes & (1u << a))
      list[n++] = a;
  mlirOperationSetOperand(op, i,
                          dtBuildKeepOnFirst(p->entryFirst, op, meshRefOf(p), n,
                                             list, kind,
                                             mlirOperationGetOperand(op, i)));
}

/* Converts operand `i` of `op` to the layout its use needs. */
static void convertOperand(Part *p, MlirOperation op, intptr_t i,
                           MlirAttribute wantAttr) {
  MlirValue v = mlirOperationGetOperand(op, i);
  const Value *have = dtPartValueOf(p, v);
  if (!have) {
    dtPartError(p, op,
                "operand %ld has no layout; run dtensor-propagate before "
                "dtensor-partition",
                (long)i);
    return;
  }
  DtensorDiag diag;
  DtensorShardingSpec need;
  if (!dtLayoutCacheRead(&p->layouts, op, wantAttr, have->global, &need, NULL,
                         &diag)) {
    dtPartError(p, op, "operand %ld: %s", (long)i, diag.message);
    return;
  }
  bool dropped = false;
  /* Partial the value does not have: a local step (Replicate -> Partial),
   * free for a neutral init, else the value is kept on the devices at
   * coordinate 0 of those axes and the others take the neutral element. */
  unsigned created = 0;
  DtensorReduceKind createdKind = DTENSOR_REDUCE_NONE;
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    if (need.partial[a] != DTENSOR_REDUCE_NONE &&
        have->spec.partial[a] == DTENSOR_REDUCE_NONE) {
      if (!neutralInit(v, need.partial[a])) {
        if (createdKind != DTENSOR_REDUCE_NONE &&
            createdKind != need.partial[a]) {
          dtPartError(p, op,
                      "operand %ld must become Partial of two kinds (%s "
                      "and %s) at once, which no local step gives",
                      (long)i, dtensorReduceKindGetName(createdKind),
                      dtensorReduceKindGetName(need.partial[a]));
          return;
        }
        createdKind = need.partial[a];
        created |= 1u << a;
      }
      need.partial[a] = DTENSOR_REDUCE_NONE;
      dropped = true;
    }
  if (!dtensorShardingSpecEqual(&need, &have->spec))
    insertRedistribute(p, op, i, have, &need,
                       dropped ? mlirAttributeGetNull() : wantAttr);
  if (created)
    keepOnFirst(p, op, i, created, createdKind);
}

/* A sharded constant that is not a splat stays whole (replicated: every
 * device's program holds all of it anyway) and each device takes its block
 * through a redistribute from replicated, which lowers to local_split. */
static void splitConstant(Part *p, MlirOperation op) {
  MlirValue c = mlirOperationGetResult(op, 0);
  const Value *v = dtPartValueOf(p, c);
  MlirType global = mlirAttributeGetType(dtGetAttr(op, "value"));
  if (!v) {
    dtPartError(p, op,
                "has no layout; run dtensor-propagate before "
                "dtensor-partition");
    return;
  }
  for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a)
    if (v->spec.partial[a] != DTENSOR_REDUCE_NONE) {
      dtPartError(p, op, "is a constant with a Partial layout");
      return;
    }
  mlirValueSetType(c, global);
  DtensorShardingSpec replicated;
  dtensorShardingSpecInitReplicated(v->rank, &replicated);
  Value whole = *v;
  whole.spec = replicated;
  whole.layout = dtensorLayoutAttrGet(
      p->ctx, mlirStringRefCreateFromCString(p->meshName), &replicated);
  /* Every user of the constant takes the block: a redistribute before the
   * op after the constant, then the uses moved to it. */
  MlirOperation next = mlirOperationGetNextInBlock(op);
  MlirLocation loc = mlirOperationGetLocation(op);
  MlirType local = localType(p, global, &v->spec);
  MlirOperation r =
      dtBuildRedistribute(&p->ids, next, loc, c, local, whole.layout, v->layout,
                          i64Array(p, v->rank, v->shape));
  MlirValue block = mlirOperationGetResult(r, 0);
  mlirValueReplaceAllUsesExcept(c, block, 1, &r);
  /* Users read the block's layout from the table. */
  setValue(p, op, block.ptr, v);
}

/* Sizes in slice attributes that are global sizes of sharded dims become
 * local. */
void dtPartFixSliceSizes(Part *p, MlirOperation op) {
  bool extract = dtIsOp(op, "tensor.extract_slice");
  MlirValue small =
      extract ? mlirOperationGetResult(op, 0) : mlirOperationGetOperand(op, 0);
  MlirAttribute sizes = dtGetAttr(op, "static_sizes");
  MlirType t = mlirValueGetType(small);
  intptr_t n = mlirDenseArrayGetNumElements(sizes);
  if (mlirShapedTypeGetRank(t) != n || n > DTENSOR_MAX_TENSOR_RANK)
    return;
  int64_t v[DTENSOR_MAX_TENSOR_RANK], offsets[DTENSOR_MAX_TENSOR_RANK];
  MlirAttribute offsetAttr = dtGetAttr(op, "static_offsets");
  bool moved = false;
  for (intptr_t d = 0; d < n; ++d) {
    v[d] = mlirShapedTypeGetDimSize(t, d);
    /* A group of an interleaved dim (the slice's dim sharded, its offset
     * a multiple of its size): the same group of the local block. */
    int64_t global = mlirDenseI64ArrayGetElement(sizes, d);
    offsets[d] = mlirDenseI64ArrayGetElement(offsetAttr, d);
    if (offsets[d] > 0 && global != v[d] && global > 0 &&
        !mlirShapedTypeIsDynamicDim(t, d)) {
      offsets[d] = offsets[d] / global * v[d];
      moved = true;
    }
  }
  mlirOperationSetInherentAttributeByName(
      op, mlirStringRefCreateFromCString("static_sizes"),
      i64Array(p, (int)n, v));
  if (moved)
    mlirOperationSetInherentAttributeByName(
        op, mlirStringRefCreateFromCString("static_offsets"),
        i64Array(p, (int)n, offsets));
}

/* An expand_shape's output shape is its (now local) result type's. */
void dtPartFixExpandShape(Part *p, MlirOperation op) {
  MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
  int n = (int)mlirShapedTypeGetRank(t);
  int64_t v[DTENSOR_MAX_TENSOR_RANK];
  for (int d = 0; d < n; ++d)
    v[d] = mlirShapedTypeGetDimSize(t, d);
  mlirOperationSetInherentAttributeByName(
      op, mlirStringRefCreateFromCString("static_output_shape"),
      i64Array(p, n, v));
}

/* A tosa.reshape's new shape and a tosa.slice's size are the (now local)
 * result type's: a tosa.const_shape of those dims, made right before the
 * op (the original may serve other ops). A slice's start is 0 on every
 * sharded dim (its rule shards only dims taken whole), so it stays. */
void dtPartFixTosaShape(Part *p, MlirOperation op) {
  intptr_t operand = dtIsOp(op, "tosa.slice") ? 2 : 1;
  MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
  MlirValue shape = mlirOperationGetOperand(op, operand);
  int n = (int)mlirShapedTypeGetRank(t);
  if (n > DTENSOR_MAX_TENSOR_RANK || mlirOperationGetNumOperands(op) <= operand)
    return;
  int64_t v[DTENSOR_MAX_TENSOR_RANK];
  for (int d = 0; d < n; ++d)
    v[d] = mlirShapedTypeGetDimSize(t, d);
  MlirContext ctx = mlirOperationGetContext(op);
  int64_t dims[1] = {n};
  MlirType valuesType = mlirRankedTensorTypeGet(1, dims, mlirIndexTypeGet(ctx),
                                                mlirAttributeGetNull());
  MlirNamedAttribute values = dtNamedAttr(
      ctx, "values", mlirDenseElementsAttrInt64Get(valuesType, n, v));
  MlirType shapeType = mlirValueGetType(shape);
  MlirOperation made =
      dtOpCreate(op, mlirOperationGetLocation(op), "tosa.const_shape", 0, NULL,
                 1, &shapeType, 1, &values);
  (void)p;
  mlirOperationSetOperand(op, operand, mlirOperationGetResult(made, 0));
}

/* A splat constant gets its local type; another dense constant is split
 * (its value is global). */
void dtPartFixConstant(Part *p, MlirOperation op) {
  MlirAttribute value = dtGetAttr(op, "value");
  MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
  if (!mlirAttributeIsADenseElements(value) ||
      mlirTypeEqual(mlirAttributeGetType(value), t))
    return;
  if (!mlirDenseElementsAttrIsSplat(value)) {
    splitConstant(p, op);
    return;
  }
  mlirOperationSetInherentAttributeByName(
      op, mlirStringRefCreateFromCString("value"),
      mlirDenseElementsAttrSplatGet(t,
                                    mlirDenseElementsAttrGetSplatValue(value)));
}

/* What propagation leaves on ops: its decisions (Table.h) and, with
 * `why`, its explanations. */
#define NUM_PROPAGATION_ATTRS (DT_NUM_DECIDED + 1)

static const char *propagationAttr(int k) {
  return k < DT_NUM_DECIDED ? dtDecidedName((DtDecided)k) : DT_ATTR_WHY;
}

static void rewriteOp(Part *p, MlirOperation op) {
  const DtOpFamily *family = dtOpFamilyOf(op);
  if (family && family->partitionBefore)
    family->partitionBefore(p, op);
  MlirAttribute uses = dtDecisionGet(p->decisions, op, DT_DECIDED_OPERANDS);
  for (intptr_t i = 0; !mlirAttributeIsNull(uses) &&
                       i < mlirOperationGetNumOperands(op) && !p->failed;
       ++i) {
    MlirAttribute want = listElement(uses, i);
    if (!mlirAttributeIsNull(want) && !mlirAttributeIsAUnit(want))
      convertOperand(p, op, i, want);
  }
  if (!p->failed)
    dtPartSliceReductions(p, op);
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j) {
    MlirValue r = mlirOperationGetResult(op, j);
    const Value *v = dtPartValueOf(p, r);
    if (v)
      mlirValueSetType(r, localOf(p, v, mlirValueGetType(r)));
  }
  /* A redistribute the user wrote in the global program becomes a
   * per-device one: local types (above) and the global shape. */
  if (dtIsOp(op, DT_OP_REDISTRIBUTE) &&
      mlirAttributeIsNull(dtGetAttr(op, "global_shape"))) {
    const Value *v = dtPartValueOf(p, mlirOperationGetResult(op, 0));
    if (v)
      mlirOperationSetAttributeByName(
          op, mlirStringRefCreateFromCString("global_shape"),
          i64Array(p, v->rank, v->shape));
  }
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(op) &&
                       (dtIsOp(op, "scf.for") || dtIsOp(op, "scf.while"));
       ++r) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
    for (intptr_t k = dtIsOp(op, "scf.for"); k < mlirBlockGetNumArguments(body);
         ++k) {
      MlirValue arg = mlirBlockGetArgument(body, k);
      const Value *v = dtPartValueOf(p, arg);
      if (v)
        mlirBlockArgumentSetType(arg, localOf(p, v, mlirValueGetType(arg)));
    }
  }
  if (family && family->partitionAfter && !p->failed)
    family->partitionAfter(p, op);
  bool anyDiscardable = mlirOperationGetNumDiscardableAttributes(op) > 0;
  for (int k = 0; anyDiscardable && k < NUM_PROPAGATION_ATTRS; ++k) {
    /* Looking up is cheaper than removing (which builds the name). */
    MlirStringRef key = mlirStringRefCreateFromCString(propagationAttr(k));
    if (!mlirAttributeIsNull(
            mlirOperationGetDiscardableAttributeByName(op, key)))
      mlirOperationRemoveDiscardableAttributeByName(op, key);
  }
}

/* The function's arguments and results: local types, with the layout and
 * the global shape as attributes (the calling convention). */
static void rewriteSignature(Part *p, MlirOperation func, MlirBlock entry,
                             MlirOperation ret) {
  intptr_t numArgs = mlirBlockGetNumArguments(entry);
  intptr_t numResults =
      mlirOperationIsNull(ret) ? 0 : mlirOperationGetNumOperands(ret);
  MlirType *types =
      malloc(sizeof(MlirType) * (size_t)(numArgs + numResults + 1));
  if (!types) {
    dtPartError(p, func, "out of memory");
    return;
  }
  MlirType fnType = mlirTypeAttrGetValue(dtGetAttr(func, "function_type"));
  MlirStringRef shapeKey = mlirStringRefCreateFromCString(DT_ATTR_GLOBAL_SHAPE);
  for (intptr_t i = 0; i < numArgs; ++i) {
    MlirValue arg = mlirBlockGetArgument(entry, i);
    types[i] = mlirValueGetType(arg);
    const Value *v = dtPartValueOf(p, arg);
    if (v)
      mlirFuncSetArgAttr(func, i, shapeKey, i64Array(p, v->rank, v->shape));
  }
  for (intptr_t j = 0; j < numResults; ++j) {
    MlirValue r = mlirOperationGetOperand(ret, j);
    types[numArgs + j] = mlirValueGetType(r);
    MlirType global = mlirFunctionTypeGetResult(fnType, j);
    if (isTensor(global)) {
      int64_t shape[DTENSOR_MAX_TENSOR_RANK];
      int rank = (int)mlirShapedTypeGetRank(global);
      for (int d = 0; d < rank; ++d)
        shape[d] = mlirShapedTypeGetDimSize(global, d);
      mlirFuncSetResultAttr(func, j, shapeKey, i64Array(p, rank, shape));
    }
  }
  MlirType newType =
      mlirFunctionTypeGet(p->ctx, numArgs, types, numResults, types + numArgs);
  mlirOperationSetInherentAttributeByName(
      func, mlirStringRefCreateFromCString("function_type"),
      mlirTypeAttrGet(newType));
  free(types);
}

/* A declaration (a function defined elsewhere) follows the same calling
 * convention: its signature becomes the local types of its layouts (and
 * gets their global shapes), so that calls, whose operands and results are
 * now local blocks, match it. */
static void partitionDeclaration(Part *p, MlirOperation func) {
  MlirType fnType = mlirTypeAttrGetValue(dtGetAttr(func, "function_type"));
  intptr_t numInputs = mlirFunctionTypeGetNumInputs(fnType);
  intptr_t numResults = mlirFunctionTypeGetNumResults(fnType);
  MlirType *types =
      malloc(sizeof(MlirType) * (size_t)(numInputs + numResults + 1));
  if (!types) {
    dtPartError(p, func, "out of memory");
    return;
  }
  MlirStringRef shapeKey = mlirStringRefCreateFromCString(DT_ATTR_GLOBAL_SHAPE);
  bool changed = false;
  for (intptr_t k = 0; k < numInputs + numResults && !p->failed; ++k) {
    bool input = k < numInputs;
    intptr_t i = input ? k : k - numInputs;
    MlirType global = input ? mlirFunctionTypeGetInput(fnType, i)
                            : mlirFunctionTypeGetResult(fnType, i);
    const Value *v =
        recordAs(p, func, (MlirValue){NULL},
                 argLayout(func, input ? "arg_attrs" : "res_attrs", i), global);
    types[k] = v ? v->local : global;
    if (!v)
      continue;
    changed = true;
    MlirAttribute shape = i64Array(p, v->rank, v->shape);
    if (input)
      mlirFuncSetArgAttr(func, i, shapeKey, shape);
    else
      mlirFuncSetResultAttr(func, i, shapeKey, shape);
  }
  if (changed && !p->failed)
    mlirOperationSetInherentAttributeByName(
        func, mlirStringRefCreateFromCString("function_type"),
        mlirTypeAttrGet(mlirFunctionTypeGet(p->ctx, numInputs, types,
                                            numResults, types + numInputs)));
  free(types);
}

/* Interns the first result layout propagation decided, which sets the
 * function's mesh. */
static MlirWalkResult findPropagatedMesh(MlirOperation op, void *userData) {
  Part *p = userData;
  MlirAttribute layouts = dtDecisionGet(p->decisions, op, DT_DECIDED_LAYOUT);
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op) && !p->mesh &&
                       !p->failed && !mlirOperationEqual(op, p->func);
       ++j)
    recordAs(p, op, (MlirValue){NULL}, listElement(layouts, j),
             mlirValueGetType(mlirOperationGetResult(op, j)));
  return p->mesh || p->failed ? MlirWalkResultInterrupt : MlirWalkResultAdvance;
}

static void partitionFunction(Part *p, MlirOperation func) {
  char where[32];
  if (dtSignatureFind(func, true, where)) {
    dtPartError(p, func,
                "is already partitioned (%s has a dtensor.global_shape: "
                "its type is a device's block)",
                where);
    return;
  }
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  if (mlirBlockIsNull(entry)) {
    partitionDeclaration(p, func);
    return;
  }
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry); ++i)
    record(p, func, mlirBlockGetArgument(entry, i),
           argLayout(func, "arg_attrs", i));
  /* No argument has a layout (a function of constants, or layouts only on
   * its results or annotations): the mesh is the one propagation gave its
   * ops. */
  if (!p->mesh)
    mlirOperationWalk(func, findPropagatedMesh, p, MlirWalkPreOrder);
  if (!p->mesh || p->failed)
    return; /* nothing was propagated here */
  mlirOperationWalk(func, collect, p, MlirWalkPreOrder);
  if (p->failed)
    return;
  p->entryFirst = mlirBlockGetFirstOperation(entry);
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry); ++i) {
    MlirValue arg = mlirBlockGetArgument(entry, i);
    const Value *v = dtPartValueOf(p, arg);
    if (v)
      mlirBlockArgumentSetType(arg, localOf(p, v, mlirValueGetType(arg)));
  }
  MlirOperation ret = mlirBlockGetTerminator(entry);
  for (size_t k = 0; k < p->numOps && !p->failed; ++k)
    rewriteOp(p, p->ops[k]);
  if (p->failed)
    return;
  /* Annotations have done their work: their users take the converted
   * operand. */
  for (size_t k = 0; k < p->numOps; ++k) {
    MlirOperation op = p->ops[k];
    if (!dtIsOp(op, DT_OP_ANNOTATE))
      continue;
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0),
                                  mlirOperationGetOperand(op, 0));
    mlirOperationDestroy(op);
  }
  rewriteSignature(p, func, entry,
                   dtIsOp(ret, "func.return") ? ret : (MlirOperation){NULL});
}

static void freeInterned(void *entry, void *user) {
  (void)user;
  free(((Interned *)entry)->info);
}

static bool runPartition(MlirOperation root, const DtPassOptions *options) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  bool ok = true;
  for (MlirOperation op = mlirBlockIsNull(top)
                              ? (MlirOperation){NULL}
                              : mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (!dtIsOp(op, "func.func") || mlirOperationGetNumRegions(op) != 1)
      continue;
    Part p;
    memset(&p, 0, sizeof(p));
    p.ctx = mlirOperationGetContext(root);
    p.func = op;
    p.decisions = options->decisions;
    p.ids = dtIdsGet(p.ctx);
    p.values = dtTableInit(sizeof(ValueEntry));
    p.interned = dtTableInit(sizeof(Interned));
    p.converted = dtTableInit(sizeof(Converted));
    p.layouts = dtLayoutCacheInit();
    partitionFunction(&p, op);
    ok = ok && !p.failed;
    dtTableFree(&p.values);
    dtTableForEach(&p.interned, freeInterned, NULL);
    dtTableFree(&p.interned);
    dtTableFree(&p.converted);
    dtLayoutCacheFree(&p.layouts);
    free(p.ops);
    dtensorMeshDestroy(p.mesh);
  }
  return ok;
}

const DtPassDef dtPartitionPass = {
    .info = {"dtensor-partition",
             "Turn the propagated global program into the program each "
             "device runs: local types, redistributions where layouts differ",
             0, NULL},
    .verifyFirst = true,
    .run = runPartition,
};
