/* The runner's parts that need no MLIR (dtensor-c/Runner.h): elements
 * and buffers, calls of the entry through the runner's `call` (the JIT's,
 * Runner.c, or a bundle's shared objects, Bundle.c), the global inputs and
 * the reference, checkpointed arguments, the accessors. With RunRank.c and
 * RunLaunch.c it also builds dtensor-check, which runs bundles where MLIR
 * is not installed. */
#include "RunnerInternal.h"

#include "Support/Support.h"

#include "dtensor-rt/Checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- elements and buffers ------------------------------------------------ */

bool dtRunIsFloat(DtrtDtype t) {
  return t == DTRT_F32 || t == DTRT_F64 || t == DTRT_F16 || t == DTRT_BF16 ||
         t == DTRT_F8E4M3FN || t == DTRT_F8E5M2;
}

double dtRunLoad(const void *data, DtrtDtype t, int64_t i) {
  double v;
  dtrtConvert((const char *)data + (size_t)i * dtrtDtypeSize(t), t, &v,
              DTRT_F64, 1);
  return v;
}

void dtRunStore(void *data, DtrtDtype t, int64_t i, double v) {
  dtrtConvert(&v, DTRT_F64, (char *)data + (size_t)i * dtrtDtypeSize(t), t, 1);
}

int64_t dtRunCount(int rank, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    n *= shape[i];
  return n;
}

void *dtRunAlloc(const DtensorRunTensor *t, int64_t elements, const char *what,
                 DtensorDiag *outDiag) {
  size_t es = dtrtDtypeSize(t->dtype);
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  double memory = pages > 0 && pageSize > 0 ? (double)pages * pageSize : 0;
  double bytes = ((double)elements + 1) * (double)es;
  bool tooBig = memory > 0 && bytes > memory;
  void *p = elements < 0 || tooBig || bytes > (double)SIZE_MAX
                ? NULL
                : calloc((size_t)elements + 1, es);
  double gib = 1024.0 * 1024 * 1024;
  if (!p && tooBig)
    dtDiag(outDiag, -1,
           "%s '%s' needs %.0f bytes (%.2f GiB), more than this machine's "
           "memory (%.2f GiB)",
           what, t->name, bytes, bytes / gib, memory / gib);
  else if (!p)
    dtDiag(outDiag, -1,
           "%s '%s' needs %.0f bytes (%.2f GiB), which could not be "
           "allocated",
           what, t->name, bytes, bytes / gib);
  return p;
}

int64_t *dtRunDescriptor(void *data, int rank, const int64_t *shape) {
  int64_t *d = calloc((size_t)(3 + 2 * rank), sizeof(int64_t));
  if (!d)
    return NULL;
  d[0] = d[1] = (int64_t)(intptr_t)data;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    d[3 + i] = shape[i];
    d[3 + rank + i] = stride;
    stride *= shape[i];
  }
  return d;
}

/* A GPU program's results are device buffers: each is copied to a host
 * buffer that takes its place in the descriptors (when `keep`), and the
 * device buffers are freed, each once (two results may share one). */
static void resultsToHost(const DtensorRunner *r, int64_t *packed, bool keep) {
  int64_t *d = packed;
  void **freed = calloc((size_t)r->numResults, sizeof(void *));
  for (int k = 0; k < r->numResults; ++k) {
    const DtensorRunTensor *t = &r->results[k];
    size_t es = dtrtDtypeSize(t->dtype);
    void *device = (void *)(intptr_t)d[0];
    if (keep) {
      size_t bytes = (size_t)dtRunCount(t->rank, d + 3) * es;
      char *host = malloc(bytes + es);
      if (!host) {
        fprintf(stderr, "dtensor-run: out of memory for a result's copy\n");
        exit(1);
      }
      mgpuMemcpy(host, (char *)(intptr_t)d[1] + d[2] * (int64_t)es, bytes,
                 NULL);
      d[0] = d[1] = (int64_t)(intptr_t)host;
      d[2] = 0;
    }
    bool seen = false;
    for (int j = 0; j < k && freed; ++j)
      seen |= freed[j] == device;
    /* Freed after the copies queued before it on the same stream. */
    if (!seen)
      mgpuMemFree(device, NULL);
    if (freed)
      freed[k] = device;
    d += 3 + 2 * t->rank;
  }
  if (keep)
    mgpuStreamSynchronize(NULL); /* the host copies are complete */
  free(freed);
}

