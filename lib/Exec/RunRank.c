/* One rank of a differential run (dtensorRunnerRunRank): this rank's
 * blocks of the global inputs under the entry's argument layouts, the SPMD
 * program on them, Partial results resolved, every result block compared
 * with the reference, and the timed steps. */
#include "RunnerInternal.h"

#include "Support/Support.h"

#include "dtensor-rt/Checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool layoutOf(const DtensorRunner *r, const DtensorRunTensor *t,
                     DtensorLayout *out) {
  return dtensorLayoutInit(r->mesh, &t->spec, t->rank, t->shape, DTENSOR_F32,
                           out, NULL);
}

/* The elements of `t`'s padded block (every rank's is the largest). */
int64_t dtRunBlockCount(const DtensorRunner *r, const DtensorRunTensor *t) {
  DtensorLayout l;
  layoutOf(r, t, &l);
  int64_t padded[DTENSOR_MAX_TENSOR_RANK];
  dtensorLayoutGetMaxLocalShape(&l, padded);
  return dtRunCount(l.rank, padded);
}

/* Calls `visit(e, g)` for each element `e` of this rank's padded block of
 * `t`, with its global linear index `g` (-1 for padding). */
static void forBlock(const DtensorRunner *r, const DtensorRunTensor *t,
                     int rank, void (*visit)(void *user, int64_t e, int64_t g),
                     void *user) {
  DtensorLayout l;
  layoutOf(r, t, &l);
  dtensorLayoutForEachElement(&l, rank, visit, user);
}

typedef struct Fill {
  void *block;
  const void *global;
  DtrtDtype dtype;
  bool neutral;        /* a pending sum or product this rank does not own */
  double neutralValue; /* 0 for a sum, 1 for a product */
} Fill;

/* Padding holds NaN for floats, a huge value for integers, so a program
 * that let padding into a result differs from the reference. */
static void fillElement(void *user, int64_t e, int64_t g) {
  Fill *f = user;
  if (g >= 0 && !f->neutral) {
    /* The same type on both sides: the bytes. */
    size_t size = dtrtDtypeSize(f->dtype);
    memcpy((char *)f->block + (size_t)e * size,
           (const char *)f->global + (size_t)g * size, size);
    return;
  }
  double padding = dtRunIsFloat(f->dtype) ? NAN : 1e9;
  dtRunStore(f->block, f->dtype, e,
             g < 0        ? padding
             : f->neutral ? f->neutralValue
                          : dtRunLoad(f->global, f->dtype, g));
}

/* The reduce kind of `t`'s pending (Partial) mesh axes, NONE if it has
 * none, sum when sums and averages are mixed (they commute: the value is
 * defined); false for other mixes, which no reduction of the blocks turns
 * into one global value. */
static bool partialKind(const DtensorRunner *r, const DtensorRunTensor *t,
                        DtensorReduceKind *out, DtensorDiag *outDiag) {
  *out = DTENSOR_REDUCE_NONE;
  bool linear = true, mixed = false;
  for (int a = 0; a < dtensorMeshGetRank(r->mesh); ++a) {
    DtensorReduceKind k = t->spec.partial[a];
    if (k == DTENSOR_REDUCE_NONE)
      continue;
    linear &= k == DTENSOR_REDUCE_SUM || k == DTENSOR_REDUCE_AVG;
    mixed |= *out != DTENSOR_REDUCE_NONE && *out != k;
    if (*out == DTENSOR_REDUCE_NONE || k == DTENSOR_REDUCE_SUM)
      *out = k;
  }
  if (mixed && !linear)
    return dtDiag(outDiag, -1,
                  "'%s' is pending reductions of two kinds that do not "
                  "commute (only sum and avg mix)",
                  t->name);
  return true;
}

/* Whether this rank's block of a Partial argument holds the value rather
 * than the neutral element: a sum or product is given whole by the ranks
 * at coordinate 0 of its pending axes, max, min and avg by every rank. */
static bool ownsPartial(const DtensorRunner *r, const DtensorRunTensor *t,
                        int rank) {
  int64_t coords[DTENSOR_MAX_MESH_RANK];
  dtensorMeshGetCoords(r->mesh, rank, coords);
  for (int a = 0; a < dtensorMeshGetRank(r->mesh); ++a) {
    DtensorReduceKind k = t->spec.partial[a];
    if ((k == DTENSOR_REDUCE_SUM || k == DTENSOR_REDUCE_PROD) && coords[a])
      return false;
  }
  return true;
}

