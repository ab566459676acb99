/* The shared-memory backend: one POSIX shared-memory segment per
 * communicator, named /dtensor-<job>-<hash of the member list>, where <job>
 * is the job's random token (DTENSOR_JOB, drawn by dtensor-run): a header
 * with a sense-reversing barrier and a failure flag, a table with each
 * member's pid, permute destination and published buffer addresses, then
 * one exchange slot per member.
 *
 * Only the job's ranks may ever share a segment: the group's first member
 * creates it exclusively (O_CREAT | O_EXCL, mode 0600) and writes a header
 * (magic, member count and hash, size) last; the others attach only to a
 * segment owned by their own user, mode 0600, of the expected size, whose
 * header says it is this group's. Once every member has attached, the
 * creator unlinks the name: the segment lives on in the members' mappings,
 * nothing is left in /dev/shm after a crash, and no one can open it again.
 *
 * Two ways to move data: small collectives go through the slots (each
 * member copies in, all wait, each copies out: two copies of every byte);
 * large ones, where the kernel allows it, read the peers' buffers directly
 * with process_vm_readv (cross-memory attach: one copy), the members
 * publishing their buffer addresses in the table. Whether the kernel allows
 * it is probed once per communicator and agreed by all members. */
#define _GNU_SOURCE
#include "ShmInternal.h"
#include "Support/Support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static size_t metaBytes(int size) { return (size_t)size * sizeof(Meta); }

static uint64_t hashMembers(const DtrtComm *comm) {
  uint64_t h = 1469598103934665603ULL;
  for (int i = 0; i < comm->size; ++i) {
    h ^= (uint64_t)comm->members[i] + 1;
    h *= 1099511628211ULL;
  }
  return h ^ (uint64_t)comm->size << 40;
}

static void pause1ms(void) {
  struct timespec t = {0, 1000 * 1000};
  nanosleep(&t, NULL);
}

/* The group's first member: creates the segment, which must not exist. */
static DtrtStatus createSegment(DtrtComm *comm, Shm *s, int *outFd) {
  DtrtContext *c = comm->context;
  int fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST)
    return dtrtFail(c, DTRT_ERR_SYSTEM,
                    "rank %d: the shared-memory segment "
                    "%s exists already and this job did not create it (a "
                    "second job with the same DTENSOR_JOB, or another user's "
                    "segment): refusing to use it",
                    c->rank, s->name);
  if (fd < 0)
    return dtrtFail(c, DTRT_ERR_SYSTEM, "shm_open(%s): %s", s->name,
                    strerror(errno));
  /* The umask may have taken bits away: exactly 0600. */
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)s->totalBytes) != 0) {
    DtrtStatus st = dtrtFail(c, DTRT_ERR_SYSTEM, "creating %s: %s", s->name,
                             strerror(errno));
    close(fd);
    shm_unlink(s->name);
    return st;
  }
  *outFd = fd;
  return DTRT_OK;
}

/* The other members: wait for the creator's segment and attach only to a
 * private one of the expected size. */