bool dtRunInvoke(const DtensorRunner *r, bool spmd, int64_t **argDescs,
                 void **outData, void **outAlloc, DtensorDiag *outDiag) {
  /* This process's compute threads (BLAS's and, in a program with loops in
   * threads, OpenMP's) before the program runs: one without collectives or
   * contractions never asks the runtime, and OpenMP would take every core. */
  dtrtEnsureComputeThreads();
  size_t words = 0;
  for (int k = 0; k < r->numResults; ++k)
    words += 3 + 2 * (size_t)r->results[k].rank;
  int64_t *packed = calloc(words + 1, sizeof(int64_t));
  void **ptrs = calloc((size_t)r->numArgs + 1, sizeof(void *));
  bool ok = packed && ptrs;
  if (ok) {
    /* The results' descriptors come back through the first argument. */
    ptrs[0] = packed;
    for (int i = 0; i < r->numArgs; ++i)
      ptrs[i + 1] = argDescs[i];
    ok = r->call(r, spmd, ptrs);
    if (!ok)
      dtDiag(outDiag, -1, "cannot call '%s'", r->entry);
  } else {
    dtDiag(outDiag, -1, "out of memory");
  }
  /* The SPMD program on the GPU gives device buffers (the reference runs on
   * the CPU). */
  bool onDevice = r->gpu && spmd;
  const int64_t *d = packed;
  if (ok && onDevice)
    resultsToHost(r, packed, outData != NULL);
  for (int k = 0; ok && k < r->numResults; ++k) {
    if (outData) {
      outData[k] = (char *)(intptr_t)d[1] +
                   d[2] * (int64_t)dtrtDtypeSize(r->results[k].dtype);
      outAlloc[k] = (void *)(intptr_t)d[0];
    } else if (!onDevice) { /* the caller owns results (buffer-deallocation-
                             pipeline); a GPU program's are freed above */
      free((void *)(intptr_t)d[0]);
    }
    d += 3 + 2 * r->results[k].rank;
  }
  free(packed);
  free(ptrs);
  return ok;
}

/* ---- the signature, inputs, the reference, accessors --------------------- */

bool dtRunAllocSignature(DtensorRunner *r, int numArgs, int numResults,
                         DtensorDiag *outDiag) {
  r->numArgs = numArgs;
  r->numResults = numResults;
  if (r->numResults < 1)
    return dtDiag(outDiag, -1,
                  "the entry returns nothing; it must return at least one "
                  "tensor to compare");
  r->args = calloc((size_t)r->numArgs + 1, sizeof(DtensorRunTensor));
  r->results = calloc((size_t)r->numResults, sizeof(DtensorRunTensor));
  r->globals = calloc((size_t)r->numArgs + 1, sizeof(void *));
  r->referenceData = calloc((size_t)r->numResults, sizeof(void *));
  r->referenceAlloc = calloc((size_t)r->numResults, sizeof(void *));
  r->referenceInputs = calloc((size_t)r->numArgs + 1, sizeof(void *));
  if (!r->args || !r->results || !r->globals || !r->referenceData ||
      !r->referenceAlloc || !r->referenceInputs)
    return dtDiag(outDiag, -1, "out of memory");
  return true;
}

/* The deterministic global inputs: small values, integers for integer
 * types (so sums and products stay exact). */
bool dtRunMakeInputs(DtensorRunner *r, DtensorDiag *outDiag) {
  for (int a = 0; a < r->numArgs; ++a) {
    const DtensorRunTensor *t = &r->args[a];
    int64_t count = dtRunCount(t->rank, t->shape);
    r->globals[a] = dtRunAlloc(t, count, "argument", outDiag);
    if (!r->globals[a])
      return false;
    for (int64_t e = 0; e < count; ++e) {
      int64_t v = (e * 37 + a * 11) % 101;
      /* Floats in [-0.5, 0.5), signed integers in [-50, 50], unsigned
       * bytes in [0, 100], booleans alternating. */
      double x = dtRunIsFloat(t->dtype) ? (double)v / 101.0 - 0.5
                 : t->dtype == DTRT_UI8 ? (double)v
                 : t->dtype == DTRT_I1  ? (double)(v & 1)
                                        : (double)(v - 50);
      dtRunStore(r->globals[a], t->dtype, e, x);
    }
  }
  return true;
}

/* Frees the reference's inputs and results, each buffer once (a result may
 * be an input, or another result). */
