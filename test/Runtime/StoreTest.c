/* The rendezvous store (lib/Runtime/Store.c), run as real processes by
 * dtensor-run on loopback: every rank sets a key of its own and reads every
 * other rank's (gets wait for sets that come later), values of several
 * sizes, a get of the wrong size and of a too-long key fail with a message,
 * and a store with no server behind it times out naming the address. */
#include "Runtime/RuntimeInternal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "RankCheck.h"

int main(void) {
  DtrtContext *c = NULL;
  if (dtrtInit(&c) != DTRT_OK) {
    fprintf(stderr, "init: %s\n", dtrtLastError(c));
    return 1;
  }
  rank = dtrtRank(c);
  int world = dtrtWorldSize(c);
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  DtrtStore *st = NULL;
  DtrtStatus s = dtrtStoreCreate(c, addr, atoi(port), &st);
  CHECK(s == DTRT_OK && st, "store: %s", dtrtLastError(c));
  if (!st)
    return 1;
  /* Later ranks set later, so most gets wait for their key. */
  size_t sizes[3] = {1, 128, 300000};
  for (int z = 0; z < 3; ++z) {
    char key[64];
    unsigned char *mine = malloc(sizes[z]), *theirs = malloc(sizes[z]);
    for (size_t k = 0; k < sizes[z]; ++k)
      mine[k] = (unsigned char)(rank * 31 + k * 7 + z);
    snprintf(key, sizeof(key), "k%d/%d", z, rank);
    CHECK(dtrtStoreSet(st, key, mine, sizes[z]) == DTRT_OK, "set: %s",
          dtrtLastError(c));
    for (int r = world - 1; r >= 0; --r) {
      snprintf(key, sizeof(key), "k%d/%d", z, r);
      CHECK(dtrtStoreGet(st, key, theirs, sizes[z]) == DTRT_OK, "get %s: %s",
            key, dtrtLastError(c));
      size_t bad = 0;
      for (size_t k = 0; k < sizes[z]; ++k)
        bad += theirs[k] != (unsigned char)(r * 31 + k * 7 + z);
      CHECK(bad == 0, "value of %s: %zu bytes differ", key, bad);
    }
    free(mine);
    free(theirs);
  }
  char buf[8];
  CHECK(dtrtStoreGet(st, "k1/0", buf, 8) == DTRT_ERR_INVALID &&
            strstr(dtrtLastError(c), "holds 128 bytes, not 8"),
        "wrong size: %s", dtrtLastError(c));
  char longKey[300];
  memset(longKey, 'x', sizeof(longKey) - 1);
  longKey[sizeof(longKey) - 1] = 0;
  CHECK(dtrtStoreSet(st, longKey, buf, 1) == DTRT_ERR_INVALID,
        "a too-long key is refused");
  dtrtStoreDestroy(st);
  /* No server: connecting times out with the address in the message. */
  if (rank == 0) {
    dtrtSetTimeout(c, 0.3);
    DtrtContext probe = *c;
    probe.rank = 1; /* a client only */
    DtrtStore *none = NULL;
    s = dtrtStoreCreate(&probe, "127.0.0.1", 1, &none);
    CHECK(s == DTRT_ERR_TIMEOUT && !none &&
              strstr(probe.error, "no rendezvous store at 127.0.0.1:1"),
          "no server: %s", probe.error);
    dtrtSetTimeout(c, 60);
  }
  CHECK(dtrtFinalize(c) == DTRT_OK, "finalize");
  printf("rank %d of %d: %d passed, %d failed\n", rank, world,
         checks - failures, failures);
  return failures ? 1 : 0;
}
