/* The per-device peak of a function's memory (Memory.h): a liveness sweep
 * over each block in program order. A value lives from the op that makes
 * it to the last op of its block that uses it (or holds a use in its
 * regions); the bytes live at an op are the arguments, the values of the
 * enclosing blocks live there, and the block's own. */
#include "Memory.h"
#include "Util.h"

#include "Support/Support.h"
#include "dtensor-c/Layout.h"
#include "mlir-c/BuiltinTypes.h"

#include <stdlib.h>
#include <string.h>

int64_t dtTensorBytes(MlirType t) {
  DtensorElementType et;
  if (!mlirTypeIsARankedTensor(t) || !mlirShapedTypeHasStaticShape(t) ||
      !dtensorElementTypeFromMlir(mlirShapedTypeGetElementType(t), &et))
    return 0;
  int64_t bytes = (int64_t)dtensorElementTypeGetSize(et);
  for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); ++d)
    if (__builtin_mul_overflow(bytes, mlirShapedTypeGetDimSize(t, d), &bytes))
      return INT64_MAX / 4;
  return bytes;
}

int64_t dtMemoryResultBytes(MlirOperation op, intptr_t result) {
  /* A tensor.empty holds nothing: each op that writes into it gets a
   * buffer of its own (its result counts), however many share it. */
  if (dtIsOp(op, "tensor.empty"))
    return 0;
  /* A tensor constant is the module's data (bufferization makes it a
   * global), not a buffer the step allocates; an op that writes into one
   * gets a buffer of its own. */
  if (dtIsOp(op, "arith.constant"))
    return 0;
  return dtTensorBytes(mlirValueGetType(mlirOperationGetResult(op, result)));
}

bool dtMemoryInitInPlace(MlirOperation op, intptr_t operand) {
  /* A linalg op's results are written into its inits' buffers (its last
   * operands, one per result), as bufferization does. */
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  intptr_t results = mlirOperationGetNumResults(op);
  intptr_t operands = mlirOperationGetNumOperands(op);
  return name.length >= 7 && !strncmp(name.data, "linalg.", 7) &&
         results <= operands && operand >= operands - results &&
         operand < operands;
}

/* A value of a block: made by op `def`, used up to op `end` (indices in
 * the block). */
typedef struct Val {
  MlirValue value;
  size_t def, end;
  int64_t bytes;
  bool collective;
} Val;

typedef struct Slot {
  const void *key; /* an op (its index) or a value (its Val) */
  size_t index;
} Slot;

typedef struct Live {
  MlirOperation *ops;
  size_t numOps, capOps;
  Val *vals;
  size_t numVals, capVals;
  DtTable index; /* Slot: op -> its index, value -> its Val */
  bool oom;
} Live;

static bool sameKey(const void *entry, const void *key) {
  return ((const Slot *)entry)->key == key;
}

static uint64_t keyHash(const void *key) {
  return dtHashMix(0x3e3, (uint64_t)(uintptr_t)key);
}

static Slot *find(const Live *l, const void *key) {
  return dtTableFind(&l->index, keyHash(key), sameKey, key);
}

static void remember(Live *l, const void *key, size_t index) {
  Slot *s = dtTableInsert(&l->index, keyHash(key));
  if (!s) {
    l->oom = true;
    return;
  }
  s->key = key;
  s->index = index;
}

/* The op of `block` that is `op` or holds it, or null. */
static MlirOperation ancestorIn(MlirOperation op, MlirBlock block) {
  while (!mlirOperationIsNull(op)) {
    MlirBlock b = mlirOperationGetBlock(op);
    if (mlirBlockIsNull(b))
      break;
    if (mlirBlockEqual(b, block))
      return op;
    op = mlirBlockGetParentOperation(b);
  }
  return (MlirOperation){NULL};
}

/* The values of `block` and where each lives. */
static void analyze(MlirBlock block, Live *l) {
  memset(l, 0, sizeof(*l));
  l->index = dtTableInit(sizeof(Slot));
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op) && !l->oom;
       op = mlirOperationGetNextInBlock(op)) {
    MlirOperation *slot = dtArrayPush((void **)&l->ops, &l->numOps, &l->capOps,
                                      sizeof(MlirOperation));
    if (!slot) {
      l->oom = true;
      break;
    }
    *slot = op;
    remember(l, op.ptr, l->numOps - 1);
  }
  for (size_t i = 0; i < l->numOps && !l->oom; ++i) {
    MlirOperation op = l->ops[i];
    for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r) {
      MlirValue v = mlirOperationGetResult(op, r);
      int64_t bytes = dtMemoryResultBytes(op, r);
      if (!bytes)
        continue;
      size_t end = i;
      for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u);
           u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = ancestorIn(mlirOpOperandGetOwner(u), block);
        const Slot *s = mlirOperationIsNull(user) ? NULL : find(l, user.ptr);
        if (s && s->index > end)
          end = s->index;
      }
      Val *val =
          dtArrayPush((void **)&l->vals, &l->numVals, &l->capVals, sizeof(Val));
      if (!val) {
        l->oom = true;
        break;
      }
      *val = (Val){v, i, end, bytes, dtCollectiveOf(op) != NULL};
      remember(l, v.ptr, l->numVals - 1);
    }
  }
  /* An init that dies at its op is the op's result. */
  for (size_t i = 0; i < l->numOps && !l->oom; ++i) {
    MlirOperation op = l->ops[i];
    intptr_t operands = mlirOperationGetNumOperands(op);
    intptr_t k = operands - mlirOperationGetNumResults(op);
    for (k = k < 0 ? 0 : k; k < operands; ++k) {
      if (!dtMemoryInitInPlace(op, k))
        continue;
      MlirValue init = mlirOperationGetOperand(op, k);
      const Slot *s = find(l, init.ptr);
      Val *val = s ? &l->vals[s->index] : NULL;
      if (val && val->end == i && val->def < i)
        val->end = i - 1;
    }
  }
}

