/* Tests of the planner: CommSpec text, apply and cost; and, exhaustively over
 * every pair of specs (with and without Partial, even and uneven shapes) on
 * meshes 4, 2x2, 2x4 and 2x2x2 with tensors of rank 1 to 3, that
 *  - every optimal and every greedy plan, run by the simulator, produces
 *    exactly the target's blocks;
 *  - every optimal plan costs what an exhaustive Bellman-Ford search finds
 *    over a transform graph built independently here (every syntactically
 *    possible CommSpec, kept when dtensorCommSpecApply accepts it);
 *  - a pair has a plan exactly when that graph reaches the target.
 * Prints "N passed, N failed" and the share of pairs where greedy is worse. */
#include "dtensor-c/Planner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "Check.h"
#include "SpecEnum.h"

/* ---- CommSpec text and apply --------------------------------------------- */

static void commRoundTrip(const char *text) {
  DtensorCommSpec c;
  DtensorDiag diag;
  bool ok = dtensorCommSpecParse(text, &c, &diag);
  if (!ok)
    fprintf(stderr, "parse of '%s' failed: %s\n", text, diag.message);
  CHECK(ok);
  char buf[256];
  dtensorCommSpecPrint(&c, buf, sizeof(buf));
  if (strcmp(buf, text))
    fprintf(stderr, "print of '%s' is '%s'\n", text, buf);
  CHECK(strcmp(buf, text) == 0);
}

static void commParseError(const char *text, const char *needle) {
  DtensorCommSpec c;
  DtensorDiag diag = {-1, ""};
  CHECK(!dtensorCommSpecParse(text, &c, &diag));
  if (!strstr(diag.message, needle))
    fprintf(stderr, "error for '%s' is '%s', want '%s'\n", text, diag.message,
            needle);
  CHECK(strstr(diag.message, needle) != NULL);
}

static DtensorLayout layoutOf(const DtensorMesh *mesh, const char *spec,
                              int rank, const int64_t *shape) {
  DtensorShardingSpec s;
  DtensorLayout l;
  DtensorDiag diag;
  bool ok = dtensorShardingSpecParse(spec, mesh, &s, &diag) &&
            dtensorLayoutInit(mesh, &s, rank, shape, DTENSOR_F32, &l, &diag);
  if (!ok)
    fprintf(stderr, "layout '%s': %s\n", spec, diag.message);
  CHECK(ok);
  return l;
}

static void applyCase(const DtensorMesh *mesh, const char *from,
                      const char *comm, int rank, const int64_t *shape,
                      const char *want) {
  DtensorLayout l = layoutOf(mesh, from, rank, shape);
  DtensorCommSpec c;
  DtensorDiag diag = {-1, ""};
  CHECK(dtensorCommSpecParse(comm, &c, &diag));
  DtensorShardingSpec out;
  bool ok = dtensorCommSpecApply(&c, &l, &out, &diag);
  char buf[256] = "";
  if (ok)
    dtensorShardingSpecPrint(&out, buf, sizeof(buf));
  const char *got = ok ? buf : diag.message;
  if (!strstr(got, want))
    fprintf(stderr, "%s on %s gives '%s', want '%s'\n", comm, from, got, want);
  CHECK(strstr(got, want) != NULL);
}

