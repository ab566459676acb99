/* dtensorCalibrationMeasure: the runtime's collectives timed on every group
 * of mesh axes of this job, and a latency + bandwidth line fitted per
 * (collective, group) on rank 0; then the runtime's contractions, every rank
 * at once, fitted as overhead + multiply-adds / rate (dtensor-run
 * --calibrate). */
#include "dtensor-c/Runner.h"

#include "Support/Support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sizes measured: bytes per device of the collective's larger side. */
static const int64_t kBytes[] = {1 << 10, 1 << 13, 1 << 16, 1 << 19, 1 << 21};
enum { NUM_SIZES = sizeof(kBytes) / sizeof(kBytes[0]) };

static const DtensorCommPattern kPatterns[] = {
    DTENSOR_COMM_ALL_GATHER, DTENSOR_COMM_ALL_REDUCE,
    DTENSOR_COMM_REDUCE_SCATTER, DTENSOR_COMM_ALL_TO_ALL};
enum { NUM_PATTERNS = sizeof(kPatterns) / sizeof(kPatterns[0]) };

/* The products timed (m, n, k, f32): from a call's overhead to BLAS's
 * rate, spanning the contractions of the programs the model prices. */
static const int64_t kProducts[][3] = {{8, 8, 8},       {16, 64, 64},
                                       {64, 64, 64},    {64, 256, 64},
                                       {128, 256, 128}, {256, 256, 256}};
enum { NUM_PRODUCTS = sizeof(kProducts) / sizeof(kProducts[0]) };

/* One unit of timed work: a collective moving `bytes` on `comm` of
 * `members`, or (m > 0) the product of an m x k and a k x n matrix. */
typedef struct Work {
  DtrtComm *comm;
  DtensorCommPattern pattern;
  int members;
  int64_t bytes, m, n, k;
  float *send, *recv;
} Work;

static DtrtStatus runOnce(const Work *w) {
  if (w->m > 0) {
    dtrtMatmulF32(w->m, w->n, w->k, w->send, w->send + w->m * w->k, w->recv);
    return DTRT_OK;
  }
  size_t all = (size_t)w->bytes / sizeof(float),
         part = all / (size_t)w->members;
  switch (w->pattern) {
  case DTENSOR_COMM_ALL_GATHER:
    return dtrtAllGather(w->comm, w->send, w->recv, part, DTRT_F32);
  case DTENSOR_COMM_ALL_REDUCE:
    return dtrtAllReduce(w->comm, w->send, w->recv, all, DTRT_F32, DTRT_SUM);
  case DTENSOR_COMM_REDUCE_SCATTER:
    return dtrtReduceScatter(w->comm, w->send, w->recv, part, DTRT_F32,
                             DTRT_SUM);
  default:
    return dtrtAllToAll(w->comm, w->send, w->recv, part, DTRT_F32);
  }
}

static void describe(const Work *w, char *out, size_t n) {
  if (w->m > 0)
    snprintf(out, n, "a %lldx%lldx%lld product", (long long)w->m,
             (long long)w->n, (long long)w->k);
  else
    snprintf(out, n, "%s of %lld bytes", dtensorCommPatternGetName(w->pattern),
             (long long)w->bytes);
}

enum { BATCHES = 7 };

/* This rank's time of one unit of `w` (µs), every member of `comm` running
 * it at once: the median of seven batches after a warm-up, each batch as
 * many runs as fit in about 20 ms (at least 2, at most `repeats`; the
 * count is agreed by the group). The median, not the best: with more
 * ranks than cores the best batch is luck. */
