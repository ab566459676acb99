/* The dialect's collective table (lib/Dialect/Collectives.c, compiled into
 * this test) against the planner and the runtime ABI: every row is
 * "dtensor.<name>"; a row with a planner pattern is named as
 * dtensorCommPatternGetName names it, and every planner pattern but
 * identity has its row; a row with a runtime kind has the name
 * DTRT_MLIR_COLLECTIVE_LIST gives that kind, and every kind has exactly
 * one row; reducing rows are those whose pattern reduces; and every
 * collective but local_split is one the backends run (DTRT_COLL_LIST). */
#include "Dialect/DialectInternal.h"

#include "dtensor-c/Planner.h"
#include "dtensor-rt/Runtime.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "Check.h"

static const char *kRuntimeNames[] = {
#define DT_NAME(e, name) name,
    DTRT_MLIR_COLLECTIVE_LIST(DT_NAME)
#undef DT_NAME
};

static const char *kBackendNames[] = {
#define DT_NAME(e, name) name,
    DTRT_COLL_LIST(DT_NAME)
#undef DT_NAME
};

/* Whether the runtime's backends run a collective named `op`. */
static bool backendRuns(const char *op) {
  for (size_t k = 0; k < sizeof(kBackendNames) / sizeof(kBackendNames[0]); ++k)
    if (!strcmp(kBackendNames[k], op))
      return true;
  return false;
}

int main(void) {
  int n = 0;
  const DtCollectiveInfo *rows = dtCollectives(&n);
  int numKinds = (int)(sizeof(kRuntimeNames) / sizeof(kRuntimeNames[0]));
  int kindRows[16] = {0}, patternRows[16] = {0};
  CHECK(n >= numKinds);
  for (int i = 0; i < n; ++i) {
    const DtCollectiveInfo *r = &rows[i];
    CHECK(!strncmp(r->name, "dtensor.", 8));
    const char *op = r->name + 8;
    if (r->pattern >= 0) {
      CHECK(!strcmp(dtensorCommPatternGetName((DtensorCommPattern)r->pattern),
                    op));
      CHECK(r->reduces == (r->pattern == DTENSOR_COMM_ALL_REDUCE ||
                           r->pattern == DTENSOR_COMM_REDUCE_SCATTER));
      ++patternRows[r->pattern];
      CHECK(dtCollectiveOfPattern(r->pattern) == r);
    }
    /* Every collective but local_split (a local slice) is a backend's. */
    CHECK(backendRuns(op) == (r->pattern != DTENSOR_COMM_LOCAL_SPLIT));
    if (r->runtimeKind >= 0) {
      CHECK(r->runtimeKind < numKinds);
      if (r->runtimeKind < numKinds)
        CHECK(!strcmp(kRuntimeNames[r->runtimeKind], op));
      ++kindRows[r->runtimeKind];
    }
  }
  for (int k = 0; k < numKinds; ++k)
    CHECK(kindRows[k] == 1);
  for (int p = DTENSOR_COMM_ALL_GATHER; p <= DTENSOR_COMM_REDUCE_SCATTER; ++p)
    CHECK(patternRows[p] == 1);
  CHECK(dtCollectiveOfPattern(DTENSOR_COMM_IDENTITY) == NULL);
  CHECK(DTRT_MLIR_ALL_GATHER == 0 && DTRT_MLIR_BROADCAST == 5);
  printf("collective-table-test: %d rows, %d passed, %d failed\n", n,
         checks - failures, failures);
  return failures != 0;
}