static DtrtStatus openSegment(DtrtComm *comm, Shm *s, int *outFd) {
  DtrtContext *c = comm->context;
  double deadline = dtrtNow() + c->timeoutS;
  for (;;) {
    int fd = shm_open(s->name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0 && errno != ENOENT)
      return dtrtFail(c, DTRT_ERR_SYSTEM, "shm_open(%s): %s", s->name,
                      strerror(errno));
    struct stat info;
    if (fd >= 0) {
      if (fstat(fd, &info) != 0) {
        close(fd);
        return dtrtFail(c, DTRT_ERR_SYSTEM, "fstat(%s): %s", s->name,
                        strerror(errno));
      }
      if (info.st_uid != geteuid() || (info.st_mode & 07777) != 0600) {
        close(fd);
        return dtrtFail(c, DTRT_ERR_SYSTEM,
                        "rank %d: the shared-memory "
                        "segment %s belongs to user %u with mode %04o, not to "
                        "this job (user %u, 0600): refusing to attach",
                        c->rank, s->name, (unsigned)info.st_uid,
                        (unsigned)(info.st_mode & 07777), (unsigned)geteuid());
      }
      if ((size_t)info.st_size == s->totalBytes) {
        *outFd = fd;
        return DTRT_OK;
      }
      close(fd);
      if (info.st_size != 0) /* 0: created, not yet sized */
        return dtrtFail(c, DTRT_ERR_SYSTEM,
                        "rank %d: the shared-memory "
                        "segment %s holds %lld bytes, not the %zu this group "
                        "needs: refusing to attach",
                        c->rank, s->name, (long long)info.st_size,
                        s->totalBytes);
    }
    if (dtrtNow() > deadline)
      return dtrtFail(c, DTRT_ERR_TIMEOUT,
                      "rank %d: timed out after %g s "
                      "waiting for rank %d to create the group's shared "
                      "memory %s",
                      c->rank, c->timeoutS, comm->members[0], s->name);
    pause1ms();
  }
}

/* Waits for the creator's header and checks it names this group. */
static DtrtStatus checkHeader(DtrtComm *comm, Shm *s) {
  DtrtContext *c = comm->context;
  Header *h = s->header;
  double deadline = dtrtNow() + c->timeoutS;
  while (atomic_load_explicit(&h->ready, memory_order_acquire) !=
         SEGMENT_MAGIC) {
    if (dtrtNow() > deadline)
      return dtrtFail(c, DTRT_ERR_TIMEOUT,
                      "rank %d: the shared-memory "
                      "segment %s was never initialized by its creator "
                      "(rank %d) within %g s",
                      c->rank, s->name, comm->members[0], c->timeoutS);
    pause1ms();
  }
  if (h->size != (uint32_t)comm->size || h->members != hashMembers(comm) ||
      h->totalBytes != s->totalBytes)
    return dtrtFail(c, DTRT_ERR_SYSTEM,
                    "rank %d: the shared-memory segment "
                    "%s belongs to another group (%u members): refusing to "
                    "use it",
                    c->rank, s->name, h->size);
  return DTRT_OK;
}

void dtrtShmSegmentName(const char *job, const DtrtComm *comm, char *out,
                        size_t capacity) {
  /* Keyed by the job's secret when it has one: /dev/shm shows the token to
   * every user while a segment is set up, and names derived from it alone
   * let another user make the names of groups the job has not made yet. */
  const char *secret = getenv("DTENSOR_SECRET");
  const char *key = secret && *secret ? secret : job;
  const void *parts[3] = {"dtensor-shm", &comm->size, comm->members};
  size_t sizes[3] = {12, sizeof(comm->size), sizeof(int) * (size_t)comm->size};
  uint8_t mac[DT_SHA256_BYTES];
  dtHmacSha256(key, strlen(key), parts, sizes, 3, mac);
  uint64_t tag = 0;
  for (int i = 0; i < 8; ++i)
    tag = tag << 8 | mac[i];
  snprintf(out, capacity, "/dtensor-%s-%016llx", job, (unsigned long long)tag);
}

/* Whether process `pid` has exited: gone, or a zombie nobody reaps (the
 * ranks of a launcher killed with SIGKILL end as children of an init that
 * may not reap them). */
