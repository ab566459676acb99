/* The checkpoint format (docs/checkpoint.md): the metadata file in JSON
 * (jansson), CRC-32 checksums (ISA-L), the shards of a layout, and moving
 * blocks between memory and shard files: a block is read from every saved shard
 * that overlaps it, each only where it overlaps, in runs as long as both
 * layouts allow. */
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

static bool failf(char *err, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static bool failf(char *err, size_t size, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(err, size, format, args);
  va_end(args);
  return false;
}

/* Opens `path` for reading if it is a regular file (a FIFO or device
 * would block or never end: never waited on), with its status; -1 and a
 * message otherwise. */
static int openRegular(const char *path, struct stat *st, char *err,
                       size_t errSize) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || fstat(fd, st) != 0) {
    failf(err, errSize, "%s: %s", path, strerror(errno));
  } else if (!S_ISREG(st->st_mode)) {
    failf(err, errSize, "%s: not a regular file", path);
  } else if (fcntl(fd, F_SETFL, 0) != 0) {
    failf(err, errSize, "%s: %s", path, strerror(errno));
  } else {
    return fd;
  }
  if (fd >= 0)
    close(fd);
  return -1;
}

/* ---- types and names ----------------------------------------------------- */

DtensorElementType dtCkptElementType(DtrtDtype dtype) {
  /* The two lists share their names (Runtime.h); every runtime type has a
   * compiler counterpart (test/Unit/DtypeTest.c). */
  DtensorElementType et = DTENSOR_F32;
  dtensorElementTypeParse(dtrtDtypeName(dtype), &et);
  return et;
}

bool dtCkptNameIsValid(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 100 || name[0] == '.')
    return false;
  for (const char *p = name; *p; ++p)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
      return false;
  return true;
}

uint32_t dtCkptCrc(uint32_t crc, const void *data, size_t n) {
  /* ISA-L's gzip CRC-32 (zlib's value), with the host's carry-less
   * multiply: several times zlib's speed. */
  return crc32_gzip_refl(crc, data, n);
}

/* ---- layouts and shards -------------------------------------------------- */

bool dtCkptLayout(const char *meshText, const char *specText, DtrtDtype dtype,
                  int rank, const int64_t *shape, DtensorMesh **outMesh,
                  DtensorLayout *outLayout, char *err, size_t errSize) {
  DtensorDiag diag;
  *outMesh = NULL;
  if (rank < 0 || rank > DTENSOR_MAX_TENSOR_RANK)
    return failf(err, errSize, "a tensor of %d dims (valid: 0 to %d)", rank,
                 DTENSOR_MAX_TENSOR_RANK);
  DtensorMesh *mesh = dtensorMeshParse(meshText, &diag);
  if (!mesh)
    return failf(err, errSize, "mesh '%s': %s", meshText, diag.message);
  DtensorShardingSpec spec;
  if (!dtensorShardingSpecParse(specText, mesh, &spec, &diag) ||
      !dtensorLayoutInit(mesh, &spec, rank, shape, dtCkptElementType(dtype),
                         outLayout, &diag)) {
    dtensorMeshDestroy(mesh);
    return failf(err, errSize, "spec '%s' on mesh '%s': %s", specText, meshText,
                 diag.message);
  }
  *outMesh = mesh;
  return true;
}

void dtCkptTensorFree(CkptTensor *t) {
  for (int s = 0; s < t->numShards; ++s)
    for (int d = 0; d < t->rank; ++d)
      free(t->shards[s].ranges[d]);
  free(t->shards);
  t->shards = NULL;
  t->numShards = 0;
}

static int64_t rangesLength(int n, const DtensorRange *r) {
  int64_t len = 0;
  for (int i = 0; i < n; ++i)
    len += r[i].end - r[i].begin;
  return len;
}

/* The ranges of `device` along every dim, allocated; returns the element
 * count of its block. */
