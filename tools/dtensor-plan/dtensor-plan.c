/* dtensor-plan: layouts and redistribution plans from the command line.
 *   dtensor-plan show --mesh 2x4 --shape 10x8 --spec "[S0, S1]" [--dtype f32]
 * draws which devices hold which block and lists each device's local shape
 * and index ranges;
 *   dtensor-plan plan --mesh 2x4 --shape 64x32 --from "[S0, S1]" --to "[S1, S0]"
 * prints the LayoutConverter's plan, step by step with costs. */
#include "dtensor-c/Planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
  fprintf(stderr,
          "usage: dtensor-plan show --mesh MESH --shape DxD... --spec SPEC "
          "[--dtype T]\n"
          "       dtensor-plan plan --mesh MESH --shape DxD... --from SPEC "
          "--to SPEC [--dtype T]\n"
          "                [--strategy optimal|greedy] [--objective "
          "forward|forward+backward]\n"
          "                [--latency-us A,B,..] [--bandwidth-gbps A,B,..] "
          "[--copy-gbps G]\n"
          "                [--json] [--show] [--check]\n"
          "  MESH: 2x4 or dp=2,tp=4;  SPEC: e.g. \"[S0, S1]\" (docs/layouts.md);"
          "  T: f32 (default), f64, f16, bf16, i1, i8, i16, i32, i64\n"
          "  --latency-us/--bandwidth-gbps: the link model, one value per mesh "
          "axis\n"
          "  --check: run the plan on every device's blocks in memory and "
          "compare\n");
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

/* Prints the header, the grid and the per-device table of a layout. */
static void printLayout(const DtensorLayout *layout, const char *dtype) {
  const DtensorMesh *mesh = layout->mesh;
  int rank = layout->rank;
  char buf[512];
  dtensorMeshPrint(mesh, buf, sizeof(buf));
  printf("mesh %s, tensor ", buf);
  for (int d = 0; d < rank; ++d)
    printf("%s%lld", d ? "x" : "", (long long)layout->shape[d]);
  dtensorShardingSpecPrint(&layout->spec, buf, sizeof(buf));
  printf("x%s, spec %s%s\n", dtype, buf,
         dtensorLayoutIsEven(layout) ? "" : " (uneven)");
  DtensorPlacements pl;
  dtensorShardingSpecToPlacements(&layout->spec, dtensorMeshGetRank(mesh), &pl);
  dtensorPlacementsPrint(&pl, buf, sizeof(buf));
  printf("placements %s\n", buf);
  drawGrid(layout);
  printf("device  coords    local shape   index ranges\n");
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
    printf("%-7lld %-9s %-13s %s\n", (long long)d, c, s, r);
  }
}

/* The command line of both subcommands. */
typedef struct Args {
  const char *mesh, *shape, *spec, *from, *to, *dtype, *strategy, *objective;
  const char *latency, *bandwidth, *copy;
  bool json, show, check;
} Args;

static int parseArgs(int argc, char **argv, Args *a) {
  *a = (Args){0};
  a->dtype = "f32";
  for (int i = 0; i < argc; ++i) {
    bool *flag = !strcmp(argv[i], "--json")    ? &a->json
                 : !strcmp(argv[i], "--show")  ? &a->show
                 : !strcmp(argv[i], "--check") ? &a->check
                                               : NULL;
    if (flag) {
      *flag = true;
      continue;
    }
    const char **slot = !strcmp(argv[i], "--mesh")             ? &a->mesh
                        : !strcmp(argv[i], "--shape")          ? &a->shape
                        : !strcmp(argv[i], "--spec")           ? &a->spec
                        : !strcmp(argv[i], "--from")           ? &a->from
                        : !strcmp(argv[i], "--to")             ? &a->to
                        : !strcmp(argv[i], "--dtype")          ? &a->dtype
                        : !strcmp(argv[i], "--strategy")       ? &a->strategy
                        : !strcmp(argv[i], "--objective")      ? &a->objective
                        : !strcmp(argv[i], "--latency-us")     ? &a->latency
                        : !strcmp(argv[i], "--bandwidth-gbps") ? &a->bandwidth
                        : !strcmp(argv[i], "--copy-gbps")      ? &a->copy
                                                               : NULL;
    if (!slot || i + 1 >= argc) {
      fprintf(stderr, "dtensor-plan: unknown or incomplete option '%s'\n",
              argv[i]);
      return usage();
    }
    *slot = argv[++i];
  }
  return -1;
}

/* Parses a comma-separated list of one number per mesh axis. */
static bool parseList(const char *text, int count, double *out) {
  const char *p = text;
  for (int i = 0; i < count; ++i) {
    char *end;
    out[i] = strtod(p, &end);
    if (end == p)
      return false;
    p = end;
    if (i + 1 < count && *p++ != ',')
      return false;
  }
  return *p == '\0';
}

