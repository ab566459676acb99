/* dtensor-schedule-collectives: on the per-device program (after
 * dtensor-partition and the bucketing), the ops of each block that holds a
 * collective are put in an order that gives every collective independent
 * compute to overlap. dtensor-lower-to-runtime starts a collective right
 * after its input is made and waits right before its result's first use;
 * what runs in between is hidden behind it. Program order often leaves
 * nothing there: a backward pass computes one weight's gradient (needed
 * only by its update) before the gradient a reduce_scatter waits for, and
 * the collective's consumer comes next.
 *
 * The order is a list schedule of the block's dependence graph: among the
 * ops whose operands are all made, first those that a collective's input
 * needs (in program order), then the others (in program order). So each
 * collective's input is made as early as its dependences allow and the
 * ops no collective waits for fill the time until its result is used.
 * Dependences: every value an op (or an op in its regions) uses from the
 * block; program order among the ops that may have effects (ops of
 * dialects not known to be pure, calls of functions that hold such ops or
 * are only declared), and among those that may communicate (collectives,
 * calls of functions that hold one or are only declared). The order
 * depends only on the program, so every rank computes the same one. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Util.h"

#include "Support/Support.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* An op of the block and its position. */
typedef struct Slot {
  void *op;
  int index;
} Slot;

static bool sameOp(const void *entry, const void *key) {
  return ((const Slot *)entry)->op == *(void *const *)key;
}

static uint64_t opHash(MlirOperation op) {
  return dtHashMix(0, (uint64_t)(uintptr_t)op.ptr);
}

/* Dialects whose ops on tensors have no effect but their results
 * (structured control flow: as pure as its regions). */
static bool knownPure(MlirOperation op) {
  static const char *const kPrefixes[] = {
      "arith.",   "math.",  "tensor.",      "linalg.",    "tosa.",
      "complex.", "index.", "affine.apply", "affine.min", "affine.max",
      "dtensor.", "scf.",   "func.return"};
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  for (size_t i = 0; i < sizeof(kPrefixes) / sizeof(kPrefixes[0]); ++i) {
    size_t k = strlen(kPrefixes[i]);
    if (n.length >= k && !memcmp(n.data, kPrefixes[i], k))
      return true;
  }
  return false;
}

/* What an op may do besides making its results: have effects (program
 * order kept among such ops), communicate (program order kept among
 * collectives and such ops). A call is what its callee's body does; a
 * call of a declaration (or too deep) may do both. */
typedef struct Kind {
  MlirSymbolTable symbols;
  int depth;
  bool effects, communicates;
} Kind;

static MlirWalkResult classify(MlirOperation op, void *data);

static void classifyCall(Kind *k, MlirOperation call) {
  MlirOperation callee =
      k->depth < 8 ? mlirSymbolTableLookup(k->symbols, dtCalleeName(call))
                   : (MlirOperation){NULL};
  MlirRegion body = mlirOperationIsNull(callee)
                        ? (MlirRegion){NULL}
                        : mlirOperationGetRegion(callee, 0);
  if (mlirRegionIsNull(body) ||
      mlirBlockIsNull(mlirRegionGetFirstBlock(body))) {
    k->effects = k->communicates = true;
    return;
  }
  ++k->depth;
  mlirOperationWalk(callee, classify, k, MlirWalkPreOrder);
  --k->depth;
}

static MlirWalkResult classify(MlirOperation op, void *data) {
  Kind *k = data;
  if (dtCollectiveOf(op))
    k->communicates = true;
  else if (dtIsOp(op, "func.call"))
    classifyCall(k, op);
  else if (!dtIsOp(op, "func.func") && !knownPure(op))
    k->effects = true;
  return k->effects && k->communicates ? MlirWalkResultInterrupt
                                       : MlirWalkResultAdvance;
}

/* A dependence: `to` uses `from`, or follows it in effect order. */
typedef struct Edge {
  int from, to;
} Edge;

