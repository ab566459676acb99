/* Parsing a source buffer into a module the way mlir-opt does: a single
 * top-level builtin.module is used as is; anything else (several top-level
 * ops, or one that is not a module) is wrapped in an implicit module.
 *
 * mlirOperationCreateParse keeps the buffer's name in locations but accepts
 * only one top-level op, so the wrapper `module {` is written over the
 * first line when it carries no tokens (blank or comment-only, as in every
 * test file and every --split-input-file chunk after the first): every line
 * and column of the user's text then stays where it was. A text whose first
 * line has a token is parsed as is, which handles one top-level op. */
#include "DialectInternal.h"

#include "mlir-c/Diagnostics.h"

#include <stdlib.h>
#include <string.h>

/* Whether the first line is blank or comment-only: the first token comes
 * later, so the wrapper can take that line's place. */
static bool firstLineIsFree(const char *text, size_t length) {
  size_t p = 0;
  while (p < length && (text[p] == ' ' || text[p] == '\t' || text[p] == '\r'))
    ++p;
  return p == length || text[p] == '\n' ||
         (p + 1 < length && text[p] == '/' && text[p + 1] == '/');
}

static MlirOperation wrapInModule(MlirContext ctx, MlirOperation op) {
  MlirModule module = mlirModuleCreateEmpty(mlirLocationUnknownGet(ctx));
  mlirBlockAppendOwnedOperation(mlirModuleGetBody(module), op);
  return mlirModuleGetOperation(module);
}

MlirOperation dtensorSourceParse(MlirContext ctx, MlirStringRef source,
                                 MlirStringRef sourceName) {
  if (!firstLineIsFree(source.data, source.length)) {
    /* No room for a wrapper: this parses any single top-level op. */
    MlirOperation op = mlirOperationCreateParse(ctx, source, sourceName);
    if (mlirOperationIsNull(op) || dtOpIsA(op, "builtin.module"))
      return op;
    return wrapInModule(ctx, op);
  }
  static const char kOpen[] = "module {", kClose[] = "\n}\n";
  size_t lineEnd = 0;
  while (lineEnd < source.length && source.data[lineEnd] != '\n')
    ++lineEnd;
  size_t headLength = strlen(kOpen);
  size_t tailLength = source.length - lineEnd;
  size_t total = headLength + tailLength + strlen(kClose);
  char *text = malloc(total + 1);
  if (!text) {
    mlirEmitError(mlirLocationUnknownGet(ctx), "out of memory reading input");
    return (MlirOperation){NULL};
  }
  memcpy(text, kOpen, strlen(kOpen));
  memcpy(text + headLength, source.data + lineEnd, tailLength);
  memcpy(text + headLength + tailLength, kClose, strlen(kClose) + 1);
  MlirOperation wrapper =
      mlirOperationCreateParse(ctx, (MlirStringRef){text, total}, sourceName);
  free(text);
  if (mlirOperationIsNull(wrapper))
    return wrapper;
  /* An explicit top-level module is the result itself. */
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(wrapper, 0));
  MlirOperation first = mlirBlockGetFirstOperation(body);
  if (!mlirOperationIsNull(first) && dtOpIsA(first, "builtin.module") &&
      mlirOperationIsNull(mlirOperationGetNextInBlock(first))) {
    mlirOperationRemoveFromParent(first);
    mlirOperationDestroy(wrapper);
    return first;
  }
  return wrapper;
}