bool dtRunFillBlock(const DtensorRunner *r, const DtensorRunTensor *t, int rank,
                    const void *global, int64_t **desc, DtensorDiag *outDiag) {
  DtensorLayout l;
  layoutOf(r, t, &l);
  int64_t padded[DTENSOR_MAX_TENSOR_RANK];
  dtensorLayoutGetMaxLocalShape(&l, padded);
  DtensorReduceKind kind;
  if (!partialKind(r, t, &kind, outDiag))
    return false;
  void *block = *desc ? (void *)(intptr_t)(*desc)[1]
                      : dtRunAlloc(t, dtRunCount(l.rank, padded),
                                   "the block of argument", outDiag);
  if (!block)
    return false;
  Fill f = {block, global, t->dtype, !ownsPartial(r, t, rank),
            kind == DTENSOR_REDUCE_PROD ? 1.0 : 0.0};
  forBlock(r, t, rank, fillElement, &f);
  if (!*desc && !(*desc = dtRunDescriptor(block, l.rank, padded))) {
    free(block);
    return dtDiag(outDiag, -1, "out of memory");
  }
  return true;
}

/* This rank's blocks of the arguments (descriptors of padded blocks). */
static bool makeBlocks(const DtensorRunner *r, int rank, int64_t **descs,
                       DtensorDiag *outDiag) {
  for (int a = 0; a < r->numArgs; ++a)
    if (!dtRunFillBlock(r, &r->args[a], rank, r->globals[a], &descs[a],
                        outDiag))
      return false;
  return true;
}

typedef struct Place {
  void *global;
  const void *block;
  DtrtDtype dtype;
} Place;

static void placeElement(void *user, int64_t e, int64_t g) {
  Place *p = user;
  size_t size = dtrtDtypeSize(p->dtype);
  if (g >= 0)
    memcpy((char *)p->global + (size_t)g * size,
           (const char *)p->block + (size_t)e * size, size);
}

void dtRunPlaceBlock(const DtensorRunner *r, const DtensorRunTensor *t,
                     int rank, const void *block, void *global) {
  Place p = {global, block, t->dtype};
  forBlock(r, t, rank, placeElement, &p);
}

/* A GPU program takes device buffers: each block moves to the device (the
 * host copy is freed; the descriptor points to the device buffer). False,
 * with nothing moved, when out of memory. */
static bool blocksToDevice(const DtensorRunner *r, int64_t **descs,
                           DtensorDiag *outDiag) {
  void **hosts = calloc((size_t)r->numArgs + 1, sizeof(void *));
  if (!hosts)
    return dtDiag(outDiag, -1, "out of memory");
  for (int a = 0; a < r->numArgs; ++a) {
    size_t bytes = (size_t)dtRunBlockCount(r, &r->args[a]) *
                   dtrtDtypeSize(r->args[a].dtype);
    void *host = (void *)(intptr_t)descs[a][0];
    void *device = mgpuMemAlloc(bytes, NULL, false);
    mgpuMemcpy(device, host, bytes, NULL);
    descs[a][0] = descs[a][1] = (int64_t)(intptr_t)device;
    hosts[a] = host;
  }
  /* The copies read the host blocks until they are done. */
  mgpuStreamSynchronize(NULL);
  for (int a = 0; a < r->numArgs; ++a)
    free(hosts[a]);
  free(hosts);
  return true;
}

/* Loads (or saves) the blocks of `tensors` — each an argument descriptor
 * or a result's first element — collectively under their layouts. */
