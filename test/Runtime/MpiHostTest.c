/* A host application that owns MPI hands a communicator of its own to the
 * runtime (dtrtInitFromMpiComm): the world is split into even and odd
 * ranks, each half becomes a runtime world, and collectives (blocking and
 * started) run within it; MPI stays the application's to finalize. Run on
 * 4 ranks under mpirun (dtensor-run --backend mpi). */
#include "dtensor-rt/Runtime.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, failures = 0, checks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
#define CHECK(cond, what)                                                      \
  do {                                                                         \
    ++checks;                                                                  \
    if (!(cond)) {                                                             \
      ++failures;                                                              \
      fprintf(stderr, "rank %d: %s: %s\n", rank, what,                         \
              ctx ? dtrtLastError(ctx) : "");                                  \
    }                                                                          \
  } while (0)
  DtrtContext *ctx = NULL;
  CHECK(dtrtInitFromMpiComm(&half, &ctx) == DTRT_OK, "init from MPI comm");
  CHECK(!strcmp(dtrtBackendName(ctx), "mpi"), "backend name");
  int hsize = (size + 1 - rank % 2) / 2;
  CHECK(dtrtWorldSize(ctx) == hsize && dtrtRank(ctx) == rank / 2,
        "rank and size from the handed-in communicator");
  /* Sum of the global ranks of my half. */
  int mine = rank, sum = 0, want = 0;
  for (int r = rank % 2; r < size; r += 2)
    want += r;
  CHECK(dtrtAllReduce(dtrtCommWorld(ctx), &mine, &sum, 1, DTRT_I32, DTRT_SUM) ==
                DTRT_OK &&
            sum == want,
        "all_reduce within the half");
  DtrtCollective op = {.kind = DTRT_COLL_ALL_REDUCE,
                       .send = &mine,
                       .recv = &sum,
                       .count = 1,
                       .dtype = DTRT_I32,
                       .reduce = DTRT_MAX};
  DtrtRequest *req = NULL;
  sum = -1;
  CHECK(dtrtStart(dtrtCommWorld(ctx), &op, &req) == DTRT_OK, "start");
  CHECK(dtrtWait(req) == DTRT_OK && sum == size - 2 + rank % 2,
        "started all_reduce within the half");
  CHECK(dtrtFinalize(ctx) == DTRT_OK, "finalize");
  ctx = NULL;
  DtrtContext *bad = NULL;
  CHECK(dtrtInitFromMpiComm(NULL, &bad) == DTRT_ERR_INVALID, "NULL comm");
  dtrtFinalize(bad);
  /* MPI still works: the runtime did not finalize it. */
  int one = 1, total = 0;
  MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(total == size, "MPI usable after dtrtFinalize");
  MPI_Comm_free(&half);
  MPI_Finalize();
  printf("rank %d of %d: %d passed, %d failed\n", rank, size, checks - failures,
         failures);
  return failures ? 1 : 0;
}
