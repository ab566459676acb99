/* The executable check of a plan: every device's padded block in memory,
 * each CommSpec applied to all of them as the collective would, then a
 * comparison with the target distribution; and the same steps on real
 * blocks (dtensorPlanExecute, the Python DTensor's one-process
 * redistribute).
 *
 * Element values are the global linear index + 1. A Partial value is held
 * as distinct per-device contributions whose reduction is the value, built
 * one mesh axis at a time so that reducing any subset of the axes gives the
 * contributions of the remaining ones (sum: weights 1/2, 1/4, ... summing
 * to 1, exact in binary; max/min: offsets that are 0 at one position;
 * prod: the value at position 0 and 1 elsewhere). Padding holds NaN and is
 * never compared. */
#include "PlannerInternal.h"

#include "Support/Support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Blocks {
  DtensorLayout layout;
  int64_t padded[DTENSOR_MAX_TENSOR_RANK];
  int64_t elems; /* per device */
  int64_t numDevices;
  double *data; /* numDevices * elems */
} Blocks;

static double weight(int64_t p, int64_t n) {
  return ldexp(1.0, p < n - 1 ? -(int)(p + 1) : -(int)(n - 1));
}

static double contribution(double v, const DtensorLayout *l,
                           const int64_t *coords) {
  for (int a = 0; a < dtensorMeshGetRank(l->mesh); ++a) {
    int64_t n = dtensorMeshGetAxisSize(l->mesh, a), p = coords[a];
    switch (l->spec.partial[a]) {
    case DTENSOR_REDUCE_SUM:
      v *= weight(p, n);
      break;
    case DTENSOR_REDUCE_AVG:
      v *= (double)n * weight(p, n);
      break;
    case DTENSOR_REDUCE_MAX:
      v -= (double)((p + 1) % n);
      break;
    case DTENSOR_REDUCE_MIN:
      v += (double)((p + 1) % n);
      break;
    case DTENSOR_REDUCE_PROD:
      v = p == 0 ? v : 1.0;
      break;
    default:
      break;
    }
  }
  return v;
}

static bool blocksInit(Blocks *b, const DtensorLayout *layout) {
  b->layout = *layout;
  b->numDevices = dtensorMeshGetNumDevices(layout->mesh);
  dtensorLayoutGetMaxLocalShape(layout, b->padded);
  b->elems = 1;
  for (int d = 0; d < layout->rank; ++d)
    b->elems *= b->padded[d];
  b->data = malloc(sizeof(double) * (size_t)(b->elems * b->numDevices));
  return b->data != NULL;
}

typedef struct Fill {
  const DtensorLayout *layout;
  const int64_t *coords;
  double *block;
} Fill;

/* An element of the test array: its global linear index + 1, as the
 * device's contribution when the layout is Partial; NaN in padding. */
static void fillElement(void *user, int64_t e, int64_t g) {
  Fill *f = user;
  f->block[e] =
      g < 0 ? NAN : contribution((double)(g + 1), f->layout, f->coords);
}

/* Fills every device's block with the distribution of the test array. */
static void distribute(Blocks *b) {
  int64_t coords[DTENSOR_MAX_MESH_RANK];
  for (int64_t dev = 0; dev < b->numDevices; ++dev) {
    dtensorMeshGetCoords(b->layout.mesh, dev, coords);
    Fill f = {&b->layout, coords, b->data + dev * b->elems};
    dtensorLayoutForEachElement(&b->layout, dev, fillElement, &f);
  }
}

/* The position of `dev` in its group over `axes`, and the device at
 * position `j` of that group. */
static int64_t groupPosition(const DtensorMesh *mesh, const DtensorCommSpec *c,
                             const int64_t *coords) {
  int64_t p = 0;
  for (int i = 0; i < c->numAxes; ++i)
    p = p * dtensorMeshGetAxisSize(mesh, c->axes[i]) + coords[c->axes[i]];
  return p;
}

static int64_t groupMember(const DtensorMesh *mesh, const DtensorCommSpec *c,
                           const int64_t *coords, int64_t j) {
  int64_t m[DTENSOR_MAX_MESH_RANK];
  memcpy(m, coords, sizeof(int64_t) * (size_t)dtensorMeshGetRank(mesh));
  for (int i = c->numAxes - 1; i >= 0; --i) {
    int64_t n = dtensorMeshGetAxisSize(mesh, c->axes[i]);
    m[c->axes[i]] = j % n;
    j /= n;
  }
  return dtensorMeshGetLinearIndex(mesh, m);
}

static double combine(DtensorReduceKind k, double a, double b) {
  switch (k) {
  case DTENSOR_REDUCE_MAX:
    return a > b ? a : b;
  case DTENSOR_REDUCE_MIN:
    return a < b ? a : b;
  case DTENSOR_REDUCE_PROD:
    return a * b;
  default:
    return a + b;
  }
}

