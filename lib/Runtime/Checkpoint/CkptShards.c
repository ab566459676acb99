/* Moving blocks between memory and shard files: a block is read from
 * every saved shard that overlaps it, each only where it overlaps, in runs
 * as long as both layouts allow; shards are written in chunks and fsync'd,
 * and checked against their CRC-32. */
#define _GNU_SOURCE
#include "CkptInternal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- blocks and shard files ---------------------------------------------- */

/* Writes (`writing`) or reads all `n` bytes at `off`, through short
 * transfers and interruptions. */
static bool ioAll(int fd, void *data, size_t n, int64_t off, bool writing) {
  char *p = data;
  while (n) {
    size_t k = n > (1u << 30) ? (1u << 30) : n;
    ssize_t done =
        writing ? pwrite(fd, p, k, (off_t)off) : pread(fd, p, k, (off_t)off);
    if (done < 0 && errno == EINTR)
      continue;
    if (done <= 0)
      return false;
    p += done;
    n -= (size_t)done;
    off += done;
  }
  return true;
}

static bool preadAll(int fd, void *data, size_t n, int64_t off) {
  return ioAll(fd, data, n, off, false);
}

bool dtCkptWriteShard(const char *dir, const DtensorLayout *l,
                      const void *paddedBlock, CkptShard *shard, char *err,
                      size_t errSize) {
  size_t es = dtensorElementTypeGetSize(l->elementType);
  int64_t real[DTENSOR_MAX_TENSOR_RANK], pad[DTENSOR_MAX_TENSOR_RANK];
  dtensorLayoutGetLocalShape(l, shard->device, real);
  dtensorLayoutGetMaxLocalShape(l, pad);
  /* The real block, packed: rows of the last dim out of the padded block. */
  int64_t rows = 1, row = l->rank ? real[l->rank - 1] : 1;
  for (int d = 0; d + 1 < l->rank; ++d)
    rows *= real[d];
  bool packed = true;
  for (int d = 1; d < l->rank; ++d)
    packed &= real[d] == pad[d];
  char *data = (char *)paddedBlock;
  if (!packed) {
    data = malloc((size_t)shard->bytes + 1);
    if (!data)
      return dtCkptFail(err, errSize, "out of memory");
    for (int64_t r = 0; r < rows; ++r) {
      int64_t idx = r, src = 0, stride = 1;
      /* Row r of the real block in padded coordinates. */
      for (int d = l->rank - 2; d >= 0; --d) {
        src += (idx % real[d]) * stride * pad[l->rank - 1];
        stride *= pad[d];
        idx /= real[d];
      }
      memcpy(data + (size_t)(r * row) * es,
             (const char *)paddedBlock + (size_t)src * es, (size_t)row * es);
    }
  }
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, shard->file);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  /* In chunks: each chunk's write-back starts at once, and its checksum is
   * computed while the disk writes it; fsync waits for the rest. */
  bool ok = fd >= 0;
  uint32_t crc = 0;
  const size_t chunk = 8u << 20;
  for (size_t off = 0; ok && off < (size_t)shard->bytes; off += chunk) {
    size_t n =
        (size_t)shard->bytes - off < chunk ? (size_t)shard->bytes - off : chunk;
    ok = ioAll(fd, data + off, n, (int64_t)off, true);
    if (ok)
      sync_file_range(fd, (off_t)off, (off_t)n, SYNC_FILE_RANGE_WRITE);
    crc = dtCkptCrc(crc, data + off, n);
  }
  shard->crc = crc;
  ok = ok && fsync(fd) == 0;
  int e = errno;
  if (fd >= 0)
    close(fd);
  if (data != paddedBlock)
    free(data);
  return ok ? true
            : dtCkptFail(err, errSize, "writing %s: %s", path, strerror(e));
}

/* A piece of one dim where a saved block and the wanted block overlap. */
typedef struct Segment {
  int64_t src, dst, len; /* local starts in each block, and length */
} Segment;

/* The overlap of a list of saved ranges and a list of wanted ranges. */
static int overlap(int ns, const DtensorRange *s, int nd, const DtensorRange *d,
                   Segment *out) {
  int n = 0;
  int64_t sOff = 0;
  for (int i = 0; i < ns; ++i) {
    int64_t dOff = 0;
    for (int j = 0; j < nd; ++j) {
      int64_t lo = s[i].begin > d[j].begin ? s[i].begin : d[j].begin;
      int64_t hi = s[i].end < d[j].end ? s[i].end : d[j].end;
      if (lo < hi)
        out[n++] =
            (Segment){sOff + lo - s[i].begin, dOff + lo - d[j].begin, hi - lo};
      dOff += d[j].end - d[j].begin;
    }
    sOff += s[i].end - s[i].begin;
  }
  return n;
}

