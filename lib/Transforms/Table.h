/* A small open-addressing hash table of fixed-size entries, for the caches
 * of the passes. Each entry is `entrySize` bytes; the table keeps the hashes
 * and which slots are used; the caller compares keys. */
#ifndef DTENSOR_LIB_TRANSFORMS_TABLE_H
#define DTENSOR_LIB_TRANSFORMS_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct DtTable {
  size_t entrySize;
  unsigned mask; /* capacity - 1; 0 before the first insert */
  unsigned count;
  uint64_t *hashes;
  bool *used;
  char *entries;
} DtTable;

/// An empty table of entries of `entrySize` bytes.
DtTable dtTableInit(size_t entrySize);

/// Returns the entry with `hash` for which `equal(entry, key)`, or NULL.
void *dtTableFind(const DtTable *t, uint64_t hash,
                  bool (*equal)(const void *entry, const void *key),
                  const void *key);

/// Returns a new zeroed entry for `hash` (growing the table), or NULL when
/// out of memory. The entry stays valid until the next insert.
void *dtTableInsert(DtTable *t, uint64_t hash);

/// Frees the table's memory.
void dtTableFree(DtTable *t);

/// Mixes a 64-bit value into a hash.
static inline uint64_t dtHashMix(uint64_t h, uint64_t v) {
  h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
  return h ^ (h >> 29);
}

#include "dtensor-c/Layout.h"
#include "mlir-c/IR.h"

/// Layout attributes read before, keyed on (attribute, type), both uniqued:
/// a program uses the same few layouts on many values.
typedef struct DtLayoutCache {
  DtTable table;
} DtLayoutCache;

/// An empty cache.
DtLayoutCache dtLayoutCacheInit(void);

/// dtensorLayoutFromAttr through the cache: the spec of `attr` for a value
/// of `type` used in `from`; the mesh is not returned. False with `outDiag`
/// filled when the layout does not fit (failures are not cached).
bool dtLayoutCacheRead(DtLayoutCache *c, MlirOperation from, MlirAttribute attr,
                       MlirType type, DtensorShardingSpec *outSpec,
                       DtensorDiag *outDiag);

/// Frees the cache.
void dtLayoutCacheFree(DtLayoutCache *c);

#endif
