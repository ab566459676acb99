/* The choice graph and its exact reductions (Choice.h). */
#include "Choice.h"

#include "Support/Support.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct Node {
  int numChoices;
  double *cost;
  bool pinned, alive;
  int *edges; /* incident edges, alive or not */
  size_t numEdges, capEdges;
} Node;

typedef struct Edge {
  int a, b;
  double *cost; /* a's choices by b's */
  bool alive;
} Edge;

/* A reduction, undone in reverse: node `u` picks `table[...]` given its
 * neighbour's pick (none: `table[0]`; `v`: table[pick(v)]). */
typedef struct Step {
  int u, v;
  int *table;
} Step;

typedef struct EdgeKey {
  uint64_t key;
  int index;
} EdgeKey;

struct DtChoiceGraph {
  Node *nodes;
  size_t numNodes, capNodes;
  Edge *edges;
  size_t numEdges, capEdges;
  Step *steps;
  size_t numSteps, capSteps;
  DtTable index; /* EdgeKey: the live edge between two nodes */
  double constant;
};

static uint64_t pairKey(int a, int b) {
  if (a > b) {
    int t = a;
    a = b;
    b = t;
  }
  return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

static bool sameKey(const void *entry, const void *key) {
  return ((const EdgeKey *)entry)->key == *(const uint64_t *)key;
}

DtChoiceGraph *dtChoiceCreate(void) {
  DtChoiceGraph *g = calloc(1, sizeof(DtChoiceGraph));
  if (g)
    g->index = dtTableInit(sizeof(EdgeKey));
  return g;
}

void dtChoiceDestroy(DtChoiceGraph *g) {
  if (!g)
    return;
  for (size_t i = 0; i < g->numNodes; ++i) {
    free(g->nodes[i].cost);
    free(g->nodes[i].edges);
  }
  for (size_t e = 0; e < g->numEdges; ++e)
    free(g->edges[e].cost);
  for (size_t s = 0; s < g->numSteps; ++s)
    free(g->steps[s].table);
  free(g->nodes);
  free(g->edges);
  free(g->steps);
  dtTableFree(&g->index);
  free(g);
}

int dtChoiceAddNode(DtChoiceGraph *g, int numChoices) {
  Node *n =
      dtArrayPush((void **)&g->nodes, &g->numNodes, &g->capNodes, sizeof(Node));
  if (!n)
    return -1;
  memset(n, 0, sizeof(*n));
  n->numChoices = numChoices;
  n->alive = true;
  n->cost = calloc((size_t)numChoices + 1, sizeof(double));
  if (!n->cost) {
    --g->numNodes;
    return -1;
  }
  return (int)(g->numNodes - 1);
}

void dtChoiceAddCost(DtChoiceGraph *g, int node, int choice, double cost) {
  g->nodes[node].cost[choice] += cost;
}

void dtChoicePin(DtChoiceGraph *g, int node) { g->nodes[node].pinned = true; }

/* The live edge between a and b, -1 if none. */
static int edgeBetween(const DtChoiceGraph *g, int a, int b) {
  uint64_t key = pairKey(a, b);
  const EdgeKey *hit = dtTableFind(&g->index, dtHashMix(7, key), sameKey, &key);
  return hit ? hit->index : -1;
}

static bool linkEdge(DtChoiceGraph *g, int node, int e) {
  Node *n = &g->nodes[node];
  int *slot =
      dtArrayPush((void **)&n->edges, &n->numEdges, &n->capEdges, sizeof(int));
  if (!slot)
    return false;
  *slot = e;
  return true;
}

bool dtChoiceAddEdge(DtChoiceGraph *g, int a, int b, const double *cost) {
  int na = g->nodes[a].numChoices, nb = g->nodes[b].numChoices;
  int e = edgeBetween(g, a, b);
  if (e >= 0) {
    Edge *ed = &g->edges[e];
    for (int i = 0; i < na; ++i)
      for (int j = 0; j < nb; ++j)
        ed->cost[ed->a == a ? i * nb + j : j * na + i] += cost[i * nb + j];
    return true;
  }
  Edge *ed =
      dtArrayPush((void **)&g->edges, &g->numEdges, &g->capEdges, sizeof(Edge));
  if (!ed)
    return false;
  ed->a = a;
  ed->b = b;
  ed->alive = true;
  ed->cost = malloc(sizeof(double) * (size_t)(na * nb + 1));
  if (!ed->cost) {
    --g->numEdges;
    return false;
  }
  memcpy(ed->cost, cost, sizeof(double) * (size_t)(na * nb));
  e = (int)(g->numEdges - 1);
  uint64_t key = pairKey(a, b);
  EdgeKey *slot = dtTableInsert(&g->index, dtHashMix(7, key));
  if (!slot)
    return false;
  slot->key = key;
  slot->index = e;
  return linkEdge(g, a, e) && linkEdge(g, b, e);
}

/* Removes edge e (and its key). */
static void dropEdge(DtChoiceGraph *g, int e) {
  Edge *ed = &g->edges[e];
  ed->alive = false;
  uint64_t key = pairKey(ed->a, ed->b);
  EdgeKey *hit = dtTableFind(&g->index, dtHashMix(7, key), sameKey, &key);
  if (hit)
    dtTableRemove(&g->index, hit);
}

/* The live edges of `node` (at most `max`), into `out`; their count. */
static int liveEdges(const DtChoiceGraph *g, int node, int *out, int max) {
  const Node *n = &g->nodes[node];
  int count = 0;
  for (size_t i = 0; i < n->numEdges; ++i)
    if (g->edges[n->edges[i]].alive) {
      if (count < max)
        out[count] = n->edges[i];
      ++count;
    }
  return count;
}

/* The cost of edge e when `node` picks i and the other end picks j. */
static double edgeCost(const DtChoiceGraph *g, int e, int node, int i, int j) {
  const Edge *ed = &g->edges[e];
  int nb = g->nodes[ed->b].numChoices;
  /* The matrix is a's choices by b's. */
  return ed->a == node ? ed->cost[i * nb + j] : ed->cost[j * nb + i];
}

static int otherEnd(const DtChoiceGraph *g, int e, int node) {
  return g->edges[e].a == node ? g->edges[e].b : g->edges[e].a;
}

static Step *pushStep(DtChoiceGraph *g, int u, int v, size_t cells) {
  Step *s =
      dtArrayPush((void **)&g->steps, &g->numSteps, &g->capSteps, sizeof(Step));
  if (!s)
    return NULL;
  s->u = u;
  s->v = v;
  s->table = malloc(sizeof(int) * (cells + 1));
  if (!s->table) {
    --g->numSteps;
    return NULL;
  }
  return s;
}

/* Reduces `u` if it is alive, unpinned and has at most one edge; its
 * neighbour is pushed on `work`. -1 when out of memory. */
static int reduceNode(DtChoiceGraph *g, int u, int **work, size_t *numWork,
                      size_t *capWork) {
  Node *n = &g->nodes[u];
  if (!n->alive || n->pinned)
    return 0;
  int es[1] = {-1};
  int degree = liveEdges(g, u, es, 1);
  if (degree > 1)
    return 0;
  int nu = n->numChoices;
  if (degree == 0) {
    Step *s = pushStep(g, u, -1, 1);
    if (!s)
      return -1;
    int best = 0;
    for (int i = 1; i < nu; ++i)
      if (n->cost[i] < n->cost[best])
        best = i;
    s->table[0] = best;
    g->constant += n->cost[best];
  } else if (es[0] >= 0) {
    int v = otherEnd(g, es[0], u), nv = g->nodes[v].numChoices;
    Step *s = pushStep(g, u, v, (size_t)nv);
    if (!s)
      return -1;
    for (int j = 0; j < nv; ++j) {
      int best = 0;
      double bestCost = INFINITY;
      for (int i = 0; i < nu; ++i) {
        double c = n->cost[i] + edgeCost(g, es[0], u, i, j);
        if (c < bestCost) {
          bestCost = c;
          best = i;
        }
      }
      s->table[j] = best;
      g->nodes[v].cost[j] += bestCost;
    }
    dropEdge(g, es[0]);
  }
  n->alive = false;
  /* Its neighbours may be reducible now. */
  for (int d = 0; d < degree; ++d) {
    int *slot = dtArrayPush((void **)work, numWork, capWork, sizeof(int));
    if (!slot)
      return -1;
    *slot = otherEnd(g, es[d], u);
  }
  return 1;
}

bool dtChoiceReduce(DtChoiceGraph *g) {
  int *work = NULL;
  size_t numWork = 0, capWork = 0;
  for (size_t u = 0; u < g->numNodes; ++u) {
    int *slot = dtArrayPush((void **)&work, &numWork, &capWork, sizeof(int));
    if (!slot) {
      free(work);
      return false;
    }
    *slot = (int)(g->numNodes - 1 - u);
  }
  bool ok = true;
  while (numWork > 0 && ok)
    ok = reduceNode(g, work[--numWork], &work, &numWork, &capWork) >= 0;
  free(work);
  return ok;
}

bool dtChoiceIsAlive(const DtChoiceGraph *g, int node) {
  return g->nodes[node].alive;
}

int dtChoiceNumChoices(const DtChoiceGraph *g, int node) {
  return g->nodes[node].numChoices;
}

const double *dtChoiceCosts(const DtChoiceGraph *g, int node) {
  return g->nodes[node].cost;
}

int dtChoiceNumEdges(const DtChoiceGraph *g) { return (int)g->numEdges; }

bool dtChoiceEdge(const DtChoiceGraph *g, int e, int *a, int *b,
                  const double **cost) {
  const Edge *ed = &g->edges[e];
  if (!ed->alive)
    return false;
  *a = ed->a;
  *b = ed->b;
  *cost = ed->cost;
  return true;
}

double dtChoiceConstant(const DtChoiceGraph *g) { return g->constant; }

void dtChoiceExpand(const DtChoiceGraph *g, int *pick) {
  for (size_t s = g->numSteps; s-- > 0;) {
    const Step *st = &g->steps[s];
    pick[st->u] = st->v < 0 ? st->table[0] : st->table[pick[st->v]];
  }
}
