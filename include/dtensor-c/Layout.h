/*===- dtensor-c/Layout.h - device meshes, sharding specs, layouts -*- C -*-===*
 *
 * The layout algebra: plain C, no MLIR. A DeviceMesh is an n-d grid of
 * devices with named axes and a per-axis link model; a ShardingSpec says, per
 * tensor dim, which mesh axes split it (in order, major first) and, per mesh
 * axis, whether the value is a pending reduction (Partial); a Layout adds the
 * global shape and element type and answers which device holds what.
 * See docs/layouts.md for the syntax and the uneven-shard convention.
 *
 *===----------------------------------------------------------------------===*/
#ifndef DTENSOR_C_LAYOUT_H
#define DTENSOR_C_LAYOUT_H

#include "dtensor-c/Support.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Most axes a mesh may have (axis indices are single digits in `S01`).
#define DTENSOR_MAX_MESH_RANK 8
/// Most devices a mesh may have (2^20, beyond the largest clusters): work
/// per device, such as distributing a tensor from Python or planning a
/// permutation, stays bounded.
#define DTENSOR_MAX_MESH_DEVICES (1 << 20)
/// Most dims a tensor may have.
#define DTENSOR_MAX_TENSOR_RANK 16
/// Longest mesh axis name, including the terminating NUL.
#define DTENSOR_MAX_AXIS_NAME 32

/// Default latency of a mesh axis link, in microseconds.
#define DTENSOR_DEFAULT_LATENCY_US 5.0
/// Default bandwidth of a mesh axis link, in GB/s (1e9 bytes per second).
#define DTENSOR_DEFAULT_BANDWIDTH_GBPS 100.0

/*===----------------------------------------------------------------------===*
 * Reduce kinds and element types
 *===----------------------------------------------------------------------===*/

/// How a Partial value combines across a mesh axis; NONE means not Partial.
typedef enum DtensorReduceKind {
  DTENSOR_REDUCE_NONE = 0,
  DTENSOR_REDUCE_SUM,
  DTENSOR_REDUCE_MAX,
  DTENSOR_REDUCE_MIN,
  DTENSOR_REDUCE_AVG,
  DTENSOR_REDUCE_PROD,
} DtensorReduceKind;

/// Number of reduce kinds including NONE.
#define DTENSOR_NUM_REDUCE_KINDS 6

/// Returns the name of a reduce kind ("sum", ...; "none" for NONE).
DTENSOR_EXPORT const char *dtensorReduceKindGetName(DtensorReduceKind kind);

/// Parses a reduce kind name of `length` bytes; returns false if unknown.
DTENSOR_EXPORT bool dtensorReduceKindParse(const char *name, size_t length,
                                           DtensorReduceKind *outKind);

/// Element types a layout may carry.
typedef enum DtensorElementType {
  DTENSOR_F32 = 0,
  DTENSOR_F64,
  DTENSOR_F16,
  DTENSOR_BF16,
  DTENSOR_I1,
  DTENSOR_I8,
  DTENSOR_I16,
  DTENSOR_I32,
  DTENSOR_I64,
  DTENSOR_UI8,
  DTENSOR_F8E4M3FN,
  DTENSOR_F8E5M2,
} DtensorElementType;

/// Returns the size in bytes of one element (1 for i1, stored as a byte).
DTENSOR_EXPORT size_t dtensorElementTypeGetSize(DtensorElementType type);

/// Returns the MLIR spelling of an element type ("f32", "bf16", "i64", ...).
DTENSOR_EXPORT const char *dtensorElementTypeGetName(DtensorElementType type);

/// Parses an MLIR element type spelling; returns false if unsupported.
DTENSOR_EXPORT bool dtensorElementTypeParse(const char *name,
                                            DtensorElementType *outType);

/*===----------------------------------------------------------------------===*
 * DeviceMesh
 *===----------------------------------------------------------------------===*/

/// An n-d device mesh (opaque; create with dtensorMeshCreate).
typedef struct DtensorMesh DtensorMesh;

