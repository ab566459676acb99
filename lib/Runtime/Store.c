/* The rendezvous store: a small key-value store over TCP that rank 0 serves
 * at MASTER_ADDR:MASTER_PORT (as torchrun's TCPStore), so that ranks can
 * exchange what a backend needs before it has a communicator (NCCL's unique
 * ids). Every rank, rank 0 included, is a client over one connection. A
 * value is set once; a get waits for it.
 *
 * Wire format, in host byte order (every peer is the same build):
 *   request  'S' u32 keyLen key u32 valueLen value   -> reply 'K'
 *            'G' u32 keyLen key                       -> reply u32 len value
 *            'Q' (quit: this client is done)          -> no reply */
#include "RuntimeInternal.h"

#include <arpa/inet.h>
#include <errno.h>
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

typedef struct Entry {
  char key[MAX_KEY + 1];
  size_t size;
  char *value;
} Entry;

typedef struct Client {
  int fd;
  char waitKey[MAX_KEY + 1]; /* a parked get, "" if none */
} Client;

/* Rank 0's server. */
typedef struct Server {
  int listenFd;
  pthread_t thread;
  int wake[2]; /* a pipe: stop serving */
  Client *clients;
  int numClients, maxClients;
  Entry *entries;
  int numEntries, capEntries;
  atomic_int quitted; /* clients that said they are done */
} Server;

struct DtrtStore {
  DtrtContext *context;
  int fd;
  Server *server;
};

/* ---- blocking I/O with the context's timeout -------------------------------- */

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

/* ---- the server ----------------------------------------------------------- */

static Entry *findEntry(Server *s, const char *key) {
  for (int i = 0; i < s->numEntries; ++i)
    if (!strcmp(s->entries[i].key, key))
      return &s->entries[i];
  return NULL;
}

/* Replies to a get; the server's writes are small, so a short deadline. */
static int replyValue(int fd, const Entry *e) {
  uint32_t len = (uint32_t)e->size;
  double deadline = dtrtNow() + 30;
  int err = ioAll(fd, &len, 4, true, deadline);
  return err ? err : ioAll(fd, e->value, e->size, true, deadline);
}

static void dropClient(Server *s, int i) {
  close(s->clients[i].fd);
  s->clients[i] = s->clients[--s->numClients];
}