static bool processGone(int32_t pid) {
  if (kill(pid, 0) != 0)
    return errno == ESRCH;
  char path[64], text[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
  if (f)
    fclose(f);
  text[n] = 0;
  const char *end = strrchr(text, ')');
  return end && (end[2] == 'Z' || end[2] == 'X');
}

void dtrtShmRemoveStale(void) {
  DIR *d = opendir("/dev/shm");
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strncmp(e->d_name, "dtensor-", 8))
      continue;
    char name[300];
    snprintf(name, sizeof(name), "/%s", e->d_name);
    int fd = shm_open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
    struct stat st;
    Header *h = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == geteuid() &&
        S_ISREG(st.st_mode) && st.st_size >= (off_t)sizeof(Header))
      h = mmap(NULL, sizeof(Header), PROT_READ, MAP_SHARED, fd, 0);
    if (fd >= 0)
      close(fd);
    if (h == MAP_FAILED)
      continue;
    /* A complete header whose creator is gone: its job was killed during
     * set-up, before the name could be removed. */
    int32_t creator = h->creator;
    bool stale = atomic_load(&h->ready) == SEGMENT_MAGIC && creator > 0 &&
                 processGone(creator);
    munmap(h, sizeof(Header));
    if (stale)
      shm_unlink(name);
  }
  if (d)
    closedir(d);
}

static DtrtStatus shmCommInit(DtrtComm *comm) {
  DtrtContext *c = comm->context;
  if (!*c->job) {
    /* A group of one needs no agreement on the name; a larger one needs
     * the token the launcher hands every rank. */
    if (comm->size > 1)
      return dtrtFail(c, DTRT_ERR_ENV,
                      "DTENSOR_JOB is not set: the shm "
                      "backend's ranks need a job token they share and no "
                      "one else can guess (dtensor-run sets one; under "
                      "another launcher, export DTENSOR_JOB=$(od -An -N16 "
                      "-tx1 /dev/urandom | tr -d ' \\n') for every rank)");
    DtrtStatus t = dtrtJobToken(c->job, sizeof(c->job));
    if (t != DTRT_OK)
      return dtrtFail(c, t, "no random job token: %s", strerror(errno));
  }
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
  s->totalBytes = sizeof(Header) + metaBytes(comm->size) +
                  s->slotBytes * (size_t)comm->size;
  dtrtShmSegmentName(c->job, comm, s->name, sizeof(s->name));
  bool creator = comm->rank == 0;
  int fd = -1;
  DtrtStatus st =
      creator ? createSegment(comm, s, &fd) : openSegment(comm, s, &fd);
  if (st != DTRT_OK) {
    free(s);
    return st;
  }
  void *map =
      mmap(NULL, s->totalBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    st = dtrtFail(c, DTRT_ERR_SYSTEM, "mmap(%s): %s", s->name, strerror(errno));
    if (creator)
      shm_unlink(s->name);
    free(s);
    return st;
  }
  s->header = map;
  s->meta = (Meta *)((char *)map + sizeof(Header));
  s->slots = (char *)map + sizeof(Header) + metaBytes(comm->size);
  comm->backend = s;
  if (creator) {
    s->header->creator = (int32_t)getpid();
    s->header->size = (uint32_t)comm->size;
    s->header->members = hashMembers(comm);
    s->header->totalBytes = s->totalBytes;
    atomic_store_explicit(&s->header->ready, SEGMENT_MAGIC,
                          memory_order_release);
  } else if ((st = checkHeader(comm, s)) != DTRT_OK) {
    return st;
  }
  s->meta[comm->rank].pid = (int)getpid();
  s->probe = 0x5eed0000u + (uint64_t)comm->rank;
  s->meta[comm->rank].send = (uint64_t)(uintptr_t)&s->probe;
  /* Everyone has mapped it (and published its probe) before anyone uses
   * it; then the name goes, whatever the outcome. */
  st = dtShmBarrier(comm, "communicator set-up");
  if (creator)
    shm_unlink(s->name);
  if (st != DTRT_OK)
    return st;
  return dtShmProbeDirect(comm);
}

/* Nothing to remove either way (`clean`): the creator unlinked the name
 * at set-up. */
static void shmCommFree(DtrtComm *comm, bool clean) {
  (void)clean;
  Shm *s = comm->backend;
  if (!s)
    return;
  munmap(s->header, s->totalBytes);
  free(s->scratch);
  free(s);
  comm->backend = NULL;
}