/// The α-β model of one mesh axis: a message of b bytes between two devices
/// along this axis takes latencyUs + b / (bandwidthGBps * 1e3) microseconds.
typedef struct DtensorLink {
  double latencyUs;
  double bandwidthGBps;
} DtensorLink;

/// Creates a mesh of `rank` axes of the given sizes; `axisNames` may be NULL
/// (names a0, a1, ...). Links get the documented defaults and device ids are
/// the row-major linear indices. Returns NULL and fills `outDiag` on invalid
/// input. The caller owns the result.
DTENSOR_EXPORT DtensorMesh *dtensorMeshCreate(int rank, const int64_t *shape,
                                              const char *const *axisNames,
                                              DtensorDiag *outDiag);

/// Parses a mesh written `2x4` (default names) or `dp=2,tp=4`; returns NULL
/// and fills `outDiag` on error. The caller owns the result.
DTENSOR_EXPORT DtensorMesh *dtensorMeshParse(const char *text,
                                             DtensorDiag *outDiag);

/// Returns a copy of `mesh` that the caller owns.
DTENSOR_EXPORT DtensorMesh *dtensorMeshClone(const DtensorMesh *mesh);

/// Destroys a mesh; NULL is a no-op.
DTENSOR_EXPORT void dtensorMeshDestroy(DtensorMesh *mesh);

/// Sets the link model of one axis; false (with a message) if the axis is out
/// of range, the latency is negative or the bandwidth is not positive.
DTENSOR_EXPORT bool dtensorMeshSetLink(DtensorMesh *mesh, int axis,
                                       DtensorLink link, DtensorDiag *outDiag);

/// Sets explicit device ids (global ranks) in row-major mesh order; `count`
/// must equal the number of devices and ids must be distinct and >= 0.
DTENSOR_EXPORT bool dtensorMeshSetDeviceIds(DtensorMesh *mesh, int64_t count,
                                            const int64_t *ids,
                                            DtensorDiag *outDiag);

/// Returns the number of axes.
DTENSOR_EXPORT int dtensorMeshGetRank(const DtensorMesh *mesh);

/// Returns the size of one axis.
DTENSOR_EXPORT int64_t dtensorMeshGetAxisSize(const DtensorMesh *mesh,
                                              int axis);

/// Returns the name of one axis (borrowed from the mesh).
DTENSOR_EXPORT const char *dtensorMeshGetAxisName(const DtensorMesh *mesh,
                                                  int axis);

/// Returns the axis named `name` (`length` bytes), or -1 if there is none.
DTENSOR_EXPORT int dtensorMeshFindAxis(const DtensorMesh *mesh,
                                       const char *name, size_t length);

/// Returns the link model of one axis.
DTENSOR_EXPORT DtensorLink dtensorMeshGetLink(const DtensorMesh *mesh,
                                              int axis);

/// Returns the number of devices (product of the axis sizes).
DTENSOR_EXPORT int64_t dtensorMeshGetNumDevices(const DtensorMesh *mesh);

/// Returns whether explicit device ids were set.
DTENSOR_EXPORT bool dtensorMeshHasDeviceIds(const DtensorMesh *mesh);

/// Returns the device id of the device at row-major index `device`.
DTENSOR_EXPORT int64_t dtensorMeshGetDeviceId(const DtensorMesh *mesh,
                                              int64_t device);

/// Writes the mesh coordinates of row-major index `device` to `outCoords`
/// (one per axis).
DTENSOR_EXPORT void dtensorMeshGetCoords(const DtensorMesh *mesh,
                                         int64_t device, int64_t *outCoords);

/// Returns the row-major index of the device at `coords`.
DTENSOR_EXPORT int64_t dtensorMeshGetLinearIndex(const DtensorMesh *mesh,
                                                 const int64_t *coords);

