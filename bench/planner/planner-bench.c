/* The planner benchmark (not a test). For every pair of specs (with Partial)
 * of a tensor on meshes 4, 2x2, 2x4, 2x2x2 and 4x4x4, it plans with the
 * optimal search and with the seed's greedy walk, measured in the same run,
 * and prints
 *  - the share of pairs where optimal is cheaper than greedy, and the worst
 *    greedy/optimal cost ratio;
 *  - the median time of an uncached optimal plan (µs) and of a cached
 *    lookup (ns).
 * Targets (issue 3): uncached median <= 20 us on 3-D meshes; cached <= 0.2
 * us. Optimality against an exhaustive search is checked by planner-test. */
#include "dtensor-c/Planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../test/Unit/SpecEnum.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compareDouble(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, long n) {
  qsort(v, (size_t)n, sizeof(double), compareDouble);
  return n ? v[n / 2] : 0.0;
}

int main(int argc, char **argv) {
  /* --quick: a sample of the pairs on each mesh (for smoke runs). */
  long stride = argc > 1 && !strcmp(argv[1], "--quick") ? 97 : 1;
  static const struct {
    const char *mesh;
    int rank;
    int64_t shape[3];
  } cases[] = {
      {"4", 2, {1024, 1024}},       {"2x2", 2, {1024, 1024}},
      {"2x4", 2, {1024, 1024}},     {"2x2x2", 3, {64, 128, 256}},
      {"4x4x4", 3, {64, 128, 256}},
  };
  printf("%-7s %6s %9s %14s %12s %12s %12s\n", "mesh", "specs", "pairs",
         "opt<greedy %", "worst g/o", "uncached us", "cached ns");
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); ++k) {
    DtensorMesh *mesh = dtensorMeshParse(cases[k].mesh, NULL);
    /* Slower links on the outer axis, as between hosts. */
    dtensorMeshSetLink(mesh, 0, (DtensorLink){5.0, 25.0}, NULL);
    SpecList list = {0};
    specListEnumerate(&list, mesh, cases[k].rank, cases[k].shape, true);
    DtensorPlanOptions greedy;
    dtensorPlanOptionsInit(&greedy);
    greedy.strategy = DTENSOR_STRATEGY_GREEDY;
    long pairs = 0, better = 0;
    double worst = 1.0;
    long cap = (long)list.count * list.count / stride + 1;
    double *uncached = malloc(sizeof(double) * (size_t)cap);
    double *cached = malloc(sizeof(double) * (size_t)cap);
    DtensorPlanner *planner = dtensorPlannerCreate(NULL);
    static DtensorPlan opt, gre;
    long index = 0;
    for (int s = 0; s < list.count; ++s) {
      DtensorLayout l;
      dtensorLayoutInit(mesh, &list.specs[s], cases[k].rank, cases[k].shape,
                        DTENSOR_BF16, &l, NULL);
      for (int t = 0; t < list.count; ++t, ++index) {
        if (index % stride)
          continue;
        const DtensorShardingSpec *dst = &list.specs[t];
        double t0 = now();
        bool ok = dtensorPlanCompute(&l, dst, NULL, &opt, NULL);
        double t1 = now();
        if (!ok)
          continue; /* impossible pairs (Partial created) */
        uncached[pairs] = (t1 - t0) * 1e6;
        dtensorPlannerPlan(planner, &l, dst, NULL);
        enum { REPS = 64 };
        double c0 = now();
        for (int r = 0; r < REPS; ++r)
          dtensorPlannerPlan(planner, &l, dst, NULL);
        cached[pairs] = (now() - c0) * 1e9 / REPS;
        ++pairs;
        if (!dtensorPlanCompute(&l, dst, &greedy, &gre, NULL))
          continue;
        if (gre.forwardUs > opt.forwardUs * (1.0 + 1e-9)) {
          ++better;
          if (opt.forwardUs > 0 && gre.forwardUs / opt.forwardUs > worst)
            worst = gre.forwardUs / opt.forwardUs;
        }
      }
    }
    printf("%-7s %6d %9ld %14.1f %12.2f %12.2f %12.1f\n", cases[k].mesh,
           list.count, pairs, 100.0 * (double)better / (double)pairs, worst,
           median(uncached, pairs), median(cached, pairs));
    fflush(stdout);
    dtensorPlannerDestroy(planner);
    free(uncached);
    free(cached);
    free(list.specs);
    dtensorMeshDestroy(mesh);
  }
  return 0;
}