/* Computes `out` (already sized for the step's result) from `in`. */
static void applyStep(const DtensorCommSpec *c, const Blocks *in, Blocks *out) {
  const DtensorMesh *mesh = in->layout.mesh;
  int rank = in->layout.rank;
  int64_t g = dtGroupSize(mesh, c->numAxes, c->axes);
  int64_t coords[DTENSOR_MAX_MESH_RANK], idx[DTENSOR_MAX_TENSOR_RANK];
  int64_t src[DTENSOR_MAX_TENSOR_RANK];
  for (int64_t dev = 0; dev < out->numDevices; ++dev) {
    dtensorMeshGetCoords(mesh, dev, coords);
    int64_t pos = groupPosition(mesh, c, coords);
    double *block = out->data + dev * out->elems;
    for (int64_t e = 0; e < out->elems; ++e) {
      dtUnravel(e, rank, out->padded, idx);
      memcpy(src, idx, sizeof(int64_t) * (size_t)rank);
      int64_t from = dev;
      if (c->pattern == DTENSOR_COMM_ALL_GATHER ||
          c->pattern == DTENSOR_COMM_ALL_TO_ALL) {
        int gd = c->gatherDim;
        from = groupMember(mesh, c, coords, idx[gd] / in->padded[gd]);
        src[gd] = idx[gd] % in->padded[gd];
      }
      if (c->pattern == DTENSOR_COMM_LOCAL_SPLIT ||
          c->pattern == DTENSOR_COMM_ALL_TO_ALL ||
          c->pattern == DTENSOR_COMM_REDUCE_SCATTER) {
        int sd = c->shardDim;
        src[sd] = pos * out->padded[sd] + idx[sd];
        if (src[sd] >= in->padded[sd]) {
          block[e] = NAN;
          continue;
        }
      }
      int64_t at = dtRavel(rank, in->padded, src);
      if (c->pattern == DTENSOR_COMM_LOCAL_PARTIAL) {
        /* A sum or product is kept at coordinate 0 of the axes; max, min
         * and avg everywhere. */
        bool keep = pos == 0 || (c->reduce != DTENSOR_REDUCE_SUM &&
                                 c->reduce != DTENSOR_REDUCE_PROD);
        block[e] = keep ? in->data[dev * in->elems + at]
                   : c->reduce == DTENSOR_REDUCE_PROD ? 1.0
                                                      : 0.0;
        continue;
      }
      if (c->pattern == DTENSOR_COMM_ALL_REDUCE ||
          c->pattern == DTENSOR_COMM_REDUCE_SCATTER) {
        double acc = 0.0;
        for (int64_t j = 0; j < g; ++j) {
          double v = in->data[groupMember(mesh, c, coords, j) * in->elems + at];
          acc = j == 0 ? v : combine(c->reduce, acc, v);
        }
        block[e] = c->reduce == DTENSOR_REDUCE_AVG ? acc / (double)g : acc;
      } else {
        block[e] = in->data[from * in->elems + at];
      }
    }
  }
}

/* Replaces `b` by its all_reduce over Partial mesh axis `a`. */
static bool reduceAxis(Blocks *b, int a) {
  DtensorCommSpec ar = {DTENSOR_COMM_ALL_REDUCE,  1, {a}, -1, -1,
                        b->layout.spec.partial[a]};
  DtensorLayout l = b->layout;
  l.spec.partial[a] = DTENSOR_REDUCE_NONE;
  Blocks out;
  if (!blocksInit(&out, &l))
    return false;
  applyStep(&ar, b, &out);
  free(b->data);
  *b = out;
  return true;
}

/* Views `b` (in view (*dim, *groups) of `source`'s space; groups <= 1: as
 * it is) as view (dim, groups) instead: the same blocks, reshaped. */
static bool reView(Blocks *b, const DtensorLayout *source, int *curDim,
                   int64_t *curGroups, int dim, int64_t groups,
                   DtensorDiag *diag) {
  if (*curGroups == groups && (groups <= 1 || *curDim == dim))
    return true;
  DtensorLayout l = *source;
  if (*curGroups <= 1)
    l.spec = b->layout.spec;
  else if (!dtLayoutUnview(source, &b->layout.spec, *curDim, *curGroups, &l,
                           diag))
    return false;
  if (groups > 1 && !dtLayoutView(&l, dim, groups, &l, diag))
    return false;
  int64_t padded[DTENSOR_MAX_TENSOR_RANK], elems = 1;
  dtensorLayoutGetMaxLocalShape(&l, padded);
  for (int d = 0; d < l.rank; ++d)
    elems *= padded[d];
  if (elems != b->elems)
    return dtDiag(diag, -1, "a view changes the size of the blocks");
  b->layout = l;
  memcpy(b->padded, padded, sizeof(padded));
  *curDim = dim;
  *curGroups = groups;
  return true;
}

/* Applies every step of `plan` to `cur` (distributed by `source`), and
 * leaves it in the last step's spec, out of any view. */
