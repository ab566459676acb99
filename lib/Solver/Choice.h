/* A choice graph (Choice.c): nodes that each pick one of their choices,
 * each choice with a cost, and pairwise edges whose cost depends on both
 * ends' picks (a matrix); the sum is minimized. Two exact reductions of
 * PBQP solvers shrink it before an integer program sees it: a node with
 * no edge picks its cheapest choice (R0); a node with one edge folds into
 * its neighbour's costs (R1). (R2, a node of two edges made an edge
 * between its neighbours, is left out: its min-plus matrices made the
 * program's relaxation weak; on a 6-layer GPT step CBC stopped at 60 s
 * with a 22 % gap instead of proving the optimum in 6.7 s.) Pinned nodes
 * are never reduced (those that other constraints, such as memory, also
 * read). After the rest is solved, the reduced nodes' picks follow from
 * their neighbours'. Plain C, no MLIR. */
#ifndef DTENSOR_LIB_SOLVER_CHOICE_H
#define DTENSOR_LIB_SOLVER_CHOICE_H

#include <stdbool.h>

typedef struct DtChoiceGraph DtChoiceGraph;

/// A new, empty graph; NULL when out of memory.
DtChoiceGraph *dtChoiceCreate(void);
void dtChoiceDestroy(DtChoiceGraph *g);

/// Adds a node of `numChoices` choices, each costing 0; its index, -1 when
/// out of memory.
int dtChoiceAddNode(DtChoiceGraph *g, int numChoices);

/// Adds `cost` to choice `choice` of `node` (INFINITY forbids it).
void dtChoiceAddCost(DtChoiceGraph *g, int node, int choice, double cost);

/// Adds the edge cost `cost[i * nb + j]` (node a picks i, node b picks j;
/// na, nb their numbers of choices) to the edge between `a` and `b`
/// (made on first use; a != b). False when out of memory.
bool dtChoiceAddEdge(DtChoiceGraph *g, int a, int b, const double *cost);

/// `node` is never reduced.
void dtChoicePin(DtChoiceGraph *g, int node);

/// Reduces every unpinned node with at most one edge, until none is
/// left. False when out of memory.
bool dtChoiceReduce(DtChoiceGraph *g);

/// Whether `node` is still in the graph (not reduced).
bool dtChoiceIsAlive(const DtChoiceGraph *g, int node);

/// The number of choices of `node` and their costs (reductions fold
/// their neighbours' into them).
int dtChoiceNumChoices(const DtChoiceGraph *g, int node);
const double *dtChoiceCosts(const DtChoiceGraph *g, int node);

/// The edges still in the graph: for e in [0, dtChoiceNumEdges), false
/// when edge e was removed; else its ends and its matrix (a's choices by
/// b's).
int dtChoiceNumEdges(const DtChoiceGraph *g);
bool dtChoiceEdge(const DtChoiceGraph *g, int e, int *a, int *b,
                  const double **cost);

/// The cost the isolated nodes' reductions (R0) took out of the graph.
double dtChoiceConstant(const DtChoiceGraph *g);

/// Given `pick` for every node still alive, fills in the reduced nodes'
/// picks (in reverse order of their reductions).
void dtChoiceExpand(const DtChoiceGraph *g, int *pick);

#endif