/* Opens a shard file for reading after checking its size; -1 and a
 * message naming it if it is missing, not a regular file or of the wrong
 * size. */
static int openShard(const char *path, int64_t bytes, char *err,
                     size_t errSize) {
  struct stat st;
  int fd = dtCkptOpenRegular(path, &st, err, errSize);
  if (fd < 0)
    return -1;
  if (st.st_size != bytes) {
    dtCkptFail(err, errSize, "%s: %s (%lld bytes, the metadata says %lld)",
               path, st.st_size < bytes ? "truncated" : "too long",
               (long long)st.st_size, (long long)bytes);
  } else {
    return fd;
  }
  if (fd >= 0)
    close(fd);
  return -1;
}

/* Reads the whole shard file through `buf` and compares its checksum. */
static bool checkFile(int fd, const char *path, const CkptShard *sh, char *buf,
                      size_t bufSize, char *err, size_t errSize) {
  posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
  uint32_t crc = 0;
  for (int64_t off = 0; off < sh->bytes;) {
    size_t n = (size_t)(sh->bytes - off) < bufSize ? (size_t)(sh->bytes - off)
                                                   : bufSize;
    if (!preadAll(fd, buf, n, off))
      return dtCkptFail(err, errSize, "%s: read failed: %s", path,
                        strerror(errno));
    crc = dtCkptCrc(crc, buf, n);
    off += (int64_t)n;
  }
  if (crc != sh->crc)
    return dtCkptFail(err, errSize,
                      "%s: corrupted (checksum %08x, the metadata "
                      "says %08x)",
                      path, crc, sh->crc);
  return true;
}

/* Small runs (a strip of every row, say) are read in batches: one preadv
 * per batch, each run straight to its place and the gaps between runs into
 * a sink, instead of a system call each. The disk reads those pages whole
 * anyway. */
#define SMALL_RUN (64u << 10)
#define MAX_GAP (64u << 10)
#define MAX_RUNS 500 /* two iovecs a run, within IOV_MAX */

typedef struct Run {
  int64_t src;
  char *dst;
  size_t len;
} Run;

typedef struct Batch {
  char *sink;
  Run *runs;
  int count;
  uint32_t *crc; /* whole-shard reads: the runs cover the file in order */
} Batch;

static bool flushRuns(Batch *b, int fd) {
  if (!b->count)
    return true;
  struct iovec iov[2 * MAX_RUNS];
  int n = 0;
  size_t total = 0;
  for (int i = 0; i < b->count; ++i) {
    if (i) {
      size_t gap =
          (size_t)(b->runs[i].src - b->runs[i - 1].src) - b->runs[i - 1].len;
      if (gap)
        iov[n++] = (struct iovec){b->sink, gap};
      total += gap;
    }
    iov[n++] = (struct iovec){b->runs[i].dst, b->runs[i].len};
    total += b->runs[i].len;
  }
  int64_t off = b->runs[0].src;
  int first = 0;
  /* preadv may stop short: go on from where it stopped. */
  while (total) {
    ssize_t k = preadv(fd, iov + first, n - first, (off_t)off);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return false;
    total -= (size_t)k;
    off += k;
    for (size_t left = (size_t)k; left;) {
      if (left >= iov[first].iov_len) {
        left -= iov[first].iov_len;
        ++first;
      } else {
        iov[first].iov_base = (char *)iov[first].iov_base + left;
        iov[first].iov_len -= left;
        left = 0;
      }
    }
  }
  for (int i = 0; b->crc && i < b->count; ++i)
    *b->crc = dtCkptCrc(*b->crc, b->runs[i].dst, b->runs[i].len);
  b->count = 0;
  return true;
}

static bool addRun(Batch *b, int fd, int64_t src, char *dst, size_t len,
                   uint32_t *crc) {
  if (!b->sink) {
    b->sink = malloc(MAX_GAP);
    b->runs = malloc(sizeof(Run) * MAX_RUNS);
    if (!b->sink || !b->runs)
      return false;
  }
  b->crc = crc;
  if (b->count) {
    const Run *last = &b->runs[b->count - 1];
    if (b->count == MAX_RUNS || src < last->src + (int64_t)last->len ||
        (size_t)(src - last->src) - last->len > MAX_GAP)
      if (!flushRuns(b, fd))
        return false;
  }
  b->runs[b->count++] = (Run){src, dst, len};
  return true;
}

