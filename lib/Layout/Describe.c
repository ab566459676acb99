/* A text picture of a layout: the mesh, spec and placements, a grid of the
 * tensor's last two dims with the devices holding each block (one grid per
 * block of the leading dims for a tensor of more; contributions to a
 * pending reduction joined by '+'), and each device's coordinates, local
 * shape and index ranges (dtensor-plan show, dtensor-ckpt info). */
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

/* The devices holding the element at `idx`: replicas joined by ',', the
 * contributions of a pending (Partial) reduction by '+' (devices that
 * differ only along Partial axes hold parts of one value). */
static void ownersText(const DtensorLayout *l, const int64_t *idx, char *cell,
                       size_t size) {
  int64_t owners[256];
  int64_t k = dtensorLayoutGetOwners(l, idx, owners, 256);
  if (k > 256)
    k = 256;
  int meshRank = dtensorMeshGetRank(l->mesh);
  bool partial[DTENSOR_MAX_MESH_RANK] = {false};
  for (int a = 0; a < meshRank; ++a)
    partial[a] = l->spec.partial[a] != DTENSOR_REDUCE_NONE;
  bool used[256] = {false};
  size_t n = 0;
  cell[0] = 0;
  for (int64_t i = 0; i < k && n + 24 < size; ++i) {
    if (used[i])
      continue;
    int64_t ci[DTENSOR_MAX_MESH_RANK];
    dtensorMeshGetCoords(l->mesh, owners[i], ci);
    n += (size_t)snprintf(cell + n, size - n, "%s%lld", n ? "," : "",
                          (long long)owners[i]);
    used[i] = true;
    for (int64_t j = i + 1; j < k && n + 24 < size; ++j) {
      int64_t cj[DTENSOR_MAX_MESH_RANK];
      dtensorMeshGetCoords(l->mesh, owners[j], cj);
      bool same = true;
      for (int a = 0; a < meshRank && same; ++a)
        same = partial[a] || ci[a] == cj[a];
      if (!same || used[j])
        continue;
      used[j] = true;
      n += (size_t)snprintf(cell + n, size - n, "+%lld", (long long)owners[j]);
    }
  }
}

/* One grid: the blocks of dims `rd` (rows) and `cd` (columns, -1 for a 1-d
 * tensor) at the leading index `lead` (the other dims' block starts). */
static void drawGrid(Out *o, const DtensorLayout *l, int rd, int cd,
                     const int64_t *lead) {
  int64_t *rb = malloc(sizeof(int64_t) * 4096);
  int64_t *cb = malloc(sizeof(int64_t) * 4096);
  if (!rb || !cb) {
    free(rb);
    free(cb);
    return;
  }
  bool cut = false;
  int allRows = boundaries(l, rd, rb, &cut) - 1;
  int allColumns = cd >= 0 ? boundaries(l, cd, cb, &cut) - 1 : 1;
  if (cd < 0) {
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
        int64_t idx[DTENSOR_MAX_TENSOR_RANK];
        memcpy(idx, lead, sizeof(idx));
        idx[rd] = rb[r];
        if (cd >= 0)
          idx[cd] = cb[c];
        if (line == 0)
          ownersText(l, idx, cell, sizeof(cell));
        else if (cd >= 0)
          snprintf(cell, sizeof(cell), "%lldx%lld",
                   (long long)(rb[r + 1] - rb[r]),
                   (long long)(cb[c + 1] - cb[c]));
        else
          snprintf(cell, sizeof(cell), "%lld", (long long)(rb[r + 1] - rb[r]));
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

/* The grid of the last two dims; for a tensor of more, one grid per block
 * of the leading dims (small multiples), each titled by its ranges. */
#define MAX_SMALL_MULTIPLES 8

static void drawGrids(Out *o, const DtensorLayout *l) {
  int rank = l->rank;
  int64_t lead[DTENSOR_MAX_TENSOR_RANK] = {0};
  if (rank <= 2) {
    drawGrid(o, l, 0, rank > 1 ? 1 : -1, lead);
    return;
  }
  /* The block starts of each leading dim. */
  int leading = rank - 2, count[DTENSOR_MAX_TENSOR_RANK];
  int64_t *bounds[DTENSOR_MAX_TENSOR_RANK] = {NULL};
  bool cut = false, ok = true;
  int64_t total = 1;
  for (int d = 0; d < leading && ok; ++d) {
    bounds[d] = malloc(sizeof(int64_t) * 4096);
    ok = bounds[d] != NULL;
    if (ok) {
      count[d] = boundaries(l, d, bounds[d], &cut) - 1;
      total *= count[d] > 0 ? count[d] : 1;
    }
  }
  int at[DTENSOR_MAX_TENSOR_RANK] = {0};
  int64_t drawn = 0;
  for (; ok && drawn < total && drawn < MAX_SMALL_MULTIPLES; ++drawn) {
    put(o, "blocks of dims %d x %d where", rank - 2, rank - 1);
    for (int d = 0; d < leading; ++d) {
      lead[d] = bounds[d][at[d]];
      put(o, "%s dim %d in [%lld,%lld)", d ? "," : "", d,
          (long long)bounds[d][at[d]], (long long)bounds[d][at[d] + 1]);
    }
    put(o, ":\n");
    drawGrid(o, l, rank - 2, rank - 1, lead);
    for (int d = leading - 1; d >= 0; --d) {
      if (++at[d] < count[d])
        break;
      at[d] = 0;
    }
  }
  if (ok && total > drawn)
    put(o, "(%lld blocks of the leading dims; the first %lld are drawn)\n",
        (long long)total, (long long)drawn);
  for (int d = 0; d < leading; ++d)
    free(bounds[d]);
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
  drawGrids(o, layout);
  bool partial = false;
  for (int a = 0; a < dtensorMeshGetRank(mesh); ++a)
    partial |= layout->spec.partial[a] != DTENSOR_REDUCE_NONE;
  if (partial)
    put(o, "(a+b: partial values the pending reduction combines; a,b: "
           "copies)\n");
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
