/* dtensor-ckpt: inspect, check and rewrite sharded checkpoints offline.
 * Argument parsing, .npy files and printing; the checkpoint work is
 * libdtensor_rt's offline API (include/dtensor-rt/Checkpoint.h). */
#include "Support/Support.h"
#include "dtensor-c/Layout.h"
#include "dtensor-rt/Checkpoint.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(FILE *out, int code) {
  fprintf(out,
          "usage: dtensor-ckpt info DIR [--layouts]\n"
          "       dtensor-ckpt verify DIR\n"
          "       dtensor-ckpt convert DIR OUT --mesh MESH [--spec SPEC] "
          "[--spec NAME=SPEC ...]\n"
          "       dtensor-ckpt export DIR NAME OUT.npy\n"
          "       dtensor-ckpt import DIR NAME IN.npy --mesh MESH --spec SPEC "
          "[--dtype TYPE]\n"
          "  info     lists the tensors (type, shape, mesh, spec, shards); "
          "--layouts draws\n"
          "           each layout and lists every device's block\n"
          "  verify   checks every shard file's size and CRC-32\n"
          "  convert  rewrites the checkpoint for another mesh (world size) "
          "and layouts,\n"
          "           block by block; OUT may be DIR; tensors without a "
          "--spec (NAME=SPEC,\n"
          "           or a SPEC for all) are replicated\n"
          "  export   writes one tensor whole as a .npy file (bf16, "
          "f8E4M3FN and f8E5M2\n"
          "           as float32, exactly)\n"
          "  import   adds (or replaces) a tensor from a .npy file under a "
          "layout; creates\n"
          "           DIR if needed; --dtype bf16 (f8E4M3FN, f8E5M2) "
          "stores a float32\n"
          "           array as that type, rounded to nearest even\n");
  return code;
}

/* numpy's spelling of each element type (the types numpy lacks, bf16 and
 * the f8 types, travel as float32, which holds them exactly). */
static const struct {
  DtrtDtype dtype;
  const char *descr;
} kTypes[] = {{DTRT_F32, "<f4"},  {DTRT_F64, "<f8"},      {DTRT_F16, "<f2"},
              {DTRT_BF16, "<f4"}, {DTRT_I32, "<i4"},      {DTRT_I64, "<i8"},
              {DTRT_I8, "|i1"},   {DTRT_I16, "<i2"},      {DTRT_I1, "|b1"},
              {DTRT_UI8, "|u1"},  {DTRT_F8E4M3FN, "<f4"}, {DTRT_F8E5M2, "<f4"}};

static bool viaFloat32(DtrtDtype t) {
  return t == DTRT_BF16 || t == DTRT_F8E4M3FN || t == DTRT_F8E5M2;
}

static void shapeText(int rank, const int64_t *shape, char *out, size_t n) {
  int k = snprintf(out, n, rank ? "" : "scalar");
  for (int d = 0; d < rank && (size_t)k < n; ++d)
    k += snprintf(out + k, n - (size_t)k, "%s%lld", d ? "x" : "",
                  (long long)shape[d]);
}

static int info(const char *dir, bool layouts) {
  DtrtCheckpoint *c;
  char err[512];
  if (dtrtCheckpointOpen(dir, &c, err, sizeof(err)) != DTRT_OK) {
    fprintf(stderr, "dtensor-ckpt: %s\n", err);
    return 1;
  }
  int n = dtrtCheckpointNumTensors(c);
  printf("%s: %d tensor%s (format version %d)\n", dir, n, n == 1 ? "" : "s",
         DTRT_CHECKPOINT_VERSION);
  printf("%-24s %-8s %-16s %-12s %-20s %7s %12s\n", "name", "type", "shape",
         "mesh", "spec", "shards", "bytes");
  for (int i = 0; i < n; ++i) {
    DtrtTensor t;
    int shards;
    int64_t bytes;
    dtrtCheckpointGetTensor(c, i, &t, &shards, &bytes);
    char shape[128];
    shapeText(t.rank, t.shape, shape, sizeof(shape));
    printf("%-24s %-8s %-16s %-12s %-20s %7d %12lld\n", t.name,
           dtrtDtypeName(t.dtype), shape, t.mesh, t.spec, shards,
           (long long)bytes);
  }
  for (int i = 0; layouts && i < n; ++i) {
    DtrtTensor t;
    dtrtCheckpointGetTensor(c, i, &t, NULL, NULL);
    DtensorDiag diag;
    DtensorMesh *mesh = dtensorMeshParse(t.mesh, &diag);
    DtensorShardingSpec spec;
    DtensorLayout l;
    DtensorElementType et; /* the compiler's type of the same name */
    if (mesh && dtensorElementTypeParse(dtrtDtypeName(t.dtype), &et) &&
        dtensorShardingSpecParse(t.spec, mesh, &spec, &diag) &&
        dtensorLayoutInit(mesh, &spec, t.rank, t.shape, et, &l, &diag)) {
      size_t len = dtensorLayoutDescribe(&l, NULL, 0);
      char *text = malloc(len + 1);
      dtensorLayoutDescribe(&l, text, len + 1);
      printf("\n%s:\n%s", t.name, text);
      free(text);
    }
    dtensorMeshDestroy(mesh);
  }
  dtrtCheckpointClose(c);
  return 0;
}

