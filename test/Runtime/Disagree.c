/* Ranks that call different collectives on one group: every rank must get
 * DTRT_ERR_MISMATCH naming rank 0's call and the first other rank's that
 * differs, before any data moves (without the check, 1 MiB and 4 MiB
 * all_gather blocks had rank 1 read 3 MiB past rank 0's block and exit 0).
 * The argument picks what the last rank changes: "count" (4x the
 * elements, large blocks), "small" (4 vs 5 elements, the slot path),
 * "kind", "dtype", "reduce", "root" (a broadcast's root), "second"
 * (one agreed all_gather runs first, then the counts differ). Exits 0
 * when the rank got the expected error, 1 otherwise. */
#include "dtensor-rt/Runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Blocking, except "kind" and "second", which start the collective on the
 * progress thread and wait for it. */
static DtrtStatus call(DtrtComm *comm, const DtrtCollective *op,
                       const char *mode) {
  if (!strcmp(mode, "kind") || !strcmp(mode, "second")) {
    DtrtRequest *r = NULL;
    DtrtStatus s = dtrtStart(comm, op, &r);
    return s != DTRT_OK ? s : dtrtWait(r);
  }
  switch (op->kind) {
  case DTRT_COLL_ALL_GATHER:
    return dtrtAllGather(comm, op->send, op->recv, op->count, op->dtype);
  case DTRT_COLL_ALL_REDUCE:
    return dtrtAllReduce(comm, op->send, op->recv, op->count, op->dtype,
                         op->reduce);
  default:
    return dtrtBroadcast(comm, op->recv, op->count, op->dtype, op->root);
  }
}

int main(int argc, char **argv) {
  DtrtContext *ctx = NULL;
  if (argc < 2 || dtrtInit(&ctx) != DTRT_OK) {
    fprintf(stderr, "usage: disagree MODE (under dtensor-run): %s\n",
            ctx ? dtrtLastError(ctx) : "init failed");
    return 1;
  }
  const char *mode = argv[1];
  int rank = dtrtRank(ctx), size = dtrtWorldSize(ctx);
  bool odd = rank == size - 1;
  DtrtComm *world = dtrtCommWorld(ctx);
  size_t count = !strcmp(mode, "small") ? 4 : 256u << 10; /* 1 MiB f32 */
  DtrtCollective op = {.kind = DTRT_COLL_ALL_GATHER,
                       .count = count,
                       .dtype = DTRT_F32,
                       .reduce = DTRT_SUM};
  if (odd) {
    if (!strcmp(mode, "count"))
      op.count = 4 * count;
    else if (!strcmp(mode, "small"))
      op.count = count + 1;
    else if (!strcmp(mode, "kind"))
      op.kind = DTRT_COLL_ALL_REDUCE;
    else if (!strcmp(mode, "dtype"))
      op.dtype = DTRT_I32;
  }
  if (!strcmp(mode, "reduce")) {
    op.kind = DTRT_COLL_ALL_REDUCE;
    op.reduce = odd ? DTRT_MAX : DTRT_SUM;
  }
  if (!strcmp(mode, "root")) {
    op.kind = DTRT_COLL_BROADCAST;
    op.root = odd ? 1 : 0;
  }
  /* Room for the largest of them: size blocks of 4 * count floats. */
  size_t room = (size_t)size * 4 * (count + 1) * sizeof(float);
  char *send = calloc(1, room), *recv = calloc(1, room);
  op.send = send;
  op.recv = recv;
  DtrtStatus s = DTRT_OK;
  if (!strcmp(mode, "second")) {
    DtrtCollective agreed = op;
    agreed.count = count;
    s = call(world, &agreed, mode);
    op.count = odd ? count + 1 : count;
  }
  if (s == DTRT_OK)
    s = call(world, &op, mode);
  const char *msg = dtrtLastError(ctx);
  printf("rank %d: %s: %s\n", rank, dtrtStatusString(s), msg);
  char want[64];
  snprintf(want, sizeof(want), "rank %d calls", size - 1);
  bool ok = s == DTRT_ERR_MISMATCH && strstr(msg, "rank 0 calls") &&
            strstr(msg, want);
  free(send);
  free(recv);
  dtrtFinalize(ctx);
  return ok ? 0 : 1;
}
