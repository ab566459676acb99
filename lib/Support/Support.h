/* The project's support layer: plain C, no MLIR, linked by the layout
 * algebra, the planner, the compiler library and the runtime. One home for
 * the diagnostic of the plain-C parts (dtDiag), a bounded string builder,
 * overflow-safe index arithmetic, an open-addressing hash table with
 * removal, a checked growable array, and the checked file opens. */
#ifndef DTENSOR_LIB_SUPPORT_SUPPORT_H
#define DTENSOR_LIB_SUPPORT_SUPPORT_H

#include "dtensor-c/Support.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

/* ---- diagnostics and text ------------------------------------------------ */

/// Fills `diag` (if not NULL) with a printf-formatted message and a column;
/// always returns false so callers can `return dtDiag(...)`.
bool dtDiag(DtensorDiag *diag, int column, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/// A bounded string builder with snprintf semantics: `length` counts every
/// byte asked for, even past `capacity`.
typedef struct DtBuf {
  char *data;
  size_t capacity;
  size_t length;
} DtBuf;

/* ---- hashing --------------------------------------------------------------
 */

#define DT_SHA256_BYTES 32

/// A SHA-256 computation in progress (FIPS 180-4).
typedef struct DtSha256 {
  uint32_t h[8];
  uint64_t length;
  uint8_t block[64];
  size_t used;
} DtSha256;

/// Starts, extends and ends a SHA-256 hash.
void dtSha256Init(DtSha256 *s);
void dtSha256Update(DtSha256 *s, const void *data, size_t n);
void dtSha256Final(DtSha256 *s, uint8_t out[DT_SHA256_BYTES]);

/// HMAC-SHA-256 (RFC 2104) under `key` of the concatenation of `numParts`
/// byte strings `parts[i]` of `sizes[i]` bytes.
void dtHmacSha256(const void *key, size_t keyLen, const void *const *parts,
                  const size_t *sizes, int numParts,
                  uint8_t out[DT_SHA256_BYTES]);

/// Whether `n` bytes are equal, in time that does not depend on where they
/// differ.
bool dtSameBytes(const void *a, const void *b, size_t n);

/// Fills `out` with `n` bytes from the kernel's random source; false if it
/// cannot.
bool dtRandomBytes(void *out, size_t n);

/* ---- files --------------------------------------------------------------- */

/// Opens `path` read-only only if it is a regular file (a FIFO or a device
/// would block or never end), not through a final symbolic link unless
/// `followLink`: the descriptor (blocking; its status in `outStat` if not
/// NULL), or -1 with `outDiag` saying why.
int dtOpenRegular(const char *path, bool followLink, struct stat *outStat,
                  DtensorDiag *outDiag);

/// Opens `path` for reading ("r") only if it is a regular file: a FIFO or a
/// device (/dev/zero) as a calibration, plan or manifest file would block
/// or never end. The stream (the caller fcloses it), or NULL with
/// `outDiag` saying why.
FILE *dtOpenRegularFile(const char *path, DtensorDiag *outDiag);

/// The process's file mode creation mask, read without changing it.
mode_t dtCurrentUmask(void);

/// An output file written in full or not at all.
typedef struct DtOutput {
  FILE *file;        /* what to write to */
  char path[4096];   /* as given */
  char target[4096]; /* what the temporary file replaces */
  char tmp[4096];    /* the temporary file; empty when written directly */
} DtOutput;

/// Whether the file at `path` of lstat status `st` may be followed if it
/// is a symbolic link: only one this user or root made (the rule of the
/// kernel's protected_symlinks), since another user's link could name any
/// of our files. False with `outDiag`.
bool dtLinkMayBeFollowed(const char *path, const struct stat *st,
                         DtensorDiag *outDiag);

/// Opens `path` ("-": standard output) for writing. A regular file, or a
/// new one, is written through a fresh temporary file beside it (mkstemp)
/// that replaces it at dtOutputClose, so a failed run leaves it as it was
/// and a link planted at the path meanwhile is replaced, never followed.
/// A link is followed only if this user or root made it (as the kernel's
/// protected_symlinks): another user's is refused. A device or FIFO
/// (/dev/null) is written directly. False with `outDiag`.
bool dtOutputOpen(DtOutput *out, const char *path, DtensorDiag *outDiag);

/// Closes `out`: with `keep`, puts the file in place (false with `outDiag`
/// if any write failed); without, discards what was written (a file written
/// directly keeps it).
bool dtOutputClose(DtOutput *out, bool keep, DtensorDiag *outDiag);

/// Whether the file of status `st` (at `path`, for the message) may be
/// trusted with code or data that runs here: it belongs to this user or
/// root and no one else may write it (as ssh's StrictModes). False with
/// `outDiag` naming its owner and mode.
bool dtCheckTrusted(const char *path, const struct stat *st,
                    DtensorDiag *outDiag);

/// dtCheckTrusted for the directory `path` (a link to it only if this user
/// or root made it). False with `outDiag`.
bool dtCheckTrustedDir(const char *path, DtensorDiag *outDiag);

/// Makes a private directory (mode 0700) "$TMPDIR/<prefix>-XXXXXX" (/tmp
/// without TMPDIR) and writes its path into `out`; false (`out` empty)
/// when it cannot.
bool dtMakeTempDir(const char *prefix, char *out, size_t size);

/// Removes `dir` and everything under it, never following a link (a link
/// is removed itself). For directories this process made private
/// (mkdtemp's 0700), which nobody else can put anything in.
void dtRemoveTree(const char *dir);

/// The whole number `text` spells if it lies in [lo, hi], else -1 (a
/// command line's counts).
long dtWholeNumber(const char *text, long lo, long hi);

/// The finite number `text` spells if it lies in [lo, hi], else NaN (a
/// command line's seconds and tolerances).
double dtRealNumber(const char *text, double lo, double hi);

/// The bytes `text` spells: a whole number, optionally followed by KiB,
/// MiB, GiB, TiB (powers of 1024), KB, MB, GB, TB (powers of 1000) or B,
/// as "16GiB" or "1.5 GB" (a fraction allowed before a unit); -1 when it
/// spells none or more than an int64 holds (a memory budget).
int64_t dtByteCount(const char *text);

/// Starts a builder on `data` (may be NULL when `capacity` is 0).
DtBuf dtBufInit(char *data, size_t capacity);

/// Appends printf-formatted text.
void dtBufPrintf(DtBuf *buf, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// Appends `n` bytes of `data` (not NUL-terminated; may contain NULs).
void dtBufAppend(DtBuf *buf, const char *data, size_t n);

/// Appends "[v0, v1, ...]" (`n` integers), as MLIR writes static lists.
void dtBufPrintList(DtBuf *buf, const int64_t *v, intptr_t n);

/* ---- index arithmetic ---------------------------------------------------- */

/// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b
/// near INT64_MAX.
static inline int64_t dtCeilDiv(int64_t a, int64_t b) {
  return a / b + (a % b != 0);
}

/// The row-major linear index of `idx` in `shape` (`rank` dims).
static inline int64_t dtRavel(int rank, const int64_t *shape,
                              const int64_t *idx) {
  int64_t l = 0;
  for (int d = 0; d < rank; ++d)
    l = l * shape[d] + idx[d];
  return l;
}

/// The index of row-major linear position `linear` in `shape` into `out`.
static inline void dtUnravel(int64_t linear, int rank, const int64_t *shape,
                             int64_t *out) {
  for (int d = rank - 1; d >= 0; --d) {
    out[d] = linear % shape[d];
    linear /= shape[d];
  }
}

/* ---- hash table ---------------------------------------------------------- */

/// An open-addressing hash table of fixed-size entries (linear probing,
/// removal by backward shift, so no tombstones). The table keeps each
/// entry's hash (0 marks a free slot: a hash of 0 is stored as 1), so a
/// probe reads one array until a hash matches; the caller compares keys.
typedef struct DtTable {
  size_t entrySize;
  unsigned mask; /* capacity - 1; 0 before the first insert */
  unsigned count;
  uint64_t *hashes; /* one block with the entries */
  char *entries;
} DtTable;

/// The hash a table stores for `hash` (never 0, the free mark).
static inline uint64_t dtTableSlotHash(uint64_t hash) {
  return hash ? hash : 1;
}

/// An empty table of entries of `entrySize` bytes.
DtTable dtTableInit(size_t entrySize);

/// Returns the entry with `hash` for which `equal(entry, key)`, or NULL.
/// Inline, so the comparison inlines into the hot lookups (planner search,
/// propagation's caches).
static inline void *dtTableFind(const DtTable *t, uint64_t hash,
                                bool (*equal)(const void *entry,
                                              const void *key),
                                const void *key) {
  if (!t->mask)
    return NULL;
  hash = dtTableSlotHash(hash);
  for (unsigned h = (unsigned)hash & t->mask; t->hashes[h];
       h = (h + 1) & t->mask)
    if (t->hashes[h] == hash && equal(t->entries + h * t->entrySize, key))
      return t->entries + h * t->entrySize;
  return NULL;
}

/// Returns a new zeroed entry for `hash` (growing the table), or NULL when
/// out of memory. Entries stay where they are until the next insert or
/// removal.
void *dtTableInsert(DtTable *t, uint64_t hash);

/// Removes `entry` (a pointer dtTableFind or dtTableInsert returned).
void dtTableRemove(DtTable *t, void *entry);

/// Calls `visit` on every entry, in no particular order.
void dtTableForEach(DtTable *t, void (*visit)(void *entry, void *user),
                    void *user);

/// Frees the table's memory; the table is empty and usable again.
void dtTableFree(DtTable *t);

/// A hash of `n` bytes (eight at a time).
uint64_t dtHashBytes(const void *bytes, size_t n);

/// Mixes a 64-bit value into a hash.
static inline uint64_t dtHashMix(uint64_t h, uint64_t v) {
  h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
  return h ^ (h >> 29);
}

/* ---- scratch stack ------------------------------------------------------- */

/// Memory taken and given back last-in first-out (the frames of a
/// recursion), from chunks kept until dtScratchFree: hot paths that need
/// tens of KiB per call (propagation's candidate layouts) reuse the same,
/// cache-warm bytes instead of a malloc and free each time. Zero-initialize.
typedef struct DtScratchChunk {
  char *data;
  size_t size;
} DtScratchChunk;

typedef struct DtScratch {
  DtScratchChunk *chunks;
  size_t numChunks, capChunks;
  size_t current; /* the chunk taken from */
  size_t used;    /* its bytes in use */
} DtScratch;

/// `bytes` bytes (16-aligned, not zeroed) on top of the stack; NULL when
/// out of memory.
void *dtScratchTake(DtScratch *s, size_t bytes);

/// Gives back `block` (from dtScratchTake) and everything taken after it.
void dtScratchGive(DtScratch *s, void *block);

/// Frees the chunks; the stack is empty and usable again.
void dtScratchFree(DtScratch *s);

/* ---- growable array ------------------------------------------------------ */

/// Makes room for one more element of `size` bytes in the array `*data` of
/// `*count` elements and capacity `*capacity` (doubling, overflow checked)
/// and returns a pointer to the new, zeroed element (counted); NULL when
/// out of memory or the size would overflow, the array unchanged.
void *dtArrayPush(void **data, size_t *count, size_t *capacity, size_t size);

/// Appends `n` elements of `size` bytes from `elems` (copied) to the array
/// as dtArrayPush grows it; false when out of memory or the size would
/// overflow, the array unchanged.
bool dtArrayAppend(void **data, size_t *count, size_t *capacity, size_t size,
                   const void *elems, size_t n);

/* ---- timing ----------------------------------------------------------------
 */

/// Seconds on the monotonic clock (for differences).
double dtMonotonicSeconds(void);

/// qsort's comparison of doubles, ascending (for medians of timings).
int dtCompareDoubles(const void *x, const void *y);

/* ---- process set-up --------------------------------------------------------
 */

/// Large programs make MLIR allocate hundreds of MiB in small pieces, and
/// on 4 KiB pages every first touch is a page fault (a sixth of a
/// 10^4-block dtensor-spmd on our 2-core VMs). When the files named on the
/// command line hold at least 2 MiB, this sets glibc's malloc, in the
/// process, to grow the heap by a reserve sized after the input (24 bytes
/// per input byte, 64 MiB to 2 GiB and half the memory) and keep that much
/// when it shrinks,
/// grows it once, and asks for transparent huge pages on that part. A
/// GLIBC_TUNABLES in the environment, even empty, is the user's choice of
/// malloc settings and turns this off. Returns whether it set anything.
/// Nothing happens under the address sanitizer or off glibc. Compiler
/// tools run it first thing, before any library's constructors, with
/// DT_TUNE_ALLOCATOR.
bool dtTuneAllocator(int argc, char **argv, char **envp);

/// The processors this process may run on: its affinity (taskset, a
/// container's CPU set), not all the machine has.
int dtCoresToRunOn(void);

/// Loads the shared library `soname` (found as the dynamic loader finds
/// libraries) and its `count` symbols `names` into `out`; false with the
/// reason in `diag`. For libraries only some runs need, loaded when first
/// used instead of linked (OpenBLAS, CBC): linked, they are loaded, and
/// start their threads, in every process.
bool dtLoadSymbols(const char *soname, const char *const *names, int count,
                   void **out, DtensorDiag *diag);

/// 1 where dtTuneAllocator can set the allocator: glibc on Linux, no
/// address sanitizer (its allocator ignores the settings).
#if defined(__SANITIZE_ADDRESS__)
#define DT_TUNES_ALLOCATOR 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DT_TUNES_ALLOCATOR 0
#endif
#endif
#ifndef DT_TUNES_ALLOCATOR
#if defined(__linux__) && defined(__GLIBC__)
#define DT_TUNES_ALLOCATOR 1
#else
#define DT_TUNES_ALLOCATOR 0
#endif
#endif

/// In an executable's source: dtTuneAllocator before the constructors of the
/// shared libraries (an ELF pre-initializer).
#define DT_TUNE_ALLOCATOR                                                      \
  static void dtTuneAllocatorEntry(int argc, char **argv, char **envp) {       \
    (void)dtTuneAllocator(argc, argv, envp);                                   \
  }                                                                            \
  __attribute__((section(".preinit_array"),                                    \
                 used)) static void (*const dtTuneAllocatorAt)(int, char **,   \
                                                               char **) =      \
      dtTuneAllocatorEntry

#endif
