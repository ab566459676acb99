/* Checkpoints across layouts and world sizes, as real processes under
 * dtensor-run. The tensors (names, element types, uneven shapes, values)
 * follow from a seed alone; the layouts from the seed and the job's size,
 * so a save on N ranks and a load on M ranks use different ones.
 *
 *   checkpoint-test save DIR SEED        save on this job's mesh (some specs
 *                                        Partial: contributions that reduce
 *                                        to the values exactly)
 *   checkpoint-test load DIR SEED        load in other layouts, check every
 *                                        element bit for bit
 *   checkpoint-test load-fails DIR SEED TEXT
 *                                        the load fails on every rank with a
 *                                        message containing TEXT, and no
 *                                        block changes
 *   checkpoint-test save-killed DIR SEED rank 1 is killed during the save,
 *                                        once it has written a shard
 *   checkpoint-test save-fails DIR SEED TEXT
 *                                        the save fails with TEXT */
#include "dtensor-rt/Checkpoint.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NUM_TENSORS 6

#include "RankCheck.h"

static uint64_t rng(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

typedef struct Spec {
  char name[32];
  DtrtDtype dtype;
  int rank;
  int64_t shape[3];
  char spec[64];
} Spec;

static const DtrtDtype kTypes[6] = {DTRT_F32, DTRT_F64,  DTRT_I32,
                                    DTRT_I64, DTRT_BF16, DTRT_F16};

/* The tensors of a seed: independent of the job. */
static void tensorsOf(uint64_t seed, Spec *out) {
  uint64_t s = seed * 7919 + 1;
  for (int i = 0; i < NUM_TENSORS; ++i) {
    snprintf(out[i].name, sizeof(out[i].name), "t%d.w", i);
    out[i].dtype = kTypes[rng(&s) % 6];
    out[i].rank = 1 + (int)(rng(&s) % 3);
    for (int d = 0; d < out[i].rank; ++d)
      out[i].shape[d] = 1 + (int64_t)(rng(&s) % (i == 0 ? 300 : 13));
  }
}

/* A random spec for this job's mesh (1-D of N, or 2x2 for 4 ranks):
 * each axis shards a random dim or none; `partial` lets unused axes be
 * Partial. */
static const char *meshOf(int world, uint64_t seed) {
  static char text[16];
  if (world == 4 && seed % 2)
    return "2x2";
  snprintf(text, sizeof(text), "%d", world);
  return text;
}

static void specOf(Spec *t, const char *mesh, uint64_t *s, bool partial) {
  int axes = !strcmp(mesh, "2x2") ? 2 : 1;
  int dimAxes[3][2], numDim[3] = {0, 0, 0};
  char tail[32] = "";
  for (int a = 0; a < axes; ++a) {
    int d = (int)(rng(s) % (uint64_t)(t->rank + 1));
    if (d < t->rank)
      dimAxes[d][numDim[d]++] = a;
    else if (partial && rng(s) % 2) {
      size_t n = strlen(tail);
      snprintf(tail + n, sizeof(tail) - n, " P%s(%d)",
               rng(s) % 2 ? "sum" : "max", a);
    }
  }
  int k = snprintf(t->spec, sizeof(t->spec), "[");
  for (int d = 0; d < t->rank; ++d) {
    k +=
        snprintf(t->spec + k, sizeof(t->spec) - (size_t)k, "%s", d ? ", " : "");
    if (!numDim[d])
      k += snprintf(t->spec + k, sizeof(t->spec) - (size_t)k, "R");
    else {
      k += snprintf(t->spec + k, sizeof(t->spec) - (size_t)k, "S");
      for (int j = 0; j < numDim[d]; ++j)
        k += snprintf(t->spec + k, sizeof(t->spec) - (size_t)k, "%d",
                      dimAxes[d][j]);
    }
  }
  snprintf(t->spec + k, sizeof(t->spec) - (size_t)k, "]%s", tail);
}

/* The value at a global linear index, exact in every type. */
static double valueAt(int tensor, int64_t linear) {
  return (double)((linear * 31 + tensor * 7) % 97) - 48;
}

/* Element i of a block of type t, through the runtime's conversion (the
 * values are small integers: exact in every type). */
static void store(void *p, DtrtDtype t, int64_t i, double v) {
  dtrtConvert(&v, DTRT_F64, (char *)p + i * (int64_t)dtrtDtypeSize(t), t, 1);
}

/* Block element e of `device` under (mesh, spec): its global linear index,
 * or -1 for padding, through the layout algebra's own description: the
 * ranges each dim holds (one per interleave group; no interleave here). */
typedef struct Block {
  int64_t pad[3], begin[3], len[3], elems;
} Block;

static bool blockOf(const Spec *t, const char *mesh, int device, Block *b);

/* Element `e` of a padded block: whether it holds data, and its global
 * linear index. */
static bool globalOf(const Spec *t, const Block *b, int64_t e, int64_t *lin) {
  int64_t idx[3], rem = e;
  for (int d = t->rank - 1; d >= 0; --d) {
    idx[d] = rem % b->pad[d];
    rem /= b->pad[d];
  }
  bool inside = true;
  *lin = 0;
  for (int d = 0; d < t->rank; ++d) {
    inside &= idx[d] < b->len[d];
    *lin = *lin * t->shape[d] + b->begin[d] + idx[d];
  }
  return inside;
}

/* Whether directory `path` holds a shard file of rank 1. */
static bool holdsRankOneShard(const char *path) {
  bool found = false;
  DIR *d = opendir(path);
  for (struct dirent *e; d && !found && (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    found = n > 6 && !strcmp(e->d_name + n - 6, ".1.bin");
  }
  if (d)
    closedir(d);
  return found;
}

/* Kills this process once a shard file of rank 1 exists in a staging
 * directory of the checkpoint `arg` (`arg`.tmp-*, a name the save draws). */
static void *killWhenWritten(void *arg) {
  const char *dir = arg, *slash = strrchr(dir, '/');
  char parent[4096], prefix[4096];
  snprintf(parent, sizeof(parent), "%.*s", slash ? (int)(slash - dir) : 1,
           slash ? dir : ".");
  snprintf(prefix, sizeof(prefix), "%s.tmp-", slash ? slash + 1 : dir);
  for (;;) {
    DIR *d = opendir(parent);
    for (struct dirent *e; d && (e = readdir(d));)
      if (!strncmp(e->d_name, prefix, strlen(prefix))) {
        char path[8300];
        snprintf(path, sizeof(path), "%s/%s", parent, e->d_name);
        if (holdsRankOneShard(path))
          raise(SIGKILL);
      }
    if (d)
      closedir(d);
    struct timespec pause = {0, 100 * 1000};
    nanosleep(&pause, NULL);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: checkpoint-test save|load|load-fails|save-killed"
                    "|save-fails DIR SEED [TEXT]\n");
    return 2;
  }
  const char *mode = argv[1], *dir = argv[2];
  uint64_t seed = strtoull(argv[3], NULL, 10);
  DtrtContext *ctx = NULL;
  if (dtrtInit(&ctx) != DTRT_OK) {
    fprintf(stderr, "init: %s\n", dtrtLastError(ctx));
    return 1;
  }
  rank = dtrtRank(ctx);
  int world = dtrtWorldSize(ctx);
  bool saving = !strncmp(mode, "save", 4);
  Spec specs[NUM_TENSORS];
  tensorsOf(seed, specs);
  /* Saves and loads pick different layouts (and meshes on 4 ranks). */
  uint64_t ls = seed * 104729 + (uint64_t)world * 31 + (saving ? 0 : 17);
  const char *mesh = meshOf(world, ls);
  DtrtTensor tensors[NUM_TENSORS];
  void *blocks[NUM_TENSORS];
  Block geo[NUM_TENSORS];
  for (int i = 0; i < NUM_TENSORS; ++i) {
    specOf(&specs[i], mesh, &ls, saving);
    if (!blockOf(&specs[i], mesh, rank, &geo[i])) {
      fprintf(stderr, "rank %d: layout of %s: %s\n", rank, specs[i].name,
              specs[i].spec);
      return 1;
    }
    size_t es = dtrtDtypeSize(specs[i].dtype);
    blocks[i] = calloc((size_t)geo[i].elems + 1, es);
    tensors[i] = (DtrtTensor){specs[i].name,  specs[i].dtype, specs[i].rank,
                              specs[i].shape, mesh,           specs[i].spec,
                              blocks[i]};
  }
  /* Saving: each element's value (a Partial sum: the value at one device
   * of the group, zero elsewhere; max: the value everywhere). Loading: a
   * sentinel that must be overwritten (or, for a failed load, kept). */
  for (int i = 0; i < NUM_TENSORS; ++i) {
    /* Along each Partial(sum) axis only coordinate 0 holds the value. */
    bool holds = true;
    for (const char *q = specs[i].spec; (q = strstr(q, "Psum(")); q += 5) {
      int a = q[5] - '0';
      holds &=
          (!strcmp(mesh, "2x2") ? (a == 0 ? rank / 2 : rank % 2) : rank) == 0;
    }
    for (int64_t e = 0; e < geo[i].elems; ++e) {
      int64_t lin;
      bool inside = globalOf(&specs[i], &geo[i], e, &lin);
      double v = saving && inside ? valueAt(i, lin) : -999;
      if (saving && inside && !holds)
        v = 0;
      store(blocks[i], specs[i].dtype, e, v);
    }
  }
  if (!strcmp(mode, "save-killed") && rank == 1) {
    /* Killed in the middle of the save: once its first shard file is in
     * the staging directory. */
    pthread_t watcher;
    pthread_create(&watcher, NULL, killWhenWritten, (void *)dir);
  }
  DtrtStatus s = saving ? dtrtCheckpointSave(ctx, dir, NUM_TENSORS, tensors)
                        : dtrtCheckpointLoad(ctx, dir, NUM_TENSORS, tensors);
  if (!strcmp(mode, "save") || !strcmp(mode, "load"))
    CHECK(s == DTRT_OK, "%s: %s", mode, dtrtLastError(ctx));
  if (!strcmp(mode, "load-fails") || !strcmp(mode, "save-fails")) {
    const char *text = argc > 4 ? argv[4] : "";
    CHECK(s != DTRT_OK && strstr(dtrtLastError(ctx), text),
          "%s: status %d, message '%s', expected one containing '%s'", mode,
          (int)s, dtrtLastError(ctx), text);
    if (rank == 0)
      printf("rank 0: failed as expected: %s\n", dtrtLastError(ctx));
  }
  /* After a load every block holds the values bit for bit (padding keeps
   * the sentinel); after a failed load, the sentinel everywhere. */
  if (!saving)
    for (int i = 0; i < NUM_TENSORS; ++i) {
      size_t es = dtrtDtypeSize(specs[i].dtype);
      char *want = calloc((size_t)geo[i].elems + 1, es);
      int64_t bad = 0;
      for (int64_t e = 0; e < geo[i].elems; ++e) {
        int64_t lin;
        bool inside = globalOf(&specs[i], &geo[i], e, &lin);
        store(want, specs[i].dtype, e,
              inside && s == DTRT_OK ? valueAt(i, lin) : -999);
        bad += memcmp(want + e * (int64_t)es,
                      (char *)blocks[i] + e * (int64_t)es, es) != 0;
      }
      CHECK(bad == 0, "%s %s (%s on %s): %lld of %lld elements differ", mode,
            specs[i].name, specs[i].spec, mesh, (long long)bad,
            (long long)geo[i].elems);
      free(want);
    }
  CHECK(dtrtFinalize(ctx) == DTRT_OK, "finalize");
  printf("rank %d of %d (%s): %d passed, %d failed\n", rank, world, mode,
         checks - failures, failures);
  return failures ? 1 : 0;
}

/* The block of `device`: per dim, the chunk of the ceil-div split over the
 * axes that shard it (major first), as docs/layouts.md defines it;
 * written here independently of the library. */
static bool blockOf(const Spec *t, const char *mesh, int device, Block *b) {
  int coords[2], sizes[2], axes = !strcmp(mesh, "2x2") ? 2 : 1;
  if (axes == 2) {
    sizes[0] = sizes[1] = 2;
    coords[0] = device / 2;
    coords[1] = device % 2;
  } else {
    sizes[0] = atoi(mesh);
    coords[0] = device;
  }
  const char *p = strchr(t->spec, '[') + 1;
  b->elems = 1;
  for (int d = 0; d < t->rank; ++d) {
    while (*p == ' ' || *p == ',')
      ++p;
    int64_t parts = 1, index = 0;
    if (*p == 'S') {
      for (++p; *p >= '0' && *p <= '9'; ++p) {
        int a = *p - '0';
        index = index * sizes[a] + coords[a];
        parts *= sizes[a];
      }
    } else if (*p == 'R') {
      ++p;
    } else {
      return false;
    }
    int64_t chunk = (t->shape[d] + parts - 1) / parts;
    int64_t begin = index * chunk;
    int64_t end = begin + chunk < t->shape[d] ? begin + chunk : t->shape[d];
    b->pad[d] = chunk;
    b->begin[d] = begin;
    b->len[d] = end > begin ? end - begin : 0;
    b->elems *= chunk;
  }
  return true;
}
