/* Layout: which device holds which block of a tensor.
 *
 * Convention (docs/layouts.md): a dim split by axes a0..ak-1 (a0 major) is cut
 * into N = prod(size(ai)) chunks of ceil(D / N) elements, as torch.chunk does;
 * the device whose coordinates give linear chunk index
 * L = ((c[a0] * n[a1]) + c[a1]) * ... holds [min(L*c, D), min((L+1)*c, D)).
 * Trailing chunks are smaller or empty. With an interleave factor g the dim is
 * g equal groups, each cut the same way, and a device holds its chunk of every
 * group.
 */
#include "dtensor-c/Layout.h"

#include "Support/Support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const size_t kElementSizes[] = {4, 8, 2, 2, 1, 1, 2, 4, 8, 1, 1, 1};
static const char *const kElementNames[] = {"f32", "f64", "f16",      "bf16",
                                            "i1",  "i8",  "i16",      "i32",
                                            "i64", "ui8", "f8E4M3FN", "f8E5M2"};
#define NUM_ELEMENT_TYPES (sizeof(kElementSizes) / sizeof(kElementSizes[0]))

size_t dtensorElementTypeGetSize(DtensorElementType type) {
  return (size_t)type < NUM_ELEMENT_TYPES ? kElementSizes[type] : 0;
}

const char *dtensorElementTypeGetName(DtensorElementType type) {
  return (size_t)type < NUM_ELEMENT_TYPES ? kElementNames[type] : "invalid";
}

bool dtensorElementTypeParse(const char *name, DtensorElementType *outType) {
  for (size_t i = 0; i < NUM_ELEMENT_TYPES; ++i)
    if (strcmp(name, kElementNames[i]) == 0) {
      *outType = (DtensorElementType)i;
      return true;
    }
  return false;
}

bool dtensorLayoutInit(const DtensorMesh *mesh, const DtensorShardingSpec *spec,
                       int rank, const int64_t *shape,
                       DtensorElementType elementType, DtensorLayout *outLayout,
                       DtensorDiag *outDiag) {
  if (rank < 0 || rank > DTENSOR_MAX_TENSOR_RANK)
    return dtDiag(outDiag, -1, "tensor rank %d is out of range (0..%d)", rank,
                  DTENSOR_MAX_TENSOR_RANK);
  if ((size_t)elementType >= NUM_ELEMENT_TYPES)
    return dtDiag(outDiag, -1, "invalid element type %d", (int)elementType);
  if (!dtensorShardingSpecCheck(spec, mesh, rank, shape, outDiag))
    return false;
  /* Byte counts (block sizes, costs, reports) are 64-bit: a tensor whose
   * size does not fit would wrap around to nonsense. */
  int64_t bytes = (int64_t)dtensorElementTypeGetSize(elementType);
  for (int d = 0; d < rank; ++d)
    if (shape[d] > 0 && __builtin_mul_overflow(bytes, shape[d], &bytes)) {
      char text[DTENSOR_MAX_TENSOR_RANK * 21 + 1];
      int n = 0;
      for (int k = 0; k < rank; ++k)
        n += snprintf(text + n, sizeof(text) - (size_t)n, "%s%lld",
                      k ? "x" : "", (long long)shape[k]);
      return dtDiag(outDiag, -1,
                    "a tensor of shape %s is too large: its "
                    "size in bytes does not fit in 64 bits",
                    text);
    }
  memset(outLayout, 0, sizeof(*outLayout));
  outLayout->mesh = mesh;
  outLayout->spec = *spec;
  outLayout->rank = rank;
  memcpy(outLayout->shape, shape, (size_t)rank * sizeof(int64_t));
  outLayout->elementType = elementType;
  return true;
}

static int64_t groups(const DtensorLayout *layout, int dim) {
  int64_t g = layout->spec.interleave[dim];
  return layout->spec.numAxes[dim] && g > 1 ? g : 1;
}

