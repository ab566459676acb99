/* Process set-up of Support.h: the allocator settings of the compiler
 * tools. */
#include "Support/Support.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if DT_TUNES_ALLOCATOR
/* What the tools ask of glibc's malloc: back the heap with transparent huge
 * pages (where the kernel gives them on request) and grow it 64 MiB at a
 * time. */
static const char kTunables[] =
    "GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.top_pad=67108864";

/* A new start costs what loading libMLIR costs (60-70 ms on our VMs); the
 * settings save about that on a 2 MiB program (2,000 Megatron blocks) and
 * 15% of the time on a 10 MiB one. */
enum { kMinInputBytes = 2 << 20 };

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

void dtTuneAllocator(int argc, char **argv, char **envp) {
#if DT_TUNES_ALLOCATOR
  if (argc < 1 || !argv || !envp || inputBytes(argc, argv) < kMinInputBytes)
    return;
  size_t n = 0;
  for (; envp[n]; n++) {
    /* Set already (even empty): the user's choice, and how to turn this
     * off; also what stops the new start from starting a third. */
    if (!strncmp(envp[n], "GLIBC_TUNABLES=", 15))
      return;
    /* Under valgrind a new image would run outside the tool. */
    if (!strncmp(envp[n], "LD_PRELOAD=", 11) && strstr(envp[n], "vgpreload"))
      return;
  }
  /* No malloc here: this runs before the libraries' constructors. */
  char *env[n + 2];
  memcpy(env, envp, n * sizeof(char *));
  env[n] = (char *)kTunables;
  env[n + 1] = NULL;
  execve("/proc/self/exe", argv, env);
  /* No new image: go on as we are. */
#else
  (void)argc;
  (void)argv;
  (void)envp;
#endif
}
