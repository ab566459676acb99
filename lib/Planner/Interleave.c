/* Redistributing interleaved shards. A dim of K equal groups whose chunks
 * are split by axes A (S(A)iK) holds, on every device, the block of the
 * tensor viewed with that dim cut into [K, size / K], the groups replicated
 * and the inner dim split by A, when every group cuts into equal chunks
 * (the local block is the same memory, reshaped). So a conversion between
 * specs interleaved on the same dim with the same K is an ordinary plan in
 * that view. Any other goes through a waypoint without interleave: from an
 * interleaved source, the target with the source's interleaved dim (and the
 * target's) replicated, reached in the source's view; to an interleaved
 * target, the source with that dim replicated, reached as it is, then the
 * target's view. Each step records the view it runs in. */
#include "PlannerInternal.h"

#include "Support/Support.h"

#include <stdlib.h>
#include <string.h>

bool dtSpecInterleaved(const DtensorShardingSpec *s, int *outDim,
                       int64_t *outGroups) {
  for (int d = 0; d < s->rank; ++d)
    if (s->numAxes[d] > 0 && s->interleave[d] > 1) {
      *outDim = d;
      *outGroups = s->interleave[d];
      return true;
    }
  return false;
}

void dtSpecExpandView(const DtensorShardingSpec *s, int dim,
                      DtensorShardingSpec *out) {
  DtensorShardingSpec r;
  memset(&r, 0, sizeof(r));
  r.rank = s->rank + 1;
  for (int d = 0, o = 0; d < s->rank; ++d, ++o) {
    if (d == dim)
      ++o; /* the groups: replicated */
    r.numAxes[o] = s->numAxes[d];
    memcpy(r.axes[o], s->axes[d], sizeof(int) * (size_t)s->numAxes[d]);
    r.interleave[o] = d == dim ? 0 : s->interleave[d];
  }
  memcpy(r.partial, s->partial, sizeof(r.partial));
  *out = r;
}

bool dtSpecCollapseView(const DtensorShardingSpec *s, int dim, int64_t groups,
                        DtensorShardingSpec *out) {
  if (s->numAxes[dim] != 0)
    return false;
  DtensorShardingSpec r;
  memset(&r, 0, sizeof(r));
  r.rank = s->rank - 1;
  for (int o = 0, d = 0; o < s->rank; ++o) {
    if (o == dim)
      continue;
    r.numAxes[d] = s->numAxes[o];
    memcpy(r.axes[d], s->axes[o], sizeof(int) * (size_t)s->numAxes[o]);
    r.interleave[d] =
        o == dim + 1 ? (s->numAxes[o] ? groups : 0) : s->interleave[o];
    ++d;
  }
  memcpy(r.partial, s->partial, sizeof(r.partial));
  *out = r;
  return true;
}

bool dtLayoutUnview(const DtensorLayout *base,
                    const DtensorShardingSpec *viewed, int dim, int64_t groups,
                    DtensorLayout *out, DtensorDiag *diag) {
  *out = *base;
  if (!dtSpecCollapseView(viewed, dim, groups, &out->spec))
    return dtDiag(diag, -1,
                  "a plan leaves the view of dim %d with its groups sharded",
                  dim);
  return true;
}

bool dtLayoutView(const DtensorLayout *l, int dim, int64_t groups,
                  DtensorLayout *out, DtensorDiag *diag) {
  if (l->rank + 1 > DTENSOR_MAX_TENSOR_RANK)
    return dtDiag(diag, -1,
                  "viewing interleaved dim %d as [%lld, %lld] needs rank %d, "
                  "more than %d",
                  dim, (long long)groups, (long long)(l->shape[dim] / groups),
                  l->rank + 1, DTENSOR_MAX_TENSOR_RANK);
  DtensorLayout r = *l;
  r.rank = l->rank + 1;
  for (int d = 0, o = 0; d < l->rank; ++d, ++o) {
    if (d == dim) {
      r.shape[o++] = groups;
      r.shape[o] = l->shape[d] / groups;
    } else
      r.shape[o] = l->shape[d];
  }
  dtSpecExpandView(&l->spec, dim, &r.spec);
  *out = r;
  return true;
}

/* Every group of `dim` cuts into equal chunks under `spec`. */
static bool equalChunks(const DtensorLayout *l, const DtensorShardingSpec *spec,
                        int dim, int64_t groups, DtensorDiag *diag) {
  int64_t n = dtSpecNumShards(l->mesh, spec, dim);
  if ((l->shape[dim] / groups) % n == 0)
    return true;
  return dtDiag(diag, -1,
                "dim %d: groups of %lld elements do not cut into %lld equal "
                "chunks; the planner redistributes interleaved shards with "
                "equal chunks only",
                dim, (long long)(l->shape[dim] / groups), (long long)n);
}

