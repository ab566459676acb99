/* Private helpers shared by the dialect and the passes. */
#ifndef DTENSOR_LIB_DIALECT_INTERNAL_H
#define DTENSOR_LIB_DIALECT_INTERNAL_H

#include "dtensor-c/Dialect.h"

#include <stdarg.h>

/// Prints `attr` into `buffer` (NUL-terminated, truncated to `capacity`);
/// returns the full length it would need.
size_t dtAttributePrint(MlirAttribute attr, char *buffer, size_t capacity);

/// Prints `type` into `buffer` as dtAttributePrint does.
size_t dtTypePrint(MlirType type, char *buffer, size_t capacity);

/// Emits an error with a printf-formatted message at `loc`.
void dtEmitError(MlirLocation loc, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// Returns whether `op` is named `name`.
bool dtOpIsA(MlirOperation op, const char *name);

/// Returns the nearest builtin.module enclosing or being `op` (null if none).
MlirOperation dtEnclosingModule(MlirOperation op);

/// Declares `mesh` as `dtensor.mesh` @`name` at the top of `module`, at
/// `loc`; returns the op.
MlirOperation dtMeshOpCreate(MlirOperation module, MlirLocation loc,
                             const char *name, const DtensorMesh *mesh);

#endif
