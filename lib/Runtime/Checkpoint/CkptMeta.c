/* The checkpoint's metadata file (docs/checkpoint.md): JSON through
 * jansson, every field checked on reading, each tensor's meta_crc32, and
 * that the shards listed are exactly the blocks of the tensor's layout. */
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
    return dtCkptFail(err, errSize, "%s: out of memory", path);
  int fd =
      open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
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
  return ok ? true
            : dtCkptFail(err, errSize, "writing %s: %s", path, strerror(e));
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
    return dtCkptFail(err, errSize,
                      "%s: a shard of '%s' lacks file, device, "
                      "ranges (one list per dim), bytes or crc32",
                      path, t->name);
  const char *f = json_string_value(file);
  if (!dtCkptNameIsValid(f) || strlen(f) >= sizeof(s->file))
    return dtCkptFail(err, errSize,
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
        return dtCkptFail(err, errSize,
                          "%s: shard '%s' of '%s': dim %d has a "
                          "range that is not [begin, end) within 0..%lld",
                          path, f, t->name, d, (long long)t->shape[d]);
      s->ranges[d][r] = (DtensorRange){be[0], be[1]};
    }
    if (n == 0)
      return dtCkptFail(err, errSize,
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
        return dtCkptFail(err, errSize,
                          "%s: shard '%s' of '%s': the ranges of "
                          "dim %d add up to more than its %lld elements",
                          path, f, t->name, d, (long long)t->shape[d]);
    if (__builtin_mul_overflow(elems, length, &elems))
      return dtCkptFail(err, errSize,
                        "%s: shard '%s' of '%s' holds more elements "
                        "than 64 bits count",
                        path, f, t->name);
  }
  int64_t held;
  if (__builtin_mul_overflow(elems, (int64_t)dtrtDtypeSize(t->dtype), &held))
    return dtCkptFail(err, errSize,
                      "%s: shard '%s' of '%s' holds more bytes than "
                      "64 bits count",
                      path, f, t->name);
  if (s->bytes != held)
    return dtCkptFail(err, errSize,
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
    return dtCkptFail(err, errSize, "%s: '%s': %s", path, t->name, why);
  CkptTensor planned;
  memset(&planned, 0, sizeof(planned));
  snprintf(planned.name, sizeof(planned.name), "%s", t->name);
  planned.rank = t->rank;
  bool ok = dtCkptPlanShards(&layout, &planned, why, sizeof(why)) ||
            dtCkptFail(err, errSize, "%s: %s", path, why);
  if (ok && planned.numShards != t->numShards)
    ok = dtCkptFail(err, errSize,
                    "%s: '%s' lists %d shards where its layout "
                    "(%s on mesh %s) has %d: the metadata is damaged or was "
                    "edited",
                    path, t->name, t->numShards, t->spec, t->mesh,
                    planned.numShards);
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
      ok = dtCkptFail(
          err, errSize,
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
    return dtCkptFail(err, errSize,
                      "%s: a tensor lacks name, dtype, shape, mesh, "
                      "spec or shards",
                      path);
  /* A name also names files (dtensor-ckpt convert writes <name>.<device>
   * .bin): '../x' or 'a/b' would write outside the directory. */
  if (!dtCkptNameIsValid(json_string_value(name)))
    return dtCkptFail(err, errSize,
                      "%s: tensor name '%.100s' is not valid (1 to 100 of "
                      "letters, digits, '_', '-', '.', not starting with "
                      "'.')",
                      path, json_string_value(name));
  snprintf(t->name, sizeof(t->name), "%s", json_string_value(name));
  if (!dtrtDtypeParse(json_string_value(dtype), &t->dtype))
    return dtCkptFail(err, errSize,
                      "%s: '%s' has element type '%s' (valid: f32, "
                      "f64, f16, bf16, i32, i64)",
                      path, t->name, json_string_value(dtype));
  if (!readInts(shape, DTENSOR_MAX_TENSOR_RANK, t->shape, &t->rank))
    return dtCkptFail(err, errSize,
                      "%s: the shape of '%s' is not a list of at "
                      "most %d integers",
                      path, t->name, DTENSOR_MAX_TENSOR_RANK);
  for (int d = 0; d < t->rank; ++d)
    if (t->shape[d] < 1)
      return dtCkptFail(err, errSize, "%s: '%s' has dim %d of size %lld", path,
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
    return dtCkptFail(
        err, errSize,
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
    return dtCkptFail(err, errSize, "%s: %s (is '%s' a checkpoint?)", path,
                      strerror(errno), dir);
  int fd = dtCkptOpenRegular(path, &st, err, errSize);
  if (fd < 0)
    return false;
  /* Through stdio's buffer: jansson's json_loadfd reads one byte per
   * system call (2 million calls for a 75-tensor training state). */
  FILE *file = fdopen(fd, "r");
  json_t *root = file ? json_loadf(file, 0, &jerr) : NULL;
  if (file)
    fclose(file);
  else
    close(fd);
  if (!file)
    return dtCkptFail(err, errSize, "%s: %s", path, strerror(errno));
  if (!root)
    return dtCkptFail(err, errSize, "%s:%d:%d: not valid JSON: %s", path,
                      jerr.line, jerr.column, jerr.text);
  json_t *format = json_object_get(root, "format");
  json_t *version = json_object_get(root, "version");
  json_t *tensors = json_object_get(root, "tensors");
  bool ok = true;
  if (!json_is_string(format) ||
      strcmp(json_string_value(format), "dtensor-checkpoint"))
    ok = dtCkptFail(err, errSize,
                    "%s: not a dtensor checkpoint (no \"format\": "
                    "\"dtensor-checkpoint\")",
                    path);
  else if (!json_is_integer(version) || json_integer_value(version) < 1 ||
           json_integer_value(version) > DTRT_CHECKPOINT_VERSION)
    ok = dtCkptFail(err, errSize,
                    "%s: format version %lld; this runtime reads "
                    "1 to %d",
                    path,
                    json_is_integer(version)
                        ? (long long)json_integer_value(version)
                        : -1LL,
                    DTRT_CHECKPOINT_VERSION);
  else if (!json_is_array(tensors))
    ok = dtCkptFail(err, errSize, "%s: no \"tensors\" list", path);
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
          ok = dtCkptFail(err, errSize, "%s: tensor '%s' is listed twice", path,
                          out->tensors[i].name);
    }
  }
  json_decref(root);
  if (!ok)
    dtCkptMetaFree(out);
  return ok;
}
