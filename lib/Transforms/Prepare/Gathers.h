/* Gathers and their lowering (Gathers.c, LowerGathers.c). */
#ifndef DTENSOR_LIB_TRANSFORMS_GATHERS_H
#define DTENSOR_LIB_TRANSFORMS_GATHERS_H

#include "mlir-c/IR.h"

#include <stdbool.h>

/// Makes a dtensor.gather of each tensor.gather and tosa.gather under
/// `root`, and (`hoist`) of each tensor.extract in a linalg.generic body
/// that reads a tensor from outside the generic by computed indices; the
/// generic then reads the gather's result (or, when every index is a loop
/// of its own, the tensor itself) as an input. False after a located error.
bool dtGathersMake(MlirOperation root, bool hoist);

/// Whether dtGathersMake(root, `hoist`) has work at `op` (one of the ops
/// it makes a dtensor.gather of, or a generic it hoists from).
bool dtGathersFinds(MlirOperation op, bool hoist);

/// Lowers every dtensor.gather and dtensor.scatter_add under `root` (and
/// tensor.gather) to linalg and scf on tensors; false after a located
/// error.
bool dtLowerGathers(MlirOperation root);

#endif
