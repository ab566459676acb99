/*===- dtensor-rt/Checkpoint.h - sharded checkpoints ---------------*- C -*-===*
 *
 * Save named tensors from each rank's local block in any layout, and load
 * them into any other layout on any number of ranks: each rank reads only
 * the byte ranges of the saved shards that overlap its block. The format
 * (one metadata file plus a data file per distinct block) is in
 * docs/checkpoint.md.
 *
 *===----------------------------------------------------------------------===*/
#ifndef DTENSOR_RT_CHECKPOINT_H
#define DTENSOR_RT_CHECKPOINT_H

#include "dtensor-rt/Runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The format version this runtime writes (and the newest it reads).
#define DTRT_CHECKPOINT_VERSION 1

/// The name of the metadata file in a checkpoint directory.
#define DTRT_CHECKPOINT_METADATA "dtensor-checkpoint.json"

/// One tensor of a checkpoint as a rank holds it.
typedef struct DtrtTensor {
  const char *name; /* letters, digits, '_', '-', '.'; unique */
  DtrtDtype dtype;
  int rank;             /* 1 to 16 dims (0: a scalar) */
  const int64_t *shape; /* the global shape */
  const char *mesh;     /* the mesh, as dtensor-plan takes it: "2x4",
                           "dp=2,tp=4"; row-major over the job's ranks */
  const char *spec;     /* the sharding spec: "[S0, R]", "[R, S(tp)] Psum(0)" */
  void *block;          /* this rank's local block, padded to the largest
                           block's shape (the compiled programs' convention) */
} DtrtTensor;

/// Saves `tensors` into `dir`, collectively: every rank of the world calls it
/// with the same names, types, shapes, meshes and specs and its own blocks.
/// Partial values are reduced first (the checkpoint holds the reduced
/// tensor; the blocks are not changed); each distinct block is written once
/// (by the lowest rank holding it). The save is atomic: it is written beside
/// `dir` and swapped into place at the end, so a failure or a crash leaves a
/// previous checkpoint at `dir` intact. Returns the same status on every
/// rank; dtrtLastError says what failed.
DTRT_EXPORT DtrtStatus dtrtCheckpointSave(DtrtContext *context, const char *dir,
                                          int numTensors,
                                          const DtrtTensor *tensors);

/// Loads `tensors` from `dir` into this rank's blocks under the given
/// layouts, collectively, on any number of ranks and any layouts (Partial
/// specs are refused: a loaded value is whole). Each rank reads only the
/// parts of the saved shards its block needs. A name that is missing, or an
/// element type or global shape that differs from the saved one, is an
/// error naming the file; so are truncated and (where a shard is needed
/// whole) corrupted data files. These are all found before any block is
/// written, on every rank, so a bad checkpoint changes no block; only an
/// I/O error in the reads after the checks can leave blocks partly loaded.
/// Returns the same status on every rank.
DTRT_EXPORT DtrtStatus dtrtCheckpointLoad(DtrtContext *context, const char *dir,
                                          int numTensors,
                                          const DtrtTensor *tensors);

/* ---- offline: one process, no context (dtensor-ckpt, scripts) ------------ */

/* These report failures in `outError` (`errorSize` bytes), naming the file
 * and what is wrong, and return DTRT_ERR_INVALID (bad input or data) or
 * DTRT_ERR_SYSTEM (I/O). Writes are atomic as dtrtCheckpointSave's. */

/// A checkpoint's metadata, read once (opaque).
typedef struct DtrtCheckpoint DtrtCheckpoint;

/// Reads the metadata of the checkpoint in `dir`; the caller closes it.
DTRT_EXPORT DtrtStatus dtrtCheckpointOpen(const char *dir,
                                          DtrtCheckpoint **outCheckpoint,
                                          char *outError, size_t errorSize);

/// Frees it; NULL is a no-op.
DTRT_EXPORT void dtrtCheckpointClose(DtrtCheckpoint *checkpoint);

/// The number of tensors, and tensor `index` as it was saved (name, type,
/// shape, mesh, spec; `block` NULL; strings borrowed from the checkpoint),
/// with its number of shard files and their bytes.
DTRT_EXPORT int dtrtCheckpointNumTensors(const DtrtCheckpoint *checkpoint);
DTRT_EXPORT void dtrtCheckpointGetTensor(const DtrtCheckpoint *checkpoint,
                                         int index, DtrtTensor *outTensor,
                                         int *outNumShards, int64_t *outBytes);

/// Checks every shard file of the checkpoint: present, of the size and the
/// CRC-32 the metadata gives.
DTRT_EXPORT DtrtStatus dtrtCheckpointVerify(const char *dir, char *outError,
                                            size_t errorSize);

/// Reads tensor `name` whole into `out` (row-major, `outBytes` must be its
/// size) from every shard.
DTRT_EXPORT DtrtStatus dtrtCheckpointReadTensor(const char *dir,
                                                const char *name, void *out,
                                                size_t outBytes, char *outError,
                                                size_t errorSize);

/// Writes `tensor` (its `block` the whole tensor, row-major) into the
/// checkpoint in `dir` under its mesh and (non-Partial) spec, replacing a
/// tensor of the same name and keeping the others; creates the checkpoint
/// if `dir` does not exist. A link at `dir` (latest -> step-1) writes into
/// the directory it names.
DTRT_EXPORT DtrtStatus dtrtCheckpointWriteTensor(const char *dir,
                                                 const DtrtTensor *tensor,
                                                 char *outError,
                                                 size_t errorSize);

/// dtrtCheckpointWriteTensor for `numTensors` tensors at once (distinct
/// names): one staging directory and one commit, so a writer stopped
/// midway leaves the previous checkpoint whole, never a mix.
DTRT_EXPORT DtrtStatus dtrtCheckpointWriteTensors(const char *dir,
                                                  int numTensors,
                                                  const DtrtTensor *tensors,
                                                  char *outError,
                                                  size_t errorSize);

/// Rewrites the checkpoint in `dir` into `outDir` (which may be `dir`) on
/// mesh `mesh`, each tensor under the spec `specs` gives for its name
/// (`numSpecs` pairs `names[i]`, `specs[i]`) or else `defaultSpec` (NULL:
/// replicated); block by block, never holding a whole tensor.
DTRT_EXPORT DtrtStatus dtrtCheckpointConvert(
    const char *dir, const char *outDir, const char *mesh, int numSpecs,
    const char *const *names, const char *const *specs, const char *defaultSpec,
    char *outError, size_t errorSize);

#ifdef __cplusplus
}
#endif

#endif /* DTENSOR_RT_CHECKPOINT_H */