static int64_t deviceRanges(const DtensorLayout *l, int64_t device,
                            int *numRanges, DtensorRange **ranges) {
  int64_t elems = 1;
  for (int d = 0; d < l->rank; ++d) {
    int64_t k = l->spec.interleave[d] > 1 ? l->spec.interleave[d] : 1;
    ranges[d] = calloc((size_t)k, sizeof(DtensorRange));
    numRanges[d] = dtensorLayoutGetLocalRanges(l, device, d, ranges[d]);
    elems *= rangesLength(numRanges[d], ranges[d]);
  }
  return elems;
}

bool dtCkptPlanShards(const DtensorLayout *l, CkptTensor *t, char *err,
                      size_t errSize) {
  if (dtensorShardingSpecIsPartial(&l->spec))
    return failf(err, errSize,
                 "'%s' is Partial: reduce it before planning "
                 "its shards",
                 t->name);
  int64_t devices = dtensorMeshGetNumDevices(l->mesh);
  t->numShards = 0;
  t->shards = calloc((size_t)devices, sizeof(CkptShard));
  int64_t *group = malloc(sizeof(int64_t) * (size_t)devices);
  if (!t->shards || !group) {
    free(group);
    return failf(err, errSize,
                 "'%s': out of memory planning the shards of "
                 "%lld devices",
                 t->name, (long long)devices);
  }
  size_t es = dtensorElementTypeGetSize(l->elementType);
  for (int64_t dev = 0; dev < devices; ++dev) {
    dtensorLayoutGetReplicaGroup(l, dev, group, devices);
    if (group[0] != dev)
      continue; /* a replica: the first device of its group writes it */
    CkptShard *s = &t->shards[t->numShards];
    int64_t elems = deviceRanges(l, dev, s->numRanges, s->ranges);
    if (elems == 0) { /* an empty block of an uneven layout */
      for (int d = 0; d < l->rank; ++d)
        free(s->ranges[d]);
      memset(s, 0, sizeof(*s));
      continue;
    }
    s->device = dev;
    s->bytes = elems * (int64_t)es;
    snprintf(s->file, sizeof(s->file), "%s.%lld.bin", t->name, (long long)dev);
    ++t->numShards;
  }
  free(group);
  return true;
}

/* ---- metadata ------------------------------------------------------------ */

void dtCkptMetaFree(CkptMeta *m) {
  for (int i = 0; i < m->numTensors; ++i)
    dtCkptTensorFree(&m->tensors[i]);
  free(m->tensors);
  m->tensors = NULL;
  m->numTensors = 0;
}

const CkptTensor *dtCkptMetaFind(const CkptMeta *m, const char *name) {
  for (int i = 0; i < m->numTensors; ++i)
    if (!strcmp(m->tensors[i].name, name))
      return &m->tensors[i];
  return NULL;
}

static json_t *int64Array(int n, const int64_t *v) {
  json_t *a = json_array();
  for (int i = 0; i < n; ++i)
    json_array_append_new(a, json_integer(v[i]));
  return a;
}

/* The checksum of a tensor's metadata (`meta_crc32`): its name, element
 * type, shape, mesh, spec and every shard's file, device, ranges, size and
 * checksum, each integer as 8 little-endian bytes, each string with its
 * terminating NUL. */
static uint32_t crcInt(uint32_t crc, int64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i)
    b[i] = (unsigned char)((uint64_t)v >> (8 * i));
  return dtCkptCrc(crc, b, sizeof(b));
}

static uint32_t crcText(uint32_t crc, const char *text) {
  return dtCkptCrc(crc, text, strlen(text) + 1);
}

