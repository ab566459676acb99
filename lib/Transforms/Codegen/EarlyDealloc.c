/* dtensor-early-dealloc: on the bufferized program, each memref.dealloc
 * moves up to just after the last op of its block that uses the buffer or
 * anything made from it.
 *
 * Why: MLIR's ownership-based deallocation (buffer-deallocation-pipeline)
 * frees a block's buffers at the end of the block, so in a function body
 * every intermediate buffer lived until the return: a training step held
 * all its activations and gradients at once, about three times what
 * dtensor-report's liveness model counts (the small GPT's Adam step, data
 * parallel on 4 ranks: 4037688 bytes of buffers measured, 1381380
 * modelled; 1387000 measured with this pass).
 *
 * What counts as a use, conservatively: any op of the block that uses the
 * buffer, or holds a use in its regions, and, transitively, any op that
 * uses a result of such an op (a cast, a view, a call's result: an
 * asynchronous collective's start returns the request its wait takes, so
 * the wait is a use of the buffers the start was given). Only a buffer
 * made in the dealloc's own block is moved; a plain memref.dealloc only
 * (the ownership pipeline's conditional frees stay). The GPU target
 * (dtensor-to-nvvm) does not run it: its frees order with streams. */
#include "PassDef.h"
#include "Util.h"

#include "Support/Support.h"

#include <stdlib.h>

typedef struct OpIndex {
  const void *op;
  size_t index;
} OpIndex;

static bool sameOp(const void *entry, const void *key) {
  return ((const OpIndex *)entry)->op == key;
}

static uint64_t opHash(MlirOperation op) {
  return dtHashMix(0xea7, (uint64_t)(uintptr_t)op.ptr);
}

typedef struct Block {
  MlirBlock block;
  DtOpList ops;    /* the block's ops in order */
  DtTable index;   /* OpIndex */
  MlirValue *work; /* the buffer and what is made from it */
  size_t numWork, capWork;
  bool oom;
} Block;

static bool pushWork(Block *b, MlirValue v) {
  MlirValue *slot = dtArrayPush((void **)&b->work, &b->numWork, &b->capWork,
                                sizeof(MlirValue));
  if (slot)
    *slot = v;
  return slot != NULL;
}

/* The op of `b` that is or holds `op`; null when `op` is outside it. */
static MlirOperation inBlock(const Block *b, MlirOperation op) {
  while (!mlirOperationIsNull(op) &&
         !mlirBlockEqual(mlirOperationGetBlock(op), b->block))
    op = mlirOperationGetParentOperation(op);
  return op;
}

static long indexOf(const Block *b, MlirOperation op) {
  const OpIndex *e = dtTableFind(&b->index, opHash(op), sameOp, op.ptr);
  return e ? (long)e->index : -1;
}

static void pushResults(Block *b, MlirOperation op) {
  for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r)
    if (!pushWork(b, mlirOperationGetResult(op, r)))
      b->oom = true;
}

/* The index of the last op of the block that uses `buffer` or what is made
 * from it, other than `dealloc`; -1 when some use lies outside the block
 * (nothing is moved then). */
static long lastUse(Block *b, MlirValue buffer, MlirOperation dealloc) {
  b->numWork = 0;
  if (!pushWork(b, buffer)) {
    b->oom = true;
    return -1;
  }
  long last = indexOf(b, mlirOpResultGetOwner(buffer));
  /* A value can come back through several paths (an op with many uses
   * of the buffer in its regions pushes its results once per use): past
   * this many values for one buffer, nothing is moved, so a pathological
   * graph costs at most this much per dealloc. */
  size_t budget = 64 * b->ops.count + 1024;
  for (size_t i = 0; i < b->numWork; ++i) {
    if (i > budget)
      return -1;
    MlirValue v = b->work[i];
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u);
         u = mlirOpOperandGetNextUse(u)) {
      MlirOperation owner = mlirOpOperandGetOwner(u);
      if (mlirOperationEqual(owner, dealloc))
        continue;
      MlirOperation holder = inBlock(b, owner);
      long at = mlirOperationIsNull(holder) ? -1 : indexOf(b, holder);
      if (at < 0)
        return -1;
      if (at > last)
        last = at;
      pushResults(b, owner);
      if (!mlirOperationEqual(holder, owner))
        pushResults(b, holder); /* what a region yields out */
    }
  }
  return b->oom ? -1 : last;
}

