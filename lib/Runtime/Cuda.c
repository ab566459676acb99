/* The CUDA calls of compiled GPU programs. MLIR's GPU lowering
 * (gpu-lower-to-nvvm-pipeline, then translation to LLVM IR) makes host code
 * that calls the mgpu* functions below; Debian ships no library with them,
 * so the runtime defines them on the CUDA driver API. The driver is loaded
 * with dlopen at the first call, so the runtime builds and loads where
 * there is no driver: there dtrtCudaProbe says why (tools refuse the cuda
 * target with it before compiling), and a compiled call prints it and
 * exits. A failing call prints the call, the CUDA message and, for an
 * allocation, the size asked and the size free, and exits 1: compiled code
 * cannot handle errors, as with the collectives' entry points (Compiled.c).
 *
 * One device per process: LOCAL_RANK modulo the visible devices (as the
 * nccl backend picks it), its primary context made current on first use. */
#include "RuntimeInternal.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The driver API's types, as cuda.h declares them (not included: the
 * runtime builds without CUDA). */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
/* CUDA_MEMCPY2D, field for field. */
typedef struct Copy2D {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void *srcHost;
  CUdeviceptr srcDevice;
  void *srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void *dstHost;
  CUdeviceptr dstDevice;
  void *dstArray;
  size_t dstPitch;
  size_t widthInBytes, height;
} Copy2D;
enum {
  kJitErrorLogBuffer = 5,    /* CU_JIT_ERROR_LOG_BUFFER */
  kJitErrorLogSize = 6,      /* CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */
  kJitOptLevel = 7,          /* CU_JIT_OPTIMIZATION_LEVEL */
  kMemAttachGlobal = 1,      /* CU_MEM_ATTACH_GLOBAL */
  kPointerMemoryType = 2,    /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */
  kMemoryTypeDevice = 2,     /* CU_MEMORYTYPE_DEVICE */
  kMemoryTypeUnified = 4,    /* CU_MEMORYTYPE_UNIFIED */
  kPoolReleaseThreshold = 4, /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
  kComputeMajor = 75,        /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
  kComputeMinor = 76,        /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */
};

typedef struct Driver {
  CUresult (*init)(unsigned);
  CUresult (*deviceGetCount)(int *);
  CUresult (*deviceGet)(CUdevice *, int);
  CUresult (*primaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*ctxSetCurrent)(CUcontext);
  CUresult (*streamCreate)(CUstream *, unsigned);
  CUresult (*streamDestroy)(CUstream);
  CUresult (*streamSynchronize)(CUstream);
  CUresult (*memAlloc)(CUdeviceptr *, size_t);
  CUresult (*memAllocManaged)(CUdeviceptr *, size_t, unsigned);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*memcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*memGetInfo)(size_t *, size_t *);
  CUresult (*moduleLoadData)(CUmodule *, const void *);
  CUresult (*moduleLoadDataEx)(CUmodule *, const void *, unsigned, int *,
                               void **);
  CUresult (*moduleUnload)(CUmodule);
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, CUstream, void **,
                           void **);
  CUresult (*getErrorString)(CUresult, const char **);
  CUresult (*memAllocAsync)(CUdeviceptr *, size_t, CUstream);
  CUresult (*memFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*deviceGetDefaultMemPool)(CUmemoryPool *, CUdevice);
  CUresult (*memPoolSetAttribute)(CUmemoryPool, int, void *);
  CUresult (*memcpy2DAsync)(const Copy2D *, CUstream);
  CUresult (*memsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*pointerGetAttribute)(void *, int, CUdeviceptr);
  CUresult (*ctxSynchronize)(void);
  CUresult (*deviceGetAttribute)(int *, int, CUdevice);
} Driver;

