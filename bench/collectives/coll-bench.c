/* nccl-tests-style collective benchmark (not a test), run under dtensor-run:
 *   dtensor-run -n 2 [--backend mpi] build/bin/coll-bench [--quick]
 * Rank 0 prints, per collective and size: size (bytes), count, type, redop,
 * time (us, median of the repetitions), algbw and busbw (GB/s, as
 * nccl-tests define them) and #wrong (results checked once per size). It
 * also measures this host's copy bandwidth (memcpy of 64 MiB on one core)
 * and prints the memory-traffic limit of each collective at that bandwidth:
 * about 2 n S bytes for an S-byte collective over n ranks ((n + 1) S for
 * reduce_scatter), spread over the host's cores. */
#include "dtensor-rt/Runtime.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double copyBandwidth(void) {
  size_t n = 64u << 20;
  char *a = malloc(n), *b = malloc(n);
  memset(a, 1, n);
  memset(b, 2, n);
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    double t0 = now();
    memcpy(b, a, n);
    double t = now() - t0;
    if (n / t > best)
      best = (double)n / t;
  }
  free(a);
  free(b);
  return best / 1e9; /* GB/s */
}

typedef enum { AR, AG, RS, A2A } Kind;
static const char *kNames[] = {"all_reduce", "all_gather", "reduce_scatter",
                               "all_to_all"};

int main(int argc, char **argv) {
  bool quick = argc > 1 && !strcmp(argv[1], "--quick");
  DtrtContext *ctx;
  if (dtrtInit(&ctx) != DTRT_OK) {
    fprintf(stderr, "init: %s\n", dtrtLastError(ctx));
    return 1;
  }
  int rank = dtrtRank(ctx), n = dtrtWorldSize(ctx);
  DtrtComm *world = dtrtCommWorld(ctx);
  const char *backend = getenv("DTENSOR_BACKEND");
  double copy = 0;
  if (rank == 0) {
    copy = copyBandwidth();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("# backend %s, %d ranks, memcpy %.2f GB/s per core, %ld cores\n",
           backend ? backend : "shm", n, copy, cores);
    printf("# %10s %12s %6s %6s %14s %10s %10s %8s %10s %14s\n", "op", "size",
           "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong",
           "limit busbw");
    copy *= (double)(cores < n ? cores : n);
  }
  size_t maxBytes = quick ? (1u << 20) : (64u << 20);
  for (int k = AR; k <= A2A; ++k)
    for (size_t bytes = 8, step = quick ? 16 : 8; bytes <= maxBytes;
         bytes = bytes < maxBytes && bytes * step > maxBytes ? maxBytes
                                                             : bytes * step) {
      size_t count = bytes / 4; /* f32 elements of the whole buffer */
      if (count < (size_t)n)
        count = (size_t)n;
      count = count / (size_t)n * (size_t)n;
      size_t per = count / (size_t)n;
      float *send = malloc(count * 4), *recv = malloc(count * 4);
      for (size_t i = 0; i < count; ++i)
        send[i] = (float)(rank + 1);
      int reps = bytes <= (1u << 16) ? 200 : bytes <= (4u << 20) ? 20 : 5;
      double *times = malloc(sizeof(double) * (size_t)reps);
      int wrong = 0;
      for (int r = -1; r < reps; ++r) {
        dtrtBarrier(world);
        double t0 = now();
        DtrtStatus s = DTRT_OK;
        if (k == AR)
          s = dtrtAllReduce(world, send, recv, count, DTRT_F32, DTRT_SUM);
        else if (k == AG)
          s = dtrtAllGather(world, send, recv, per, DTRT_F32);
        else if (k == RS)
          s = dtrtReduceScatter(world, send, recv, per, DTRT_F32, DTRT_SUM);
        else
          s = dtrtAllToAll(world, send, recv, per, DTRT_F32);
        double t = now() - t0;
        if (s != DTRT_OK) {
          fprintf(stderr, "rank %d: %s\n", rank, dtrtLastError(ctx));
          return 1;
        }
        if (r < 0) { /* check once */
          float sum = (float)(n * (n + 1) / 2);
          size_t m = k == AR ? count : k == RS ? per : count;
          for (size_t i = 0; i < m; ++i) {
            float want = k == AR || k == RS ? sum : (float)(i / per + 1);
            wrong += recv[i] != want;
          }
        } else {
          times[r] = t;
        }
      }
      qsort(times, (size_t)reps, sizeof(double), compare);
      double t = times[reps / 2];
      /* nccl-tests: algbw = S / t; busbw = algbw * factor. */
      double S = (double)count * 4;
      double factor = k == AR ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
      double algbw = S / t / 1e9, busbw = algbw * factor;
      /* The traffic any algorithm moves through memory, at the copy
       * bandwidth of the cores used, as a bus bandwidth. */
      double traffic = k == RS ? (n + 1) * S : 2.0 * n * S;
      double limitTime = traffic / (copy * 1e9);
      double limitBus = limitTime > 0 ? S / limitTime / 1e9 * factor : 0;
      if (rank == 0)
        printf("  %10s %12zu %6zu %6s %14s %10.2f %10.3f %8.3f %10d %14.3f\n",
               kNames[k], (size_t)S, count, "float",
               k == AR || k == RS ? "sum" : "none", t * 1e6, algbw, busbw,
               wrong, limitBus);
      fflush(stdout);
      free(send);
      free(recv);
      free(times);
    }
  dtrtFinalize(ctx);
  return 0;
}
