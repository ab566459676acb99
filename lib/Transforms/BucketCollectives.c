/* dtensor-bucket-collectives: on the per-device program (after
 * dtensor-partition), all_reduces of one kind on one group are merged into
 * buckets of at most `bucket-bytes`: their blocks flattened and
 * concatenated, one all_reduce, the sums split back. A data parallel
 * training step reduces one gradient per parameter; each collective pays
 * the group's latency, a bucket pays it once (PyTorch's DDP buckets its
 * gradients the same way, 25 MiB by default).
 *
 * Buckets form in program order: an all_reduce joins the open bucket of its
 * kind (mesh, axes, reduction, element type) while the bucket stays under
 * the size and nothing has used a member's result yet; the merged
 * collective goes where the bucket's last member was, so every member's
 * operand is ready and every use comes after.
 *
 * Each element is still reduced over the same ranks, but the runtime gives
 * each rank a part of the buffer to reduce, starting from its own value:
 * in a bucket an element may fall in another rank's part, and with more
 * than two ranks its sum may round differently from the unbucketed
 * collective's. The order depends only on the program, the bucket size and
 * the group, so it is the same on every run (deterministic), and two
 * ranks' sums are the same either way. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "RuntimeCall.h"
#include "Table.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MEMBERS 256

typedef struct Bucket {
  MlirOperation members[MAX_MEMBERS];
  int count;
  int64_t bytes;
  bool open;
} Bucket;

typedef struct Bucketing {
  DtRtBuilder b;
  int64_t limit;
  Bucket *buckets;
  size_t numBuckets, capBuckets;
  int merged, removed;
} Bucketing;

static bool staticTensor(MlirValue v) {
  MlirType t = mlirValueGetType(v);
  return mlirTypeIsARankedTensor(t) && mlirShapedTypeHasStaticShape(t);
}

static int64_t bytesOf(MlirValue v) {
  MlirType t = mlirValueGetType(v);
  int64_t n = 1;
  for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); ++d)
    n *= mlirShapedTypeGetDimSize(t, d);
  int bits =
      mlirTypeIsAFloat(mlirShapedTypeGetElementType(t))
          ? (int)mlirFloatTypeGetWidth(mlirShapedTypeGetElementType(t))
          : (int)mlirIntegerTypeGetWidth(mlirShapedTypeGetElementType(t));
  return n * ((bits + 7) / 8);
}

/* Whether two all_reduces may share a bucket. */
static bool sameKind(MlirOperation a, MlirOperation b) {
  static const char *kAttrs[] = {"mesh", "mesh_axes", "reduce"};
  for (size_t i = 0; i < sizeof(kAttrs) / sizeof(kAttrs[0]); ++i) {
    MlirAttribute x = dtGetAttr(a, kAttrs[i]), y = dtGetAttr(b, kAttrs[i]);
    if (mlirAttributeIsNull(x) != mlirAttributeIsNull(y) ||
        (!mlirAttributeIsNull(x) && !mlirAttributeEqual(x, y)))
      return false;
  }
  return mlirTypeEqual(mlirShapedTypeGetElementType(
                           mlirValueGetType(mlirOperationGetOperand(a, 0))),
                       mlirShapedTypeGetElementType(
                           mlirValueGetType(mlirOperationGetOperand(b, 0))));
}

/* `v` (static, any rank) as a 1-D tensor, built before `at`. */
static MlirValue flatten(Bucketing *bk, MlirOperation at, MlirValue v,
                         int64_t n) {
  MlirContext ctx = bk->b.ctx;
  MlirType t = mlirValueGetType(v);
  intptr_t rank = mlirShapedTypeGetRank(t);
  if (rank == 1)
    return v;
  MlirType elem = mlirShapedTypeGetElementType(t);
  MlirType flat = mlirRankedTensorTypeGet(1, &n, elem, mlirAttributeGetNull());
  MlirLocation loc = mlirOperationGetLocation(at);
  if (rank == 0) {
    /* tensor<T> -> tensor<1xT> */
    MlirAttribute none = mlirArrayAttrGet(ctx, 0, NULL);
    int64_t one = 1;
    MlirNamedAttribute attrs[2] = {
        dtNamedAttr(ctx, "reassociation", none),
        dtNamedAttr(ctx, "static_output_shape",
                    mlirDenseI64ArrayGet(ctx, 1, &one))};
    return mlirOperationGetResult(dtRtBuild(&bk->b, "tensor.expand_shape", loc,
                                            1, &v, 1, &flat, 2, attrs, at),
                                  0);
  }
  MlirAttribute dims[DTENSOR_MAX_TENSOR_RANK];
  for (intptr_t d = 0; d < rank; ++d)
    dims[d] = mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), d);
  MlirAttribute group = mlirArrayAttrGet(ctx, rank, dims);
  MlirNamedAttribute attr =
      dtNamedAttr(ctx, "reassociation", mlirArrayAttrGet(ctx, 1, &group));
  return mlirOperationGetResult(dtRtBuild(&bk->b, "tensor.collapse_shape", loc,
                                          1, &v, 1, &flat, 1, &attr, at),
                                0);
}

