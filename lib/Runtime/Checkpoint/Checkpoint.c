/* Collective save and load of sharded checkpoints (docs/checkpoint.md):
 * every rank checks its arguments, the ranks agree on every failure (each
 * rank's message is gathered, so all report the first one), Partial values
 * are reduced over their axes before saving, each distinct block is
 * written once into a directory beside the target that rank 0 swaps into
 * place at the end; a load first checks everything it will read (sizes,
 * checksums of the shards it needs whole) on every rank, and reads into
 * the blocks only when every rank's checks passed. */
#include "CkptInternal.h"
#include "Runtime/RuntimeInternal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MESSAGE_INTS 64 /* a rank's message, gathered: 256 bytes */

/* Agrees on a step: every rank contributes its message ("" if it
 * succeeded); returns DTRT_OK if all succeeded, else records the first
 * failing rank's message in the context. */
static DtrtStatus agree(DtrtContext *c, DtrtStatus mine, const char *message) {
  DtrtComm *world = dtrtCommWorld(c);
  int n = dtrtWorldSize(c);
  int32_t local[MESSAGE_INTS + 1] = {0};
  local[0] = (int32_t)mine;
  if (mine != DTRT_OK)
    snprintf((char *)&local[1], MESSAGE_INTS * 4, "%s", message);
  int32_t *all = calloc((size_t)n * (MESSAGE_INTS + 1), sizeof(int32_t));
  if (!all)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  DtrtStatus s = dtrtAllGather(world, local, all, MESSAGE_INTS + 1, DTRT_I32);
  if (s != DTRT_OK) {
    free(all);
    return s;
  }
  for (int r = 0; r < n; ++r) {
    int32_t *rec = all + (size_t)r * (MESSAGE_INTS + 1);
    if (rec[0] != DTRT_OK) {
      char text[MESSAGE_INTS * 4 + 1];
      memcpy(text, &rec[1], MESSAGE_INTS * 4);
      text[MESSAGE_INTS * 4] = 0;
      s = r == c->rank
              ? dtrtFail(c, (DtrtStatus)rec[0], "%s", text)
              : dtrtFail(c, (DtrtStatus)rec[0], "rank %d: %s", r, text);
      break;
    }
  }
  free(all);
  return s;
}

/* One tensor's layout on this job, checked. */
typedef struct Item {
  DtensorMesh *mesh;
  DtensorLayout layout;
  size_t paddedBytes;
} Item;

static void freeItems(Item *items, int n) {
  for (int i = 0; i < n; ++i)
    dtensorMeshDestroy(items[i].mesh);
  free(items);
}

static bool checkTensors(DtrtContext *c, const char *dir, int n,
                         const DtrtTensor *t, Item *items, bool load, char *err,
                         size_t errSize) {
  if (!dir || !*dir) {
    snprintf(err, errSize, "no checkpoint directory");
    return false;
  }
  if (n < 0 || (n > 0 && !t)) {
    snprintf(err, errSize, "%d tensors", n);
    return false;
  }
  for (int i = 0; i < n; ++i) {
    const char *name = t[i].name ? t[i].name : "(null)";
    if (!t[i].name || !dtCkptNameIsValid(t[i].name)) {
      snprintf(err, errSize,
               "tensor %d: name '%s' (valid: 1 to 100 letters, "
               "digits, '_', '-', '.', not starting with '.')",
               i, name);
      return false;
    }
    for (int j = 0; j < i; ++j)
      if (!strcmp(t[j].name, t[i].name)) {
        snprintf(err, errSize, "tensor '%s' is listed twice", name);
        return false;
      }
    if (!dtrtDtypeSize(t[i].dtype) || !t[i].mesh || !t[i].spec ||
        (t[i].rank > 0 && !t[i].shape) || !t[i].block) {
      snprintf(err, errSize,
               "tensor '%s': invalid element type, or a NULL "
               "mesh, spec, shape or block",
               name);
      return false;
    }
    char why[CKPT_ERROR_SIZE];
    if (!dtCkptLayout(t[i].mesh, t[i].spec, t[i].dtype, t[i].rank, t[i].shape,
                      &items[i].mesh, &items[i].layout, why, sizeof(why))) {
      snprintf(err, errSize, "tensor '%s': %s", name, why);
      return false;
    }
    int64_t devices = dtensorMeshGetNumDevices(items[i].mesh);
    if (devices != c->worldSize) {
      snprintf(err, errSize,
               "tensor '%s': mesh '%s' has %lld devices but "
               "the job has %d ranks",
               name, t[i].mesh, (long long)devices, c->worldSize);
      return false;
    }
    if (load && dtensorShardingSpecIsPartial(&items[i].layout.spec)) {
      snprintf(err, errSize,
               "tensor '%s': a loaded value is whole; spec "
               "'%s' is Partial",
               name, t[i].spec);
      return false;
    }
    int64_t pad[DTENSOR_MAX_TENSOR_RANK], elems = 1;
    dtensorLayoutGetMaxLocalShape(&items[i].layout, pad);
    for (int d = 0; d < t[i].rank; ++d)
      elems *= pad[d];
    items[i].paddedBytes = (size_t)elems * dtrtDtypeSize(t[i].dtype);
  }
  return true;
}