static uint32_t metaDigest(const CkptTensor *t) {
  uint32_t crc = crcText(0, t->name);
  crc = crcText(crc, dtrtDtypeName(t->dtype));
  crc = crcInt(crc, t->rank);
  for (int d = 0; d < t->rank; ++d)
    crc = crcInt(crc, t->shape[d]);
  crc = crcText(crcText(crc, t->mesh), t->spec);
  crc = crcInt(crc, t->numShards);
  for (int s = 0; s < t->numShards; ++s) {
    const CkptShard *sh = &t->shards[s];
    crc = crcInt(crcText(crc, sh->file), sh->device);
    for (int d = 0; d < t->rank; ++d) {
      crc = crcInt(crc, sh->numRanges[d]);
      for (int r = 0; r < sh->numRanges[d]; ++r)
        crc = crcInt(crcInt(crc, sh->ranges[d][r].begin), sh->ranges[d][r].end);
    }
    crc = crcInt(crcInt(crc, sh->bytes), sh->crc);
  }
  return crc;
}

bool dtCkptMetaWrite(const char *path, const CkptMeta *m, char *err,
                     size_t errSize) {
  json_t *root = json_object();
  json_object_set_new(root, "format", json_string("dtensor-checkpoint"));
  json_object_set_new(root, "version", json_integer(DTRT_CHECKPOINT_VERSION));
  json_t *tensors = json_array();
  for (int i = 0; i < m->numTensors; ++i) {
    const CkptTensor *t = &m->tensors[i];
    json_t *jt = json_object();
    json_object_set_new(jt, "name", json_string(t->name));
    json_object_set_new(jt, "dtype", json_string(dtrtDtypeName(t->dtype)));
    json_object_set_new(jt, "shape", int64Array(t->rank, t->shape));
    json_object_set_new(jt, "mesh", json_string(t->mesh));
    json_object_set_new(jt, "spec", json_string(t->spec));
    json_t *shards = json_array();
    for (int s = 0; s < t->numShards; ++s) {
      const CkptShard *sh = &t->shards[s];
      json_t *js = json_object();
      json_object_set_new(js, "file", json_string(sh->file));
      json_object_set_new(js, "device", json_integer(sh->device));
      json_t *dims = json_array();
      for (int d = 0; d < t->rank; ++d) {
        json_t *list = json_array();
        for (int r = 0; r < sh->numRanges[d]; ++r) {
          int64_t be[2] = {sh->ranges[d][r].begin, sh->ranges[d][r].end};
          json_array_append_new(list, int64Array(2, be));
        }
        json_array_append_new(dims, list);
      }
      json_object_set_new(js, "ranges", dims);
      json_object_set_new(js, "bytes", json_integer(sh->bytes));
      json_object_set_new(js, "crc32", json_integer(sh->crc));
      json_array_append_new(shards, js);
    }
    json_object_set_new(jt, "shards", shards);
    json_object_set_new(jt, "meta_crc32", json_integer(metaDigest(t)));
    json_array_append_new(tensors, jt);
  }
  json_object_set_new(root, "tensors", tensors);
  char *text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!text)
    return failf(err, errSize, "%s: out of memory", path);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  size_t n = strlen(text), done = 0;
  bool ok = fd >= 0;
  while (ok && done < n) {
    ssize_t k = write(fd, text + done, n - done);
    if (k < 0 && errno == EINTR)
      continue;
    ok = k > 0;
    done += k > 0 ? (size_t)k : 0;
  }
  ok = ok && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
  int e = errno;
  if (fd >= 0)
    close(fd);
  free(text);
  return ok ? true : failf(err, errSize, "writing %s: %s", path, strerror(e));
}

/* Reads an array of int64 of length `n` (or any length when n < 0, stored
 * in *outN). */
static bool readInts(json_t *a, int max, int64_t *out, int *outN) {
  if (!json_is_array(a) || (int)json_array_size(a) > max)
    return false;
  for (size_t i = 0; i < json_array_size(a); ++i) {
    json_t *v = json_array_get(a, i);
    if (!json_is_integer(v))
      return false;
    out[i] = json_integer_value(v);
  }
  *outN = (int)json_array_size(a);
  return true;
}