/* Appends `part`'s steps to `plan`, in view (dim, groups) when groups > 1
 * (else with the views they have). */
static bool append(DtensorPlan *plan, const DtensorPlan *part, int dim,
                   int64_t groups, DtensorDiag *diag) {
  if (plan->numSteps + part->numSteps > DTENSOR_MAX_PLAN_STEPS)
    return dtDiag(diag, -1, "the plan has %d steps, more than %d",
                  plan->numSteps + part->numSteps, DTENSOR_MAX_PLAN_STEPS);
  for (int i = 0; i < part->numSteps; ++i) {
    DtensorPlanStep *s = &plan->steps[plan->numSteps++];
    *s = part->steps[i];
    if (groups > 1) {
      s->viewDim = dim;
      s->viewGroups = groups;
    }
  }
  plan->forwardUs += part->forwardUs;
  plan->backwardUs += part->backwardUs;
  plan->statesVisited += part->statesVisited;
  return true;
}

/* Plans `from` -> `to` in view (dim, groups) of `base` (`to` in the
 * original space) and appends it. */
static bool inView(const DtensorLayout *from, const DtensorShardingSpec *to,
                   int dim, int64_t groups, const DtensorPlanOptions *options,
                   DtensorPlan *plan, DtensorPlan *part, DtensorDiag *diag) {
  DtensorLayout viewed;
  DtensorShardingSpec target;
  if (!equalChunks(from, &from->spec, dim, groups, diag) ||
      !equalChunks(from, to, dim, groups, diag) ||
      !dtLayoutView(from, dim, groups, &viewed, diag))
    return false;
  dtSpecExpandView(to, dim, &target);
  return dtensorPlanCompute(&viewed, &target, options, part, diag) &&
         append(plan, part, dim, groups, diag);
}

/* `s` with `dim` replicated and not interleaved. */
static void replicateDim(DtensorShardingSpec *s, int dim) {
  s->numAxes[dim] = 0;
  s->interleave[dim] = 0;
}

bool dtPlanInterleaved(const DtensorLayout *source,
                       const DtensorShardingSpec *target,
                       const DtensorPlanOptions *options, DtensorPlan *plan,
                       DtensorDiag *diag) {
  if (!dtensorShardingSpecCheck(target, source->mesh, source->rank,
                                source->shape, diag))
    return false;
  DtensorPlan *part = malloc(sizeof(DtensorPlan));
  if (!part)
    return dtDiag(diag, -1, "out of memory while planning");
  plan->source = source->spec;
  plan->numSteps = 0;
  plan->forwardUs = plan->backwardUs = 0.0;
  plan->statesVisited = 0;
  int sd = -1, td = -1;
  int64_t sg = 0, tg = 0;
  bool si = dtSpecInterleaved(&source->spec, &sd, &sg);
  bool ti = dtSpecInterleaved(target, &td, &tg);
  int more = 0;
  for (int d = 0; d < source->rank; ++d)
    more += (source->spec.numAxes[d] > 0 && source->spec.interleave[d] > 1 &&
             d != sd) ||
            (target->numAxes[d] > 0 && target->interleave[d] > 1 && d != td);
  if (more) {
    free(part);
    return dtDiag(diag, -1,
                  "the source or the target interleaves more than one dim; "
                  "the planner redistributes one");
  }
  bool ok;
  if (si && ti && sd == td && sg == tg) {
    ok = inView(source, target, sd, sg, options, plan, part, diag);
  } else if (si) {
    DtensorShardingSpec waypoint = *target;
    replicateDim(&waypoint, sd);
    if (ti)
      replicateDim(&waypoint, td);
    DtensorLayout there = *source;
    there.spec = waypoint;
    ok = inView(source, &waypoint, sd, sg, options, plan, part, diag) &&
         dtensorPlanCompute(&there, target, options, part, diag) &&
         append(plan, part, 0, 0, diag);
  } else {
    DtensorShardingSpec waypoint = source->spec;
    replicateDim(&waypoint, td);
    DtensorLayout there = *source;
    there.spec = waypoint;
    ok = dtensorPlanCompute(source, &waypoint, options, part, diag) &&
         append(plan, part, 0, 0, diag) &&
         inView(&there, target, td, tg, options, plan, part, diag);
  }
  free(part);
  return ok;
}

bool dtensorPlanStepLayout(const DtensorLayout *source,
                           const DtensorPlanStep *step,
                           DtensorLayout *outLayout, DtensorDiag *outDiag) {
  DtensorLayout l = *source;
  if (step->viewGroups > 1 &&
      !dtLayoutView(source, step->viewDim, step->viewGroups, &l, outDiag))
    return false;
  l.spec = step->after;
  *outLayout = l;
  return true;
}