/* The 1-D `flat` back to `type`, built before `at`. */
static MlirValue unflatten(Bucketing *bk, MlirOperation at, MlirValue flat,
                           MlirType type) {
  MlirContext ctx = bk->b.ctx;
  intptr_t rank = mlirShapedTypeGetRank(type);
  if (rank == 1)
    return flat;
  MlirLocation loc = mlirOperationGetLocation(at);
  if (rank == 0) {
    MlirNamedAttribute attr =
        dtNamedAttr(ctx, "reassociation", mlirArrayAttrGet(ctx, 0, NULL));
    return mlirOperationGetResult(dtRtBuild(&bk->b, "tensor.collapse_shape",
                                            loc, 1, &flat, 1, &type, 1, &attr,
                                            at),
                                  0);
  }
  MlirAttribute dims[DTENSOR_MAX_TENSOR_RANK];
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  for (intptr_t d = 0; d < rank; ++d) {
    dims[d] = mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), d);
    shape[d] = mlirShapedTypeGetDimSize(type, d);
  }
  MlirAttribute group = mlirArrayAttrGet(ctx, rank, dims);
  MlirNamedAttribute attrs[2] = {
      dtNamedAttr(ctx, "reassociation", mlirArrayAttrGet(ctx, 1, &group)),
      dtNamedAttr(ctx, "static_output_shape",
                  mlirDenseI64ArrayGet(ctx, rank, shape))};
  return mlirOperationGetResult(dtRtBuild(&bk->b, "tensor.expand_shape", loc, 1,
                                          &flat, 1, &type, 2, attrs, at),
                                0);
}

/* Replaces the bucket's members by one all_reduce at its last member. */
static void merge(Bucketing *bk, Bucket *bucket) {
  if (bucket->count < 2)
    return;
  MlirContext ctx = bk->b.ctx;
  MlirOperation last = bucket->members[bucket->count - 1];
  MlirLocation loc = mlirOperationGetLocation(last);
  MlirValue flats[MAX_MEMBERS];
  int64_t sizes[MAX_MEMBERS], total = 0;
  for (int k = 0; k < bucket->count; ++k) {
    MlirValue in = mlirOperationGetOperand(bucket->members[k], 0);
    MlirType t = mlirValueGetType(in);
    sizes[k] = 1;
    for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); ++d)
      sizes[k] *= mlirShapedTypeGetDimSize(t, d);
    flats[k] = flatten(bk, last, in, sizes[k]);
    total += sizes[k];
  }
  MlirType elem = mlirShapedTypeGetElementType(
      mlirValueGetType(mlirOperationGetOperand(last, 0)));
  MlirType whole =
      mlirRankedTensorTypeGet(1, &total, elem, mlirAttributeGetNull());
  MlirNamedAttribute dim = dtNamedAttr(
      ctx, "dim", mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), 0));
  MlirValue cat = mlirOperationGetResult(dtRtBuild(&bk->b, "tensor.concat", loc,
                                                   bucket->count, flats, 1,
                                                   &whole, 1, &dim, last),
                                         0);
  /* The collective: the last member's attributes on the whole. */
  MlirNamedAttribute attrs[16];
  intptr_t numAttrs = mlirOperationGetNumAttributes(last);
  for (intptr_t i = 0; i < numAttrs && i < 16; ++i)
    attrs[i] = mlirOperationGetAttribute(last, i);
  MlirValue sum = mlirOperationGetResult(
      dtRtBuild(&bk->b, DT_OP_ALL_REDUCE, loc, 1, &cat, 1, &whole,
                (int)(numAttrs < 16 ? numAttrs : 16), attrs, last),
      0);
  int64_t at = 0;
  for (int k = 0; k < bucket->count; ++k) {
    MlirOperation m = bucket->members[k];
    MlirType flat =
        mlirRankedTensorTypeGet(1, &sizes[k], elem, mlirAttributeGetNull());
    int64_t one = 1;
    MlirNamedAttribute sl[4] = {
        dtNamedAttr(ctx, "static_offsets", mlirDenseI64ArrayGet(ctx, 1, &at)),
        dtNamedAttr(ctx, "static_sizes",
                    mlirDenseI64ArrayGet(ctx, 1, &sizes[k])),
        dtNamedAttr(ctx, "static_strides", mlirDenseI64ArrayGet(ctx, 1, &one)),
        dtNamedAttr(ctx, "operandSegmentSizes",
                    mlirDenseI32ArrayGet(ctx, 4, (int32_t[]){1, 0, 0, 0}))};
    MlirValue part =
        mlirOperationGetResult(dtRtBuild(&bk->b, "tensor.extract_slice", loc, 1,
                                         &sum, 1, &flat, 4, sl, last),
                               0);
    MlirValue r = mlirOperationGetResult(m, 0);
    mlirValueReplaceAllUsesOfWith(
        r, unflatten(bk, last, part, mlirValueGetType(r)));
    at += sizes[k];
  }
  for (int k = 0; k < bucket->count; ++k)
    mlirOperationDestroy(bucket->members[k]);
  bk->merged += 1;
  bk->removed += bucket->count - 1;
}

