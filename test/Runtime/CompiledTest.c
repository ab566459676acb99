/* The compiled-code entry point on real processes (4 ranks, a 2x2 mesh):
 * every collective kind on 2-D blocks with the gather/shard dim 0 or 1
 * (blocks the runtime packs, and blocks it sends and receives in place),
 * groups along each mesh axis, blocking (dtrt_mlir_collective) and started
 * then waited for (dtrt_mlir_collective_start, dtrt_mlir_wait, two in
 * flight at once), checked element by element against the dialect's
 * semantics of padded blocks. */
#include "dtensor-rt/Runtime.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Memref2 {
  void *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} Memref2;

typedef struct Memref1 {
  void *allocated, *aligned;
  int64_t offset, sizes[1], strides[1];
} Memref1;

static int failures = 0, checks = 0, me = 0, started = 0;

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
  if (!started) {
    dtrt_mlir_collective(kind, DTRT_F32, reduce, gd, sd, 0, 2, in, 2, out, 1,
                         &mesh, 1, &ax);
    return;
  }
  /* Another collective in flight meanwhile (an all_reduce of a scratch
   * block), waited for after this one. */
  float x[2] = {1, (float)me}, y[2];
  Memref2 xin = block(x, 1, 2), yout = block(y, 1, 2);
  int64_t other =
      dtrt_mlir_collective_start(DTRT_MLIR_ALL_REDUCE, DTRT_F32, DTRT_SUM, -1,
                                 -1, 0, 2, &xin, 2, &yout, 1, &mesh, 1, &ax);
  int64_t request = dtrt_mlir_collective_start(
      kind, DTRT_F32, reduce, gd, sd, 0, 2, in, 2, out, 1, &mesh, 1, &ax);
  /* In flight (a request) unless DTENSOR_OVERLAP=0 completed it or there
   * is nothing to send. */
  const char *overlap = getenv("DTENSOR_OVERLAP");
  bool blocking =
      (overlap && !strcmp(overlap, "0")) || kind == DTRT_MLIR_LOCAL_SPLIT;
  ++checks;
  if ((request == 0) != blocking && ++failures < 10)
    fprintf(stderr, "rank %d: kind %lld started with request %lld\n", me,
            (long long)kind, (long long)request);
  dtrt_mlir_wait(request);
  dtrt_mlir_wait(other);
  ++checks;
  if ((y[0] != 2 || y[1] != (float)(member(axis, 0) + member(axis, 1))) &&
      ++failures < 10)
    fprintf(stderr, "rank %d: the all_reduce in flight gave %g %g\n", me, y[0],
            y[1]);
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
  me = dtrtRank(dtrtProcessContext());
  float a[3 * 4], o[8 * 8];
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      a[i * 4 + j] = value(me, i, j);
  Memref2 in = block(a, 3, 4);
  float t[4 * 3];
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j)
      t[i * 3 + j] = value(me, i, j);
  Memref2 tall = block(t, 4, 3);
  for (int step = 0; step < 4; ++step) {
    int axis = step % 2;
    started = step / 2;
    int pos = axis == 0 ? me / 2 : me % 2;
    /* all_gather on dim 0 (3 -> 5: truncated) and on dim 1 (4 -> 8). */
    Memref2 out = block(o, 5, 4);
    run(DTRT_MLIR_ALL_GATHER, 0, 0, -1, &in, &out, axis);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 4; ++j)
        CHECK(o[i * 4 + j] == value(member(axis, (int)(i / 3)), i % 3, j),
              "all_gather dim 0 axis %d (%lld,%lld)", axis, (long long)i,
              (long long)j);
    /* On dim 0 without padding (3 -> 6): received in place. */
    out = block(o, 6, 4);
    run(DTRT_MLIR_ALL_GATHER, 0, 0, -1, &in, &out, axis);
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 4; ++j)
        CHECK(o[i * 4 + j] == value(member(axis, (int)(i / 3)), i % 3, j),
              "all_gather dim 0 in place");
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
    /* reduce_scatter of dim 0: 4 -> 2 (sent in place), and 3 -> 2 (the
     * last position's second row is padding: zero). */
    out = block(o, 2, 3);
    run(DTRT_MLIR_REDUCE_SCATTER, DTRT_SUM, -1, 0, &tall, &out, axis);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        CHECK(o[i * 3 + j] == value(member(axis, 0), pos * 2 + i, j) +
                                  value(member(axis, 1), pos * 2 + i, j),
              "reduce_scatter dim 0 in place");
    out = block(o, 2, 4);
    run(DTRT_MLIR_REDUCE_SCATTER, DTRT_SUM, -1, 0, &in, &out, axis);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        int64_t row = pos * 2 + i;
        float want = row < 3 ? value(member(axis, 0), row, j) +
                                   value(member(axis, 1), row, j)
                             : 0.0f;
        CHECK(o[i * 4 + j] == want, "reduce_scatter dim 0 padded");
      }
    /* all_to_all: gather dim 0 (3 -> 6), shard dim 1 (4 -> 2). */
    out = block(o, 6, 2);
    run(DTRT_MLIR_ALL_TO_ALL, 0, 0, 1, &in, &out, axis);
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 2; ++j)
        CHECK(o[i * 2 + j] ==
                  value(member(axis, (int)(i / 3)), i % 3, pos * 2 + j),
              "all_to_all (%lld,%lld): %g", (long long)i, (long long)j,
              o[i * 2 + j]);
    /* all_to_all: gather dim 1 (3 -> 6), shard dim 0 (4 -> 2): sent in
     * place, unpacked at the end. */
    out = block(o, 2, 6);
    run(DTRT_MLIR_ALL_TO_ALL, 0, 1, 0, &tall, &out, axis);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 6; ++j)
        CHECK(o[i * 6 + j] ==
                  value(member(axis, (int)(j / 3)), pos * 2 + i, j % 3),
              "all_to_all gather 1 shard 0 (%lld,%lld): %g", (long long)i,
              (long long)j, o[i * 6 + j]);
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
  /* The collectives' time was counted. */
  CHECK(dtrtCompiledCommSeconds() > 0, "no time in collectives counted");
  printf("rank %d: %d passed, %d failed\n", me, checks - failures, failures);
  return failures ? 1 : 0;
}