/// Creates the sub-mesh made of `axes` (in the given order) that contains
/// `device`: its devices vary along those axes only, keep their names and
/// links, and carry the parent's device ids. Returns NULL and fills `outDiag`
/// on a bad axis list. The caller owns the result.
DTENSOR_EXPORT DtensorMesh *
dtensorMeshCreateSubmesh(const DtensorMesh *mesh, int numAxes, const int *axes,
                         int64_t device, DtensorDiag *outDiag);

/// Prints the mesh as `dp=2,tp=4` into `buffer` (snprintf semantics: returns
/// the length it needs, writes at most `capacity` bytes with a NUL).
DTENSOR_EXPORT size_t dtensorMeshPrint(const DtensorMesh *mesh, char *buffer,
                                       size_t capacity);

/*===----------------------------------------------------------------------===*
 * ShardingSpec: the sharding-sequence view
 *===----------------------------------------------------------------------===*/

/// A sharding spec. Per tensor dim: the mesh axes that split it, major first
/// (`S01` ≠ `S10`), and an interleave factor (0 or 1: none; k > 1: the dim is
/// k equal groups, each split the same way, as for merged QKV). Per mesh axis:
/// a pending reduction kind (NONE unless the value is Partial on that axis).
typedef struct DtensorShardingSpec {
  int rank;
  int numAxes[DTENSOR_MAX_TENSOR_RANK];
  int axes[DTENSOR_MAX_TENSOR_RANK][DTENSOR_MAX_MESH_RANK];
  int64_t interleave[DTENSOR_MAX_TENSOR_RANK];
  DtensorReduceKind partial[DTENSOR_MAX_MESH_RANK];
} DtensorShardingSpec;

/// Sets `outSpec` to the fully replicated spec of a tensor of `rank` dims.
DTENSOR_EXPORT void
dtensorShardingSpecInitReplicated(int rank, DtensorShardingSpec *outSpec);

/// Parses the textual syntax (`[S0, R, S(dp,tp)] Psum(1)`, see
/// docs/layouts.md). `mesh` may be NULL, in which case axis names cannot be
/// used. Checks syntax and names only (see dtensorShardingSpecCheck). Returns
/// false and fills `outDiag` (with the column) on error.
DTENSOR_EXPORT bool dtensorShardingSpecParse(const char *text,
                                             const DtensorMesh *mesh,
                                             DtensorShardingSpec *outSpec,
                                             DtensorDiag *outDiag);

/// Prints the canonical text of a spec (snprintf semantics).
DTENSOR_EXPORT size_t dtensorShardingSpecPrint(const DtensorShardingSpec *spec,
                                               char *buffer, size_t capacity);

/// Returns whether two specs denote the same layout.
DTENSOR_EXPORT bool dtensorShardingSpecEqual(const DtensorShardingSpec *a,
                                             const DtensorShardingSpec *b);

/// Checks a spec against a mesh and, when `shape` is not NULL, a tensor of
/// `rank` dims with that shape: axes in range and used once, no axis both
/// sharding and Partial, rank agreement, dims of size >= 1, interleave
/// factors that divide their dim. Returns false and fills `outDiag` if not.
DTENSOR_EXPORT bool dtensorShardingSpecCheck(const DtensorShardingSpec *spec,
                                             const DtensorMesh *mesh, int rank,
                                             const int64_t *shape,
                                             DtensorDiag *outDiag);

/// Returns whether any mesh axis is Partial.
DTENSOR_EXPORT bool
dtensorShardingSpecIsPartial(const DtensorShardingSpec *spec);

/*===----------------------------------------------------------------------===*
 * The dim→axes dictionary view
 *===----------------------------------------------------------------------===*/

/// One entry of the dictionary view: a sharded dim and its ordered axes.
typedef struct DtensorDimAxes {
  int dim;
  int numAxes;
  int axes[DTENSOR_MAX_MESH_RANK];
  int64_t interleave;
} DtensorDimAxes;

/// The dictionary view ({dim: [axes]}, sharded dims only, ascending), with
/// the pending reductions per mesh axis.
typedef struct DtensorDimDict {
  int rank;
  int numEntries;
  DtensorDimAxes entries[DTENSOR_MAX_TENSOR_RANK];
  DtensorReduceKind partial[DTENSOR_MAX_MESH_RANK];
} DtensorDimDict;