static size_t slotBytes(const DtrtComm *comm) {
  return ((const Shm *)comm->backend)->slotBytes;
}

static void *slot(DtrtComm *comm, int member) {
  Shm *s = comm->backend;
  return s->slots + (size_t)member * s->slotBytes;
}

void dtShmMarkFailed(DtrtComm *comm) {
  Shm *s = comm->backend;
  int expected = 0;
  atomic_compare_exchange_strong(&s->header->failed, &expected, comm->rank + 1);
}

/* The global ranks of the members that have not reached barrier number
 * `entered` ("rank 2", "ranks 1, 3"), for a timeout's message. */
static const char *lagging(DtrtComm *comm, unsigned entered) {
  static _Thread_local char text[160];
  Shm *s = comm->backend;
  int count = 0;
  size_t used = 0;
  text[0] = 0;
  for (int j = 0; j < comm->size; ++j)
    if ((int)(atomic_load(&s->meta[j].entered) - entered) < 0) {
      if (used < sizeof(text) - 16)
        used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%d",
                                 count ? ", " : "", comm->members[j]);
      ++count;
    }
  if (!count)
    return "the other ranks";
  static _Thread_local char out[180];
  snprintf(out, sizeof(out), "rank%s %s", count > 1 ? "s" : "", text);
  return out;
}

/* A wait longer than this sleeps until the last member arrives (a
 * futex on the generation, in the shared segment) instead of yielding in
 * a loop: a rank that waits long, or a progress thread waiting while its
 * rank computes, then takes no core time from the compute. */
#define SLEEP_AFTER_S 50e-6

static void sleepWhile(Header *h, unsigned gen) {
  atomic_fetch_add(&h->sleepers, 1);
  /* Rechecked after counting itself: the last member reads the count
   * after bumping the generation, so one of the two sees the other. */
  if (atomic_load(&h->generation) == gen) {
    struct timespec t = {0, 1000 * 1000}; /* to check failures and time */
    syscall(SYS_futex, (unsigned *)&h->generation, FUTEX_WAIT, gen, &t, NULL,
            0);
  }
  atomic_fetch_sub(&h->sleepers, 1);
}

/* After a collective's first barrier, before any member reads another's
 * data: every member's call must be member 0's. Ranks that disagree on a
 * count would otherwise read past each other's blocks. */
static DtrtStatus checkCalls(DtrtComm *comm) {
  Shm *s = comm->backend;
  s->checkCall = false;
  int parity = (int)((s->calls - 1) & 1);
  const DtrtCallSig *first = &s->meta[0].call[parity];
  for (int j = 1; j < comm->size; ++j) {
    DtrtStatus st =
        dtrtCallSigAgree(comm, 0, first, j, &s->meta[j].call[parity]);
    if (st != DTRT_OK)
      return st;
  }
  return DTRT_OK;
}

static DtrtStatus barrierWait(DtrtComm *comm, const char *what);

DtrtStatus dtShmBarrier(DtrtComm *comm, const char *what) {
  Shm *s = comm->backend;
  DtrtStatus st = barrierWait(comm, what);
  return st == DTRT_OK && s->checkCall ? checkCalls(comm) : st;
}

