/* The rendezvous store (lib/Runtime/Store.c), run as real processes by
 * dtensor-run on loopback: every rank sets a key of its own and reads every
 * other rank's (gets wait for sets that come later), values of several
 * sizes, a get of the wrong size and of a too-long or empty key fail with a
 * message, and a store with no server behind it times out naming the
 * address. Then rank 0 attacks its own store over raw sockets while the
 * others wait on it: a client stalled in the middle of a request holds no
 * one up, a wrong proof, a request before the handshake and a silent
 * connection are cut off, an empty key is refused, the store stops growing
 * at its bound, a client of another job's secret cannot join, 100 silent
 * connections do not lock a rank out, and a server that does not know the
 * secret is refused by name and never receives it; the other ranks' final
 * get must still be served. */
#include "Runtime/RuntimeInternal.h"
#include "Support/Support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

/* The client's half of the handshake over a raw socket, with `secret`:
 * the first byte of the server's answer to the proof (-1: closed). */
static int rawHandshake(int fd, const char *secret) {
  uint8_t nonces[64], in[1 + 64];
  char out[1 + 32] = {'H'};
  dtRandomBytes(nonces, 32);
  memcpy(out + 1, nonces, 32);
  if (send(fd, out, sizeof(out), MSG_NOSIGNAL) != (ssize_t)sizeof(out) ||
      recv(fd, in, sizeof(in), MSG_WAITALL) != (ssize_t)sizeof(in) ||
      in[0] != 'C')
    return -1;
  memcpy(nonces + 32, in + 1, 32);
  const char *role = "dtensor-store client";
  const void *parts[2] = {role, nonces};
  size_t sizes[2] = {strlen(role) + 1, 64};
  out[0] = 'P';
  dtHmacSha256(secret, strlen(secret), parts, sizes, 2, (uint8_t *)out + 1);
  if (send(fd, out, sizeof(out), MSG_NOSIGNAL) != (ssize_t)sizeof(out))
    return -1;
  return firstByte(fd, 2);
}

/* A server at a fresh port that does not know the secret: it answers the
 * hello with a challenge and a made-up proof and reports to `report` every
 * byte it received. Returns its port. */
static int impostor(int report, pid_t *outPid) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof(a);
  if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 4) != 0 ||
      getsockname(lfd, (struct sockaddr *)&a, &n) != 0)
    return -1;
  *outPid = fork();
  if (*outPid == 0) {
    int fd = accept(lfd, NULL, NULL);
    char got[4096], reply[65] = {'C'};
    size_t have = 0;
    dtRandomBytes(reply + 1, 64);
    ssize_t k = recv(fd, got, sizeof(got), 0);
    have += k > 0 ? (size_t)k : 0;
    if (send(fd, reply, sizeof(reply), MSG_NOSIGNAL) != (ssize_t)sizeof(reply))
      _exit(1);
    struct pollfd p = {fd, POLLIN, 0};
    while (poll(&p, 1, 500) > 0 &&
           (k = recv(fd, got + have, sizeof(got) - have, 0)) > 0)
      have += (size_t)k;
    if (write(report, got, have) != (ssize_t)have)
      _exit(1);
    _exit(0);
  }
  close(lfd);
  return ntohs(a.sin_port);
}

/* Whether `needle` occurs in the `n` bytes at `hay`. */
static bool contains(const char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; ++i)
    if (!memcmp(hay + i, needle, k))
      return true;
  return false;
}

/* Rank 0's attacks on its own store (see the top). */
static void attack(DtrtContext *c, DtrtStore *st, int port) {
  const char *secret = getenv("DTENSOR_SECRET");
  /* Stalled after 3 bytes of a set. */
  int stalled = rawConnect(port);
  CHECK(rawHandshake(stalled, secret) == 'K', "the job's secret is accepted");
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
  /* A wrong proof, and a request before any: cut off at once. */
  int wrong = rawConnect(port);
  CHECK(rawHandshake(wrong, "not-the-secret") == -1,
        "a wrong proof is cut off");
  int anonymous = rawConnect(port);
  rawSend(anonymous, 'G', "k0/0", 4);
  CHECK(firstByte(anonymous, 2) == -1, "a request without the secret is cut "
                                       "off");
  /* An empty key (the API refuses it before sending; the server too). */
  CHECK(dtrtStoreSet(st, "", &v, 1) == DTRT_ERR_INVALID &&
            strstr(dtrtLastError(c), "is not 1 to 200 bytes"),
        "empty key (API): %s", dtrtLastError(c));
  int raw = rawConnect(port);
  CHECK(rawHandshake(raw, secret) == 'K', "authenticated");
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
            strstr(probe.error, "did not prove it knows this job's "
                                "DTENSOR_SECRET"),
        "another job's secret: %s", probe.error);
  setenv("DTENSOR_SECRET", mine, 1);
  free(mine);
  /* 100 silent connections (64 unauthenticated ones locked every rank
   * out): a rank still joins. */
  int flood[100];
  for (int i = 0; i < 100; ++i)
    flood[i] = rawConnect(port);
  probe = *c;
  probe.rank = 1;
  s = dtrtStoreCreate(&probe, "127.0.0.1", port, &other);
  CHECK(s == DTRT_OK && other, "joined through a flood: %s", probe.error);
  dtrtStoreDestroy(other);
  for (int i = 0; i < 100; ++i)
    close(flood[i]);
  /* Whoever holds the port without the secret: refused by name, and the
   * secret never reaches it (it was sent in clear). */
  int pipes[2];
  pid_t pid = -1;
  CHECK(pipe(pipes) == 0, "pipe");
  int fakePort = impostor(pipes[1], &pid);
  close(pipes[1]);
  probe = *c;
  probe.rank = 1;
  s = dtrtStoreCreate(&probe, "127.0.0.1", fakePort, &other);
  char expect[128];
  snprintf(expect, sizeof(expect),
           "the rendezvous store at 127.0.0.1:%d did "
           "not prove it knows",
           fakePort);
  CHECK(s == DTRT_ERR_ENV && !other && strstr(probe.error, expect),
        "an impostor: %s", probe.error);
  char got[4096];
  ssize_t n = read(pipes[0], got, sizeof(got)), more;
  while (n >= 0 &&
         (more = read(pipes[0], got + n, sizeof(got) - (size_t)n)) > 0)
    n += more;
  close(pipes[0]);
  waitpid(pid, NULL, 0);
  CHECK(n > 0 && !contains(got, (size_t)n, secret),
        "the impostor got %zd bytes, %s the secret", n,
        n > 0 && contains(got, (size_t)n, secret) ? "with" : "without");
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
