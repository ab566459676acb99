/* The LayoutConverter object: options plus a plan cache. The key is a
 * compact byte string of everything that changes the answer (mesh shape and
 * link model, global shape, element type, source and target specs, the
 * options); device ids and axis names do not change a plan and are left
 * out. Stored plans hold only their own steps. */
#include "PlannerInternal.h"

#include "Support/Support.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEY 1024

typedef struct Entry {
  uint64_t hash;
  size_t keyLength;
  unsigned char *key;
  DtensorPlan *plan;
} Entry;

struct DtensorPlanner {
  DtensorPlanOptions options;
  Entry *entries;
  size_t capacity; /* a power of two */
  size_t count;
  int64_t hits, misses;
};

DtensorPlanner *dtensorPlannerCreate(const DtensorPlanOptions *options) {
  DtensorPlanner *p = calloc(1, sizeof(*p));
  if (!p)
    return NULL;
  if (options)
    p->options = *options;
  else
    dtensorPlanOptionsInit(&p->options);
  p->capacity = 64;
  p->entries = calloc(p->capacity, sizeof(Entry));
  if (!p->entries) {
    free(p);
    return NULL;
  }
  return p;
}

void dtensorPlannerDestroy(DtensorPlanner *planner) {
  if (!planner)
    return;
  for (size_t i = 0; i < planner->capacity; ++i) {
    free(planner->entries[i].key);
    free(planner->entries[i].plan);
  }
  free(planner->entries);
  free(planner);
}

void dtensorPlannerGetStats(const DtensorPlanner *planner, int64_t *outHits,
                            int64_t *outMisses) {
  *outHits = planner->hits;
  *outMisses = planner->misses;
}

typedef struct Key {
  unsigned char bytes[MAX_KEY];
  size_t length;
} Key;

static void put(Key *k, const void *data, size_t n) {
  memcpy(k->bytes + k->length, data, n);
  k->length += n;
}

static void putByte(Key *k, int v) { k->bytes[k->length++] = (unsigned char)v; }

static void putSpec(Key *k, const DtensorShardingSpec *s, int meshRank) {
  for (int d = 0; d < s->rank; ++d) {
    putByte(k, s->numAxes[d]);
    for (int i = 0; i < s->numAxes[d]; ++i)
      putByte(k, s->axes[d][i]);
    if (s->numAxes[d] > 0 && s->interleave[d] > 1)
      put(k, &s->interleave[d], sizeof(int64_t));
    else
      putByte(k, 0xff);
  }
  for (int a = 0; a < meshRank; ++a)
    putByte(k, (int)s->partial[a]);
}

static void buildKey(const DtensorPlanner *p, const DtensorLayout *source,
                     const DtensorShardingSpec *target, Key *k) {
  k->length = 0;
  const DtensorMesh *mesh = source->mesh;
  int meshRank = dtensorMeshGetRank(mesh);
  putByte(k, meshRank);
  for (int a = 0; a < meshRank; ++a) {
    int64_t size = dtensorMeshGetAxisSize(mesh, a);
    DtensorLink link = dtensorMeshGetLink(mesh, a);
    put(k, &size, sizeof(size));
    put(k, &link.latencyUs, sizeof(double));
    put(k, &link.bandwidthGBps, sizeof(double));
  }
  putByte(k, source->rank);
  put(k, source->shape, sizeof(int64_t) * (size_t)source->rank);
  putByte(k, (int)source->elementType);
  putSpec(k, &source->spec, meshRank);
  putByte(k, target->rank);
  if (target->rank == source->rank)
    putSpec(k, target, meshRank);
  putByte(k, (int)p->options.strategy);
  putByte(k, (int)p->options.objective);
  put(k, &p->options.copyBandwidthGBps, sizeof(double));
}

static bool grow(DtensorPlanner *p) {
  size_t capacity = p->capacity * 2;
  Entry *entries = calloc(capacity, sizeof(Entry));
  if (!entries)
    return false;
  for (size_t i = 0; i < p->capacity; ++i) {
    Entry *e = &p->entries[i];
    if (!e->plan)
      continue;
    size_t h = (size_t)e->hash & (capacity - 1);
    while (entries[h].plan)
      h = (h + 1) & (capacity - 1);
    entries[h] = *e;
  }
  free(p->entries);
  p->entries = entries;
  p->capacity = capacity;
  return true;
}

const DtensorPlan *dtensorPlannerPlan(DtensorPlanner *planner,
                                      const DtensorLayout *source,
                                      const DtensorShardingSpec *target,
                                      DtensorDiag *outDiag) {
  Key key;
  if (target->rank < 0 || target->rank > DTENSOR_MAX_TENSOR_RANK) {
    dtDiag(outDiag, -1, "target rank %d is out of range", target->rank);
    return NULL;
  }
  buildKey(planner, source, target, &key);
  uint64_t hash = dtHashBytes(key.bytes, key.length);
  size_t h = (size_t)hash & (planner->capacity - 1);
  for (Entry *e; (e = &planner->entries[h])->plan;
       h = (h + 1) & (planner->capacity - 1))
    if (e->hash == hash && e->keyLength == key.length &&
        memcmp(e->key, key.bytes, key.length) == 0) {
      ++planner->hits;
      return e->plan;
    }
  ++planner->misses;
  DtensorPlan *full = malloc(sizeof(DtensorPlan));
  if (!full) {
    dtDiag(outDiag, -1, "out of memory while planning");
    return NULL;
  }
  if (!dtensorPlanCompute(source, target, &planner->options, full, outDiag)) {
    free(full);
    return NULL;
  }
  /* Keep only the steps the plan has. */
  size_t size = offsetof(DtensorPlan, steps) +
                sizeof(DtensorPlanStep) * (size_t)full->numSteps;
  DtensorPlan *plan = realloc(full, size);
  unsigned char *keyCopy = malloc(key.length);
  if (!plan || !keyCopy) {
    free(plan ? plan : full);
    free(keyCopy);
    dtDiag(outDiag, -1, "out of memory while planning");
    return NULL;
  }
  memcpy(keyCopy, key.bytes, key.length);
  planner->entries[h] = (Entry){hash, key.length, keyCopy, plan};
  if (++planner->count * 2 > planner->capacity && !grow(planner)) {
    dtDiag(outDiag, -1, "out of memory while planning");
    return NULL;
  }
  return plan;
}
