/* Private parts of the checkpoint code: messages, types and the shards of
 * a layout (CkptFormat.c), the metadata (CkptMeta.c), reading any block of
 * any layout from saved shards and writing one shard (CkptShards.c), the
 * file-system steps of a write (CkptFiles.c). Used by the collective API
 * (Checkpoint.c) and by the offline tool dtensor-ckpt (CkptOffline.c). */
#ifndef DTENSOR_LIB_RUNTIME_CKPTINTERNAL_H
#define DTENSOR_LIB_RUNTIME_CKPTINTERNAL_H

#include "dtensor-c/Layout.h"
#include "dtensor-rt/Checkpoint.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define CKPT_ERROR_SIZE 512

/// One saved block: its data file and the global index ranges it holds.
typedef struct CkptShard {
  char file[160];
  int64_t device; /* the saving mesh's device that wrote it */
  int numRanges[DTENSOR_MAX_TENSOR_RANK];
  DtensorRange *ranges[DTENSOR_MAX_TENSOR_RANK];
  int64_t bytes;
  uint32_t crc;
} CkptShard;

typedef struct CkptTensor {
  char name[128];
  DtrtDtype dtype;
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  char mesh[256];
  char spec[256]; /* never Partial */
  int numShards;
  CkptShard *shards;
} CkptTensor;

typedef struct CkptMeta {
  int version;
  int numTensors;
  CkptTensor *tensors;
} CkptMeta;