/* The runtime's reduction of a compiler's reduce kind (by their shared
 * name; ctest dtype-test). */
static DtrtReduce reduceOf(DtensorReduceKind k) {
  const char *name = dtensorReduceKindGetName(k);
  DtrtReduce r = DTRT_SUM;
  dtrtReduceParse(name, strlen(name), &r);
  return r;
}

/* Reduces a Partial block over its Partial axes (one all_reduce per axis,
 * each with its own kind) into `out`, and clears the Partial in the
 * layout. */
static DtrtStatus reducePartial(DtrtContext *c, Item *it, const void *block,
                                void *out, DtrtDtype dtype) {
  memcpy(out, block, it->paddedBytes);
  DtensorLayout *l = &it->layout;
  int meshRank = dtensorMeshGetRank(l->mesh);
  int64_t shape[DTENSOR_MAX_MESH_RANK];
  for (int a = 0; a < meshRank; ++a)
    shape[a] = dtensorMeshGetAxisSize(l->mesh, a);
  for (int a = 0; a < meshRank; ++a) {
    if (l->spec.partial[a] == DTENSOR_REDUCE_NONE)
      continue;
    DtrtComm *group;
    DtrtStatus s = dtrtCommForMeshAxes(c, meshRank, shape, 1, &a, &group);
    if (s == DTRT_OK)
      s = dtrtAllReduce(group, out, out, it->paddedBytes / dtrtDtypeSize(dtype),
                        dtype, reduceOf(l->spec.partial[a]));
    if (s != DTRT_OK)
      return s;
    l->spec.partial[a] = DTENSOR_REDUCE_NONE;
  }
  return DTRT_OK;
}

