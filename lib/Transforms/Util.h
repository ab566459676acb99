/* Small helpers every pass file uses. */
#ifndef DTENSOR_LIB_TRANSFORMS_UTIL_H
#define DTENSOR_LIB_TRANSFORMS_UTIL_H

#include "mlir-c/IR.h"

#include <stdbool.h>

/// The attribute `name` of `op` (inherent or discardable), or null.
static inline MlirAttribute dtGetAttr(MlirOperation op, const char *name) {
  return mlirOperationGetAttributeByName(op,
                                         mlirStringRefCreateFromCString(name));
}

/// Whether `op` is named `name`.
static inline bool dtIsOp(MlirOperation op, const char *name) {
  return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)),
                            mlirStringRefCreateFromCString(name));
}

#endif
