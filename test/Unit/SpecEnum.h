/* Enumerates every sharding spec of a tensor on a mesh: each mesh axis
 * replicates, is Partial(sum) (optionally) or shards a dim, with the axes
 * of a dim in every order. Shared by the planner test and benchmark. */
#ifndef DTENSOR_TEST_UNIT_SPECENUM_H
#define DTENSOR_TEST_UNIT_SPECENUM_H

#include "dtensor-c/Layout.h"

#include <stdlib.h>

typedef struct SpecList {
  DtensorShardingSpec *specs;
  int count, capacity;
} SpecList;

static void specListAdd(SpecList *l, const DtensorShardingSpec *s) {
  if (l->count == l->capacity) {
    l->capacity = l->capacity ? 2 * l->capacity : 64;
    l->specs = realloc(l->specs, sizeof(*s) * (size_t)l->capacity);
  }
  l->specs[l->count++] = *s;
}

/* Adds `s` with the axes of dims dim.. in every order (Heap's algorithm). */
static void specListPermute(SpecList *l, DtensorShardingSpec *s, int dim) {
  if (dim == s->rank) {
    specListAdd(l, s);
    return;
  }
  int k = s->numAxes[dim];
  int c[DTENSOR_MAX_MESH_RANK] = {0};
  specListPermute(l, s, dim + 1);
  for (int i = 1; i < k;) {
    if (c[i] < i) {
      int j = i % 2 == 0 ? 0 : c[i];
      int t = s->axes[dim][j];
      s->axes[dim][j] = s->axes[dim][i];
      s->axes[dim][i] = t;
      specListPermute(l, s, dim + 1);
      ++c[i];
      i = 1;
    } else {
      c[i] = 0;
      ++i;
    }
  }
}

/* Every valid spec of a rank-`rank` tensor of `shape` on `mesh`. */
static void specListEnumerate(SpecList *l, const DtensorMesh *mesh, int rank,
                              const int64_t *shape, bool withPartial) {
  int meshRank = dtensorMeshGetRank(mesh);
  int choices = rank + (withPartial ? 2 : 1), total = 1;
  for (int a = 0; a < meshRank; ++a)
    total *= choices;
  for (int code = 0; code < total; ++code) {
    DtensorShardingSpec s;
    dtensorShardingSpecInitReplicated(rank, &s);
    for (int a = 0, c = code; a < meshRank; ++a, c /= choices) {
      int pick = c % choices;
      if (pick == rank + 1)
        s.partial[a] = DTENSOR_REDUCE_SUM;
      else if (pick < rank)
        s.axes[pick][s.numAxes[pick]++] = a;
    }
    if (dtensorShardingSpecCheck(&s, mesh, rank, shape, NULL))
      specListPermute(l, &s, 0);
  }
}

#endif
