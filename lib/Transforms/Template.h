/* Ops replaced by a copy of a function body written as MLIR text (a
 * template): dtensor-approximate-math's math functions, the
 * decomposition of linalg.softmax; and code inserted from a template
 * (dtensor-autodiff's adjoints). */
#ifndef DTENSOR_LIB_TRANSFORMS_TEMPLATE_H
#define DTENSOR_LIB_TRANSFORMS_TEMPLATE_H

#include "mlir-c/IR.h"

#include <stdbool.h>

/// The body of function `name` in `module` (null if there is none).
MlirBlock dtTemplateFunction(MlirModule module, const char *name);

/// Replaces `op` by a copy of `body` inserted before it: the body's
/// arguments bound to `args` (as many as it has), op's results to the
/// operands of its func.return. The body's ops may have regions, which may
/// read values defined inside them or at the body's top level (arguments
/// included: they read the bound values).
/// Returns false (op untouched or partly expanded) when out of memory.
bool dtTemplateExpand(MlirOperation op, MlirBlock body, const MlirValue *args);

/// Parses the template `t` (a module holding function `name`) and replaces
/// `op` by a copy of that function's body (dtTemplateExpand) with `args`;
/// false after a located error at `op`: it "cannot be `what`" because the
/// template did not fit or parse, or memory ran out.
struct DtBuf;
bool dtTemplateReplace(MlirOperation op, const struct DtBuf *t,
                       const char *name, const MlirValue *args,
                       const char *what);

/// Writes "func.func @`name`(%`args[0]`: <operand 0's type>, ...) ->
/// <result 0's type> {" to `t`: the header of a template that replaces
/// `op` (one name per operand).
void dtTemplateSignature(struct DtBuf *t, const char *name, MlirOperation op,
                         const char *const *args);

/// Inserts a copy of `body` before `before` (at `loc`), its arguments bound
/// to `args`, and stores the values its func.return returns in `results`
/// (the first `maxResults`). False when out of memory.
bool dtTemplateInline(MlirOperation before, MlirLocation loc, MlirBlock body,
                      const MlirValue *args, MlirValue *results,
                      intptr_t maxResults);

#endif
