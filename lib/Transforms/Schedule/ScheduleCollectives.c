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
 * depends only on the program, so every rank computes the same one.
 *
 * Memory: hoisting a collective's inputs keeps what the ops left behind
 * need alive longer (a backward pass's saved activations while the
 * gradients some collective waits for are made first; an FSDP weight's
 * gathered copy while the gradient contraction runs). Under a budget
 * (memory=, or else the one dtensor-auto-shard planned the function
 * under, DT_ATTR_MEMORY) the schedule stays within it, or within program
 * order's peak where that is higher (the bytes live at each op as
 * dtensor-report counts them, Inspect/Memory.h): an op a collective
 * needs goes ahead of program order only where the bytes live while it
 * and the ops it passes run stay within that, and a schedule whose peak
 * is still higher is made again with a narrower window, then program
 * order stays. So a plan chosen under a budget (dtensor-auto-shard,
 * which estimates memory in program order) still fits it once
 * scheduled. Without a budget the schedule is as above. */
#include "Dialect/DialectInternal.h"
#include "Inspect/Memory.h"
#include "PassDef.h"
#include "Util.h"

#include "Support/Support.h"

#include <stdint.h>
#include <stdio.h>
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

/* A value of the block an op uses (each once per op), and whether the op
 * writes its result into it where it dies (Memory.h). */
typedef struct Use {
  int value;
  bool inPlace;
} Use;

/* What the block's values hold: per op its results' ids (`firstValue`),
 * per value its bytes and the ops that use it, per op the values it uses
 * (`firstUse`, into `uses`) and what its regions hold while it runs. */
typedef struct Memory {
  int *firstValue; /* per op + 1 */
  int64_t *bytes;  /* per value */
  int *users;      /* per value: distinct ops of the block using it */
  int *remaining;  /* per value: of them, not placed yet */
  int *lastEntry;  /* per value: its entry in `uses` for the op at hand */
  Use *uses;
  size_t numUses, capUses;
  int *firstUse;  /* per op + 1 */
  int64_t *inner; /* per op */
  int64_t live;   /* the bytes of placed values still to be used */
  /* In program order: per op the bytes live before it (`before`), and a
   * segment tree of the bytes live while each runs (`tree`, leaves at
   * `leaves`). */
  int64_t *before, *tree;
  int leaves;
  bool failed;
} Memory;

typedef struct Uses {
  Graph *g;
  Memory *m;
  MlirOperation top;
  int user;
  bool placed; /* false: the terminator, which stays last */
} Uses;

/* Notes that op `user` uses value `value` (in place or not). */
static void noteUse(Memory *m, int user, int value, bool inPlace) {
  int e = m->lastEntry[value];
  if (e >= m->firstUse[user]) {
    m->uses[e].inPlace |= inPlace;
    return;
  }
  Use *u =
      dtArrayPush((void **)&m->uses, &m->numUses, &m->capUses, sizeof(Use));
  if (!u) {
    m->failed = true;
    return;
  }
  *u = (Use){value, inPlace};
  m->lastEntry[value] = (int)m->numUses - 1;
  ++m->users[value];
}

/* Every value of the block that `op` (nested ops included) uses is a
 * dependence of the top-level op `user`. */
static MlirWalkResult collectUses(MlirOperation op, void *data) {
  Uses *u = data;
  bool top = mlirOperationEqual(op, u->top);
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    MlirValue v = mlirOperationGetOperand(op, i);
    if (!mlirValueIsAOpResult(v))
      continue;
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!mlirBlockEqual(mlirOperationGetBlock(def), u->g->block))
      continue;
    int from = indexOf(u->g, def);
    if (u->placed)
      addEdge(u->g, from, u->user);
    if (from >= 0 && u->m)
      noteUse(u->m, u->user,
              u->m->firstValue[from] + (int)mlirOpResultGetResultNumber(v),
              top && dtMemoryInitInPlace(op, i));
  }
  return MlirWalkResultAdvance;
}

/* The bytes live while op `i` runs, were it placed next: the values
 * placed before it that are still to be used (less its inits that die
 * there, its results' buffers), its results and what its regions hold. */
