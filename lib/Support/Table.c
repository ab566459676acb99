/* The hash table and the growable array of Support.h. */
#include "Support.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

DtTable dtTableInit(size_t entrySize) {
  DtTable t = {entrySize, 0, 0, NULL, NULL};
  return t;
}

static unsigned freeSlot(const DtTable *t, uint64_t hash) {
  unsigned h = (unsigned)hash & t->mask;
  while (t->hashes[h])
    h = (h + 1) & t->mask;
  return h;
}

/* A table of `size` slots (a power of two) in one zeroed block: the hashes,
 * then the entries. */
static bool allocSlots(DtTable *t, unsigned size) {
  char *block = calloc(1, (size_t)size * (sizeof(uint64_t) + t->entrySize));
  if (!block)
    return false;
  t->hashes = (uint64_t *)block;
  t->entries = block + (size_t)size * sizeof(uint64_t);
  t->mask = size - 1;
  return true;
}

void *dtTableInsert(DtTable *t, uint64_t hash) {
  if ((t->count + 1) * 2 > t->mask) {
    DtTable grown = dtTableInit(t->entrySize);
    if (!allocSlots(&grown, t->mask ? 2 * (t->mask + 1) : 64))
      return NULL;
    grown.count = t->count;
    for (unsigned i = 0; t->mask && i <= t->mask; ++i)
      if (t->hashes[i]) {
        unsigned h = freeSlot(&grown, t->hashes[i]);
        grown.hashes[h] = t->hashes[i];
        memcpy(grown.entries + h * t->entrySize, t->entries + i * t->entrySize,
               t->entrySize);
      }
    dtTableFree(t);
    *t = grown;
  }
  hash = dtTableSlotHash(hash);
  unsigned h = freeSlot(t, hash);
  t->hashes[h] = hash;
  ++t->count;
  return memset(t->entries + h * t->entrySize, 0, t->entrySize);
}

void dtTableRemove(DtTable *t, void *entry) {
  unsigned hole = (unsigned)(((char *)entry - t->entries) / t->entrySize);
  t->hashes[hole] = 0;
  --t->count;
  /* Backward shift: move up each later entry of the run whose home slot
   * is not between the hole and it, so every probe still finds it. */
  for (unsigned i = (hole + 1) & t->mask; t->hashes[i]; i = (i + 1) & t->mask) {
    unsigned home = (unsigned)t->hashes[i] & t->mask;
    bool stays =
        hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
    if (stays)
      continue;
    t->hashes[hole] = t->hashes[i];
    memcpy(t->entries + hole * t->entrySize, t->entries + i * t->entrySize,
           t->entrySize);
    t->hashes[i] = 0;
    hole = i;
  }
}

void dtTableForEach(DtTable *t, void (*visit)(void *entry, void *user),
                    void *user) {
  for (unsigned i = 0; t->mask && i <= t->mask; ++i)
    if (t->hashes[i])
      visit(t->entries + i * t->entrySize, user);
}

void dtTableFree(DtTable *t) {
  free(t->hashes); /* the block of allocSlots */
  t->hashes = NULL;
  t->entries = NULL;
  t->mask = t->count = 0;
}

/* Makes room for `need` elements of `size` bytes (doubling, overflow
 * checked); false when out of memory, the array unchanged. */
static bool reserve(void **data, size_t *capacity, size_t need, size_t size) {
  if (need <= *capacity)
    return true;
  size_t cap = *capacity ? *capacity : 8;
  while (cap < need)
    if (__builtin_mul_overflow(cap, 2, &cap))
      return false;
  size_t bytes;
  if (__builtin_mul_overflow(cap, size, &bytes))
    return false;
  void *grown = realloc(*data, bytes ? bytes : 1);
  if (!grown)
    return false;
  *data = grown;
  *capacity = cap;
  return true;
}

void *dtArrayPush(void **data, size_t *count, size_t *capacity, size_t size) {
  if (*count == SIZE_MAX || !reserve(data, capacity, *count + 1, size))
    return NULL;
  char *slot = (char *)*data + *count * size;
  ++*count;
  return memset(slot, 0, size);
}

bool dtArrayAppend(void **data, size_t *count, size_t *capacity, size_t size,
                   const void *elems, size_t n) {
  size_t need;
  if (__builtin_add_overflow(*count, n, &need) ||
      !reserve(data, capacity, need, size))
    return false;
  if (n)
    memcpy((char *)*data + *count * size, elems, n * size);
  *count = need;
  return true;
}

uint64_t dtHashBytes(const void *bytes, size_t n) {
  const unsigned char *b = bytes;
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  memcpy(&tail, b + i, n - i);
  h = (h ^ tail) * 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 29);
}

/* ---- scratch stack ------------------------------------------------------- */

enum { kScratchChunk = 256 << 10, kScratchAlign = 16 };

void *dtScratchTake(DtScratch *s, size_t bytes) {
  size_t need = (bytes + kScratchAlign - 1) & ~(size_t)(kScratchAlign - 1);
  if (need < bytes)
    return NULL;
  if (s->numChunks && s->used + need <= s->chunks[s->current].size) {
    void *block = s->chunks[s->current].data + s->used;
    s->used += need;
    return block;
  }
  /* The next chunk, made (or made anew, larger) when it cannot hold the
   * block. */
  size_t next = s->numChunks ? s->current + 1 : 0;
  if (next == s->numChunks || s->chunks[next].size < need) {
    size_t size = need > kScratchChunk ? need : kScratchChunk;
    char *data = aligned_alloc(kScratchAlign, size);
    if (!data)
      return NULL;
    if (next == s->numChunks &&
        !dtArrayPush((void **)&s->chunks, &s->numChunks, &s->capChunks,
                     sizeof(DtScratchChunk))) {
      free(data);
      return NULL;
    }
    free(s->chunks[next].data);
    s->chunks[next] = (DtScratchChunk){data, size};
  }
  s->current = next;
  s->used = need;
  return s->chunks[next].data;
}

void dtScratchGive(DtScratch *s, void *block) {
  char *b = block;
  for (size_t k = s->current + 1; k-- > 0;)
    if (b >= s->chunks[k].data && b < s->chunks[k].data + s->chunks[k].size) {
      s->current = k;
      s->used = (size_t)(b - s->chunks[k].data);
      return;
    }
}

void dtScratchFree(DtScratch *s) {
  for (size_t k = 0; k < s->numChunks; ++k)
    free(s->chunks[k].data);
  free(s->chunks);
  *s = (DtScratch){0};
}