static void testCommSpecs(void) {
  commRoundTrip("identity");
  commRoundTrip("all_gather(axes=[1], gather_dim=0)");
  commRoundTrip("all_to_all(axes=[0, 1], gather_dim=1, shard_dim=0)");
  commRoundTrip("local_split(axes=[2], shard_dim=1)");
  commRoundTrip("all_reduce(axes=[0, 2], reduce=max)");
  commRoundTrip("reduce_scatter(axes=[1], shard_dim=0, reduce=avg)");
  commParseError("all_gather(axes=[1])", "needs gather_dim");
  commParseError("all_reduce(axes=[1], reduce=sum, gather_dim=0)",
                 "takes no gather_dim");
  commParseError("all_reduce(axes=[1], reduce=mean)", "expected a reduce kind");
  commParseError("gather(axes=[1])", "expected a pattern");
  commParseError("local_split(axes=[0], shard_dim=0, axes=[1])", "twice");
  commParseError("local_split(axes=[0] shard_dim=0)", "expected ',' or ')'");

  DtensorMesh *mesh = dtensorMeshParse("2x4", NULL);
  int64_t even[2] = {8, 8}, uneven[2] = {10, 8};
  applyCase(mesh, "[S01, R]", "all_gather(axes=[1], gather_dim=0)", 2, even,
            "[S0, R]");
  applyCase(mesh, "[S01, R]", "all_gather(axes=[0], gather_dim=0)", 2, even,
            "minor-most");
  applyCase(mesh, "[S01, R]", "all_gather(axes=[0, 1], gather_dim=0)", 2, even,
            "[R, R]");
  applyCase(mesh, "[S0, S1]", "all_to_all(axes=[1], gather_dim=1, shard_dim=0)",
            2, even, "[S01, R]");
  applyCase(mesh, "[S0, R]", "local_split(axes=[0], shard_dim=1)", 2, even,
            "already shards");
  applyCase(mesh, "[R, R] Psum(1)",
            "reduce_scatter(axes=[1], shard_dim=1, "
            "reduce=sum)",
            2, even, "[R, S1]");
  applyCase(mesh, "[R, R] Psum(1)", "all_reduce(axes=[1], reduce=max)", 2, even,
            "Partial of sum");
  applyCase(mesh, "[R, R]", "all_reduce(axes=[0], reduce=sum)", 2, even,
            "not Partial");
  /* 10 rows: 8 chunks of 2 do not nest in 2 chunks of 5. */
  applyCase(mesh, "[S01, R]", "all_gather(axes=[1], gather_dim=0)", 2, uneven,
            "do not nest");
  applyCase(mesh, "[S01, R]", "all_gather(axes=[0, 1], gather_dim=0)", 2,
            uneven, "[R, R]");

  /* Costs: the cheaper of a ring and recursive doubling on the declared
   * links. */
  dtensorMeshSetLink(mesh, 1, (DtensorLink){2.0, 50.0}, NULL);
  DtensorPlanOptions o;
  dtensorPlanOptionsInit(&o);
  DtensorLayout l = layoutOf(mesh, "[R, S1]", 2, even);
  DtensorCommSpec ag = {DTENSOR_COMM_ALL_GATHER, 1, {1}, 1, -1,
                        DTENSOR_REDUCE_NONE};
  DtensorCommCost c = dtensorCommSpecGetCost(&ag, &l, &o);
  /* out 8x8 f32 = 256 bytes over 4 devices: recursive doubling's
   * log2 4 = 2 steps of 2 us (a ring's 3) + 3/4 * 256 / 50e3 us. */
  CHECK(fabs(c.forwardUs - (4.0 + 0.75 * 256.0 / 50e3)) < 1e-9);
  CHECK(fabs(c.backwardUs - 64.0 / 200e3) < 1e-12);
  CHECK(c.bytesPerDevice == 256);
  DtensorLayout p = layoutOf(mesh, "[R, R] Psum(0, 1)", 2, even);
  DtensorCommSpec ar = {DTENSOR_COMM_ALL_REDUCE, 2, {0, 1}, -1, -1,
                        DTENSOR_REDUCE_SUM};
  c = dtensorCommSpecGetCost(&ar, &p, &o);
  /* 8 devices with the slowest link (5 us, 50 GB/s): recursive doubling,
   * 3 steps of the whole block, against a ring's 14 latencies. */
  CHECK(fabs(c.forwardUs - (3.0 * 5.0 + 3.0 * 256.0 / 50e3)) < 1e-9);
  CHECK(c.forwardUs < 14.0 * 5.0 + 2.0 * 7.0 / 8.0 * 256.0 / 50e3);
  /* A large block on the same group: the ring's fewer bytes win. */
  DtensorMesh *wide = dtensorMeshParse("2x4", NULL);
  dtensorMeshSetLink(wide, 0, (DtensorLink){5.0, 50.0}, NULL);
  dtensorMeshSetLink(wide, 1, (DtensorLink){2.0, 50.0}, NULL);
  int wideAxes[2] = {0, 1};
  DtensorCommCost big = dtensorCommGetCostOnAxes(
      wide, DTENSOR_COMM_ALL_REDUCE, 2, wideAxes, 1 << 26, 1 << 26, &o);
  CHECK(fabs(big.forwardUs -
             (14.0 * 5.0 + 2.0 * 7.0 / 8.0 * (double)(1 << 26) / 50e3)) < 1e-6);
  dtensorMeshDestroy(wide);
  CHECK(c.backwardUs == 0.0);
  /* The same model for a collective already in a program (dtensor-report),
   * and the point-to-point one: a latency plus the block over the slowest
   * link of the group. */
  int both[2] = {0, 1};
  DtensorCommCost onAxes = dtensorCommGetCostOnAxes(
      mesh, DTENSOR_COMM_ALL_REDUCE, 2, both, 256, 256, &o);
  CHECK(onAxes.forwardUs == c.forwardUs && onAxes.bytesPerDevice == 256);
  CHECK(dtensorCommGetCostOnAxes(mesh, DTENSOR_COMM_IDENTITY, 2, both, 256, 256,
                                 &o)
            .forwardUs == 0.0);
  DtensorCommCost p2p = dtensorPointToPointGetCost(mesh, 2, both, 1000);
  CHECK(fabs(p2p.forwardUs - (5.0 + 1000.0 / 50e3)) < 1e-12);
  CHECK(p2p.bytesPerDevice == 1000 && p2p.backwardUs == 0.0);
  dtensorMeshDestroy(mesh);
}

/* ---- the exhaustive comparison ------------------------------------------- */

typedef struct Graph {
  const DtensorMesh *mesh;
  int rank;
  const int64_t *shape;
  DtensorShardingSpec *specs;
  int numSpecs;
  /* Adjacency: edges of each spec. */
  int *edgeStart; /* numSpecs + 1 */
  int *edgeTo;
  double *edgeCost;
  int numEdges, capEdges;
} Graph;

static int findSpec(const Graph *g, const DtensorShardingSpec *s) {
  for (int i = 0; i < g->numSpecs; ++i)
    if (dtensorShardingSpecEqual(&g->specs[i], s))
      return i;
  return -1;
}

/* Every ordered list of 1..3 distinct mesh axes. */
static int axisLists(int meshRank, int lists[][3], int *lengths) {
  int n = 0;
  for (int a = 0; a < meshRank; ++a) {
    lists[n][0] = a, lengths[n++] = 1;
    for (int b = 0; b < meshRank; ++b) {
      if (b == a)
        continue;
      lists[n][0] = a, lists[n][1] = b, lengths[n++] = 2;
      for (int c = 0; c < meshRank; ++c) {
        if (c == a || c == b)
          continue;
        lists[n][0] = a, lists[n][1] = b, lists[n][2] = c, lengths[n++] = 3;
      }
    }
  }
  return n;
}

