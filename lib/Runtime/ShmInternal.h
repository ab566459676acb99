/* What the shared-memory backend's two files share (Shm.c: segments,
 * barriers, the slot and small collectives, the dispatch; ShmDirect.c:
 * the direct, cross-memory collectives): the segment's header, each
 * member's entry in its table, a communicator's state, and the functions
 * one gives the other. */
#ifndef DTENSOR_LIB_RUNTIME_SHMINTERNAL_H
#define DTENSOR_LIB_RUNTIME_SHMINTERNAL_H

#include "RuntimeInternal.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DEFAULT_SLOT_BYTES (1u << 20)

/* Blocks of at least this many bytes per member go member to member. */
#define DEFAULT_DIRECT_BYTES (64u << 10)
/* Reductions read peers' data through a scratch buffer of this size. */
#define SCRATCH_BYTES (256u << 10)

/* What the creator writes into `ready` once the header is complete. */
#define SEGMENT_MAGIC 0x64547368u /* "dTsh" */

typedef struct Header {
  _Atomic unsigned arrived;
  _Atomic unsigned generation;
  _Atomic int failed;     /* 1 + the member position that failed */
  _Atomic int noDirect;   /* a member could not read a peer's memory */
  _Atomic uint32_t ready; /* SEGMENT_MAGIC once the fields below are set */
  uint32_t size;          /* members */
  uint64_t members;       /* hashMembers */
  uint64_t totalBytes;
  _Atomic int sleepers; /* members asleep in a barrier (futex) */
  int32_t creator;      /* the creating process (dtrtShmRemoveStale) */
  char pad[16];
} Header;
_Static_assert(sizeof(Header) == 64, "the header is one cache line");

/* A member's entry in the table (two cache lines). */
typedef struct Meta {
  _Atomic int dest; /* permute destination */
  int pid;
  uint64_t send, recv;      /* published buffer addresses, in its own memory */
  _Atomic unsigned entered; /* barriers this member has entered */
  char pad[64 - 3 * sizeof(int) - 2 * sizeof(uint64_t)];
  /* What it calls, by the parity of its collective count: a member that
   * has passed a collective's first barrier may write the next one's
   * before a slow member has compared this one, but not the one after
   * (that needs the slow member at a barrier). */
  DtrtCallSig call[2];
  char pad2[64 - 2 * sizeof(DtrtCallSig)];
} Meta;
_Static_assert(sizeof(Meta) == 128, "a member's entry is two cache lines");

typedef struct Shm {
  char name[200];
  size_t slotBytes, totalBytes;
  size_t directBytes; /* SIZE_MAX when direct reads are off */
  Header *header;
  Meta *meta;
  char *slots;
  char *scratch;
  unsigned smallCount;     /* small collectives so far: picks the half */
  bool lastSmall;          /* the last collective was a small one */
  uint32_t calls;          /* collectives so far (DtrtCallSig.seq) */
  bool checkCall;          /* the next barrier is a collective's first */
  volatile uint64_t probe; /* what peers read to test direct access */
} Shm;

/// The members' barrier; `what` names it in messages (Shm.c).
DtrtStatus dtShmBarrier(DtrtComm *comm, const char *what);

/// Marks the communicator failed, so that the others stop waiting (Shm.c).
void dtShmMarkFailed(DtrtComm *comm);

/// Whether every member can read every other's memory, agreed by all;
/// sets the communicator's direct threshold (ShmDirect.c).
DtrtStatus dtShmProbeDirect(DtrtComm *comm);

/// `op` (not a permute or a barrier) by direct reads of the peers'
/// buffers (ShmDirect.c).
DtrtStatus dtShmRunDirect(DtrtComm *comm, const DtrtCollective *op);

#endif
