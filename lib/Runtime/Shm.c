/* The shared-memory backend: one POSIX shared-memory segment per
 * communicator, named /dtensor-<job>-<hash of the member list>, mode 0600:
 * a header with a sense-reversing barrier and a failure flag, then one
 * exchange slot per member. Every member creates-or-opens it; a new
 * segment is zero-filled, which is the barrier's initial state. Segments
 * are unlinked at dtrtFinalize and, after a crash, by dtensor-run. */
#include "RuntimeInternal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SLOT_BYTES (1u << 20)

typedef struct Header {
  _Atomic unsigned arrived;
  _Atomic unsigned generation;
  _Atomic int failed; /* 1 + the member position that failed */
  unsigned members;
  char pad[64 - 4 * sizeof(unsigned)];
} Header;

typedef struct Shm {
  char name[200];
  size_t slotBytes, totalBytes;
  Header *header;
  char *slots;
} Shm;

static uint64_t hashMembers(const DtrtComm *comm) {
  uint64_t h = 1469598103934665603ULL;
  for (int i = 0; i < comm->size; ++i) {
    h ^= (uint64_t)comm->members[i] + 1;
    h *= 1099511628211ULL;
  }
  return h ^ (uint64_t)comm->size << 40;
}

DtrtStatus dtrtShmCommInit(DtrtComm *comm) {
  DtrtContext *c = comm->context;
  Shm *s = calloc(1, sizeof(Shm));
  if (!s)
    return dtrtFail(c, DTRT_ERR_NOMEM, "out of memory");
  s->slotBytes = DEFAULT_SLOT_BYTES;
  const char *slot = getenv("DTENSOR_SHM_SLOT_BYTES");
  if (slot && *slot) {
    long v = strtol(slot, NULL, 10);
    if (v >= 64 && v <= (1l << 30))
      s->slotBytes = (size_t)v / 64 * 64;
  }
  s->totalBytes = sizeof(Header) + s->slotBytes * (size_t)comm->size;
  snprintf(s->name, sizeof(s->name), "/dtensor-%s-%016llx", c->job,
           (unsigned long long)hashMembers(comm));
  int fd = shm_open(s->name, O_CREAT | O_RDWR, 0600);
  if (fd < 0) {
    DtrtStatus st = dtrtFail(c, DTRT_ERR_SYSTEM, "shm_open(%s): %s", s->name,
                             strerror(errno));
    free(s);
    return st;
  }
  struct stat info;
  if (fstat(fd, &info) == 0 && (size_t)info.st_size < s->totalBytes &&
      ftruncate(fd, (off_t)s->totalBytes) != 0) {
    DtrtStatus st = dtrtFail(c, DTRT_ERR_SYSTEM, "ftruncate(%s): %s",
                             s->name, strerror(errno));
    close(fd);
    free(s);
    return st;
  }
  void *map = mmap(NULL, s->totalBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                   fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    DtrtStatus st = dtrtFail(c, DTRT_ERR_SYSTEM, "mmap(%s): %s", s->name,
                             strerror(errno));
    free(s);
    return st;
  }
  s->header = map;
  s->slots = (char *)map + sizeof(Header);
  comm->backend = s;
  /* Everyone has mapped it before anyone uses it. */
  return dtrtShmBarrier(comm, "communicator set-up");
}

void dtrtShmCommFree(DtrtComm *comm, bool unlink) {
  Shm *s = comm->backend;
  if (!s)
    return;
  munmap(s->header, s->totalBytes);
  if (unlink)
    shm_unlink(s->name); /* every member tries; ENOENT is fine */
  free(s);
  comm->backend = NULL;
}

size_t dtrtShmSlotBytes(const DtrtComm *comm) {
  return ((const Shm *)comm->backend)->slotBytes;
}

void *dtrtShmSlot(DtrtComm *comm, int member) {
  Shm *s = comm->backend;
  return s->slots + (size_t)member * s->slotBytes;
}

void dtrtShmMarkFailed(DtrtComm *comm) {
  Shm *s = comm->backend;
  int expected = 0;
  atomic_compare_exchange_strong(&s->header->failed, &expected,
                                 comm->rank + 1);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

DtrtStatus dtrtShmBarrier(DtrtComm *comm, const char *what) {
  Shm *s = comm->backend;
  DtrtContext *c = comm->context;
  Header *h = s->header;
  unsigned gen = atomic_load(&h->generation);
  if (atomic_fetch_add(&h->arrived, 1) + 1 == (unsigned)comm->size) {
    atomic_store(&h->arrived, 0);
    atomic_fetch_add(&h->generation, 1);
    return DTRT_OK;
  }
  double start = now();
  for (unsigned spins = 0; atomic_load(&h->generation) == gen; ++spins) {
    int failed = atomic_load(&h->failed);
    if (failed)
      return dtrtFail(c, DTRT_ERR_PEER, "rank %d: rank %d of the group "
                      "failed during %s", c->rank,
                      comm->members[failed - 1], what);
    if (spins < 1000)
      continue;
    sched_yield();
    if ((spins & 1023) == 0 && now() - start > c->timeoutS) {
      dtrtShmMarkFailed(comm);
      return dtrtFail(c, DTRT_ERR_TIMEOUT, "rank %d: timed out after %g s in "
                      "%s waiting for the other ranks of a group of %d",
                      c->rank, c->timeoutS, what, comm->size);
    }
  }
  return DTRT_OK;
}
