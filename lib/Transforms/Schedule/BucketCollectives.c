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
 * the size and its operand does not depend on a member's result; the
 * merged collective goes where the bucket's last member was, so every
 * member's operand is ready. An op between the members that uses a
 * member's result (a training step's update of a parameter by its reduced
 * gradient) is deferred: it, and the ops that use it, move after the
 * merged collective, keeping their order — when they are arith, math,
 * tensor or linalg ops; any other use closes the bucket.
 *
 * Each element is still reduced over the same ranks, but the runtime gives
 * each rank a part of the buffer to reduce, starting from its own value:
 * in a bucket an element may fall in another rank's part, and with more
 * than two ranks its sum may round differently from the unbucketed
 * collective's. The order depends only on the program, the bucket size and
 * the group, so it is the same on every run (deterministic), and two
 * ranks' sums are the same either way. */
#include "Dialect/DialectInternal.h"
#include "Lower/RuntimeCall.h"
#include "PassDef.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MEMBERS 256

/* A bucket's members are on the heap, grown as it fills: most buckets of
 * a long program hold one member (its result is used at once), and 256
 * inline slots made 10^5 of them 200 MB. */
typedef struct Deferred {
  MlirOperation op;
  size_t members; /* the bucket's members when it was deferred */
} Deferred;

typedef struct Bucket {
  MlirOperation *members;
  size_t count, cap;
  Deferred *deferred; /* uses of members' results, in program order */
  size_t numDeferred, capDeferred;
  int64_t bytes;
  bool open;
} Bucket;

typedef struct Bucketing {
  DtRtBuilder b;
  int64_t limit;
  Bucket *buckets;
  size_t numBuckets, capBuckets;
  /* The open buckets, found in constant time: by a member (MemberEntry)
   * and by their kind (KindEntry). A bucket leaves both when it closes, so
   * a block is bucketed in one walk, linear in its ops (it was quadratic:
   * every operand was compared with every member of every bucket). */
  DtTable members, kinds;
  DtTable deferred; /* MemberEntry: a deferred op and its bucket */
  int merged, removed;
} Bucketing;

typedef struct MemberEntry {
  const void *op;
  size_t bucket;
} MemberEntry;

/* What all_reduces must share to share a bucket (uniqued: compared as
 * pointers). */
typedef struct Kind {
  const void *mesh, *axes, *reduce, *element;
} Kind;

typedef struct KindEntry {
  Kind kind;
  size_t bucket;
} KindEntry;

static uint64_t hashPointer(const void *p) {
  return dtHashMix(0x5bd1e995u, (uint64_t)(uintptr_t)p);
}

static bool sameMember(const void *entry, const void *key) {
  return ((const MemberEntry *)entry)->op == key;
}

static bool sameKindEntry(const void *entry, const void *key) {
  return !memcmp(&((const KindEntry *)entry)->kind, key, sizeof(Kind));
}

static uint64_t hashKind(const Kind *k) {
  return dtHashMix(
      dtHashMix(dtHashMix(hashPointer(k->mesh), (uint64_t)(uintptr_t)k->axes),
                (uint64_t)(uintptr_t)k->reduce),
      (uint64_t)(uintptr_t)k->element);
}

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

