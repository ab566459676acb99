/* The rendezvous store: a small key-value store over TCP that rank 0 serves
 * at MASTER_ADDR:MASTER_PORT (as torchrun's TCPStore), so that ranks can
 * exchange what a backend needs before it has a communicator (NCCL's unique
 * ids). Every rank, rank 0 included, is a client over one connection. A
 * get waits for its key to be set.
 *
 * Trust: only the job's ranks may use it, and a rank uses only its job's
 * store. A connection starts with a challenge-response both ways that
 * never sends the job's secret (DTENSOR_SECRET, drawn by dtensor-run): the
 * client sends a fresh nonce Nc, the server a fresh nonce Ns and
 * HMAC-SHA-256(secret, "dtensor-store server" Nc Ns), the client checks it
 * (whoever else holds MASTER_PORT cannot answer: the rank refuses it,
 * naming the address) and sends HMAC(secret, "dtensor-store client" Nc Ns),
 * which the server checks in constant time. Anything else, or nothing
 * within a few seconds, and the connection is closed. When the
 * unauthenticated connections reach their bound, a new one evicts one of
 * them at random rather than being refused, and a rank whose connection
 * closed before it could prove itself connects again until the timeout, so
 * a flood of silent connections does not lock the ranks out. The server is
 * one thread that
 * never blocks on a client: it reads and writes whatever each socket takes
 * (non-blocking), keeps a partial request per client and drops a client
 * whose request stays incomplete (or whose replies stay unread) for
 * REQUEST_S seconds, so one slow or silent client cannot hold up the
 * others. Keys (1 to 200 bytes), values (up to 1 MiB), the bytes stored
 * (64 MiB) and the connections (unauthenticated ones especially) are
 * bounded; a set beyond the bounds is refused with a reason.
 *
 * Wire format, in host byte order (every peer is the same build):
 *   'H' Nc[32]                             -> 'C' Ns[32] server proof[32]
 *   'P' client proof[32]                   -> 'K', or the connection closed
 *   'S' u32 keyLen key u32 valueLen value  -> 'K' | 'E' code
 *   'G' u32 keyLen key                     -> 'V' u32 len value | 'E' code
 *   'Q' (quit: this client is done)        -> no reply */
#include "RuntimeInternal.h"
#include "Support/Support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_KEY 200
#define MAX_VALUE (1u << 20)
#define MAX_SECRET 256
#define MAX_STORED (64u << 20) /* bytes of values the store holds */
#define MAX_CLIENTS 4096
#define MAX_UNAUTHENTICATED 64
/* A request (or the hello) must arrive whole, and replies be read, within
 * this many seconds of their first byte. */
#define REQUEST_S 5.0
/* The largest request: op, key, value. */
#define MAX_REQUEST (1 + 4 + MAX_KEY + 4 + MAX_VALUE)

/* Why a request was refused ('E' and one of these). */
enum { REFUSE_KEY = 1, REFUSE_VALUE = 2, REFUSE_FULL = 3 };

typedef struct Entry {
  char key[MAX_KEY + 1];
  size_t size;
  char *value;
} Entry;

#define NONCE 32

typedef struct Client {
  int fd;
  bool authenticated, quit;
  bool challenged;           /* 'C' sent, the client's proof expected */
  uint8_t nonces[2 * NONCE]; /* Nc, then Ns */
  double deadline;           /* 0: nothing pending */
  char *in;                  /* received bytes not yet a whole request */
  size_t inLen, inCap;
  char *out; /* replies not yet sent */
  size_t outLen, outSent, outCap;
  char waitKey[MAX_KEY + 1]; /* a parked get, "" if none */
} Client;

/* Rank 0's server. */
typedef struct Server {
  int listenFd;
  pthread_t thread;
  int wake[2]; /* a pipe: stop serving */
  char secret[MAX_SECRET];
  size_t secretLen;
  Client *clients;
  int numClients, maxClients;
  Entry *entries;
  int numEntries, capEntries;
  size_t stored;      /* bytes of values */
  atomic_int quitted; /* authenticated clients that said they are done */
} Server;

struct DtrtStore {
  DtrtContext *context;
  int fd;
  Server *server;
};

/* ---- blocking I/O with the context's timeout (the client) ---------------- */

