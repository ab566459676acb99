/* Values that only initialize — tensor.empty, tensor constants and
 * splats, and linalg ops (fills, generators) whose tensor operands are all
 * such values — carry no data that another device would need: each device
 * can make its own block of them. So before propagation, such a value used
 * by several ops is made once per use (a clone right after the original,
 * so nothing moves into a loop), and each use then gets it in the layout
 * it wants instead of the first user's layout reaching the others through
 * a collective. Clones that end up alike are merged again by the
 * canonicalization after partition. */
#include "Propagate.h"

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

/* Gives each use of `op`'s result after the first its own clone. */
static bool splitUses(MlirOperation op) {
  MlirValue v = mlirOperationGetResult(op, 0);
  Use *uses = NULL;
  size_t n = 0, cap = 0;
  /* Uses are gathered first: rewiring one changes the use list. */
  for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u);
       u = mlirOpOperandGetNextUse(u)) {
    Use *slot = dtArrayPush((void **)&uses, &n, &cap, sizeof(Use));
    if (!slot) {
      free(uses);
      return false;
    }
    slot->owner = mlirOpOperandGetOwner(u);
    slot->number = mlirOpOperandGetOperandNumber(u);
  }
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
