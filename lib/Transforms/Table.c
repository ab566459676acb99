/* The passes' tables over the support hash table (Table.h). */
#include "Table.h"

#include "Dialect/DialectInternal.h"

#include "dtensor-c/Dialect.h"
#include "mlir-c/BuiltinAttributes.h"

#include <stdlib.h>
#include <string.h>

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
    DT_ATTR_LAYOUT, DT_ATTR_OPERAND_LAYOUTS, DT_ATTR_LOOP_AXES};

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
  MlirOperation *slot = dtArrayPush((void **)&list->ops, &list->count,
                                    &list->capacity, sizeof(MlirOperation));
  if (slot)
    *slot = op;
  return slot != NULL;
}