/* The kind of an all_reduce: mesh, axes, reduction, element type. */
static Kind kindOf(MlirOperation op) {
  Kind k = {dtGetAttr(op, "mesh").ptr, dtGetAttr(op, "mesh_axes").ptr,
            dtGetAttr(op, "reduce").ptr,
            mlirShapedTypeGetElementType(
                mlirValueGetType(mlirOperationGetOperand(op, 0)))
                .ptr};
  return k;
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
  for (size_t k = 0; k < bucket->count; ++k) {
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
                                                   (int)bucket->count, flats, 1,
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
  for (size_t k = 0; k < bucket->count; ++k) {
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
  /* The uses deferred from before the last member follow the merged
   * collective (inserted before it), in their order. */
  for (size_t k = 0; k < bucket->numDeferred; ++k)
    if (bucket->deferred[k].members < bucket->count)
      mlirOperationMoveBefore(bucket->deferred[k].op, last);
  for (size_t k = 0; k < bucket->count; ++k)
    mlirOperationDestroy(bucket->members[k]);
  bk->merged += 1;
  bk->removed += (int)bucket->count - 1;
}

/* Closes bucket `k`: its members and kind leave the tables of open
 * buckets (each op enters and leaves once). */
static void closeBucket(Bucketing *bk, size_t k) {
  Bucket *b = &bk->buckets[k];
  if (!b->open)
    return;
  b->open = false;
  for (size_t j = 0; j < b->count; ++j) {
    void *e = dtTableFind(&bk->members, hashPointer(b->members[j].ptr),
                          sameMember, b->members[j].ptr);
    if (e)
      dtTableRemove(&bk->members, e);
  }
  for (size_t j = 0; j < b->numDeferred; ++j) {
    const void *op = b->deferred[j].op.ptr;
    void *e = dtTableFind(&bk->deferred, hashPointer(op), sameMember, op);
    if (e)
      dtTableRemove(&bk->deferred, e);
  }
  Kind kind = kindOf(b->members[0]);
  KindEntry *e = dtTableFind(&bk->kinds, hashKind(&kind), sameKindEntry, &kind);
  if (e && e->bucket == k)
    dtTableRemove(&bk->kinds, e);
}

/* The open buckets whose members' results `op` (or an op inside it) reads,
 * directly or through a deferred op: up to MAX_USED of them. */
#define MAX_USED 8
typedef struct Used {
  Bucketing *bk;
  size_t bucket[MAX_USED];
  int count;
  bool overflow;
} Used;

static MlirWalkResult findUsed(MlirOperation op, void *user) {
  Used *u = user;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    MlirValue v = mlirOperationGetOperand(op, i);
    if (!mlirValueIsAOpResult(v))
      continue;
    const void *def = mlirOpResultGetOwner(v).ptr;
    const MemberEntry *e =
        dtTableFind(&u->bk->members, hashPointer(def), sameMember, def);
    if (!e)
      e = dtTableFind(&u->bk->deferred, hashPointer(def), sameMember, def);
    if (!e)
      continue;
    bool seen = false;
    for (int k = 0; k < u->count; ++k)
      seen |= u->bucket[k] == e->bucket;
    if (seen)
      continue;
    if (u->count == MAX_USED)
      u->overflow = true;
    else
      u->bucket[u->count++] = e->bucket;
  }
  return MlirWalkResultAdvance;
}

/* Whether `op` may move after a merged collective: a computation on
 * tensors with no effects outside its results. */
static bool deferrable(MlirOperation op) {
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  static const char *kDialects[] = {"arith.", "math.", "tensor.", "linalg."};
  for (size_t i = 0; i < sizeof(kDialects) / sizeof(kDialects[0]); ++i) {
    size_t k = strlen(kDialects[i]);
    if (n.length > k && !memcmp(n.data, kDialects[i], k))
      return true;
  }
  return false;
}

/* Defers `op` to after bucket `k`'s merged collective. */
static bool defer(Bucketing *bk, MlirOperation op, size_t k) {
  Bucket *b = &bk->buckets[k];
  Deferred *d = dtArrayPush((void **)&b->deferred, &b->numDeferred,
                            &b->capDeferred, sizeof(Deferred));
  MemberEntry *e = d ? dtTableInsert(&bk->deferred, hashPointer(op.ptr)) : NULL;
  if (!e)
    return false;
  d->op = op;
  d->members = b->count;
  e->op = op.ptr;
  e->bucket = k;
  return true;
}

/* What `op`'s use of open buckets' results does: a use of one bucket by a
 * deferrable op (not an all_reduce about to join a bucket, `member`)
 * defers the op; any other closes each bucket it uses. False when out of
 * memory. */
static bool onUse(Bucketing *bk, MlirOperation op, bool member) {
  Used u = {bk, {0}, 0, false};
  mlirOperationWalk(op, findUsed, &u, MlirWalkPreOrder);
  if (u.count == 0 && !u.overflow)
    return true;
  if (!member && u.count == 1 && !u.overflow && deferrable(op))
    return defer(bk, op, u.bucket[0]);
  for (int k = 0; k < u.count; ++k)
    closeBucket(bk, u.bucket[k]);
  if (u.overflow)
    for (size_t k = 0; k < bk->numBuckets; ++k)
      closeBucket(bk, k);
  return true;
}

/* Adds `op` to the open bucket of its kind, or to a new one. */
static bool addMember(Bucketing *bk, MlirOperation op, int64_t bytes) {
  Kind kind = kindOf(op);
  uint64_t kh = hashKind(&kind);
  KindEntry *open = dtTableFind(&bk->kinds, kh, sameKindEntry, &kind);
  size_t k = open ? open->bucket : 0;
  if (open && (bk->buckets[k].bytes + bytes > bk->limit ||
               bk->buckets[k].count == MAX_MEMBERS)) {
    closeBucket(bk, k);
    open = NULL;
  }
  if (!open) {
    Bucket *fresh = dtArrayPush((void **)&bk->buckets, &bk->numBuckets,
                                &bk->capBuckets, sizeof(Bucket));
    KindEntry *e = fresh ? dtTableInsert(&bk->kinds, kh) : NULL;
    if (!e)
      return false;
    k = bk->numBuckets - 1;
    fresh->open = true;
    e->kind = kind;
    e->bucket = k;
  }
  MemberEntry *m = dtTableInsert(&bk->members, hashPointer(op.ptr));
  if (!m)
    return false;
  m->op = op.ptr;
  m->bucket = k;
  Bucket *into = &bk->buckets[k];
  MlirOperation *slot = dtArrayPush((void **)&into->members, &into->count,
                                    &into->cap, sizeof(MlirOperation));
  if (!slot)
    return false;
  *slot = op;
  into->bytes += bytes;
  return true;
}

/* Frees the buckets' member lists and empties the list of buckets. */
static void clearBuckets(Bucketing *bk) {
  for (size_t k = 0; k < bk->numBuckets; ++k) {
    free(bk->buckets[k].members);
    free(bk->buckets[k].deferred);
  }
  bk->numBuckets = 0;
}

static void bucketBlock(Bucketing *bk, MlirBlock block) {
  clearBuckets(bk);
  dtTableFree(&bk->members);
  dtTableFree(&bk->kinds);
  dtTableFree(&bk->deferred);
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    bool member = dtIsOp(op, DT_OP_ALL_REDUCE) &&
                  mlirOperationGetNumOperands(op) == 1 &&
                  mlirOperationGetNumResults(op) == 1 &&
                  staticTensor(mlirOperationGetOperand(op, 0));
    /* An all_reduce whose operand depends on a bucket's results closes
     * that bucket (it cannot be reduced with them). */
    if (!onUse(bk, op, member))
      return; /* out of memory: what is bucketed so far is not merged */
    if (member && !addMember(bk, op, bytesOf(mlirOperationGetOperand(op, 0))))
      return;
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
  Bucketing bk = {dtRtBuilderBegin(root),
                  limit,
                  NULL,
                  0,
                  0,
                  dtTableInit(sizeof(MemberEntry)),
                  dtTableInit(sizeof(KindEntry)),
                  dtTableInit(sizeof(MemberEntry)),
                  0,
                  0};
  DtOpList funcs = {NULL, 0, 0};
  mlirOperationWalk(root, collectFuncs, &funcs, MlirWalkPreOrder);
  for (size_t f = 0; f < funcs.count; ++f) {
    MlirRegion body = mlirOperationGetRegion(funcs.ops[f], 0);
    for (MlirBlock b = mlirRegionGetFirstBlock(body); !mlirBlockIsNull(b);
         b = mlirBlockGetNextInRegion(b))
      bucketBlock(&bk, b);
  }
  free(funcs.ops);
  clearBuckets(&bk);
  free(bk.buckets);
  dtTableFree(&bk.members);
  dtTableFree(&bk.kinds);
  dtTableFree(&bk.deferred);
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