static bool moveDeallocs(MlirBlock block) {
  Block b = {block, {NULL, 0, 0}, dtTableInit(sizeof(OpIndex)), NULL, 0,
             0,     false};
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op) && !b.oom;
       op = mlirOperationGetNextInBlock(op)) {
    OpIndex *e = dtTableInsert(&b.index, opHash(op));
    if (!e || !dtOpListPush(&b.ops, op)) {
      b.oom = true;
      break;
    }
    e->op = op.ptr;
    e->index = b.ops.count - 1;
  }
  /* Where each dealloc goes, decided on the block as it is, then moved
   * (moving a dealloc changes no other op's order). */
  DtOpList deallocs = {NULL, 0, 0}, after = {NULL, 0, 0};
  for (size_t i = 0; i < b.ops.count && !b.oom; ++i) {
    MlirOperation op = b.ops.ops[i];
    if (!dtIsOp(op, "memref.dealloc") || mlirOperationGetNumOperands(op) != 1)
      continue;
    MlirValue buffer = mlirOperationGetOperand(op, 0);
    if (!mlirValueIsAOpResult(buffer) ||
        !mlirBlockEqual(mlirOperationGetBlock(mlirOpResultGetOwner(buffer)),
                        block))
      continue;
    long last = lastUse(&b, buffer, op);
    if (last >= 0 && (size_t)last + 1 < i &&
        (!dtOpListPush(&deallocs, op) ||
         !dtOpListPush(&after, b.ops.ops[last])))
      b.oom = true;
  }
  for (size_t i = 0; i < deallocs.count && !b.oom; ++i)
    mlirOperationMoveAfter(deallocs.ops[i], after.ops[i]);
  bool ok = !b.oom;
  free(deallocs.ops);
  free(after.ops);
  free(b.ops.ops);
  free(b.work);
  dtTableFree(&b.index);
  return ok;
}

typedef struct Blocks {
  MlirBlock *blocks;
  size_t count, capacity;
  bool oom;
} Blocks;

static MlirWalkResult collectBlocks(MlirOperation op, void *userData) {
  Blocks *all = userData;
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r)
    for (MlirBlock blk = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
         !mlirBlockIsNull(blk); blk = mlirBlockGetNextInRegion(blk)) {
      MlirBlock *slot = dtArrayPush((void **)&all->blocks, &all->count,
                                    &all->capacity, sizeof(MlirBlock));
      if (!slot) {
        all->oom = true;
        return MlirWalkResultInterrupt;
      }
      *slot = blk;
    }
  return MlirWalkResultAdvance;
}

static bool runEarlyDealloc(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  Blocks all = {NULL, 0, 0, false};
  mlirOperationWalk(root, collectBlocks, &all, MlirWalkPreOrder);
  bool ok = !all.oom;
  for (size_t i = 0; i < all.count && ok; ++i)
    ok = moveDeallocs(all.blocks[i]);
  free(all.blocks);
  if (!ok)
    mlirEmitError(mlirOperationGetLocation(root),
                  "dtensor-early-dealloc: out of memory");
  return ok;
}

const DtPassDef dtEarlyDeallocPass = {
    .info = {"dtensor-early-dealloc",
             "On the bufferized program, move each memref.dealloc up to just "
             "after the last op of its block that uses the buffer (MLIR's "
             "ownership-based deallocation frees at the end of the block)",
             0, NULL},
    .verifyFirst = false,
    .run = runEarlyDealloc,
};