int64_t dtensorLayoutGetNumShards(const DtensorLayout *layout, int dim) {
  int64_t n = 1;
  for (int i = 0; i < layout->spec.numAxes[dim]; ++i)
    n *= dtensorMeshGetAxisSize(layout->mesh, layout->spec.axes[dim][i]);
  return n;
}

static int64_t shardIndexFromCoords(const DtensorLayout *layout,
                                    const int64_t *coords, int dim) {
  int64_t l = 0;
  for (int i = 0; i < layout->spec.numAxes[dim]; ++i) {
    int a = layout->spec.axes[dim][i];
    l = l * dtensorMeshGetAxisSize(layout->mesh, a) + coords[a];
  }
  return l;
}

int64_t dtensorLayoutGetShardIndex(const DtensorLayout *layout, int64_t device,
                                   int dim) {
  int64_t coords[DTENSOR_MAX_MESH_RANK];
  dtensorMeshGetCoords(layout->mesh, device, coords);
  return shardIndexFromCoords(layout, coords, dim);
}

/* The chunk of one group held by shard index `l`: [begin, end) in the group. */
static DtensorRange chunkOf(const DtensorLayout *layout, int dim, int64_t l) {
  int64_t groupSize = layout->shape[dim] / groups(layout, dim);
  int64_t n = dtensorLayoutGetNumShards(layout, dim);
  int64_t chunk = dtCeilDiv(groupSize, n);
  DtensorRange r;
  /* In this order, no product or sum passes groupSize (near INT64_MAX). */
  r.begin = chunk && l < dtCeilDiv(groupSize, chunk) ? l * chunk : groupSize;
  r.end = chunk < groupSize - r.begin ? r.begin + chunk : groupSize;
  return r;
}

void dtensorLayoutGetLocalShape(const DtensorLayout *layout, int64_t device,
                                int64_t *outShape) {
  int64_t coords[DTENSOR_MAX_MESH_RANK];
  dtensorMeshGetCoords(layout->mesh, device, coords);
  for (int d = 0; d < layout->rank; ++d) {
    DtensorRange r =
        chunkOf(layout, d, shardIndexFromCoords(layout, coords, d));
    outShape[d] = (r.end - r.begin) * groups(layout, d);
  }
}

void dtensorLayoutGetMaxLocalShape(const DtensorLayout *layout,
                                   int64_t *outShape) {
  for (int d = 0; d < layout->rank; ++d) {
    DtensorRange r = chunkOf(layout, d, 0);
    outShape[d] = (r.end - r.begin) * groups(layout, d);
  }
}

bool dtensorLayoutIsEven(const DtensorLayout *layout) {
  for (int d = 0; d < layout->rank; ++d) {
    int64_t groupSize = layout->shape[d] / groups(layout, d);
    if (groupSize % dtensorLayoutGetNumShards(layout, d) != 0)
      return false;
  }
  return true;
}

int dtensorLayoutGetLocalRanges(const DtensorLayout *layout, int64_t device,
                                int dim, DtensorRange *outRanges) {
  DtensorRange r =
      chunkOf(layout, dim, dtensorLayoutGetShardIndex(layout, device, dim));
  int64_t g = groups(layout, dim), groupSize = layout->shape[dim] / g;
  for (int64_t i = 0; i < g; ++i) {
    outRanges[i].begin = i * groupSize + r.begin;
    outRanges[i].end = i * groupSize + r.end;
  }
  return (int)g;
}

int64_t dtensorLayoutGetLocalBytes(const DtensorLayout *layout,
                                   int64_t device) {
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  dtensorLayoutGetLocalShape(layout, device, shape);
  int64_t n = (int64_t)dtensorElementTypeGetSize(layout->elementType);
  for (int d = 0; d < layout->rank; ++d)
    n *= shape[d];
  return n;
}

/* The shard index that holds global element `index` along `dim`, and the
 * element's position within the device's local block. */