static int64_t bytesAt(const Memory *m, int i) {
  int64_t at = m->live + m->inner[i];
  for (int v = m->firstValue[i]; v < m->firstValue[i + 1]; ++v)
    at += m->bytes[v];
  for (int k = m->firstUse[i]; k < m->firstUse[i + 1]; ++k)
    if (m->uses[k].inPlace && m->remaining[m->uses[k].value] == 1)
      at -= m->bytes[m->uses[k].value];
  return at;
}

/* Op `i` placed: the values it used last die, its results that are used
 * live on. */
static void place(Memory *m, int i) {
  for (int k = m->firstUse[i]; k < m->firstUse[i + 1]; ++k)
    if (--m->remaining[m->uses[k].value] == 0)
      m->live -= m->bytes[m->uses[k].value];
  for (int v = m->firstValue[i]; v < m->firstValue[i + 1]; ++v)
    if (m->users[v])
      m->live += m->bytes[v];
}

/* The peak of the block's ops in program order (relative to what lives
 * around the block). */
static int64_t programOrderPeak(Memory *m, int n, int numValues) {
  memcpy(m->remaining, m->users, sizeof(int) * (size_t)numValues);
  m->live = 0;
  for (int i = 0; i < n; ++i) {
    m->before[i] = m->live;
    m->tree[m->leaves + i] = bytesAt(m, i);
    place(m, i);
  }
  for (int k = m->leaves - 1; k > 0; --k)
    m->tree[k] = m->tree[2 * k] > m->tree[2 * k + 1] ? m->tree[2 * k]
                                                     : m->tree[2 * k + 1];
  return m->tree[1];
}

/* The most bytes live while one of ops [from, to) runs, in program
 * order. */
static int64_t mostBetween(const Memory *m, int from, int to) {
  int64_t most = 0;
  for (int l = from + m->leaves, r = to + m->leaves; l < r; l /= 2, r /= 2) {
    if (l & 1) {
      most = m->tree[l] > most ? m->tree[l] : most;
      ++l;
    }
    if (r & 1) {
      --r;
      most = m->tree[r] > most ? m->tree[r] : most;
    }
  }
  return most;
}

/* The bytes of placed values still to be used once op `i` is placed. */
static int64_t liveAfter(const Memory *m, int i) {
  int64_t live = m->live;
  for (int v = m->firstValue[i]; v < m->firstValue[i + 1]; ++v)
    if (m->users[v])
      live += m->bytes[v];
  for (int k = m->firstUse[i]; k < m->firstUse[i + 1]; ++k)
    if (m->remaining[m->uses[k].value] == 1)
      live -= m->bytes[m->uses[k].value];
  return live;
}

/* Whether op `i`, placed while `first` is the first op of program order
 * not placed, keeps within `cap`: while it runs, and while ops first..i-1
 * run after it, each with what program order had live there and what the
 * ops placed ahead of it (`i` too) keep live on top. */
static bool fits(const Memory *m, int i, int first, int64_t cap) {
  return bytesAt(m, i) <= cap &&
         mostBetween(m, first, i) + liveAfter(m, i) - m->before[first] <= cap;
}

static void freeMemory(Memory *m) {
  free(m->firstValue);
  free(m->bytes);
  free(m->users);
  free(m->remaining);
  free(m->lastEntry);
  free(m->uses);
  free(m->firstUse);
  free(m->inner);
  free(m->before);
  free(m->tree);
}