static void addEdge(Graph *g, int to, double cost) {
  if (g->numEdges == g->capEdges) {
    g->capEdges = g->capEdges ? 2 * g->capEdges : 1024;
    g->edgeTo = realloc(g->edgeTo, sizeof(int) * (size_t)g->capEdges);
    g->edgeCost = realloc(g->edgeCost, sizeof(double) * (size_t)g->capEdges);
  }
  g->edgeTo[g->numEdges] = to;
  g->edgeCost[g->numEdges++] = cost;
}

static void buildEdges(Graph *g, const DtensorPlanOptions *o) {
  int lists[400][3], lengths[400];
  int numLists = axisLists(dtensorMeshGetRank(g->mesh), lists, lengths);
  g->edgeStart = malloc(sizeof(int) * (size_t)(g->numSpecs + 1));
  for (int i = 0; i < g->numSpecs; ++i) {
    g->edgeStart[i] = g->numEdges;
    DtensorLayout l;
    dtensorLayoutInit(g->mesh, &g->specs[i], g->rank, g->shape, DTENSOR_F32, &l,
                      NULL);
    for (int p = DTENSOR_COMM_ALL_GATHER; p <= DTENSOR_COMM_LOCAL_PARTIAL; ++p)
      for (int li = 0; li < numLists; ++li)
        for (int gd = -1; gd < g->rank; ++gd)
          for (int sd = -1; sd < g->rank; ++sd) {
            DtensorCommSpec c = {
                (DtensorCommPattern)p, lengths[li], {0}, gd, sd,
                DTENSOR_REDUCE_NONE};
            memcpy(c.axes, lists[li], sizeof(int) * 3);
            bool needG =
                p == DTENSOR_COMM_ALL_GATHER || p == DTENSOR_COMM_ALL_TO_ALL;
            bool needS = p != DTENSOR_COMM_ALL_GATHER &&
                         p != DTENSOR_COMM_ALL_REDUCE &&
                         p != DTENSOR_COMM_LOCAL_PARTIAL;
            if ((gd >= 0) != needG || (sd >= 0) != needS)
              continue;
            if (p == DTENSOR_COMM_ALL_REDUCE ||
                p == DTENSOR_COMM_REDUCE_SCATTER ||
                p == DTENSOR_COMM_LOCAL_PARTIAL)
              c.reduce = DTENSOR_REDUCE_SUM;
            /* all_reduce and local_partial groups are sets: one order is
             * enough. */
            if ((p == DTENSOR_COMM_ALL_REDUCE ||
                 p == DTENSOR_COMM_LOCAL_PARTIAL) &&
                lengths[li] > 1 &&
                (lists[li][0] > lists[li][1] ||
                 (lengths[li] > 2 && lists[li][1] > lists[li][2])))
              continue;
            DtensorShardingSpec out;
            if (!dtensorCommSpecApply(&c, &l, &out, NULL))
              continue;
            /* local_partial reaches specs with Partial that the list
             * without Partial leaves out. */
            int to = findSpec(g, &out);
            CHECK(to >= 0 || p == DTENSOR_COMM_LOCAL_PARTIAL);
            if (to >= 0)
              addEdge(g, to, dtensorCommSpecGetCost(&c, &l, o).forwardUs);
          }
  }
  g->edgeStart[g->numSpecs] = g->numEdges;
}

/* Shortest costs from `source` by rounds of relaxation over every edge
 * (Bellman-Ford): after round k, every path of at most k steps counts. */
static void bellmanFord(const Graph *g, int source, const bool *usable,
                        double *dist) {
  for (int i = 0; i < g->numSpecs; ++i)
    dist[i] = INFINITY;
  dist[source] = 0.0;
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < g->numSpecs; ++i) {
      if (dist[i] == INFINITY || !usable[i])
        continue;
      for (int e = g->edgeStart[i]; e < g->edgeStart[i + 1]; ++e) {
        int to = g->edgeTo[e];
        double d = dist[i] + g->edgeCost[e];
        if (usable[to] && d < dist[to] * (1.0 - 1e-12)) {
          dist[to] = d;
          changed = true;
        }
      }
    }
  }
}

typedef struct Tally {
  long pairs, greedyWorse;
  double worstRatio;
} Tally;

/* A spec reachable from `source` keeps the Partial axes it keeps: a state
 * of the search never gains a Partial axis, so only specs whose Partial
 * axes are a subset of the source's are usable. */