typedef struct Graph {
  MlirBlock block;
  DtTable slots;
  Edge *edges; /* in order of their target */
  size_t numEdges, capEdges;
  bool failed;
} Graph;

static void addEdge(Graph *g, int from, int to) {
  if (from < 0 || from == to)
    return;
  Edge *e =
      dtArrayPush((void **)&g->edges, &g->numEdges, &g->capEdges, sizeof(Edge));
  if (!e) {
    g->failed = true;
    return;
  }
  e->from = from;
  e->to = to;
}

static int indexOf(Graph *g, MlirOperation op) {
  Slot *s = dtTableFind(&g->slots, opHash(op), sameOp, &op.ptr);
  return s ? s->index : -1;
}

typedef struct Uses {
  Graph *g;
  int user;
} Uses;

/* Every value of the block that `op` (nested ops included) uses is a
 * dependence of the top-level op `user`. */
static MlirWalkResult collectUses(MlirOperation op, void *data) {
  Uses *u = data;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    MlirValue v = mlirOperationGetOperand(op, i);
    if (!mlirValueIsAOpResult(v))
      continue;
    MlirOperation def = mlirOpResultGetOwner(v);
    if (mlirBlockEqual(mlirOperationGetBlock(def), u->g->block))
      addEdge(u->g, indexOf(u->g, def), u->user);
  }
  return MlirWalkResultAdvance;
}

/* A min-heap of op positions. */
typedef struct Heap {
  int *items;
  int count;
} Heap;

static void heapPush(Heap *h, int v) {
  int i = h->count++;
  while (i > 0 && h->items[(i - 1) / 2] > v) {
    h->items[i] = h->items[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->items[i] = v;
}

static int heapPop(Heap *h) {
  int top = h->items[0], last = h->items[--h->count], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->count)
      break;
    if (c + 1 < h->count && h->items[c + 1] < h->items[c])
      ++c;
    if (last <= h->items[c])
      break;
    h->items[i] = h->items[c];
    i = c;
  }
  if (h->count)
    h->items[i] = last;
  return top;
}

/* Reorders `block` (its ops but the last, the terminator); false when out
 * of memory. */