static void freeReference(DtensorRunner *r) {
  int n = r->numArgs + r->numResults;
  for (int i = 0; r->referenceInputs && r->referenceAlloc && i < n; ++i) {
    void **slot = i < r->numArgs ? &r->referenceInputs[i]
                                 : &r->referenceAlloc[i - r->numArgs];
    for (int j = 0; j < i && *slot; ++j)
      if (*slot == (j < r->numArgs ? r->referenceInputs[j]
                                   : r->referenceAlloc[j - r->numArgs]))
        *slot = NULL;
  }
  for (int a = 0; r->referenceInputs && a < r->numArgs; ++a) {
    free(r->referenceInputs[a]);
    r->referenceInputs[a] = NULL;
  }
  for (int k = 0; r->referenceAlloc && k < r->numResults; ++k) {
    free(r->referenceAlloc[k]);
    r->referenceAlloc[k] = r->referenceData[k] = NULL;
  }
}

void dtensorRunnerDestroy(DtensorRunner *r) {
  if (!r)
    return;
  if (r->release)
    r->release(r);
  for (int a = 0; r->globals && a < r->numArgs; ++a)
    free(r->globals[a]);
  freeReference(r);
  free(r->globals);
  free(r->referenceData);
  free(r->referenceAlloc);
  free(r->referenceInputs);
  free(r->args);
  free(r->results);
  for (int k = 0; k < r->numProfileOps; ++k)
    free(r->profileOps[k]);
  free(r->profileOps);
  dtensorMeshDestroy(r->mesh);
  free(r);
}

const DtensorMesh *dtensorRunnerGetMesh(const DtensorRunner *r) {
  return r->mesh;
}

const char *dtensorRunnerGetEntry(const DtensorRunner *r) { return r->entry; }

int dtensorRunnerGetNumArguments(const DtensorRunner *r) { return r->numArgs; }

int dtensorRunnerGetNumResults(const DtensorRunner *r) { return r->numResults; }

const DtensorRunTensor *dtensorRunnerGetArgument(const DtensorRunner *r,
                                                 int i) {
  return i >= 0 && i < r->numArgs ? &r->args[i] : NULL;
}

const DtensorRunTensor *dtensorRunnerGetResult(const DtensorRunner *r, int k) {
  return k >= 0 && k < r->numResults ? &r->results[k] : NULL;
}

void *dtensorRunnerGetArgumentData(DtensorRunner *r, int i) {
  return i >= 0 && i < r->numArgs ? r->globals[i] : NULL;
}

const void *dtensorRunnerGetReference(const DtensorRunner *r, int k) {
  return k >= 0 && k < r->numResults ? r->referenceData[k] : NULL;
}

/* ---- inputs from a checkpoint and the reference -------------------------- */

/* "f32 16x64" for messages. */
static void typeText(DtrtDtype dtype, int rank, const int64_t *shape, char *out,
                     size_t size) {
  DtBuf b = dtBufInit(out, size);
  dtBufPrintf(&b, "%s ", dtrtDtypeName(dtype));
  for (int d = 0; d < rank; ++d)
    dtBufPrintf(&b, "%s%lld", d ? "x" : "", (long long)shape[d]);
  if (rank == 0)
    dtBufPrintf(&b, "scalar");
}

/* Whether the checkpoint has a tensor named `name`. */
static bool hasTensor(const DtrtCheckpoint *c, const char *name) {
  for (int i = 0; i < dtrtCheckpointNumTensors(c); ++i) {
    DtrtTensor saved;
    dtrtCheckpointGetTensor(c, i, &saved, NULL, NULL);
    if (!strcmp(saved.name, name))
      return true;
  }
  return false;
}

/* Reads argument `index` whole from the checkpoint — the tensor of its
 * name, else the positional arg<index> (a list of inputs) — after checking
 * its element type and shape. */
const char *dtRunArgumentName(const DtrtCheckpoint *c,
                              const DtensorRunTensor *t, int index,
                              char positional[32]) {
  snprintf(positional, 32, "arg%d", index);
  return hasTensor(c, t->name) ? t->name : positional;
}

/* Types numpy has no dtype of (bf16, the f8 types): an argument of one is
 * given as f32 or f64 values and rounded to it. */
static bool givenAsFloat(DtrtDtype saved, DtrtDtype arg) {
  return (saved == DTRT_F32 || saved == DTRT_F64) &&
         (arg == DTRT_BF16 || arg == DTRT_F8E4M3FN || arg == DTRT_F8E5M2);
}