static bool checkpointIo(const DtensorRunner *r, const char *dir,
                         const DtensorRunTensor *tensors, int n, void **data,
                         bool save, DtensorDiag *outDiag) {
  DtrtTensor *ts = calloc((size_t)n + 1, sizeof(DtrtTensor));
  char (*specs)[256] = calloc((size_t)n + 1, sizeof(*specs));
  if (!ts || !specs) {
    free(ts);
    free(specs);
    return dtDiag(outDiag, -1, "out of memory");
  }
  /* Arguments given as a list are positional (arg<i>) in the checkpoint. */
  DtrtCheckpoint *open = NULL;
  char err[512], (*positional)[32] = calloc((size_t)n + 1, 32);
  if (!save && positional &&
      dtrtCheckpointOpen(dir, &open, err, sizeof(err)) != DTRT_OK)
    open = NULL; /* the load below says why */
  for (int i = 0; i < n; ++i) {
    const DtensorRunTensor *t = &tensors[i];
    dtensorShardingSpecPrint(&t->spec, specs[i], sizeof(specs[i]));
    void *block = save ? data[i] : (void *)(intptr_t)((int64_t *)data[i])[1];
    const char *name =
        open ? dtRunArgumentName(open, t, i, positional[i]) : t->name;
    ts[i] = (DtrtTensor){name,        t->dtype, t->rank, t->shape,
                         r->meshText, specs[i], block};
  }
  dtrtCheckpointClose(open);
  DtrtContext *c = dtrtProcessContext();
  DtrtStatus s = save ? dtrtCheckpointSave(c, dir, n, ts)
                      : dtrtCheckpointLoad(c, dir, n, ts);
  free(ts);
  free(specs);
  free(positional);
  if (s != DTRT_OK)
    return dtDiag(outDiag, -1, "rank %d: %s: %s", dtrtRank(c),
                  save ? "save" : "load", dtrtLastError(c));
  return true;
}

bool dtRunResolvePartial(const DtensorRunner *r, const DtensorRunTensor *t,
                         void *block, int rank, DtensorDiag *outDiag) {
  DtensorReduceKind kind;
  if (!partialKind(r, t, &kind, outDiag))
    return false;
  if (kind == DTENSOR_REDUCE_NONE)
    return true;
  DtrtContext *c = dtrtProcessContext();
  int meshRank = dtensorMeshGetRank(r->mesh);
  int64_t shape[DTENSOR_MAX_MESH_RANK];
  for (int a = 0; a < meshRank; ++a)
    shape[a] = dtensorMeshGetAxisSize(r->mesh, a);
  for (int a = 0; a < meshRank; ++a) {
    if (t->spec.partial[a] == DTENSOR_REDUCE_NONE)
      continue;
    DtrtComm *comm;
    /* Axis by axis, each with its own kind. */
    if (dtrtCommForMeshAxes(c, meshRank, shape, 1, &a, &comm) != DTRT_OK ||
        dtrtAllReduce(comm, block, block, (size_t)dtRunBlockCount(r, t),
                      t->dtype,
                      (DtrtReduce)(t->spec.partial[a] - 1)) != DTRT_OK)
      return dtDiag(outDiag, -1, "rank %d: resolving '%s': %s", rank, t->name,
                    dtrtLastError(c));
  }
  return true;
}

typedef struct Compare {
  const void *got, *want;
  DtrtDtype dtype;
  double scale; /* the reference's largest finite magnitude */
  const DtensorTolerance *tolerance; /* NULL: the defaults */
  double maxErr;
  int64_t bad, compared;
} Compare;

static void compareElement(void *user, int64_t e, int64_t g) {
  Compare *c = user;
  if (g < 0)
    return;
  double want = dtRunLoad(c->want, c->dtype, g);
  double got = dtRunLoad(c->got, c->dtype, e);
  ++c->compared;
  /* Non-finite values compare exactly: an inf must not widen the tolerance
   * of the rest, nor a NaN pass as close. */
  if (!isfinite(want) || !isfinite(got)) {
    if (isnan(want) ? !isnan(got) : got != want) {
      c->maxErr = INFINITY;
      ++c->bad;
    }
    return;
  }
  double err = fabs(got - want);
  if (err > c->maxErr)
    c->maxErr = err;
  if (!dtRunIsFloat(c->dtype)) {
    c->bad += err != 0;
    return;
  }
  if (c->tolerance) {
    c->bad += err > c->tolerance->atol + c->tolerance->rtol * fabs(want);
    return;
  }
  /* Within 1e-4 relative, or 1e-5 of the result's scale (sums of many
   * terms near zero keep the rounding of the large ones); f16 and bf16
   * (11 and 8 significant bits, partial sums rounded to them in
   * collectives) within 2e-2 and 1e-2; f8E4M3FN and f8E5M2 (4 and 3
   * significant bits: one rounding of another order is a step of 1/8 or
   * 1/4) within two steps. */
  bool half = c->dtype == DTRT_F16 || c->dtype == DTRT_BF16;
  bool e4 = c->dtype == DTRT_F8E4M3FN, e5 = c->dtype == DTRT_F8E5M2;
  double rtol = e4 ? 0.25 : e5 ? 0.5 : half ? 2e-2 : 1e-4;
  double stol = e4 ? 0.125 : e5 ? 0.25 : half ? 1e-2 : 1e-5;
  c->bad += err > rtol * fabs(want) + stol * (c->scale > 1 ? c->scale : 1);
}