/* Builds the mesh (with its link model) and the shape; prints why not. */
static DtensorMesh *loadMesh(const Args *a, int *rank, int64_t *shape,
                             DtensorElementType *et) {
  DtensorDiag diag;
  DtensorMesh *mesh = dtensorMeshParse(a->mesh, &diag);
  if (!mesh) {
    fprintf(stderr, "dtensor-plan: --mesh '%s': %s\n", a->mesh, diag.message);
    return NULL;
  }
  int meshRank = dtensorMeshGetRank(mesh);
  double lat[DTENSOR_MAX_MESH_RANK], bw[DTENSOR_MAX_MESH_RANK];
  for (int i = 0; i < meshRank; ++i) {
    DtensorLink l = dtensorMeshGetLink(mesh, i);
    lat[i] = l.latencyUs;
    bw[i] = l.bandwidthGBps;
  }
  const char *bad = NULL;
  if (!parseShape(a->shape, rank, shape))
    fprintf(stderr, "dtensor-plan: --shape '%s': expected sizes like 10x8\n",
            a->shape), bad = "";
  else if (!dtensorElementTypeParse(a->dtype, et))
    fprintf(stderr, "dtensor-plan: --dtype '%s': expected one of f32, f64, "
            "f16, bf16, i1, i8, i16, i32, i64\n", a->dtype), bad = "";
  else if (a->latency && !parseList(a->latency, meshRank, lat))
    bad = "--latency-us";
  else if (a->bandwidth && !parseList(a->bandwidth, meshRank, bw))
    bad = "--bandwidth-gbps";
  if (bad && *bad)
    fprintf(stderr, "dtensor-plan: %s: expected %d comma-separated numbers, "
            "one per mesh axis\n", bad, meshRank);
  for (int i = 0; !bad && i < meshRank; ++i)
    if (!dtensorMeshSetLink(mesh, i, (DtensorLink){lat[i], bw[i]}, &diag)) {
      fprintf(stderr, "dtensor-plan: %s\n", diag.message);
      bad = "";
    }
  if (bad) {
    dtensorMeshDestroy(mesh);
    return NULL;
  }
  return mesh;
}

static bool loadSpec(const char *flag, const char *text,
                     const DtensorMesh *mesh, DtensorShardingSpec *spec) {
  DtensorDiag diag;
  if (dtensorShardingSpecParse(text, mesh, spec, &diag))
    return true;
  fprintf(stderr, "dtensor-plan: %s '%s': column %d: %s\n", flag, text,
          diag.column + 1, diag.message);
  return false;
}

static int show(int argc, char **argv) {
  Args a;
  int status = parseArgs(argc, argv, &a);
  if (status >= 0)
    return status;
  if (!a.mesh || !a.shape || !a.spec)
    return usage();
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  DtensorElementType et;
  DtensorMesh *mesh = loadMesh(&a, &rank, shape, &et);
  if (!mesh)
    return 1;
  DtensorShardingSpec spec;
  DtensorLayout layout;
  DtensorDiag diag;
  int rc = 1;
  if (!loadSpec("--spec", a.spec, mesh, &spec))
    ;
  else if (!dtensorLayoutInit(mesh, &spec, rank, shape, et, &layout, &diag))
    fprintf(stderr, "dtensor-plan: --spec '%s': %s\n", a.spec, diag.message);
  else {
    printLayout(&layout, a.dtype);
    rc = 0;
  }
  dtensorMeshDestroy(mesh);
  return rc;
}

static void jsonString(const char *s) {
  putchar('"');
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\')
      putchar('\\');
    putchar(*s);
  }
  putchar('"');
}

static void printJson(const DtensorPlan *plan, const DtensorShardingSpec *to,
                      const char *strategy) {
  char buf[512];
  printf("{\"source\": ");
  dtensorShardingSpecPrint(&plan->source, buf, sizeof(buf));
  jsonString(buf);
  printf(", \"target\": ");
  dtensorShardingSpecPrint(to, buf, sizeof(buf));
  jsonString(buf);
  printf(", \"strategy\": \"%s\", \"steps\": [", strategy);
  for (int i = 0; i < plan->numSteps; ++i) {
    const DtensorPlanStep *s = &plan->steps[i];
    printf("%s\n  {\"comm\": ", i ? "," : "");
    dtensorCommSpecPrint(&s->comm, buf, sizeof(buf));
    jsonString(buf);
    printf(", \"pattern\": \"%s\", \"axes\": [",
           dtensorCommPatternGetName(s->comm.pattern));
    for (int k = 0; k < s->comm.numAxes; ++k)
      printf("%s%d", k ? ", " : "", s->comm.axes[k]);
    printf("], \"gather_dim\": %d, \"shard_dim\": %d, \"reduce\": ",
           s->comm.gatherDim, s->comm.shardDim);
    if (s->comm.reduce == DTENSOR_REDUCE_NONE)
      printf("null");
    else
      printf("\"%s\"", dtensorReduceKindGetName(s->comm.reduce));
    printf(", \"after\": ");
    dtensorShardingSpecPrint(&s->after, buf, sizeof(buf));
    jsonString(buf);
    printf(", \"forward_us\": %.6g, \"backward_us\": %.6g, "
           "\"bytes_per_device\": %lld}",
           s->cost.forwardUs, s->cost.backwardUs,
           (long long)s->cost.bytesPerDevice);
  }
  printf("%s], \"num_steps\": %d, \"forward_us\": %.6g, "
         "\"backward_us\": %.6g}\n",
         plan->numSteps ? "\n" : "", plan->numSteps, plan->forwardUs,
         plan->backwardUs);
}

