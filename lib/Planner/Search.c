/* The LayoutConverter: one-step transforms over the full state space, the
 * minimum-cost search (A* with an admissible latency bound), the seed's
 * greedy walk, and plan printing.
 *
 * A state is a sharding spec of the tensor, packed into 64 bits: one byte
 * per mesh axis saying what the axis does (free, Partial, or the dim it
 * shards and its position among that dim's axes). Partial axes keep the
 * source's reduce kind, so the kind needs no bits. */
#include "PlannerInternal.h"

#include "Support/Support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A step spans at most this many mesh axes (bounds the branching factor on
 * meshes of many axes; every 3-D mesh gets all groups). */
#define MAX_GROUP_AXES 3

enum { CODE_FREE = 0, CODE_PARTIAL = 1, CODE_DIM0 = 2 };

typedef struct Ctx {
  const DtensorMesh *mesh;
  int meshRank;
  int64_t axisSize[DTENSOR_MAX_MESH_RANK];
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  int64_t eltSize;
  /* Per mesh axis: the kind of its Partial (the source's, or the target's
   * where the plan creates it), and whether the plan creates it. */
  DtensorReduceKind partialKind[DTENSOR_MAX_MESH_RANK];
  bool create[DTENSOR_MAX_MESH_RANK];
  bool keep[DTENSOR_MAX_MESH_RANK];         /* Partial in the target too */
  double minLatency[DTENSOR_MAX_MESH_RANK]; /* log2(n_a) α_a */
  const DtensorPlanOptions *options;
  /* The target, for the lower bound: its axes per dim. */
  int targetNum[DTENSOR_MAX_TENSOR_RANK];
  int targetAxis[DTENSOR_MAX_TENSOR_RANK][DTENSOR_MAX_MESH_RANK];
  /* Per set of mesh axes (a bit mask): group size and slowest link. */
  double groupN[1 << DTENSOR_MAX_MESH_RANK];
  double groupAlpha[1 << DTENSOR_MAX_MESH_RANK];
  double groupBeta[1 << DTENSOR_MAX_MESH_RANK];
} Ctx;

/* A decoded state. */
typedef struct State {
  int numAxes[DTENSOR_MAX_TENSOR_RANK];
  int axes[DTENSOR_MAX_TENSOR_RANK][DTENSOR_MAX_MESH_RANK];
  bool partial[DTENSOR_MAX_MESH_RANK];
  int64_t shards[DTENSOR_MAX_TENSOR_RANK];
  int64_t padded[DTENSOR_MAX_TENSOR_RANK];
  int64_t bytes;
} State;

static uint64_t encodeSpec(const Ctx *c, const DtensorShardingSpec *s) {
  uint64_t key = 0;
  for (int a = 0; a < c->meshRank; ++a)
    if (s->partial[a] != DTENSOR_REDUCE_NONE)
      key |= (uint64_t)CODE_PARTIAL << (8 * a);
  for (int d = 0; d < s->rank; ++d)
    for (int i = 0; i < s->numAxes[d]; ++i)
      key |= (uint64_t)(CODE_DIM0 + d * 8 + i) << (8 * s->axes[d][i]);
  return key;
}

static void decode(const Ctx *c, uint64_t key, State *st) {
  memset(st->numAxes, 0, sizeof(int) * (size_t)c->rank);
  for (int a = 0; a < c->meshRank; ++a) {
    int code = (int)((key >> (8 * a)) & 0xff);
    st->partial[a] = code == CODE_PARTIAL;
    if (code >= CODE_DIM0) {
      int d = (code - CODE_DIM0) / 8, i = (code - CODE_DIM0) % 8;
      st->axes[d][i] = a;
      if (i + 1 > st->numAxes[d])
        st->numAxes[d] = i + 1;
    }
  }
  st->bytes = c->eltSize;
  for (int d = 0; d < c->rank; ++d) {
    int64_t n = 1;
    for (int i = 0; i < st->numAxes[d]; ++i)
      n *= c->axisSize[st->axes[d][i]];
    st->shards[d] = n;
    st->padded[d] = dtCeilDiv(c->shape[d], n);
    st->bytes *= st->padded[d];
  }
}

static void toSpec(const Ctx *c, uint64_t key, DtensorShardingSpec *out) {
  State st;
  decode(c, key, &st);
  dtensorShardingSpecInitReplicated(c->rank, out);
  for (int d = 0; d < c->rank; ++d) {
    out->numAxes[d] = st.numAxes[d];
    memcpy(out->axes[d], st.axes[d], sizeof(int) * (size_t)st.numAxes[d]);
  }
  for (int a = 0; a < c->meshRank; ++a)
    out->partial[a] = st.partial[a] ? c->partialKind[a] : DTENSOR_REDUCE_NONE;
}

