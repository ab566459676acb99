/* Offline checkpoint operations (one process, no runtime context): the
 * metadata for tools, verification, a whole tensor out and in, and
 * conversion to another mesh and layout block by block. Writes are staged
 * beside the target and swapped in, as collective saves are. */
#define _GNU_SOURCE
#include "CkptInternal.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct DtrtCheckpoint {
  CkptMeta meta;
};

static DtrtStatus fail(DtrtStatus s, char *err, size_t size, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));

static DtrtStatus fail(DtrtStatus s, char *err, size_t size, const char *fmt,
                       ...) {
  va_list args;
  va_start(args, fmt);
  if (err && size)
    vsnprintf(err, size, fmt, args);
  va_end(args);
  return s;
}

DtrtStatus dtrtCheckpointOpen(const char *dir, DtrtCheckpoint **out, char *err,
                              size_t errSize) {
  *out = NULL;
  DtrtCheckpoint *c = calloc(1, sizeof(DtrtCheckpoint));
  if (!c)
    return fail(DTRT_ERR_NOMEM, err, errSize, "out of memory");
  char why[CKPT_ERROR_SIZE];
  if (!dtCkptMetaRead(dir, &c->meta, why, sizeof(why))) {
    free(c);
    return fail(DTRT_ERR_INVALID, err, errSize, "%s", why);
  }
  *out = c;
  return DTRT_OK;
}

void dtrtCheckpointClose(DtrtCheckpoint *c) {
  if (!c)
    return;
  dtCkptMetaFree(&c->meta);
  free(c);
}

int dtrtCheckpointNumTensors(const DtrtCheckpoint *c) {
  return c->meta.numTensors;
}

void dtrtCheckpointGetTensor(const DtrtCheckpoint *c, int i, DtrtTensor *out,
                             int *outNumShards, int64_t *outBytes) {
  const CkptTensor *t = &c->meta.tensors[i];
  *out = (DtrtTensor){t->name, t->dtype, t->rank, t->shape,
                      t->mesh, t->spec,  NULL};
  int64_t bytes = 0;
  for (int s = 0; s < t->numShards; ++s)
    bytes += t->shards[s].bytes;
  if (outNumShards)
    *outNumShards = t->numShards;
  if (outBytes)
    *outBytes = bytes;
}

DtrtStatus dtrtCheckpointVerify(const char *dir, char *err, size_t errSize) {
  DtrtCheckpoint *c;
  DtrtStatus s = dtrtCheckpointOpen(dir, &c, err, errSize);
  if (s != DTRT_OK)
    return s;
  char why[CKPT_ERROR_SIZE];
  for (int i = 0; i < c->meta.numTensors && s == DTRT_OK; ++i)
    if (!dtCkptVerifyTensor(dir, &c->meta.tensors[i], why, sizeof(why)))
      s = fail(DTRT_ERR_INVALID, err, errSize, "%s", why);
  dtrtCheckpointClose(c);
  return s;
}

/* The replicated layout of `t` on a one-device mesh: the whole tensor as
 * one block. */
static bool wholeLayout(const CkptTensor *t, DtensorMesh **mesh,
                        DtensorLayout *l, char *why, size_t size) {
  char spec[64] = "[";
  for (int d = 0; d < t->rank; ++d)
    strcat(spec, d ? ", R" : "R");
  strcat(spec, "]");
  return dtCkptLayout("1", spec, t->dtype, t->rank, t->shape, mesh, l, why,
                      size);
}