static int ioAll(int fd, void *buf, size_t n, bool writing, double deadline) {
  char *p = buf;
  while (n) {
    double left = deadline - dtrtNow();
    if (left <= 0)
      return ETIMEDOUT;
    struct pollfd pfd = {fd, writing ? POLLOUT : POLLIN, 0};
    int r = poll(&pfd, 1, (int)(left * 1000) + 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return r == 0 ? ETIMEDOUT : errno;
    ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (k <= 0)
      return k == 0 ? ECONNRESET : errno;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* What a side proves it knows the secret with: HMAC-SHA-256 of its role
 * and both nonces (Nc, Ns). */
static void proof(const char *secret, size_t secretLen, bool server,
                  const uint8_t nonces[2 * NONCE],
                  uint8_t out[DT_SHA256_BYTES]) {
  const char *role = server ? "dtensor-store server" : "dtensor-store client";
  const void *parts[2] = {role, nonces};
  size_t sizes[2] = {strlen(role) + 1, 2 * NONCE};
  dtHmacSha256(secret, secretLen, parts, sizes, 2, out);
}

/* The job's secret from the environment, or a message saying how to set
 * it. */
static DtrtStatus readSecret(DtrtContext *c, char *out, size_t *outLen) {
  const char *secret = getenv("DTENSOR_SECRET");
  if (!secret || !*secret)
    return dtrtFail(c, DTRT_ERR_ENV,
                    "DTENSOR_SECRET is not set: the "
                    "rendezvous store admits only the job's ranks, which "
                    "share a secret (dtensor-run sets one; under another "
                    "launcher, export DTENSOR_SECRET=$(od -An -N16 -tx1 "
                    "/dev/urandom | tr -d ' \\n') for every rank)");
  size_t n = strlen(secret);
  if (n > MAX_SECRET)
    return dtrtFail(c, DTRT_ERR_ENV,
                    "DTENSOR_SECRET is longer than %d "
                    "bytes",
                    MAX_SECRET);
  memcpy(out, secret, n);
  *outLen = n;
  return DTRT_OK;
}

/* ---- the server ---------------------------------------------------------- */

static Entry *findEntry(Server *s, const char *key) {
  for (int i = 0; i < s->numEntries; ++i)
    if (!strcmp(s->entries[i].key, key))
      return &s->entries[i];
  return NULL;
}

/* Queues `n` bytes of reply; false when the client already has more
 * unread replies than any request can justify (it is not reading). */
static bool queue(Client *cl, const void *bytes, size_t n) {
  if (cl->outLen - cl->outSent + n > 4 * (size_t)MAX_REQUEST)
    return false;
  if (cl->outSent && cl->outSent == cl->outLen)
    cl->outLen = cl->outSent = 0;
  if (cl->outLen + n > cl->outCap) {
    size_t cap = cl->outCap ? cl->outCap : 256;
    while (cap < cl->outLen + n)
      cap *= 2;
    char *grown = realloc(cl->out, cap);
    if (!grown)
      return false;
    cl->out = grown;
    cl->outCap = cap;
  }
  memcpy(cl->out + cl->outLen, bytes, n);
  cl->outLen += n;
  return true;
}

static bool queueValue(Client *cl, const Entry *e) {
  char tag = 'V';
  uint32_t len = (uint32_t)e->size;
  return queue(cl, &tag, 1) && queue(cl, &len, 4) &&
         queue(cl, e->value, e->size);
}

static bool queueRefusal(Client *cl, char code) {
  char reply[2] = {'E', code};
  return queue(cl, reply, 2);
}

static void dropClient(Server *s, int i) {
  close(s->clients[i].fd);
  free(s->clients[i].in);
  free(s->clients[i].out);
  s->clients[i] = s->clients[--s->numClients];
}

/* Stores a value (taking `value`); a refusal code, or 0. */
static char setEntry(Server *s, const char *key, char *value, size_t size) {
  Entry *e = findEntry(s, key);
  size_t before = e ? e->size : 0;
  if (s->stored - before + size > MAX_STORED) {
    free(value);
    return REFUSE_FULL;
  }
  if (!e) {
    if (s->numEntries == s->capEntries) {
      int cap = s->capEntries ? 2 * s->capEntries : 16;
      Entry *grown = realloc(s->entries, sizeof(Entry) * (size_t)cap);
      if (!grown) {
        free(value);
        return REFUSE_FULL;
      }
      s->entries = grown;
      s->capEntries = cap;
    }
    e = &s->entries[s->numEntries++];
    snprintf(e->key, sizeof(e->key), "%s", key);
    e->value = NULL;
  }
  free(e->value); /* a later set replaces the value */
  e->value = value;
  e->size = size;
  s->stored = s->stored - before + size;
  /* Wake the gets parked on this key. */
  for (int j = 0; j < s->numClients; ++j)
    if (!strcmp(s->clients[j].waitKey, key)) {
      s->clients[j].waitKey[0] = 0;
      queueValue(&s->clients[j], e);
    }
  return 0;
}

/* How many bytes the request at the start of `in` takes: 0 while it is
 * incomplete, -1 when it is malformed. */
static long requestLength(const char *in, size_t n, bool authenticated) {
  if (n < 1)
    return 0;
  char op = in[0];
  if (op == 'Q')
    return authenticated ? 1 : -1;
  if (op == 'H' || op == 'P') /* which one is expected: serveRequest */
    return authenticated ? -1 : (n >= 1 + NONCE ? 1 + NONCE : 0);
  if (!authenticated || (op != 'S' && op != 'G'))
    return -1;
  if (n < 5)
    return 0;
  uint32_t len;
  memcpy(&len, in + 1, 4);
  if (len > MAX_KEY)
    return -1;
  if (op == 'G')
    return n >= 5 + len ? (long)(5 + len) : 0;
  if (n < 5 + len + 4)
    return 0;
  uint32_t size;
  memcpy(&size, in + 5 + len, 4);
  if (size > MAX_VALUE)
    return -1;
  return n >= 9 + (size_t)len + size ? (long)(9 + len + size) : 0;
}

/* Serves one whole request of client `i`; false drops the client. */
static bool serveRequest(Server *s, int i, const char *req) {
  Client *cl = &s->clients[i];
  char op = req[0];
  if (op == 'Q') {
    if (!cl->quit)
      ++s->quitted;
    cl->quit = true;
    return false;
  }
  if (op == 'H') { /* the client's nonce: the challenge and our proof */
    if (cl->challenged)
      return false;
    memcpy(cl->nonces, req + 1, NONCE);
    if (!dtRandomBytes(cl->nonces + NONCE, NONCE))
      return false;
    char reply[1 + NONCE + DT_SHA256_BYTES] = {'C'};
    memcpy(reply + 1, cl->nonces + NONCE, NONCE);
    proof(s->secret, s->secretLen, true, cl->nonces,
          (uint8_t *)reply + 1 + NONCE);
    cl->challenged = true;
    return queue(cl, reply, sizeof(reply));
  }
  if (op == 'P') { /* the client's proof */
    uint8_t want[DT_SHA256_BYTES];
    proof(s->secret, s->secretLen, false, cl->nonces, want);
    if (!cl->challenged || !dtSameBytes(want, req + 1, DT_SHA256_BYTES))
      return false;
    cl->authenticated = true;
    return queue(cl, "K", 1);
  }
  uint32_t len;
  memcpy(&len, req + 1, 4);
  char key[MAX_KEY + 1];
  memcpy(key, req + 5, len);
  key[len] = 0;
  if (len == 0 || strlen(key) != len) /* empty, or a NUL inside */
    return queueRefusal(cl, REFUSE_KEY);
  if (op == 'G') {
    Entry *e = findEntry(s, key);
    if (e)
      return queueValue(cl, e);
    snprintf(cl->waitKey, sizeof(cl->waitKey), "%s", key);
    return true;
  }
  uint32_t size;
  memcpy(&size, req + 5 + len, 4);
  char *value = malloc(size ? size : 1);
  if (!value)
    return queueRefusal(cl, REFUSE_FULL);
  memcpy(value, req + 9 + len, size);
  char refused = setEntry(s, key, value, size);
  /* setEntry may have queued replies to others, never moved `cl`. */
  return refused ? queueRefusal(cl, refused) : queue(cl, "K", 1);
}

/* Reads what client `i` sent and serves its whole requests; false drops
 * it (closed, malformed, unauthenticated, or its input would exceed the
 * largest request). */
static bool readClient(Server *s, int i) {
  Client *cl = &s->clients[i];
  for (;;) {
    if (cl->inLen == cl->inCap) {
      size_t cap = cl->inCap ? 2 * cl->inCap : 4096;
      if (cap > (size_t)MAX_REQUEST + 4096)
        cap = (size_t)MAX_REQUEST + 4096;
      if (cap <= cl->inLen)
        return false;
      char *grown = realloc(cl->in, cap);
      if (!grown)
        return false;
      cl->in = grown;
      cl->inCap = cap;
    }
    ssize_t k = recv(cl->fd, cl->in + cl->inLen, cl->inCap - cl->inLen, 0);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    if (k <= 0)
      return false;
    cl->inLen += (size_t)k;
    /* Serve every whole request received. */
    size_t used = 0;
    for (;;) {
      long len = requestLength(cl->in + used, cl->inLen - used,
                               s->clients[i].authenticated);
      if (len < 0)
        return false;
      if (len == 0)
        break;
      if (!serveRequest(s, i, cl->in + used))
        return false;
      cl = &s->clients[i];
      used += (size_t)len;
    }
    memmove(cl->in, cl->in + used, cl->inLen - used);
    cl->inLen -= used;
  }
  /* A request begun must end within REQUEST_S; an unauthenticated client
   * keeps its hello deadline from when it connected. */
  if (cl->authenticated)
    cl->deadline =
        cl->inLen ? (cl->deadline ? cl->deadline : dtrtNow() + REQUEST_S) : 0;
  return true;
}

/* Sends what client `i` has queued; false drops it. */
static bool writeClient(Client *cl) {
  while (cl->outSent < cl->outLen) {
    ssize_t k = send(cl->fd, cl->out + cl->outSent, cl->outLen - cl->outSent,
                     MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return true;
    if (k <= 0)
      return false;
    cl->outSent += (size_t)k;
  }
  return true;
}

static void acceptClient(Server *s) {
  int fd = accept(s->listenFd, NULL, NULL);
  if (fd < 0)
    return;
  if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0 ||
      fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    close(fd);
    return;
  }
  int unauthenticated = 0;
  for (int i = 0; i < s->numClients; ++i)
    unauthenticated += !s->clients[i].authenticated;
  /* Full of connections that have not proved anything: one of them, at
   * random, makes room (refusing the new one let 64 silent connections
   * lock every rank out). */
  if (unauthenticated >= MAX_UNAUTHENTICATED) {
    uint32_t pick = 0;
    dtRandomBytes(&pick, sizeof(pick));
    int k = (int)(pick % (uint32_t)unauthenticated);
    for (int i = s->numClients - 1; i >= 0; --i)
      if (!s->clients[i].authenticated && k-- == 0) {
        dropClient(s, i);
        break;
      }
  }
  if (s->numClients >= MAX_CLIENTS) {
    close(fd);
    return;
  }
  if (s->numClients == s->maxClients) {
    int cap = s->maxClients ? 2 * s->maxClients : 8;
    Client *more = realloc(s->clients, sizeof(Client) * (size_t)cap);
    if (!more) {
      close(fd);
      return;
    }
    s->clients = more;
    s->maxClients = cap;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  Client *cl = &s->clients[s->numClients++];
  memset(cl, 0, sizeof(*cl));
  cl->fd = fd;
  cl->deadline = dtrtNow() + REQUEST_S; /* for the hello */
}

static void *serve(void *arg) {
  Server *s = arg;
  struct pollfd *pfds = NULL;
  for (;;) {
    int n = s->numClients + 2;
    struct pollfd *grown = realloc(pfds, sizeof(struct pollfd) * (size_t)n);
    if (!grown)
      break;
    pfds = grown;
    pfds[0] = (struct pollfd){s->wake[0], POLLIN, 0};
    pfds[1] = (struct pollfd){s->listenFd, POLLIN, 0};
    double now = dtrtNow(), next = now + 1;
    for (int i = 0; i < s->numClients; ++i) {
      Client *cl = &s->clients[i];
      bool sending = cl->outSent < cl->outLen;
      pfds[i + 2] =
          (struct pollfd){cl->fd, POLLIN | (sending ? POLLOUT : 0), 0};
      if (cl->deadline && cl->deadline < next)
        next = cl->deadline;
    }
    int wait = next > now ? (int)((next - now) * 1000) + 1 : 0;
    if (poll(pfds, (nfds_t)n, wait) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (pfds[0].revents)
      break;
    /* Clients from the back, so dropping one keeps earlier indices. */
    now = dtrtNow();
    for (int i = s->numClients - 1; i >= 0; --i) {
      short ev = pfds[i + 2].revents;
      bool keep = true;
      if (ev & (POLLIN | POLLHUP | POLLERR))
        keep = readClient(s, i);
      if (keep && (ev & POLLOUT))
        keep = writeClient(&s->clients[i]);
      Client *cl = &s->clients[i];
      bool sending = cl->outSent < cl->outLen;
      if (keep && sending && !cl->deadline)
        cl->deadline = now + REQUEST_S;
      if (keep && !sending && cl->authenticated && !cl->inLen)
        cl->deadline = 0;
      if (keep && cl->deadline && now > cl->deadline)
        keep = false; /* silent, slow or not reading: it holds no one up */
      if (!keep)
        dropClient(s, i);
    }
    if (pfds[1].revents & POLLIN)
      acceptClient(s);
  }
  free(pfds);
  return NULL;
}

static DtrtStatus startServer(DtrtContext *c, const struct addrinfo *ai,
                              const char *secret, size_t secretLen,
                              Server **out) {
  Server *s = calloc(1, sizeof(Server));
  if (!s)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  memcpy(s->secret, secret, secretLen);
  s->secretLen = secretLen;
  s->wake[0] = s->wake[1] = -1;
  s->listenFd =
      socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (s->listenFd >= 0)
    setsockopt(s->listenFd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (s->listenFd < 0 || bind(s->listenFd, ai->ai_addr, ai->ai_addrlen) ||
      listen(s->listenFd, 128) || pipe(s->wake)) {
    DtrtStatus st = dtrtFail(c, DTRT_ERR_SYSTEM,
                             "rank 0: serving the "
                             "rendezvous store: %s (is MASTER_PORT in use?)",
                             strerror(errno));
    if (s->listenFd >= 0)
      close(s->listenFd);
    free(s);
    return st;
  }
  int e = pthread_create(&s->thread, NULL, serve, s);
  if (e) {
    close(s->listenFd);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s);
    return dtrtFail(c, DTRT_ERR_SYSTEM, "pthread_create: %s", strerror(e));
  }
  *out = s;
  return DTRT_OK;
}

static void stopServer(Server *s) {
  if (write(s->wake[1], "x", 1) < 0) {
    /* The thread still stops when the pipe's write end closes. */
  }
  close(s->wake[1]);
  pthread_join(s->thread, NULL);
  close(s->wake[0]);
  close(s->listenFd);
  while (s->numClients)
    dropClient(s, s->numClients - 1);
  for (int i = 0; i < s->numEntries; ++i)
    free(s->entries[i].value);
  free(s->clients);
  free(s->entries);
  free(s);
}

/* ---- the client ---------------------------------------------------------- */

/* How a handshake ended. */
enum {
  HELLO_OK = 0,
  HELLO_CLOSED = -1,   /* closed before the challenge: try again */
  HELLO_IMPOSTOR = -2, /* the server's proof is wrong */
  HELLO_REFUSED = -3,  /* closed after our proof: another secret */
};

/* The client's side of the challenge-response: HELLO_* or an errno. */
static int hello(int fd, const char *secret, size_t n, double deadline) {
  uint8_t nonces[2 * NONCE];
  if (!dtRandomBytes(nonces, NONCE))
    return EIO;
  char out[1 + DT_SHA256_BYTES] = {'H'};
  memcpy(out + 1, nonces, NONCE);
  int err = ioAll(fd, out, 1 + NONCE, true, deadline);
  char in[1 + NONCE + DT_SHA256_BYTES];
  if (!err)
    err = ioAll(fd, in, sizeof(in), false, deadline);
  if (err)
    return err == ECONNRESET || err == EPIPE ? HELLO_CLOSED : err;
  memcpy(nonces + NONCE, in + 1, NONCE);
  uint8_t want[DT_SHA256_BYTES];
  proof(secret, n, true, nonces, want);
  if (in[0] != 'C' || !dtSameBytes(want, in + 1 + NONCE, DT_SHA256_BYTES))
    return HELLO_IMPOSTOR;
  out[0] = 'P';
  proof(secret, n, false, nonces, (uint8_t *)out + 1);
  char reply = 0;
  err = ioAll(fd, out, sizeof(out), true, deadline);
  if (!err)
    err = ioAll(fd, &reply, 1, false, deadline);
  if (err == ECONNRESET || err == EPIPE || (!err && reply != 'K'))
    return HELLO_REFUSED;
  return err;
}

DtrtStatus dtrtStoreCreate(DtrtContext *c, const char *addr, int port,
                           DtrtStore **outStore) {
  *outStore = NULL;
  if (port <= 0 || port > 65535)
    return dtrtFail(c, DTRT_ERR_ENV, "MASTER_PORT %d is not a TCP port", port);
  char secret[MAX_SECRET];
  size_t secretLen = 0;
  DtrtStatus s = readSecret(c, secret, &secretLen);
  if (s != DTRT_OK)
    return s;
  char service[16];
  snprintf(service, sizeof(service), "%d", port);
  struct addrinfo hints = {0}, *ai = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int g = getaddrinfo(addr, service, &hints, &ai);
  if (g)
    return dtrtFail(c, DTRT_ERR_ENV, "MASTER_ADDR '%s': %s", addr,
                    gai_strerror(g));
  DtrtStore *st = calloc(1, sizeof(DtrtStore));
  if (!st) {
    freeaddrinfo(ai);
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  }
  st->context = c;
  st->fd = -1;
  if (c->rank == 0 &&
      (s = startServer(c, ai, secret, secretLen, &st->server)) != DTRT_OK) {
    freeaddrinfo(ai);
    free(st);
    return s;
  }
  /* Rank 0 may not listen yet, and a connection may be closed before it
   * could prove itself (evicted among a flood of others): connect again
   * until the timeout. */
  double deadline = dtrtNow() + c->timeoutS;
  int err = 0, said = HELLO_CLOSED;
  bool connected = false;
  while (dtrtNow() <= deadline) {
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      connected = true;
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      said = hello(fd, secret, secretLen, deadline);
      if (said == HELLO_OK) {
        st->fd = fd;
        break;
      }
      close(fd);
      if (said != HELLO_CLOSED)
        break;
    } else {
      err = errno;
      if (fd >= 0)
        close(fd);
    }
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  freeaddrinfo(ai);
  memset(secret, 0, sizeof(secret));
  if (st->fd < 0) {
    if (!connected)
      s = dtrtFail(c, DTRT_ERR_TIMEOUT,
                   "rank %d: no rendezvous store at %s:%d after %g s: %s",
                   c->rank, addr, port, c->timeoutS, strerror(err));
    else
      s = dtrtFail(
          c,
          said == HELLO_CLOSED || said == ETIMEDOUT ? DTRT_ERR_TIMEOUT
                                                    : DTRT_ERR_ENV,
          "rank %d: the rendezvous store at %s:%d %s", c->rank, addr, port,
          said == HELLO_IMPOSTOR
              ? "did not prove it knows this job's DTENSOR_SECRET: another "
                "process holds that address, or another job's store is "
                "there; this rank refuses it and sends it nothing"
          : said == HELLO_REFUSED
              ? "refused this rank's proof: its DTENSOR_SECRET differs from "
                "rank 0's"
          : said == HELLO_CLOSED
              ? "kept closing the connection before this rank could "
                "authenticate (too many unauthenticated connections?)"
          : said == ETIMEDOUT ? "did not answer"
                              : strerror(said));
    dtrtStoreDestroy(st);
    return s;
  }
  *outStore = st;
  return DTRT_OK;
}

void dtrtStoreDestroy(DtrtStore *st) {
  if (!st)
    return;
  if (st->fd >= 0) {
    char q = 'Q';
    ioAll(st->fd, &q, 1, true, dtrtNow() + 1);
    close(st->fd);
  }
  if (st->server) {
    /* Serve until every rank said it is done (a late rank may still be
     * reading a value), or the timeout. */
    double deadline = dtrtNow() + st->context->timeoutS;
    int world = st->context->worldSize;
    while (atomic_load(&st->server->quitted) < world && dtrtNow() < deadline) {
      struct timespec pause = {0, 2 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
    stopServer(st->server);
  }
  free(st);
}

static DtrtStatus storeIo(DtrtStore *st, int err, const char *what,
                          const char *key) {
  DtrtContext *c = st->context;
  if (!err)
    return DTRT_OK;
  return dtrtFail(c, err == ETIMEDOUT ? DTRT_ERR_TIMEOUT : DTRT_ERR_SYSTEM,
                  "rank %d: rendezvous store %s '%s': %s", c->rank, what, key,
                  err == ETIMEDOUT ? "timed out" : strerror(err));
}

static DtrtStatus refused(DtrtStore *st, const char *what, const char *key,
                          char code) {
  return dtrtFail(st->context, DTRT_ERR_INVALID,
                  "rank %d: rendezvous store "
                  "%s '%.40s': refused (%s)",
                  st->context->rank, what, key,
                  code == REFUSE_KEY     ? "a key is 1 to 200 bytes"
                  : code == REFUSE_VALUE ? "a value is at most 1 MiB"
                                         : "the store holds at most 64 MiB");
}

/* Reads a reply's tag, which must be `want` or a refusal ('E' and its
 * code, returned in `*code`). */
static int readTag(DtrtStore *st, char want, double deadline, char *code) {
  char tag = 0;
  int err = ioAll(st->fd, &tag, 1, false, deadline);
  if (!err && tag == 'E')
    return ioAll(st->fd, code, 1, false, deadline);
  return err ? err : tag == want ? 0 : EPROTO;
}

/* A request's operation byte and key, checked. */
static DtrtStatus sendHead(DtrtStore *st, char op, const char *key,
                           double deadline, int *outErr) {
  size_t keyLen = strlen(key);
  if (keyLen == 0 || keyLen > MAX_KEY)
    return dtrtFail(st->context, DTRT_ERR_INVALID,
                    "rendezvous store: key "
                    "'%.40s' is not 1 to %d bytes",
                    key, MAX_KEY);
  uint32_t k = (uint32_t)keyLen;
  int err = ioAll(st->fd, &op, 1, true, deadline);
  if (!err)
    err = ioAll(st->fd, &k, 4, true, deadline);
  *outErr = err ? err : ioAll(st->fd, (void *)key, k, true, deadline);
  return DTRT_OK;
}

DtrtStatus dtrtStoreSet(DtrtStore *st, const char *key, const void *value,
                        size_t size) {
  if (size > MAX_VALUE)
    return dtrtFail(st->context, DTRT_ERR_INVALID,
                    "rendezvous store: the "
                    "%zu-byte value of '%.40s' is over 1 MiB",
                    size, key);
  double deadline = dtrtNow() + st->context->timeoutS;
  uint32_t n = (uint32_t)size;
  int err = 0;
  DtrtStatus s = sendHead(st, 'S', key, deadline, &err);
  if (s != DTRT_OK)
    return s;
  if (!err)
    err = ioAll(st->fd, &n, 4, true, deadline);
  if (!err)
    err = ioAll(st->fd, (void *)value, size, true, deadline);
  char code = 0;
  if (!err)
    err = readTag(st, 'K', deadline, &code);
  return code ? refused(st, "set", key, code) : storeIo(st, err, "set", key);
}

DtrtStatus dtrtStoreGet(DtrtStore *st, const char *key, void *out,
                        size_t size) {
  double deadline = dtrtNow() + st->context->timeoutS;
  uint32_t n = 0;
  int err = 0;
  DtrtStatus s = sendHead(st, 'G', key, deadline, &err);
  if (s != DTRT_OK)
    return s;
  char code = 0;
  if (!err)
    err = readTag(st, 'V', deadline, &code);
  if (code)
    return refused(st, "get", key, code);
  if (!err)
    err = ioAll(st->fd, &n, 4, false, deadline);
  if (!err && n != size) {
    /* Read the value all the same: the next reply starts after it. */
    char sink[4096];
    for (size_t left = n; left && !err; left -= left < 4096 ? left : 4096)
      err = ioAll(st->fd, sink, left < 4096 ? left : 4096, false, deadline);
    if (!err)
      return dtrtFail(st->context, DTRT_ERR_INVALID,
                      "rank %d: rendezvous "
                      "store: '%s' holds %u bytes, not %zu",
                      st->context->rank, key, n, size);
  }
  if (!err)
    err = ioAll(st->fd, out, size, false, deadline);
  return storeIo(st, err, "get", key);
}
