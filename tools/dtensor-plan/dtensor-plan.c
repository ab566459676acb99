/* dtensor-plan: layouts and redistribution plans from the command line.
 *   dtensor-plan show --mesh 2x4 --shape 10x8 --spec "[S0, S1]" [--dtype f32]
 * draws which devices hold which block and lists each device's local shape
 * and index ranges;
 *   dtensor-plan plan --mesh 2x4 --shape 64x32 --from "[S0, S1]" \
 *                     --to "[S1, S0]"
 * prints the LayoutConverter's plan, step by step with costs. */
#include "dtensor-c/Planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
  fprintf(
      stderr,
      "usage: dtensor-plan show --mesh MESH --shape DxD... --spec SPEC "
      "[--dtype T]\n"
      "       dtensor-plan plan --mesh MESH --shape DxD... --from SPEC "
      "--to SPEC [--dtype T]\n"
      "                [--strategy optimal|greedy] [--objective "
      "forward|forward+backward]\n"
      "                [--latency-us A,B,..] [--bandwidth-gbps A,B,..] "
      "[--copy-gbps G]\n"
      "                [--calibration FILE]\n"
      "                [--json] [--show] [--check]\n"
      "  MESH: 2x4 or dp=2,tp=4;  SPEC: e.g. \"[S0, S1]\" (docs/layouts.md);"
      "  T: f32 (default), f64, f16, bf16, i1, i8, i16, i32, i64\n"
      "  --latency-us/--bandwidth-gbps: the link model, one value per mesh "
      "axis\n"
      "  --calibration: price collectives with a measured cost file "
      "(dtensor-run --calibrate)\n"
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

static void printLayout(const DtensorLayout *layout) {
  size_t n = dtensorLayoutDescribe(layout, NULL, 0);
  char *text = malloc(n + 1);
  if (!text)
    return;
  dtensorLayoutDescribe(layout, text, n + 1);
  fputs(text, stdout);
  free(text);
}

/* The command line of both subcommands. */
typedef struct Args {
  const char *mesh, *shape, *spec, *from, *to, *dtype, *strategy, *objective;
  const char *latency, *bandwidth, *copy, *calibration;
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
                        : !strcmp(argv[i], "--calibration")    ? &a->calibration
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
            a->shape),
        bad = "";
  else if (!dtensorElementTypeParse(a->dtype, et))
    fprintf(stderr,
            "dtensor-plan: --dtype '%s': expected one of f32, f64, "
            "f16, bf16, i1, i8, i16, i32, i64\n",
            a->dtype),
        bad = "";
  else if (a->latency && !parseList(a->latency, meshRank, lat))
    bad = "--latency-us";
  else if (a->bandwidth && !parseList(a->bandwidth, meshRank, bw))
    bad = "--bandwidth-gbps";
  if (bad && *bad)
    fprintf(stderr,
            "dtensor-plan: %s: expected %d comma-separated numbers, "
            "one per mesh axis\n",
            bad, meshRank);
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
    printLayout(&layout);
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
    if (s->viewGroups > 1)
      printf(", \"view\": [%d, %lld]", s->viewDim, (long long)s->viewGroups);
    else
      printf(", \"view\": null");
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

/* The planner's options from --strategy, --objective and --copy-gbps;
 * returns -1 to go on, else the exit status. */
static int planOptions(const Args *a, const char *strategy,
                       DtensorPlanOptions *options) {
  dtensorPlanOptionsInit(options);
  if (!strcmp(strategy, "greedy"))
    options->strategy = DTENSOR_STRATEGY_GREEDY;
  else if (strcmp(strategy, "optimal")) {
    fprintf(stderr,
            "dtensor-plan: --strategy '%s': expected optimal or "
            "greedy\n",
            strategy);
    return 2;
  }
  if (a->objective && !strcmp(a->objective, "forward+backward"))
    options->objective = DTENSOR_OBJECTIVE_FORWARD_BACKWARD;
  else if (a->objective && strcmp(a->objective, "forward")) {
    fprintf(stderr,
            "dtensor-plan: --objective '%s': expected forward or "
            "forward+backward\n",
            a->objective);
    return 2;
  }
  if (a->copy) {
    char *end;
    options->copyBandwidthGBps = strtod(a->copy, &end);
    if (end == a->copy || *end || !(options->copyBandwidthGBps > 0)) {
      fprintf(stderr,
              "dtensor-plan: --copy-gbps '%s': expected a bandwidth "
              "> 0 in GB/s\n",
              a->copy);
      return 2;
    }
  }
  return -1;
}

/* Prints the plan (text or JSON) and, with --show, each step's layout. */
static void printPlan(const Args *a, const DtensorMesh *mesh,
                      const DtensorPlan *p, const DtensorLayout *source,
                      const DtensorShardingSpec *to, const char *strategy) {
  if (a->json) {
    printJson(p, to, strategy);
  } else {
    static char text[1 << 16];
    char buf[512];
    dtensorMeshPrint(mesh, buf, sizeof(buf));
    printf("plan (%s) on mesh %s, tensor %s x %s\n", strategy, buf, a->shape,
           a->dtype);
    dtensorPlanPrint(p, mesh, text, sizeof(text));
    fputs(text, stdout);
    if (a->check)
      printf("check: every device's blocks equal the target's\n");
  }
  if (!a->show)
    return;
  DtensorLayout l = *source;
  printf("\n== start\n");
  printLayout(&l);
  for (int i = 0; i < p->numSteps; ++i) {
    char buf[256];
    dtensorCommSpecPrint(&p->steps[i].comm, buf, sizeof(buf));
    printf("\n== after step %d: %s\n", i + 1, buf);
    DtensorDiag diag;
    if (!dtensorPlanStepLayout(source, &p->steps[i], &l, &diag)) {
      printf("(%s)\n", diag.message);
      continue;
    }
    printLayout(&l);
  }
}

/* --calibration's file for `mesh` into `*out` (NULL without the option);
 * false after saying why it does not read or fit the mesh. */
static bool loadCalibration(const Args *a, const DtensorMesh *mesh,
                            DtensorCalibration **out) {
  *out = NULL;
  if (!a->calibration)
    return true;
  DtensorDiag diag;
  *out = dtensorCalibrationRead(a->calibration, &diag);
  if (*out && dtensorCalibrationCheckMesh(*out, mesh, &diag))
    return true;
  fprintf(stderr, "dtensor-plan: --calibration: %s\n", diag.message);
  dtensorCalibrationDestroy(*out);
  *out = NULL;
  return false;
}

static int plan(int argc, char **argv) {
  Args a;
  int status = parseArgs(argc, argv, &a);
  if (status >= 0)
    return status;
  if (!a.mesh || !a.shape || !a.from || !a.to)
    return usage();
  DtensorPlanOptions options;
  const char *strategy = a.strategy ? a.strategy : "optimal";
  if ((status = planOptions(&a, strategy, &options)) >= 0)
    return status;
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  DtensorElementType et;
  DtensorMesh *mesh = loadMesh(&a, &rank, shape, &et);
  DtensorCalibration *cal = NULL;
  if (!mesh || !loadCalibration(&a, mesh, &cal)) {
    dtensorMeshDestroy(mesh);
    return 1;
  }
  options.calibration = cal;
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
    fprintf(stderr, "dtensor-plan: cannot convert %s to %s: %s\n", a.from, a.to,
            diag.message);
  else if (a.check && !dtensorPlanSimulate(&source, &p, &to, &diag))
    fprintf(stderr, "dtensor-plan: the plan fails its check: %s\n",
            diag.message);
  else
    rc = 0;
  if (!rc)
    printPlan(&a, mesh, &p, &source, &to, strategy);
  dtensorMeshDestroy(mesh);
  dtensorCalibrationDestroy(cal);
  return rc;
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