/* The driver's symbols, in Driver's order. */
static const char *const kSymbols[] = {"cuInit",
                                       "cuDeviceGetCount",
                                       "cuDeviceGet",
                                       "cuDevicePrimaryCtxRetain",
                                       "cuCtxSetCurrent",
                                       "cuStreamCreate",
                                       "cuStreamDestroy_v2",
                                       "cuStreamSynchronize",
                                       "cuMemAlloc_v2",
                                       "cuMemAllocManaged",
                                       "cuMemFree_v2",
                                       "cuMemcpyAsync",
                                       "cuMemGetInfo_v2",
                                       "cuModuleLoadData",
                                       "cuModuleLoadDataEx",
                                       "cuModuleUnload",
                                       "cuModuleGetFunction",
                                       "cuLaunchKernel",
                                       "cuGetErrorString",
                                       "cuMemAllocAsync",
                                       "cuMemFreeAsync",
                                       "cuDeviceGetDefaultMemPool",
                                       "cuMemPoolSetAttribute",
                                       "cuMemcpy2DAsync_v2",
                                       "cuMemsetD8Async",
                                       "cuPointerGetAttribute",
                                       "cuCtxSynchronize",
                                       "cuDeviceGetAttribute"};

static Driver driver;
static bool tried, ready;
static char whyNot[512];
static int device = -1, deviceCount;

static const char *cudaMessage(CUresult r) {
  const char *text = NULL;
  if (driver.getErrorString && driver.getErrorString(r, &text) == 0 && text)
    return text;
  return "unknown CUDA error";
}

/* Loads the driver, initializes it and makes this process's device
 * current; false with `whyNot` filled when it cannot. */
static bool load(void) {
  if (tried)
    return ready;
  tried = true;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(whyNot, sizeof(whyNot), "%s", dlerror());
    return false;
  }
  void **slots = (void **)&driver;
  for (size_t i = 0; i < sizeof(kSymbols) / sizeof(kSymbols[0]); ++i)
    if (!(slots[i] = dlsym(lib, kSymbols[i]))) {
      snprintf(whyNot, sizeof(whyNot),
               "libcuda.so.1 has no %s (driver too old)", kSymbols[i]);
      return false;
    }
  CUresult r = driver.init(0);
  int count = 0;
  if (r == 0)
    r = driver.deviceGetCount(&count);
  deviceCount = r == 0 ? count : 0;
  if (r != 0 || count < 1) {
    snprintf(whyNot, sizeof(whyNot), "%s",
             r != 0 ? cudaMessage(r) : "no CUDA device is visible");
    return false;
  }
  const char *local = getenv("LOCAL_RANK");
  device = (local ? atoi(local) : 0) % count;
  CUdevice dev;
  CUcontext ctx;
  if ((r = driver.deviceGet(&dev, device)) != 0 ||
      (r = driver.primaryCtxRetain(&ctx, dev)) != 0 ||
      (r = driver.ctxSetCurrent(ctx)) != 0) {
    snprintf(whyNot, sizeof(whyNot), "device %d: %s", device, cudaMessage(r));
    return false;
  }
  /* Allocations are stream-ordered from the device's pool, which keeps
   * freed memory for the next step instead of returning it at every
   * synchronization (a caching allocator, as PyTorch's). */
  CUmemoryPool pool;
  unsigned long long keep = ~0ULL;
  if ((r = driver.deviceGetDefaultMemPool(&pool, dev)) != 0 ||
      (r = driver.memPoolSetAttribute(pool, kPoolReleaseThreshold, &keep)) !=
          0) {
    snprintf(whyNot, sizeof(whyNot), "device %d: its memory pool: %s", device,
             cudaMessage(r));
    return false;
  }
  ready = true;
  return true;
}

int dtrtCudaProbe(char *why, size_t capacity) {
  int ok = load();
  if (!ok && why && capacity)
    snprintf(why, capacity, "the cuda target needs a CUDA device: %s", whyNot);
  return ok;
}

int dtrtCudaDeviceCount(void) {
  load();
  return deviceCount;
}

int dtrtCudaComputeCapability(void) {
  CUdevice dev;
  int major = 0, minor = 0;
  if (!load() || driver.deviceGet(&dev, device) != 0 ||
      driver.deviceGetAttribute(&major, kComputeMajor, dev) != 0 ||
      driver.deviceGetAttribute(&minor, kComputeMinor, dev) != 0)
    return 0;
  return 10 * major + minor;
}

/* Prints "dtensor runtime: [rank R: ]what: message" and exits 1. */
void dtrtCudaFatal(const char *format, ...) {
  /* One write, so that ranks' lines do not interleave. */
  char line[1024];
  const char *rank = getenv("RANK");
  int n = snprintf(line, sizeof(line), "dtensor runtime: %s%s%s",
                   rank ? "rank " : "", rank ? rank : "", rank ? ": " : "");
  va_list args;
  va_start(args, format);
  if (n >= 0 && (size_t)n < sizeof(line))
    vsnprintf(line + n, sizeof(line) - (size_t)n, format, args);
  va_end(args);
  fprintf(stderr, "%s\n", line);
  exit(1);
}