/// Converts a spec to its dictionary view.
DTENSOR_EXPORT void
dtensorShardingSpecToDimDict(const DtensorShardingSpec *spec,
                             DtensorDimDict *outDict);

/// Converts a dictionary back to a spec; false (with a message) when a dim
/// is out of range or listed twice.
DTENSOR_EXPORT bool dtensorShardingSpecFromDimDict(const DtensorDimDict *dict,
                                                   DtensorShardingSpec *outSpec,
                                                   DtensorDiag *outDiag);

/// Prints the dictionary view, e.g. `{0: [0], 2: [1, 2]} partial {3: sum}`.
DTENSOR_EXPORT size_t dtensorDimDictPrint(const DtensorDimDict *dict,
                                          char *buffer, size_t capacity);

/*===----------------------------------------------------------------------===*
 * The per-mesh-axis placements view
 *===----------------------------------------------------------------------===*/

/// What one mesh axis does to the tensor.
typedef enum DtensorPlacementKind {
  DTENSOR_PLACEMENT_REPLICATE = 0,
  DTENSOR_PLACEMENT_SHARD,
  DTENSOR_PLACEMENT_PARTIAL,
} DtensorPlacementKind;

/// One mesh axis' placement: Shard(dim) with the axis' position `order` among
/// the axes that split that dim (0 = major) and the dim's interleave factor;
/// Partial(reduce); or Replicate.
typedef struct DtensorPlacement {
  DtensorPlacementKind kind;
  int dim;
  int order;
  int64_t interleave;
  DtensorReduceKind reduce;
} DtensorPlacement;

/// The placements view: one placement per mesh axis.
typedef struct DtensorPlacements {
  int meshRank;
  int tensorRank;
  DtensorPlacement axes[DTENSOR_MAX_MESH_RANK];
} DtensorPlacements;

/// Converts a spec to placements for a mesh of `meshRank` axes.
DTENSOR_EXPORT void
dtensorShardingSpecToPlacements(const DtensorShardingSpec *spec, int meshRank,
                                DtensorPlacements *outPlacements);

/// Converts placements back to a spec; false (with a message) when orders of
/// one dim are not 0..k-1 exactly once, interleave factors of one dim differ,
/// or a dim is out of range.
DTENSOR_EXPORT bool
dtensorShardingSpecFromPlacements(const DtensorPlacements *placements,
                                  DtensorShardingSpec *outSpec,
                                  DtensorDiag *outDiag);

/// Prints placements, e.g. `(Shard(0), Partial(sum), Replicate())`.
DTENSOR_EXPORT size_t dtensorPlacementsPrint(
    const DtensorPlacements *placements, char *buffer, size_t capacity);

/*===----------------------------------------------------------------------===*
 * Layout
 *===----------------------------------------------------------------------===*/

/// A half-open index range [begin, end) of one tensor dim.
typedef struct DtensorRange {
  int64_t begin;
  int64_t end;
} DtensorRange;

/// A layout: a mesh (borrowed: it must outlive the layout), a spec, the
/// global shape and the element type.
typedef struct DtensorLayout {
  const DtensorMesh *mesh;
  DtensorShardingSpec spec;
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  DtensorElementType elementType;
} DtensorLayout;

/// Fills `outLayout` after checking the spec against mesh and shape; returns
/// false and fills `outDiag` if they do not fit.
DTENSOR_EXPORT bool dtensorLayoutInit(const DtensorMesh *mesh,
                                      const DtensorShardingSpec *spec, int rank,
                                      const int64_t *shape,
                                      DtensorElementType elementType,
                                      DtensorLayout *outLayout,
                                      DtensorDiag *outDiag);

/// Returns into how many chunks `dim` is split (product of its axis sizes).
DTENSOR_EXPORT int64_t dtensorLayoutGetNumShards(const DtensorLayout *layout,
                                                 int dim);