static DtrtStatus barrierWait(DtrtComm *comm, const char *what) {
  Shm *s = comm->backend;
  DtrtContext *c = comm->context;
  Header *h = s->header;
  unsigned gen = atomic_load(&h->generation);
  unsigned entered = atomic_fetch_add(&s->meta[comm->rank].entered, 1) + 1;
  if (atomic_fetch_add(&h->arrived, 1) + 1 == (unsigned)comm->size) {
    atomic_store(&h->arrived, 0);
    atomic_fetch_add(&h->generation, 1);
    if (atomic_load(&h->sleepers))
      syscall(SYS_futex, (unsigned *)&h->generation, FUTEX_WAKE, INT32_MAX,
              NULL, NULL, 0);
    return DTRT_OK;
  }
  double start = dtrtNow();
  bool asleep = false;
  for (unsigned spins = 0; atomic_load(&h->generation) == gen; ++spins) {
    int failed = atomic_load(&h->failed);
    if (failed)
      return dtrtFail(c, DTRT_ERR_PEER,
                      "rank %d: rank %d of the group "
                      "failed during %s",
                      c->rank, comm->members[failed - 1], what);
    if (spins < 1000)
      continue;
    if (!asleep && (spins & 63) == 0)
      asleep = dtrtNow() - start > SLEEP_AFTER_S;
    if (asleep)
      sleepWhile(h, gen);
    else
      sched_yield();
    if ((asleep || (spins & 1023) == 0) && dtrtNow() - start > c->timeoutS) {
      dtShmMarkFailed(comm);
      return dtrtFail(c, DTRT_ERR_TIMEOUT,
                      "rank %d: timed out after %g s in "
                      "%s waiting for %s of a group of %d",
                      c->rank, c->timeoutS, what, lagging(comm, entered),
                      comm->size);
    }
  }
  return DTRT_OK;
}

/* ---- collectives over the exchange slots --------------------------------- */

/* Every collective goes in rounds: each member writes (part of) its input
 * into its own slot, all wait, each reads what it needs from the slots, all
 * wait again before the slots are reused. A round carries at most one slot
 * per member; larger buffers take several rounds. */

static DtrtStatus slotAllGather(DtrtComm *comm, const void *send, void *recv,
                                size_t count, DtrtDtype dtype) {
  DtrtStatus s = DTRT_OK;
  size_t es = dtrtDtypeSize(dtype), bytes = count * es;
  size_t step = slotBytes(comm) / es * es;
  for (size_t off = 0; off < bytes || (off == 0 && bytes == 0); off += step) {
    size_t n = bytes - off < step ? bytes - off : step;
    memcpy(slot(comm, comm->rank), (const char *)send + off, n);
    if ((s = dtShmBarrier(comm, "all_gather")))
      return s;
    for (int j = 0; j < comm->size; ++j)
      memcpy((char *)recv + (size_t)j * bytes + off, slot(comm, j), n);
    if ((s = dtShmBarrier(comm, "all_gather")))
      return s;
    if (bytes == 0)
      break;
  }
  return DTRT_OK;
}

/* Reduces the `n`-byte part at `off` of every member's slot into `out`. */
static void reduceSlots(DtrtComm *comm, void *out, size_t n, DtrtDtype dtype,
                        DtrtReduce op, size_t slotOffset) {
  size_t es = dtrtDtypeSize(dtype);
  memcpy(out, (char *)slot(comm, 0) + slotOffset, n);
  for (int j = 1; j < comm->size; ++j)
    dtrtCombine(out, (char *)slot(comm, j) + slotOffset, n / es, dtype, op);
  if (op == DTRT_AVG)
    dtrtScale(out, n / es, dtype, comm->size);
}

