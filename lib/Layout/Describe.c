/* A text picture of a layout: the mesh, spec and placements, a grid of the
 * tensor's first two dims with the devices holding each block, and each
 * device's coordinates, local shape and index ranges (dtensor-plan show,
 * dtensor-ckpt info). */
#include "dtensor-c/Layout.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Out {
  char *buffer;
  size_t capacity, used;
} Out;

static void put(Out *o, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends with snprintf semantics: counts what did not fit. */
static void put(Out *o, const char *format, ...) {
  va_list args;
  va_start(args, format);
  size_t room = o->used < o->capacity ? o->capacity - o->used : 0;
  int n = vsnprintf(room ? o->buffer + o->used : NULL, room, format, args);
  va_end(args);
  if (n > 0)
    o->used += (size_t)n;
}

/* Distinct block boundaries along one dim, over all devices (at most 4096:
 * `*cut` says whether some were left out). */
static int boundaries(const DtensorLayout *l, int dim, int64_t *out,
                      bool *cut) {
  int n = 0;
  int64_t devs = dtensorMeshGetNumDevices(l->mesh);
  out[n++] = 0;
  out[n++] = l->shape[dim];
  for (int64_t d = 0; d < devs; ++d) {
    DtensorRange r[64];
    int k = dtensorLayoutGetLocalRanges(l, d, dim, r);
    for (int i = 0; i < k; ++i) {
      if (n >= 4094) {
        *cut = true;
        break;
      }
      out[n++] = r[i].begin;
      out[n++] = r[i].end;
    }
  }
  /* sort + unique */
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && out[j - 1] > out[j]; --j) {
      int64_t t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
  int m = 0;
  for (int i = 0; i < n; ++i)
    if (m == 0 || out[m - 1] != out[i])
      out[m++] = out[i];
  return m;
}

/* Larger meshes get no grid and no device table (both cost time in the
 * number of devices, the grid in cells times devices); larger grids are
 * drawn in part. */
#define MAX_DESCRIBED_DEVICES 65536
#define MAX_GRID_ROWS 32
#define MAX_GRID_COLUMNS 16

static void drawGrid(Out *o, const DtensorLayout *l) {
  int64_t *rb = malloc(sizeof(int64_t) * 4096);
  int64_t *cb = malloc(sizeof(int64_t) * 4096);
  if (!rb || !cb) {
    free(rb);
    free(cb);
    return;
  }
  bool cut = false;
  int allRows = boundaries(l, 0, rb, &cut) - 1;
  int allColumns = l->rank > 1 ? boundaries(l, 1, cb, &cut) - 1 : 1;
  if (l->rank < 2) {
    cb[0] = 0;
    cb[1] = 1;
  }
  int nr = allRows < MAX_GRID_ROWS ? allRows : MAX_GRID_ROWS;
  int nc = allColumns < MAX_GRID_COLUMNS ? allColumns : MAX_GRID_COLUMNS;
  const int width = 14;
  char sep[4096];
  int pos = 0;
  for (int c = 0; c < nc && pos < 4000; ++c) {
    sep[pos++] = '+';
    for (int i = 0; i < width; ++i)
      sep[pos++] = '-';
  }
  sep[pos++] = '+';
  sep[pos] = '\0';
  put(o, "%s\n", sep);
  for (int r = 0; r < nr; ++r) {
    if (rb[r] == rb[r + 1])
      continue;
    for (int line = 0; line < 2; ++line) {
      for (int c = 0; c < nc; ++c) {
        char cell[128] = "";
        int64_t idx[DTENSOR_MAX_TENSOR_RANK] = {0};
        idx[0] = rb[r];
        if (l->rank > 1)
          idx[1] = cb[c];
        if (line == 0) {
          int64_t owners[256];
          int64_t k = dtensorLayoutGetOwners(l, idx, owners, 256);
          int n = 0;
          for (int64_t i = 0; i < k && i < 256 && n < 100; ++i)
            n += snprintf(cell + n, sizeof(cell) - (size_t)n, "%s%lld",
                          i ? "," : "", (long long)owners[i]);
        } else if (l->rank > 1) {
          snprintf(cell, sizeof(cell), "%lldx%lld",
                   (long long)(rb[r + 1] - rb[r]),
                   (long long)(cb[c + 1] - cb[c]));
        } else {
          snprintf(cell, sizeof(cell), "%lld", (long long)(rb[r + 1] - rb[r]));
        }
        put(o, "|%-*.*s", width, width, cell);
      }
      put(o, "|\n");
    }
    put(o, "%s\n", sep);
  }
  if (cut)
    put(o, "(more than %d x %d blocks: the first ones are drawn)\n", nr, nc);
  else if (nr < allRows || nc < allColumns)
    put(o, "(%d x %d blocks; the first %d x %d are drawn)\n", allRows,
        allColumns, nr, nc);
  free(rb);
  free(cb);
}

size_t dtensorLayoutDescribe(const DtensorLayout *layout, char *buffer,
                             size_t capacity) {
  Out out = {buffer, capacity, 0};
  Out *o = &out;
  if (capacity)
    buffer[0] = 0;
  const char *dtype = dtensorElementTypeGetName(layout->elementType);
  const DtensorMesh *mesh = layout->mesh;
  int rank = layout->rank;
  char buf[512];
  dtensorMeshPrint(mesh, buf, sizeof(buf));
  put(o, "mesh %s, tensor ", buf);
  for (int d = 0; d < rank; ++d)
    put(o, "%s%lld", d ? "x" : "", (long long)layout->shape[d]);
  dtensorShardingSpecPrint(&layout->spec, buf, sizeof(buf));
  put(o, "x%s, spec %s%s\n", dtype, buf,
      dtensorLayoutIsEven(layout) ? "" : " (uneven)");
  DtensorPlacements pl;
  dtensorShardingSpecToPlacements(&layout->spec, dtensorMeshGetRank(mesh), &pl);
  dtensorPlacementsPrint(&pl, buf, sizeof(buf));
  put(o, "placements %s\n", buf);
  if (dtensorMeshGetNumDevices(mesh) > MAX_DESCRIBED_DEVICES) {
    put(o,
        "(%lld devices: the grid and the device table are drawn for "
        "meshes of at most %d)\n",
        (long long)dtensorMeshGetNumDevices(mesh), MAX_DESCRIBED_DEVICES);
    return out.used;
  }
  drawGrid(o, layout);
  put(o, "device  coords    local shape   index ranges\n");
  for (int64_t d = 0; d < dtensorMeshGetNumDevices(mesh); ++d) {
    int64_t coords[DTENSOR_MAX_MESH_RANK], ls[DTENSOR_MAX_TENSOR_RANK];
    dtensorMeshGetCoords(mesh, d, coords);
    dtensorLayoutGetLocalShape(layout, d, ls);
    char c[64] = "(", s[128] = "", r[512] = "";
    for (int a = 0; a < dtensorMeshGetRank(mesh); ++a)
      snprintf(c + strlen(c), sizeof(c) - strlen(c), "%s%lld", a ? "," : "",
               (long long)coords[a]);
    strcat(c, ")");
    for (int k = 0; k < rank; ++k)
      snprintf(s + strlen(s), sizeof(s) - strlen(s), "%s%lld", k ? "x" : "",
               (long long)ls[k]);
    for (int k = 0; k < rank; ++k) {
      DtensorRange rg[64];
      int n = dtensorLayoutGetLocalRanges(layout, d, k, rg);
      snprintf(r + strlen(r), sizeof(r) - strlen(r), "%s", k ? " x " : "");
      for (int i = 0; i < n && strlen(r) < 400; ++i)
        snprintf(r + strlen(r), sizeof(r) - strlen(r), "%s[%lld,%lld)",
                 i ? "+" : "", (long long)rg[i].begin, (long long)rg[i].end);
    }
    put(o, "%-7lld %-9s %-13s %s\n", (long long)d, c, s, r);
  }
  return out.used;
}