static void locate(const DtensorLayout *layout, int dim, int64_t index,
                   int64_t *outShard, int64_t *outLocal) {
  int64_t g = groups(layout, dim), groupSize = layout->shape[dim] / g;
  int64_t n = dtensorLayoutGetNumShards(layout, dim);
  int64_t chunk = dtCeilDiv(groupSize, n);
  int64_t group = index / groupSize, pos = index % groupSize;
  int64_t l = pos / chunk;
  DtensorRange r = chunkOf(layout, dim, l);
  *outShard = l;
  *outLocal = group * (r.end - r.begin) + (pos - r.begin);
}

bool dtensorLayoutGlobalToLocal(const DtensorLayout *layout, int64_t device,
                                const int64_t *index, int64_t *outLocal) {
  int64_t coords[DTENSOR_MAX_MESH_RANK];
  dtensorMeshGetCoords(layout->mesh, device, coords);
  for (int d = 0; d < layout->rank; ++d) {
    int64_t shard;
    locate(layout, d, index[d], &shard, &outLocal[d]);
    if (shard != shardIndexFromCoords(layout, coords, d))
      return false;
  }
  return true;
}

void dtensorLayoutLocalToGlobal(const DtensorLayout *layout, int64_t device,
                                const int64_t *local, int64_t *outIndex) {
  int64_t coords[DTENSOR_MAX_MESH_RANK];
  dtensorMeshGetCoords(layout->mesh, device, coords);
  for (int d = 0; d < layout->rank; ++d) {
    DtensorRange r =
        chunkOf(layout, d, shardIndexFromCoords(layout, coords, d));
    int64_t size = r.end - r.begin;
    int64_t groupSize = layout->shape[d] / groups(layout, d);
    int64_t group = size ? local[d] / size : 0;
    int64_t within = size ? local[d] % size : 0;
    outIndex[d] = group * groupSize + r.begin + within;
  }
}

int64_t dtensorLayoutGetOwners(const DtensorLayout *layout,
                               const int64_t *index, int64_t *outDevices,
                               int64_t capacity) {
  int64_t want[DTENSOR_MAX_TENSOR_RANK];
  for (int d = 0; d < layout->rank; ++d) {
    int64_t local;
    locate(layout, d, index[d], &want[d], &local);
  }
  int64_t count = 0, n = dtensorMeshGetNumDevices(layout->mesh);
  int64_t coords[DTENSOR_MAX_MESH_RANK];
  for (int64_t dev = 0; dev < n; ++dev) {
    dtensorMeshGetCoords(layout->mesh, dev, coords);
    bool holds = true;
    for (int d = 0; d < layout->rank && holds; ++d)
      holds = shardIndexFromCoords(layout, coords, d) == want[d];
    if (!holds)
      continue;
    if (count < capacity)
      outDevices[count] = dev;
    ++count;
  }
  return count;
}

/* Axes along which devices hold identical data: neither sharding nor Partial.
 */
static bool isReplicaAxis(const DtensorLayout *layout, int axis) {
  if (layout->spec.partial[axis] != DTENSOR_REDUCE_NONE)
    return false;
  for (int d = 0; d < layout->rank; ++d)
    for (int i = 0; i < layout->spec.numAxes[d]; ++i)
      if (layout->spec.axes[d][i] == axis)
        return false;
  return true;
}

int64_t dtensorLayoutGetReplicaGroup(const DtensorLayout *layout,
                                     int64_t device, int64_t *outDevices,
                                     int64_t capacity) {
  int meshRank = dtensorMeshGetRank(layout->mesh);
  int64_t base[DTENSOR_MAX_MESH_RANK], coords[DTENSOR_MAX_MESH_RANK];
  dtensorMeshGetCoords(layout->mesh, device, base);
  int64_t count = 0, n = dtensorMeshGetNumDevices(layout->mesh);
  for (int64_t dev = 0; dev < n; ++dev) {
    dtensorMeshGetCoords(layout->mesh, dev, coords);
    bool same = true;
    for (int a = 0; a < meshRank && same; ++a)
      same = isReplicaAxis(layout, a) || coords[a] == base[a];
    if (!same)
      continue;
    if (count < capacity)
      outDevices[count] = dev;
    ++count;
  }
  return count;
}

