/* dtensor-approximate-math: every f32 math.tanh and math.exp is replaced,
 * in place, by the straight-line arith code of its function in
 * MathLib.mlir (embedded at build time), so that the loops computing
 * gelu, softmax or tanh activations vectorize (libm's tanhf and expf are
 * scalar calls LLVM cannot vectorize). Ops of other types (f64, vectors,
 * f16/bf16) stay as they are. Accuracy: docs/runtime.md. */
#include "PassDef.h"
#include "Table.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/Math.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char dtMathLibSource[];

/* The ops replaced and their functions in MathLib.mlir, in the order they
 * are expanded: a function may use ops expanded after it (tanh uses exp). */
static const struct {
  const char *op, *function;
} kApproximated[] = {{"math.tanh", "tanh"}, {"math.exp", "exp"}};

typedef struct Collect {
  const char *name;
  DtOpList ops;
  bool failed;
} Collect;

static MlirWalkResult collect(MlirOperation op, void *userData) {
  Collect *c = userData;
  if (!dtIsOp(op, c->name) || mlirOperationGetNumOperands(op) != 1 ||
      mlirOperationGetNumResults(op) != 1 ||
      !mlirTypeIsAF32(mlirValueGetType(mlirOperationGetResult(op, 0))))
    return MlirWalkResultAdvance;
  if (!dtOpListPush(&c->ops, op)) {
    c->failed = true;
    return MlirWalkResultInterrupt;
  }
  return MlirWalkResultAdvance;
}

/* The body of library function `name`. */
static MlirBlock functionBody(MlirModule lib, const char *name) {
  MlirBlock top = mlirModuleGetBody(lib);
  for (MlirOperation f = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f)) {
    MlirStringRef sym = mlirStringAttrGetValue(dtGetAttr(f, "sym_name"));
    if (sym.length == strlen(name) && !memcmp(sym.data, name, sym.length))
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

/* Replaces `op` by a copy of `body` (its argument bound to op's operand). */
static bool expand(MlirOperation op, MlirBlock body, ValueMap *map) {
  map->count = 0;
  if (!mapAdd(map, mlirBlockGetArgument(body, 0),
              mlirOperationGetOperand(op, 0)))
    return false;
  MlirBlock block = mlirOperationGetBlock(op);
  for (MlirOperation b = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(b); b = mlirOperationGetNextInBlock(b)) {
    if (dtIsOp(b, "func.return")) {
      mlirValueReplaceAllUsesOfWith(
          mlirOperationGetResult(op, 0),
          mapGet(map, mlirOperationGetOperand(b, 0)));
      mlirOperationDestroy(op);
      return true;
    }
    MlirOperation copy = mlirOperationClone(b);
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(copy); ++i)
      mlirOperationSetOperand(copy, i,
                              mapGet(map, mlirOperationGetOperand(copy, i)));
    mlirBlockInsertOwnedOperationBefore(block, op, copy);
    for (intptr_t i = 0; i < mlirOperationGetNumResults(b); ++i)
      if (!mapAdd(map, mlirOperationGetResult(b, i),
                  mlirOperationGetResult(copy, i)))
        return false;
  }
  return false;
}

static bool runApproximateMath(MlirOperation root,
                               const DtPassOptions *options) {
  (void)options;
  MlirContext ctx = mlirOperationGetContext(root);
  MlirModule lib =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(dtMathLibSource));
  if (mlirModuleIsNull(lib)) {
    mlirEmitError(mlirOperationGetLocation(root),
                  "dtensor-approximate-math: its math library does not parse");
    return false;
  }
  bool ok = true;
  ValueMap map = {NULL, NULL, 0, 0};
  size_t kinds = sizeof(kApproximated) / sizeof(kApproximated[0]);
  for (size_t k = 0; k < kinds && ok; ++k) {
    MlirBlock body = functionBody(lib, kApproximated[k].function);
    Collect c = {kApproximated[k].op, {NULL, 0, 0}, false};
    mlirOperationWalk(root, collect, &c, MlirWalkPreOrder);
    ok = !c.failed && !mlirBlockIsNull(body);
    for (size_t i = 0; i < c.ops.count && ok; ++i)
      ok = expand(c.ops.ops[i], body, &map);
    free(c.ops.ops);
  }
  free(map.from);
  free(map.to);
  mlirModuleDestroy(lib);
  if (!ok)
    mlirEmitError(mlirOperationGetLocation(root),
                  "dtensor-approximate-math: out of memory");
  return ok;
}

const DtPassDef dtApproximateMathPass = {
    .info = {"dtensor-approximate-math",
             "Replace f32 math.tanh and math.exp by straight-line "
             "polynomial code (vectorizable; about 1e-7 relative error)",
             0, NULL},
    .verifyFirst = false,
    .run = runApproximateMath,
    .numDependentDialects = 3,
    .dependentDialects = {mlirGetDialectHandle__arith__,
                          mlirGetDialectHandle__math__,
                          mlirGetDialectHandle__func__},
};