/* ---- .npy files (format 1.0/2.0/3.0, C order, little endian) ------------- */

static bool writeNpy(const char *path, const char *descr, int rank,
                     const int64_t *shape, const void *data, size_t bytes,
                     DtensorDiag *outDiag) {
  char dict[512];
  int k = snprintf(dict, sizeof(dict),
                   "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int d = 0; d < rank; ++d)
    k += snprintf(dict + k, sizeof(dict) - (size_t)k, "%lld%s",
                  (long long)shape[d],
                  rank == 1 ? "," : (d + 1 < rank ? ", " : ""));
  k += snprintf(dict + k, sizeof(dict) - (size_t)k, "), }");
  /* Magic (6) + version (2) + length (2) + dict + padding + '\n' is a
   * multiple of 64. */
  int total = (10 + k + 1 + 63) / 64 * 64;
  int pad = total - 10 - k - 1;
  DtOutput out;
  if (!dtOutputOpen(&out, path, outDiag))
    return false;
  FILE *f = out.file;
  unsigned char head[10] = {0x93,
                            'N',
                            'U',
                            'M',
                            'P',
                            'Y',
                            1,
                            0,
                            (unsigned char)((total - 10) & 0xff),
                            (unsigned char)((total - 10) >> 8)};
  bool ok = fwrite(head, 1, 10, f) == 10 &&
            fwrite(dict, 1, (size_t)k, f) == (size_t)k;
  for (int i = 0; ok && i < pad; ++i)
    ok = fputc(' ', f) != EOF;
  ok = ok && fputc('\n', f) != EOF && fwrite(data, 1, bytes, f) == bytes;
  if (!ok)
    dtDiag(outDiag, -1, "writing %s failed", path);
  return dtOutputClose(&out, ok, outDiag) && ok;
}

/* Reads a .npy file: its descr, shape and data (malloc'd). */
static bool readNpy(const char *path, char *descr, size_t descrSize, int *rank,
                    int64_t *shape, void **data, size_t *bytes, char *err,
                    size_t errSize) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errSize, "%s: %s", path, strerror(errno));
    return false;
  }
  unsigned char head[12];
  bool ok = fread(head, 1, 8, f) == 8 && head[0] == 0x93 &&
            !memcmp(head + 1, "NUMPY", 5) && head[6] >= 1 && head[6] <= 3;
  size_t len = 0;
  if (ok && head[6] == 1) {
    ok = fread(head + 8, 1, 2, f) == 2;
    len = (size_t)head[8] | (size_t)head[9] << 8;
  } else if (ok) {
    ok = fread(head + 8, 1, 4, f) == 4;
    len = (size_t)head[8] | (size_t)head[9] << 8 | (size_t)head[10] << 16 |
          (size_t)head[11] << 24;
  }
  char *dict = ok && len < (1u << 20) ? malloc(len + 1) : NULL;
  ok = ok && dict && fread(dict, 1, len, f) == len;
  if (!ok) {
    snprintf(err, errSize, "%s: not a .npy file", path);
    free(dict);
    fclose(f);
    return false;
  }
  dict[len] = 0;
  const char *d = strstr(dict, "'descr':"),
             *fo = strstr(dict, "'fortran_order':");
  const char *sh = strstr(dict, "'shape':");
  ok = d && fo && sh && sscanf(d, "'descr': '%15[^']'", descr) == 1 &&
       !strncmp(fo + 16, " False", 6);
  (void)descrSize;
  *rank = 0;
  const char *p = sh ? strchr(sh, '(') : NULL;
  ok = ok && p;
  for (++p; ok && *p && *p != ')';) {
    while (*p == ' ' || *p == ',')
      ++p;
    if (*p == ')')
      break;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || *rank >= DTENSOR_MAX_TENSOR_RANK || v < 1) {
      ok = false;
      break;
    }
    shape[(*rank)++] = v;
    p = end;
  }
  free(dict);
  if (!ok) {
    snprintf(err, errSize,
             "%s: the header is not a C-order array of at most "
             "%d dims",
             path, DTENSOR_MAX_TENSOR_RANK);
    fclose(f);
    return false;
  }
  size_t es = descr[2] ? (size_t)atoi(descr + 2) : 0, elems = 1;
  for (int i = 0; i < *rank; ++i)
    elems *= (size_t)shape[i];
  *bytes = elems * es;
  *data = malloc(*bytes + 1);
  ok = *data && fread(*data, 1, *bytes, f) == *bytes;
  fclose(f);
  if (!ok) {
    snprintf(err, errSize,
             "%s: truncated (fewer than the %zu data bytes its "
             "header gives)",
             path, *bytes);
    free(*data);
    *data = NULL;
  }
  return ok;
}

