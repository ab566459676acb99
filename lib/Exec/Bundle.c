/* dtensorRunnerOpenBundle: a runner over a bundle that
 * dtensorRunnerExportBundle wrote (dtensor-c/Runner.h): the manifest read
 * back into the runner's signature, the two shared objects loaded and
 * called through their call wrappers. No MLIR: dtensor-check is built from
 * this file, RunData.c, RunRank.c and RunLaunch.c. */
#include "RunnerInternal.h"

#include "Support/Support.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
  return true;
}

/* Reads the manifest into `r`. */
static bool readManifest(DtensorRunner *r, const char *dir,
                         DtensorDiag *outDiag) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, DTENSOR_BUNDLE_MANIFEST);
  if (access(path, F_OK) != 0)
    return dtDiag(outDiag, -1, "'%s' is not a bundle: no %s", dir,
                  DTENSOR_BUNDLE_MANIFEST);
  FILE *f = dtOpenRegularFile(path, outDiag);
  if (!f)
    return false;
  char line[4096];
  int numArgs = 0, numResults = 0, lineNo = 0;
  bool ok = fgets(line, sizeof(line), f) && !strcmp(line, "dtensor-bundle 1\n");
  while (ok && fgets(line, sizeof(line), f)) {
    numArgs += !strncmp(line, "argument ", 9);
    numResults += !strncmp(line, "result ", 7);
  }
  ok = ok && dtRunAllocSignature(r, numArgs, numResults, outDiag);
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
  bool ok = readManifest(r, dir, outDiag);
  char wrapper[300];
  snprintf(wrapper, sizeof(wrapper), "%s%s", DTENSOR_BUNDLE_CALL_PREFIX,
           r->entry);
  for (int i = 0; ok && i < 2; ++i) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.so", dir,
             i ? DTENSOR_BUNDLE_SPMD : DTENSOR_BUNDLE_REFERENCE);
    r->programs[i] = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!r->programs[i])
      ok = dtDiag(outDiag, -1, "%s", dlerror());
    else if (!(r->entries[i] = dlsym(r->programs[i], wrapper)))
      ok = dtDiag(outDiag, -1, "%s has no %s", path, wrapper);
  }
  if (ok)
    ok = dtRunMakeInputs(r, outDiag);
  if (!ok) {
    dtensorRunnerDestroy(r);
    return NULL;
  }
  return r;
}
