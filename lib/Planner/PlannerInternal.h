/* Private helpers shared by the planner's files. */
#ifndef DTENSOR_LIB_PLANNER_PLANNERINTERNAL_H
#define DTENSOR_LIB_PLANNER_PLANNERINTERNAL_H

#include "dtensor-c/Planner.h"

/// Whether a dim of `size` elements cut into `coarse` chunks and into
/// `coarse * group` chunks (ceil-div, as the layout algebra does) nests:
/// every coarse chunk is exactly the concatenation of its `group` fine
/// chunks, including the padded shapes (ceil(coarseChunk / group) is the
/// fine chunk). Only then is a gather or split between the two levels a
/// pure collective.
bool dtChunksNest(int64_t size, int64_t coarse, int64_t group);

/// The number of chunks `dim` is cut into under `spec` on `mesh`.
int64_t dtSpecNumShards(const DtensorMesh *mesh,
                        const DtensorShardingSpec *spec, int dim);

/// The padded local shape of `spec` on `mesh` for a tensor of `shape`.
void dtSpecPaddedShape(const DtensorMesh *mesh, const DtensorShardingSpec *spec,
                       int rank, const int64_t *shape, int64_t *outShape);

/// The product of the sizes of `axes` on `mesh`.
int64_t dtGroupSize(const DtensorMesh *mesh, int numAxes, const int *axes);

/// The slowest link of a group: the largest latency and the smallest
/// bandwidth over `axes`.
/// Replaces `c`'s forward time by the calibration's measured line where
/// `options` has one for (pattern, axes) (bytes: the gathered size for
/// all_gather, the input's otherwise).
void dtCommCostCalibrate(DtensorCommCost *c, DtensorCommPattern pattern,
                         int numAxes, const int *axes, int64_t bytesIn,
                         int64_t bytesOut, const DtensorPlanOptions *options);

void dtGroupLink(const DtensorMesh *mesh, int numAxes, const int *axes,
                 double *outAlpha, double *outBeta);

/// The cost of a step of `pattern` on a group of `n` devices whose slowest
/// link is (alpha µs, beta GB/s): the one place the cost formulas live.
DtensorCommCost dtCommCostOnGroup(DtensorCommPattern pattern, double n,
                                  double alpha, double beta, int64_t bytesIn,
                                  int64_t bytesOut,
                                  const DtensorPlanOptions *options);

/// The cost of `comm` given the padded bytes per device before and after it.
DtensorCommCost dtCommCost(const DtensorCommSpec *comm, const DtensorMesh *mesh,
                           int64_t bytesIn, int64_t bytesOut,
                           const DtensorPlanOptions *options);

/* ---- interleaved shards (Interleave.c) ----------------------------------- */

/// Whether `s` interleaves a sharded dim; its first such dim and groups.
bool dtSpecInterleaved(const DtensorShardingSpec *s, int *outDim,
                       int64_t *outGroups);

/// `s` in the view of `dim` cut into [groups, size / groups]: the groups
/// replicated, the dim's axes on the inner dim without interleave.
void dtSpecExpandView(const DtensorShardingSpec *s, int dim,
                      DtensorShardingSpec *out);

/// The inverse of dtSpecExpandView for a viewed spec whose groups dim is
/// replicated (false otherwise).
bool dtSpecCollapseView(const DtensorShardingSpec *s, int dim, int64_t groups,
                        DtensorShardingSpec *out);

/// `base` (a layout of the original space) with the spec `viewed`, a spec of
/// its view of `dim` cut into `groups`, collapsed back (false, with `diag`,
/// when the groups dim is sharded).
bool dtLayoutUnview(const DtensorLayout *base,
                    const DtensorShardingSpec *viewed, int dim, int64_t groups,
                    DtensorLayout *out, DtensorDiag *diag);

/// `l` in the view of `dim` cut into [groups, size / groups].
bool dtLayoutView(const DtensorLayout *l, int dim, int64_t groups,
                  DtensorLayout *out, DtensorDiag *diag);

/// dtensorPlanCompute where the source or the target interleaves a dim
/// (the file's comment says how).
bool dtPlanInterleaved(const DtensorLayout *source,
                       const DtensorShardingSpec *target,
                       const DtensorPlanOptions *options, DtensorPlan *plan,
                       DtensorDiag *diag);

#endif