static void need(void) {
  if (!load())
    dtrtCudaFatal("the cuda target needs a CUDA device: %s", whyNot);
}

static void check(CUresult r, const char *call) {
  if (r != 0)
    dtrtCudaFatal("%s (device %d): %s", call, device, cudaMessage(r));
}

/* Compiled code makes a stream for every stretch of GPU work and destroys
 * it after waiting for it: streams come from a small pool instead (a
 * returned stream may still hold work; what is queued on it later runs
 * after it, which is still in order). */
enum { kStreamPool = 16 };
static CUstream streamPool[kStreamPool];
static int pooledStreams;

DTRT_EXPORT void *mgpuStreamCreate(void) {
  need();
  if (pooledStreams > 0)
    return streamPool[--pooledStreams];
  CUstream s = NULL;
  check(driver.streamCreate(&s, 0), "cuStreamCreate");
  return s;
}

DTRT_EXPORT void mgpuStreamDestroy(void *stream) {
  need();
  if (pooledStreams < kStreamPool)
    streamPool[pooledStreams++] = stream;
  else
    check(driver.streamDestroy(stream), "cuStreamDestroy");
}

DTRT_EXPORT void mgpuStreamSynchronize(void *stream) {
  need();
  check(driver.streamSynchronize(stream), "cuStreamSynchronize");
}

/* Device memory on `stream` (stream-ordered); ends the process with the
 * size asked and the size free when there is not enough. */
static void *allocOn(uint64_t bytes, CUstream stream, bool hostShared) {
  need();
  CUdeviceptr p = 0;
  if (bytes == 0)
    return NULL;
  CUresult r = hostShared ? driver.memAllocManaged(&p, bytes, kMemAttachGlobal)
                          : driver.memAllocAsync(&p, bytes, stream);
  if (r != 0) {
    size_t freeBytes = 0, total = 0;
    driver.memGetInfo(&freeBytes, &total);
    dtrtCudaFatal(
        "cuMemAlloc (device %d) of %llu bytes: %s (%zu bytes free of %zu)",
        device, (unsigned long long)bytes, cudaMessage(r), freeBytes, total);
  }
  return (void *)(uintptr_t)p;
}

DTRT_EXPORT void *mgpuMemAlloc(uint64_t bytes, void *stream, bool hostShared) {
  return allocOn(bytes, stream, hostShared);
}

/* Frees after the work queued on `stream` (managed memory, which the pool
 * does not hold, at once after waiting for it). */
static void freeOn(void *ptr, CUstream stream) {
  need();
  if (!ptr)
    return;
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
  if (driver.memFreeAsync(p, stream) == 0)
    return;
  if (stream)
    check(driver.streamSynchronize(stream), "cuStreamSynchronize");
  check(driver.memFree(p), "cuMemFree");
}

DTRT_EXPORT void mgpuMemFree(void *ptr, void *stream) { freeOn(ptr, stream); }

DTRT_EXPORT void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream) {
  need();
  check(driver.memcpyAsync((CUdeviceptr)(uintptr_t)dst,
                           (CUdeviceptr)(uintptr_t)src, bytes, stream),
        "cuMemcpyAsync");
}

/* A cubin (gpu-module-to-binary format=bin). */
DTRT_EXPORT void *mgpuModuleLoad(void *data, size_t size) {
  need();
  (void)size;
  CUmodule m = NULL;
  check(driver.moduleLoadData(&m, data), "cuModuleLoadData");
  return m;
}

/* PTX (format=isa), compiled by the driver for this device. */
DTRT_EXPORT void *mgpuModuleLoadJIT(void *data, int optLevel) {
  need();
  char log[4096] = "";
  int options[] = {kJitErrorLogBuffer, kJitErrorLogSize, kJitOptLevel};
  void *values[] = {log, (void *)(uintptr_t)sizeof(log),
                    (void *)(uintptr_t)optLevel};
  CUmodule m = NULL;
  CUresult r = driver.moduleLoadDataEx(&m, data, 3, options, values);
  if (r != 0)
    dtrtCudaFatal("cuModuleLoadDataEx (device %d): %s%s%s", device,
                  cudaMessage(r), log[0] ? ": " : "", log);
  return m;
}

