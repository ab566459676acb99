/* dtensorRunnerOpenBundle: a runner over a bundle that
 * dtensorRunnerExportBundle wrote (dtensor-c/Runner.h): the manifest read
 * back into the runner's signature, the two shared objects loaded and
 * called through their call wrappers. No MLIR: dtensor-check is built from
 * this file, RunData.c, RunRank.c and RunLaunch.c. */
#include "RunnerInternal.h"

#include "Support/Support.h"

#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef void (*CallWrapper)(void **args);

static bool bundleCall(const DtensorRunner *r, bool spmd, void **args) {
  ((CallWrapper)r->entries[spmd ? 1 : 0])(args);
  return true;
}

static void bundleRelease(DtensorRunner *r) {
  for (int i = 0; i < 2; ++i)
    if (r->programs[i])
      dlclose(r->programs[i]);
}

/* Whether the ELF file of `size` bytes open at `fd` holds every header
 * and segment it names (a truncated object made dlopen's mapping fault
 * with SIGBUS). */
static bool elfComplete(int fd, off_t size) {
  Elf64_Ehdr eh;
  if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
      memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64)
    return false;
  uint64_t end;
  if (__builtin_mul_overflow((uint64_t)eh.e_phnum, eh.e_phentsize, &end) ||
      __builtin_add_overflow(end, eh.e_phoff, &end) || end > (uint64_t)size ||
      __builtin_mul_overflow((uint64_t)eh.e_shnum, eh.e_shentsize, &end) ||
      __builtin_add_overflow(end, eh.e_shoff, &end) || end > (uint64_t)size ||
      eh.e_phentsize != sizeof(Elf64_Phdr))
    return false;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
            (ssize_t)sizeof(ph) ||
        __builtin_add_overflow(ph.p_offset, ph.p_filesz, &end) ||
        end > (uint64_t)size)
      return false;
  }
  return true;
}

/* Loads a bundle's shared object: a regular file (not a link) of this user
 * or root that no one else may write (its code runs here, maybe as root),
 * whole. Loaded through its descriptor, so the file checked is the file
 * loaded; the descriptor stays open in `*outFd` until the caller has
 * loaded the other one (dlopen takes a second /proc/self/fd/N of the same
 * number for the object loaded already). NULL with `outDiag`. */
static void *loadProgram(const char *path, int *outFd, DtensorDiag *outDiag) {
  struct stat st;
  int fd = dtOpenRegular(path, false, &st, outDiag);
  *outFd = fd;
  if (fd < 0)
    return NULL;
  void *handle = NULL;
  if (!dtCheckTrusted(path, &st, outDiag)) {
  } else if (!elfComplete(fd, st.st_size)) {
    dtDiag(outDiag, -1,
           "%s is not a whole shared object (truncated or damaged): rebuild "
           "the bundle",
           path);
  } else {
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    handle = dlopen(self, RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      dtDiag(outDiag, -1, "%s: %s", path, dlerror());
  }
  return handle;
}

/* One "argument NAME DTYPE SHAPE SPEC" or "result ..." line into `t`. */
static bool readTensorLine(const DtensorRunner *r, char *line,
                           DtensorRunTensor *t, DtensorDiag *outDiag) {
  char *save = NULL, *name, *dtype, *shape, *spec;
  strtok_r(line, " ", &save);
  name = strtok_r(NULL, " ", &save);
  dtype = strtok_r(NULL, " ", &save);
  shape = strtok_r(NULL, " ", &save);
  spec = strtok_r(NULL, "\n", &save);
  if (!name || !dtype || !shape || !spec || strlen(name) >= sizeof(t->name) ||
      !dtrtDtypeParse(dtype, &t->dtype))
    return false;
  snprintf(t->name, sizeof(t->name), "%s", name);
  t->rank = 0;
  if (strcmp(shape, "-"))
    for (char *s2 = NULL, *d = strtok_r(shape, "x", &s2); d;
         d = strtok_r(NULL, "x", &s2)) {
      char *end;
      long long v = strtoll(d, &end, 10);
      if (*end || v < 0 || t->rank >= DTENSOR_MAX_TENSOR_RANK)
        return false;
      t->shape[t->rank++] = v;
    }
  DtensorDiag diag;
  if (!dtensorShardingSpecParse(spec, r->mesh, &t->spec, &diag))
    return dtDiag(outDiag, -1, "the layout '%s' of '%s' does not read: %s",
                  spec, name, diag.message);
  /* The whole layout must fit the mesh and the shape (an axis the mesh
   * lacks crashed the first rank), and the tensor's bytes an int64. */
  DtensorLayout l;
  DtensorElementType et = DTENSOR_F32;
  dtensorElementTypeParse(dtype, &et);
  if (!dtensorLayoutInit(r->mesh, &t->spec, t->rank, t->shape, et, &l, &diag))
    return dtDiag(outDiag, -1, "the layout '%s' of '%s' does not fit: %s", spec,
                  name, diag.message);
  int64_t bytes = (int64_t)dtrtDtypeSize(t->dtype);
  for (int d = 0; d < t->rank; ++d)
    if (__builtin_mul_overflow(bytes, t->shape[d], &bytes))
      return dtDiag(outDiag, -1,
                    "'%s' of shape %s has more bytes than an "
                    "int64 counts",
                    name, shape);
  return true;
}

/* Reads the manifest into `r`. */
static bool readManifest(DtensorRunner *r, const char *dir,
                         DtensorDiag *outDiag) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, DTENSOR_BUNDLE_MANIFEST);
  struct stat st;
  int fd = dtOpenRegular(path, false, &st, outDiag);
  if (fd < 0)
    return false;
  FILE *f = dtCheckTrusted(path, &st, outDiag) ? fdopen(fd, "r") : NULL;
  if (!f) {
    close(fd);
    return outDiag->message[0] ? false
                               : dtDiag(outDiag, -1, "cannot read %s", path);
  }
  char line[4096];
  int numArgs = 0, numResults = 0, lineNo = 0;
  bool ok =
      fgets(line, sizeof(line), f) && !strcmp(line, DTENSOR_BUNDLE_MAGIC "\n");
  int numProfileOps = 0;
  while (ok && fgets(line, sizeof(line), f)) {
    numArgs += !strncmp(line, "argument ", 9);
    numResults += !strncmp(line, "result ", 7);
    numProfileOps += !strncmp(line, "profile ", 8);
  }
  ok = ok && dtRunAllocSignature(r, numArgs, numResults, outDiag);
  if (ok && numProfileOps) {
    r->profileOps = calloc((size_t)numProfileOps + 1, sizeof(char *));
    ok = r->profileOps || dtDiag(outDiag, -1, "out of memory");
  }
  rewind(f);
  int arg = 0, result = 0;
  char target[16] = "";
  while (ok && fgets(line, sizeof(line), f)) {
    ++lineNo;
    line[strcspn(line, "\n")] = 0;
    if (lineNo == 1)
      continue;
    if (!strncmp(line, "entry ", 6) && strlen(line + 6) < sizeof(r->entry)) {
      snprintf(r->entry, sizeof(r->entry), "%s", line + 6);
    } else if (!strncmp(line, "target ", 7)) {
      snprintf(target, sizeof(target), "%.15s", line + 7);
      r->gpu = !strcmp(target, "cuda");
    } else if (!strncmp(line, "mesh ", 5) && !r->mesh) {
      DtensorDiag diag;
      r->mesh = dtensorMeshParse(line + 5, &diag);
      ok = r->mesh != NULL;
      if (ok)
        dtensorMeshPrint(r->mesh, r->meshText, sizeof(r->meshText));
    } else if (!strncmp(line, "argument ", 9) && r->mesh) {
      ok = readTensorLine(r, line, &r->args[arg++], outDiag);
    } else if (!strncmp(line, "result ", 7) && r->mesh) {
      ok = readTensorLine(r, line, &r->results[result++], outDiag);
    } else if (!strncmp(line, "profile ", 8) &&
               r->numProfileOps < numProfileOps) {
      r->profileOps[r->numProfileOps] = strdup(line + 8);
      ok = r->profileOps[r->numProfileOps++] != NULL ||
           dtDiag(outDiag, -1, "out of memory");
    } else {
      ok = false;
    }
  }
  fclose(f);
  if (ok && (!r->entry[0] || !r->mesh ||
             (strcmp(target, "cpu") && strcmp(target, "cuda"))))
    ok = false;
  if (!ok && !outDiag->message[0])
    dtDiag(outDiag, -1, "%s: line %d does not read", path, lineNo);
  return ok;
}