static int exportTensor(const char *dir, const char *name, const char *out) {
  DtrtCheckpoint *c;
  char err[512];
  if (dtrtCheckpointOpen(dir, &c, err, sizeof(err)) != DTRT_OK) {
    fprintf(stderr, "dtensor-ckpt: %s\n", err);
    return 1;
  }
  DtrtTensor t = {0};
  bool found = false;
  for (int i = 0; i < dtrtCheckpointNumTensors(c) && !found; ++i) {
    dtrtCheckpointGetTensor(c, i, &t, NULL, NULL);
    found = !strcmp(t.name, name);
  }
  if (!found) {
    fprintf(stderr, "dtensor-ckpt: %s/%s: no tensor '%s'\n", dir,
            DTRT_CHECKPOINT_METADATA, name);
    dtrtCheckpointClose(c);
    return 1;
  }
  int64_t shape[DTENSOR_MAX_TENSOR_RANK], elems = 1;
  int rank = t.rank;
  DtrtDtype dtype = t.dtype;
  for (int d = 0; d < rank; ++d)
    elems *= (shape[d] = t.shape[d]);
  dtrtCheckpointClose(c);
  size_t es = dtrtDtypeSize(dtype);
  void *data = malloc((size_t)elems * es + 1);
  if (!data || dtrtCheckpointReadTensor(dir, name, data, (size_t)elems * es,
                                        err, sizeof(err)) != DTRT_OK) {
    fprintf(stderr, "dtensor-ckpt: %s\n", data ? err : "out of memory");
    free(data);
    return 1;
  }
  const char *descr = "<f4";
  void *outData = data;
  if (viaFloat32(dtype)) { /* numpy has no such type: float32 holds it */
    float *f = malloc(sizeof(float) * (size_t)elems + 1);
    dtrtConvert(data, dtype, f, DTRT_F32, (size_t)elems);
    outData = f;
    es = 4;
  } else {
    for (size_t k = 0; k < sizeof(kTypes) / sizeof(kTypes[0]); ++k)
      if (kTypes[k].dtype == dtype)
        descr = kTypes[k].descr;
  }
  DtensorDiag diag;
  bool ok =
      writeNpy(out, descr, rank, shape, outData, (size_t)elems * es, &diag);
  if (outData != data)
    free(outData);
  free(data);
  if (!ok) {
    fprintf(stderr, "dtensor-ckpt: %s\n", diag.message);
    return 1;
  }
  return 0;
}