static DtrtStatus slotAllReduce(DtrtComm *comm, const void *send, void *recv,
                                size_t count, DtrtDtype dtype, DtrtReduce op) {
  DtrtStatus s = DTRT_OK;
  size_t es = dtrtDtypeSize(dtype), bytes = count * es;
  size_t step = slotBytes(comm) / es * es;
  /* Small rounds: each member reduces the whole round from every slot (two
   * waits). Large rounds: each member reduces its 1/size part and publishes
   * it in its own slot, then everyone copies the parts (three waits, but
   * each member reads the data about twice instead of size times). */
  for (size_t off = 0; off < bytes; off += step) {
    size_t n = bytes - off < step ? bytes - off : step;
    memcpy(slot(comm, comm->rank), (const char *)send + off, n);
    if ((s = dtShmBarrier(comm, "all_reduce")))
      return s;
    size_t elems = n / es,
           part = (elems + (size_t)comm->size - 1) / (size_t)comm->size;
    if (n < (64u << 10) || comm->size == 1) {
      reduceSlots(comm, (char *)recv + off, n, dtype, op, 0);
    } else {
      size_t first = part * (size_t)comm->rank;
      size_t mine =
          first >= elems ? 0 : (elems - first < part ? elems - first : part);
      char *out = (char *)recv + off + first * es;
      if (mine)
        reduceSlots(comm, out, mine * es, dtype, op, first * es);
      /* Only this member reads its part of its own slot: no wait needed
       * before overwriting it with the result. */
      if (mine)
        memcpy((char *)slot(comm, comm->rank) + first * es, out, mine * es);
      if ((s = dtShmBarrier(comm, "all_reduce")))
        return s;
      for (int j = 0; j < comm->size; ++j) {
        size_t f = part * (size_t)j;
        if (j == comm->rank || f >= elems)
          continue;
        size_t m = elems - f < part ? elems - f : part;
        memcpy((char *)recv + off + f * es, (char *)slot(comm, j) + f * es,
               m * es);
      }
    }
    if ((s = dtShmBarrier(comm, "all_reduce")))
      return s;
  }
  return DTRT_OK;
}

/* Copies the part [off, off + n) of every member's block of `send` (blocks
 * of `bytes`) into this member's slot, one after the other. */
static void packBlocks(DtrtComm *comm, const void *send, size_t bytes,
                       size_t off, size_t n) {
  char *mine = slot(comm, comm->rank);
  for (int j = 0; j < comm->size; ++j)
    memcpy(mine + (size_t)j * n, (const char *)send + (size_t)j * bytes + off,
           n);
}

/* reduce_scatter (`reduce`) and all_to_all: member j's block of every
 * input goes to member j. A round carries the same part of every block;
 * reduce_scatter combines the parts, all_to_all places them. */
static DtrtStatus slotBlockwise(DtrtComm *comm, const void *send, void *recv,
                                size_t count, DtrtDtype dtype, bool reduce,
                                DtrtReduce op) {
  DtrtStatus s = DTRT_OK;
  const char *what = dtrtCollectiveName(reduce ? DTRT_COLL_REDUCE_SCATTER
                                               : DTRT_COLL_ALL_TO_ALL);
  size_t es = dtrtDtypeSize(dtype), bytes = count * es;
  size_t step = slotBytes(comm) / (size_t)comm->size / es * es;
  if (step == 0)
    return dtrtFail(comm->context, DTRT_ERR_INVALID,
                    "the exchange slot is "
                    "too small for %d members",
                    comm->size);
  for (size_t off = 0; off < bytes; off += step) {
    size_t n = bytes - off < step ? bytes - off : step;
    packBlocks(comm, send, bytes, off, n);
    if ((s = dtShmBarrier(comm, what)))
      return s;
    if (reduce)
      reduceSlots(comm, (char *)recv + off, n, dtype, op,
                  (size_t)comm->rank * n);
    else
      for (int j = 0; j < comm->size; ++j)
        memcpy((char *)recv + (size_t)j * bytes + off,
               (char *)slot(comm, j) + (size_t)comm->rank * n, n);
    if ((s = dtShmBarrier(comm, what)))
      return s;
  }
  return DTRT_OK;
}

static DtrtStatus slotBroadcast(DtrtComm *comm, void *buffer, size_t count,
                                DtrtDtype dtype, int root) {
  DtrtStatus s = DTRT_OK;
  size_t es = dtrtDtypeSize(dtype), bytes = count * es;
  size_t step = slotBytes(comm) / es * es;
  for (size_t off = 0; off < bytes; off += step) {
    size_t n = bytes - off < step ? bytes - off : step;
    if (comm->rank == root)
      memcpy(slot(comm, root), (char *)buffer + off, n);
    if ((s = dtShmBarrier(comm, "broadcast")))
      return s;
    if (comm->rank != root)
      memcpy((char *)buffer + off, slot(comm, root), n);
    if ((s = dtShmBarrier(comm, "broadcast")))
      return s;
  }
  return DTRT_OK;
}

