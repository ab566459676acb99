/* The per-op profile (dtensor-run --profile): a program compiled with
 * dtensor-to-llvm{profile=true} calls dtrt_profile_begin and
 * dtrt_profile_end around each op that costs time (dtensor-profile numbers
 * them); this process keeps one event per call and writes them for the
 * runner, which names the ops and merges the ranks. Without the option
 * nothing calls here. */
#include "dtensor-rt/Runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct Event {
  int64_t id;
  double start, seconds;
} Event;

static Event *gEvents;
static size_t gCount, gCapacity;
static double *gOpen; /* the start of each op's running call */
static int64_t gOpenCapacity;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void dtrt_profile_begin(int64_t id) {
  if (id < 0)
    return;
  if (id >= gOpenCapacity) {
    int64_t cap = gOpenCapacity ? 2 * gOpenCapacity : 256;
    while (cap <= id)
      cap *= 2;
    double *grown = realloc(gOpen, sizeof(double) * (size_t)cap);
    if (!grown)
      return;
    gOpen = grown;
    gOpenCapacity = cap;
  }
  gOpen[id] = now();
}

void dtrt_profile_end(int64_t id) {
  double t = now();
  if (id < 0 || id >= gOpenCapacity)
    return;
  if (gCount == gCapacity) {
    size_t cap = gCapacity ? 2 * gCapacity : 4096;
    Event *grown = realloc(gEvents, sizeof(Event) * cap);
    if (!grown)
      return; /* out of memory: the event is lost, the program goes on */
    gEvents = grown;
    gCapacity = cap;
  }
  gEvents[gCount++] = (Event){id, gOpen[id], t - gOpen[id]};
}

void dtrtProfileReset(void) { gCount = 0; }

DtrtStatus dtrtProfileWrite(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f)
    return DTRT_ERR_SYSTEM;
  for (size_t k = 0; k < gCount; ++k)
    fprintf(f, "%lld %.9f %.9f\n", (long long)gEvents[k].id, gEvents[k].start,
            gEvents[k].seconds);
  bool ok = !ferror(f);
  ok &= fclose(f) == 0;
  return ok ? DTRT_OK : DTRT_ERR_SYSTEM;
}
