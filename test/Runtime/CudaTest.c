/* The runtime's CUDA calls (lib/Runtime/Cuda.c), the mgpu* functions
 * compiled GPU programs call.
 *
 *   runtime-cuda-test refuse   without a driver or device: dtrtCudaProbe
 *                              says "the cuda target needs a CUDA device:"
 *                              with the reason, and a compiled call prints
 *                              it and exits 1 (exit 77 where a GPU is)
 *   runtime-cuda-test device   with a GPU: device memory, a PTX kernel
 *                              loaded by the driver's JIT, a launch on a
 *                              stream, the result copied back (77 without)
 */
#include "dtensor-rt/Runtime.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The mgpu* functions are declared in dtensor-rt/Runtime.h. */

/* x[i] += 1 for i < n, one thread per element. */
static const char kPtx[] =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry addone(.param .u64 x, .param .u32 n) {\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .b32 %r<3>;\n"
    "  .reg .f32 %f<3>;\n"
    "  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [x];\n"
    "  ld.param.u32 %r1, [n];\n"
    "  mov.u32 %r2, %tid.x;\n"
    "  setp.ge.u32 %p1, %r2, %r1;\n"
    "  @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  mul.wide.u32 %rd3, %r2, 4;\n"
    "  add.s64 %rd4, %rd2, %rd3;\n"
    "  ld.global.f32 %f1, [%rd4];\n"
    "  add.f32 %f2, %f1, 0f3F800000;\n"
    "  st.global.f32 [%rd4], %f2;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

static int refuse(void) {
  char why[512];
  if (dtrtCudaProbe(why, sizeof(why))) {
    printf("runtime-cuda-test: a CUDA device is here; nothing to refuse\n");
    return 77;
  }
  const char *prefix = "the cuda target needs a CUDA device: ";
  if (strncmp(why, prefix, strlen(prefix)) || strlen(why) <= strlen(prefix)) {
    printf("FAIL: probe said '%s'\n", why);
    return 1;
  }
  int fds[2];
  if (pipe(fds) != 0)
    return 1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    mgpuStreamCreate();
    _exit(0); /* not reached: the call exits 1 */
  }
  close(fds[1]);
  char err[1024];
  size_t n = 0;
  ssize_t got;
  while (n + 1 < sizeof(err) &&
         (got = read(fds[0], err + n, sizeof(err) - 1 - n)) > 0)
    n += (size_t)got;
  err[n] = 0;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  bool ok =
      WIFEXITED(status) && WEXITSTATUS(status) == 1 &&
      strstr(err, "dtensor runtime: the cuda target needs a CUDA device:");
  printf("%s: probe: %s; a compiled call: exit %d, '%.*s'\n",
         ok ? "ok" : "FAIL", why, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
         (int)strcspn(err, "\n"), err);
  return ok ? 0 : 1;
}

static int device(void) {
  char why[512];
  if (!dtrtCudaProbe(why, sizeof(why))) {
    printf("runtime-cuda-test: skipped: %s\n", why);
    return 77;
  }
  enum { N = 100 };
  float host[N], back[N];
  for (int i = 0; i < N; ++i)
    host[i] = (float)i;
  void *stream = mgpuStreamCreate();
  void *x = mgpuMemAlloc(sizeof(host), stream, false);
  mgpuMemcpy(x, host, sizeof(host), stream);
  void *module = mgpuModuleLoadJIT((void *)kPtx, 2);
  void *f = mgpuModuleGetFunction(module, "addone");
  uint32_t n = N;
  void *params[] = {&x, &n};
  mgpuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, stream, params, NULL, 2);
  mgpuMemcpy(back, x, sizeof(back), stream);
  mgpuStreamSynchronize(stream);
  mgpuMemFree(x, stream);
  mgpuModuleUnload(module);
  mgpuStreamDestroy(stream);
  int wrong = 0;
  for (int i = 0; i < N; ++i)
    wrong += back[i] != host[i] + 1.0f;
  printf("%s: %d of %d elements incremented on the device\n",
         wrong ? "FAIL" : "ok", N - wrong, N);
  return wrong ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "refuse"))
    return refuse();
  if (argc == 2 && !strcmp(argv[1], "device"))
    return device();
  fprintf(stderr, "usage: runtime-cuda-test refuse|device\n");
  return 2;
}
