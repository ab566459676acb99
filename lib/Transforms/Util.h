/* Small helpers every pass file uses. */
#ifndef DTENSOR_LIB_TRANSFORMS_UTIL_H
#define DTENSOR_LIB_TRANSFORMS_UTIL_H

#include "mlir-c/IR.h"

#include <stdbool.h>
#include <string.h>

/// The attribute `name` of `op` (inherent or discardable), or null.
static inline MlirAttribute dtGetAttr(MlirOperation op, const char *name) {
  return mlirOperationGetAttributeByName(op,
                                         mlirStringRefCreateFromCString(name));
}

/// Whether `op` is named `name`. Inline, so the length of a literal name is
/// known when compiling (passes ask this of every op, several times).
static inline bool dtIsOp(MlirOperation op, const char *name) {
  MlirStringRef s = mlirIdentifierStr(mlirOperationGetName(op));
  size_t n = strlen(name);
  return s.length == n && !memcmp(s.data, name, n);
}

/// Removes the dtensor.* attributes of a function's arguments and results
/// (SingleDevice.c).
void dtStripSignatureAttrs(MlirOperation func);

/// Whether a function's signature shows it partitioned (`partitioned`: an
/// argument or result with dtensor.global_shape, which partition adds) or
/// not (a dtensor.layout without it); the first such one is named in
/// `where` ("argument 0", "result 1") (SingleDevice.c).
bool dtSignatureFind(MlirOperation func, bool partitioned, char where[32]);

#endif