static void runConfig(const char *meshText, int rank, const int64_t *shape,
                      bool withPartial, const DtensorCalibration *cal,
                      Tally *tally) {
  DtensorMesh *mesh = dtensorMeshParse(meshText, NULL);
  dtensorMeshSetLink(mesh, 0, (DtensorLink){5.0, 25.0}, NULL);
  if (dtensorMeshGetRank(mesh) > 1)
    dtensorMeshSetLink(mesh, 1, (DtensorLink){1.0, 300.0}, NULL);
  Graph g = {0};
  g.mesh = mesh;
  g.rank = rank;
  g.shape = shape;
  SpecList list = {0};
  specListEnumerate(&list, mesh, rank, shape, withPartial);
  g.specs = list.specs;
  g.numSpecs = list.count;
  DtensorPlanOptions optimal, greedy;
  dtensorPlanOptionsInit(&optimal);
  dtensorPlanOptionsInit(&greedy);
  greedy.strategy = DTENSOR_STRATEGY_GREEDY;
  optimal.calibration = greedy.calibration = cal;
  buildEdges(&g, &optimal);
  double *dist = malloc(sizeof(double) * (size_t)g.numSpecs);
  bool *usable = malloc((size_t)g.numSpecs);
  static DtensorPlan plan, gplan;
  for (int s = 0; s < g.numSpecs; ++s) {
    const DtensorShardingSpec *src = &g.specs[s];
    /* Every state may be passed through: local_partial creates what a
     * collective resolved. */
    for (int t = 0; t < g.numSpecs; ++t)
      usable[t] = true;
    bellmanFord(&g, s, usable, dist);
    DtensorLayout l;
    dtensorLayoutInit(mesh, src, rank, shape, DTENSOR_F32, &l, NULL);
    for (int t = 0; t < g.numSpecs; ++t) {
      const DtensorShardingSpec *dst = &g.specs[t];
      DtensorDiag diag;
      bool ok = dtensorPlanCompute(&l, dst, &optimal, &plan, &diag);
      bool reachable = usable[t] && dist[t] < INFINITY;
      if (ok != reachable) {
        char a[128], b[128];
        dtensorShardingSpecPrint(src, a, sizeof(a));
        dtensorShardingSpecPrint(dst, b, sizeof(b));
        fprintf(stderr, "%s %s -> %s: planner %s, reference %s (%s)\n",
                meshText, a, b, ok ? "plans" : "fails",
                reachable ? "reaches" : "does not", ok ? "" : diag.message);
      }
      CHECK(ok == reachable);
      if (!ok || !reachable)
        continue;
      ++tally->pairs;
      bool costOk = fabs(plan.forwardUs - dist[t]) <= 1e-9 * (1.0 + dist[t]);
      if (!costOk) {
        char a[128], b[128], text[8192];
        dtensorShardingSpecPrint(src, a, sizeof(a));
        dtensorShardingSpecPrint(dst, b, sizeof(b));
        dtensorPlanPrint(&plan, mesh, text, sizeof(text));
        fprintf(stderr, "%s %s -> %s: optimal %.6f us, exhaustive %.6f us\n%s",
                meshText, a, b, plan.forwardUs, dist[t], text);
      }
      CHECK(costOk);
      bool simOk = dtensorPlanSimulate(&l, &plan, dst, &diag);
      if (!simOk)
        fprintf(stderr, "%s: optimal plan fails the simulator: %s\n", meshText,
                diag.message);
      CHECK(simOk);
      bool gok = dtensorPlanCompute(&l, dst, &greedy, &gplan, &diag);
      if (!gok) {
        char a[128], b[128];
        dtensorShardingSpecPrint(src, a, sizeof(a));
        dtensorShardingSpecPrint(dst, b, sizeof(b));
        fprintf(stderr, "%s %s -> %s: greedy: %s\n", meshText, a, b,
                diag.message);
      }
      CHECK(gok);
      if (!gok)
        continue;
      CHECK(dtensorPlanSimulate(&l, &gplan, dst, &diag));
      CHECK(gplan.forwardUs >= plan.forwardUs * (1.0 - 1e-12));
      if (gplan.forwardUs > plan.forwardUs * (1.0 + 1e-9)) {
        ++tally->greedyWorse;
        double r = gplan.forwardUs / plan.forwardUs;
        if (r > tally->worstRatio)
          tally->worstRatio = r;
      }
    }
  }
  free(dist);
  free(usable);
  free(g.specs);
  free(g.edgeStart);
  free(g.edgeTo);
  free(g.edgeCost);
  dtensorMeshDestroy(mesh);
}

static void testExhaustive(void) {
  static const char *meshes[] = {"4", "2x2", "2x4", "2x2x2"};
  /* Per rank: an even shape and an uneven one (sizes that do not divide,
   * and a dim of 1 that leaves most blocks empty). */
  static const int64_t shapes[3][2][3] = {
      {{8}, {10}}, {{8, 16}, {10, 3}}, {{4, 8, 16}, {6, 1, 5}}};
  Tally tally = {0, 0, 1.0};
  for (int m = 0; m < 4; ++m)
    for (int rank = 1; rank <= 3; ++rank)
      for (int u = 0; u < 2; ++u)
        for (int partial = 0; partial < 2; ++partial)
          runConfig(meshes[m], rank, shapes[rank - 1][u], partial, NULL,
                    &tally);
  printf("exhaustive: %ld spec pairs; greedy worse than optimal on %.1f %%, "
         "worst ratio %.2f\n",
         tally.pairs, 100.0 * (double)tally.greedyWorse / (double)tally.pairs,
         tally.worstRatio);
  /* A calibration far from the ring model (cheap all_reduce, dear
   * all_to_all, a whole-mesh group cheaper than its axes): the search's
   * bound must stay admissible, so plans stay optimal. */
  int64_t shape2x2[2] = {2, 2};
  DtensorCalibration *cal = dtensorCalibrationCreate(2, shape2x2);
  int a0[1] = {0}, a1[1] = {1}, both[2] = {0, 1};
  const int *groups[3] = {a0, a1, both};
  int sizes[3] = {1, 1, 2};
  for (int k = 0; k < 3; ++k) {
    double scale = k == 2 ? 0.3 : 1.0;
    dtensorCalibrationSet(cal, DTENSOR_COMM_ALL_REDUCE, sizes[k], groups[k],
                          0.5 * scale, 2.0, NULL);
    dtensorCalibrationSet(cal, DTENSOR_COMM_ALL_TO_ALL, sizes[k], groups[k],
                          400.0 * scale, 0.5, NULL);
    dtensorCalibrationSet(cal, DTENSOR_COMM_ALL_GATHER, sizes[k], groups[k],
                          3.0 * scale, 50.0, NULL);
  }
  Tally calibrated = {0, 0, 1.0};
  for (int rank = 1; rank <= 3; ++rank)
    for (int u = 0; u < 2; ++u)
      runConfig("2x2", rank, shapes[rank - 1][u], true, cal, &calibrated);
  printf("exhaustive, calibrated 2x2: %ld spec pairs\n", calibrated.pairs);
  CHECK(calibrated.pairs > 0);
  dtensorCalibrationDestroy(cal);
}