/* Whether `op` (or an op inside it) uses a result of an open bucket's
 * members; closes those buckets. */
typedef struct UseScan {
  Bucketing *bk;
} UseScan;

static MlirWalkResult closeOnUse(MlirOperation op, void *user) {
  Bucketing *bk = ((UseScan *)user)->bk;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    MlirValue v = mlirOperationGetOperand(op, i);
    if (!mlirValueIsAOpResult(v))
      continue;
    MlirOperation def = mlirOpResultGetOwner(v);
    for (size_t k = 0; k < bk->numBuckets; ++k) {
      Bucket *b = &bk->buckets[k];
      for (int j = 0; j < b->count && b->open; ++j)
        if (mlirOperationEqual(b->members[j], def))
          b->open = false;
    }
  }
  return MlirWalkResultAdvance;
}

static void bucketBlock(Bucketing *bk, MlirBlock block) {
  bk->numBuckets = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    UseScan scan = {bk};
    mlirOperationWalk(op, closeOnUse, &scan, MlirWalkPreOrder);
    if (!dtIsOp(op, DT_OP_ALL_REDUCE) || mlirOperationGetNumOperands(op) != 1 ||
        mlirOperationGetNumResults(op) != 1 ||
        !staticTensor(mlirOperationGetOperand(op, 0)))
      continue;
    int64_t bytes = bytesOf(mlirOperationGetOperand(op, 0));
    Bucket *into = NULL;
    for (size_t k = 0; k < bk->numBuckets && !into; ++k) {
      Bucket *b = &bk->buckets[k];
      if (b->open && sameKind(b->members[0], op)) {
        if (b->bytes + bytes <= bk->limit && b->count < MAX_MEMBERS)
          into = b;
        else
          b->open = false;
      }
    }
    if (!into) {
      into = dtArrayPush((void **)&bk->buckets, &bk->numBuckets,
                         &bk->capBuckets, sizeof(Bucket));
      if (!into)
        return;
      into->open = true;
    }
    into->members[into->count++] = op;
    into->bytes += bytes;
  }
  for (size_t k = 0; k < bk->numBuckets; ++k)
    merge(bk, &bk->buckets[k]);
}

static MlirWalkResult collectFuncs(MlirOperation op, void *user) {
  if (dtIsOp(op, "func.func") && !dtOpListPush(user, op))
    return MlirWalkResultInterrupt;
  return MlirWalkResultAdvance;
}

static bool runBucket(MlirOperation root, const DtPassOptions *options) {
  int64_t limit = dtPassOptionsGetInt(options, "bucket-bytes");
  if (limit <= 0) {
    dtOpError(root,
              "dtensor-bucket-collectives: bucket-bytes=%lld; a bucket "
              "needs a positive size in bytes",
              (long long)limit);
    return false;
  }
  Bucketing bk = {dtRtBuilderBegin(root), limit, NULL, 0, 0, 0, 0};
  DtOpList funcs = {NULL, 0, 0};
  mlirOperationWalk(root, collectFuncs, &funcs, MlirWalkPreOrder);
  for (size_t f = 0; f < funcs.count; ++f) {
    MlirRegion body = mlirOperationGetRegion(funcs.ops[f], 0);
    for (MlirBlock b = mlirRegionGetFirstBlock(body); !mlirBlockIsNull(b);
         b = mlirBlockGetNextInRegion(b))
      bucketBlock(&bk, b);
  }
  free(funcs.ops);
  free(bk.buckets);
  dtRtBuilderEnd(&bk.b);
  return true;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"bucket-bytes", DTENSOR_OPTION_INT, "26214400", NULL,
     "the most bytes of blocks one merged all_reduce takes (default 25 MiB, "
     "as PyTorch's DDP)"},
};

const DtPassDef dtBucketCollectivesPass = {
    .info = {"dtensor-bucket-collectives",
             "Merge the all_reduces of one kind on one group into buckets "
             "(one collective for several blocks) on the per-device program",
             1, kOptions},
    .verifyFirst = true,
    .run = runBucket,
    .numDependentDialects = 1,
    .dependentDialects = {mlirGetDialectHandle__tensor__},
};