/* Reads and serves one request of client `i`; false drops the client. */
static bool serveRequest(Server *s, int i) {
  Client *cl = &s->clients[i];
  double deadline = dtrtNow() + 30;
  char op;
  uint32_t keyLen;
  if (ioAll(cl->fd, &op, 1, false, deadline))
    return false;
  if (op == 'Q') {
    ++s->quitted;
    return false;
  }
  if ((op != 'S' && op != 'G') || ioAll(cl->fd, &keyLen, 4, false, deadline) ||
      keyLen > MAX_KEY)
    return false;
  char key[MAX_KEY + 1];
  if (ioAll(cl->fd, key, keyLen, false, deadline))
    return false;
  key[keyLen] = 0;
  if (op == 'G') {
    Entry *e = findEntry(s, key);
    if (e)
      return replyValue(cl->fd, e) == 0;
    snprintf(cl->waitKey, sizeof(cl->waitKey), "%s", key);
    return true;
  }
  uint32_t size;
  if (ioAll(cl->fd, &size, 4, false, deadline) || size > MAX_VALUE)
    return false;
  char *value = malloc(size + 1);
  if (!value || ioAll(cl->fd, value, size, false, deadline)) {
    free(value);
    return false;
  }
  Entry *e = findEntry(s, key);
  if (e) { /* a later set replaces the value */
    free(e->value);
  } else {
    if (s->numEntries == s->capEntries) {
      int cap = s->capEntries ? 2 * s->capEntries : 16;
      Entry *grown = realloc(s->entries, sizeof(Entry) * (size_t)cap);
      if (!grown) {
        free(value);
        return false;
      }
      s->entries = grown;
      s->capEntries = cap;
    }
    e = &s->entries[s->numEntries++];
    snprintf(e->key, sizeof(e->key), "%s", key);
  }
  e->value = value;
  e->size = size;
  char ack = 'K';
  if (ioAll(cl->fd, &ack, 1, true, deadline))
    return false;
  /* Wake the gets parked on this key. */
  for (int j = 0; j < s->numClients; ++j)
    if (!strcmp(s->clients[j].waitKey, key)) {
      s->clients[j].waitKey[0] = 0;
      replyValue(s->clients[j].fd, e);
    }
  return true;
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
    for (int i = 0; i < s->numClients; ++i)
      pfds[i + 2] = (struct pollfd){s->clients[i].fd, POLLIN, 0};
    if (poll(pfds, (nfds_t)n, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (pfds[0].revents)
      break;
    /* Clients from the back, so dropping one keeps earlier indices. */
    for (int i = s->numClients - 1; i >= 0; --i)
      if (pfds[i + 2].revents && !serveRequest(s, i))
        dropClient(s, i);
    if (pfds[1].revents & POLLIN) {
      int fd = accept(s->listenFd, NULL, NULL);
      if (fd >= 0) {
        if (s->numClients == s->maxClients) {
          int cap = s->maxClients ? 2 * s->maxClients : 8;
          Client *more = realloc(s->clients, sizeof(Client) * (size_t)cap);
          if (!more) {
            close(fd);
            continue;
          }
          s->clients = more;
          s->maxClients = cap;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        s->clients[s->numClients++] = (Client){fd, ""};
      }
    }
  }
  free(pfds);
  return NULL;
}

static DtrtStatus startServer(DtrtContext *c, const struct addrinfo *ai,
                              Server **out) {
  Server *s = calloc(1, sizeof(Server));
  if (!s)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  s->wake[0] = s->wake[1] = -1;
  s->listenFd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (s->listenFd >= 0)
    setsockopt(s->listenFd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (s->listenFd < 0 || bind(s->listenFd, ai->ai_addr, ai->ai_addrlen) ||
      listen(s->listenFd, 128) || pipe(s->wake)) {
    DtrtStatus st = dtrtFail(c, DTRT_ERR_SYSTEM, "rank 0: serving the "
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
  for (int i = 0; i < s->numClients; ++i)
    close(s->clients[i].fd);
  for (int i = 0; i < s->numEntries; ++i)
    free(s->entries[i].value);
  free(s->clients);
  free(s->entries);
  free(s);
}

/* ---- the client ----------------------------------------------------------- */

DtrtStatus dtrtStoreCreate(DtrtContext *c, const char *addr, int port,
                           DtrtStore **outStore) {
  *outStore = NULL;
  if (port <= 0 || port > 65535)
    return dtrtFail(c, DTRT_ERR_ENV, "MASTER_PORT %d is not a TCP port", port);
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
  DtrtStatus s = DTRT_OK;
  if (c->rank == 0 && (s = startServer(c, ai, &st->server)) != DTRT_OK) {
    freeaddrinfo(ai);
    free(st);
    return s;
  }
  /* Rank 0 may not listen yet: retry until the timeout. */
  double deadline = dtrtNow() + c->timeoutS;
  int err = 0;
  for (;;) {
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      st->fd = fd;
      break;
    }
    err = errno;
    if (fd >= 0)
      close(fd);
    if (dtrtNow() > deadline)
      break;
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  freeaddrinfo(ai);
  if (st->fd < 0) {
    s = dtrtFail(c, DTRT_ERR_TIMEOUT, "rank %d: no rendezvous store at "
                 "%s:%d after %g s: %s", c->rank, addr, port, c->timeoutS,
                 strerror(err));
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
    while (atomic_load(&st->server->quitted) < world &&
           dtrtNow() < deadline) {
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

/* A request's operation byte and key. */
static int sendHead(DtrtStore *st, char op, const char *key, double deadline) {
  uint32_t k = (uint32_t)strlen(key);
  int err = ioAll(st->fd, &op, 1, true, deadline);
  if (!err)
    err = ioAll(st->fd, &k, 4, true, deadline);
  return err ? err : ioAll(st->fd, (void *)key, k, true, deadline);
}

DtrtStatus dtrtStoreSet(DtrtStore *st, const char *key, const void *value,
                        size_t size) {
  size_t keyLen = strlen(key);
  if (keyLen > MAX_KEY || size > MAX_VALUE)
    return dtrtFail(st->context, DTRT_ERR_INVALID, "rendezvous store: key "
                    "'%.40s' or its %zu-byte value is too long", key, size);
  double deadline = dtrtNow() + st->context->timeoutS;
  uint32_t n = (uint32_t)size;
  char ack = 0;
  int err = sendHead(st, 'S', key, deadline);
  if (!err)
    err = ioAll(st->fd, &n, 4, true, deadline);
  if (!err)
    err = ioAll(st->fd, (void *)value, size, true, deadline);
  if (!err)
    err = ioAll(st->fd, &ack, 1, false, deadline);
  if (!err && ack != 'K')
    err = EPROTO;
  return storeIo(st, err, "set", key);
}

DtrtStatus dtrtStoreGet(DtrtStore *st, const char *key, void *out,
                        size_t size) {
  size_t keyLen = strlen(key);
  if (keyLen > MAX_KEY)
    return dtrtFail(st->context, DTRT_ERR_INVALID, "rendezvous store: key "
                    "'%.40s' is too long", key);
  double deadline = dtrtNow() + st->context->timeoutS;
  uint32_t n = 0;
  int err = sendHead(st, 'G', key, deadline);
  if (!err)
    err = ioAll(st->fd, &n, 4, false, deadline);
  if (!err && n != size)
    return dtrtFail(st->context, DTRT_ERR_INVALID, "rank %d: rendezvous "
                    "store: '%s' holds %u bytes, not %zu", st->context->rank,
                    key, n, size);
  if (!err)
    err = ioAll(st->fd, out, size, false, deadline);
  return storeIo(st, err, "get", key);
}
