/* Expanding templates (Template.h). */
#include "Template.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"

#include <stdlib.h>
#include <string.h>

MlirBlock dtTemplateFunction(MlirModule module, const char *name) {
  MlirBlock top = mlirModuleGetBody(module);
  for (MlirOperation f = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f)) {
    MlirAttribute sym = dtGetAttr(f, "sym_name");
    if (mlirAttributeIsNull(sym) || !mlirAttributeIsAString(sym))
      continue;
    MlirStringRef s = mlirStringAttrGetValue(sym);
    if (s.length == strlen(name) && !memcmp(s.data, name, s.length))
      return mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0));
  }
  return (MlirBlock){NULL};
}

/* Old -> new values while one body is copied. */
typedef struct ValueMap {
  MlirValue *from, *to;
  size_t count, capacity;
} ValueMap;

static bool mapAdd(ValueMap *m, MlirValue from, MlirValue to) {
  if (m->count == m->capacity) {
    size_t cap = m->capacity ? 2 * m->capacity : 64;
    MlirValue *f = realloc(m->from, cap * sizeof(MlirValue));
    if (f)
      m->from = f;
    MlirValue *t = f ? realloc(m->to, cap * sizeof(MlirValue)) : NULL;
    if (!t)
      return false;
    m->to = t;
    m->capacity = cap;
  }
  m->from[m->count] = from;
  m->to[m->count++] = to;
  return true;
}

static MlirValue mapGet(const ValueMap *m, MlirValue v) {
  for (size_t i = m->count; i-- > 0;)
    if (mlirValueEqual(m->from[i], v))
      return m->to[i];
  return v;
}

/* The ops inside a copied op's regions may read the template's top-level
 * values (its arguments, constants): they read the copies. */
typedef struct Remap {
  const ValueMap *map;
  MlirOperation top;
} Remap;

static MlirWalkResult remapNested(MlirOperation op, void *userData) {
  const Remap *r = userData;
  if (mlirOperationEqual(op, r->top))
    return MlirWalkResultAdvance;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    MlirValue v = mlirOperationGetOperand(op, i);
    MlirValue to = mapGet(r->map, v);
    if (!mlirValueEqual(v, to))
      mlirOperationSetOperand(op, i, to);
  }
  return MlirWalkResultAdvance;
}

/* Copies `body` before `before` with its arguments bound to `args`; the
 * values its func.return returns go to `results` (as many as it returns,
 * at most `maxResults`). `loc`: the copies' location. */
static bool inlineBody(MlirOperation before, MlirLocation loc, MlirBlock body,
                       const MlirValue *args, MlirValue *results,
                       intptr_t maxResults) {
  ValueMap map = {NULL, NULL, 0, 0};
  bool ok = true;
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(body) && ok; ++i)
    ok = mapAdd(&map, mlirBlockGetArgument(body, i), args[i]);
  MlirBlock block = mlirOperationGetBlock(before);
  for (MlirOperation b = mlirBlockGetFirstOperation(body);
       ok && !mlirOperationIsNull(b); b = mlirOperationGetNextInBlock(b)) {
    if (dtIsOp(b, "func.return")) {
      for (intptr_t r = 0; r < mlirOperationGetNumOperands(b); ++r)
        if (r < maxResults)
          results[r] = mapGet(&map, mlirOperationGetOperand(b, r));
      break;
    }
    MlirOperation copy = mlirOperationClone(b);
    mlirOperationSetLocation(copy, loc);
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(copy); ++i)
      mlirOperationSetOperand(copy, i,
                              mapGet(&map, mlirOperationGetOperand(copy, i)));
    if (mlirOperationGetNumRegions(copy) > 0) {
      Remap r = {&map, copy};
      mlirOperationWalk(copy, remapNested, &r, MlirWalkPreOrder);
    }
    mlirBlockInsertOwnedOperationBefore(block, before, copy);
    for (intptr_t i = 0; i < mlirOperationGetNumResults(b) && ok; ++i)
      ok = mapAdd(&map, mlirOperationGetResult(b, i),
                  mlirOperationGetResult(copy, i));
  }
  free(map.from);
  free(map.to);
  return ok;
}

bool dtTemplateExpand(MlirOperation op, MlirBlock body, const MlirValue *args) {
  MlirValue results[64];
  intptr_t n = mlirOperationGetNumResults(op);
  /* Errors about the copy point at what it replaces. */
  if (n > 64 ||
      !inlineBody(op, mlirOperationGetLocation(op), body, args, results, n))
    return false;
  for (intptr_t r = 0; r < n; ++r)
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, r), results[r]);
  mlirOperationDestroy(op);
  return true;
}

void dtTemplateSignature(DtBuf *t, const char *name, MlirOperation op,
                         const char *const *args) {
  char ty[512];
  dtBufPrintf(t, "func.func @%s(", name);
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    dtTypePrint(mlirValueGetType(mlirOperationGetOperand(op, i)), ty,
                sizeof(ty));
    dtBufPrintf(t, "%s%%%s: %s", i ? ", " : "", args[i], ty);
  }
  dtTypePrint(mlirValueGetType(mlirOperationGetResult(op, 0)), ty, sizeof(ty));
  dtBufPrintf(t, ") -> %s {\n", ty);
}

bool dtTemplateReplace(MlirOperation op, const DtBuf *t, const char *name,
                       const MlirValue *args, const char *what) {
  MlirModule tmpl =
      t->length < t->capacity
          ? mlirModuleCreateParse(mlirOperationGetContext(op),
                                  mlirStringRefCreateFromCString(t->data))
          : (MlirModule){NULL};
  if (mlirModuleIsNull(tmpl)) {
    dtOpError(op, "cannot be %s (its template did not parse)", what);
    return false;
  }
  bool ok = dtTemplateExpand(op, dtTemplateFunction(tmpl, name), args);
  mlirModuleDestroy(tmpl);
  if (!ok)
    dtOpError(op, "cannot be %s: out of memory", what);
  return ok;
}

bool dtTemplateInline(MlirOperation before, MlirLocation loc, MlirBlock body,
                      const MlirValue *args, MlirValue *results,
                      intptr_t maxResults) {
  return inlineBody(before, loc, body, args, results, maxResults);
}