static bool execute(Blocks *cur, const DtensorLayout *source,
                    const DtensorPlan *plan, DtensorDiag *outDiag) {
  char text[256];
  int viewDim = 0;
  int64_t viewGroups = 0;
  for (int s = 0; s < plan->numSteps; ++s) {
    const DtensorPlanStep *step = &plan->steps[s];
    DtensorShardingSpec next;
    DtensorDiag why;
    if (!reView(cur, source, &viewDim, &viewGroups, step->viewDim,
                step->viewGroups, &why))
      return dtDiag(outDiag, -1, "step %d: %s", s + 1, why.message);
    if (!dtensorCommSpecApply(&step->comm, &cur->layout, &next, &why))
      return dtDiag(outDiag, -1, "step %d is not valid: %s", s + 1,
                    why.message);
    if (!dtensorShardingSpecEqual(&next, &step->after)) {
      dtensorShardingSpecPrint(&next, text, sizeof(text));
      return dtDiag(outDiag, -1,
                    "step %d produces %s, not the spec the plan "
                    "records",
                    s + 1, text);
    }
    DtensorLayout nextLayout = cur->layout;
    nextLayout.spec = next;
    Blocks out;
    if (!blocksInit(&out, &nextLayout))
      return dtDiag(outDiag, -1, "out of memory in the simulator");
    applyStep(&step->comm, cur, &out);
    free(cur->data);
    *cur = out;
  }
  DtensorDiag why;
  if (!reView(cur, source, &viewDim, &viewGroups, 0, 0, &why))
    return dtDiag(outDiag, -1, "after the last step: %s", why.message);
  return true;
}

bool dtensorPlanExecute(const DtensorLayout *source, const DtensorPlan *plan,
                        const double *in, double *out, DtensorDiag *outDiag) {
  Blocks cur;
  if (!blocksInit(&cur, source))
    return dtDiag(outDiag, -1, "out of memory in the simulator");
  memcpy(cur.data, in, sizeof(double) * (size_t)(cur.elems * cur.numDevices));
  if (!execute(&cur, source, plan, outDiag)) {
    free(cur.data);
    return false;
  }
  memcpy(out, cur.data, sizeof(double) * (size_t)(cur.elems * cur.numDevices));
  free(cur.data);
  return true;
}

bool dtensorPlanSimulate(const DtensorLayout *source, const DtensorPlan *plan,
                         const DtensorShardingSpec *target,
                         DtensorDiag *outDiag) {
  Blocks cur;
  if (!blocksInit(&cur, source))
    return dtDiag(outDiag, -1, "out of memory in the simulator");
  distribute(&cur);
  char text[256];
  if (!execute(&cur, source, plan, outDiag)) {
    free(cur.data);
    return false;
  }
  DtensorLayout want = cur.layout;
  want.spec = *target;
  Blocks expect;
  if (!dtensorShardingSpecEqual(&cur.layout.spec, target)) {
    dtensorShardingSpecPrint(&cur.layout.spec, text, sizeof(text));
    free(cur.data);
    return dtDiag(outDiag, -1, "the plan ends at %s, not at the target", text);
  }
  if (!blocksInit(&expect, &want)) {
    free(cur.data);
    return dtDiag(outDiag, -1, "out of memory in the simulator");
  }
  distribute(&expect);
  /* A Partial the plan created (local_partial) holds other contributions
   * than the canonical ones: compare what both reduce to on the target's
   * Partial axes. */
  bool created = false;
  for (int s = 0; s < plan->numSteps; ++s)
    created |= plan->steps[s].comm.pattern == DTENSOR_COMM_LOCAL_PARTIAL;
  for (int a = 0; a < dtensorMeshGetRank(want.mesh) && created; ++a)
    if (target->partial[a] != DTENSOR_REDUCE_NONE &&
        !(reduceAxis(&cur, a) && reduceAxis(&expect, a))) {
      free(cur.data);
      free(expect.data);
      return dtDiag(outDiag, -1, "out of memory in the simulator");
    }
  bool ok = true;
  int64_t real[DTENSOR_MAX_TENSOR_RANK], idx[DTENSOR_MAX_TENSOR_RANK];
  for (int64_t dev = 0; dev < cur.numDevices && ok; ++dev) {
    dtensorLayoutGetLocalShape(&want, dev, real);
    for (int64_t e = 0; e < cur.elems && ok; ++e) {
      dtUnravel(e, want.rank, cur.padded, idx);
      bool inside = true;
      for (int d = 0; d < want.rank && inside; ++d)
        inside = idx[d] < real[d];
      double got = cur.data[dev * cur.elems + e];
      double exp = expect.data[dev * cur.elems + e];
      if (inside && !(got == exp)) {
        ok = dtDiag(outDiag, -1,
                    "device %lld, local element %lld: got %g, expected %g",
                    (long long)dev, (long long)e, got, exp);
      }
    }
  }
  free(cur.data);
  free(expect.data);
  return ok;
}
