/*===- dtensor-rt/Checkpoint.h - sharded checkpoints ----------------*- C -*-===*
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
  const char *name;     /* letters, digits, '_', '-', '.'; unique */
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
DTRT_EXPORT DtrtStatus dtrtCheckpointSave(DtrtContext *context,
                                          const char *dir, int numTensors,
                                          const DtrtTensor *tensors);

/// Loads `tensors` from `dir` into this rank's blocks under the given
/// layouts, collectively, on any number of ranks and any layouts (Partial
/// specs are refused: a loaded value is whole). Each rank reads only the
/// parts of the saved shards its block needs. A name that is missing, or an
/// element type or global shape that differs from the saved one, is an
/// error naming the file; so are truncated and (where a shard is read
/// whole) corrupted data files. On failure no block is changed. Returns the
/// same status on every rank.
DTRT_EXPORT DtrtStatus dtrtCheckpointLoad(DtrtContext *context,
                                          const char *dir, int numTensors,
                                          const DtrtTensor *tensors);

#ifdef __cplusplus
}
#endif

#endif /* DTENSOR_RT_CHECKPOINT_H */
