/* The shared-memory backend's direct collectives: where the kernel
 * allows it (probed once per communicator), large blocks are read from the
 * peers' buffers with process_vm_readv (cross-memory attach: one copy of
 * every byte instead of the slots' two), the members publishing their
 * buffer addresses in the segment's table (Shm.c). */
#define _GNU_SOURCE
#include "ShmInternal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* ---- direct (cross-memory) collectives ----------------------------------- */

/* Reads `n` bytes at `remote` in member `j`'s memory into `local`. */
static DtrtStatus readPeer(DtrtComm *comm, int j, uint64_t remote, void *local,
                           size_t n) {
  Shm *sh = comm->backend;
  if (j == comm->rank) {
    memmove(local, (const void *)(uintptr_t)remote, n);
    return DTRT_OK;
  }
  pid_t pid = sh->meta[j].pid;
  while (n) {
    struct iovec l = {local, n}, r = {(void *)(uintptr_t)remote, n};
    ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got <= 0) {
      if (got < 0 && errno == EINTR)
        continue;
      /* The peer is gone (ESRCH) or its buffer is: it failed. */
      int e = got < 0 ? errno : EIO;
      dtShmMarkFailed(comm);
      return dtrtFail(comm->context,
                      e == ESRCH ? DTRT_ERR_PEER : DTRT_ERR_SYSTEM,
                      "rank %d: reading the buffer of rank %d: %s",
                      comm->context->rank, comm->members[j], strerror(e));
    }
    local = (char *)local + got;
    remote += (uint64_t)got;
    n -= (size_t)got;
  }
  return DTRT_OK;
}

/* Whether every member can read every other's memory (ptrace rules may
 * forbid it): each reads its successor's probe; one failure turns direct
 * reads off for all. */
DtrtStatus dtShmProbeDirect(DtrtComm *comm) {
  Shm *sh = comm->backend;
  const char *env = getenv("DTENSOR_SHM_DIRECT");
  bool off = env && !strcmp(env, "0");
  if (comm->size > 1 && !off) {
    int next = (comm->rank + 1) % comm->size;
    uint64_t got = 0;
    struct iovec l = {&got, sizeof(got)};
    struct iovec r = {(void *)(uintptr_t)sh->meta[next].send, sizeof(got)};
    if (process_vm_readv(sh->meta[next].pid, &l, 1, &r, 1, 0) !=
            (ssize_t)sizeof(got) ||
        got != 0x5eed0000u + (uint64_t)next)
      atomic_store(&sh->header->noDirect, 1);
  }
  DtrtStatus st = dtShmBarrier(comm, "communicator set-up");
  if (st != DTRT_OK)
    return st;
  sh->directBytes = SIZE_MAX;
  if (!off && comm->size > 1 && !atomic_load(&sh->header->noDirect)) {
    sh->directBytes = DEFAULT_DIRECT_BYTES;
    const char *at = getenv("DTENSOR_SHM_DIRECT_BYTES");
    if (at && *at)
      sh->directBytes = (size_t)strtoull(at, NULL, 10);
  }
  /* Nobody reads a probe any more once everyone has passed this. */
  return dtShmBarrier(comm, "communicator set-up");
}

static void publish(DtrtComm *comm, const void *send, const void *recv) {
  Shm *sh = comm->backend;
  sh->meta[comm->rank].send = (uint64_t)(uintptr_t)send;
  sh->meta[comm->rank].recv = (uint64_t)(uintptr_t)recv;
}

static uint64_t sendOf(DtrtComm *comm, int j) {
  return ((Shm *)comm->backend)->meta[j].send;
}

static uint64_t recvOf(DtrtComm *comm, int j) {
  return ((Shm *)comm->backend)->meta[j].recv;
}

/* Every direct collective: publish, wait, move, wait (no member returns
 * while another may still read its buffers). */
static DtrtStatus directAllGather(DtrtComm *comm, const void *send, void *recv,
                                  size_t bytes) {
  publish(comm, send, recv);
  DtrtStatus s = dtShmBarrier(comm, "all_gather");
  for (int k = 0; k < comm->size && s == DTRT_OK; ++k) {
    int j = (comm->rank + k) % comm->size; /* spread the readers */
    s = readPeer(comm, j, sendOf(comm, j), (char *)recv + (size_t)j * bytes,
                 bytes);
  }
  DtrtStatus w = dtShmBarrier(comm, "all_gather");
  return s != DTRT_OK ? s : w;
}

static DtrtStatus directAllToAll(DtrtComm *comm, const void *send, void *recv,
                                 size_t bytes) {
  publish(comm, send, recv);
  DtrtStatus s = dtShmBarrier(comm, "all_to_all");
  for (int k = 0; k < comm->size && s == DTRT_OK; ++k) {
    int j = (comm->rank + k) % comm->size;
    s = readPeer(comm, j, sendOf(comm, j) + (uint64_t)comm->rank * bytes,
                 (char *)recv + (size_t)j * bytes, bytes);
  }
  DtrtStatus w = dtShmBarrier(comm, "all_to_all");
  return s != DTRT_OK ? s : w;
}

