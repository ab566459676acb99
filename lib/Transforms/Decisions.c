/* The passes' tables over the support hash table (Table.h). */
#include "Decisions.h"

#include "Dialect/DialectInternal.h"

#include "dtensor-c/Dialect.h"
#include "mlir-c/BuiltinAttributes.h"

#include <stdlib.h>
#include <string.h>

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