/* The values of the block's ops: their ids and bytes. */
static bool valuesOf(Memory *m, MlirOperation *ops, int n, int *numValues) {
  m->firstValue = calloc((size_t)n + 1, sizeof(int));
  m->firstUse = calloc((size_t)n + 2, sizeof(int));
  m->inner = calloc((size_t)n + 1, sizeof(int64_t));
  m->before = calloc((size_t)n + 1, sizeof(int64_t));
  for (m->leaves = 1; m->leaves < n; m->leaves *= 2)
    ;
  m->tree = calloc(2 * (size_t)m->leaves, sizeof(int64_t));
  if (!m->firstValue || !m->firstUse || !m->inner || !m->before || !m->tree)
    return false;
  for (int i = 0; i < n; ++i) {
    m->firstValue[i + 1] =
        m->firstValue[i] + (int)mlirOperationGetNumResults(ops[i]);
    if (mlirOperationGetNumRegions(ops[i]))
      m->inner[i] = dtMemoryInnerPeak(ops[i], &m->failed);
  }
  int v = *numValues = m->firstValue[n];
  m->bytes = calloc((size_t)v + 1, sizeof(int64_t));
  m->users = calloc((size_t)v + 1, sizeof(int));
  m->remaining = calloc((size_t)v + 1, sizeof(int));
  m->lastEntry = malloc(sizeof(int) * ((size_t)v + 1));
  if (!m->bytes || !m->users || !m->remaining || !m->lastEntry)
    return false;
  for (int k = 0; k < v; ++k)
    m->lastEntry[k] = -1;
  for (int i = 0; i < n; ++i)
    for (int r = 0; r < m->firstValue[i + 1] - m->firstValue[i]; ++r)
      m->bytes[m->firstValue[i] + r] = dtMemoryResultBytes(ops[i], r);
  return !m->failed;
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

/* A list schedule of the block's `n` ops into `order`: among the ready
 * ops, those a collective needs (`urgent`) first while the bytes live
 * stay within `cap` (with no `m`, no bound), each group in program order.
 * Returns the bytes live at its peak (0 with no `m`), or INT64_MAX when
 * some op was not placed. */
static int64_t listSchedule(Memory *m, int n, int numValues, const bool *urgent,
                            int *pending, const int *firstOut, const int *out,
                            Heap *now, Heap *later, int64_t cap, int ahead,
                            int *order) {
  if (m) {
    memcpy(m->remaining, m->users, sizeof(int) * (size_t)numValues);
    m->live = 0;
  }
  now->count = later->count = 0;
  int64_t peak = 0;
  int done = 0;
  for (int i = 0; i < n; ++i)
    if (!pending[i])
      heapPush(urgent[i] ? now : later, i);
  while (now->count || later->count) {
    /* An op a collective needs goes first when program order has it
     * first, or ahead of the others when it fits. */
    bool first =
        now->count && (!later->count || now->items[0] < later->items[0] ||
                       (now->items[0] - later->items[0] <= ahead &&
                        (!m || fits(m, now->items[0], later->items[0], cap))));
    int i = heapPop(first ? now : later);
    if (m) {
      int64_t at = bytesAt(m, i);
      peak = at > peak ? at : peak;
      place(m, i);
    }
    order[done++] = i;
    for (int k = firstOut[i]; k < firstOut[i + 1]; ++k)
      if (--pending[out[k]] == 0)
        heapPush(urgent[out[k]] ? now : later, out[k]);
  }
  /* Edges go forward, so there is no cycle: every op is placed. */
  return done == n ? peak : INT64_MAX;
}

static const int64_t kUnbounded = INT64_MAX / 4;

/* The budget of `block`'s function: memory= (`budget`), or else the one
 * dtensor-auto-shard planned it under (DT_ATTR_MEMORY); -1: none. */
static int64_t budgetOf(MlirBlock block, int64_t budget) {
  MlirOperation func = mlirBlockGetParentOperation(block);
  while (!mlirOperationIsNull(func) && !dtIsOp(func, "func.func"))
    func = mlirOperationGetParentOperation(func);
  MlirAttribute planned = mlirOperationIsNull(func)
                              ? (MlirAttribute){NULL}
                              : dtGetAttr(func, DT_ATTR_MEMORY);
  if (budget < 0 && !mlirAttributeIsNull(planned) &&
      mlirAttributeIsAInteger(planned))
    budget = mlirIntegerAttrGetValueInt(planned);
  return budget;
}

/* The most bytes the ops of `block` may hold at once (over what lives
 * around them), given its peak in program order and the function's
 * budget: the budget less the function's arguments for its
 * body's block, program order's peak for blocks inside ops (what lives
 * around them is not known here); never under program order's. */
static int64_t capOf(MlirBlock block, int64_t budget, int64_t peak) {
  MlirOperation parent = mlirBlockGetParentOperation(block);
  if (!dtIsOp(parent, "func.func"))
    return peak;
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(block); ++i)
    budget -= dtTensorBytes(mlirValueGetType(mlirBlockGetArgument(block, i)));
  return budget > peak ? budget : peak;
}

/* The schedules tried, in turn, until one's peak is within the cap: the
 * first unbounded, the others bounded by the cap and a window (an op a
 * collective needs goes at most that many ops ahead of program order). */
