/* Parsing a source buffer into a module the way mlir-opt does: a single
 * top-level builtin.module is used as is; anything else (several top-level
 * ops, or one that is not a module) is wrapped in an implicit module.
 *
 * mlirOperationCreateParse names locations after the buffer but accepts only
 * one top-level op; mlirModuleCreateParse accepts any number (with attribute
 * aliases and resources, exactly as mlir-opt) but names the buffer "". So the
 * text is parsed by the first and, if it holds several top-level ops, again
 * by the second, whose locations are then renamed. That error is only raised
 * after the whole text parsed, so every other error has been reported by the
 * first parse, and the second one emits nothing. */
#include "DialectInternal.h"

#include "mlir-c/Diagnostics.h"

#include <string.h>

static const char kManyOps[] =
    "source must contain a single top-level operation";

typedef struct Parse {
  MlirContext ctx;
  MlirStringRef sourceName;
  bool manyOps;
} Parse;

typedef struct Prefix {
  char text[sizeof(kManyOps)];
  size_t length;
} Prefix;

static void keepPrefix(MlirStringRef piece, void *userData) {
  Prefix *p = userData;
  size_t room = sizeof(p->text) - 1 - p->length;
  size_t n = piece.length < room ? piece.length : room;
  memcpy(p->text + p->length, piece.data, n);
  p->length += n;
}

/* Swallows the first parse's "several top-level ops" error. */
static MlirLogicalResult swallowManyOps(MlirDiagnostic d, void *userData) {
  Parse *parse = userData;
  Prefix prefix = {{0}, 0};
  mlirDiagnosticPrint(d, keepPrefix, &prefix);
  if (prefix.length != sizeof(kManyOps) - 1 ||
      memcmp(prefix.text, kManyOps, prefix.length))
    return mlirLogicalResultFailure();
  parse->manyOps = true;
  return mlirLogicalResultSuccess();
}

/* `loc` with the file "-" or "" renamed to the source's name, or a null location if
 * it names another file (one the user wrote in a loc(...)). */
static MlirLocation renamed(const Parse *p, MlirLocation loc) {
  if (!mlirLocationIsAFileLineColRange(loc))
    return (MlirLocation){NULL};
  MlirIdentifier file = mlirLocationFileLineColRangeGetFilename(loc);
  MlirStringRef name = mlirIdentifierStr(file);
  if (name.length > 1 || (name.length == 1 && name.data[0] != '-'))
    return (MlirLocation){NULL};
  return mlirLocationFileLineColRangeGet(
      p->ctx, p->sourceName,
      (unsigned)mlirLocationFileLineColRangeGetStartLine(loc),
      (unsigned)mlirLocationFileLineColRangeGetStartColumn(loc),
      (unsigned)mlirLocationFileLineColRangeGetEndLine(loc),
      (unsigned)mlirLocationFileLineColRangeGetEndColumn(loc));
}

static MlirWalkResult renameOp(MlirOperation op, void *userData) {
  Parse *p = userData;
  MlirLocation fixed = renamed(p, mlirOperationGetLocation(op));
  if (!mlirLocationIsNull(fixed))
    mlirOperationSetLocation(op, fixed);
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r) {
    MlirRegion region = mlirOperationGetRegion(op, r);
    for (MlirBlock b = mlirRegionGetFirstBlock(region); !mlirBlockIsNull(b);
         b = mlirBlockGetNextInRegion(b))
      for (intptr_t a = 0; a < mlirBlockGetNumArguments(b); ++a) {
        MlirValue arg = mlirBlockGetArgument(b, a);
        MlirLocation argFixed = renamed(p, mlirValueGetLocation(arg));
        if (!mlirLocationIsNull(argFixed))
          mlirBlockArgumentSetLocation(arg, argFixed);
      }
  }
  return MlirWalkResultAdvance;
}

MlirOperation dtensorSourceParse(MlirContext ctx, MlirStringRef source,
                                 MlirStringRef sourceName) {
  Parse parse = {ctx, sourceName, false};
  MlirDiagnosticHandlerID handler =
      mlirContextAttachDiagnosticHandler(ctx, swallowManyOps, &parse, NULL);
  MlirOperation op = mlirOperationCreateParse(ctx, source, sourceName);
  mlirContextDetachDiagnosticHandler(ctx, handler);
  if (!mlirOperationIsNull(op)) {
    if (dtOpIsA(op, "builtin.module"))
      return op;
    MlirModule module = mlirModuleCreateEmpty(mlirLocationUnknownGet(ctx));
    mlirBlockAppendOwnedOperation(mlirModuleGetBody(module), op);
    return mlirModuleGetOperation(module);
  }
  if (!parse.manyOps)
    return op;
  MlirModule module = mlirModuleCreateParse(ctx, source);
  if (mlirModuleIsNull(module)) {
    mlirEmitError(mlirLocationUnknownGet(ctx),
                  "the source parsed once but not a second time");
    return (MlirOperation){NULL};
  }
  MlirOperation result = mlirModuleGetOperation(module);
  mlirOperationWalk(result, renameOp, &parse, MlirWalkPreOrder);
  mlirOperationSetLocation(result, mlirLocationUnknownGet(ctx));
  return result;
}
