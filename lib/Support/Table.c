/* The hash table and the growable array of Support.h. */
#include "Support.h"

#include <stdlib.h>
#include <string.h>

DtTable dtTableInit(size_t entrySize) {
  DtTable t = {entrySize, 0, 0, NULL, NULL, NULL};
  return t;
}

void *dtTableFind(const DtTable *t, uint64_t hash,
                  bool (*equal)(const void *entry, const void *key),
                  const void *key) {
  if (!t->mask)
    return NULL;
  for (unsigned h = (unsigned)hash & t->mask; t->used[h]; h = (h + 1) & t->mask)
    if (t->hashes[h] == hash && equal(t->entries + h * t->entrySize, key))
      return t->entries + h * t->entrySize;
  return NULL;
}

static unsigned freeSlot(const DtTable *t, uint64_t hash) {
  unsigned h = (unsigned)hash & t->mask;
  while (t->used[h])
    h = (h + 1) & t->mask;
  return h;
}

void *dtTableInsert(DtTable *t, uint64_t hash) {
  if ((t->count + 1) * 2 > t->mask) {
    unsigned size = t->mask ? 2 * (t->mask + 1) : 64;
    DtTable grown = {t->entrySize,    size - 1,
                     t->count,        calloc(size, sizeof(uint64_t)),
                     calloc(size, 1), calloc(size, t->entrySize)};
    if (!grown.hashes || !grown.used || !grown.entries) {
      dtTableFree(&grown);
      return NULL;
    }
    for (unsigned i = 0; t->mask && i <= t->mask; ++i)
      if (t->used[i]) {
        unsigned h = freeSlot(&grown, t->hashes[i]);
        grown.used[h] = true;
        grown.hashes[h] = t->hashes[i];
        memcpy(grown.entries + h * t->entrySize, t->entries + i * t->entrySize,
               t->entrySize);
      }
    dtTableFree(t);
    *t = grown;
  }
  unsigned h = freeSlot(t, hash);
  t->used[h] = true;
  t->hashes[h] = hash;
  ++t->count;
  return memset(t->entries + h * t->entrySize, 0, t->entrySize);
}

void dtTableRemove(DtTable *t, void *entry) {
  unsigned hole = (unsigned)(((char *)entry - t->entries) / t->entrySize);
  t->used[hole] = false;
  --t->count;
  /* Backward shift: move up each later entry of the run whose home slot
   * is not between the hole and it, so every probe still finds it. */
  for (unsigned i = (hole + 1) & t->mask; t->used[i]; i = (i + 1) & t->mask) {
    unsigned home = (unsigned)t->hashes[i] & t->mask;
    bool stays =
        hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
    if (stays)
      continue;
    t->used[hole] = true;
    t->hashes[hole] = t->hashes[i];
    memcpy(t->entries + hole * t->entrySize, t->entries + i * t->entrySize,
           t->entrySize);
    t->used[i] = false;
    hole = i;
  }
}

void dtTableForEach(DtTable *t, void (*visit)(void *entry, void *user),
                    void *user) {
  for (unsigned i = 0; t->mask && i <= t->mask; ++i)
    if (t->used[i])
      visit(t->entries + i * t->entrySize, user);
}

void dtTableFree(DtTable *t) {
  free(t->hashes);
  free(t->used);
  free(t->entries);
  t->hashes = NULL;
  t->used = NULL;
  t->entries = NULL;
  t->mask = t->count = 0;
}

void *dtArrayPush(void **data, size_t *count, size_t *capacity, size_t size) {
  if (*count == *capacity) {
    size_t cap = *capacity ? *capacity : 8;
    if (*capacity && __builtin_mul_overflow(*capacity, 2, &cap))
      return NULL;
    size_t bytes;
    if (__builtin_mul_overflow(cap, size, &bytes))
      return NULL;
    void *grown = realloc(*data, bytes ? bytes : 1);
    if (!grown)
      return NULL;
    *data = grown;
    *capacity = cap;
  }
  char *slot = (char *)*data + *count * size;
  ++*count;
  return memset(slot, 0, size);
}
