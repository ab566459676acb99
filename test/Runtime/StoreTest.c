/* The rendezvous store (lib/Runtime/Store.c), run as real processes by
 * dtensor-run on loopback: every rank sets a key of its own and reads every
 * other rank's (gets wait for sets that come later), values of several
 * sizes, a get of the wrong size and of a too-long or empty key fail with a
 * message, and a store with no server behind it times out naming the
 * address. Then rank 0 attacks its own store over raw sockets while the
 * others wait on it: a client stalled in the middle of a request holds no
 * one up, a wrong secret, a request without the secret and a silent
 * connection are cut off, an empty key is refused, the store stops growing
 * at its bound, and a client of another job's secret cannot join; the
 * other ranks' final get must still be served. */
#include "Runtime/RuntimeInternal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "RankCheck.h"

static int rawConnect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Sends an operation byte and a length-prefixed field. */
static void rawSend(int fd, char op, const void *field, uint32_t len) {
  char buf[600];
  buf[0] = op;
  memcpy(buf + 1, &len, 4);
  memcpy(buf + 5, field, len);
  if (send(fd, buf, 5 + len, MSG_NOSIGNAL) != (ssize_t)(5 + len))
    fprintf(stderr, "raw send failed\n");
}

/* The first byte the server sends within `seconds`: -1 if it closed the
 * connection, -2 if nothing came. */
static int firstByte(int fd, double seconds) {
  struct pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, (int)(seconds * 1000)) <= 0)
    return -2;
  unsigned char b;
  return recv(fd, &b, 1, 0) == 1 ? b : -1;
}

/* Rank 0's attacks on its own store (see the top). */
static void attack(DtrtContext *c, DtrtStore *st, int port) {
  const char *secret = getenv("DTENSOR_SECRET");
  uint32_t secretLen = (uint32_t)strlen(secret);
  /* Stalled after 3 bytes of a set. */
  int stalled = rawConnect(port);
  rawSend(stalled, 'A', secret, secretLen);
  CHECK(firstByte(stalled, 2) == 'K', "the job's secret is accepted");
  if (send(stalled, "S\x05\x00", 3, MSG_NOSIGNAL) != 3)
    fprintf(stderr, "raw send failed\n");
  double start = dtrtNow();
  int v = 7, back = 0;
  CHECK(dtrtStoreSet(st, "during-stall", &v, sizeof(v)) == DTRT_OK &&
            dtrtStoreGet(st, "during-stall", &back, sizeof(back)) == DTRT_OK &&
            back == 7,
        "served during a stall: %s", dtrtLastError(c));
  CHECK(dtrtNow() - start < 1, "a stalled client held the store up %.2f s",
        dtrtNow() - start);
  /* A wrong secret, and a request with none: cut off at once. */
  int wrong = rawConnect(port);
  rawSend(wrong, 'A', "not-the-secret", 14);
  CHECK(firstByte(wrong, 2) == -1, "a wrong secret is cut off");
  int anonymous = rawConnect(port);
  rawSend(anonymous, 'G', "k0/0", 4);
  CHECK(firstByte(anonymous, 2) == -1, "a request without the secret is cut "
                                       "off");
  /* An empty key (the API refuses it before sending; the server too). */
  CHECK(dtrtStoreSet(st, "", &v, 1) == DTRT_ERR_INVALID &&
            strstr(dtrtLastError(c), "is not 1 to 200 bytes"),
        "empty key (API): %s", dtrtLastError(c));
  int raw = rawConnect(port);
  rawSend(raw, 'A', secret, secretLen);
  CHECK(firstByte(raw, 2) == 'K', "authenticated");
  char emptySet[9] = {'S', 0, 0, 0, 0, 1, 0, 0, 0};
  char one = 1;
  if (send(raw, emptySet, 9, MSG_NOSIGNAL) != 9 ||
      send(raw, &one, 1, MSG_NOSIGNAL) != 1)
    fprintf(stderr, "raw send failed\n");
  CHECK(firstByte(raw, 2) == 'E', "an empty key is refused");
  /* The bound: 1 MiB values until refused, at 64 MiB. */
  size_t mib = 1u << 20;
  char *big = calloc(mib, 1);
  int stored = 0;
  DtrtStatus s = DTRT_OK;
  for (; stored < 100 && s == DTRT_OK; ++stored) {
    char key[32];
    snprintf(key, sizeof(key), "fill/%d", stored);
    s = dtrtStoreSet(st, key, big, mib);
  }
  CHECK(s == DTRT_ERR_INVALID && stored >= 60 && stored <= 65 &&
            strstr(dtrtLastError(c), "holds at most 64 MiB"),
        "bounded after %d MiB: %s", stored - 1, dtrtLastError(c));
  free(big);
  /* A silent connection is dropped after the request deadline (5 s). */
  int silent = rawConnect(port);
  CHECK(firstByte(silent, 8) == -1, "a silent connection is dropped");
  /* A store client of another job (another secret). */
  char *mine = strdup(secret);
  setenv("DTENSOR_SECRET", "another-jobs-secret", 1);
  DtrtContext probe = *c;
  probe.rank = 1; /* a client only */
  DtrtStore *other = NULL;
  s = dtrtStoreCreate(&probe, "127.0.0.1", port, &other);
  CHECK(s == DTRT_ERR_ENV && !other &&
            strstr(probe.error, "refused this rank's DTENSOR_SECRET"),
        "another job's secret: %s", probe.error);
  setenv("DTENSOR_SECRET", mine, 1);
  free(mine);
  close(stalled);
  close(raw);
  close(wrong);
  close(anonymous);
  close(silent);
}

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
  /* Rank 0 attacks; the others' last get must still be answered. */
  int done = 1;
  if (rank == 0) {
    attack(c, st, atoi(port));
    CHECK(dtrtStoreSet(st, "done", &done, sizeof(done)) == DTRT_OK, "done: %s",
          dtrtLastError(c));
  } else {
    done = 0;
    CHECK(dtrtStoreGet(st, "done", &done, sizeof(done)) == DTRT_OK && done == 1,
          "served after the attacks: %s", dtrtLastError(c));
  }
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