DtrtStatus dtrtCheckpointSave(DtrtContext *c, const char *dir, int n,
                              const DtrtTensor *t) {
  if (!c || !c->usable)
    return DTRT_ERR_INVALID;
  char err[CKPT_ERROR_SIZE] = "";
  DtrtStatus mine = DTRT_OK;
  Item *items = calloc((size_t)(n > 0 ? n : 1), sizeof(Item));
  if (!checkTensors(c, dir, n, t, items, false, err, sizeof(err)))
    mine = DTRT_ERR_INVALID;
  DtrtStatus s = agree(c, mine, err);
  if (s != DTRT_OK) {
    freeItems(items, n);
    return s;
  }
  /* Rank 0 takes the target's lock (another job saving there makes this
   * save fail, touching nothing) and prepares the staging directory beside
   * the target. */
  /* The target is resolved once (a link such as latest -> step-1 names
   * the directory written), and the staging directory is made fresh and
   * private; its name goes to every rank. */
  char staged[4096] = "", target[4096] = "";
  int lock = -1;
  if (c->rank == 0) {
    struct stat st;
    char meta[4200];
    if (!dtCkptResolveTarget(dir, target, sizeof(target), err, sizeof(err))) {
      mine = DTRT_ERR_INVALID;
    } else if (snprintf(meta, sizeof(meta), "%s/%s", target,
                        DTRT_CHECKPOINT_METADATA) > 0 &&
               lstat(target, &st) == 0 && lstat(meta, &st) != 0) {
      snprintf(err, sizeof(err),
               "%s exists and is not a checkpoint (no %s); "
               "refusing to replace it",
               target, DTRT_CHECKPOINT_METADATA);
      mine = DTRT_ERR_INVALID;
    } else if ((lock = dtCkptLock(target, err, sizeof(err))) < 0) {
      mine = DTRT_ERR_INVALID;
    } else {
      dtCkptRemoveStaleStaging(target); /* left by saves that died */
      if (!dtCkptMakeStaging(target, staged, sizeof(staged), err, sizeof(err)))
        mine = DTRT_ERR_SYSTEM;
    }
  }
  if ((s = agree(c, mine, err)) != DTRT_OK ||
      (c->worldSize > 1 &&
       (s = dtrtBroadcast(dtrtCommWorld(c), staged, sizeof(staged) / 4,
                          DTRT_I32, 0)) != DTRT_OK)) {
    if (c->rank == 0 && staged[0])
      dtCkptRemoveDir(staged);
    dtCkptUnlock(lock);
    freeItems(items, n);
    return s;
  }
  /* Reduce Partial values, plan the shards, write this rank's. */
  CkptMeta meta = {DTRT_CHECKPOINT_VERSION, n,
                   calloc((size_t)(n > 0 ? n : 1), sizeof(CkptTensor))};
  int totalShards = 0;
  for (int i = 0; i < n && s == DTRT_OK; ++i) {
    const void *block = t[i].block;
    void *reduced = NULL;
    if (dtensorShardingSpecIsPartial(&items[i].layout.spec)) {
      reduced = malloc(items[i].paddedBytes + 1);
      s = reduced ? reducePartial(c, &items[i], t[i].block, reduced, t[i].dtype)
                  : dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
      block = reduced;
    }
    CkptTensor *ct = &meta.tensors[i];
    snprintf(ct->name, sizeof(ct->name), "%s", t[i].name);
    ct->dtype = t[i].dtype;
    ct->rank = t[i].rank;
    for (int d = 0; d < t[i].rank; ++d)
      ct->shape[d] = t[i].shape[d];
    dtensorMeshPrint(items[i].mesh, ct->mesh, sizeof(ct->mesh));
    dtensorShardingSpecPrint(&items[i].layout.spec, ct->spec, sizeof(ct->spec));
    if (s == DTRT_OK && mine == DTRT_OK &&
        !dtCkptPlanShards(&items[i].layout, ct, err, sizeof(err)))
      mine = DTRT_ERR_INVALID;
    for (int k = 0; k < ct->numShards && mine == DTRT_OK; ++k)
      if (ct->shards[k].device == c->rank &&
          !dtCkptWriteShard(staged, &items[i].layout, block, &ct->shards[k],
                            err, sizeof(err)))
        mine = DTRT_ERR_SYSTEM;
    totalShards += ct->numShards;
    free(reduced);
  }
  if (s != DTRT_OK) { /* a collective failed: the ranks disagree already */
    if (c->rank == 0)
      dtCkptRemoveDir(staged);
    dtCkptUnlock(lock);
    dtCkptMetaFree(&meta);
    freeItems(items, n);
    return s;
  }
  /* Every shard's checksum, from the rank that wrote it, to every rank. */
  int64_t *crcs = calloc((size_t)totalShards + 1, sizeof(int64_t));
  for (int i = 0, k = 0; i < n; ++i)
    for (int j = 0; j < meta.tensors[i].numShards; ++j, ++k)
      if (meta.tensors[i].shards[j].device == c->rank)
        crcs[k] = meta.tensors[i].shards[j].crc;
  s = agree(c, mine, err);
  if (s == DTRT_OK && totalShards)
    s = dtrtAllReduce(dtrtCommWorld(c), crcs, crcs, (size_t)totalShards,
                      DTRT_I64, DTRT_SUM);
  for (int i = 0, k = 0; s == DTRT_OK && i < n; ++i)
    for (int j = 0; j < meta.tensors[i].numShards; ++j, ++k)
      meta.tensors[i].shards[j].crc = (uint32_t)crcs[k];
  free(crcs);
  /* Rank 0 writes the metadata and swaps the directory into place. */
  mine = DTRT_OK;
  if (c->rank == 0) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", staged, DTRT_CHECKPOINT_METADATA);
    if (s != DTRT_OK)
      dtCkptRemoveDir(staged);
    else if (!dtCkptMetaWrite(path, &meta, err, sizeof(err)) ||
             !dtCkptCommit(staged, target, err, sizeof(err))) {
      mine = DTRT_ERR_SYSTEM;
      dtCkptRemoveDir(staged);
    }
  }
  dtCkptUnlock(lock);
  dtCkptMetaFree(&meta);
  freeItems(items, n);
  if (s != DTRT_OK)
    return s;
  return agree(c, mine, err);
}