static bool timeOne(DtrtContext *ctx, DtrtComm *comm, const Work *w,
                    int repeats, double *outUs, DtensorDiag *outDiag) {
  double batches[BATCHES];
  int runs = 1;
  for (int batch = -1; batch < BATCHES; ++batch) {
    if (dtrtBarrier(comm) != DTRT_OK)
      return dtDiag(outDiag, -1, "barrier: %s", dtrtLastError(ctx));
    double t0 = 1e6 * dtMonotonicSeconds();
    for (int k = 0; k < runs; ++k)
      if (runOnce(w) != DTRT_OK) {
        char what[96];
        describe(w, what, sizeof(what));
        return dtDiag(outDiag, -1, "%s: %s", what, dtrtLastError(ctx));
      }
    double us = (1e6 * dtMonotonicSeconds() - t0) / runs;
    if (batch >= 0) {
      batches[batch] = us;
      continue;
    }
    double r = us > 0 ? 2e4 / us : repeats;
    double agreed = r < 2 ? 2 : r > repeats ? repeats : (int)r;
    if (dtrtAllReduce(comm, &agreed, &agreed, 1, DTRT_F64, DTRT_MIN) != DTRT_OK)
      return dtDiag(outDiag, -1, "all_reduce: %s", dtrtLastError(ctx));
    runs = (int)agreed;
  }
  qsort(batches, BATCHES, sizeof(double), dtCompareDoubles);
  *outUs = batches[BATCHES / 2];
  return true;
}

/* Times every pattern and size on the group of `axes`; fills
 * us[pattern][size] with the slowest rank's time. */
static bool timeGroup(DtrtContext *ctx, int meshRank, const int64_t *shape,
                      int numAxes, const int *axes, int repeats, float *send,
                      float *recv, double us[NUM_PATTERNS][NUM_SIZES],
                      DtensorDiag *outDiag) {
  DtrtComm *comm;
  if (dtrtCommForMeshAxes(ctx, meshRank, shape, numAxes, axes, &comm) !=
      DTRT_OK)
    return dtDiag(outDiag, -1, "communicator: %s", dtrtLastError(ctx));
  int n = dtrtCommSize(comm);
  for (int p = 0; p < NUM_PATTERNS; ++p)
    for (int s = 0; s < NUM_SIZES; ++s) {
      Work w = {.comm = comm,
                .pattern = kPatterns[p],
                .members = n,
                .bytes = kBytes[s] / (4 * n) * (4 * n),
                .send = send,
                .recv = recv};
      if (!timeOne(ctx, comm, &w, repeats, &us[p][s], outDiag))
        return false;
    }
  /* A step is as slow as its slowest rank. */
  if (dtrtAllReduce(dtrtCommWorld(ctx), us, us, NUM_PATTERNS * NUM_SIZES,
                    DTRT_F64, DTRT_MAX) != DTRT_OK)
    return dtDiag(outDiag, -1, "all_reduce: %s", dtrtLastError(ctx));
  return true;
}

static bool fitGroup(DtensorCalibration *cal, int n, int numAxes,
                     const int *axes, double us[NUM_PATTERNS][NUM_SIZES],
                     DtensorDiag *outDiag) {
  int64_t bytes[NUM_SIZES];
  for (int s = 0; s < NUM_SIZES; ++s)
    bytes[s] = kBytes[s] / (4 * n) * (4 * n);
  for (int p = 0; p < NUM_PATTERNS; ++p) {
    double latency, bandwidth;
    if (!dtensorCalibrationFit(bytes, us[p], NUM_SIZES, &latency, &bandwidth) ||
        !dtensorCalibrationSet(cal, kPatterns[p], numAxes, axes, latency,
                               bandwidth, outDiag))
      return dtDiag(outDiag, -1, "no fit for %s",
                    dtensorCommPatternGetName(kPatterns[p]));
  }
  return true;
}

/* The contraction rate with every rank computing at once (as the ranks of
 * a program do, sharing the host's cores): each product's time from the
 * slowest rank, fitted (rank 0) as overhead + multiply-adds / rate. */