DtrtStatus dtrtCheckpointReadTensor(const char *dir, const char *name,
                                    void *out, size_t outBytes, char *err,
                                    size_t errSize) {
  DtrtCheckpoint *c;
  DtrtStatus s = dtrtCheckpointOpen(dir, &c, err, errSize);
  if (s != DTRT_OK)
    return s;
  const CkptTensor *t = dtCkptMetaFind(&c->meta, name);
  char why[CKPT_ERROR_SIZE];
  DtensorMesh *mesh = NULL;
  DtensorLayout l;
  int64_t elems = 1;
  for (int d = 0; t && d < t->rank; ++d)
    elems *= t->shape[d];
  if (!t)
    s = fail(DTRT_ERR_INVALID, err, errSize, "%s/%s: no tensor '%s'", dir,
             DTRT_CHECKPOINT_METADATA, name);
  else if ((size_t)elems * dtrtDtypeSize(t->dtype) != outBytes)
    s = fail(DTRT_ERR_INVALID, err, errSize, "'%s' is %lld bytes, not %zu",
             name, (long long)elems * (long long)dtrtDtypeSize(t->dtype),
             outBytes);
  else if (!wholeLayout(t, &mesh, &l, why, sizeof(why)) ||
           !dtCkptReadBlock(dir, t, &l, 0, out, CKPT_READ_CHECKED, NULL, why,
                            sizeof(why)))
    s = fail(DTRT_ERR_INVALID, err, errSize, "%s", why);
  dtensorMeshDestroy(mesh);
  dtrtCheckpointClose(c);
  return s;
}

/* A fresh private staging directory beside `dir` (resolved, locked),
 * after removing this user's staging left by writers that died. */
static DtrtStatus stage(const char *dir, char *staged, size_t size, char *err,
                        size_t errSize) {
  char why[CKPT_ERROR_SIZE];
  dtCkptRemoveStaleStaging(dir);
  if (!dtCkptMakeStaging(dir, staged, size, why, sizeof(why))) {
    staged[0] = 0;
    return fail(DTRT_ERR_SYSTEM, err, errSize, "%s", why);
  }
  return DTRT_OK;
}

/* Writes every shard of `t` (planned under `l`) into `staged`, each block
 * produced by `fill(user, device, block)`. */
static bool writeTensor(const char *staged, CkptTensor *t,
                        const DtensorLayout *l,
                        bool (*fill)(void *user, int64_t device, void *block,
                                     char *why, size_t size),
                        void *user, char *why, size_t size) {
  if (!dtCkptPlanShards(l, t, why, size))
    return false;
  int64_t pad[DTENSOR_MAX_TENSOR_RANK], elems = 1;
  dtensorLayoutGetMaxLocalShape(l, pad);
  for (int d = 0; d < l->rank; ++d)
    elems *= pad[d];
  char *block = malloc((size_t)elems * dtrtDtypeSize(t->dtype) + 1);
  bool ok = block != NULL;
  for (int k = 0; k < t->numShards && ok; ++k)
    ok = fill(user, t->shards[k].device, block, why, size) &&
         dtCkptWriteShard(staged, l, block, &t->shards[k], why, size);
  free(block);
  return ok;
}

/* Whether `dir` (resolved) may be replaced: absent, or a checkpoint. */
static DtrtStatus replaceable(const char *dir, char *err, size_t errSize) {
  struct stat st;
  char meta[4200];
  snprintf(meta, sizeof(meta), "%s/%s", dir, DTRT_CHECKPOINT_METADATA);
  if (lstat(dir, &st) == 0 && (!S_ISDIR(st.st_mode) || lstat(meta, &st) != 0))
    return fail(DTRT_ERR_INVALID, err, errSize,
                "%s exists and is not a "
                "checkpoint (no %s); refusing to replace it",
                dir, DTRT_CHECKPOINT_METADATA);
  return DTRT_OK;
}

/* Writes the metadata into `staged` and swaps it into `dir`. */
static DtrtStatus commit(const char *staged, const char *dir,
                         const CkptMeta *meta, char *err, size_t errSize) {
  char path[4096], why[CKPT_ERROR_SIZE];
  snprintf(path, sizeof(path), "%s/%s", staged, DTRT_CHECKPOINT_METADATA);
  if (!dtCkptMetaWrite(path, meta, why, sizeof(why)) ||
      !dtCkptCommit(staged, dir, why, sizeof(why))) {
    dtCkptRemoveDir(staged);
    return fail(DTRT_ERR_SYSTEM, err, errSize, "%s", why);
  }
  return DTRT_OK;
}

typedef struct FromGlobal {
  const CkptTensor *t;
  const DtensorLayout *l;
  const void *global;
} FromGlobal;

static bool fillFromGlobal(void *user, int64_t device, void *block, char *why,
                           size_t size) {
  (void)why;
  (void)size;
  FromGlobal *g = user;
  dtCkptBlockFromGlobal(g->t, g->l, device, g->global, block);
  return true;
}

