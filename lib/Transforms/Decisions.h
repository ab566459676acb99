/* The decisions of dtensor-propagate that dtensor-partition reads: a table
 * over the support hash table (Support/Support.h), or the ops' attributes
 * when the passes run alone. */
#ifndef DTENSOR_LIB_TRANSFORMS_DECISIONS_H
#define DTENSOR_LIB_TRANSFORMS_DECISIONS_H

#include "Dialect/DialectInternal.h"
#include "Support/Support.h"

#include "dtensor-c/Layout.h"
#include "mlir-c/IR.h"

/// What dtensor-propagate decides for an op: the layouts of its results,
/// those its operands must have, and the mesh axes of its loops. On its own
/// the pass writes them as the attributes dtensor.layout,
/// dtensor.operand_layouts and dtensor.loop_axes for dtensor-partition to
/// read; dtensor-spmd hands them over in a DtDecisions table instead, which
/// saves writing, reading and removing three attributes on every op.
typedef enum DtDecided {
  DT_DECIDED_LAYOUT,
  DT_DECIDED_OPERANDS,
  DT_DECIDED_LOOPS,
  DT_NUM_DECIDED
} DtDecided;

typedef struct DtDecisions {
  DtTable table;
} DtDecisions;

/// An empty table.
DtDecisions dtDecisionsInit(void);

/// Records decision `kind` of `op`: in `d`, or as the op's attribute when
/// `d` is NULL. False when out of memory.
bool dtDecisionSet(DtDecisions *d, MlirOperation op, DtDecided kind,
                   MlirAttribute value);

/// Decision `kind` of `op` from `d`, or from the op's attribute when `d`
/// is NULL; null when there is none.
MlirAttribute dtDecisionGet(const DtDecisions *d, MlirOperation op,
                            DtDecided kind);

/// The attribute name of decision `kind`.
const char *dtDecidedName(DtDecided kind);

/// Frees the table.
void dtDecisionsFree(DtDecisions *d);

#endif
