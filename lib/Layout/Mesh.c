/* DeviceMesh: shape, axis names, device ids, link model, sub-meshes. */
#include "dtensor-c/Layout.h"

#include "Support/Support.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct DtensorMesh {
  int rank;
  int64_t shape[DTENSOR_MAX_MESH_RANK];
  char names[DTENSOR_MAX_MESH_RANK][DTENSOR_MAX_AXIS_NAME];
  DtensorLink links[DTENSOR_MAX_MESH_RANK];
  int64_t numDevices;
  int64_t *deviceIds; /* NULL: ids are the row-major indices */
};

/* A valid axis name is an identifier: [A-Za-z_][A-Za-z0-9_]*. */
static bool isValidName(const char *name, size_t length) {
  if (length == 0 || length >= DTENSOR_MAX_AXIS_NAME)
    return false;
  if (!isalpha((unsigned char)name[0]) && name[0] != '_')
    return false;
  for (size_t i = 1; i < length; ++i)
    if (!isalnum((unsigned char)name[i]) && name[i] != '_')
      return false;
  return true;
}

DtensorMesh *dtensorMeshCreate(int rank, const int64_t *shape,
                               const char *const *axisNames,
                               DtensorDiag *outDiag) {
  if (rank < 1 || rank > DTENSOR_MAX_MESH_RANK) {
    dtDiag(outDiag, -1, "a mesh has 1 to %d axes, not %d",
           DTENSOR_MAX_MESH_RANK, rank);
    return NULL;
  }
  int64_t total = 1;
  for (int a = 0; a < rank; ++a) {
    if (shape[a] < 1) {
      dtDiag(outDiag, -1, "mesh axis %d has size %lld; sizes must be >= 1", a,
             (long long)shape[a]);
      return NULL;
    }
    if (total > DTENSOR_MAX_MESH_DEVICES / shape[a]) {
      dtDiag(outDiag, -1,
             "the mesh has too many devices: at most %d (2^20) are "
             "supported",
             DTENSOR_MAX_MESH_DEVICES);
      return NULL;
    }
    total *= shape[a];
  }
  DtensorMesh *mesh = calloc(1, sizeof(*mesh));
  if (!mesh) {
    dtDiag(outDiag, -1, "out of memory");
    return NULL;
  }
  mesh->rank = rank;
  mesh->numDevices = total;
  for (int a = 0; a < rank; ++a) {
    mesh->shape[a] = shape[a];
    mesh->links[a].latencyUs = DTENSOR_DEFAULT_LATENCY_US;
    mesh->links[a].bandwidthGBps = DTENSOR_DEFAULT_BANDWIDTH_GBPS;
    if (axisNames && axisNames[a]) {
      size_t len = strlen(axisNames[a]);
      if (!isValidName(axisNames[a], len)) {
        dtDiag(outDiag, -1,
               "mesh axis name '%s' is not valid: use an identifier "
               "([A-Za-z_][A-Za-z0-9_]*, at most %d characters)",
               axisNames[a], DTENSOR_MAX_AXIS_NAME - 1);
        free(mesh);
        return NULL;
      }
      memcpy(mesh->names[a], axisNames[a], len + 1);
    } else {
      snprintf(mesh->names[a], DTENSOR_MAX_AXIS_NAME, "a%d", a);
    }
  }
  for (int a = 0; a < rank; ++a)
    for (int b = 0; b < a; ++b)
      if (strcmp(mesh->names[a], mesh->names[b]) == 0) {
        dtDiag(outDiag, -1, "mesh axes %d and %d are both named '%s'", b, a,
               mesh->names[a]);
        free(mesh);
        return NULL;
      }
  return mesh;
}

