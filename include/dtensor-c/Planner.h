/*===- dtensor-c/Planner.h - CommSpecs and the LayoutConverter ----*- C -*-===*
 *
 * Redistribution planning: plain C over the layout algebra, no MLIR. A
 * CommSpec is one collective (or local split) on a group of mesh axes; the
 * LayoutConverter finds the cheapest sequence of CommSpecs that turns a
 * tensor in one layout into the same tensor in another, under an α-β cost
 * model taken from the mesh's link model. See docs/planner.md.
 *
 *===----------------------------------------------------------------------===*/
#ifndef DTENSOR_C_PLANNER_H
#define DTENSOR_C_PLANNER_H

#include "dtensor-c/Layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * CommSpec
 *===----------------------------------------------------------------------===*/

/// What a CommSpec does; each maps to the dtensor collective of that name.
typedef enum DtensorCommPattern {
  DTENSOR_COMM_IDENTITY = 0,
  DTENSOR_COMM_ALL_GATHER,
  DTENSOR_COMM_ALL_TO_ALL,
  DTENSOR_COMM_LOCAL_SPLIT,
  DTENSOR_COMM_ALL_REDUCE,
  DTENSOR_COMM_REDUCE_SCATTER,
  /* Replicated axes become Partial of `reduce`, locally: for sum (prod) the
   * devices at coordinate 0 of the axes keep the value and the others hold
   * 0 (1); for max, min and avg every device keeps it. No communication. */
  DTENSOR_COMM_LOCAL_PARTIAL,
} DtensorCommPattern;

/// One step of a redistribution. `axes` are the mesh axes whose devices form
/// one group, major first (a device's position in its group is row-major
/// over them). `gatherDim` is the dim that grows (all_gather, all_to_all),
/// `shardDim` the dim that is split (local_split, reduce_scatter,
/// all_to_all); unused dims are -1. `reduce` is set for all_reduce and
/// reduce_scatter and NONE otherwise.
typedef struct DtensorCommSpec {
  DtensorCommPattern pattern;
  int numAxes;
  int axes[DTENSOR_MAX_MESH_RANK];
  int gatherDim;
  int shardDim;
  DtensorReduceKind reduce;
} DtensorCommSpec;

/// Returns the name of a pattern ("all_gather", ...), as the dialect's op.
DTENSOR_EXPORT const char *dtensorCommPatternGetName(DtensorCommPattern p);

/// Prints a CommSpec, e.g. `all_to_all(axes=[1], gather_dim=0, shard_dim=1)`
/// (snprintf semantics).
DTENSOR_EXPORT size_t dtensorCommSpecPrint(const DtensorCommSpec *comm,
                                           char *buffer, size_t capacity);

/// Parses the printed form; returns false and fills `outDiag` (with the
/// column) on error. Checks syntax only (see dtensorCommSpecApply).
DTENSOR_EXPORT bool dtensorCommSpecParse(const char *text,
                                         DtensorCommSpec *outComm,
                                         DtensorDiag *outDiag);

/// Applies `comm` to the spec of `in` and writes the spec it produces.
/// Returns false and fills `outDiag` when the step is not a valid pure
/// transform of that layout: axes out of range, an all_gather that does not
/// remove the minor-most axes of its dim, a split onto a non-free axis, a
/// reduction of an axis that is not Partial of that kind, or (uneven
/// shapes) chunks that do not nest, so the collective would not produce the
/// layout's blocks.
DTENSOR_EXPORT bool dtensorCommSpecApply(const DtensorCommSpec *comm,
                                         const DtensorLayout *in,
                                         DtensorShardingSpec *outSpec,
                                         DtensorDiag *outDiag);

/*===----------------------------------------------------------------------===*
 * Cost model
 *===----------------------------------------------------------------------===*/

/// Default bandwidth of a local copy (local_split), in GB/s.
#define DTENSOR_DEFAULT_COPY_BANDWIDTH_GBPS 200.0

/// What the optimal search minimizes.
typedef enum DtensorPlanObjective {
  DTENSOR_OBJECTIVE_FORWARD = 0,      /* the forward cost of the plan */
  DTENSOR_OBJECTIVE_FORWARD_BACKWARD, /* forward + backward (training) */
} DtensorPlanObjective;