/* out = reduction over every member j of the `n` bytes at offset `off` of
 * j's published send buffer; through the scratch buffer, chunk by chunk. */
static DtrtStatus reduceFromPeers(DtrtComm *comm, void *out, uint64_t off,
                                  size_t n, DtrtDtype dtype, DtrtReduce op) {
  Shm *sh = comm->backend;
  size_t es = dtrtDtypeSize(dtype);
  if (!sh->scratch && !(sh->scratch = malloc(SCRATCH_BYTES)))
    return dtrtFail(comm->context, DTRT_ERR_NOMEM, "out of memory");
  size_t step = SCRATCH_BYTES / es * es;
  for (size_t at = 0; at < n; at += step) {
    size_t m = n - at < step ? n - at : step;
    char *dst = (char *)out + at;
    const char *own =
        (const char *)(uintptr_t)(sendOf(comm, comm->rank) + off + at);
    DtrtStatus s = DTRT_OK;
    if (own != dst) /* in place, the own part is there already */
      memcpy(dst, own, m);
    for (int k = 1; k < comm->size && s == DTRT_OK; ++k) {
      int j = (comm->rank + k) % comm->size;
      if ((s = readPeer(comm, j, sendOf(comm, j) + off + at, sh->scratch, m)))
        return s;
      dtrtCombine(dst, sh->scratch, m / es, dtype, op);
    }
    if (s != DTRT_OK)
      return s;
    if (op == DTRT_AVG)
      dtrtScale(dst, m / es, dtype, comm->size);
  }
  return DTRT_OK;
}

static DtrtStatus directReduceScatter(DtrtComm *comm, const void *send,
                                      void *recv, size_t count, DtrtDtype dtype,
                                      DtrtReduce op) {
  size_t bytes = count * dtrtDtypeSize(dtype);
  publish(comm, send, recv);
  DtrtStatus s = dtShmBarrier(comm, "reduce_scatter");
  if (s == DTRT_OK)
    s = reduceFromPeers(comm, recv, (uint64_t)comm->rank * bytes, bytes, dtype,
                        op);
  DtrtStatus w = dtShmBarrier(comm, "reduce_scatter");
  return s != DTRT_OK ? s : w;
}

/* Each member reduces its 1/size part from everyone's input into its own
 * output, then reads the other parts from the other members' outputs. In
 * place works: a member writes only its part, which no one reads before
 * the middle wait. */
static DtrtStatus directAllReduce(DtrtComm *comm, const void *send, void *recv,
                                  size_t count, DtrtDtype dtype,
                                  DtrtReduce op) {
  size_t es = dtrtDtypeSize(dtype), n = (size_t)comm->size;
  size_t part = (count + n - 1) / n;
  publish(comm, send, recv);
  DtrtStatus s = dtShmBarrier(comm, "all_reduce");
  size_t first = part * (size_t)comm->rank;
  size_t mine =
      first >= count ? 0 : (count - first < part ? count - first : part);
  if (s == DTRT_OK && mine)
    s = reduceFromPeers(comm, (char *)recv + first * es, first * es, mine * es,
                        dtype, op);
  DtrtStatus w = dtShmBarrier(comm, "all_reduce");
  if (s == DTRT_OK)
    s = w;
  for (int k = 1; k < comm->size && s == DTRT_OK; ++k) {
    int j = (comm->rank + k) % comm->size;
    size_t f = part * (size_t)j;
    if (f >= count)
      continue;
    size_t m = count - f < part ? count - f : part;
    s = readPeer(comm, j, recvOf(comm, j) + f * es, (char *)recv + f * es,
                 m * es);
  }
  w = dtShmBarrier(comm, "all_reduce");
  return s != DTRT_OK ? s : w;
}

static DtrtStatus directBroadcast(DtrtComm *comm, void *buffer, size_t bytes,
                                  int root) {
  publish(comm, buffer, buffer);
  DtrtStatus s = dtShmBarrier(comm, "broadcast");
  if (s == DTRT_OK && comm->rank != root)
    s = readPeer(comm, root, sendOf(comm, root), buffer, bytes);
  DtrtStatus w = dtShmBarrier(comm, "broadcast");
  return s != DTRT_OK ? s : w;
}

DtrtStatus dtShmRunDirect(DtrtComm *comm, const DtrtCollective *op) {
  size_t bytes = op->count * dtrtDtypeSize(op->dtype);
  switch (op->kind) {
  case DTRT_COLL_ALL_GATHER:
    return directAllGather(comm, op->send, op->recv, bytes);
  case DTRT_COLL_ALL_TO_ALL:
    return directAllToAll(comm, op->send, op->recv, bytes);
  case DTRT_COLL_REDUCE_SCATTER:
    return directReduceScatter(comm, op->send, op->recv, op->count, op->dtype,
                               op->reduce);
  case DTRT_COLL_ALL_REDUCE:
    return directAllReduce(comm, op->send, op->recv, op->count, op->dtype,
                           op->reduce);
  case DTRT_COLL_BROADCAST:
    return directBroadcast(comm, op->recv, bytes, op->root);
  default:
    return dtrtFail(comm->context, DTRT_ERR_INVALID,
                    "collective %d has no direct path", (int)op->kind);
  }
}