/* Checks `in` and builds its layout (the caller destroys `*outMesh`). */
static DtrtStatus checkWholeTensor(const DtrtTensor *in, DtensorMesh **outMesh,
                                   DtensorLayout *outLayout, char *err,
                                   size_t errSize) {
  char why[CKPT_ERROR_SIZE];
  *outMesh = NULL;
  if (!in || !in->name || !dtCkptNameIsValid(in->name) || !in->block ||
      !dtrtDtypeSize(in->dtype) || !in->mesh || !in->spec)
    return fail(DTRT_ERR_INVALID, err, errSize,
                "a tensor needs a valid "
                "name, element type, mesh, spec and data");
  if (!dtCkptLayout(in->mesh, in->spec, in->dtype, in->rank, in->shape, outMesh,
                    outLayout, why, sizeof(why)))
    return fail(DTRT_ERR_INVALID, err, errSize, "'%s': %s", in->name, why);
  if (dtensorShardingSpecIsPartial(&outLayout->spec))
    return fail(DTRT_ERR_INVALID, err, errSize,
                "'%s': a whole tensor has no "
                "Partial layout ('%s')",
                in->name, in->spec);
  return DTRT_OK;
}

/* Writes the `n` tensors into the checkpoint at `dir` (resolved, locked)
 * in one staging directory and one commit: a writer killed midway leaves
 * the previous checkpoint whole, never a mix of the two. */
static DtrtStatus writeTensorsLocked(const char *dir, int n,
                                     const DtrtTensor *in, char *err,
                                     size_t errSize) {
  char why[CKPT_ERROR_SIZE];
  if (n < 1 || !in)
    return fail(DTRT_ERR_INVALID, err, errSize, "no tensors to write");
  DtensorMesh **meshes = calloc((size_t)n, sizeof(DtensorMesh *));
  DtensorLayout *layouts = calloc((size_t)n, sizeof(DtensorLayout));
  int *slot = calloc((size_t)n, sizeof(int));
  DtrtStatus s = meshes && layouts && slot
                     ? DTRT_OK
                     : fail(DTRT_ERR_NOMEM, err, errSize, "out of memory");
  for (int j = 0; j < n && s == DTRT_OK; ++j) {
    s = checkWholeTensor(&in[j], &meshes[j], &layouts[j], err, errSize);
    for (int k = 0; k < j && s == DTRT_OK; ++k)
      if (!strcmp(in[k].name, in[j].name))
        s = fail(DTRT_ERR_INVALID, err, errSize, "'%s' is given twice",
                 in[j].name);
  }
  if (s == DTRT_OK)
    s = replaceable(dir, err, errSize);
  CkptMeta meta = {DTRT_CHECKPOINT_VERSION, 0, NULL};
  struct stat st;
  if (s == DTRT_OK && lstat(dir, &st) == 0 &&
      !dtCkptMetaRead(dir, &meta, why, sizeof(why)))
    s = fail(DTRT_ERR_INVALID, err, errSize, "%s", why);
  char staged[4096] = "";
  if (s == DTRT_OK)
    s = stage(dir, staged, sizeof(staged), err, errSize);
  /* The other tensors' files are linked into the new directory; a named
   * one is replaced in its place, a new one added at the end. */
  int kept = meta.numTensors;
  for (int j = 0; j < n; ++j)
    slot[j] = -1;
  for (int i = 0; i < meta.numTensors && s == DTRT_OK; ++i) {
    int j = 0;
    while (j < n && strcmp(meta.tensors[i].name, in[j].name))
      ++j;
    if (j < n) {
      slot[j] = i;
      dtCkptTensorFree(&meta.tensors[i]);
      memset(&meta.tensors[i], 0, sizeof(CkptTensor));
      continue;
    }
    for (int k = 0; k < meta.tensors[i].numShards && s == DTRT_OK; ++k) {
      char from[4200], to[4200];
      snprintf(from, sizeof(from), "%s/%s", dir,
               meta.tensors[i].shards[k].file);
      snprintf(to, sizeof(to), "%s/%s", staged, meta.tensors[i].shards[k].file);
      if (link(from, to) != 0)
        s = fail(DTRT_ERR_SYSTEM, err, errSize, "linking %s: %s", from,
                 strerror(errno));
    }
  }
  int added = 0;
  for (int j = 0; j < n; ++j)
    added += slot[j] < 0;
  if (s == DTRT_OK && added) {
    CkptTensor *grown =
        realloc(meta.tensors, sizeof(CkptTensor) * (size_t)(kept + added));
    if (grown) {
      meta.tensors = grown;
      memset(&meta.tensors[kept], 0, sizeof(CkptTensor) * (size_t)added);
      for (int j = 0; j < n; ++j)
        if (slot[j] < 0)
          slot[j] = meta.numTensors++;
    } else {
      s = fail(DTRT_ERR_NOMEM, err, errSize, "out of memory");
    }
  }
  for (int j = 0; j < n && s == DTRT_OK; ++j) {
    CkptTensor *t = &meta.tensors[slot[j]];
    snprintf(t->name, sizeof(t->name), "%s", in[j].name);
    t->dtype = in[j].dtype;
    t->rank = in[j].rank;
    for (int d = 0; d < in[j].rank; ++d)
      t->shape[d] = in[j].shape[d];
    dtensorMeshPrint(meshes[j], t->mesh, sizeof(t->mesh));
    dtensorShardingSpecPrint(&layouts[j].spec, t->spec, sizeof(t->spec));
    FromGlobal g = {t, &layouts[j], in[j].block};
    if (!writeTensor(staged, t, &layouts[j], fillFromGlobal, &g, why,
                     sizeof(why)))
      s = fail(DTRT_ERR_SYSTEM, err, errSize, "%s", why);
  }
  if (s == DTRT_OK)
    s = commit(staged, dir, &meta, err, errSize);
  else if (staged[0])
    dtCkptRemoveDir(staged);
  dtCkptMetaFree(&meta);
  for (int j = 0; meshes && j < n; ++j)
    dtensorMeshDestroy(meshes[j]);
  free(meshes);
  free(layouts);
  free(slot);
  return s;
}