static bool readArgument(const char *dir, const DtrtCheckpoint *c, int index,
                         const DtensorRunTensor *t, void *out,
                         DtensorDiag *outDiag) {
  char err[512], want[128], have[128] = "", positional[32];
  const char *name = dtRunArgumentName(c, t, index, positional);
  bool found = false, same = false;
  DtrtDtype savedType = t->dtype;
  for (int i = 0; i < dtrtCheckpointNumTensors(c) && !found; ++i) {
    DtrtTensor saved;
    dtrtCheckpointGetTensor(c, i, &saved, NULL, NULL);
    found = !strcmp(saved.name, name);
    savedType = found ? saved.dtype : savedType;
    same = found &&
           (saved.dtype == t->dtype || givenAsFloat(saved.dtype, t->dtype)) &&
           saved.rank == t->rank;
    for (int d = 0; same && d < t->rank; ++d)
      same = saved.shape[d] == t->shape[d];
    if (found)
      typeText(saved.dtype, saved.rank, saved.shape, have, sizeof(have));
  }
  typeText(t->dtype, t->rank, t->shape, want, sizeof(want));
  if (!found)
    return dtDiag(outDiag, -1,
                  "%s/%s: no tensor '%s' for argument %d of the entry (%s; "
                  "name an argument with {dtensor.name = \"...\"})",
                  dir, DTRT_CHECKPOINT_METADATA, t->name, index, want);
  if (!same)
    return dtDiag(outDiag, -1,
                  "%s/%s: '%s' is %s, but argument %d of the entry is %s", dir,
                  DTRT_CHECKPOINT_METADATA, name, have, index, want);
  size_t count = (size_t)dtRunCount(t->rank, t->shape);
  size_t bytes = dtrtDtypeSize(savedType) * count;
  void *read = savedType == t->dtype ? out : malloc(bytes ? bytes : 1);
  if (!read)
    return dtDiag(outDiag, -1, "out of memory");
  bool ok = dtrtCheckpointReadTensor(dir, name, read, bytes, err,
                                     sizeof(err)) == DTRT_OK;
  if (ok && read != out)
    dtrtConvert(read, savedType, out, t->dtype, count);
  if (read != out)
    free(read);
  return ok || dtDiag(outDiag, -1, "%s", err);
}

/* A positional tensor (arg<i>, as the Python package writes a list of
 * inputs) gives argument i, named or not; one that no argument takes, or
 * an argument given both by position and by name, is a mistake, not
 * something to skip. */
static bool checkPositional(const DtensorRunner *r, const char *dir,
                            const DtrtCheckpoint *c, DtensorDiag *outDiag) {
  for (int i = 0; i < dtrtCheckpointNumTensors(c); ++i) {
    DtrtTensor saved;
    dtrtCheckpointGetTensor(c, i, &saved, NULL, NULL);
    const char *digits = saved.name + 3;
    if (strncmp(saved.name, "arg", 3) || !*digits ||
        strspn(digits, "0123456789") != strlen(digits))
      continue;
    long a = strlen(digits) < 9 ? strtol(digits, NULL, 10) : -1;
    bool named = false;
    for (int k = 0; k < r->numArgs && !named; ++k)
      named = !strcmp(r->args[k].name, saved.name);
    if (named)
      continue;
    if (a < 0 || a >= r->numArgs)
      return dtDiag(outDiag, -1,
                    "%s/%s: '%s' is given, but the entry takes %d argument%s "
                    "and none is '%s'",
                    dir, DTRT_CHECKPOINT_METADATA, saved.name, r->numArgs,
                    r->numArgs == 1 ? "" : "s", saved.name);
    if (hasTensor(c, r->args[a].name))
      return dtDiag(outDiag, -1,
                    "%s/%s: argument %ld of the entry is given twice, as "
                    "'%s' and as '%s'",
                    dir, DTRT_CHECKPOINT_METADATA, a, saved.name,
                    r->args[a].name);
  }
  return true;
}

bool dtensorRunnerLoadArguments(DtensorRunner *r, const char *dir,
                                DtensorDiag *outDiag) {
  DtrtCheckpoint *c = NULL;
  char err[DTENSOR_DIAG_MESSAGE_SIZE];
  if (dtrtCheckpointOpen(dir, &c, err, sizeof(err)) != DTRT_OK)
    return dtDiag(outDiag, -1, "%s", err);
  bool ok = checkPositional(r, dir, c, outDiag);
  for (int a = 0; ok && a < r->numArgs; ++a)
    ok = readArgument(dir, c, a, &r->args[a], r->globals[a], outDiag);
  dtrtCheckpointClose(c);
  return ok;
}

