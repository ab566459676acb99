/* Values that only initialize — tensor.empty, tensor constants and
 * splats, and linalg ops (fills, generators) whose tensor operands are all
 * such values — carry no data that another device would need: each device
 * can make its own block of them. So before propagation, such a value used
 * by several ops is made once per use (a clone right after the original,
 * so nothing moves into a loop), and each use then gets it in the layout
 * it wants instead of the first user's layout reaching the others through
 * a collective. Clones that end up alike are merged again by the
 * canonicalization after partition.
 *
 * After that canonicalization (dtensor-spmd), one fill of a shape serves
 * every layer: bufferization gives each op that writes into it a copy and
 * keeps the fill until its last user, so it holds one buffer of its shape
 * from the first layer to the last. Under a memory budget
 * dtInitsNearUses gives each user its own fill again, right before it
 * (dtensor-auto-shard's memory model counts fills as holding nothing,
 * dtensor-report counts the compiled program); without one the program
 * keeps the merged fill, a buffer more for a third less text (the
 * 10^4-block MLP chain: 20 000 fills, 4.0 MB printed against 5.9 MB). */
#include "Propagate.h"
#include "Util.h"

#include <stdlib.h>

typedef struct Inits {
  MlirOperation *ops; /* init-only ops, in program order */
  size_t count, capacity;
  DtTable set; /* the same ops, by pointer */
  bool failed;
} Inits;

static bool sameOp(const void *entry, const void *key) {
  return *(void *const *)entry == key;
}

static uint64_t opHash(MlirOperation op) {
  return dtHashMix(11, (uint64_t)(uintptr_t)op.ptr);
}

static bool isInitValue(const Inits *in, MlirValue v) {
  if (!mlirValueIsAOpResult(v))
    return false;
  MlirOperation def = mlirOpResultGetOwner(v);
  return dtTableFind(&in->set, opHash(def), sameOp, def.ptr) != NULL;
}

/* Whether `op` makes its one tensor result from nothing a device lacks. */
static bool isInitOnly(const Inits *in, MlirOperation op) {
  if (mlirOperationGetNumResults(op) != 1 ||
      !mlirTypeIsARankedTensor(mlirValueGetType(mlirOperationGetResult(op, 0))))
    return false;
  if (dtIsOp(op, "tensor.empty") || dtIsOp(op, "arith.constant") ||
      dtIsOp(op, "tensor.splat"))
    return true;
  if (!dtIsOpIn(op, "linalg."))
    return false;
  intptr_t tensors = 0;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    MlirValue v = mlirOperationGetOperand(op, i);
    if (!mlirTypeIsATensor(mlirValueGetType(v)))
      continue;
    ++tensors;
    if (!isInitValue(in, v))
      return false;
  }
  return tensors > 0;
}

static MlirWalkResult collect(MlirOperation op, void *userData) {
  Inits *in = userData;
  if (in->failed || !isInitOnly(in, op))
    return MlirWalkResultAdvance;
  MlirOperation *slot =
      dtArrayPush((void **)&in->ops, &in->count, &in->capacity, sizeof(op));
  void **entry = dtTableInsert(&in->set, opHash(op));
  if (!slot || !entry) {
    in->failed = true;
    return MlirWalkResultInterrupt;
  }
  *slot = op;
  *entry = op.ptr;
  return MlirWalkResultAdvance;
}

typedef struct Use {
  MlirOperation owner;
  unsigned number;
} Use;

/* The uses of `v` in `*uses` (`*n` of them), gathered first: rewiring
 * one changes the use list. False when out of memory. */
static bool usesOf(MlirValue v, Use **uses, size_t *n) {
  size_t cap = 0;
  *uses = NULL;
  *n = 0;
  for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u);
       u = mlirOpOperandGetNextUse(u)) {
    Use *slot = dtArrayPush((void **)uses, n, &cap, sizeof(Use));
    if (!slot) {
      free(*uses);
      return false;
    }
    slot->owner = mlirOpOperandGetOwner(u);
    slot->number = mlirOpOperandGetOperandNumber(u);
  }
  return true;
}

/* Gives each use of `op`'s result after the first its own clone. */
static bool splitUses(MlirOperation op) {
  Use *uses;
  size_t n;
  if (!usesOf(mlirOperationGetResult(op, 0), &uses, &n))
    return false;
  MlirBlock block = mlirOperationGetBlock(op);
  bool ok = true;
  for (size_t k = 1; ok && k < n; ++k) {
    MlirOperation clone = mlirOperationClone(op);
    ok = !mlirOperationIsNull(clone);
    if (ok) {
      mlirBlockInsertOwnedOperationAfter(block, op, clone);
      mlirOperationSetOperand(uses[k].owner, uses[k].number,
                              mlirOperationGetResult(clone, 0));
    }
  }
  free(uses);
  return ok;
}

