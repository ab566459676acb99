/* The passes' hash table (Table.h). */
#include "Table.h"

#include "dtensor-c/Dialect.h"
#include "mlir-c/BuiltinAttributes.h"

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
    DtTable grown = {t->entrySize, size - 1, t->count,
                     calloc(size, sizeof(uint64_t)), calloc(size, 1),
                     calloc(size, t->entrySize)};
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

void dtTableFree(DtTable *t) {
  free(t->hashes);
  free(t->used);
  free(t->entries);
  t->hashes = NULL;
  t->used = NULL;
  t->entries = NULL;
  t->mask = t->count = 0;
}

typedef struct LayoutEntry {
  const void *attr, *type;
  DtensorShardingSpec spec;
} LayoutEntry;

static bool sameLayoutKey(const void *entry, const void *key) {
  const LayoutEntry *e = entry, *k = key;
  return e->attr == k->attr && e->type == k->type;
}

DtLayoutCache dtLayoutCacheInit(void) {
  DtLayoutCache c = {dtTableInit(sizeof(LayoutEntry))};
  return c;
}

bool dtLayoutCacheRead(DtLayoutCache *c, MlirOperation from, MlirAttribute attr,
                       MlirType type, DtensorShardingSpec *outSpec,
                       DtensorDiag *outDiag) {
  LayoutEntry key;
  key.attr = attr.ptr;
  key.type = type.ptr;
  uint64_t hash = dtHashMix(dtHashMix(7, (uint64_t)(uintptr_t)attr.ptr),
                            (uint64_t)(uintptr_t)type.ptr);
  LayoutEntry *hit = dtTableFind(&c->table, hash, sameLayoutKey, &key);
  if (hit) {
    *outSpec = hit->spec;
    return true;
  }
  DtensorMesh *mesh = NULL;
  DtensorLayout layout;
  if (!dtensorLayoutFromAttr(from, attr, type, &mesh, &layout, outDiag))
    return false;
  dtensorMeshDestroy(mesh);
  *outSpec = layout.spec;
  LayoutEntry *slot = dtTableInsert(&c->table, hash);
  if (slot) {
    slot->attr = attr.ptr;
    slot->type = type.ptr;
    slot->spec = layout.spec;
  }
  return true;
}

void dtLayoutCacheFree(DtLayoutCache *c) { dtTableFree(&c->table); }

typedef struct DecisionEntry {
  const void *op;
  MlirAttribute value[DT_NUM_DECIDED];
} DecisionEntry;

static const char *const kDecidedNames[DT_NUM_DECIDED] = {
    "dtensor.layout", "dtensor.operand_layouts", "dtensor.loop_axes"};

const char *dtDecidedName(DtDecided kind) { return kDecidedNames[kind]; }

static bool sameOp(const void *entry, const void *key) {
  return ((const DecisionEntry *)entry)->op == key;
}

static uint64_t opHash(MlirOperation op) {
  return dtHashMix(0xdec, (uint64_t)(uintptr_t)op.ptr);
}

DtDecisions dtDecisionsInit(void) {
  DtDecisions d = {dtTableInit(sizeof(DecisionEntry))};
  return d;
}

bool dtDecisionSet(DtDecisions *d, MlirOperation op, DtDecided kind,
                   MlirAttribute value) {
  if (!d) {
    mlirOperationSetDiscardableAttributeByName(
        op, mlirStringRefCreateFromCString(kDecidedNames[kind]), value);
    return true;
  }
  uint64_t hash = opHash(op);
  DecisionEntry *e = dtTableFind(&d->table, hash, sameOp, op.ptr);
  if (!e) {
    e = dtTableInsert(&d->table, hash);
    if (!e)
      return false;
    e->op = op.ptr;
  }
  e->value[kind] = value;
  return true;
}

MlirAttribute dtDecisionGet(const DtDecisions *d, MlirOperation op,
                            DtDecided kind) {
  if (!d)
    return mlirOperationGetDiscardableAttributeByName(
        op, mlirStringRefCreateFromCString(kDecidedNames[kind]));
  const DecisionEntry *e = dtTableFind(&d->table, opHash(op), sameOp, op.ptr);
  return e ? e->value[kind] : mlirAttributeGetNull();
}

void dtDecisionsFree(DtDecisions *d) { dtTableFree(&d->table); }

bool dtOpListPush(DtOpList *list, MlirOperation op) {
  if (list->count == list->capacity) {
    size_t cap = list->capacity ? 2 * list->capacity : 64;
    MlirOperation *ops = realloc(list->ops, sizeof(MlirOperation) * cap);
    if (!ops)
      return false;
    list->ops = ops;
    list->capacity = cap;
  }
  list->ops[list->count++] = op;
  return true;
}