static uint64_t setCode(uint64_t key, int axis, int code) {
  return (key & ~((uint64_t)0xff << (8 * axis))) |
         ((uint64_t)code << (8 * axis));
}

/* ---- one-step transforms ------------------------------------------------ */

typedef struct Edge {
  DtensorCommSpec comm;
  uint64_t to;
  DtensorCommCost cost;
} Edge;

typedef void (*EdgeFn)(const Edge *edge, void *userData);

static int64_t groupOf(const Ctx *c, int n, const int *axes) {
  int64_t g = 1;
  for (int i = 0; i < n; ++i)
    g *= c->axisSize[axes[i]];
  return g;
}

static void emit(const Ctx *c, const State *st, DtensorCommSpec *comm,
                 uint64_t to, int64_t bytesOut, EdgeFn fn, void *user) {
  Edge e;
  e.comm = *comm;
  e.to = to;
  unsigned mask = 0;
  for (int i = 0; i < comm->numAxes; ++i)
    mask |= 1u << comm->axes[i];
  e.cost =
      dtCommCostOnGroup(comm->pattern, c->groupN[mask], c->groupAlpha[mask],
                        c->groupBeta[mask], st->bytes, bytesOut, c->options);
  dtCommCostCalibrate(&e.cost, comm->pattern, comm->numAxes, comm->axes,
                      st->bytes, bytesOut, c->options);
  fn(&e, user);
}

/* Calls `visit` on every ordered sequence (length 1..MAX_GROUP_AXES) of
 * distinct axes from `pool`. */
typedef void (*SeqFn)(const Ctx *c, const State *st, uint64_t key,
                      const int *seq, int n, void *arg);

static void sequences(const Ctx *c, const State *st, uint64_t key,
                      const int *pool, int poolSize, int *seq, int n,
                      unsigned used, SeqFn visit, void *arg) {
  if (n > 0)
    visit(c, st, key, seq, n, arg);
  if (n == MAX_GROUP_AXES)
    return;
  for (int i = 0; i < poolSize; ++i) {
    if (used & (1u << i))
      continue;
    seq[n] = pool[i];
    sequences(c, st, key, pool, poolSize, seq, n + 1, used | (1u << i), visit,
              arg);
  }
}

typedef struct SeqArg {
  DtensorCommPattern pattern;
  EdgeFn fn;
  void *user;
} SeqArg;

/* Whether reductions of kinds `a` and `b` give one value in either order:
 * the same kind, or sums and averages. */
static bool kindsCommute(DtensorReduceKind a, DtensorReduceKind b) {
  bool linearA = a == DTENSOR_REDUCE_SUM || a == DTENSOR_REDUCE_AVG;
  bool linearB = b == DTENSOR_REDUCE_SUM || b == DTENSOR_REDUCE_AVG;
  return a == b || (linearA && linearB);
}

/* Whether `comm` may reduce its axes in state `key`: every other Partial
 * axis's kind commutes with its kind, so the order of reductions does not
 * change the value. */
static bool reducible(const Ctx *c, uint64_t key, const DtensorCommSpec *comm) {
  unsigned mine = 0;
  for (int i = 0; i < comm->numAxes; ++i)
    mine |= 1u << comm->axes[i];
  for (int a = 0; a < c->meshRank; ++a)
    if (!(mine >> a & 1) && ((key >> (8 * a)) & 0xff) == CODE_PARTIAL &&
        !kindsCommute(comm->reduce, c->partialKind[a]))
      return false;
  return true;
}

/* local_split or reduce_scatter of `seq` onto dim `d`, where the chunks
 * nest. */
static void splitOntoDim(const Ctx *c, const State *st, uint64_t key,
                         const int *seq, int n, int d, const SeqArg *sa) {
  int64_t g = groupOf(c, n, seq);
  if (!dtChunksNest(c->shape[d], st->shards[d], g))
    return;
  uint64_t to = key;
  for (int i = 0; i < n; ++i)
    to = setCode(to, seq[i], CODE_DIM0 + d * 8 + st->numAxes[d] + i);
  DtensorCommSpec comm = {sa->pattern, n, {0}, -1, d, DTENSOR_REDUCE_NONE};
  memcpy(comm.axes, seq, sizeof(int) * (size_t)n);
  if (sa->pattern == DTENSOR_COMM_REDUCE_SCATTER) {
    /* One collective reduces one kind. */
    comm.reduce = c->partialKind[seq[0]];
    for (int i = 1; i < n; ++i)
      if (c->partialKind[seq[i]] != comm.reduce)
        return;
    if (!reducible(c, key, &comm))
      return;
  }
  int64_t out =
      st->bytes / st->padded[d] * dtCeilDiv(c->shape[d], st->shards[d] * g);
  emit(c, st, &comm, to, out, sa->fn, sa->user);
}