/* Compares every result block with the reference. */
static void compareResults(const DtensorRunner *r, int rank, void **out,
                           const DtensorTolerance *tolerance,
                           DtensorRankReport *report) {
  for (int k = 0; k < r->numResults; ++k) {
    const DtensorRunTensor *t = &r->results[k];
    double scale = 0;
    for (int64_t e = 0; e < dtRunCount(t->rank, t->shape); ++e) {
      double v = fabs(dtRunLoad(r->referenceData[k], t->dtype, e));
      if (isfinite(v) && v > scale)
        scale = v;
    }
    Compare c = {out[k], r->referenceData[k], t->dtype, scale, tolerance, 0, 0,
                 0};
    forBlock(r, t, rank, compareElement, &c);
    if (c.maxErr > report->maxAbsError)
      report->maxAbsError = c.maxErr;
    report->different += c.bad;
    report->compared += c.compared;
  }
}

/* Runs the entry `repeat` more times on the arguments as they were before
 * the checked run (`saved`, restored before each step, untimed), every
 * step after a barrier of all ranks. Results of the timed steps are freed,
 * as a training loop would. */
/* An argument's block as given, kept for the timed steps. */
typedef struct Saved {
  void *data;
  size_t bytes;
} Saved;

static bool timeSteps(const DtensorRunner *r, int rank, int repeat,
                      int64_t **descs, const Saved *saved,
                      DtensorRankReport *report, DtensorDiag *outDiag) {
  double *times = calloc(2 * (size_t)repeat, sizeof(double));
  if (!times)
    return dtDiag(outDiag, -1, "out of memory");
  double *comm = times + repeat;
  DtrtContext *c = dtrtProcessContext();
  bool ok = true;
  for (int s = 0; s < repeat && ok; ++s) {
    for (int a = 0; a < r->numArgs; ++a) {
      void *block = (void *)(intptr_t)descs[a][1];
      if (r->gpu)
        mgpuMemcpy(block, saved[a].data, saved[a].bytes, NULL);
      else
        memcpy(block, saved[a].data, saved[a].bytes);
    }
    if (r->gpu)
      mgpuStreamSynchronize(NULL);
    if (dtrtBarrier(dtrtCommWorld(c)) != DTRT_OK) {
      free(times);
      return dtDiag(outDiag, -1, "rank %d: barrier: %s", rank,
                    dtrtLastError(c));
    }
    double t0 = dtMonotonicSeconds(), c0 = dtrtCompiledCommSeconds();
    dtrtBufferPeakReset();
    ok = dtRunInvoke(r, true, descs, NULL, NULL, outDiag);
    int64_t held = dtrtBufferPeak();
    if (held > report->peakBufferBytes)
      report->peakBufferBytes = held;
    /* The program waited for its streams, not for cuBLAS's last product
     * (on the default stream). */
    if (r->gpu)
      mgpuStreamSynchronize(NULL);
    times[s] = dtMonotonicSeconds() - t0;
    comm[s] = dtrtCompiledCommSeconds() - c0;
  }
  if (ok) {
    qsort(times, (size_t)repeat, sizeof(double), dtCompareDoubles);
    qsort(comm, (size_t)repeat, sizeof(double), dtCompareDoubles);
    report->steps = repeat;
    report->minStepSeconds = times[0];
    report->medianStepSeconds = times[repeat / 2];
    report->medianCommSeconds = comm[repeat / 2];
  }
  free(times);
  return ok;
}

/* Copies of the argument blocks as given, for the timed steps (the program
 * may write its arguments in place). */
static bool saveBlocks(const DtensorRunner *r, int64_t **descs, Saved *saved,
                       DtensorDiag *outDiag) {
  for (int a = 0; a < r->numArgs; ++a) {
    const DtensorRunTensor *t = &r->args[a];
    int64_t count = dtRunBlockCount(r, t);
    saved[a].bytes = (size_t)count * dtrtDtypeSize(t->dtype);
    saved[a].data =
        dtRunAlloc(t, count, "the saved block of argument", outDiag);
    if (!saved[a].data)
      return false;
    memcpy(saved[a].data, (void *)(intptr_t)descs[a][1], saved[a].bytes);
  }
  return true;
}