DtensorMesh *dtensorMeshParse(const char *text, DtensorDiag *outDiag) {
  int64_t shape[DTENSOR_MAX_MESH_RANK];
  char names[DTENSOR_MAX_MESH_RANK][DTENSOR_MAX_AXIS_NAME];
  const char *namePtrs[DTENSOR_MAX_MESH_RANK];
  int rank = 0;
  bool named = strchr(text, '=') != NULL;
  const char *p = text;
  char sep = named ? ',' : 'x';
  for (;;) {
    while (*p == ' ')
      ++p;
    if (rank == DTENSOR_MAX_MESH_RANK) {
      dtDiag(outDiag, (int)(p - text), "a mesh has at most %d axes",
             DTENSOR_MAX_MESH_RANK);
      return NULL;
    }
    if (named) {
      const char *start = p;
      while (isalnum((unsigned char)*p) || *p == '_')
        ++p;
      size_t len = (size_t)(p - start);
      if (!isValidName(start, len) || *p != '=') {
        dtDiag(outDiag, (int)(start - text),
               "expected 'name=size' for mesh axis %d (e.g. 'dp=2,tp=4')",
               rank);
        return NULL;
      }
      memcpy(names[rank], start, len);
      names[rank][len] = '\0';
      namePtrs[rank] = names[rank];
      ++p;
    }
    if (!isdigit((unsigned char)*p)) {
      dtDiag(outDiag, (int)(p - text),
             "expected the size of mesh axis %d (a positive integer, as in "
             "'2x4' or 'dp=2,tp=4')",
             rank);
      return NULL;
    }
    char *end;
    long long v = strtoll(p, &end, 10);
    if (v < 1 || v > ((long long)1 << 40)) {
      dtDiag(outDiag, (int)(p - text),
             "mesh axis %d has size %lld; sizes must "
             "be >= 1",
             rank, v);
      return NULL;
    }
    shape[rank++] = v;
    p = end;
    while (*p == ' ')
      ++p;
    if (*p == '\0')
      break;
    if (*p != sep) {
      dtDiag(outDiag, (int)(p - text),
             "expected '%c' or the end of the mesh, "
             "got '%c'",
             sep, *p);
      return NULL;
    }
    ++p;
  }
  return dtensorMeshCreate(rank, shape, named ? namePtrs : NULL, outDiag);
}

DtensorMesh *dtensorMeshClone(const DtensorMesh *mesh) {
  DtensorMesh *copy = malloc(sizeof(*copy));
  if (!copy)
    return NULL;
  *copy = *mesh;
  if (mesh->deviceIds) {
    size_t bytes = (size_t)mesh->numDevices * sizeof(int64_t);
    copy->deviceIds = malloc(bytes);
    if (!copy->deviceIds) {
      free(copy);
      return NULL;
    }
    memcpy(copy->deviceIds, mesh->deviceIds, bytes);
  }
  return copy;
}

void dtensorMeshDestroy(DtensorMesh *mesh) {
  if (!mesh)
    return;
  free(mesh->deviceIds);
  free(mesh);
}

bool dtensorMeshSetLink(DtensorMesh *mesh, int axis, DtensorLink link,
                        DtensorDiag *outDiag) {
  if (axis < 0 || axis >= mesh->rank)
    return dtDiag(outDiag, -1, "mesh axis %d is out of range (valid: 0..%d)",
                  axis, mesh->rank - 1);
  if (!(link.latencyUs >= 0))
    return dtDiag(outDiag, -1,
                  "latency of mesh axis %d is %g us; it must be >= 0", axis,
                  link.latencyUs);
  if (!(link.bandwidthGBps > 0))
    return dtDiag(outDiag, -1,
                  "bandwidth of mesh axis %d is %g GB/s; it must be > 0", axis,
                  link.bandwidthGBps);
  mesh->links[axis] = link;
  return true;
}

