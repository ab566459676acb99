/* Process set-up of Support.h: the allocator settings of the compiler
 * tools, and the processors a process may run on. */
#define _GNU_SOURCE /* sbrk, madvise, sched_getaffinity */
#include "Support/Support.h"

#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if DT_TUNES_ALLOCATOR
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

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
/* The part of the reserve faulted in ahead, per input byte, by a thread
 * of its own while the tool starts and parses: that same 10^4-block run
 * holds 125 MB of its own (anonymous) memory at its peak, 13 bytes per
 * input byte, the parsed module 7.5. A page first touched costs this
 * VM's host 0.4-0.6 GB/s (bench/README.md), a quarter of the run's time
 * when the main thread takes each fault itself; the thread takes them
 * beside it on the other core, a little less than the run will use so
 * that it faults no page nobody uses. */
enum { kPopulatePerInputByte = 12 };
/* Linux's value (5.14 on), for older headers; older kernels refuse it. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
/* glibc's default mmap threshold, and the most it takes. */
enum { kMmapThreshold = 128 << 10 };
static const size_t kMaxMmapThreshold = 32u << 20;

/* Faults in the pages of [range[0], range[1]) writable, 2 MiB at a
 * time, without writing them (MADV_POPULATE_WRITE, Linux 5.14): malloc
 * hands them out meanwhile, and the main thread finds them present. Stops
 * at the first refusal (an older kernel). */
static void *populate(void *arg) {
  const uintptr_t *range = arg;
  for (uintptr_t p = range[0]; p < range[1]; p += kHugePage)
    if (madvise((void *)p, kHugePage, MADV_POPULATE_WRITE) != 0)
      break;
  return NULL;
}

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

int dtCoresToRunOn(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return CPU_COUNT(&set);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? (int)online : 1;
}

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
  /* With a second processor, the start of the reserve is faulted in
   * beside the main thread (populate). */
  static uintptr_t range[2];
  uintptr_t ahead = (uintptr_t)input * kPopulatePerInputByte;
  range[0] = lo;
  range[1] = hi > lo && hi - lo > ahead ? lo + (ahead & ~(kHugePage - 1)) : hi;
  pthread_t thread;
  if (range[1] > range[0] && dtCoresToRunOn() > 1 &&
      pthread_create(&thread, NULL, populate, range) == 0)
    pthread_detach(thread);
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