/* Copies the part of saved block `sh` that overlaps the wanted block (its
 * ranges, padded shape `pad`) into `block`: from its file in `dir`, or
 * from `memory` when that holds the saved block. */
static bool readShardPart(const char *dir, const char *memory,
                          const CkptTensor *t, const CkptShard *sh, int rank,
                          int *numWanted, DtensorRange **wanted,
                          const int64_t *pad, char *block, CkptReadMode mode,
                          int64_t *bytesRead, char *err, size_t errSize) {
  size_t es = dtrtDtypeSize(t->dtype);
  Segment *segs[DTENSOR_MAX_TENSOR_RANK];
  int numSegs[DTENSOR_MAX_TENSOR_RANK];
  int64_t srcShape[DTENSOR_MAX_TENSOR_RANK];
  bool touches = true, whole = true;
  for (int d = 0; d < rank; ++d) {
    segs[d] =
        malloc(sizeof(Segment) * (size_t)(sh->numRanges[d] * numWanted[d] + 1));
    numSegs[d] = overlap(sh->numRanges[d], sh->ranges[d], numWanted[d],
                         wanted[d], segs[d]);
    srcShape[d] = dtCkptRangesLength(sh->numRanges[d], sh->ranges[d]);
    touches &= numSegs[d] > 0;
    whole &= numSegs[d] == 1 && segs[d][0].len == srcShape[d];
  }
  bool ok = true;
  int fd = -1;
  Batch batch = {0};
  if (!touches)
    goto done;
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, sh->file);
  if (!memory && (fd = openShard(path, sh->bytes, err, errSize)) < 0) {
    ok = false;
    goto done;
  }
  if (mode == CKPT_VERIFY) {
    if (whole) {
      char *buf = malloc(4u << 20);
      ok = buf && checkFile(fd, path, sh, buf, 4u << 20, err, errSize);
      free(buf);
    }
    goto done;
  }
  whole &= !memory && mode == CKPT_READ_CHECKED;
  /* Let the kernel read ahead what is needed (from the first element of
   * the overlap to its last) while this rank copies and checks. */
  if (fd >= 0) {
    int64_t lo = 0, hi = 0;
    for (int d = 0; d < rank; ++d) {
      int64_t mn = INT64_MAX, mx = 0;
      for (int k = 0; k < numSegs[d]; ++k) {
        mn = segs[d][k].src < mn ? segs[d][k].src : mn;
        int64_t end = segs[d][k].src + segs[d][k].len - 1;
        mx = end > mx ? end : mx;
      }
      lo = lo * srcShape[d] + mn;
      hi = hi * srcShape[d] + mx;
    }
    posix_fadvise(fd, lo * (int64_t)es, (hi - lo + 1) * (int64_t)es,
                  POSIX_FADV_WILLNEED);
  }
  /* Runs: the trailing dims where one segment spans both blocks whole are
   * contiguous in both; the run goes over dims t.. */
  int tdim = rank - 1;
  while (tdim > 0 && numSegs[tdim] == 1 &&
         segs[tdim][0].len == srcShape[tdim] && segs[tdim][0].len == pad[tdim])
    --tdim;
  int64_t run = 1;
  for (int d = tdim; d < rank; ++d)
    run *= rank ? segs[d][0].len : 1;
  /* Iterate the outer dims 0..tdim-1 over every segment and every index
   * in it, and the segments of dim tdim. */
  int segIdx[DTENSOR_MAX_TENSOR_RANK] = {0};
  int64_t off[DTENSOR_MAX_TENSOR_RANK] = {0};
  uint32_t crc = 0;
  for (;;) {
    /* The run at the current position. */
    int64_t src = 0, dst = 0;
    for (int d = 0; d < rank; ++d) {
      const Segment *g = &segs[d][d <= tdim ? segIdx[d] : 0];
      int64_t i = d < tdim ? off[d] : 0;
      src = src * srcShape[d] + g->src + i;
      dst = dst * pad[d] + g->dst + i;
    }
    int64_t len =
        rank ? (run / segs[tdim][0].len) * segs[tdim][segIdx[tdim]].len : 1;
    char *to = block + (size_t)dst * es;
    if (memory) {
      memcpy(to, memory + (size_t)src * es, (size_t)len * es);
    } else if ((size_t)len * es >= SMALL_RUN) {
      if (!flushRuns(&batch, fd) ||
          !preadAll(fd, to, (size_t)len * es, src * (int64_t)es)) {
        ok = dtCkptFail(err, errSize, "%s: read failed: %s", path,
                        strerror(errno));
        goto done;
      }
      if (whole)
        crc = dtCkptCrc(crc, to, (size_t)len * es);
    } else if (!addRun(&batch, fd, src * (int64_t)es, to, (size_t)len * es,
                       whole ? &crc : NULL)) {
      ok = dtCkptFail(err, errSize, "%s: read failed: %s", path,
                      strerror(errno));
      goto done;
    }
    *bytesRead += len * (int64_t)es;
    /* Next position: dim tdim's segments, then the outer indices. */
    int d = tdim;
    if (rank == 0)
      break;
    for (; d >= 0; --d) {
      if (d == tdim) {
        if (++segIdx[d] < numSegs[d])
          break;
        segIdx[d] = 0;
        continue;
      }
      if (++off[d] < segs[d][segIdx[d]].len)
        break;
      off[d] = 0;
      if (++segIdx[d] < numSegs[d])
        break;
      segIdx[d] = 0;
    }
    if (d < 0)
      break;
  }
  if (!flushRuns(&batch, fd)) {
    ok = dtCkptFail(err, errSize, "%s: read failed: %s", path, strerror(errno));
    goto done;
  }
  if (whole && crc != sh->crc)
    ok = dtCkptFail(err, errSize,
                    "%s: corrupted (checksum %08x, the metadata "
                    "says %08x)",
                    path, crc, sh->crc);