static int compareIds(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

bool dtensorMeshSetDeviceIds(DtensorMesh *mesh, int64_t count,
                             const int64_t *ids, DtensorDiag *outDiag) {
  if (count != mesh->numDevices)
    return dtDiag(outDiag, -1,
                  "%lld device ids given for a mesh of %lld devices",
                  (long long)count, (long long)mesh->numDevices);
  int64_t *copy = malloc((size_t)count * sizeof(int64_t));
  int64_t *sorted = malloc((size_t)count * sizeof(int64_t));
  if (!copy || !sorted) {
    free(copy);
    free(sorted);
    return dtDiag(outDiag, -1, "out of memory");
  }
  memcpy(copy, ids, (size_t)count * sizeof(int64_t));
  memcpy(sorted, ids, (size_t)count * sizeof(int64_t));
  qsort(sorted, (size_t)count, sizeof(int64_t), compareIds);
  for (int64_t i = 0; i < count; ++i) {
    if (sorted[i] < 0 || (i > 0 && sorted[i] == sorted[i - 1])) {
      bool negative = sorted[i] < 0;
      long long bad = (long long)sorted[i];
      free(copy);
      free(sorted);
      return negative
                 ? dtDiag(outDiag, -1, "device id %lld is negative", bad)
                 : dtDiag(outDiag, -1, "device id %lld appears twice", bad);
    }
  }
  free(sorted);
  free(mesh->deviceIds);
  mesh->deviceIds = copy;
  return true;
}

int dtensorMeshGetRank(const DtensorMesh *mesh) { return mesh->rank; }

int64_t dtensorMeshGetAxisSize(const DtensorMesh *mesh, int axis) {
  return mesh->shape[axis];
}

const char *dtensorMeshGetAxisName(const DtensorMesh *mesh, int axis) {
  return mesh->names[axis];
}

int dtensorMeshFindAxis(const DtensorMesh *mesh, const char *name,
                        size_t length) {
  for (int a = 0; a < mesh->rank; ++a)
    if (strlen(mesh->names[a]) == length &&
        memcmp(mesh->names[a], name, length) == 0)
      return a;
  return -1;
}

DtensorLink dtensorMeshGetLink(const DtensorMesh *mesh, int axis) {
  return mesh->links[axis];
}

int64_t dtensorMeshGetNumDevices(const DtensorMesh *mesh) {
  return mesh->numDevices;
}

bool dtensorMeshHasDeviceIds(const DtensorMesh *mesh) {
  return mesh->deviceIds != NULL;
}

int64_t dtensorMeshGetDeviceId(const DtensorMesh *mesh, int64_t device) {
  return mesh->deviceIds ? mesh->deviceIds[device] : device;
}

void dtensorMeshGetCoords(const DtensorMesh *mesh, int64_t device,
                          int64_t *outCoords) {
  for (int a = mesh->rank - 1; a >= 0; --a) {
    outCoords[a] = device % mesh->shape[a];
    device /= mesh->shape[a];
  }
}

int64_t dtensorMeshGetLinearIndex(const DtensorMesh *mesh,
                                  const int64_t *coords) {
  int64_t linear = 0;
  for (int a = 0; a < mesh->rank; ++a)
    linear = linear * mesh->shape[a] + coords[a];
  return linear;
}

DtensorMesh *dtensorMeshCreateSubmesh(const DtensorMesh *mesh, int numAxes,
                                      const int *axes, int64_t device,
                                      DtensorDiag *outDiag) {
  if (device < 0 || device >= mesh->numDevices) {
    dtDiag(outDiag, -1, "device %lld is not in the mesh (valid: 0..%lld)",
           (long long)device, (long long)mesh->numDevices - 1);
    return NULL;
  }
  if (numAxes < 1) {
    dtDiag(outDiag, -1, "a sub-mesh needs at least one axis");
    return NULL;
  }
  int64_t shape[DTENSOR_MAX_MESH_RANK];
  const char *names[DTENSOR_MAX_MESH_RANK];
  bool used[DTENSOR_MAX_MESH_RANK] = {false};
  for (int i = 0; i < numAxes; ++i) {
    int a = i < DTENSOR_MAX_MESH_RANK ? axes[i] : -1;
    if (a < 0 || a >= mesh->rank) {
      dtDiag(outDiag, -1, "sub-mesh axis %d is out of range (valid: 0..%d)", a,
             mesh->rank - 1);
      return NULL;
    }
    if (used[a]) {
      dtDiag(outDiag, -1, "sub-mesh axis %d (%s) is listed twice", a,
             mesh->names[a]);
      return NULL;
    }
    used[a] = true;
    shape[i] = mesh->shape[a];
    names[i] = mesh->names[a];
  }
  DtensorMesh *sub = dtensorMeshCreate(numAxes, shape, names, outDiag);
  if (!sub)
    return NULL;
  for (int i = 0; i < numAxes; ++i)
    sub->links[i] = mesh->links[axes[i]];
  int64_t *ids = malloc((size_t)sub->numDevices * sizeof(int64_t));
  if (!ids) {
    dtensorMeshDestroy(sub);
    dtDiag(outDiag, -1, "out of memory");
    return NULL;
  }
  int64_t base[DTENSOR_MAX_MESH_RANK], subCoords[DTENSOR_MAX_MESH_RANK];
  dtensorMeshGetCoords(mesh, device, base);
  for (int64_t s = 0; s < sub->numDevices; ++s) {
    dtensorMeshGetCoords(sub, s, subCoords);
    int64_t coords[DTENSOR_MAX_MESH_RANK];
    memcpy(coords, base, sizeof(coords));
    for (int i = 0; i < numAxes; ++i)
      coords[axes[i]] = subCoords[i];
    ids[s] =
        dtensorMeshGetDeviceId(mesh, dtensorMeshGetLinearIndex(mesh, coords));
  }
  sub->deviceIds = ids;
  return sub;
}

size_t dtensorMeshPrint(const DtensorMesh *mesh, char *buffer,
                        size_t capacity) {
  DtBuf buf = dtBufInit(buffer, capacity);
  for (int a = 0; a < mesh->rank; ++a)
    dtBufPrintf(&buf, "%s%s=%lld", a ? "," : "", mesh->names[a],
                (long long)mesh->shape[a]);
  return buf.length;
}