int64_t dtensorLayoutGetNumReplicaGroups(const DtensorLayout *layout) {
  int64_t groupsCount = 1;
  for (int a = 0; a < dtensorMeshGetRank(layout->mesh); ++a)
    if (!isReplicaAxis(layout, a))
      groupsCount *= dtensorMeshGetAxisSize(layout->mesh, a);
  return groupsCount;
}

void dtensorLayoutForEachElement(const DtensorLayout *layout, int64_t device,
                                 void (*visit)(void *user, int64_t local,
                                               int64_t global),
                                 void *user) {
  int64_t padded[DTENSOR_MAX_TENSOR_RANK], real[DTENSOR_MAX_TENSOR_RANK];
  dtensorLayoutGetMaxLocalShape(layout, padded);
  dtensorLayoutGetLocalShape(layout, device, real);
  int rank = layout->rank;
  int64_t n = 1, rows = 0;
  for (int d = 0; d < rank; ++d) {
    n *= padded[d];
    rows += padded[d];
  }
  /* Each dim maps on its own (dtensorLayoutLocalToGlobal): a table per
   * dim of the global coordinate of each local one (-1: padding), then
   * one odometer over the block, instead of a division per dim and
   * element. Without memory for the tables, element by element. */
  int64_t *table = rank && n ? malloc(sizeof(int64_t) * (size_t)rows) : NULL;
  if (table) {
    int64_t coords[DTENSOR_MAX_MESH_RANK], *map[DTENSOR_MAX_TENSOR_RANK];
    int64_t stride[DTENSOR_MAX_TENSOR_RANK];
    dtensorMeshGetCoords(layout->mesh, device, coords);
    int64_t *at = table;
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; --d) {
      stride[d] = s;
      s *= layout->shape[d];
    }
    for (int d = 0; d < rank; ++d) {
      map[d] = at;
      DtensorRange r =
          chunkOf(layout, d, shardIndexFromCoords(layout, coords, d));
      int64_t size = r.end - r.begin;
      int64_t groupSize = layout->shape[d] / groups(layout, d);
      for (int64_t i = 0; i < padded[d]; ++i)
        map[d][i] = i >= real[d] ? -1
                                 : (size ? i / size : 0) * groupSize + r.begin +
                                       (size ? i % size : 0);
      at += padded[d];
    }
    int64_t idx[DTENSOR_MAX_TENSOR_RANK] = {0}, last = padded[rank - 1];
    for (int64_t e = 0; e < n;) {
      int64_t base = 0;
      for (int d = 0; d + 1 < rank && base >= 0; ++d)
        base = map[d][idx[d]] < 0 ? -1 : base + map[d][idx[d]] * stride[d];
      for (int64_t i = 0; i < last; ++i, ++e)
        visit(user, e,
              base < 0 || map[rank - 1][i] < 0 ? -1 : base + map[rank - 1][i]);
      for (int d = rank - 2; d >= 0 && ++idx[d] == padded[d]; --d)
        idx[d] = 0;
    }
    free(table);
    return;
  }
  for (int64_t e = 0; e < n; ++e) {
    int64_t idx[DTENSOR_MAX_TENSOR_RANK], g[DTENSOR_MAX_TENSOR_RANK];
    dtUnravel(e, rank, padded, idx);
    bool inside = true;
    for (int d = 0; d < rank && inside; ++d)
      inside = idx[d] < real[d];
    if (inside)
      dtensorLayoutLocalToGlobal(layout, device, idx, g);
    visit(user, e, inside ? dtRavel(rank, layout->shape, g) : -1);
  }
}
