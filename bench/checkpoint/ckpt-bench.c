/* Checkpoint throughput against plain file I/O of the same bytes, measured
 * in the same run (run under dtensor-run -n N; see bench/README.md).
 *
 * One f32 tensor of --mib MiB, [rows, 1024], split by rows over the ranks.
 * Each rank: plain write of its block (write + fsync) and plain read back;
 * then dtrtCheckpointSave, dtrtCheckpointLoad in the same layout, and a
 * load in the transposed layout [R, S0] (every rank reads a strip of every
 * saved shard). Times are the slowest rank's, the median of --reps. After
 * each write the files' pages are dropped from the page cache
 * (POSIX_FADV_DONTNEED after fsync), so reads come from the disk for both;
 * --warm keeps them cached (memory speed, where checksums and the load's
 * scratch copy show). */
#include "dtensor-rt/Checkpoint.h"

#include <fcntl.h>
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

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The slowest rank's time of `fn` (barriers around it). */
typedef struct Bench {
  DtrtContext *ctx;
  const char *dir;
  char plain[4096];
  float *block, *other;
  size_t bytes;
  int64_t shape[2];
  char mesh[16];
  bool warm;
} Bench;

static double timed(Bench *b, int (*fn)(Bench *)) {
  DtrtComm *w = dtrtCommWorld(b->ctx);
  dtrtBarrier(w);
  double t0 = now();
  if (fn(b)) {
    fprintf(stderr, "rank %d: %s\n", dtrtRank(b->ctx), dtrtLastError(b->ctx));
    exit(1);
  }
  double t = now() - t0, slowest;
  dtrtAllReduce(w, &t, &slowest, 1, DTRT_F64, DTRT_MAX);
  return slowest;
}

static int plainWrite(Bench *b) {
  int fd = open(b->plain, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  size_t done = 0;
  while (fd >= 0 && done < b->bytes) {
    ssize_t k = write(fd, (char *)b->block + done, b->bytes - done);
    if (k <= 0)
      break;
    done += (size_t)k;
  }
  int bad = fd < 0 || done != b->bytes || fsync(fd) != 0;
  if (fd >= 0)
    close(fd);
  return bad;
}

/* Drops the pages of `path` (clean after fsync) from the page cache. */
static void dropCached(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd >= 0) {
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

static void dropAll(Bench *b) {
  if (b->warm)
    return;
  dropCached(b->plain);
  char path[4096];
  snprintf(path, sizeof(path), "%s/w.%d.bin", b->dir, dtrtRank(b->ctx));
  dropCached(path);
}

static int plainRead(Bench *b) {
  int fd = open(b->plain, O_RDONLY);
  size_t done = 0;
  while (fd >= 0 && done < b->bytes) {
    ssize_t k =
        pread(fd, (char *)b->other + done, b->bytes - done, (off_t)done);
    if (k <= 0)
      break;
    done += (size_t)k;
  }
  if (fd >= 0)
    close(fd);
  return fd < 0 || done != b->bytes;
}

static int io(Bench *b, const char *spec, float *block, bool save) {
  DtrtTensor t = {"w", DTRT_F32, 2, b->shape, b->mesh, spec, block};
  return save ? dtrtCheckpointSave(b->ctx, b->dir, 1, &t) != DTRT_OK
              : dtrtCheckpointLoad(b->ctx, b->dir, 1, &t) != DTRT_OK;
}

static int save(Bench *b) { return io(b, "[S0, R]", b->block, true); }
static int load(Bench *b) { return io(b, "[S0, R]", b->other, false); }
static int loadT(Bench *b) { return io(b, "[R, S0]", b->other, false); }

int main(int argc, char **argv) {
  int mib = 256, reps = 3;
  const char *dir = "/tmp/dtensor-ckpt-bench";
  bool warm = false;
  for (int i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "--warm"))
      warm = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--mib"))
      mib = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
  }
  Bench b = {0};
  if (dtrtInit(&b.ctx) != DTRT_OK) {
    fprintf(stderr, "init: %s\n", dtrtLastError(b.ctx));
    return 1;
  }
  int rank = dtrtRank(b.ctx), n = dtrtWorldSize(b.ctx);
  b.dir = dir;
  b.warm = warm;
  snprintf(b.mesh, sizeof(b.mesh), "%d", n);
  b.shape[1] = 1024;
  b.shape[0] = (int64_t)mib * 256 / n * n; /* 4 KiB rows, even over n */
  b.bytes = (size_t)(b.shape[0] / n) * 1024 * sizeof(float);
  b.block = malloc(b.bytes);
  b.other = malloc(b.bytes);
  for (size_t i = 0; i < b.bytes / 4; ++i)
    b.block[i] = (float)(i % 1000) + (float)rank;
  snprintf(b.plain, sizeof(b.plain), "%s.plain.%d", dir, rank);
  double times[5][16];
  int (*fns[5])(Bench *) = {plainWrite, save, plainRead, load, loadT};
  for (int r = 0; r < reps && r < 16; ++r)
    for (int k = 0; k < 5; ++k) {
      dropAll(&b);
      times[k][r] = timed(&b, fns[k]);
    }
  if (rank == 0) {
    static const char *names[5] = {"plain write+fsync", "checkpoint save",
                                   "plain read", "load same layout",
                                   "load [R, S0]"};
    double med[5];
    for (int k = 0; k < 5; ++k) {
      qsort(times[k], (size_t)reps, sizeof(double), cmp);
      med[k] = times[k][reps / 2];
    }
    double total = (double)b.bytes * n / 1e9;
    printf("# %d ranks, %.0f MiB f32 [%lld, 1024] split by rows, median of "
           "%d, reads %s\n",
           n, total * 1e9 / 1048576, (long long)b.shape[0], reps,
           warm ? "from the page cache" : "from the disk");
    printf("%-20s %10s %10s %12s\n", "op", "seconds", "GB/s", "vs plain");
    for (int k = 0; k < 5; ++k) {
      double base = k < 2 ? med[0] : med[2];
      printf("%-20s %10.4f %10.3f %12.2f\n", names[k], med[k], total / med[k],
             base / med[k]);
    }
  }
  unlink(b.plain);
  dtrtFinalize(b.ctx);
  return 0;
}