static bool scheduleBlock(MlirBlock block, MlirSymbolTable symbols) {
  Graph g = {block, dtTableInit(sizeof(Slot)), NULL, 0, 0, false};
  MlirOperation *ops = NULL, last = mlirBlockGetFirstOperation(block);
  size_t count = 0, cap = 0;
  for (; !mlirOperationIsNull(mlirOperationGetNextInBlock(last));
       last = mlirOperationGetNextInBlock(last)) {
    MlirOperation *slot =
        dtArrayPush((void **)&ops, &count, &cap, sizeof(*ops));
    Slot *s = slot ? dtTableInsert(&g.slots, opHash(last)) : NULL;
    if (!s) {
      free(ops);
      dtTableFree(&g.slots);
      return false;
    }
    *slot = last;
    s->op = last.ptr;
    s->index = (int)count - 1;
  }
  int n = (int)count;
  bool *urgent = calloc(count + 1, sizeof(bool));
  int *pending = calloc(count + 1, sizeof(int));
  int *firstOut = calloc(count + 2, sizeof(int));
  int *fill = calloc(count + 1, sizeof(int));
  int *order = calloc(count + 1, sizeof(int));
  int *out = NULL;
  Heap now = {calloc(count + 1, sizeof(int)), 0},
       later = {calloc(count + 1, sizeof(int)), 0};
  bool ok = urgent && pending && firstOut && fill && order && now.items &&
            later.items;
  int lastEffect = -1, lastCommunication = -1;
  for (int i = 0; ok && i < n; ++i) {
    Uses u = {&g, i};
    mlirOperationWalk(ops[i], collectUses, &u, MlirWalkPreOrder);
    Kind k = {symbols, 0, false, false};
    mlirOperationWalk(ops[i], classify, &k, MlirWalkPreOrder);
    if (k.effects) {
      addEdge(&g, lastEffect, i);
      lastEffect = i;
    }
    if (k.communicates) {
      addEdge(&g, lastCommunication, i);
      lastCommunication = i;
    }
    urgent[i] = dtCollectiveOf(ops[i]) != NULL;
  }
  ok = ok && !g.failed && (out = calloc(g.numEdges + 1, sizeof(int)));
  if (ok) {
    /* What a collective's input needs: everything its collective depends
     * on, swept back from the last op (edges come in order of their
     * target, and every edge goes forward). */
    for (size_t e = g.numEdges; e-- > 0;)
      if (urgent[g.edges[e].to])
        urgent[g.edges[e].from] = true;
    /* Out-edges, grouped by source. */
    for (size_t e = 0; e < g.numEdges; ++e) {
      ++firstOut[g.edges[e].from + 1];
      ++pending[g.edges[e].to];
    }
    for (int i = 0; i < n; ++i)
      firstOut[i + 1] += firstOut[i];
    for (size_t e = 0; e < g.numEdges; ++e)
      out[firstOut[g.edges[e].from] + fill[g.edges[e].from]++] = g.edges[e].to;
    /* The list schedule: ready ops a collective needs first, each group
     * in program order. */
    int done = 0;
    for (int i = 0; i < n; ++i)
      if (!pending[i])
        heapPush(urgent[i] ? &now : &later, i);
    while (now.count || later.count) {
      int i = heapPop(now.count ? &now : &later);
      order[done++] = i;
      for (int k = firstOut[i]; k < firstOut[i + 1]; ++k)
        if (--pending[out[k]] == 0)
          heapPush(urgent[out[k]] ? &now : &later, out[k]);
    }
    /* Every op is placed (edges go forward, so there is no cycle). */
    if (done == n)
      for (int k = 0; k < n; ++k)
        mlirOperationMoveBefore(ops[order[k]], last);
  }
  free(urgent);
  free(pending);
  free(firstOut);
  free(fill);
  free(out);
  free(order);
  free(now.items);
  free(later.items);
  free(g.edges);
  free(ops);
  dtTableFree(&g.slots);
  return ok;
}

typedef struct Blocks {
  MlirBlock *items;
  size_t count, cap;
  bool failed;
} Blocks;

/* The blocks that hold a collective, each once. */
static MlirWalkResult collectBlocks(MlirOperation op, void *data) {
  Blocks *b = data;
  if (!dtCollectiveOf(op))
    return MlirWalkResultAdvance;
  MlirBlock block = mlirOperationGetBlock(op);
  for (size_t i = 0; i < b->count; ++i)
    if (mlirBlockEqual(b->items[i], block))
      return MlirWalkResultAdvance;
  MlirBlock *slot =
      dtArrayPush((void **)&b->items, &b->count, &b->cap, sizeof(MlirBlock));
  if (!slot) {
    b->failed = true;
    return MlirWalkResultInterrupt;
  }
  *slot = block;
  return MlirWalkResultAdvance;
}

static bool runSchedule(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  Blocks blocks = {NULL, 0, 0, false};
  mlirOperationWalk(root, collectBlocks, &blocks, MlirWalkPreOrder);
  bool ok = !blocks.failed;
  MlirSymbolTable symbols = mlirSymbolTableCreate(root);
  for (size_t i = 0; ok && i < blocks.count; ++i)
    ok = scheduleBlock(blocks.items[i], symbols);
  mlirSymbolTableDestroy(symbols);
  free(blocks.items);
  if (!ok)
    dtOpError(root, "dtensor-schedule-collectives: out of memory");
  return ok;
}

const DtPassDef dtScheduleCollectivesPass = {
    .info = {"dtensor-schedule-collectives",
             "Order each block of the per-device program so that the inputs "
             "of collectives are made first and the ops no collective needs "
             "run while collectives are in flight",
             0, NULL},
    .verifyFirst = true,
    .run = runSchedule,
};