/* local_split or reduce_scatter of `seq` onto each dim. */
static void splitOnto(const Ctx *c, const State *st, uint64_t key,
                      const int *seq, int n, void *arg) {
  for (int d = 0; d < c->rank; ++d)
    splitOntoDim(c, st, key, seq, n, d, arg);
}

/* A `pattern` step (all_reduce, or local_partial) over each non-empty
 * subset of `axes` whose kinds agree: all_reduce frees them (when no other
 * pending kind forbids it), local_partial makes them Partial. */
static void subsetSteps(const Ctx *c, const State *st, uint64_t key,
                        const int *axes, int n, DtensorCommPattern pattern,
                        EdgeFn fn, void *user) {
  bool reduce = pattern == DTENSOR_COMM_ALL_REDUCE;
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    DtensorCommSpec step = {pattern, 0, {0}, -1, -1, DTENSOR_REDUCE_NONE};
    uint64_t to = key;
    bool oneKind = true;
    for (int i = 0; i < n; ++i)
      if (mask & (1u << i)) {
        DtensorReduceKind k = c->partialKind[axes[i]];
        oneKind &= step.numAxes == 0 || k == step.reduce;
        step.reduce = k;
        step.axes[step.numAxes++] = axes[i];
        to = setCode(to, axes[i], reduce ? CODE_FREE : CODE_PARTIAL);
      }
    if (oneKind && (!reduce || reducible(c, key, &step)))
      emit(c, st, &step, to, st->bytes, fn, user);
  }
}

static void forEachEdge(const Ctx *c, uint64_t key, EdgeFn fn, void *user) {
  State st;
  decode(c, key, &st);
  int freeAxes[DTENSOR_MAX_MESH_RANK], numFree = 0;
  int partialAxes[DTENSOR_MAX_MESH_RANK], numPartial = 0;
  for (int a = 0; a < c->meshRank; ++a) {
    int code = (int)((key >> (8 * a)) & 0xff);
    if (code == CODE_FREE)
      freeAxes[numFree++] = a;
    else if (code == CODE_PARTIAL)
      partialAxes[numPartial++] = a;
  }
  /* all_gather of a suffix of a dim's axes, and all_to_all of it to
   * another dim. */
  for (int d = 0; d < c->rank; ++d) {
    int k = st.numAxes[d];
    /* Suffixes of up to MAX_GROUP_AXES axes, and the whole list however
     * long (gathering a dim completely always nests). */
    for (int j = 1; j <= k && (j <= MAX_GROUP_AXES || j == k); ++j) {
      const int *suffix = &st.axes[d][k - j];
      int64_t g = groupOf(c, j, suffix);
      int64_t coarse = st.shards[d] / g;
      if (!dtChunksNest(c->shape[d], coarse, g))
        continue;
      uint64_t gathered = key;
      for (int i = 0; i < j; ++i)
        gathered = setCode(gathered, suffix[i], CODE_FREE);
      int64_t grown = st.bytes / st.padded[d] * dtCeilDiv(c->shape[d], coarse);
      DtensorCommSpec ag = {DTENSOR_COMM_ALL_GATHER, j, {0}, d, -1,
                            DTENSOR_REDUCE_NONE};
      memcpy(ag.axes, suffix, sizeof(int) * (size_t)j);
      emit(c, &st, &ag, gathered, grown, fn, user);
      for (int e = 0; e < c->rank; ++e) {
        if (e == d || !dtChunksNest(c->shape[e], st.shards[e], g))
          continue;
        uint64_t to = gathered;
        for (int i = 0; i < j; ++i)
          to = setCode(to, suffix[i], CODE_DIM0 + e * 8 + st.numAxes[e] + i);
        int64_t out =
            grown / st.padded[e] * dtCeilDiv(c->shape[e], st.shards[e] * g);
        DtensorCommSpec a2a = {DTENSOR_COMM_ALL_TO_ALL, j, {0}, d, e,
                               DTENSOR_REDUCE_NONE};
        memcpy(a2a.axes, suffix, sizeof(int) * (size_t)j);
        emit(c, &st, &a2a, to, out, fn, user);
      }
    }
  }
  int seq[MAX_GROUP_AXES];
  SeqArg split = {DTENSOR_COMM_LOCAL_SPLIT, fn, user};
  sequences(c, &st, key, freeAxes, numFree, seq, 0, 0, splitOnto, &split);
  /* A target dim over more axes than a step spans: all of them split at
   * once onto the replicated dim (splitting from replicated always nests,
   * so on a mesh of any rank every target stays reachable). */
  for (int d = 0; d < c->rank; ++d) {
    int n = c->targetNum[d];
    bool allFree = n > MAX_GROUP_AXES && st.numAxes[d] == 0;
    for (int i = 0; i < n && allFree; ++i)
      allFree = ((key >> (8 * c->targetAxis[d][i])) & 0xff) == CODE_FREE;
    if (allFree)
      splitOntoDim(c, &st, key, c->targetAxis[d], n, d, &split);
  }
  /* The target's Partial, made locally on a set of free axes of one kind
   * (what is resolved later must commute with it: see reducible). */
  int creatable[DTENSOR_MAX_MESH_RANK] = {0}, numCreatable = 0;
  for (int i = 0; i < numFree; ++i)
    if (c->create[freeAxes[i]])
      creatable[numCreatable++] = freeAxes[i];
  subsetSteps(c, &st, key, creatable, numCreatable, DTENSOR_COMM_LOCAL_PARTIAL,
              fn, user);
  if (numPartial == 0)
    return;
  SeqArg scatter = {DTENSOR_COMM_REDUCE_SCATTER, fn, user};
  sequences(c, &st, key, partialAxes, numPartial, seq, 0, 0, splitOnto,
            &scatter);
  /* all_reduce of any non-empty subset of the Partial axes. */
  subsetSteps(c, &st, key, partialAxes, numPartial, DTENSOR_COMM_ALL_REDUCE, fn,
              user);
}