static int plan(int argc, char **argv) {
  Args a;
  int status = parseArgs(argc, argv, &a);
  if (status >= 0)
    return status;
  if (!a.mesh || !a.shape || !a.from || !a.to)
    return usage();
  DtensorPlanOptions options;
  dtensorPlanOptionsInit(&options);
  const char *strategy = a.strategy ? a.strategy : "optimal";
  if (!strcmp(strategy, "greedy"))
    options.strategy = DTENSOR_STRATEGY_GREEDY;
  else if (strcmp(strategy, "optimal")) {
    fprintf(stderr, "dtensor-plan: --strategy '%s': expected optimal or "
            "greedy\n", strategy);
    return 2;
  }
  if (a.objective && !strcmp(a.objective, "forward+backward"))
    options.objective = DTENSOR_OBJECTIVE_FORWARD_BACKWARD;
  else if (a.objective && strcmp(a.objective, "forward")) {
    fprintf(stderr, "dtensor-plan: --objective '%s': expected forward or "
            "forward+backward\n", a.objective);
    return 2;
  }
  if (a.copy) {
    char *end;
    options.copyBandwidthGBps = strtod(a.copy, &end);
    if (end == a.copy || *end || !(options.copyBandwidthGBps > 0)) {
      fprintf(stderr, "dtensor-plan: --copy-gbps '%s': expected a bandwidth "
              "> 0 in GB/s\n", a.copy);
      return 2;
    }
  }
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  DtensorElementType et;
  DtensorMesh *mesh = loadMesh(&a, &rank, shape, &et);
  if (!mesh)
    return 1;
  DtensorShardingSpec from, to;
  DtensorLayout source;
  DtensorDiag diag;
  static DtensorPlan p;
  int rc = 1;
  if (!loadSpec("--from", a.from, mesh, &from) ||
      !loadSpec("--to", a.to, mesh, &to))
    ;
  else if (!dtensorLayoutInit(mesh, &from, rank, shape, et, &source, &diag))
    fprintf(stderr, "dtensor-plan: --from '%s': %s\n", a.from, diag.message);
  else if (!dtensorPlanCompute(&source, &to, &options, &p, &diag))
    fprintf(stderr, "dtensor-plan: cannot convert %s to %s: %s\n", a.from,
            a.to, diag.message);
  else if (a.check && !dtensorPlanSimulate(&source, &p, &to, &diag))
    fprintf(stderr, "dtensor-plan: the plan fails its check: %s\n",
            diag.message);
  else
    rc = 0;
  if (rc) {
    dtensorMeshDestroy(mesh);
    return rc;
  }
  if (a.json) {
    printJson(&p, &to, strategy);
  } else {
    static char text[1 << 16];
    char buf[512];
    dtensorMeshPrint(mesh, buf, sizeof(buf));
    printf("plan (%s) on mesh %s, tensor %s x %s\n", strategy, buf, a.shape,
           a.dtype);
    dtensorPlanPrint(&p, mesh, text, sizeof(text));
    fputs(text, stdout);
    if (a.check)
      printf("check: every device's blocks equal the target's\n");
  }
  if (a.show) {
    DtensorLayout l = source;
    printf("\n== start\n");
    printLayout(&l, a.dtype);
    for (int i = 0; i < p.numSteps; ++i) {
      char buf[256];
      dtensorCommSpecPrint(&p.steps[i].comm, buf, sizeof(buf));
      printf("\n== after step %d: %s\n", i + 1, buf);
      l.spec = p.steps[i].after;
      printLayout(&l, a.dtype);
    }
  }
  dtensorMeshDestroy(mesh);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "show"))
    return show(argc - 2, argv + 2);
  if (argc >= 2 && !strcmp(argv[1], "plan"))
    return plan(argc - 2, argv + 2);
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage();
    return 0;
  }
  return usage();
}