/// Returns the chunk index of `device` along `dim` (0 when unsharded).
DTENSOR_EXPORT int64_t dtensorLayoutGetShardIndex(const DtensorLayout *layout,
                                                  int64_t device, int dim);

/// Writes the local block shape of `device` (row-major mesh index).
DTENSOR_EXPORT void dtensorLayoutGetLocalShape(const DtensorLayout *layout,
                                               int64_t device,
                                               int64_t *outShape);

/// Writes the largest local block shape over all devices (the padded shape).
DTENSOR_EXPORT void dtensorLayoutGetMaxLocalShape(const DtensorLayout *layout,
                                                  int64_t *outShape);

/// Returns whether every device's block has the padded shape.
DTENSOR_EXPORT bool dtensorLayoutIsEven(const DtensorLayout *layout);

/// Writes the global index ranges that `device` holds along `dim` (one range,
/// or one per interleaved group; `outRanges` needs room for max(1,
/// interleave)) and returns their number. Empty blocks give an empty range.
DTENSOR_EXPORT int dtensorLayoutGetLocalRanges(const DtensorLayout *layout,
                                               int64_t device, int dim,
                                               DtensorRange *outRanges);

/// Returns the bytes of the local block of `device`.
DTENSOR_EXPORT int64_t dtensorLayoutGetLocalBytes(const DtensorLayout *layout,
                                                  int64_t device);

/// Writes (up to `capacity`) the devices that hold the element at global
/// `index`, ascending, and returns their number. Replicas all hold it; on a
/// Partial layout each device along the Partial axes holds one contribution.
DTENSOR_EXPORT int64_t dtensorLayoutGetOwners(const DtensorLayout *layout,
                                              const int64_t *index,
                                              int64_t *outDevices,
                                              int64_t capacity);

/// Maps global `index` to the local index in `device`'s block; returns false
/// if the device does not hold that element.
DTENSOR_EXPORT bool dtensorLayoutGlobalToLocal(const DtensorLayout *layout,
                                               int64_t device,
                                               const int64_t *index,
                                               int64_t *outLocal);

/// Maps a local index of `device`'s block to the global index.
DTENSOR_EXPORT void dtensorLayoutLocalToGlobal(const DtensorLayout *layout,
                                               int64_t device,
                                               const int64_t *local,
                                               int64_t *outIndex);

/// Calls `visit(user, local, global)` for every element of `device`'s padded
/// block, row-major: `local` is its linear index in the padded block,
/// `global` the row-major linear index of the global element it holds, or
/// -1 for padding. The one walk from blocks to the global tensor (the
/// runner fills and checks blocks with it, the plan simulator too).
DTENSOR_EXPORT void dtensorLayoutForEachElement(
    const DtensorLayout *layout, int64_t device,
    void (*visit)(void *user, int64_t local, int64_t global), void *user);

/// Writes (up to `capacity`) the devices that hold exactly the same data as
/// `device` (same block, same Partial contribution), ascending, including
/// `device`, and returns their number.
DTENSOR_EXPORT int64_t dtensorLayoutGetReplicaGroup(const DtensorLayout *layout,
                                                    int64_t device,
                                                    int64_t *outDevices,
                                                    int64_t capacity);

/// Returns the number of distinct replica groups.
DTENSOR_EXPORT int64_t
dtensorLayoutGetNumReplicaGroups(const DtensorLayout *layout);

/// Describes `layout` as text: mesh, shape, spec and placements, a grid of
/// the first two dims with the devices holding each block and its size,
/// then each device's coordinates, local shape and index ranges. The grid
/// shows at most 32 x 16 blocks (and says when there are more); a mesh of
/// more than 65536 devices gets neither grid nor table (a line says so).
/// Writes at most `capacity` bytes with a NUL and returns the length it
/// needs (snprintf semantics).
DTENSOR_EXPORT size_t dtensorLayoutDescribe(const DtensorLayout *layout,
                                            char *buffer, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* DTENSOR_C_LAYOUT_H */