static double weight(const Ctx *c, const DtensorCommCost *cost) {
  return c->options->objective == DTENSOR_OBJECTIVE_FORWARD_BACKWARD
             ? cost->forwardUs + cost->backwardUs
             : cost->forwardUs;
}

/* A lower bound of the cost from `key` to `target`. A dim's axes are a
 * stack (splits push minor axes, gathers and all_to_all pop them), so every
 * axis past the longest common prefix of a dim's list with the target's
 * must leave it in some collective, and so must every Partial axis the
 * target does not keep. A collective over a group A of N = Π n_a devices
 * takes at least log2 N = Σ_{a∈A} log2 n_a steps (a ring's N - 1, or
 * recursive doubling's or Bruck's ceil(log2 N)) of max α each, so the sum of
 * log2(n_a) α_a over those axes is a lower bound (admissible: A* stays
 * optimal). */
static double lowerBound(const Ctx *c, uint64_t key) {
  double h = 0.0;
  int at[DTENSOR_MAX_TENSOR_RANK][DTENSOR_MAX_MESH_RANK];
  int num[DTENSOR_MAX_TENSOR_RANK] = {0};
  for (int a = 0; a < c->meshRank; ++a) {
    int code = (int)((key >> (8 * a)) & 0xff);
    if (code == CODE_PARTIAL && !c->keep[a])
      h += c->minLatency[a];
    if (code < CODE_DIM0)
      continue;
    int d = (code - CODE_DIM0) / 8, i = (code - CODE_DIM0) % 8;
    at[d][i] = a;
    if (i + 1 > num[d])
      num[d] = i + 1;
  }
  for (int d = 0; d < c->rank; ++d) {
    int i = 0;
    while (i < num[d] && i < c->targetNum[d] && at[d][i] == c->targetAxis[d][i])
      ++i;
    for (; i < num[d]; ++i)
      h += c->minLatency[at[d][i]];
  }
  return h;
}

/* ---- the optimal search -------------------------------------------------- */

typedef struct Node {
  uint64_t key;
  double g; /* cost so far */
  int steps;
  int parent; /* node index, -1 for the source */
  DtensorCommSpec via;
  DtensorCommCost cost;
  bool closed;
} Node;

typedef struct HeapItem {
  double f;
  int steps;
  int node;
} HeapItem;

typedef struct Search {
  const Ctx *c;
  uint64_t target;
  Node *nodes;
  int numNodes, capNodes;
  DtTable index; /* a state's node index, by its key */
  HeapItem *heap;
  int heapSize, capHeap;
  int current;
  bool failed;
} Search;

/* MurmurHash3's finalizer: every bit of a state's packed key reaches the
 * low bits the table indexes by. */