/// Formats a message into `err` (`size` bytes); returns false, so callers
/// can `return dtCkptFail(...)`.
bool dtCkptFail(char *err, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/// Opens `path` for reading if it is a regular file (a FIFO or device would
/// block or never end: never waited on), with its status; -1 and a message
/// otherwise.
int dtCkptOpenRegular(const char *path, struct stat *st, char *err,
                      size_t errSize);

/// The number of elements `n` ranges of one dim cover.
int64_t dtCkptRangesLength(int n, const DtensorRange *r);

/// The ranges of `device` along every dim under `l` (each list allocated:
/// the caller frees them); returns the element count of its block.
int64_t dtCkptDeviceRanges(const DtensorLayout *l, int64_t device,
                           int *numRanges, DtensorRange **ranges);

/// The layout element type of a runtime type (by their shared name).
DtensorElementType dtCkptElementType(DtrtDtype dtype);

/// Whether `name` may name a tensor (it also names files).
bool dtCkptNameIsValid(const char *name);

/// Builds the mesh and layout of a tensor (mesh and spec text, global shape)
/// into `outMesh` (caller destroys) and `outLayout`; false with a message.
bool dtCkptLayout(const char *meshText, const char *specText, DtrtDtype dtype,
                  int rank, const int64_t *shape, DtensorMesh **outMesh,
                  DtensorLayout *outLayout, char *err, size_t errSize);

/// Fills `t`'s shards for a non-Partial layout: one per distinct block
/// (written by the lowest device holding it), empty blocks left out; file
/// names `<name>.<device>.bin`. Checksums are left 0.
bool dtCkptPlanShards(const DtensorLayout *layout, CkptTensor *t, char *err,
                      size_t errSize);

/// Frees the shards of `t` (not `t`).
void dtCkptTensorFree(CkptTensor *t);

/// Reads `dir`/dtensor-checkpoint.json; false with a message naming it.
bool dtCkptMetaRead(const char *dir, CkptMeta *out, char *err, size_t errSize);

/// Writes the metadata to `path` (fsync'd); false with a message.
bool dtCkptMetaWrite(const char *path, const CkptMeta *meta, char *err,
                     size_t errSize);

void dtCkptMetaFree(CkptMeta *meta);

/// Finds a tensor by name (NULL if absent).
const CkptTensor *dtCkptMetaFind(const CkptMeta *meta, const char *name);

/// Writes the block of `device` (a padded block under `layout`) as `shard`'s
/// file in `dir` (fsync'd) and sets its checksum; false with a message.
bool dtCkptWriteShard(const char *dir, const DtensorLayout *layout,
                      const void *paddedBlock, CkptShard *shard, char *err,
                      size_t errSize);

/// How dtCkptReadBlock treats the data.
typedef enum CkptReadMode {
  CKPT_READ_CHECKED, /* read; shards read whole are checked as they come */
  CKPT_VERIFY,       /* read nothing into the block: check the size of
                        every shard it needs and the checksum of those it
                        needs whole (a load's first phase) */
  CKPT_READ,         /* read, no checksums (after CKPT_VERIFY) */
} CkptReadMode;

/// Reads the block of `device` under `layout` (padded; padding untouched)
/// from the shards of `saved` in `dir`, each shard only where it overlaps
/// the block. A shard file of the wrong size is an error; a shard needed
/// whole is checked against its checksum (per `mode`). `outBytesRead` (may
/// be NULL) gets the bytes read. False with a message naming the file.
bool dtCkptReadBlock(const char *dir, const CkptTensor *saved,
                     const DtensorLayout *layout, int64_t device,
                     void *paddedBlock, CkptReadMode mode,
                     int64_t *outBytesRead, char *err, size_t errSize);

/// Copies the block of `device` under `layout` (padded) out of the whole
/// tensor `global` (row-major) of `t`'s shape and type.
void dtCkptBlockFromGlobal(const CkptTensor *t, const DtensorLayout *layout,
                           int64_t device, const void *global, void *block);

/// Checks every shard file of `t` in `dir` (size and checksum).
bool dtCkptVerifyTensor(const char *dir, const CkptTensor *t, char *err,
                        size_t errSize);

/// CRC-32 (gzip's, as zlib computes it) of `n` bytes, continuing `crc`
/// (start with 0).
uint32_t dtCkptCrc(uint32_t crc, const void *data, size_t n);

/// The directory a write into `dir` goes to, resolved once into `out`: an
/// existing `dir` (a link such as latest -> step-1 resolved to the
/// directory it names, which must be one), else its resolved parent and
/// its name. Every later step works on `out`, so a link swapped in
/// meanwhile is never followed. False with a message.
bool dtCkptResolveTarget(const char *dir, char *out, size_t size, char *err,
                         size_t errSize);

/// Makes a fresh private staging directory `dir`.tmp-XXXXXX (mkdtemp,
/// mode 0700) into `out`; false with a message.
bool dtCkptMakeStaging(const char *dir, char *out, size_t size, char *err,
                       size_t errSize);

/// Replaces `dir` (resolved) by `staged` atomically (renameat2
/// RENAME_EXCHANGE when `dir` exists, then removes the old one), giving it
/// the mode mkdir would; refuses a `dir` that is no longer a directory.
/// False with a message.
bool dtCkptCommit(const char *staged, const char *dir, char *err,
                  size_t errSize);

/// Removes a directory of this user and the files in it (not recursive),
/// never through a link: a link at `dir` or in it is not followed (one in
/// it is removed itself), another user's directory is left.
void dtCkptRemoveDir(const char *dir);

/// Takes the exclusive lock on writing `dir` (flock on `dir`.lock, created
/// if needed with mode 0600 and refused unless it is this user's and
/// private, released when the holder exits however it exits): a file
/// descriptor for dtCkptUnlock, or -1 and a message when another writer
/// holds it (it does not wait). Every writer of a checkpoint holds it from
/// its staging to its commit, so staging directories of `dir` found while
/// holding it are left by writers that died.
int dtCkptLock(const char *dir, char *err, size_t errSize);

/// Releases a lock from dtCkptLock (-1: no-op).
void dtCkptUnlock(int fd);

/// Removes this user's staging directories `dir`.tmp-* (call while holding
/// the lock: they are left by writers that died), never through a link.
void dtCkptRemoveStaleStaging(const char *dir);

#endif