static bool readShard(json_t *js, CkptTensor *t, CkptShard *s, const char *path,
                      char *err, size_t errSize) {
  json_t *file = json_object_get(js, "file"),
         *dev = json_object_get(js, "device");
  json_t *ranges = json_object_get(js, "ranges"),
         *bytes = json_object_get(js, "bytes");
  json_t *crc = json_object_get(js, "crc32");
  if (!json_is_string(file) || !json_is_integer(dev) ||
      !json_is_array(ranges) || !json_is_integer(bytes) ||
      !json_is_integer(crc) || (int)json_array_size(ranges) != t->rank)
    return failf(err, errSize,
                 "%s: a shard of '%s' lacks file, device, "
                 "ranges (one list per dim), bytes or crc32",
                 path, t->name);
  const char *f = json_string_value(file);
  if (!dtCkptNameIsValid(f) || strlen(f) >= sizeof(s->file))
    return failf(err, errSize,
                 "%s: shard file name '%s' of '%s' is not a "
                 "plain file name",
                 path, f, t->name);
  snprintf(s->file, sizeof(s->file), "%s", f);
  s->device = json_integer_value(dev);
  s->bytes = json_integer_value(bytes);
  s->crc = (uint32_t)json_integer_value(crc);
  int64_t elems = 1;
  for (int d = 0; d < t->rank; ++d) {
    json_t *list = json_array_get(ranges, (size_t)d);
    size_t n = json_is_array(list) ? json_array_size(list) : 0;
    s->ranges[d] = calloc(n + 1, sizeof(DtensorRange));
    s->numRanges[d] = (int)n;
    for (size_t r = 0; r < n; ++r) {
      int64_t be[2];
      int got = 0;
      if (!readInts(json_array_get(list, r), 2, be, &got) || got != 2 ||
          be[0] < 0 || be[1] <= be[0] || be[1] > t->shape[d])
        return failf(err, errSize,
                     "%s: shard '%s' of '%s': dim %d has a "
                     "range that is not [begin, end) within 0..%lld",
                     path, f, t->name, d, (long long)t->shape[d]);
      s->ranges[d][r] = (DtensorRange){be[0], be[1]};
    }
    if (n == 0)
      return failf(err, errSize,
                   "%s: shard '%s' of '%s' has no range in dim "
                   "%d",
                   path, f, t->name, d);
    /* Edited metadata can list overlapping ranges: every sum and product
     * checked, so that no count wraps around. */
    int64_t length = 0;
    for (size_t r = 0; r < n; ++r)
      if (__builtin_add_overflow(
              length, s->ranges[d][r].end - s->ranges[d][r].begin, &length) ||
          length > t->shape[d])
        return failf(err, errSize,
                     "%s: shard '%s' of '%s': the ranges of "
                     "dim %d add up to more than its %lld elements",
                     path, f, t->name, d, (long long)t->shape[d]);
    if (__builtin_mul_overflow(elems, length, &elems))
      return failf(err, errSize,
                   "%s: shard '%s' of '%s' holds more elements "
                   "than 64 bits count",
                   path, f, t->name);
  }
  int64_t held;
  if (__builtin_mul_overflow(elems, (int64_t)dtrtDtypeSize(t->dtype), &held))
    return failf(err, errSize,
                 "%s: shard '%s' of '%s' holds more bytes than "
                 "64 bits count",
                 path, f, t->name);
  if (s->bytes != held)
    return failf(err, errSize,
                 "%s: shard '%s' of '%s' says %lld bytes but "
                 "its ranges hold %lld",
                 path, f, t->name, (long long)s->bytes, (long long)held);
  return true;
}

/* Whether the shards listed for `t` are exactly those its layout (mesh,
 * spec, shape) gives, device by device: readers go by each shard's ranges,
 * so damaged or edited metadata would otherwise load holes (zeros) or
 * blocks in the wrong place without a word. */