static uint64_t hashKey(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

/* Search.index holds node indices (an int each: the probe stays small);
 * the key is the node's. */
typedef struct NodeKey {
  const Node *nodes;
  uint64_t key;
} NodeKey;

static bool sameKey(const void *entry, const void *key) {
  const NodeKey *k = key;
  return k->nodes[*(const int *)entry].key == k->key;
}

/* Returns the node of `key`, creating it (g = INFINITY) if new; -1 when
 * out of memory. */
static int nodeOf(Search *s, uint64_t key) {
  uint64_t hash = hashKey(key);
  NodeKey probe = {s->nodes, key};
  const int *hit = dtTableFind(&s->index, hash, sameKey, &probe);
  if (hit)
    return *hit;
  if (s->numNodes == s->capNodes) {
    int cap = s->capNodes * 2;
    Node *nodes = realloc(s->nodes, sizeof(Node) * (size_t)cap);
    if (!nodes)
      return -1;
    s->nodes = nodes;
    s->capNodes = cap;
  }
  int *slot = dtTableInsert(&s->index, hash);
  if (!slot)
    return -1;
  int i = s->numNodes++;
  memset(&s->nodes[i], 0, sizeof(Node));
  s->nodes[i].key = key;
  s->nodes[i].g = INFINITY;
  s->nodes[i].parent = -1;
  *slot = i;
  return i;
}

static bool heapLess(const HeapItem *a, const HeapItem *b) {
  return a->f < b->f || (a->f == b->f && a->steps < b->steps);
}

static bool heapPush(Search *s, HeapItem item) {
  if (s->heapSize == s->capHeap) {
    int cap = s->capHeap * 2;
    HeapItem *heap = realloc(s->heap, sizeof(HeapItem) * (size_t)cap);
    if (!heap)
      return false;
    s->heap = heap;
    s->capHeap = cap;
  }
  int i = s->heapSize++;
  while (i > 0 && heapLess(&item, &s->heap[(i - 1) / 2])) {
    s->heap[i] = s->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  s->heap[i] = item;
  return true;
}

static HeapItem heapPop(Search *s) {
  HeapItem top = s->heap[0], last = s->heap[--s->heapSize];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    const HeapItem *best = &last;
    if (l < s->heapSize && heapLess(&s->heap[l], best))
      m = l, best = &s->heap[l];
    if (r < s->heapSize && heapLess(&s->heap[r], best))
      m = r;
    if (m == i)
      break;
    s->heap[i] = s->heap[m];
    i = m;
  }
  if (s->heapSize > 0)
    s->heap[i] = last;
  return top;
}

static void relax(const Edge *e, void *user) {
  Search *s = user;
  if (s->failed)
    return;
  int from = s->current;
  double g = s->nodes[from].g + weight(s->c, &e->cost);
  int steps = s->nodes[from].steps + 1;
  int to = nodeOf(s, e->to);
  if (to < 0) {
    s->failed = true;
    return;
  }
  Node *n = &s->nodes[to];
  if (n->closed || g > n->g || (g == n->g && steps >= n->steps))
    return;
  n->g = g;
  n->steps = steps;
  n->parent = from;
  n->via = e->comm;
  n->cost = e->cost;
  HeapItem item = {g + lowerBound(s->c, e->to), steps, to};
  if (!heapPush(s, item))
    s->failed = true;
}

static void searchFree(Search *s) {
  free(s->nodes);
  dtTableFree(&s->index);
  free(s->heap);
}

/* Fills `plan`'s steps from the chain of parents ending at `node`. */
static bool tracePath(const Ctx *c, const Node *nodes, int node,
                      DtensorPlan *plan, DtensorDiag *diag) {
  int count = 0;
  for (int i = node; nodes[i].parent >= 0; i = nodes[i].parent)
    ++count;
  if (count > DTENSOR_MAX_PLAN_STEPS)
    return dtDiag(diag, -1, "the plan has %d steps, more than %d", count,
                  DTENSOR_MAX_PLAN_STEPS);
  plan->numSteps = count;
  plan->forwardUs = plan->backwardUs = 0.0;
  for (int i = node, k = count - 1; nodes[i].parent >= 0;
       i = nodes[i].parent, --k) {
    plan->steps[k].comm = nodes[i].via;
    plan->steps[k].cost = nodes[i].cost;
    plan->steps[k].viewDim = 0;
    plan->steps[k].viewGroups = 0;
    toSpec(c, nodes[i].key, &plan->steps[k].after);
  }
  for (int k = 0; k < count; ++k) {
    plan->forwardUs += plan->steps[k].cost.forwardUs;
    plan->backwardUs += plan->steps[k].cost.backwardUs;
  }
  return true;
}

static bool searchOptimal(const Ctx *c, uint64_t source, uint64_t target,
                          DtensorPlan *plan, DtensorDiag *diag) {
  Search s = {c,    target, NULL, 0, 64,   dtTableInit(sizeof(int)),
              NULL, 0,      64,   0, false};
  s.nodes = malloc(sizeof(Node) * (size_t)s.capNodes);
  s.heap = malloc(sizeof(HeapItem) * (size_t)s.capHeap);
  if (!s.nodes || !s.heap) {
    searchFree(&s);
    return dtDiag(diag, -1, "out of memory while planning");
  }
  int start = nodeOf(&s, source);
  s.nodes[start].g = 0.0;
  heapPush(&s, (HeapItem){lowerBound(c, source), 0, start});
  int found = -1;
  while (s.heapSize > 0 && !s.failed) {
    HeapItem top = heapPop(&s);
    Node *n = &s.nodes[top.node];
    if (n->closed)
      continue;
    n->closed = true;
    if (n->key == target) {
      found = top.node;
      break;
    }
    s.current = top.node;
    forEachEdge(c, n->key, relax, &s);
  }
  plan->statesVisited = s.numNodes;
  bool ok;
  if (s.failed)
    ok = dtDiag(diag, -1, "out of memory while planning");
  else if (found < 0)
    ok = dtDiag(diag, -1, "no sequence of collectives reaches the target");
  else
    ok = tracePath(c, s.nodes, found, plan, diag);
  searchFree(&s);
  return ok;
}

/* ---- the greedy walk ----------------------------------------------------- */

/* How far a spec is from the target, as the seed's spec difference: per
 * dim, the axes past the longest common prefix with the target's list must
 * be gathered and the target's remaining axes split in (a dim's axes are a
 * stack: only the minor end changes), and each Partial axis the target does
 * not keep must be reduced. */
static int distance(const Ctx *c, uint64_t key, uint64_t target) {
  State a, b;
  decode(c, key, &a);
  decode(c, target, &b);
  int n = 0;
  for (int d = 0; d < c->rank; ++d) {
    int common = 0;
    while (common < a.numAxes[d] && common < b.numAxes[d] &&
           a.axes[d][common] == b.axes[d][common])
      ++common;
    n += a.numAxes[d] - common + b.numAxes[d] - common;
  }
  for (int i = 0; i < c->meshRank; ++i)
    n += a.partial[i] && !b.partial[i];
  return n;
}

typedef struct Greedy {
  const Ctx *c;
  uint64_t target;
  const uint64_t *visited;
  int numVisited;
  bool have;
  Edge best;
  int bestDistance;
} Greedy;

static void greedyConsider(const Edge *e, void *user) {
  Greedy *g = user;
  for (int i = 0; i < g->numVisited; ++i)
    if (g->visited[i] == e->to)
      return;
  int d = distance(g->c, e->to, g->target);
  if (!g->have || d < g->bestDistance ||
      (d == g->bestDistance &&
       weight(g->c, &e->cost) < weight(g->c, &g->best.cost))) {
    g->have = true;
    g->best = *e;
    g->bestDistance = d;
  }
}

/* As the seed's layout_converting: from the current spec, take the one-step
 * transform whose result is closest to the target (fewest mesh axes placed
 * differently), the cheapest among equally close ones, never revisiting a
 * spec. Where every transform leads to a visited spec (uneven shapes can
 * close such loops) the walk steps back and tries the next best, so it
 * always ends at the target. */
static bool searchGreedy(const Ctx *c, uint64_t source, uint64_t target,
                         DtensorPlan *plan, DtensorDiag *diag) {
  int capVisited = 64, numVisited = 0;
  uint64_t *visited = malloc(sizeof(uint64_t) * (size_t)capVisited);
  if (!visited)
    return dtDiag(diag, -1, "out of memory while planning");
  visited[numVisited++] = source;
  enum { MAX_DEPTH = 4096 };
  Edge *path = malloc(sizeof(Edge) * MAX_DEPTH);
  if (!path) {
    free(visited);
    return dtDiag(diag, -1, "out of memory while planning");
  }
  int depth = 0;
  uint64_t key = source;
  bool ok = true;
  while (key != target) {
    Greedy g;
    memset(&g, 0, sizeof(g));
    g.c = c;
    g.target = target;
    g.visited = visited;
    g.numVisited = numVisited;
    if (depth < MAX_DEPTH)
      forEachEdge(c, key, greedyConsider, &g);
    if (!g.have) {
      if (depth == 0) {
        ok = dtDiag(diag, -1, "no sequence of collectives reaches the target");
        break;
      }
      key = --depth > 0 ? path[depth - 1].to : source;
      continue;
    }
    if (numVisited == capVisited) {
      uint64_t *grown =
          realloc(visited, sizeof(uint64_t) * (size_t)(capVisited *= 2));
      if (!grown) {
        ok = dtDiag(diag, -1, "out of memory while planning");
        break;
      }
      visited = grown;
    }
    visited[numVisited++] = g.best.to;
    path[depth++] = g.best;
    key = g.best.to;
  }
  plan->numSteps = 0;
  plan->forwardUs = plan->backwardUs = 0.0;
  plan->statesVisited = numVisited;
  if (ok && depth > DTENSOR_MAX_PLAN_STEPS)
    ok = dtDiag(diag, -1,
                "the greedy walk took %d steps, more than a plan "
                "holds (%d)",
                depth, DTENSOR_MAX_PLAN_STEPS);
  for (int i = 0; ok && i < depth; ++i) {
    DtensorPlanStep *step = &plan->steps[plan->numSteps++];
    step->comm = path[i].comm;
    step->cost = path[i].cost;
    step->viewDim = 0;
    step->viewGroups = 0;
    toSpec(c, path[i].to, &step->after);
    plan->forwardUs += path[i].cost.forwardUs;
    plan->backwardUs += path[i].cost.backwardUs;
  }
  free(visited);
  free(path);
  return ok;
}

/* ---- the entry point ----------------------------------------------------- */

void dtensorPlanOptionsInit(DtensorPlanOptions *outOptions) {
  outOptions->strategy = DTENSOR_STRATEGY_OPTIMAL;
  outOptions->objective = DTENSOR_OBJECTIVE_FORWARD;
  outOptions->copyBandwidthGBps = DTENSOR_DEFAULT_COPY_BANDWIDTH_GBPS;
  outOptions->calibration = NULL;
}

static bool interleaved(const DtensorShardingSpec *s) {
  int dim;
  int64_t groups;
  return dtSpecInterleaved(s, &dim, &groups);
}

/* Says why the conversion is impossible, or fills the search context. */
/* With a calibration, a collective over a measured group A may cost only
 * its latency L_A while taking |A| axes off: each axis's share of the bound
 * is at most L_A / |A| for every measured A that has it. */
static void calibratedBounds(Ctx *c) {
  if (!c->options->calibration)
    return;
  static const DtensorCommPattern kMeasured[] = {
      DTENSOR_COMM_ALL_GATHER, DTENSOR_COMM_ALL_TO_ALL, DTENSOR_COMM_ALL_REDUCE,
      DTENSOR_COMM_REDUCE_SCATTER};
  for (unsigned m = 1; m < (1u << c->meshRank); ++m) {
    int axes[DTENSOR_MAX_MESH_RANK], n = 0;
    for (int a = 0; a < c->meshRank; ++a)
      if (m >> a & 1)
        axes[n++] = a;
    for (size_t k = 0; k < sizeof(kMeasured) / sizeof(kMeasured[0]); ++k) {
      double latency, bandwidth;
      if (!dtensorCalibrationGet(c->options->calibration, kMeasured[k], n, axes,
                                 &latency, &bandwidth))
        continue;
      for (int i = 0; i < n; ++i)
        if (latency / n < c->minLatency[axes[i]])
          c->minLatency[axes[i]] = latency / n;
    }
  }
}

static bool prepare(const DtensorLayout *source,
                    const DtensorShardingSpec *target,
                    const DtensorPlanOptions *options, Ctx *c,
                    DtensorDiag *diag) {
  const DtensorMesh *mesh = source->mesh;
  if (!(options->copyBandwidthGBps > 0))
    return dtDiag(diag, -1, "the copy bandwidth must be > 0 GB/s");
  if (!dtensorShardingSpecCheck(target, mesh, source->rank, source->shape,
                                diag))
    return false;
  c->mesh = mesh;
  c->meshRank = dtensorMeshGetRank(mesh);
  c->rank = source->rank;
  memcpy(c->shape, source->shape, sizeof(int64_t) * (size_t)source->rank);
  c->eltSize = (int64_t)dtensorElementTypeGetSize(source->elementType);
  c->options = options;
  for (int a = 0; a < c->meshRank; ++a) {
    c->axisSize[a] = dtensorMeshGetAxisSize(mesh, a);
    c->minLatency[a] =
        log2((double)c->axisSize[a]) * dtensorMeshGetLink(mesh, a).latencyUs;
  }
  calibratedBounds(c);
  /* Each mask from the one without its lowest axis. */
  c->groupN[0] = 1.0;
  c->groupAlpha[0] = 0.0;
  c->groupBeta[0] = INFINITY;
  for (unsigned m = 1; m < (1u << c->meshRank); ++m) {
    int a = __builtin_ctz(m);
    unsigned rest = m & (m - 1);
    DtensorLink l = dtensorMeshGetLink(mesh, a);
    c->groupN[m] = c->groupN[rest] * (double)c->axisSize[a];
    c->groupAlpha[m] =
        l.latencyUs > c->groupAlpha[rest] ? l.latencyUs : c->groupAlpha[rest];
    c->groupBeta[m] = l.bandwidthGBps < c->groupBeta[rest] ? l.bandwidthGBps
                                                           : c->groupBeta[rest];
  }
  const DtensorShardingSpec *s = &source->spec;
  for (int a = 0; a < c->meshRank; ++a) {
    const char *axisName = dtensorMeshGetAxisName(mesh, a);
    DtensorReduceKind from = s->partial[a], to = target->partial[a];
    /* A Partial of the target may be made locally (local_partial), also
     * after a collective resolved the source's. */
    c->create[a] = to != DTENSOR_REDUCE_NONE;
    c->partialKind[a] = to != DTENSOR_REDUCE_NONE ? to : from;
    if (to != DTENSOR_REDUCE_NONE && from != DTENSOR_REDUCE_NONE && from != to)
      return dtDiag(diag, -1,
                    "mesh axis %d (%s): Partial(%s) cannot become Partial(%s): "
                    "reductions of different kinds do not convert into each "
                    "other",
                    a, axisName, dtensorReduceKindGetName(from),
                    dtensorReduceKindGetName(to));
    c->keep[a] = to != DTENSOR_REDUCE_NONE;
  }
  /* Pending reductions of different kinds commute only when both are
   * linear (sum and avg: an average of sums is a sum of averages); max,
   * min or prod mixed with another kind have no defined order. */
  DtensorReduceKind first = DTENSOR_REDUCE_NONE;
  bool resolves = false, mixed = false, linear = true;
  for (int a = 0; a < c->meshRank; ++a) {
    DtensorReduceKind k = s->partial[a];
    if (k == DTENSOR_REDUCE_NONE)
      continue;
    resolves |= !c->keep[a];
    linear &= k == DTENSOR_REDUCE_SUM || k == DTENSOR_REDUCE_AVG;
    mixed |= first != DTENSOR_REDUCE_NONE && k != first;
    if (first == DTENSOR_REDUCE_NONE)
      first = k;
  }
  if (resolves && mixed && !linear)
    return dtDiag(diag, -1,
                  "the source is Partial with different reduce kinds on "
                  "different mesh axes, not all sum or avg; the order of "
                  "their reductions is not defined, so none can be resolved "
                  "by a redistribution");
  /* An axis Partial in neither may become Partial of the one kind being
   * resolved, so that a collective over it and the pending axes together
   * (cheaper when measured so) resolves both. */
  for (int a = 0; a < c->meshRank; ++a)
    if (c->partialKind[a] == DTENSOR_REDUCE_NONE && resolves && !mixed) {
      c->partialKind[a] = first;
      c->create[a] = true;
    }
  return true;
}

bool dtensorPlanCompute(const DtensorLayout *source,
                        const DtensorShardingSpec *target,
                        const DtensorPlanOptions *options, DtensorPlan *outPlan,
                        DtensorDiag *outDiag) {
  DtensorPlanOptions defaults;
  if (!options) {
    dtensorPlanOptionsInit(&defaults);
    options = &defaults;
  }
  if ((interleaved(&source->spec) || interleaved(target)) &&
      !dtensorShardingSpecEqual(&source->spec, target))
    return dtPlanInterleaved(source, target, options, outPlan, outDiag);
  Ctx c;
  if (!prepare(source, target, options, &c, outDiag))
    return false;
  outPlan->source = source->spec;
  outPlan->numSteps = 0;
  outPlan->forwardUs = outPlan->backwardUs = 0.0;
  outPlan->statesVisited = 1;
  uint64_t from = encodeSpec(&c, &source->spec);
  uint64_t to = encodeSpec(&c, target);
  for (int d = 0; d < c.rank; ++d) {
    c.targetNum[d] = target->numAxes[d];
    memcpy(c.targetAxis[d], target->axes[d],
           sizeof(int) * (size_t)target->numAxes[d]);
  }
  if (from == to)
    return true;
  return options->strategy == DTENSOR_STRATEGY_GREEDY
             ? searchGreedy(&c, from, to, outPlan, outDiag)
             : searchOptimal(&c, from, to, outPlan, outDiag);
}

/* ---- printing ------------------------------------------------------------ */

size_t dtensorPlanPrint(const DtensorPlan *plan, const DtensorMesh *mesh,
                        char *buffer, size_t capacity) {
  (void)mesh;
  DtBuf b = dtBufInit(buffer, capacity);
  char spec[256], comm[256];
  dtensorShardingSpecPrint(&plan->source, spec, sizeof(spec));
  dtBufPrintf(&b, "from %s\n", spec);
  for (int i = 0; i < plan->numSteps; ++i) {
    const DtensorPlanStep *s = &plan->steps[i];
    dtensorCommSpecPrint(&s->comm, comm, sizeof(comm));
    dtensorShardingSpecPrint(&s->after, spec, sizeof(spec));
    if (s->viewGroups > 1 &&
        (i == 0 || plan->steps[i - 1].viewGroups != s->viewGroups ||
         plan->steps[i - 1].viewDim != s->viewDim))
      dtBufPrintf(&b, "view dim %d as %lld groups (one dim more)\n", s->viewDim,
                  (long long)s->viewGroups);
    else if (s->viewGroups <= 1 && i > 0 && plan->steps[i - 1].viewGroups > 1)
      dtBufPrintf(&b, "view as is\n");
    dtBufPrintf(&b,
                "step %d: %s -> %s  fwd %.3f us, bwd %.3f us, %lld bytes "
                "per device\n",
                i + 1, comm, spec, s->cost.forwardUs, s->cost.backwardUs,
                (long long)s->cost.bytesPerDevice);
  }
  dtBufPrintf(&b, "total: %d steps, fwd %.3f us, bwd %.3f us\n", plan->numSteps,
              plan->forwardUs, plan->backwardUs);
  return b.length;
}