DtensorRunner *dtensorRunnerOpenBundle(const char *dir, DtensorDiag *outDiag) {
  DtensorRunner *r = calloc(1, sizeof(DtensorRunner));
  if (!r) {
    dtDiag(outDiag, -1, "out of memory");
    return NULL;
  }
  outDiag->message[0] = 0;
  r->call = bundleCall;
  r->release = bundleRelease;
  char manifest[4096];
  snprintf(manifest, sizeof(manifest), "%s/%s", dir, DTENSOR_BUNDLE_MANIFEST);
  bool ok = (access(manifest, F_OK) == 0 ||
             dtDiag(outDiag, -1, "'%s' is not a bundle: no %s", dir,
                    DTENSOR_BUNDLE_MANIFEST)) &&
            dtCheckTrustedDir(dir, outDiag) && readManifest(r, dir, outDiag);
  char wrapper[300];
  snprintf(wrapper, sizeof(wrapper), "%s%s", DTENSOR_BUNDLE_CALL_PREFIX,
           r->entry);
  char *signature = ok ? dtRunManifestText(r, outDiag) : NULL;
  ok = ok && signature;
  int fds[2] = {-1, -1};
  for (int i = 0; ok && i < 2; ++i) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.so", dir,
             i ? DTENSOR_BUNDLE_SPMD : DTENSOR_BUNDLE_REFERENCE);
    r->programs[i] = loadProgram(path, &fds[i], outDiag);
    const char *said =
        r->programs[i] ? dlsym(r->programs[i], DTENSOR_BUNDLE_SIGNATURE) : NULL;
    if (!r->programs[i])
      ok = false;
    else if (!said || strcmp(said, signature))
      ok = dtDiag(outDiag, -1,
                  "%s was not built with the manifest beside it (its "
                  "signature %s): rebuild the bundle with dtensor-compile "
                  "--bundle",
                  path, said ? "differs" : "is missing");
    else if (!(r->entries[i] = dlsym(r->programs[i], wrapper)))
      ok = dtDiag(outDiag, -1, "%s has no %s", path, wrapper);
  }
  free(signature);
  for (int i = 0; i < 2; ++i)
    if (fds[i] >= 0)
      close(fds[i]);
  if (ok)
    ok = dtRunMakeInputs(r, outDiag);
  if (!ok) {
    dtensorRunnerDestroy(r);
    return NULL;
  }
  return r;
}