DTRT_EXPORT void mgpuModuleUnload(void *module) {
  /* A JIT's destructors unload modules its constructors never loaded (a
   * process that compiled the program and forked the ranks that ran it). */
  if (!module)
    return;
  need();
  check(driver.moduleUnload(module), "cuModuleUnload");
}

DTRT_EXPORT void *mgpuModuleGetFunction(void *module, const char *name) {
  need();
  CUfunction f = NULL;
  CUresult r = driver.moduleGetFunction(&f, module, name);
  if (r != 0)
    dtrtCudaFatal("cuModuleGetFunction '%s' (device %d): %s", name, device,
                  cudaMessage(r));
  return f;
}

DTRT_EXPORT void mgpuLaunchKernel(void *function, intptr_t gridX,
                                  intptr_t gridY, intptr_t gridZ,
                                  intptr_t blockX, intptr_t blockY,
                                  intptr_t blockZ, int32_t sharedBytes,
                                  void *stream, void **params, void **extra,
                                  size_t numParams) {
  need();
  (void)numParams;
  check(driver.launchKernel(function, (unsigned)gridX, (unsigned)gridY,
                            (unsigned)gridZ, (unsigned)blockX, (unsigned)blockY,
                            (unsigned)blockZ, (unsigned)sharedBytes, stream,
                            params, extra),
        "cuLaunchKernel");
}

/* ---- copies for the collectives of compiled programs (Compiled.c) -------- */

/* The runtime's own stream for packing blocks around collectives. */
static CUstream copyStream;

static CUstream copies(void) {
  if (!copyStream)
    copyStream = mgpuStreamCreate();
  return copyStream;
}

bool dtrtCudaIsDevicePointer(const void *p) {
  /* A program that never called the driver has no device memory. */
  if (!ready || !p)
    return false;
  int type = 0;
  return driver.pointerGetAttribute(&type, kPointerMemoryType,
                                    (CUdeviceptr)(uintptr_t)p) == 0 &&
         type == kMemoryTypeDevice;
}

void *dtrtCudaScratch(size_t bytes, bool zero) {
  void *p = allocOn(bytes ? bytes : 1, copies(), false);
  if (zero)
    check(driver.memsetD8Async((CUdeviceptr)(uintptr_t)p, 0, bytes, copies()),
          "cuMemsetD8Async");
  return p;
}

void dtrtCudaScratchFree(void *p) { freeOn(p, copies()); }

void dtrtCudaCopy2D(void *dst, size_t dstPitch, const void *src,
                    size_t srcPitch, size_t width, size_t height) {
  need();
  if (!width || !height)
    return;
  if (height == 1 || (dstPitch == width && srcPitch == width)) {
    check(driver.memcpyAsync((CUdeviceptr)(uintptr_t)dst,
                             (CUdeviceptr)(uintptr_t)src, width * height,
                             copies()),
          "cuMemcpyAsync");
    return;
  }
  if (dstPitch > INT32_MAX || srcPitch > INT32_MAX) { /* past 2D's pitches */
    for (size_t row = 0; row < height; ++row)
      check(driver.memcpyAsync((CUdeviceptr)(uintptr_t)dst + row * dstPitch,
                               (CUdeviceptr)(uintptr_t)src + row * srcPitch,
                               width, copies()),
            "cuMemcpyAsync");
    return;
  }
  /* Unified addressing: either side may be host or device memory. */
  Copy2D c;
  memset(&c, 0, sizeof(c));
  c.srcMemoryType = c.dstMemoryType = kMemoryTypeUnified;
  c.srcDevice = (CUdeviceptr)(uintptr_t)src;
  c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
  c.srcPitch = srcPitch;
  c.dstPitch = dstPitch;
  c.widthInBytes = width;
  c.height = height;
  check(driver.memcpy2DAsync(&c, copies()), "cuMemcpy2DAsync");
}

void dtrtCudaWait(void) {
  need();
  check(driver.streamSynchronize(copies()), "cuStreamSynchronize");
}

void dtrtCudaWaitAll(void) {
  need();
  check(driver.ctxSynchronize(), "cuCtxSynchronize");
}