static bool measureContract(DtrtContext *ctx, int repeats, float *send,
                            float *recv, DtensorCalibration *cal,
                            DtensorDiag *outDiag) {
  DtrtComm *world = dtrtCommWorld(ctx);
  double us[NUM_PRODUCTS];
  int64_t macs[NUM_PRODUCTS];
  for (int i = 0; i < NUM_PRODUCTS; ++i) {
    const int64_t *p = kProducts[i];
    Work w = {.m = p[0], .n = p[1], .k = p[2], .send = send, .recv = recv};
    macs[i] = p[0] * p[1] * p[2];
    if (!timeOne(ctx, world, &w, repeats, &us[i], outDiag))
      return false;
  }
  if (dtrtAllReduce(world, us, us, NUM_PRODUCTS, DTRT_F64, DTRT_MAX) != DTRT_OK)
    return dtDiag(outDiag, -1, "all_reduce: %s", dtrtLastError(ctx));
  double overhead, gmacs;
  if (cal && (!dtensorCalibrationFitContract(macs, us, NUM_PRODUCTS, &overhead,
                                             &gmacs) ||
              !dtensorCalibrationSetContract(cal, overhead, gmacs, outDiag)))
    return dtDiag(outDiag, -1, "no fit for the contractions");
  return true;
}

/* Every group of axes with more than one device, measured and (rank 0)
 * fitted; then the contractions. */
static bool measureAll(DtrtContext *ctx, const DtensorMesh *mesh, int repeats,
                       DtensorCalibration *cal, DtensorDiag *outDiag) {
  int meshRank = dtensorMeshGetRank(mesh);
  int64_t shape[DTENSOR_MAX_MESH_RANK];
  for (int a = 0; a < meshRank; ++a)
    shape[a] = dtensorMeshGetAxisSize(mesh, a);
  size_t cap = (size_t)kBytes[NUM_SIZES - 1];
  float *send = calloc(cap, 1), *recv = calloc(cap, 1);
  bool ok = send && recv;
  if (!ok)
    dtDiag(outDiag, -1, "out of memory");
  /* Products read A and B from `send` (at most 2 x 256 x 256 floats). */
  for (size_t i = 0; ok && i < cap / sizeof(float); ++i)
    send[i] = (float)(i % 7) * 0.125f;
  for (unsigned m = 1; ok && m < (1u << meshRank); ++m) {
    int axes[DTENSOR_MAX_MESH_RANK], numAxes = 0, n = 1;
    for (int a = 0; a < meshRank; ++a)
      if (m >> a & 1) {
        axes[numAxes++] = a;
        n *= (int)shape[a];
      }
    if (n < 2)
      continue;
    double us[NUM_PATTERNS][NUM_SIZES];
    ok = timeGroup(ctx, meshRank, shape, numAxes, axes, repeats, send, recv, us,
                   outDiag) &&
         (!cal || fitGroup(cal, n, numAxes, axes, us, outDiag));
  }
  ok = ok && measureContract(ctx, repeats, send, recv, cal, outDiag);
  free(send);
  free(recv);
  return ok;
}

bool dtensorCalibrationMeasure(const DtensorMesh *mesh, int repeats,
                               DtensorCalibration **outCal,
                               DtensorDiag *outDiag) {
  *outCal = NULL;
  DtrtContext *ctx = NULL;
  if (dtrtInit(&ctx) != DTRT_OK) {
    dtDiag(outDiag, -1, "runtime: %s", dtrtLastError(ctx));
    dtrtFinalize(ctx);
    return false;
  }
  if (dtrtWorldSize(ctx) != dtensorMeshGetNumDevices(mesh)) {
    dtDiag(outDiag, -1, "the mesh has %lld devices but the job %d ranks",
           (long long)dtensorMeshGetNumDevices(mesh), dtrtWorldSize(ctx));
    dtrtFinalize(ctx);
    return false;
  }
  int meshRank = dtensorMeshGetRank(mesh);
  int64_t shape[DTENSOR_MAX_MESH_RANK];
  for (int a = 0; a < meshRank; ++a)
    shape[a] = dtensorMeshGetAxisSize(mesh, a);
  DtensorCalibration *cal =
      dtrtRank(ctx) == 0 ? dtensorCalibrationCreate(meshRank, shape) : NULL;
  bool ok = (dtrtRank(ctx) != 0 || cal) &&
            measureAll(ctx, mesh, repeats < 2 ? 2 : repeats, cal, outDiag);
  if (dtrtFinalize(ctx) != DTRT_OK && ok)
    ok = dtDiag(outDiag, -1, "runtime finalize failed");
  if (!ok) {
    dtensorCalibrationDestroy(cal);
    return false;
  }
  *outCal = cal;
  return true;
}