/* Each member publishes its destination and data, all wait, each receiver
 * checks that its source sends to it and copies, all wait again. */
static DtrtStatus slotPermute(DtrtComm *comm, const void *send, void *recv,
                              size_t count, DtrtDtype dtype, int sendTo,
                              int recvFrom) {
  Shm *sh = comm->backend;
  DtrtStatus s = DTRT_OK;
  size_t es = dtrtDtypeSize(dtype), bytes = count * es;
  size_t step = slotBytes(comm) / es * es;
  bool first = true;
  for (size_t off = 0; off < bytes || first; off += step) {
    size_t n = bytes - off < step ? bytes - off : step;
    atomic_store(&sh->meta[comm->rank].dest, sendTo);
    if (sendTo >= 0 && n)
      memcpy(slot(comm, comm->rank), (const char *)send + off, n);
    if ((s = dtShmBarrier(comm, "permute")))
      return s;
    if (recvFrom >= 0) {
      int dest = atomic_load(&sh->meta[recvFrom].dest);
      if (dest != comm->rank) {
        dtShmMarkFailed(comm);
        return dtrtFail(comm->context, DTRT_ERR_INVALID,
                        "permute: member %d "
                        "receives from member %d, which sends to %d",
                        comm->rank, recvFrom, dest);
      }
      memcpy((char *)recv + off, slot(comm, recvFrom), n);
    } else {
      memset((char *)recv + off, 0, n);
    }
    if ((s = dtShmBarrier(comm, "permute")))
      return s;
    first = false;
  }
  return DTRT_OK;
}

/* ---- small collectives: one wait --------------------------------------------
 *
 * A collective whose data fits half a slot takes one wait instead of two:
 * small collectives alternate between the two halves of the slots, and a
 * half is written again only two small collectives later, when every member
 * has passed the wait of the one in between and so has read it. A
 * collective that writes whole slots waits once first when the last one was
 * small (its readers may still be reading). */

static size_t halfBytes(const DtrtComm *comm) {
  return slotBytes(comm) / 2 / 64 * 64;
}

static bool fitsSmall(const DtrtComm *comm, const DtrtCollective *op) {
  size_t bytes = op->count * dtrtDtypeSize(op->dtype);
  switch (op->kind) {
  case DTRT_COLL_ALL_GATHER:
  case DTRT_COLL_ALL_REDUCE:
  case DTRT_COLL_BROADCAST:
    return bytes <= halfBytes(comm);
  case DTRT_COLL_REDUCE_SCATTER:
  case DTRT_COLL_ALL_TO_ALL:
    return bytes * (size_t)comm->size <= halfBytes(comm);
  default:
    return false;
  }
}

