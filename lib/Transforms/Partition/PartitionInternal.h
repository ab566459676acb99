/* What dtensor-partition's files share: its state and the helpers that
 * build ops (Partition.c), and the slicing of uneven shards and the block
 * offsets of sharded loops (PartitionUneven.c). */
#ifndef DTENSOR_LIB_TRANSFORMS_PARTITIONINTERNAL_H
#define DTENSOR_LIB_TRANSFORMS_PARTITIONINTERNAL_H

#include "Decisions.h"

#include "Dialect/DialectInternal.h"

#include "dtensor-c/Layout.h"
#include "mlir-c/IR.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the propagated program says of a tensor value, read before any
 * type changes: one per (layout attribute, type), shared by the values that
 * have both (a program has many values and few layouts). */
typedef struct Value {
  MlirAttribute layout; /* #dtensor.layout */
  DtensorShardingSpec spec;
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK]; /* global */
  MlirType global, local; /* the global type and its padded local block */
} Value;

/* A value's entry in Part.values. */
typedef struct ValueEntry {
  const void *value;
  const Value *info;
} ValueEntry;

/* An interned Value, by (layout attribute, type). */
typedef struct Interned {
  const void *attr, *type;
  Value *info;
} Interned;

/* An index value computed once per function (cached()). */
#define MAX_EXTENTS 64
typedef struct Extent {
  int kind;
  int64_t size, chunk;
  int numAxes;
  int axes[DTENSOR_MAX_MESH_RANK];
  MlirValue value;
} Extent;

/* A redistribute inserted before: its operand and target layout. */
typedef struct Converted {
  const void *value, *dst;
  MlirValue result;
  MlirBlock block;
} Converted;

typedef struct Part {
  MlirContext ctx;
  MlirOperation func;
  DtensorMesh *mesh;
  char meshName[256];
  MlirIdentifier meshId; /* the same name, uniqued */
  DtTable values;        /* ValueEntry by value pointer */
  DtTable interned;      /* Interned by (layout attribute, type) */
  DtTable converted;     /* Converted by (value, target layout) */
  DtLayoutCache layouts;
  MlirOperation *ops;
  size_t numOps, capOps;
  MlirOperation entryFirst; /* where per-function index values go */
  int numExtents;
  Extent extents[MAX_EXTENTS];
  DtIds ids;                    /* the dialect's attribute identifiers */
  const DtDecisions *decisions; /* NULL: propagation's in attributes */
  bool failed;
} Part;

/// Emits an error at `op` and marks the pass failed.
void dtPartError(Part *p, MlirOperation op, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/// What the propagated program says of tensor value `v` (NULL if none).
const Value *dtPartValueOf(const Part *p, MlirValue v);

/// An index constant before `before`.
MlirValue dtPartIndexConst(Part *p, MlirOperation before, int64_t v);

/// The index op `name` (arith.addi, ...) of `a` and `b` before `before`.
MlirValue dtPartBinary(Part *p, MlirOperation before, const char *name,
                       MlirValue a, MlirValue b);

/// This device's coordinates on mesh axes `axes` (`numAxes` of them): a
/// dtensor.mesh_index with one index result per axis, before `at`.
MlirOperation dtPartMeshIndex(Part *p, MlirOperation at, int numAxes,
                              const int *axes);

/// Slices the inputs of `op`'s reductions over uneven sharded dims to the
/// device's real extent, so padding is never reduced (PartitionUneven.c).
void dtPartSliceReductions(Part *p, MlirOperation op);

/// Adds the device's block offset to the linalg.index ops of `op`'s
/// sharded loops (PartitionUneven.c).
void dtPartOffsetIndices(Part *p, MlirOperation op);

/// A dtensor.gather or scatter_add whose table (destination) is sharded
/// along a gathered dim: each index tensor less this device's block
/// offset, so it looks up (adds into) its own block (PartitionUneven.c).
void dtPartFixGather(Part *p, MlirOperation op);

/// The op families' fix-ups after the types become local (Partition.c;
/// rows of the family table in Rules.c): slice sizes, an expand_shape's
/// output shape, a dense constant's value.
void dtPartFixSliceSizes(Part *p, MlirOperation op);
void dtPartFixExpandShape(Part *p, MlirOperation op);

/// A tosa.reshape's shape or a tosa.slice's size operand: a new
/// tosa.const_shape of the local result type's dims.
void dtPartFixTosaShape(Part *p, MlirOperation op);
void dtPartFixConstant(Part *p, MlirOperation op);

#endif