enum { kMaxAttempts = 6 };
static const int kAhead[kMaxAttempts] = {INT32_MAX, INT32_MAX, 256, 64, 16, 4};

/* Reorders `block` (its ops but the last, the terminator); false when out
 * of memory. */
static bool scheduleBlock(MlirBlock block, MlirSymbolTable symbols,
                          int64_t budget) {
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
  int *indegree = calloc(count + 1, sizeof(int));
  int *firstOut = calloc(count + 2, sizeof(int));
  int *fill = calloc(count + 1, sizeof(int));
  int *order = calloc(count + 1, sizeof(int));
  int *out = NULL;
  Heap now = {calloc(count + 1, sizeof(int)), 0},
       later = {calloc(count + 1, sizeof(int)), 0};
  /* Without a budget, no memory is counted. */
  budget = budgetOf(block, budget);
  Memory mem = {0}, *m = budget >= 0 ? &mem : NULL;
  int numValues = 0;
  bool ok = urgent && pending && indegree && firstOut && fill && order &&
            now.items && later.items && (!m || valuesOf(m, ops, n, &numValues));
  int lastEffect = -1, lastCommunication = -1;
  for (int i = 0; ok && i <= n; ++i) {
    /* The terminator (i == n) only uses: its values live to the end. */
    MlirOperation op = i < n ? ops[i] : last;
    if (i == n && !m)
      break;
    Uses u = {&g, m, op, i, i < n};
    if (m)
      m->firstUse[i] = (int)m->numUses;
    mlirOperationWalk(op, collectUses, &u, MlirWalkPreOrder);
    if (m)
      m->firstUse[i + 1] = (int)m->numUses;
    if (i == n)
      break;
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
  ok = ok && !g.failed && !(m && m->failed) &&
       (out = calloc(g.numEdges + 1, sizeof(int)));
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
      ++indegree[g.edges[e].to];
    }
    for (int i = 0; i < n; ++i)
      firstOut[i + 1] += firstOut[i];
    for (size_t e = 0; e < g.numEdges; ++e)
      out[firstOut[g.edges[e].from] + fill[g.edges[e].from]++] = g.edges[e].to;
    /* Under a budget, schedules within it (or program order's peak) are
     * tried with narrower windows; then program order stays. */
    int64_t cap =
        m ? capOf(block, budget, programOrderPeak(m, n, numValues)) : 0;
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      memcpy(pending, indegree, sizeof(int) * (size_t)n);
      int64_t got = listSchedule(m, n, numValues, urgent, pending, firstOut,
                                 out, &now, &later, attempt ? cap : kUnbounded,
                                 kAhead[attempt], order);
      if (got <= cap) {
        for (int k = 0; k < n; ++k)
          mlirOperationMoveBefore(ops[order[k]], last);
        break;
      }
    }
  }
  freeMemory(&mem);
  free(urgent);
  free(pending);
  free(indegree);
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
  int64_t budget;
  if (!dtPassReadBudget(root, "dtensor-schedule-collectives", options, &budget))
    return false;
  Blocks blocks = {NULL, 0, 0, false};
  mlirOperationWalk(root, collectBlocks, &blocks, MlirWalkPreOrder);
  bool ok = !blocks.failed;
  MlirSymbolTable symbols = mlirSymbolTableCreate(root);
  for (size_t i = 0; ok && i < blocks.count; ++i)
    ok = scheduleBlock(blocks.items[i], symbols, budget);
  mlirSymbolTableDestroy(symbols);
  free(blocks.items);
  if (!ok)
    dtOpError(root, "dtensor-schedule-collectives: out of memory");
  return ok;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"memory", DTENSOR_OPTION_STRING, "", NULL,
     "the bytes each device may hold (512MB, 16GiB, 1048576): the schedule "
     "stays within them, or within program order's peak where that is "
     "higher; default unbounded"},
};

const DtPassDef dtScheduleCollectivesPass = {
    .info = {"dtensor-schedule-collectives",
             "Order each block of the per-device program so that the inputs "
             "of collectives are made first and the ops no collective needs "
             "run while collectives are in flight",
             (int)(sizeof(kOptions) / sizeof(kOptions[0])), kOptions},
    .verifyFirst = true,
    .run = runSchedule,
};