done:
  if (fd >= 0)
    close(fd);
  free(batch.sink);
  free(batch.runs);
  for (int d = 0; d < rank; ++d)
    free(segs[d]);
  return ok;
}

bool dtCkptReadBlock(const char *dir, const CkptTensor *saved,
                     const DtensorLayout *l, int64_t device, void *block,
                     CkptReadMode mode, int64_t *outBytesRead, char *err,
                     size_t errSize) {
  int numWanted[DTENSOR_MAX_TENSOR_RANK];
  DtensorRange *wanted[DTENSOR_MAX_TENSOR_RANK];
  int64_t pad[DTENSOR_MAX_TENSOR_RANK];
  dtCkptDeviceRanges(l, device, numWanted, wanted);
  dtensorLayoutGetMaxLocalShape(l, pad);
  int64_t bytes = 0;
  bool ok = true;
  for (int s = 0; s < saved->numShards && ok; ++s)
    ok = readShardPart(dir, NULL, saved, &saved->shards[s], l->rank, numWanted,
                       wanted, pad, block, mode, &bytes, err, errSize);
  for (int d = 0; d < l->rank; ++d)
    free(wanted[d]);
  if (outBytesRead)
    *outBytesRead = bytes;
  return ok;
}

void dtCkptBlockFromGlobal(const CkptTensor *t, const DtensorLayout *l,
                           int64_t device, const void *global, void *block) {
  /* The whole tensor as one saved block. */
  CkptShard whole;
  memset(&whole, 0, sizeof(whole));
  DtensorRange all[DTENSOR_MAX_TENSOR_RANK];
  for (int d = 0; d < t->rank; ++d) {
    all[d] = (DtensorRange){0, t->shape[d]};
    whole.numRanges[d] = 1;
    whole.ranges[d] = &all[d];
  }
  int numWanted[DTENSOR_MAX_TENSOR_RANK];
  DtensorRange *wanted[DTENSOR_MAX_TENSOR_RANK];
  int64_t pad[DTENSOR_MAX_TENSOR_RANK], bytes = 0;
  dtCkptDeviceRanges(l, device, numWanted, wanted);
  dtensorLayoutGetMaxLocalShape(l, pad);
  char err[8];
  readShardPart("", global, t, &whole, l->rank, numWanted, wanted, pad, block,
                CKPT_READ, &bytes, err, sizeof(err));
  for (int d = 0; d < l->rank; ++d)
    free(wanted[d]);
}

bool dtCkptVerifyTensor(const char *dir, const CkptTensor *t, char *err,
                        size_t errSize) {
  char *buf = malloc(1 << 20);
  bool ok = buf != NULL;
  for (int s = 0; s < t->numShards && ok; ++s) {
    const CkptShard *sh = &t->shards[s];
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, sh->file);
    int fd = openShard(path, sh->bytes, err, errSize);
    ok = fd >= 0 && checkFile(fd, path, sh, buf, 1u << 20, err, errSize);
    if (fd >= 0)
      close(fd);
  }
  free(buf);
  return ok;
}