/// How a plan is searched.
typedef enum DtensorPlanStrategy {
  DTENSOR_STRATEGY_OPTIMAL = 0, /* minimum cost path (A* search) */
  DTENSOR_STRATEGY_GREEDY,      /* the seed's greedy walk, for comparison */
} DtensorPlanStrategy;

/// A measured cost model (dtensor-run --calibrate; docs/planner.md): for a
/// mesh shape, per group of mesh axes and per collective, the time of one
/// collective as latency + bytes / bandwidth fitted to timings on a
/// machine. Where it has a (collective, axes) pair, it replaces the ring
/// model of the mesh's links in the forward cost. It may also hold the
/// measured rate of contractions (dtensor-propagate's compute term).
typedef struct DtensorCalibration DtensorCalibration;

/// Planner options.
typedef struct DtensorPlanOptions {
  DtensorPlanStrategy strategy;
  DtensorPlanObjective objective;
  double copyBandwidthGBps; /* prices local_split; > 0 */
  /* NULL: the mesh's link model; else borrowed for the planner's life. */
  const DtensorCalibration *calibration;
} DtensorPlanOptions;

/// Sets `outOptions` to the defaults: optimal, forward, copy bandwidth
/// DTENSOR_DEFAULT_COPY_BANDWIDTH_GBPS.
DTENSOR_EXPORT void dtensorPlanOptionsInit(DtensorPlanOptions *outOptions);

/// The modelled cost of one step. Bytes are per device, of the padded local
/// blocks; times in microseconds.
typedef struct DtensorCommCost {
  double forwardUs;
  double backwardUs;
  int64_t bytesPerDevice;
} DtensorCommCost;

/// Prices `comm` applied to layout `in` (which must be valid for it, see
/// dtensorCommSpecApply): ring α-β over the group with its slowest link,
/// (n−1)/n bus factor for all_gather, reduce_scatter and all_to_all,
/// 2(n−1)/n for all_reduce, a copy for local_split. The backward cost is
/// that of the transposed step (all_gather ↔ local_split, reduce_scatter ↔
/// all_gather, all_to_all ↔ all_to_all, all_reduce ↔ identity).
DTENSOR_EXPORT DtensorCommCost
dtensorCommSpecGetCost(const DtensorCommSpec *comm, const DtensorLayout *in,
                       const DtensorPlanOptions *options);

/// The modelled cost of `pattern` over the group of the `numAxes` mesh
/// `axes` (its slowest link), for `bytesIn` and `bytesOut` per device: the
/// model of dtensorCommSpecGetCost for a collective already in a program.
DTENSOR_EXPORT DtensorCommCost
dtensorCommGetCostOnAxes(const DtensorMesh *mesh, DtensorCommPattern pattern,
                         int numAxes, const int *axes, int64_t bytesIn,
                         int64_t bytesOut, const DtensorPlanOptions *options);

/// The modelled cost of a point-to-point exchange over the group of the
/// `numAxes` mesh `axes` in which each device sends its `bytes` block once
/// (broadcast, permute): one latency plus the bytes over the slowest link.
DTENSOR_EXPORT DtensorCommCost dtensorPointToPointGetCost(
    const DtensorMesh *mesh, int numAxes, const int *axes, int64_t bytes);

/*===----------------------------------------------------------------------===*
 * Plans
 *===----------------------------------------------------------------------===*/

/// Most steps a plan may have.
#define DTENSOR_MAX_PLAN_STEPS 64

/// One step of a plan: the CommSpec, the spec it produces and its cost.
typedef struct DtensorPlanStep {
  DtensorCommSpec comm;
  DtensorShardingSpec after;
  DtensorCommCost cost;
  /// viewGroups > 1: the step runs on the tensor viewed with dim `viewDim`
  /// cut into [viewGroups, size / viewGroups] (one dim more; every device's
  /// block is viewed the same way, a reshape), and `comm` and `after` refer
  /// to that view. This is how interleaved shards (S0i3) are
  /// redistributed. 0: the tensor as it is.
  int viewDim;
  int64_t viewGroups;
} DtensorPlanStep;

/// A redistribution plan: the steps from the source spec to the target
/// (none when they are equal), and the totals. `steps` comes last: a stored
/// plan (dtensorPlannerPlan) holds room for `numSteps` steps only.
typedef struct DtensorPlan {
  DtensorShardingSpec source;
  int numSteps;
  double forwardUs;
  double backwardUs;
  int64_t statesVisited; /* search effort, for the benchmarks */
  DtensorPlanStep steps[DTENSOR_MAX_PLAN_STEPS];
} DtensorPlan;