/* The checked run: the program on this rank's blocks, the results saved,
 * resolved and compared. */
static bool checkedRun(DtensorRunner *r, int rank, const DtensorRankOptions *o,
                       int64_t **descs, void **out, void **outAlloc,
                       DtensorRankReport *report, DtensorDiag *outDiag) {
  if (!dtRunInvoke(r, true, descs, out, outAlloc, outDiag))
    return false;
  if (o->saveDir && !checkpointIo(r, o->saveDir, r->results, r->numResults, out,
                                  true, outDiag))
    return false;
  if (o->unchecked)
    return true;
  /* Partial results: each rank holds a contribution; reduced here, so the
   * check sees the value the layout stands for. */
  for (int k = 0; k < r->numResults; ++k)
    if (!dtRunResolvePartial(r, &r->results[k], out[k], rank, outDiag))
      return false;
  compareResults(r, rank, out, o->tolerance, report);
  return true;
}

bool dtensorRunnerRunRank(DtensorRunner *r, int rank,
                          const DtensorRankOptions *o,
                          DtensorRankReport *outReport, DtensorDiag *outDiag) {
  memset(outReport, 0, sizeof(*outReport));
  if (!o->unchecked && !r->referenceData[0])
    return dtDiag(outDiag, -1,
                  "the reference is not computed "
                  "(dtensorRunnerComputeReference first)");
  size_t n = (size_t)r->numArgs + 1;
  int64_t **descs = calloc(n, sizeof(int64_t *));
  Saved *saved = calloc(n, sizeof(Saved));
  void **out = calloc((size_t)r->numResults, sizeof(void *));
  void **outAlloc = calloc((size_t)r->numResults, sizeof(void *));
  bool ok = descs && saved && out && outAlloc;
  if (!ok)
    dtDiag(outDiag, -1, "out of memory");
  /* A profiled program's events are this rank's from here (the parent's
   * came with the fork). */
  if (o->profile)
    dtrtProfileReset();
  if (ok && o->profile && r->numProfileOps == 0)
    ok = dtDiag(outDiag, -1,
                "a profile needs a program compiled for one "
                "(dtensor-to-llvm{profile=true}; a bundle: dtensor-compile "
                "--bundle --profile)");
  ok = ok && makeBlocks(r, rank, descs, outDiag);
  /* From a checkpoint: each rank reads its blocks (the padding stays as
   * filled). */
  ok = ok && (!o->loadDir || checkpointIo(r, o->loadDir, r->args, r->numArgs,
                                          (void **)descs, false, outDiag));
  ok = ok && (!o->repeat || saveBlocks(r, descs, saved, outDiag));
  bool onDevice = ok && r->gpu && blocksToDevice(r, descs, outDiag);
  ok = ok && (!r->gpu || onDevice);
  ok = ok && checkedRun(r, rank, o, descs, out, outAlloc, outReport, outDiag);
  /* Timed even when this rank's result differs: the other ranks, which
   * cannot know, run the steps and their collectives (a rank that stopped
   * here left them waiting, and the job ended in a collective mismatch
   * instead of this rank's report). */
  if (ok && o->repeat > 0)
    ok = timeSteps(r, rank, o->repeat, descs, saved, outReport, outDiag);
  if (ok && o->profile) {
    char path[4096];
    snprintf(path, sizeof(path), "%s.rank%d", o->profile, rank);
    if (dtrtProfileWrite(path) != DTRT_OK)
      ok = dtDiag(outDiag, -1, "rank %d: cannot write '%s'", rank, path);
  }
  /* The caller owns results (buffer-deallocation-pipeline clones what it
   * returns), so none is an argument's block. */
  for (int k = 0; outAlloc && k < r->numResults; ++k) {
    for (int j = 0; j < k && outAlloc[k]; ++j)
      if (outAlloc[j] == outAlloc[k])
        outAlloc[k] = NULL;
    free(outAlloc[k]);
  }
  for (size_t a = 0; a + 1 < n && descs && saved; ++a) {
    if (descs[a] && onDevice)
      mgpuMemFree((void *)(intptr_t)descs[a][0], NULL);
    else if (descs[a])
      free((void *)(intptr_t)descs[a][0]);
    free(descs[a]);
    free(saved[a].data);
  }
  free(descs);
  free(saved);
  free(out);
  free(outAlloc);
  return ok;
}
