/* The checkpoint format's common parts (docs/checkpoint.md): messages,
 * opening files, element types and names, CRC-32 (ISA-L), and the shards of
 * a layout. The metadata file is CkptMeta.c, shard I/O CkptShards.c, the
 * file-system steps of a save CkptFiles.c. */
#define _GNU_SOURCE
#include "CkptInternal.h"
#include "Support/Support.h"

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

bool dtCkptFail(char *err, size_t size, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(err, size, format, args);
  va_end(args);
  return false;
}

int dtCkptOpenRegular(const char *path, struct stat *st, char *err,
                      size_t errSize) {
  /* A checkpoint's own files are never links: one in a checkpoint from
   * elsewhere could name any file this user may read. */
  DtensorDiag diag;
  int fd = dtOpenRegular(path, false, st, &diag);
  if (fd < 0)
    dtCkptFail(err, errSize, "%s", diag.message);
  return fd;
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
    return dtCkptFail(err, errSize, "a tensor of %d dims (valid: 0 to %d)",
                      rank, DTENSOR_MAX_TENSOR_RANK);
  DtensorMesh *mesh = dtensorMeshParse(meshText, &diag);
  if (!mesh)
    return dtCkptFail(err, errSize, "mesh '%s': %s", meshText, diag.message);
  DtensorShardingSpec spec;
  if (!dtensorShardingSpecParse(specText, mesh, &spec, &diag) ||
      !dtensorLayoutInit(mesh, &spec, rank, shape, dtCkptElementType(dtype),
                         outLayout, &diag)) {
    dtensorMeshDestroy(mesh);
    return dtCkptFail(err, errSize, "spec '%s' on mesh '%s': %s", specText,
                      meshText, diag.message);
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

int64_t dtCkptRangesLength(int n, const DtensorRange *r) {
  int64_t len = 0;
  for (int i = 0; i < n; ++i)
    len += r[i].end - r[i].begin;
  return len;
}

int64_t dtCkptDeviceRanges(const DtensorLayout *l, int64_t device,
                           int *numRanges, DtensorRange **ranges) {
  int64_t elems = 1;
  for (int d = 0; d < l->rank; ++d) {
    int64_t k = l->spec.interleave[d] > 1 ? l->spec.interleave[d] : 1;
    ranges[d] = calloc((size_t)k, sizeof(DtensorRange));
    numRanges[d] = dtensorLayoutGetLocalRanges(l, device, d, ranges[d]);
    elems *= dtCkptRangesLength(numRanges[d], ranges[d]);
  }
  return elems;
}

bool dtCkptPlanShards(const DtensorLayout *l, CkptTensor *t, char *err,
                      size_t errSize) {
  if (dtensorShardingSpecIsPartial(&l->spec))
    return dtCkptFail(err, errSize,
                      "'%s' is Partial: reduce it before planning "
                      "its shards",
                      t->name);
  int64_t devices = dtensorMeshGetNumDevices(l->mesh);
  t->numShards = 0;
  t->shards = calloc((size_t)devices, sizeof(CkptShard));
  int64_t *group = malloc(sizeof(int64_t) * (size_t)devices);
  if (!t->shards || !group) {
    free(group);
    return dtCkptFail(err, errSize,
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
    int64_t elems = dtCkptDeviceRanges(l, dev, s->numRanges, s->ranges);
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