bool dtPropSplitInits(MlirOperation func) {
  Inits in = {NULL, 0, 0, dtTableInit(sizeof(void *)), false};
  mlirOperationWalk(func, collect, &in, MlirWalkPreOrder);
  /* Users first: a clone of a fill uses its init too, which is split when
   * its turn comes. */
  bool ok = !in.failed;
  for (size_t i = in.count; ok && i-- > 0;)
    ok = splitUses(in.ops[i]);
  free(in.ops);
  dtTableFree(&in.set);
  return ok;
}

/* The op of `block` that is `op` or holds it, or null. */
static MlirOperation ancestorIn(MlirOperation op, MlirBlock block) {
  while (!mlirOperationIsNull(op) &&
         !mlirBlockEqual(mlirOperationGetBlock(op), block))
    op = mlirOperationGetParentOperation(op);
  return op;
}

typedef struct Near {
  void *user;  /* an op of the init's block using it */
  MlirValue v; /* its own copy of the init */
} Near;

static bool sameUser(const void *entry, const void *key) {
  return ((const Near *)entry)->user == key;
}

/* Gives each op of `op`'s block that uses its result (itself or in its
 * regions) a clone of `op` right before it; `op` then has no use and is
 * erased. */
static bool nearUses(MlirOperation op) {
  MlirValue v = mlirOperationGetResult(op, 0);
  MlirBlock block = mlirOperationGetBlock(op);
  Use *uses;
  size_t n;
  if (!usesOf(v, &uses, &n))
    return false;
  /* One user (or none): nothing lives longer than it must. */
  MlirOperation first =
      n ? ancestorIn(uses[0].owner, block) : (MlirOperation){NULL};
  bool several = false;
  for (size_t k = 1; k < n && !several; ++k)
    several = !mlirOperationEqual(ancestorIn(uses[k].owner, block), first);
  DtTable copies = dtTableInit(sizeof(Near));
  bool ok = true;
  for (size_t k = 0; several && ok && k < n; ++k) {
    MlirOperation user = ancestorIn(uses[k].owner, block);
    if (mlirOperationIsNull(user))
      continue;
    Near *near = dtTableFind(&copies, opHash(user), sameUser, user.ptr);
    if (!near) {
      MlirOperation clone = mlirOperationClone(op);
      near = mlirOperationIsNull(clone) ? NULL
                                        : dtTableInsert(&copies, opHash(user));
      ok = near != NULL;
      if (!ok) {
        if (!mlirOperationIsNull(clone))
          mlirOperationDestroy(clone);
        break;
      }
      mlirBlockInsertOwnedOperationBefore(block, user, clone);
      near->user = user.ptr;
      near->v = mlirOperationGetResult(clone, 0);
    }
    mlirOperationSetOperand(uses[k].owner, uses[k].number, near->v);
  }
  if (ok && several && mlirOpOperandIsNull(mlirValueGetFirstUse(v)))
    mlirOperationDestroy(op);
  dtTableFree(&copies);
  free(uses);
  return ok;
}

/* Whether `op`, an init-only op, holds a buffer of its own: a fill or
 * generator (linalg) or a splat; a tensor.empty holds nothing and a
 * constant is the module's data (Inspect/Memory.h). */
static bool holdsBuffer(MlirOperation op) {
  return dtIsOpIn(op, "linalg.") || dtIsOp(op, "tensor.splat");
}

bool dtInitsNearUses(MlirOperation root, bool all) {
  Inits in = {NULL, 0, 0, dtTableInit(sizeof(void *)), false};
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(f) && !in.failed;
       f = mlirOperationGetNextInBlock(f))
    if (dtIsOp(f, "func.func") &&
        (all || !mlirAttributeIsNull(dtGetAttr(f, DT_ATTR_MEMORY))))
      mlirOperationWalk(f, collect, &in, MlirWalkPreOrder);
  /* Users first: a generator's clones use its fill, which is then given
   * to each of them. */
  bool ok = !in.failed;
  for (size_t i = in.count; ok && i-- > 0;)
    ok = !holdsBuffer(in.ops[i]) || nearUses(in.ops[i]);
  free(in.ops);
  dtTableFree(&in.set);
  return ok;
}
