/* The shm backend's segments belong to one job only (lib/Runtime/Shm.c),
 * run by dtensor-run on 2 ranks:
 *   unlinked  the world's segment is gone from /dev/shm once the world is
 *             set up, and collectives still work;
 *   leftover  rank 0 finds a segment of its job's name that it did not
 *             create (made here before dtrtInit): it must refuse it;
 *   foreign   rank 1 finds the segment owned by another user (as root) or
 *             with mode 0644 (otherwise) before rank 0 creates it: it must
 *             refuse to attach;
 *   no-job    DTENSOR_JOB unset: set-up fails with a message;
 *   slow      rank 1 sleeps a minute before set-up (stale.sh kills the job
 *             meanwhile, leaving rank 0's segment);
 *   guess     another user who read the job's token in /dev/shm makes the
 *             world's name as the token alone would give it (without the
 *             job's secret): set-up must not be stopped by it.
 * The refusing cases exit 1 after printing the runtime's message. */
#define _GNU_SOURCE
#include "Runtime/RuntimeInternal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The world's segment name, before any context exists. */
static void worldName(char *out, size_t capacity) {
  int world = atoi(getenv("WORLD_SIZE"));
  int members[64];
  for (int i = 0; i < world && i < 64; ++i)
    members[i] = i;
  DtrtComm comm = {.size = world, .members = members};
  dtrtShmSegmentName(getenv("DTENSOR_JOB"), &comm, out, capacity);
}

/* Makes the segment as an intruder would. */
static int plant(const char *name, int mode, bool foreignOwner) {
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 || fchmod(fd, mode) != 0 || ftruncate(fd, 1 << 20) != 0 ||
      (foreignOwner && fchown(fd, 65534, 65534) != 0)) {
    fprintf(stderr, "planting %s: %s\n", name, strerror(errno));
    return 1;
  }
  close(fd);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  int rank = atoi(getenv("RANK"));
  char name[256];
  worldName(name, sizeof(name));
  if (!strcmp(mode, "leftover") && rank == 0 && plant(name, 0600, false))
    return 2;
  if (!strcmp(mode, "foreign")) {
    if (rank == 1 && plant(name, geteuid() == 0 ? 0600 : 0644, geteuid() == 0))
      return 2;
    if (rank == 0)
      sleep(1); /* rank 1 looks first */
  }
  if (!strcmp(mode, "no-job"))
    unsetenv("DTENSOR_JOB");
  if (!strcmp(mode, "slow") && rank == 1)
    sleep(60);
  char guessed[256] = "";
  if (!strcmp(mode, "guess") && rank == 0) {
    char *secret = strdup(getenv("DTENSOR_SECRET"));
    unsetenv("DTENSOR_SECRET");
    worldName(guessed, sizeof(guessed));
    setenv("DTENSOR_SECRET", secret, 1);
    free(secret);
    if (!strcmp(guessed, name)) {
      fprintf(stderr, "the name does not depend on the secret\n");
      return 5;
    }
    if (plant(guessed, 0600, false))
      return 2;
  }
  DtrtContext *c = NULL;
  if (dtrtInit(&c) != DTRT_OK) {
    fprintf(stderr, "rank %d: init: %s\n", rank, dtrtLastError(c));
    dtrtFinalize(c);
    return 1;
  }
  if (guessed[0])
    shm_unlink(guessed);
  if (strcmp(mode, "unlinked") && strcmp(mode, "guess")) {
    fprintf(stderr, "rank %d: set-up succeeded in mode '%s'\n", rank, mode);
    return 3;
  }
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd >= 0 || errno != ENOENT) {
    fprintf(stderr, "rank %d: %s is still there after set-up\n", rank, name);
    return 4;
  }
  float x = (float)(rank + 1), y = 0;
  if (dtrtAllReduce(dtrtCommWorld(c), &x, &y, 1, DTRT_F32, DTRT_SUM) !=
          DTRT_OK ||
      y != 3.0f) {
    fprintf(stderr, "rank %d: all_reduce: %s (%g)\n", rank, dtrtLastError(c),
            y);
    return 5;
  }
  if (dtrtFinalize(c) != DTRT_OK)
    return 6;
  printf("rank %d: segment unlinked after set-up, all_reduce correct\n", rank);
  return 0;
}