static bool shardsMatchLayout(const CkptTensor *t, const char *path, char *err,
                              size_t errSize) {
  DtensorMesh *mesh;
  DtensorLayout layout;
  char why[512];
  if (!dtCkptLayout(t->mesh, t->spec, t->dtype, t->rank, t->shape, &mesh,
                    &layout, why, sizeof(why)))
    return failf(err, errSize, "%s: '%s': %s", path, t->name, why);
  CkptTensor planned;
  memset(&planned, 0, sizeof(planned));
  snprintf(planned.name, sizeof(planned.name), "%s", t->name);
  planned.rank = t->rank;
  bool ok = dtCkptPlanShards(&layout, &planned, why, sizeof(why)) ||
            failf(err, errSize, "%s: %s", path, why);
  if (ok && planned.numShards != t->numShards)
    ok =
        failf(err, errSize,
              "%s: '%s' lists %d shards where its layout "
              "(%s on mesh %s) has %d: the metadata is damaged or was "
              "edited",
              path, t->name, t->numShards, t->spec, t->mesh, planned.numShards);
  for (int i = 0; ok && i < t->numShards; ++i) {
    const CkptShard *a = &t->shards[i], *b = &planned.shards[i];
    bool same = a->device == b->device;
    for (int d = 0; same && d < t->rank; ++d) {
      same = a->numRanges[d] == b->numRanges[d];
      for (int r = 0; same && r < a->numRanges[d]; ++r)
        same = a->ranges[d][r].begin == b->ranges[d][r].begin &&
               a->ranges[d][r].end == b->ranges[d][r].end;
    }
    if (!same)
      ok =
          failf(err, errSize,
                "%s: shard '%s' of '%s' is not the block of "
                "device %lld under its layout (%s on mesh %s): the metadata "
                "is damaged or was edited",
                path, a->file, t->name, (long long)b->device, t->spec, t->mesh);
  }
  dtCkptTensorFree(&planned);
  dtensorMeshDestroy(mesh);
  return ok;
}

static bool readTensor(json_t *jt, CkptTensor *t, const char *path, char *err,
                       size_t errSize) {
  json_t *name = json_object_get(jt, "name"),
         *dtype = json_object_get(jt, "dtype");
  json_t *shape = json_object_get(jt, "shape"),
         *mesh = json_object_get(jt, "mesh");
  json_t *spec = json_object_get(jt, "spec"),
         *shards = json_object_get(jt, "shards");
  if (!json_is_string(name) || !json_is_string(dtype) ||
      !json_is_string(mesh) || !json_is_string(spec) || !json_is_array(shards))
    return failf(err, errSize,
                 "%s: a tensor lacks name, dtype, shape, mesh, "
                 "spec or shards",
                 path);
  snprintf(t->name, sizeof(t->name), "%s", json_string_value(name));
  if (!dtrtDtypeParse(json_string_value(dtype), &t->dtype))
    return failf(err, errSize,
                 "%s: '%s' has element type '%s' (valid: f32, "
                 "f64, f16, bf16, i32, i64)",
                 path, t->name, json_string_value(dtype));
  if (!readInts(shape, DTENSOR_MAX_TENSOR_RANK, t->shape, &t->rank))
    return failf(err, errSize,
                 "%s: the shape of '%s' is not a list of at "
                 "most %d integers",
                 path, t->name, DTENSOR_MAX_TENSOR_RANK);
  for (int d = 0; d < t->rank; ++d)
    if (t->shape[d] < 1)
      return failf(err, errSize, "%s: '%s' has dim %d of size %lld", path,
                   t->name, d, (long long)t->shape[d]);
  snprintf(t->mesh, sizeof(t->mesh), "%s", json_string_value(mesh));
  snprintf(t->spec, sizeof(t->spec), "%s", json_string_value(spec));
  size_t n = json_array_size(shards);
  t->shards = calloc(n + 1, sizeof(CkptShard));
  t->numShards = 0;
  for (size_t s = 0; s < n; ++s) {
    ++t->numShards; /* counted first: a failed shard is freed with the rest */
    if (!readShard(json_array_get(shards, s), t, &t->shards[s], path, err,
                   errSize))
      return false;
  }
  /* Written since 2026-12; older checkpoints have none. */
  json_t *digest = json_object_get(jt, "meta_crc32");
  if (digest && (!json_is_integer(digest) ||
                 (uint32_t)json_integer_value(digest) != metaDigest(t)))
    return failf(err, errSize,
                 "%s: the metadata of '%s' does not match its "
                 "checksum (meta_crc32): it is damaged or was edited (remove "
                 "meta_crc32 to accept an edit)",
                 path, t->name);
  return shardsMatchLayout(t, path, err, errSize);
}

