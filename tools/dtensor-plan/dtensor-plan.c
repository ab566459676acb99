/* dtensor-plan: layout inspection from the command line.
 *   dtensor-plan show --mesh 2x4 --shape 10x8 --spec "[S0, S1]" [--dtype f32]
 * draws which devices hold which block and lists each device's local shape
 * and index ranges. */
#include "dtensor-c/Layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
  fprintf(stderr,
          "usage: dtensor-plan show --mesh MESH --shape DxD... --spec SPEC "
          "[--dtype f32]\n"
          "  MESH: 2x4 or dp=2,tp=4;  SPEC: e.g. \"[S0, S1]\" (docs/layouts.md)\n");
  return 2;
}

static bool parseShape(const char *text, int *rank, int64_t *shape) {
  *rank = 0;
  const char *p = text;
  while (*p) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || *rank == DTENSOR_MAX_TENSOR_RANK)
      return false;
    shape[(*rank)++] = v;
    p = end;
    if (*p == 'x')
      ++p;
    else if (*p)
      return false;
  }
  return *rank > 0;
}

/* Distinct block boundaries along one dim, over all devices. */
static int boundaries(const DtensorLayout *l, int dim, int64_t *out) {
  int n = 0;
  int64_t devs = dtensorMeshGetNumDevices(l->mesh);
  out[n++] = 0;
  out[n++] = l->shape[dim];
  for (int64_t d = 0; d < devs; ++d) {
    DtensorRange r[64];
    int k = dtensorLayoutGetLocalRanges(l, d, dim, r);
    for (int i = 0; i < k && n < 4094; ++i) {
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

static void drawGrid(const DtensorLayout *l) {
  static int64_t rb[4096], cb[4096];
  int nr = boundaries(l, 0, rb) - 1;
  int nc = l->rank > 1 ? boundaries(l, 1, cb) - 1 : 1;
  if (l->rank < 2) {
    cb[0] = 0;
    cb[1] = 1;
  }
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
  printf("%s\n", sep);
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
        printf("|%-*.*s", width, width, cell);
      }
      printf("|\n");
    }
    printf("%s\n", sep);
  }
}

static int show(int argc, char **argv) {
  const char *meshText = NULL, *shapeText = NULL, *specText = NULL,
             *dtype = "f32";
  for (int i = 0; i < argc; ++i) {
    const char **slot = !strcmp(argv[i], "--mesh")    ? &meshText
                        : !strcmp(argv[i], "--shape") ? &shapeText
                        : !strcmp(argv[i], "--spec")  ? &specText
                        : !strcmp(argv[i], "--dtype") ? &dtype
                                                      : NULL;
    if (!slot || i + 1 >= argc) {
      fprintf(stderr, "dtensor-plan: unknown or incomplete option '%s'\n",
              argv[i]);
      return usage();
    }
    *slot = argv[++i];
  }
  if (!meshText || !shapeText || !specText)
    return usage();
  DtensorDiag diag;
  DtensorMesh *mesh = dtensorMeshParse(meshText, &diag);
  if (!mesh) {
    fprintf(stderr, "dtensor-plan: --mesh '%s': %s\n", meshText, diag.message);
    return 1;
  }
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  DtensorElementType et;
  DtensorShardingSpec spec;
  DtensorLayout layout;
  int rc = 1;
  if (!parseShape(shapeText, &rank, shape))
    fprintf(stderr, "dtensor-plan: --shape '%s': expected sizes like 10x8\n",
            shapeText);
  else if (!dtensorElementTypeParse(dtype, &et))
    fprintf(stderr, "dtensor-plan: --dtype '%s': expected one of f32, f64, "
            "f16, bf16, i1, i8, i16, i32, i64\n", dtype);
  else if (!dtensorShardingSpecParse(specText, mesh, &spec, &diag))
    fprintf(stderr, "dtensor-plan: --spec '%s': column %d: %s\n", specText,
            diag.column + 1, diag.message);
  else if (!dtensorLayoutInit(mesh, &spec, rank, shape, et, &layout, &diag))
    fprintf(stderr, "dtensor-plan: --spec '%s': %s\n", specText, diag.message);
  else
    rc = 0;
  if (rc) {
    dtensorMeshDestroy(mesh);
    return rc;
  }
  char buf[512];
  dtensorMeshPrint(mesh, buf, sizeof(buf));
  printf("mesh %s, tensor %s", buf, shapeText);
  dtensorShardingSpecPrint(&spec, buf, sizeof(buf));
  printf("x%s, spec %s%s\n", dtype, buf,
         dtensorLayoutIsEven(&layout) ? "" : " (uneven)");
  DtensorPlacements pl;
  dtensorShardingSpecToPlacements(&spec, dtensorMeshGetRank(mesh), &pl);
  dtensorPlacementsPrint(&pl, buf, sizeof(buf));
  printf("placements %s\n", buf);
  drawGrid(&layout);
  printf("device  coords    local shape   index ranges\n");
  for (int64_t d = 0; d < dtensorMeshGetNumDevices(mesh); ++d) {
    int64_t coords[DTENSOR_MAX_MESH_RANK], ls[DTENSOR_MAX_TENSOR_RANK];
    dtensorMeshGetCoords(mesh, d, coords);
    dtensorLayoutGetLocalShape(&layout, d, ls);
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
      int n = dtensorLayoutGetLocalRanges(&layout, d, k, rg);
      snprintf(r + strlen(r), sizeof(r) - strlen(r), "%s", k ? " x " : "");
      for (int i = 0; i < n && strlen(r) < 400; ++i)
        snprintf(r + strlen(r), sizeof(r) - strlen(r), "%s[%lld,%lld)",
                 i ? "+" : "", (long long)rg[i].begin, (long long)rg[i].end);
    }
    printf("%-7lld %-9s %-13s %s\n", (long long)d, c, s, r);
  }
  dtensorMeshDestroy(mesh);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "show"))
    return show(argc - 2, argv + 2);
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage();
    return 0;
  }
  return usage();
}
