/* The bytes a per-device function holds at its peak (Memory.c): what
 * dtensor-report prints and checks against a budget, and what automatic
 * sharding will weigh. */
#ifndef DTENSOR_LIB_TRANSFORMS_INSPECT_MEMORY_H
#define DTENSOR_LIB_TRANSFORMS_INSPECT_MEMORY_H

#include "mlir-c/IR.h"

#include <stdbool.h>
#include <stdint.h>

enum { DT_MEMORY_LARGEST = 4 };

/// A function's peak: its arguments (parameters, optimizer state, inputs:
/// the caller holds them throughout) plus the tensors its ops made that
/// are still to be used, at the op where their sum is largest. A
/// tensor.empty holds nothing, nor does a tensor constant (the module's
/// data: bufferization makes it a global); a destination-style op (linalg)
/// whose init
/// dies there writes its result into the init's buffer, as bufferization
/// does; a collective's result is
/// a buffer of its own (counted in `collectiveBytes` too); values made
/// inside a loop or branch count while its op runs. The runtime's own
/// staging (the shm backend's exchange slots) is not a value and does not
/// count.
typedef struct DtMemoryPeak {
  int64_t peakBytes;     /* arguments + live values at the peak */
  int64_t argumentBytes; /* the function's tensor arguments */
  /* Of them, by their dtensor.role (a training step's): parameters,
   * optimizer state (all 0 without roles). */
  int64_t parameterBytes, optimizerBytes;
  int64_t collectiveBytes; /* of the live values: collectives' results */
  MlirOperation at;        /* the op at the peak; null: arguments alone */
  /* The largest values live at the peak (arguments included), largest
   * first. */
  int numLargest;
  MlirValue largest[DT_MEMORY_LARGEST];
  int64_t largestBytes[DT_MEMORY_LARGEST];
} DtMemoryPeak;

/// The peak of func.func `func` (with a body); false when out of memory.
bool dtMemoryPeakOf(MlirOperation func, DtMemoryPeak *out);

/// The largest peak of the functions with a body in `module`, in `*out`,
/// and its function in `*func`; false when there is none.
bool dtMemoryLargestPeak(MlirOperation module, DtMemoryPeak *out,
                         MlirOperation *func);

/// The bytes result `result` of `op` holds while it lives (0: nothing,
/// as a tensor.empty's).
int64_t dtMemoryResultBytes(MlirOperation op, intptr_t result);

/// Whether `op` writes a result into the buffer of its operand `operand`
/// (a linalg op's init): where the operand dies at `op`, the two are one
/// buffer.
bool dtMemoryInitInPlace(MlirOperation op, intptr_t operand);

/// The most bytes the values made inside `op`'s regions hold at once
/// while it runs (0 without regions); `*oom` set when out of memory.
int64_t dtMemoryInnerPeak(MlirOperation op, bool *oom);

/// The bytes of a value of type `t`: a ranked tensor of static shape and
/// a known element type; 0 otherwise.
int64_t dtTensorBytes(MlirType t);

#endif
