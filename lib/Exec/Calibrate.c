/* dtensorCalibrationMeasure: the runtime's collectives timed on every group
 * of mesh axes of this job, and a latency + bandwidth line fitted per
 * (collective, group) on rank 0 (dtensor-run --calibrate). */
#include "dtensor-c/Runner.h"

#include "Support/Support.h"

#include <stdlib.h>
#include <string.h>

/* The sizes measured: bytes per device of the collective's larger side. */
static const int64_t kBytes[] = {1 << 10, 1 << 13, 1 << 16, 1 << 19, 1 << 21};
enum { NUM_SIZES = sizeof(kBytes) / sizeof(kBytes[0]) };

static const DtensorCommPattern kPatterns[] = {
    DTENSOR_COMM_ALL_GATHER, DTENSOR_COMM_ALL_REDUCE,
    DTENSOR_COMM_REDUCE_SCATTER, DTENSOR_COMM_ALL_TO_ALL};
enum { NUM_PATTERNS = sizeof(kPatterns) / sizeof(kPatterns[0]) };

/* One collective moving `bytes` on `comm` of `n` members (f32). */
static DtrtStatus runOnce(DtrtComm *comm, DtensorCommPattern p, int n,
                          int64_t bytes, float *send, float *recv) {
  size_t all = (size_t)bytes / sizeof(float), part = all / (size_t)n;
  switch (p) {
  case DTENSOR_COMM_ALL_GATHER:
    return dtrtAllGather(comm, send, recv, part, DTRT_F32);
  case DTENSOR_COMM_ALL_REDUCE:
    return dtrtAllReduce(comm, send, recv, all, DTRT_F32, DTRT_SUM);
  case DTENSOR_COMM_REDUCE_SCATTER:
    return dtrtReduceScatter(comm, send, recv, part, DTRT_F32, DTRT_SUM);
  default:
    return dtrtAllToAll(comm, send, recv, part, DTRT_F32);
  }
}

enum { BATCHES = 7 };

/* This rank's time of one collective (µs): the median of seven batches
 * after a warm-up, each batch as many runs as fit in about 20 ms (at least
 * 2, at most `repeats`; the count is agreed by the group). The median, not
 * the best: with more ranks than cores the best batch is luck. */
static bool timeOne(DtrtContext *ctx, DtrtComm *comm, DtensorCommPattern p,
                    int n, int64_t bytes, int repeats, float *send, float *recv,
                    double *outUs, DtensorDiag *outDiag) {
  double batches[BATCHES];
  int runs = 1;
  for (int batch = -1; batch < BATCHES; ++batch) {
    if (dtrtBarrier(comm) != DTRT_OK)
      return dtDiag(outDiag, -1, "barrier: %s", dtrtLastError(ctx));
    double t0 = 1e6 * dtMonotonicSeconds();
    for (int k = 0; k < runs; ++k)
      if (runOnce(comm, p, n, bytes, send, recv) != DTRT_OK)
        return dtDiag(outDiag, -1, "%s of %lld bytes: %s",
                      dtensorCommPatternGetName(p), (long long)bytes,
                      dtrtLastError(ctx));
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
      int64_t bytes = kBytes[s] / (4 * n) * (4 * n);
      if (!timeOne(ctx, comm, kPatterns[p], n, bytes, repeats, send, recv,
                   &us[p][s], outDiag))
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

/* Every group of axes with more than one device, measured and (rank 0)
 * fitted. */
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