typedef struct FromSaved {
  const char *dir;
  const CkptTensor *saved;
  const DtensorLayout *l;
} FromSaved;

static bool fillFromSaved(void *user, int64_t device, void *block, char *why,
                          size_t size) {
  FromSaved *f = user;
  return dtCkptReadBlock(f->dir, f->saved, f->l, device, block,
                         CKPT_READ_CHECKED, NULL, why, size);
}

static DtrtStatus
convertLocked(const char *dir, const char *outDir, const char *meshText,
              int numSpecs, const char *const *names, const char *const *specs,
              const char *defaultSpec, char *err, size_t errSize) {
  DtrtCheckpoint *c;
  DtrtStatus s = dtrtCheckpointOpen(dir, &c, err, errSize);
  if (s != DTRT_OK)
    return s;
  for (int k = 0; k < numSpecs && s == DTRT_OK; ++k)
    if (!dtCkptMetaFind(&c->meta, names[k]))
      s = fail(DTRT_ERR_INVALID, err, errSize,
               "%s/%s: no tensor '%s' to "
               "give spec '%s'",
               dir, DTRT_CHECKPOINT_METADATA, names[k], specs[k]);
  char staged[4096] = "", why[CKPT_ERROR_SIZE];
  /* Every shard checked first: a shard read in part is not checksummed as
   * it is read, and a flipped bit must not pass into the new checkpoint
   * under a fresh checksum. */
  for (int i = 0; i < c->meta.numTensors && s == DTRT_OK; ++i)
    if (!dtCkptVerifyTensor(dir, &c->meta.tensors[i], why, sizeof(why)))
      s = fail(DTRT_ERR_INVALID, err, errSize, "%s (nothing converted)", why);
  if (s == DTRT_OK)
    s = replaceable(outDir, err, errSize);
  if (s == DTRT_OK)
    s = stage(outDir, staged, sizeof(staged), err, errSize);
  CkptMeta out = {DTRT_CHECKPOINT_VERSION, 0,
                  calloc((size_t)c->meta.numTensors + 1, sizeof(CkptTensor))};
  for (int i = 0; i < c->meta.numTensors && s == DTRT_OK; ++i) {
    const CkptTensor *saved = &c->meta.tensors[i];
    const char *spec = defaultSpec;
    char replicated[64] = "[";
    for (int k = 0; k < numSpecs; ++k)
      if (!strcmp(names[k], saved->name))
        spec = specs[k];
    if (!spec) { /* no spec given: replicated on the new mesh */
      for (int d = 0; d < saved->rank; ++d)
        strcat(replicated, d ? ", R" : "R");
      strcat(replicated, "]");
      spec = replicated;
    }
    DtensorMesh *mesh;
    DtensorLayout l;
    if (!dtCkptLayout(meshText, spec, saved->dtype, saved->rank, saved->shape,
                      &mesh, &l, why, sizeof(why))) {
      s = fail(DTRT_ERR_INVALID, err, errSize, "'%s': %s", saved->name, why);
      break;
    }
    CkptTensor *t = &out.tensors[out.numTensors++];
    *t = *saved;
    t->shards = NULL;
    t->numShards = 0;
    dtensorMeshPrint(mesh, t->mesh, sizeof(t->mesh));
    dtensorShardingSpecPrint(&l.spec, t->spec, sizeof(t->spec));
    FromSaved f = {dir, saved, &l};
    if (dtensorShardingSpecIsPartial(&l.spec))
      s = fail(DTRT_ERR_INVALID, err, errSize,
               "'%s': a saved tensor is "
               "whole; spec '%s' is Partial",
               saved->name, spec);
    else if (!writeTensor(staged, t, &l, fillFromSaved, &f, why, sizeof(why)))
      s = fail(DTRT_ERR_INVALID, err, errSize, "%s", why);
    dtensorMeshDestroy(mesh);
  }
  if (s == DTRT_OK)
    s = commit(staged, outDir, &out, err, errSize);
  else if (staged[0])
    dtCkptRemoveDir(staged);
  dtCkptMetaFree(&out);
  dtrtCheckpointClose(c);
  return s;
}

