/* Jobs in which rank 1 fails: with no argument it exits with status 3
 * after set-up while the others wait in a collective; with "kill" it is
 * killed by SIGKILL in the middle of a large all_reduce that every rank is
 * running; with "hang" it sleeps for a minute outside any collective while
 * the others wait for it in one. dtensor-run must stop the others and fail,
 * naming rank 1. */
#include "dtensor-rt/Runtime.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  DtrtContext *ctx = NULL;
  if (dtrtInit(&ctx) != DTRT_OK) {
    fprintf(stderr, "init: %s\n", dtrtLastError(ctx));
    return 1;
  }
  bool kill = argc > 1 && !strcmp(argv[1], "kill");
  bool hang = argc > 1 && !strcmp(argv[1], "hang");
  if (!kill) {
    if (dtrtRank(ctx) == 1 && hang)
      sleep(60);
    if (dtrtRank(ctx) == 1)
      _exit(3);
    float x = 1.0f, y;
    DtrtStatus s =
        dtrtAllReduce(dtrtCommWorld(ctx), &x, &y, 1, DTRT_F32, DTRT_SUM);
    fprintf(stderr, "rank %d: all_reduce returned %s: %s\n", dtrtRank(ctx),
            dtrtStatusString(s), dtrtLastError(ctx));
    return 2;
  }
  /* 64 MiB each: many rounds through the exchange slots. Rank 1 starts it
   * on its progress thread and is killed once the rounds are under way. */
  size_t count = 16u << 20;
  float *x = calloc(count, sizeof(float)), *y = calloc(count, sizeof(float));
  DtrtCollective op = {.kind = DTRT_COLL_ALL_REDUCE,
                       .send = x,
                       .recv = y,
                       .count = count,
                       .dtype = DTRT_F32,
                       .reduce = DTRT_SUM};
  DtrtRequest *r = NULL;
  DtrtStatus s = dtrtStart(dtrtCommWorld(ctx), &op, &r);
  if (dtrtRank(ctx) == 1) {
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    raise(SIGKILL);
  }
  if (s == DTRT_OK)
    s = dtrtWait(r);
  fprintf(stderr, "rank %d: all_reduce returned %s\n", dtrtRank(ctx),
          dtrtStatusString(s));
  return 2;
}