static DtrtStatus smallCollective(DtrtComm *comm, const DtrtCollective *op) {
  Shm *sh = comm->backend;
  size_t half = (sh->smallCount & 1) ? halfBytes(comm) : 0;
  size_t es = dtrtDtypeSize(op->dtype), bytes = op->count * es;
  char *mine = (char *)slot(comm, comm->rank) + half;
  bool root = op->kind == DTRT_COLL_BROADCAST && comm->rank == op->root;
  if (op->kind == DTRT_COLL_REDUCE_SCATTER || op->kind == DTRT_COLL_ALL_TO_ALL)
    memcpy(mine, op->send, bytes * (size_t)comm->size);
  else if (op->kind != DTRT_COLL_BROADCAST)
    memcpy(mine, op->send, bytes);
  else if (root)
    memcpy(mine, op->recv, bytes);
  ++sh->smallCount;
  sh->lastSmall = true;
  DtrtStatus s = dtShmBarrier(comm, dtrtCollectiveName(op->kind));
  if (s != DTRT_OK)
    return s;
  switch (op->kind) {
  case DTRT_COLL_ALL_GATHER:
    for (int j = 0; j < comm->size; ++j)
      memcpy((char *)op->recv + (size_t)j * bytes, (char *)slot(comm, j) + half,
             bytes);
    break;
  case DTRT_COLL_ALL_REDUCE:
    reduceSlots(comm, op->recv, bytes, op->dtype, op->reduce, half);
    break;
  case DTRT_COLL_REDUCE_SCATTER:
    reduceSlots(comm, op->recv, bytes, op->dtype, op->reduce,
                half + (size_t)comm->rank * bytes);
    break;
  case DTRT_COLL_ALL_TO_ALL:
    for (int j = 0; j < comm->size; ++j)
      memcpy((char *)op->recv + (size_t)j * bytes,
             (char *)slot(comm, j) + half + (size_t)comm->rank * bytes, bytes);
    break;
  case DTRT_COLL_BROADCAST:
    if (!root)
      memcpy(op->recv, (char *)slot(comm, op->root) + half, bytes);
    break;
  default:
    break;
  }
  return DTRT_OK;
}

static DtrtStatus shmRun(DtrtComm *comm, const DtrtCollective *op) {
  Shm *sh = comm->backend;
  /* Said before anything else: every path's first barrier comes before
   * its first read of a peer's data, and checks it. */
  sh->meta[comm->rank].call[sh->calls & 1] = dtrtCallSigOf(op, sh->calls);
  ++sh->calls;
  sh->checkCall = true;
  size_t bytes = op->count * dtrtDtypeSize(op->dtype);
  /* all_reduce compares a member's part, the others a whole block. */
  size_t block =
      op->kind == DTRT_COLL_ALL_REDUCE ? bytes / (size_t)comm->size : bytes;
  if (fitsSmall(comm, op) && block < sh->directBytes)
    return smallCollective(comm, op);
  if (op->kind == DTRT_COLL_BARRIER) {
    sh->lastSmall = false; /* everyone has read what came before */
    return dtShmBarrier(comm, "barrier");
  }
  if (op->kind != DTRT_COLL_PERMUTE && op->kind != DTRT_COLL_BARRIER &&
      block >= sh->directBytes)
    return dtShmRunDirect(comm, op);
  /* Whole slots are written below: the readers of the last small
   * collective must be done. */
  if (sh->lastSmall) {
    sh->lastSmall = false;
    DtrtStatus s = dtShmBarrier(comm, "collective");
    if (s != DTRT_OK)
      return s;
  }
  switch (op->kind) {
  case DTRT_COLL_ALL_GATHER:
    return slotAllGather(comm, op->send, op->recv, op->count, op->dtype);
  case DTRT_COLL_ALL_REDUCE:
    return slotAllReduce(comm, op->send, op->recv, op->count, op->dtype,
                         op->reduce);
  case DTRT_COLL_REDUCE_SCATTER:
    return slotBlockwise(comm, op->send, op->recv, op->count, op->dtype, true,
                         op->reduce);
  case DTRT_COLL_ALL_TO_ALL:
    return slotBlockwise(comm, op->send, op->recv, op->count, op->dtype, false,
                         DTRT_SUM);
  case DTRT_COLL_BROADCAST:
    return slotBroadcast(comm, op->recv, op->count, op->dtype, op->root);
  case DTRT_COLL_PERMUTE:
    return slotPermute(comm, op->send, op->recv, op->count, op->dtype,
                       op->sendTo, op->recvFrom);
  case DTRT_COLL_BARRIER:
    return dtShmBarrier(comm, "barrier");
  }
  return dtrtFail(comm->context, DTRT_ERR_INVALID, "unknown collective %d",
                  (int)op->kind);
}

const DtrtBackend dtrtShmBackend = {
    .name = "shm",
    .deviceMemory = false,
    .commInit = shmCommInit,
    .commFree = shmCommFree,
    .run = shmRun,
};