DtrtStatus dtrtCheckpointLoad(DtrtContext *c, const char *dir, int n,
                              const DtrtTensor *t) {
  if (!c || !c->usable)
    return DTRT_ERR_INVALID;
  char err[CKPT_ERROR_SIZE] = "";
  DtrtStatus mine = DTRT_OK;
  Item *items = calloc((size_t)(n > 0 ? n : 1), sizeof(Item));
  const CkptTensor **saved =
      calloc((size_t)(n > 0 ? n : 1), sizeof(CkptTensor *));
  CkptMeta meta = {0, 0, NULL};
  if (!checkTensors(c, dir, n, t, items, true, err, sizeof(err)) ||
      !dtCkptMetaRead(dir, &meta, err, sizeof(err)))
    mine = DTRT_ERR_INVALID;
  char metaPath[4096];
  snprintf(metaPath, sizeof(metaPath), "%s/%s", dir ? dir : "",
           DTRT_CHECKPOINT_METADATA);
  /* First every check, touching no block: names, types, shapes, then the
   * size of every shard file this rank needs and the checksum of those it
   * needs whole. */
  for (int i = 0; i < n && mine == DTRT_OK; ++i) {
    const CkptTensor *st = saved[i] = dtCkptMetaFind(&meta, t[i].name);
    bool sameShape = st && st->rank == t[i].rank;
    for (int d = 0; sameShape && d < t[i].rank; ++d)
      sameShape = st->shape[d] == t[i].shape[d];
    if (!st) {
      snprintf(err, sizeof(err), "%s: no tensor '%s'", metaPath, t[i].name);
      mine = DTRT_ERR_INVALID;
    } else if (st->dtype != t[i].dtype) {
      snprintf(err, sizeof(err), "%s: '%s' was saved as %s, not %s", metaPath,
               t[i].name, dtrtDtypeName(st->dtype), dtrtDtypeName(t[i].dtype));
      mine = DTRT_ERR_INVALID;
    } else if (!sameShape) {
      char have[160] = "", want[160] = "";
      for (int d = 0, k = 0; d < st->rank; ++d)
        k += snprintf(have + k, sizeof(have) - (size_t)k, "%s%lld",
                      d ? "x" : "", (long long)st->shape[d]);
      for (int d = 0, k = 0; d < t[i].rank; ++d)
        k += snprintf(want + k, sizeof(want) - (size_t)k, "%s%lld",
                      d ? "x" : "", (long long)t[i].shape[d]);
      snprintf(err, sizeof(err), "%s: '%s' was saved with shape %s, not %s",
               metaPath, t[i].name, have, want);
      mine = DTRT_ERR_INVALID;
    } else if (!dtCkptReadBlock(dir, st, &items[i].layout, c->rank, NULL,
                                CKPT_VERIFY, NULL, err, sizeof(err))) {
      mine = DTRT_ERR_INVALID;
    }
  }
  DtrtStatus s = agree(c, mine, err);
  /* Then the reads, straight into the blocks (from the page cache when the
   * checks just read the files). */
  mine = DTRT_OK;
  for (int i = 0; i < n && s == DTRT_OK && mine == DTRT_OK; ++i)
    if (!dtCkptReadBlock(dir, saved[i], &items[i].layout, c->rank, t[i].block,
                         CKPT_READ, NULL, err, sizeof(err)))
      mine = DTRT_ERR_SYSTEM;
  if (s == DTRT_OK)
    s = agree(c, mine, err);
  free(saved);
  dtCkptMetaFree(&meta);
  freeItems(items, n);
  return s;
}