/// Plans the conversion of a tensor in layout `source` to spec `target` (on
/// the same mesh, shape and element type) without a cache. Returns false and
/// fills `outDiag` when the target is invalid for the layout or the
/// conversion is impossible (a Partial that would have to be created or
/// change its reduce kind, mixed reduce kinds to resolve, interleaved
/// shards with unequal chunks), saying why.
/// The layout a tensor in layout `source` has after `step` of a plan from
/// it: the step's `after` spec, on the step's view of the tensor (one dim
/// more where the step has a view). False, with `outDiag`, when the view
/// does not fit.
DTENSOR_EXPORT bool dtensorPlanStepLayout(const DtensorLayout *source,
                                          const DtensorPlanStep *step,
                                          DtensorLayout *outLayout,
                                          DtensorDiag *outDiag);

DTENSOR_EXPORT bool dtensorPlanCompute(const DtensorLayout *source,
                                       const DtensorShardingSpec *target,
                                       const DtensorPlanOptions *options,
                                       DtensorPlan *outPlan,
                                       DtensorDiag *outDiag);

/// Prints a plan, one step per line with its cost, then the totals.
DTENSOR_EXPORT size_t dtensorPlanPrint(const DtensorPlan *plan,
                                       const DtensorMesh *mesh, char *buffer,
                                       size_t capacity);

/// A LayoutConverter with a plan cache keyed on everything that changes the
/// answer: mesh shape and link model, global shape, element type, source and
/// target specs and the options (opaque).
typedef struct DtensorPlanner DtensorPlanner;

/// Creates a planner; `options` may be NULL for the defaults. The caller
/// owns it. Returns NULL if out of memory.
DTENSOR_EXPORT DtensorPlanner *
dtensorPlannerCreate(const DtensorPlanOptions *options);

/// Destroys a planner and its cache; NULL is a no-op.
DTENSOR_EXPORT void dtensorPlannerDestroy(DtensorPlanner *planner);

/// As dtensorPlanCompute with the planner's options, answered from the cache
/// when the same question was asked before. Returns the plan, borrowed from
/// the planner (valid until it is destroyed), or NULL after filling
/// `outDiag`. Failures are not cached.
DTENSOR_EXPORT const DtensorPlan *
dtensorPlannerPlan(DtensorPlanner *planner, const DtensorLayout *source,
                   const DtensorShardingSpec *target, DtensorDiag *outDiag);

/// Returns the number of cache hits and misses so far.
DTENSOR_EXPORT void dtensorPlannerGetStats(const DtensorPlanner *planner,
                                           int64_t *outHits,
                                           int64_t *outMisses);

/*===----------------------------------------------------------------------===*
 * Executable check
 *===----------------------------------------------------------------------===*/

/// Distributes a global test array by `source` (Partial values as distinct
/// contributions per device), applies each step of `plan` to every device's
/// padded block in memory, and compares each device's block with the
/// distribution by `target` on the same mesh and shape. Returns false and
/// fills `outDiag` with the first device and element that differ, or the
/// first step whose result has the wrong shape. Meant for tests: memory is
/// that of every device's blocks.
DTENSOR_EXPORT bool dtensorPlanSimulate(const DtensorLayout *source,
                                        const DtensorPlan *plan,
                                        const DtensorShardingSpec *target,
                                        DtensorDiag *outDiag);

/// Runs `plan` on real data in one process: `in` holds every device's
/// padded block of `source` (dtensorLayoutGetMaxLocalShape, row-major,
/// device after device), `out` receives every device's padded block of the
/// plan's last spec on the same mesh and shape. Values are doubles (exact
/// for f32, f16, bf16 and integers up to 2^53); a Partial block holds the
/// device's contribution; padding is carried, never read into real
/// elements. Steps apply as dtensorPlanSimulate applies them, so a plan that
/// passes the simulator moves real data the same way. Returns false and
/// fills `outDiag` for a step that does not fit or when out of memory.
DTENSOR_EXPORT bool dtensorPlanExecute(const DtensorLayout *source,
                                       const DtensorPlan *plan,
                                       const double *in, double *out,
                                       DtensorDiag *outDiag);

