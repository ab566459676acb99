/* The compiled-code entry point on real processes (4 ranks, a 2x2 mesh):
 * every collective kind on 2-D blocks with the gather/shard dim 0 or 1,
 * groups along each mesh axis, checked element by element against the
 * dialect's semantics of padded blocks. */
#include "dtensor-rt/Runtime.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct Memref2 {
  void *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} Memref2;

typedef struct Memref1 {
  void *allocated, *aligned;
  int64_t offset, sizes[1], strides[1];
} Memref1;

static int failures = 0, checks = 0, me = 0;

static Memref2 block(float *data, int64_t r, int64_t c) {
  Memref2 m = {data, data, 0, {r, c}, {c, 1}};
  return m;
}

static float value(int rank, int64_t i, int64_t j) {
  return (float)(100 * rank + 10 * i + j);
}

static int64_t meshShape[2] = {2, 2};

/* Global rank of group position `p` along axis `axis` from this rank. */
static int member(int axis, int p) {
  int c0 = me / 2, c1 = me % 2;
  if (axis == 0)
    c0 = p;
  else
    c1 = p;
  return c0 * 2 + c1;
}

static void run(int64_t kind, int64_t reduce, int64_t gd, int64_t sd,
                Memref2 *in, Memref2 *out, int axis) {
  int64_t axes[1] = {axis};
  Memref1 mesh = {meshShape, meshShape, 0, {2}, {1}};
  Memref1 ax = {axes, axes, 0, {1}, {1}};
  dtrt_mlir_collective(kind, DTRT_F32, reduce, gd, sd, 0, 2, in, 2, out, 1,
                       &mesh, 1, &ax);
}

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    ++checks;                                                                  \
    if (!(cond) && ++failures < 10) {                                          \
      fprintf(stderr, "rank %d: line %d: ", me, __LINE__);                     \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
    }                                                                          \
  } while (0)

int main(void) {
  me = atoi(getenv("RANK") ? getenv("RANK") : "0");
  float a[3 * 4], o[8 * 8];
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      a[i * 4 + j] = value(me, i, j);
  Memref2 in = block(a, 3, 4);
  for (int axis = 0; axis < 2; ++axis) {
    int pos = axis == 0 ? me / 2 : me % 2;
    /* all_gather on dim 0 (3 -> 5: truncated) and on dim 1 (4 -> 8). */
    Memref2 out = block(o, 5, 4);
    run(DTRT_MLIR_ALL_GATHER, 0, 0, -1, &in, &out, axis);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 4; ++j)
        CHECK(o[i * 4 + j] == value(member(axis, (int)(i / 3)), i % 3, j),
              "all_gather dim 0 axis %d (%lld,%lld)", axis, (long long)i,
              (long long)j);
    out = block(o, 3, 8);
    run(DTRT_MLIR_ALL_GATHER, 0, 1, -1, &in, &out, axis);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 8; ++j)
        CHECK(o[i * 8 + j] == value(member(axis, (int)(j / 4)), i, j % 4),
              "all_gather dim 1");
    /* local_split of dim 1 (4 -> 2) and dim 0 (3 -> 2, the last short). */
    out = block(o, 3, 2);
    run(DTRT_MLIR_LOCAL_SPLIT, 0, -1, 1, &in, &out, axis);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j)
        CHECK(o[i * 2 + j] == value(me, i, pos * 2 + j), "local_split dim 1");
    out = block(o, 2, 4);
    run(DTRT_MLIR_LOCAL_SPLIT, 0, -1, 0, &in, &out, axis);
    for (int64_t i = 0; i < 2 && pos * 2 + i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j)
        CHECK(o[i * 4 + j] == value(me, pos * 2 + i, j), "local_split dim 0");
    /* reduce_scatter (sum) of dim 1. */
    out = block(o, 3, 2);
    run(DTRT_MLIR_REDUCE_SCATTER, DTRT_SUM, -1, 1, &in, &out, axis);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j)
        CHECK(o[i * 2 + j] == value(member(axis, 0), i, pos * 2 + j) +
                                  value(member(axis, 1), i, pos * 2 + j),
              "reduce_scatter dim 1");
    /* all_to_all: gather dim 0 (3 -> 6), shard dim 1 (4 -> 2). */
    out = block(o, 6, 2);
    run(DTRT_MLIR_ALL_TO_ALL, 0, 0, 1, &in, &out, axis);
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 2; ++j)
        CHECK(o[i * 2 + j] ==
                  value(member(axis, (int)(i / 3)), i % 3, pos * 2 + j),
              "all_to_all (%lld,%lld): %g", (long long)i, (long long)j,
              o[i * 2 + j]);
    /* all_reduce (max). */
    out = block(o, 3, 4);
    run(DTRT_MLIR_ALL_REDUCE, DTRT_MAX, -1, -1, &in, &out, axis);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j)
        CHECK(o[i * 4 + j] == value(member(axis, 1), i, j), "all_reduce max");
    /* permute: position 0 sends to 1 only (a chain), so position 0
     * receives zeros and position 1 gets position 0's block. */
    {
      int64_t axes[1] = {axis}, pairs[2] = {0, 1};
      Memref1 mesh = {meshShape, meshShape, 0, {2}, {1}};
      Memref1 ax = {axes, axes, 0, {1}, {1}};
      Memref1 pr = {pairs, pairs, 0, {2}, {1}};
      out = block(o, 3, 4);
      dtrt_mlir_permute_f32(2, &in, 2, &out, 1, &mesh, 1, &ax, 1, &pr);
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 4; ++j)
          CHECK(o[i * 4 + j] == (pos ? value(member(axis, 0), i, j) : 0.0f),
                "permute axis %d (%lld,%lld)", axis, (long long)i,
                (long long)j);
    }
    /* dtensor.mesh_index: this rank's coordinate along the axis. */
    Memref1 mesh = {meshShape, meshShape, 0, {2}, {1}};
    CHECK(dtrt_mlir_mesh_coord(axis, 1, &mesh) == pos, "mesh_coord axis %d",
          axis);
  }
  printf("rank %d: %d passed, %d failed\n", me, checks - failures, failures);
  return failures ? 1 : 0;
}