bool dtCkptMetaRead(const char *dir, CkptMeta *out, char *err, size_t errSize) {
  memset(out, 0, sizeof(*out));
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, DTRT_CHECKPOINT_METADATA);
  json_error_t jerr;
  struct stat st;
  if (stat(path, &st) != 0)
    return failf(err, errSize, "%s: %s (is '%s' a checkpoint?)", path,
                 strerror(errno), dir);
  int fd = openRegular(path, &st, err, errSize);
  if (fd < 0)
    return false;
  json_t *root = json_loadfd(fd, 0, &jerr);
  close(fd);
  if (!root)
    return failf(err, errSize, "%s:%d:%d: not valid JSON: %s", path, jerr.line,
                 jerr.column, jerr.text);
  json_t *format = json_object_get(root, "format");
  json_t *version = json_object_get(root, "version");
  json_t *tensors = json_object_get(root, "tensors");
  bool ok = true;
  if (!json_is_string(format) ||
      strcmp(json_string_value(format), "dtensor-checkpoint"))
    ok = failf(err, errSize,
               "%s: not a dtensor checkpoint (no \"format\": "
               "\"dtensor-checkpoint\")",
               path);
  else if (!json_is_integer(version) || json_integer_value(version) < 1 ||
           json_integer_value(version) > DTRT_CHECKPOINT_VERSION)
    ok = failf(err, errSize,
               "%s: format version %lld; this runtime reads "
               "1 to %d",
               path,
               json_is_integer(version) ? (long long)json_integer_value(version)
                                        : -1LL,
               DTRT_CHECKPOINT_VERSION);
  else if (!json_is_array(tensors))
    ok = failf(err, errSize, "%s: no \"tensors\" list", path);
  if (ok) {
    out->version = (int)json_integer_value(version);
    size_t n = json_array_size(tensors);
    out->tensors = calloc(n + 1, sizeof(CkptTensor));
    for (size_t i = 0; i < n && ok; ++i) {
      ++out->numTensors;
      ok = readTensor(json_array_get(tensors, i), &out->tensors[i], path, err,
                      errSize);
      for (size_t j = 0; ok && j < i; ++j)
        if (!strcmp(out->tensors[j].name, out->tensors[i].name))
          ok = failf(err, errSize, "%s: tensor '%s' is listed twice", path,
                     out->tensors[i].name);
    }
  }
  json_decref(root);
  if (!ok)
    dtCkptMetaFree(out);
  return ok;
}

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
      return failf(err, errSize, "out of memory");
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
  return ok ? true : failf(err, errSize, "writing %s: %s", path, strerror(e));
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
  int fd = openRegular(path, &st, err, errSize);
  if (fd < 0)
    return -1;
  if (st.st_size != bytes) {
    failf(err, errSize, "%s: %s (%lld bytes, the metadata says %lld)", path,
          st.st_size < bytes ? "truncated" : "too long", (long long)st.st_size,
          (long long)bytes);
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
      return failf(err, errSize, "%s: read failed: %s", path, strerror(errno));
    crc = dtCkptCrc(crc, buf, n);
    off += (int64_t)n;
  }
  if (crc != sh->crc)
    return failf(err, errSize,
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
    srcShape[d] = rangesLength(sh->numRanges[d], sh->ranges[d]);
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
        ok = failf(err, errSize, "%s: read failed: %s", path, strerror(errno));
        goto done;
      }
      if (whole)
        crc = dtCkptCrc(crc, to, (size_t)len * es);
    } else if (!addRun(&batch, fd, src * (int64_t)es, to, (size_t)len * es,
                       whole ? &crc : NULL)) {
      ok = failf(err, errSize, "%s: read failed: %s", path, strerror(errno));
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
    ok = failf(err, errSize, "%s: read failed: %s", path, strerror(errno));
    goto done;
  }
  if (whole && crc != sh->crc)
    ok = failf(err, errSize,
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
  deviceRanges(l, device, numWanted, wanted);
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
  deviceRanges(l, device, numWanted, wanted);
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

/* ---- the atomic swap ----------------------------------------------------- */

void dtCkptRemoveDir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

static void syncParent(const char *dir) {
  char parent[4096];
  snprintf(parent, sizeof(parent), "%s", dir);
  char *slash = strrchr(parent, '/');
  if (slash == parent)
    slash[1] = 0;
  else if (slash)
    *slash = 0;
  else
    snprintf(parent, sizeof(parent), ".");
  int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

bool dtCkptCommit(const char *staged, const char *dir, char *err,
                  size_t errSize) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (rename(staged, dir) != 0)
      return failf(err, errSize, "renaming %s to %s: %s", staged, dir,
                   strerror(errno));
    syncParent(dir);
    return true;
  }
  if (renameat2(AT_FDCWD, staged, AT_FDCWD, dir, RENAME_EXCHANGE) != 0)
    return failf(err, errSize, "swapping %s into %s: %s", staged, dir,
                 strerror(errno));
  syncParent(dir);
  dtCkptRemoveDir(staged); /* the previous checkpoint, now at `staged` */
  return true;
}