/*===----------------------------------------------------------------------===*
 * Calibration
 *===----------------------------------------------------------------------===*/

/// An empty calibration for meshes of `meshRank` axes of `meshShape`
/// (copied); NULL when the shape is not a valid mesh shape.
DTENSOR_EXPORT DtensorCalibration *
dtensorCalibrationCreate(int meshRank, const int64_t *meshShape);

/// Destroys a calibration; NULL is a no-op.
DTENSOR_EXPORT void dtensorCalibrationDestroy(DtensorCalibration *cal);

/// Records the fit of `pattern` (all_gather, all_to_all, all_reduce or
/// reduce_scatter) over the group of `axes` (increasing, in range):
/// `latencyUs` >= 0 and `bandwidthGBps` > 0. False with `outDiag` otherwise.
DTENSOR_EXPORT bool
dtensorCalibrationSet(DtensorCalibration *cal, DtensorCommPattern pattern,
                      int numAxes, const int *axes, double latencyUs,
                      double bandwidthGBps, DtensorDiag *outDiag);

/// The fit of `pattern` over `axes` (any order): true and the two values,
/// or false when the calibration has none.
DTENSOR_EXPORT bool dtensorCalibrationGet(const DtensorCalibration *cal,
                                          DtensorCommPattern pattern,
                                          int numAxes, const int *axes,
                                          double *outLatencyUs,
                                          double *outBandwidthGBps);

/// Records what a contraction costs per device: `overheadUs` (>= 0) a call
/// plus its multiply-adds at `gmacs` (> 0) billion per second, as
/// dtensor-run --calibrate measures it with every rank computing at once.
/// False with `outDiag` for values out of range.
DTENSOR_EXPORT bool dtensorCalibrationSetContract(DtensorCalibration *cal,
                                                  double overheadUs,
                                                  double gmacs,
                                                  DtensorDiag *outDiag);

/// The contraction rate of `cal`: true and the two values, or false when it
/// has none (contractions are then priced by the fixed model).
DTENSOR_EXPORT bool dtensorCalibrationGetContract(const DtensorCalibration *cal,
                                                  double *outOverheadUs,
                                                  double *outGmacs);

/// Fits time = latency + bytes / (bandwidth * 1e3) to `count` >= 2 samples
/// (bytes per device, microseconds) by least squares, latency at least 0
/// and bandwidth capped at 1e6 GB/s (times that do not grow with size).
/// False when fewer than two distinct sizes are given.
DTENSOR_EXPORT bool dtensorCalibrationFit(const int64_t *bytes,
                                          const double *us, int count,
                                          double *outLatencyUs,
                                          double *outBandwidthGBps);

/// Fits time = overhead + macs / (gmacs * 1e3) to `count` >= 2 timings of
/// contractions (multiply-adds per device, microseconds) by least squares
/// of the relative error (small and large products alike), overhead at
/// least 0 and the rate capped at 1e6 G/s. False when fewer than two
/// distinct sizes or a time that is not positive are given.
DTENSOR_EXPORT bool dtensorCalibrationFitContract(const int64_t *macs,
                                                  const double *us, int count,
                                                  double *outOverheadUs,
                                                  double *outGmacs);

/// Reads a calibration file (the format dtensorCalibrationWrite writes).
/// NULL with `outDiag` ("PATH:LINE: what is wrong") when it does not read.
DTENSOR_EXPORT DtensorCalibration *dtensorCalibrationRead(const char *path,
                                                          DtensorDiag *outDiag);

/// Writes `cal` to `path`, `comment` (NULL: none; one line) first as a
/// `#` line. False with `outDiag` when the file cannot be written.
DTENSOR_EXPORT bool dtensorCalibrationWrite(const DtensorCalibration *cal,
                                            const char *path,
                                            const char *comment,
                                            DtensorDiag *outDiag);

/// Checks that `cal` was measured on a mesh of `mesh`'s shape; false with
/// `outDiag` naming both shapes otherwise.
DTENSOR_EXPORT bool dtensorCalibrationCheckMesh(const DtensorCalibration *cal,
                                                const DtensorMesh *mesh,
                                                DtensorDiag *outDiag);

#ifdef __cplusplus
}
#endif

#endif /* DTENSOR_C_PLANNER_H */