static int importTensor(const char *dir, const char *name, const char *in,
                        const char *mesh, const char *spec,
                        const char *dtypeName) {
  char descr[16] = "", err[512];
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  void *data;
  size_t bytes;
  if (!readNpy(in, descr, sizeof(descr), &rank, shape, &data, &bytes, err,
               sizeof(err))) {
    fprintf(stderr, "dtensor-ckpt: %s\n", err);
    return 1;
  }
  DtrtDtype dtype = DTRT_F32;
  bool known = false;
  for (size_t k = 0; k < sizeof(kTypes) / sizeof(kTypes[0]); ++k)
    if (dtypeName
            ? !strcmp(dtrtDtypeName(kTypes[k].dtype), dtypeName)
            : !strcmp(kTypes[k].descr, descr) && !viaFloat32(kTypes[k].dtype)) {
      dtype = kTypes[k].dtype;
      known = !dtypeName || !strcmp(kTypes[k].descr, descr);
      break;
    }
  if (!known) {
    fprintf(stderr,
            "dtensor-ckpt: %s: element type '%s'%s%s (valid: <f4, "
            "<f8, <f2, <i4, <i8, <i2, |i1, |u1, |b1; --dtype bf16, "
            "f8E4M3FN or f8E5M2 takes <f4)\n",
            in, descr, dtypeName ? " cannot be stored as " : "",
            dtypeName ? dtypeName : "");
    free(data);
    return 1;
  }
  if (viaFloat32(dtype)) /* narrowing in place, front to back */
    dtrtConvert(data, DTRT_F32, data, dtype, bytes / 4);
  DtrtTensor t = {name, dtype, rank, shape, mesh, spec, data};
  DtrtStatus s = dtrtCheckpointWriteTensor(dir, &t, err, sizeof(err));
  free(data);
  if (s != DTRT_OK) {
    fprintf(stderr, "dtensor-ckpt: %s\n", err);
    return 1;
  }
  return 0;
}

static int convert(int argc, char **argv) {
  if (argc < 4)
    return usage(stderr, 2);
  const char *dir = argv[2], *out = argv[3], *mesh = NULL, *dflt = NULL;
  const char *names[256], *specs[256];
  char *owned[256];
  int n = 0;
  for (int i = 4; i < argc; ++i) {
    if (!strcmp(argv[i], "--mesh") && i + 1 < argc) {
      mesh = argv[++i];
    } else if (!strcmp(argv[i], "--spec") && i + 1 < argc) {
      const char *v = argv[++i], *eq = strchr(v, '=');
      if (!eq || strchr(v, '[') < eq) {
        dflt = v;
      } else if (n < 256) {
        owned[n] = strndup(v, (size_t)(eq - v));
        names[n] = owned[n];
        specs[n++] = eq + 1;
      }
    } else {
      fprintf(stderr, "dtensor-ckpt: unknown argument '%s'\n", argv[i]);
      return usage(stderr, 2);
    }
  }
  if (!mesh) {
    fprintf(stderr, "dtensor-ckpt: convert needs --mesh\n");
    return 2;
  }
  char err[512];
  DtrtStatus s = dtrtCheckpointConvert(dir, out, mesh, n, names, specs, dflt,
                                       err, sizeof(err));
  for (int i = 0; i < n; ++i)
    free(owned[i]);
  if (s != DTRT_OK) {
    fprintf(stderr, "dtensor-ckpt: %s\n", err);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return usage(stderr, 2);
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h"))
    return usage(stdout, 0);
  if (!strcmp(cmd, "info") &&
      (argc == 3 || (argc == 4 && !strcmp(argv[3], "--layouts"))))
    return info(argv[2], argc == 4);
  if (!strcmp(cmd, "verify") && argc == 3) {
    char err[512];
    if (dtrtCheckpointVerify(argv[2], err, sizeof(err)) != DTRT_OK) {
      fprintf(stderr, "dtensor-ckpt: %s\n", err);
      return 1;
    }
    printf("%s: every shard is complete and matches its checksum\n", argv[2]);
    return 0;
  }
  if (!strcmp(cmd, "convert"))
    return convert(argc, argv);
  if (!strcmp(cmd, "export") && argc == 5)
    return exportTensor(argv[2], argv[3], argv[4]);
  if (!strcmp(cmd, "import") && argc >= 5) {
    const char *mesh = NULL, *spec = NULL, *dtype = NULL;
    for (int i = 5; i < argc; ++i) {
      if (!strcmp(argv[i], "--mesh") && i + 1 < argc)
        mesh = argv[++i];
      else if (!strcmp(argv[i], "--spec") && i + 1 < argc)
        spec = argv[++i];
      else if (!strcmp(argv[i], "--dtype") && i + 1 < argc)
        dtype = argv[++i];
      else {
        fprintf(stderr, "dtensor-ckpt: unknown argument '%s'\n", argv[i]);
        return usage(stderr, 2);
      }
    }
    if (!mesh || !spec) {
      fprintf(stderr, "dtensor-ckpt: import needs --mesh and --spec\n");
      return 2;
    }
    return importTensor(argv[2], argv[3], argv[4], mesh, spec, dtype);
  }
  fprintf(stderr, "dtensor-ckpt: unknown command or arguments\n");
  return usage(stderr, 2);
}
