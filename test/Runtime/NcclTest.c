/* The nccl backend on device buffers, as real processes under dtensor-run
 * --backend nccl (one rank per GPU): every collective on every element
 * type of the runtime's list (f32, f64, f16, bf16, i32, i64), blocking and
 * started, on the world and (with 4 ranks) the groups of a 2x2 mesh; each
 * rank checks its results exactly on the host. Exits 77
 * (skipped) where fewer CUDA devices than ranks are usable, as on machines
 * without a GPU. */
#include "dtensor-rt/Runtime.h"

#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "RankCheck.h"

static double value(int r, size_t k) {
  return (r + 1) * 10.0 + (double)(k % 7);
}

/* Element k of a host buffer of type t, through the runtime's conversions
 * (the values are small integers: exact in every type, f16 and bf16
 * included). */
static void put(void *h, DtrtDtype t, size_t k, double v) {
  dtrtConvert(&v, DTRT_F64, (char *)h + k * dtrtDtypeSize(t), t, 1);
}

static double at(const void *h, DtrtDtype t, size_t k) {
  double v = 0;
  dtrtConvert((const char *)h + k * dtrtDtypeSize(t), t, &v, DTRT_F64, 1);
  return v;
}

static void testComm(DtrtComm *comm, const int *members, const char *label) {
  int n = dtrtCommSize(comm), me = dtrtCommRank(comm);
  /* Every type of the runtime's list (the NCCL mapping of each). */
  DtrtDtype types[] = {
#define DTRT_DTYPE_ITEM(e, name, size) e,
      DTRT_DTYPE_LIST(DTRT_DTYPE_ITEM)
#undef DTRT_DTYPE_ITEM
  };
  size_t count = 1000;
  for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ++ti) {
    DtrtDtype t = types[ti];
    size_t es = dtrtDtypeSize(t), bytes = es * count * (size_t)n;
    char *h = malloc(bytes), *g = malloc(bytes);
    void *send, *recv;
    cudaMalloc(&send, bytes);
    cudaMalloc(&recv, bytes);
    for (size_t k = 0; k < count * (size_t)n; ++k)
      put(h, t, k, value(members[me], k));
    cudaMemcpy(send, h, bytes, cudaMemcpyHostToDevice);
    /* all_reduce (started), then all_gather, reduce_scatter, all_to_all,
     * broadcast, permute (blocking) */
    DtrtCollective op = {.kind = DTRT_COLL_ALL_REDUCE,
                         .send = send,
                         .recv = recv,
                         .count = count,
                         .dtype = t,
                         .reduce = DTRT_SUM};
    DtrtRequest *r = NULL;
    CHECK(dtrtStart(comm, &op, &r) == DTRT_OK, "start all_reduce");
    CHECK(dtrtWait(r) == DTRT_OK, "wait all_reduce");
    cudaMemcpy(g, recv, es * count, cudaMemcpyDeviceToHost);
    for (size_t k = 0; k < count; ++k) {
      double want = 0;
      for (int j = 0; j < n; ++j)
        want += value(members[j], k);
      CHECK(at(g, t, k) == want, "%s all_reduce type %d elem %zu", label, t, k);
    }
    CHECK(dtrtAllGather(comm, send, recv, count, t) == DTRT_OK, "all_gather");
    cudaMemcpy(g, recv, bytes, cudaMemcpyDeviceToHost);
    for (int j = 0; j < n; ++j)
      for (size_t k = 0; k < count; ++k)
        CHECK(at(g, t, (size_t)j * count + k) == value(members[j], k),
              "%s all_gather type %d", label, t);
    CHECK(dtrtReduceScatter(comm, send, recv, count, t, DTRT_MAX) == DTRT_OK,
          "reduce_scatter");
    cudaMemcpy(g, recv, es * count, cudaMemcpyDeviceToHost);
    for (size_t k = 0; k < count; ++k) {
      double want = 0;
      for (int j = 0; j < n; ++j) {
        double v = value(members[j], (size_t)me * count + k);
        want = v > want ? v : want;
      }
      CHECK(at(g, t, k) == want, "%s reduce_scatter type %d", label, t);
    }
    CHECK(dtrtAllToAll(comm, send, recv, count, t) == DTRT_OK, "all_to_all");
    cudaMemcpy(g, recv, bytes, cudaMemcpyDeviceToHost);
    for (int j = 0; j < n; ++j)
      for (size_t k = 0; k < count; ++k)
        CHECK(at(g, t, (size_t)j * count + k) ==
                  value(members[j], (size_t)me * count + k),
              "%s all_to_all type %d", label, t);
    cudaMemcpy(recv, send, es * count, cudaMemcpyDeviceToDevice);
    CHECK(dtrtBroadcast(comm, recv, count, t, n - 1) == DTRT_OK, "broadcast");
    cudaMemcpy(g, recv, es * count, cudaMemcpyDeviceToHost);
    for (size_t k = 0; k < count; ++k)
      CHECK(at(g, t, k) == value(members[n - 1], k), "%s broadcast", label);
    CHECK(dtrtPermute(comm, send, recv, count, t, me + 1 < n ? me + 1 : -1,
                      me - 1) == DTRT_OK,
          "permute");
    cudaMemcpy(g, recv, es * count, cudaMemcpyDeviceToHost);
    for (size_t k = 0; k < count; ++k)
      CHECK(at(g, t, k) == (me ? value(members[me - 1], k) : 0.0), "%s permute",
            label);
    cudaFree(send);
    cudaFree(recv);
    free(h);
    free(g);
  }
  CHECK(dtrtBarrier(comm) == DTRT_OK, "barrier");
}

int main(void) {
  int devices = 0,
      world = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "1");
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < world) {
    printf("skipped: %d usable CUDA devices for %d ranks\n", devices, world);
    return 77;
  }
  DtrtContext *ctx = NULL;
  if (dtrtInit(&ctx) != DTRT_OK) {
    fprintf(stderr, "init: %s\n", dtrtLastError(ctx));
    return 1;
  }
  rank = dtrtRank(ctx);
  CHECK(dtrtUsesDeviceMemory(ctx) && !strcmp(dtrtBackendName(ctx), "nccl"),
        "the nccl backend");
  int all[64];
  for (int i = 0; i < world && i < 64; ++i)
    all[i] = i;
  testComm(dtrtCommWorld(ctx), all, "world");
  if (world == 4) {
    int64_t mesh[2] = {2, 2};
    for (int axis = 0; axis < 2; ++axis) {
      DtrtComm *comm;
      CHECK(dtrtCommForMeshAxes(ctx, 2, mesh, 1, &axis, &comm) == DTRT_OK,
            "group: %s", dtrtLastError(ctx));
      int members[2] = {axis == 0 ? rank % 2 : rank / 2 * 2,
                        axis == 0 ? rank % 2 + 2 : rank / 2 * 2 + 1};
      testComm(comm, members, axis == 0 ? "axis 0" : "axis 1");
    }
  }
  CHECK(dtrtFinalize(ctx) == DTRT_OK, "finalize");
  printf("rank %d of %d: %d passed, %d failed\n", rank, world,
         checks - failures, failures);
  return failures ? 1 : 0;
}