/* The writers below hold the target's lock from staging to commit: a
 * concurrent save into the same directory fails instead of losing one. */

/* Resolves `dir` once and takes its lock: the target in `target`, the lock
 * in `*outLock`. */
static DtrtStatus resolveAndLock(const char *dir, char *target, size_t size,
                                 int *outLock, char *err, size_t errSize) {
  char why[CKPT_ERROR_SIZE];
  *outLock = -1;
  if (!dir)
    return fail(DTRT_ERR_INVALID, err, errSize, "no checkpoint directory");
  if (!dtCkptResolveTarget(dir, target, size, why, sizeof(why)) ||
      (*outLock = dtCkptLock(target, why, sizeof(why))) < 0)
    return fail(DTRT_ERR_INVALID, err, errSize, "%s", why);
  return DTRT_OK;
}

DtrtStatus dtrtCheckpointWriteTensors(const char *dir, int numTensors,
                                      const DtrtTensor *tensors, char *err,
                                      size_t errSize) {
  char target[PATH_MAX];
  int lock;
  DtrtStatus s =
      resolveAndLock(dir, target, sizeof(target), &lock, err, errSize);
  if (s == DTRT_OK)
    s = writeTensorsLocked(target, numTensors, tensors, err, errSize);
  dtCkptUnlock(lock);
  return s;
}

DtrtStatus dtrtCheckpointWriteTensor(const char *dir, const DtrtTensor *in,
                                     char *err, size_t errSize) {
  return dtrtCheckpointWriteTensors(dir, 1, in, err, errSize);
}

DtrtStatus dtrtCheckpointConvert(const char *dir, const char *outDir,
                                 const char *meshText, int numSpecs,
                                 const char *const *names,
                                 const char *const *specs,
                                 const char *defaultSpec, char *err,
                                 size_t errSize) {
  char target[PATH_MAX];
  int lock;
  DtrtStatus s =
      resolveAndLock(outDir, target, sizeof(target), &lock, err, errSize);
  if (s == DTRT_OK)
    s = convertLocked(dir, target, meshText, numSpecs, names, specs,
                      defaultSpec, err, errSize);
  dtCkptUnlock(lock);
  return s;
}
