/* A job in which rank 1 dies after set-up while the others wait in a
 * collective: dtensor-run must stop them and fail, naming rank 1. */
#include "dtensor-rt/Runtime.h"

#include <stdio.h>
#include <unistd.h>

int main(void) {
  DtrtContext *ctx = NULL;
  if (dtrtInit(&ctx) != DTRT_OK) {
    fprintf(stderr, "init: %s\n", dtrtLastError(ctx));
    return 1;
  }
  if (dtrtRank(ctx) == 1)
    _exit(3);
  float x = 1.0f, y;
  DtrtStatus s = dtrtAllReduce(dtrtCommWorld(ctx), &x, &y, 1, DTRT_F32, DTRT_SUM);
  fprintf(stderr, "rank %d: all_reduce returned %s\n", dtrtRank(ctx),
          dtrtStatusString(s));
  return 2;
}