bool dtensorRunnerComputeReference(DtensorRunner *r, DtensorDiag *outDiag) {
  freeReference(r);
  int64_t **descs = calloc((size_t)r->numArgs + 1, sizeof(int64_t *));
  bool ok = descs != NULL;
  if (!ok)
    dtDiag(outDiag, -1, "out of memory");
  /* The reference gets its own copy: bufferized code may write its
   * arguments in place. */
  for (int a = 0; ok && a < r->numArgs; ++a) {
    const DtensorRunTensor *t = &r->args[a];
    int64_t count = dtRunCount(t->rank, t->shape);
    void *copy =
        dtRunAlloc(t, count, "the reference's copy of argument", outDiag);
    r->referenceInputs[a] = copy;
    if (copy)
      memcpy(copy, r->globals[a], dtrtDtypeSize(t->dtype) * (size_t)count);
    descs[a] = copy ? dtRunDescriptor(copy, t->rank, t->shape) : NULL;
    ok = descs[a] != NULL;
    if (copy && !ok)
      dtDiag(outDiag, -1, "out of memory");
  }
  ok = ok && dtRunInvoke(r, false, descs, r->referenceData, r->referenceAlloc,
                         outDiag);
  for (int a = 0; descs && a < r->numArgs; ++a)
    free(descs[a]);
  free(descs);
  return ok;
}

size_t dtensorRankReportFormat(const DtensorRunner *r, int rank,
                               const DtensorRankReport *rep, char *buffer,
                               size_t capacity) {
  DtBuf b = dtBufInit(buffer, capacity);
  dtBufPrintf(&b, "rank %d: %lld result elements%s, ", rank,
              (long long)rep->compared,
              r->numResults > 1 ? " (all results)" : "");
  if (rep->different)
    dtBufPrintf(&b, "DIFFERENT from the single-device run in %lld of them",
                (long long)rep->different);
  else
    dtBufPrintf(&b, "equal to the single-device run");
  dtBufPrintf(&b, " (max abs error %.3g)\n", rep->maxAbsError);
  if (rep->steps)
    dtBufPrintf(&b,
                "rank %d: step time min %.3f ms, median %.3f ms over %d "
                "runs; in collectives (not hidden) median %.3f ms; "
                "buffers at most %lld bytes\n",
                rank, 1e3 * rep->minStepSeconds, 1e3 * rep->medianStepSeconds,
                rep->steps, 1e3 * rep->medianCommSeconds,
                (long long)rep->peakBufferBytes);
  return b.length;
}

/* "4x16", or "-" for a scalar. */
static void shapeText(const DtensorRunTensor *t, char *out, size_t size) {
  DtBuf b = dtBufInit(out, size);
  for (int d = 0; d < t->rank; ++d)
    dtBufPrintf(&b, "%s%lld", d ? "x" : "", (long long)t->shape[d]);
  if (!t->rank)
    dtBufPrintf(&b, "-");
}

char *dtRunManifestText(const DtensorRunner *r, DtensorDiag *outDiag) {
  size_t capacity = 1024 + 1024 * (size_t)(r->numArgs + r->numResults);
  for (int k = 0; k < r->numProfileOps; ++k)
    capacity += 16 + strlen(r->profileOps[k]);
  char *text = malloc(capacity);
  if (!text) {
    dtDiag(outDiag, -1, "out of memory");
    return NULL;
  }
  DtBuf b = dtBufInit(text, capacity);
  dtBufPrintf(&b, "entry %s\ntarget %s\nmesh %s\n", r->entry,
              r->gpu ? "cuda" : "cpu", r->meshText);
  for (int i = 0; i < r->numArgs + r->numResults; ++i) {
    bool isArg = i < r->numArgs;
    const DtensorRunTensor *t =
        isArg ? &r->args[i] : &r->results[i - r->numArgs];
    char shape[512], spec[256];
    shapeText(t, shape, sizeof(shape));
    dtensorShardingSpecPrint(&t->spec, spec, sizeof(spec));
    if (strpbrk(t->name, " \t\n")) {
      free(text);
      dtDiag(outDiag, -1, "'%s': a bundle's names have no spaces", t->name);
      return NULL;
    }
    dtBufPrintf(&b, "%s %s %s %s %s\n", isArg ? "argument" : "result", t->name,
                dtrtDtypeName(t->dtype), shape, spec);
  }
  /* A profiled program's ops, in its event ids' order (dtensor-check
   * --profile names the events with them). */
  for (int k = 0; k < r->numProfileOps; ++k) {
    if (strchr(r->profileOps[k], '\n')) {
      free(text);
      dtDiag(outDiag, -1, "a profiled op's name holds a line break");
      return NULL;
    }
    dtBufPrintf(&b, "profile %s\n", r->profileOps[k]);
  }
  if (b.length >= capacity) {
    free(text);
    dtDiag(outDiag, -1, "the bundle's manifest is too long");
    return NULL;
  }
  return text;
}