/* ---- calibration: fit, file, mesh check, costs --------------------------- */

static const char *writeTemp(const char *name, const char *text) {
  static char path[4][256];
  static int next;
  char *p = path[next++ % 4];
  const char *dir = getenv("TMPDIR");
  snprintf(p, 256, "%s/planner-test-%d-%s", dir ? dir : "/tmp", (int)getpid(),
           name);
  FILE *f = fopen(p, "w");
  CHECK(f != NULL);
  if (f) {
    fputs(text, f);
    fclose(f);
  }
  return p;
}

static void readError(const char *text, const char *needle) {
  const char *path = writeTemp("bad.txt", text);
  DtensorDiag diag = {-1, ""};
  DtensorCalibration *cal = dtensorCalibrationRead(path, &diag);
  CHECK(cal == NULL);
  if (cal || !strstr(diag.message, needle))
    fprintf(stderr, "calibration error '%s', want '%s'\n", diag.message,
            needle);
  CHECK(strstr(diag.message, needle) != NULL);
  dtensorCalibrationDestroy(cal);
  remove(path);
}

static void testCalibration(void) {
  /* The fit recovers an exact line, and clamps what does not grow. */
  int64_t bytes[4] = {1000, 10000, 100000, 1000000};
  double us[4], flat[4] = {7, 7, 7, 7}, lat, bw;
  for (int i = 0; i < 4; ++i)
    us[i] = 12.0 + (double)bytes[i] / (4.0 * 1e3);
  CHECK(dtensorCalibrationFit(bytes, us, 4, &lat, &bw));
  CHECK(fabs(lat - 12.0) < 1e-6 && fabs(bw - 4.0) < 1e-6);
  CHECK(dtensorCalibrationFit(bytes, flat, 4, &lat, &bw));
  CHECK(fabs(lat - 7.0) < 1e-9 && bw == 1e6);
  int64_t same[2] = {64, 64};
  CHECK(!dtensorCalibrationFit(same, us, 2, &lat, &bw));
  /* Set, get (axes in any order), refused values. */
  int64_t shape[2] = {2, 4};
  DtensorCalibration *cal = dtensorCalibrationCreate(2, shape);
  int ax10[2] = {1, 0}, ax01[2] = {0, 1}, ax1[1] = {1}, bad[1] = {2};
  DtensorDiag diag;
  CHECK(dtensorCalibrationSet(cal, DTENSOR_COMM_ALL_REDUCE, 2, ax10, 20.0, 3.0,
                              &diag));
  CHECK(dtensorCalibrationSet(cal, DTENSOR_COMM_ALL_GATHER, 1, ax1, 8.0, 6.5,
                              &diag));
  CHECK(
      dtensorCalibrationGet(cal, DTENSOR_COMM_ALL_REDUCE, 2, ax01, &lat, &bw) &&
      lat == 20.0 && bw == 3.0);
  CHECK(
      !dtensorCalibrationGet(cal, DTENSOR_COMM_ALL_REDUCE, 1, ax1, &lat, &bw));
  CHECK(!dtensorCalibrationSet(cal, DTENSOR_COMM_LOCAL_SPLIT, 1, ax1, 1, 1,
                               &diag));
  CHECK(!dtensorCalibrationSet(cal, DTENSOR_COMM_ALL_GATHER, 1, bad, 1, 1,
                               &diag));
  CHECK(!dtensorCalibrationSet(cal, DTENSOR_COMM_ALL_GATHER, 1, ax1, 1, 0,
                               &diag));
  /* The contraction rate: none yet, set, refused values. */
  double overhead, gmacs;
  CHECK(!dtensorCalibrationGetContract(cal, &overhead, &gmacs));
  CHECK(!dtensorCalibrationSetContract(cal, -1.0, 20.0, &diag) &&
        strstr(diag.message, "finite number >= 0"));
  CHECK(!dtensorCalibrationSetContract(cal, 1.0, 0.0, &diag));
  CHECK(!dtensorCalibrationSetContract(cal, 1.0, INFINITY, &diag));
  CHECK(dtensorCalibrationSetContract(cal, 1.5, 22.25, &diag));
  /* Its fit weighs every size alike: an exact line (2 us + 20 G/s) is
   * found from products of 512 to 16M multiply-adds, and a line through
   * the origin where the overhead would be negative. */
  int64_t macs[4] = {512, 65536, 1048576, 16777216};
  double exact[4], noisy[4];
  for (int i = 0; i < 4; ++i) {
    exact[i] = 2.0 + (double)macs[i] / (20.0 * 1e3);
    noisy[i] = (double)macs[i] / (20.0 * 1e3) * (i == 0 ? 0.5 : 1.0);
  }
  CHECK(dtensorCalibrationFitContract(macs, exact, 4, &overhead, &gmacs));
  CHECK(fabs(overhead - 2.0) < 1e-6 && fabs(gmacs - 20.0) < 1e-6);
  CHECK(dtensorCalibrationFitContract(macs, noisy, 4, &overhead, &gmacs));
  CHECK(overhead == 0.0 && gmacs > 20.0 && gmacs < 40.0);
  double zero[2] = {0.0, 1.0};
  CHECK(!dtensorCalibrationFitContract(macs, zero, 2, &overhead, &gmacs));
  /* The file: written, read back the same. */
  const char *path = writeTemp("cal.txt", "");
  CHECK(dtensorCalibrationWrite(cal, path, "a test", &diag));
  DtensorCalibration *back = dtensorCalibrationRead(path, &diag);
  CHECK(back != NULL);
  CHECK(back &&
        dtensorCalibrationGet(back, DTENSOR_COMM_ALL_REDUCE, 2, ax01, &lat,
                              &bw) &&
        lat == 20.0 && bw == 3.0);
  CHECK(
      back &&
      dtensorCalibrationGet(back, DTENSOR_COMM_ALL_GATHER, 1, ax1, &lat, &bw) &&
      lat == 8.0 && bw == 6.5);
  CHECK(back && dtensorCalibrationGetContract(back, &overhead, &gmacs) &&
        overhead == 1.5 && gmacs == 22.25);
  remove(path);
  /* Costs: the measured line where there is one, the ring model elsewhere. */
  DtensorMesh *mesh = dtensorMeshParse("2x4", NULL);
  DtensorMesh *other = dtensorMeshParse("4x2", NULL);
  CHECK(dtensorCalibrationCheckMesh(cal, mesh, &diag));
  CHECK(!dtensorCalibrationCheckMesh(cal, other, &diag) &&
        strstr(diag.message, "shape 2x4, not 4x2"));
  DtensorPlanOptions o;
  dtensorPlanOptionsInit(&o);
  DtensorCommCost ring = dtensorCommGetCostOnAxes(mesh, DTENSOR_COMM_ALL_REDUCE,
                                                  2, ax01, 3000, 3000, &o);
  o.calibration = cal;
  DtensorCommCost c = dtensorCommGetCostOnAxes(mesh, DTENSOR_COMM_ALL_REDUCE, 2,
                                               ax01, 3000, 3000, &o);
  CHECK(fabs(c.forwardUs - (20.0 + 3000.0 / 3e3)) < 1e-9);
  CHECK(c.forwardUs != ring.forwardUs);
  /* all_gather is priced by what it gathers. */
  c = dtensorCommGetCostOnAxes(mesh, DTENSOR_COMM_ALL_GATHER, 1, ax1, 100, 6500,
                               &o);
  CHECK(fabs(c.forwardUs - (8.0 + 1.0)) < 1e-9);
  DtensorCommCost ring2 = dtensorCommGetCostOnAxes(
      mesh, DTENSOR_COMM_ALL_TO_ALL, 1, ax1, 100, 100, NULL);
  c = dtensorCommGetCostOnAxes(mesh, DTENSOR_COMM_ALL_TO_ALL, 1, ax1, 100, 100,
                               &o);
  CHECK(c.forwardUs == ring2.forwardUs);
  /* The plan follows the measurements: a dear all_to_all on a 1-d mesh
   * makes [S0, R] -> [R, S0] an all_gather and a local split. */
  DtensorMesh *m4 = dtensorMeshParse("4", NULL);
  int64_t four[1] = {4}, t2[2] = {16, 32};
  int a0[1] = {0};
  DtensorCalibration *dear = dtensorCalibrationCreate(1, four);
  dtensorCalibrationSet(dear, DTENSOR_COMM_ALL_TO_ALL, 1, a0, 500.0, 10.0,
                        NULL);
  DtensorLayout l = layoutOf(m4, "[S0, R]", 2, t2);
  DtensorShardingSpec t;
  dtensorShardingSpecParse("[R, S0]", m4, &t, NULL);
  static DtensorPlan plan;
  CHECK(dtensorPlanCompute(&l, &t, NULL, &plan, NULL) && plan.numSteps == 1 &&
        plan.steps[0].comm.pattern == DTENSOR_COMM_ALL_TO_ALL);
  DtensorPlanOptions od;
  dtensorPlanOptionsInit(&od);
  od.calibration = dear;
  CHECK(dtensorPlanCompute(&l, &t, &od, &plan, NULL) && plan.numSteps == 2 &&
        plan.steps[0].comm.pattern == DTENSOR_COMM_ALL_GATHER &&
        plan.steps[1].comm.pattern == DTENSOR_COMM_LOCAL_SPLIT);
  CHECK(dtensorPlanSimulate(&l, &plan, &t, NULL));
  /* Files that do not read say where. */
  CHECK(dtensorCalibrationRead("/nonexistent/cal.txt", &diag) == NULL &&
        strstr(diag.message, "cannot read"));
  readError("mesh 2x4\n", ":1: not a dtensor calibration file");
  readError("dtensor-calibration 1\nmesh 2y4\n", ":2: expected 'mesh SHAPE'");
  readError("# c\ndtensor-calibration 1\nmesh 4\nall_gather 0 x 1\n",
            ":4: expected 'COLLECTIVE AXES");
  readError("dtensor-calibration 1\nmesh 4\nall_gatherr 0 1 1\n",
            ":3: unknown collective 'all_gatherr'");
  readError("dtensor-calibration 1\nmesh 4\nall_gather 1 1 1\n",
            ":3: the axes of a calibrated group");
  readError("dtensor-calibration 1\nmesh 4\nall_gather 0 1 -2\n",
            ":3: a latency must be a finite number >= 0");
  /* Non-finite and overflowing numbers are refused where they are, not
   * blamed on the program later. */
  readError("dtensor-calibration 1\nmesh 4\nall_gather 0 inf 2\n",
            ":3: a latency must be a finite number");
  readError("dtensor-calibration 1\nmesh 4\nall_gather 0 1 nan\n",
            ":3: a latency must be a finite number");
  readError("dtensor-calibration 1\nmesh 4\n\nall_gather 0 1e400 2\n",
            ":4: a latency must be a finite number");
  readError("dtensor-calibration 1\nmesh 4\nall_gather 0 -1 2\n",
            ":3: a latency must be a finite number");
  /* A comment of any length is a comment (one over 511 bytes was read as
   * data), and a long line is one line. */
  {
    static char text[4096] = "# ";
    for (int i = 0; i < 300; ++i)
      strcat(text, "xy ");
    strcat(text, "\ndtensor-calibration 1\nmesh 4\nall_gather 0 3 2\n");
    const char *path = writeTemp("long.txt", text);
    DtensorCalibration *ok = dtensorCalibrationRead(path, &diag);
    CHECK(
        ok != NULL &&
        dtensorCalibrationGet(ok, DTENSOR_COMM_ALL_GATHER, 1, a0, &lat, &bw) &&
        lat == 3 && bw == 2);
    dtensorCalibrationDestroy(ok);
    remove(path);
  }
  /* A FIFO or a device would block or never end: refused. */
  CHECK(dtensorCalibrationRead("/dev/zero", &diag) == NULL &&
        strstr(diag.message, "is a device"));
  {
    const char *fifo = writeTemp("fifo.txt", "");
    remove(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(dtensorCalibrationRead(fifo, &diag) == NULL &&
          strstr(diag.message, "is a FIFO"));
    remove(fifo);
  }
  readError("dtensor-calibration 1\n", "no 'dtensor-calibration 1' and");
  dtensorCalibrationDestroy(dear);
  dtensorCalibrationDestroy(back);
  dtensorCalibrationDestroy(cal);
  dtensorMeshDestroy(mesh);
  dtensorMeshDestroy(other);
  dtensorMeshDestroy(m4);
}

/* ---- reduce kinds, impossible conversions, the simulator can fail -------- */

static void planCase(const char *meshText, const char *from, const char *to,
                     int rank, const int64_t *shape, const char *error) {
  DtensorMesh *mesh = dtensorMeshParse(meshText, NULL);
  DtensorLayout l = layoutOf(mesh, from, rank, shape);
  DtensorShardingSpec t;
  DtensorDiag diag = {-1, ""};
  CHECK(dtensorShardingSpecParse(to, mesh, &t, &diag));
  static DtensorPlan plan;
  bool ok = dtensorPlanCompute(&l, &t, NULL, &plan, &diag);
  if (error) {
    CHECK(!ok);
    if (ok || !strstr(diag.message, error))
      fprintf(stderr, "%s -> %s: '%s', want '%s'\n", from, to,
              ok ? "a plan" : diag.message, error);
    CHECK(!ok && strstr(diag.message, error));
  } else {
    if (!ok)
      fprintf(stderr, "%s -> %s: %s\n", from, to, diag.message);
    CHECK(ok);
    bool sim = ok && dtensorPlanSimulate(&l, &plan, &t, &diag);
    if (ok && !sim)
      fprintf(stderr, "%s -> %s: simulator: %s\n", from, to, diag.message);
    CHECK(sim);
  }
  dtensorMeshDestroy(mesh);
}

static void testKindsAndErrors(void) {
  int64_t s2[2] = {12, 10};
  const char *kinds[] = {"sum", "max", "min", "avg", "prod"};
  for (int k = 0; k < 5; ++k) {
    char from[64], keep[64];
    snprintf(from, sizeof(from), "[S0, R] P%s(1, 2)", kinds[k]);
    snprintf(keep, sizeof(keep), "[R, S0] P%s(2)", kinds[k]);
    planCase("2x3x2", from, "[S1, S02]", 2, s2, NULL);
    planCase("2x3x2", from, "[R, R]", 2, s2, NULL);
    planCase("2x3x2", from, keep, 2, s2, NULL);
  }
  /* Partial made locally (local_partial), after a gather where the axis
   * shards; the simulator compares what the Partial reduces to. */
  planCase("2x4", "[S0, R]", "[S0, R] Psum(1)", 2, s2, NULL);
  planCase("2x4", "[S1, R]", "[R, R] Pmax(1)", 2, s2, NULL);
  planCase("2x4", "[R, R] Psum(0)", "[R, R] Pprod(1)", 2, s2, NULL);
  planCase("2x4", "[R, R]", "[R, R] Pavg(0) Psum(1)", 2, s2, NULL);
  planCase("2x4", "[S0, R] Psum(1)", "[S0, R] Pmax(1)", 2, s2,
           "do not convert");
  planCase("2x4", "[R, R] Psum(0) Pmax(1)", "[R, R] Pmax(1)", 2, s2,
           "different reduce kinds on different mesh axes, not all sum or avg");
  /* Sums and averages commute: each axis reduced with its own kind, in
   * any order, checked by the simulator. */
  planCase("2x4", "[R, R] Psum(0) Pavg(1)", "[R, R]", 2, s2, NULL);
  planCase("2x4", "[R, R] Pavg(0) Psum(1)", "[S1, R] Pavg(0)", 2, s2, NULL);
  planCase("2x3x2", "[S0, R] Psum(1) Pavg(2)", "[S01, S2]", 2, s2, NULL);
  planCase("2x4", "[S0, S1]", "[S0, S0]", 2, s2, "shards both");
  /* Interleaved shards: every conversion among these plans (in the view
   * of the interleaved dim cut into its groups, or through a waypoint
   * without interleave) and the simulator agrees. */
  int64_t qkv[2] = {24, 16};
  const char *il[] = {"[S1i3, R]",         "[S0i3, S1]", "[S01i3, R]",
                      "[R, S1i2] Psum(0)", "[R, R]",     "[S1, R]",
                      "[S10i3, R]",        "[R, S0i4]",  "[S1i2, S0]"};
  int n = (int)(sizeof(il) / sizeof(il[0]));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (!strstr(il[j], "Psum"))
        planCase("2x4", il[i], il[j], 2, qkv, NULL);
  planCase("2x4", "[S1i3, R]", "[S1i3, R] Psum(0)", 2, qkv, NULL);
  int64_t odd[2] = {18, 4};
  planCase("2x4", "[S1i3, R]", "[R, R]", 2, odd, "equal chunks only");
  planCase("2x4", "[S0i2, S1i2]", "[R, R]", 2, qkv, "more than one");

  /* A wrong plan is caught: swap the gather dim of a correct one. */
  DtensorMesh *mesh = dtensorMeshParse("2x2", NULL);
  int64_t sq[2] = {4, 4};
  DtensorLayout l = layoutOf(mesh, "[S0, S1]", 2, sq);
  DtensorShardingSpec t;
  dtensorShardingSpecParse("[S1, S0]", mesh, &t, NULL);
  static DtensorPlan plan;
  CHECK(dtensorPlanCompute(&l, &t, NULL, &plan, NULL));
  CHECK(dtensorPlanSimulate(&l, &plan, &t, NULL));
  DtensorPlan wrong = plan;
  /* Replace the first step by an all_to_all in the other direction and
   * claim it yields the same spec. */
  for (int i = 0; i < wrong.numSteps; ++i)
    if (wrong.steps[i].comm.pattern == DTENSOR_COMM_ALL_TO_ALL) {
      int gd = wrong.steps[i].comm.gatherDim;
      wrong.steps[i].comm.gatherDim = wrong.steps[i].comm.shardDim;
      wrong.steps[i].comm.shardDim = gd;
    }
  wrong.numSteps = plan.numSteps > 0 ? plan.numSteps : 0;
  DtensorDiag diag = {-1, ""};
  bool differs = false;
  for (int i = 0; i < plan.numSteps; ++i)
    differs |= plan.steps[i].comm.pattern == DTENSOR_COMM_ALL_TO_ALL;
  if (differs)
    CHECK(!dtensorPlanSimulate(&l, &wrong, &t, &diag));
  /* A plan that stops short does not reach the target. */
  DtensorPlan shortPlan = plan;
  shortPlan.numSteps = plan.numSteps - 1;
  CHECK(!dtensorPlanSimulate(&l, &shortPlan, &t, &diag));
  CHECK(strstr(diag.message, "not at the target") != NULL);
  dtensorMeshDestroy(mesh);
}

/* ---- the cache ----------------------------------------------------------- */

static void testCache(void) {
  DtensorPlanner *p = dtensorPlannerCreate(NULL);
  DtensorMesh *mesh = dtensorMeshParse("2x4", NULL);
  int64_t shape[2] = {64, 32};
  DtensorLayout l = layoutOf(mesh, "[S0, S1]", 2, shape);
  DtensorShardingSpec t;
  dtensorShardingSpecParse("[S1, S0]", mesh, &t, NULL);
  const DtensorPlan *a = dtensorPlannerPlan(p, &l, &t, NULL);
  const DtensorPlan *b = dtensorPlannerPlan(p, &l, &t, NULL);
  CHECK(a && a == b);
  int64_t hits, misses;
  dtensorPlannerGetStats(p, &hits, &misses);
  CHECK(hits == 1 && misses == 1);
  static DtensorPlan direct;
  CHECK(dtensorPlanCompute(&l, &t, NULL, &direct, NULL));
  CHECK(a && a->numSteps == direct.numSteps &&
        a->forwardUs == direct.forwardUs);
  CHECK(a && dtensorPlanSimulate(&l, a, &t, NULL));
  /* A different link model is a different question. */
  dtensorMeshSetLink(mesh, 0, (DtensorLink){50.0, 1.0}, NULL);
  const DtensorPlan *c = dtensorPlannerPlan(p, &l, &t, NULL);
  dtensorPlannerGetStats(p, &hits, &misses);
  CHECK(c && c != a && misses == 2);
  /* So is another shape or element type. */
  int64_t other[2] = {64, 48};
  DtensorLayout l2 = layoutOf(mesh, "[S0, S1]", 2, other);
  CHECK(dtensorPlannerPlan(p, &l2, &t, NULL) != c);
  l2.elementType = DTENSOR_F64;
  dtensorPlannerPlan(p, &l2, &t, NULL);
  dtensorPlannerGetStats(p, &hits, &misses);
  CHECK(misses == 4);
  /* Many entries: the table grows and every plan stays findable. */
  DtensorShardingSpec specs[4];
  const char *texts[4] = {"[S0, R]", "[R, S1]", "[S10, R]", "[R, R]"};
  for (int i = 0; i < 4; ++i)
    dtensorShardingSpecParse(texts[i], mesh, &specs[i], NULL);
  for (int64_t n = 1; n <= 40; ++n) {
    int64_t sh[2] = {8 * n, 16};
    DtensorLayout ln = layoutOf(mesh, "[S0, S1]", 2, sh);
    for (int i = 0; i < 4; ++i)
      CHECK(dtensorPlannerPlan(p, &ln, &specs[i], NULL) != NULL);
  }
  int64_t before;
  dtensorPlannerGetStats(p, &before, &misses);
  int64_t sh[2] = {8, 16};
  DtensorLayout l1 = layoutOf(mesh, "[S0, S1]", 2, sh);
  CHECK(dtensorPlannerPlan(p, &l1, &specs[0], NULL) != NULL);
  dtensorPlannerGetStats(p, &hits, &misses);
  CHECK(hits == before + 1);
  dtensorPlannerDestroy(p);
  dtensorPlannerDestroy(NULL);
  dtensorMeshDestroy(mesh);
}

int main(void) {
  testCommSpecs();
  testKindsAndErrors();
  testCache();
  testExhaustive();
  testCalibration();
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
