/* Process set-up of Support.h: the allocator settings of the compiler
 * tools. */
#define _DEFAULT_SOURCE /* sbrk, madvise */
#include "Support/Support.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if DT_TUNES_ALLOCATOR
#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* Inputs from this size on get the settings: below it the heap stays small
 * and its page faults cost little. */
enum { kMinInputBytes = 2 << 20 };

/* The heap reserved at start per input byte: dtensor-spmd on a
 * 10^4-block Megatron chain (9.4 MB of text) peaks at 217 MB, on 10^5
 * blocks at 1.2 GB. Growth past the reserve goes by the same step, on
 * small pages (a 1 GiB cap left 10^5 blocks' partition and clean-up a
 * fifth slower). At most half the machine's memory, and 2 GiB (mallopt
 * takes an int). */
enum { kHeapPerInputByte = 24 };
static const long long kMinReserve = 64ll << 20;
static const uintptr_t kHugePage = 2u << 20;
/* glibc's default mmap threshold, and the most it takes. */
enum { kMmapThreshold = 128 << 10 };
static const size_t kMaxMmapThreshold = 32u << 20;

/* The bytes of the regular files the command line names, outputs (after
 * -o) and options left out. */
static long long inputBytes(int argc, char **argv) {
  long long total = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (argv[i][0] == '-' || !strcmp(argv[i - 1], "-o"))
      continue;
    if (stat(argv[i], &st) == 0 && S_ISREG(st.st_mode))
      total += (long long)st.st_size;
  }
  return total;
}
#endif

bool dtTuneAllocator(int argc, char **argv, char **envp) {
#if DT_TUNES_ALLOCATOR
  if (argc < 1 || !argv || !envp)
    return false;
  long long input = inputBytes(argc, argv);
  if (input < kMinInputBytes)
    return false;
  /* GLIBC_TUNABLES set (even empty): the user's choice of malloc settings,
   * and how to turn these off. */
  for (size_t n = 0; envp[n]; n++)
    if (!strncmp(envp[n], "GLIBC_TUNABLES=", 15))
      return false;
  long long reserve = input * kHeapPerInputByte;
  if (reserve < kMinReserve)
    reserve = kMinReserve;
  long long half =
      (long long)sysconf(_SC_PHYS_PAGES) * (long long)sysconf(_SC_PAGESIZE) / 2;
  if (half > 0 && reserve > half)
    reserve = half;
  if (reserve > INT_MAX) /* mallopt takes an int */
    reserve = INT_MAX;

  /* The heap grows by `reserve` at a time (and keeps that much when it
   * shrinks): one growth now, whose pages are touched only when used. */
  if (!mallopt(M_TOP_PAD, (int)reserve))
    return false;
  /* One allocation larger than the heap's free top makes malloc grow it
   * (by that and the reserve); below the mmap threshold for the moment, so
   * it comes from the heap. Where nothing was allocated yet (a tool's
   * start) the top is empty. */
  size_t top = mallinfo2().keepcost;
  if (top + 64 > kMaxMmapThreshold ||
      !mallopt(M_MMAP_THRESHOLD, (int)kMaxMmapThreshold))
    return true;
  char *first = malloc(top + 64);
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  if (!first)
    return true;
  /* Transparent huge pages for the part of the heap the growth made (the
   * kernel gives them where it has them): a 2 MiB page is one fault where
   * 4 KiB pages are 512. */
  uintptr_t lo = ((uintptr_t)first + kHugePage - 1) & ~(kHugePage - 1);
  uintptr_t hi = (uintptr_t)sbrk(0) & ~(kHugePage - 1);
  if (hi > lo)
    madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
  free(first);
  return true;
#else
  (void)argc;
  (void)argv;
  (void)envp;
  return false;
#endif
}

bool dtLoadSymbols(const char *soname, const char *const *names, int count,
                   void **out, DtensorDiag *diag) {
  void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return dtDiag(diag, -1, "cannot load %s: %s", soname, dlerror());
  for (int i = 0; i < count; ++i)
    if (!(out[i] = dlsym(lib, names[i])))
      return dtDiag(diag, -1, "%s has no %s", soname, names[i]);
  return true;
}