int dtCkptLock(const char *dir, char *err, size_t errSize) {
  char path[4096];
  snprintf(path, sizeof(path), "%s.lock", dir);
  /* 0600 and ours: another user who could open it could also hold the
   * lock and stop every save. */
  int fd =
      open(path, O_RDWR | O_CREAT | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0600);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    failf(err, errSize, "locking %s for writing: %s", path,
          fd < 0 ? strerror(errno) : "not a regular file");
  } else if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    failf(err, errSize,
          "locking %s for writing: it belongs to user %u with "
          "mode %04o, not to this user (%u) with mode 0600; remove it",
          path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
          (unsigned)geteuid());
  } else if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
    return fd;
  } else if (errno == EWOULDBLOCK) {
    failf(err, errSize,
          "another save into %s is under way (%s is locked); "
          "this one stops, and what is there stays as it is",
          dir, path);
  } else {
    failf(err, errSize, "locking %s for writing: %s", path, strerror(errno));
  }
  if (fd >= 0)
    close(fd);
  return -1;
}

void dtCkptUnlock(int fd) {
  if (fd >= 0)
    close(fd); /* closing releases the flock */
}

void dtCkptRemoveStaleStaging(const char *dir) {
  char parent[4096], prefix[4096];
  const char *slash = strrchr(dir, '/');
  if (slash) {
    snprintf(parent, sizeof(parent), "%.*s", (int)(slash - dir), dir);
    if (!parent[0])
      snprintf(parent, sizeof(parent), "/");
  } else {
    snprintf(parent, sizeof(parent), ".");
  }
  snprintf(prefix, sizeof(prefix), "%s.tmp-", slash ? slash + 1 : dir);
  DIR *d = opendir(parent);
  for (struct dirent *e; d && (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, strlen(prefix))) {
      char path[8192];
      snprintf(path, sizeof(path), "%s/%s", parent, e->d_name);
      dtCkptRemoveDir(path);
    }
  if (d)
    closedir(d);
}