static void release(Live *l) {
  free(l->ops);
  free(l->vals);
  dtTableFree(&l->index);
}

typedef struct Sweep {
  int64_t best;
  MlirOperation at;
  bool oom;
} Sweep;

/* The bytes live at each op of `block` on top of `outside`, and inside its
 * ops' regions; the largest in `s`. */
static void sweep(MlirBlock block, int64_t outside, Sweep *s) {
  Live l;
  analyze(block, &l);
  int64_t *delta = calloc(l.numOps + 2, sizeof(int64_t));
  if (l.oom || !delta) {
    s->oom = true;
    free(delta);
    release(&l);
    return;
  }
  for (size_t k = 0; k < l.numVals; ++k) {
    delta[l.vals[k].def] += l.vals[k].bytes;
    delta[l.vals[k].end + 1] -= l.vals[k].bytes;
  }
  int64_t live = 0;
  for (size_t i = 0; i < l.numOps && !s->oom; ++i) {
    live += delta[i];
    if (outside + live > s->best) {
      s->best = outside + live;
      s->at = l.ops[i];
    }
    MlirOperation op = l.ops[i];
    for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r)
      for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
           !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
        sweep(b, outside + live, s);
  }
  free(delta);
  release(&l);
}

int64_t dtMemoryInnerPeak(MlirOperation op, bool *oom) {
  Sweep s = {0, {NULL}, false};
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r)
    for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
         !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
      sweep(b, 0, &s);
  *oom |= s.oom;
  return s.best;
}

/* Keeps `v` (of `bytes`) among the largest of `out`, largest first. */
static void offer(DtMemoryPeak *out, MlirValue v, int64_t bytes) {
  int k = out->numLargest;
  if (k == DT_MEMORY_LARGEST) {
    if (out->largestBytes[k - 1] >= bytes)
      return;
    --k; /* in place of the smallest */
  } else {
    ++out->numLargest;
  }
  for (; k > 0 && out->largestBytes[k - 1] < bytes; --k) {
    out->largest[k] = out->largest[k - 1];
    out->largestBytes[k] = out->largestBytes[k - 1];
  }
  out->largest[k] = v;
  out->largestBytes[k] = bytes;
}

bool dtMemoryPeakOf(MlirOperation func, DtMemoryPeak *out) {
  memset(out, 0, sizeof(*out));
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  if (mlirBlockIsNull(entry))
    return true;
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry); ++i) {
    MlirValue a = mlirBlockGetArgument(entry, i);
    int64_t bytes = dtTensorBytes(mlirValueGetType(a));
    out->argumentBytes += bytes;
    MlirAttribute role = dtFuncArgAttr(func, false, i, DT_ATTR_ROLE);
    if (!mlirAttributeIsNull(role) && mlirAttributeIsAString(role)) {
      MlirStringRef r = mlirStringAttrGetValue(role);
      if (mlirStringRefEqual(r, mlirStringRefCreateFromCString("parameter")))
        out->parameterBytes += bytes;
      else if (mlirStringRefEqual(
                   r, mlirStringRefCreateFromCString("optimizer_state")))
        out->optimizerBytes += bytes;
    }
    if (bytes)
      offer(out, a, bytes);
  }
  Sweep s = {out->argumentBytes, {NULL}, false};
  sweep(entry, out->argumentBytes, &s);
  out->peakBytes = s.best;
  out->at = s.at;
  /* What is live at the peak: the values of each block from the peak's
   * op out to the function's body. */
  for (MlirOperation op = s.at;
       !s.oom && !mlirOperationIsNull(op) && !mlirOperationEqual(op, func);) {
    MlirBlock block = mlirOperationGetBlock(op);
    Live l;
    analyze(block, &l);
    const Slot *at = l.oom ? NULL : find(&l, op.ptr);
    for (size_t k = 0; at && k < l.numVals; ++k)
      if (l.vals[k].def <= at->index && at->index <= l.vals[k].end) {
        offer(out, l.vals[k].value, l.vals[k].bytes);
        if (l.vals[k].collective)
          out->collectiveBytes += l.vals[k].bytes;
      }
    s.oom |= l.oom;
    release(&l);
    op = mlirBlockGetParentOperation(block);
  }
  return !s.oom;
}

bool dtMemoryLargestPeak(MlirOperation module, DtMemoryPeak *out,
                         MlirOperation *func) {
  bool any = false;
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f)) {
    DtMemoryPeak peak;
    if (!dtIsOp(f, "func.func") || mlirOperationGetNumRegions(f) != 1 ||
        mlirBlockIsNull(
            mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0))) ||
        !dtMemoryPeakOf(f, &peak) || (any && peak.peakBytes <= out->peakBytes))
      continue;
    *out = peak;
    *func = f;
    any = true;
  }
  return any;
}
