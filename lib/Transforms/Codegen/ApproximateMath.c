/* dtensor-approximate-math: every f32 math.tanh and math.exp is replaced,
 * in place, by the straight-line arith code of its function in
 * MathLib.mlir (embedded at build time), so that the loops computing
 * gelu, softmax or tanh activations vectorize (libm's tanhf and expf are
 * scalar calls LLVM cannot vectorize). Ops of other types (f64, vectors,
 * f16/bf16) stay as they are. Accuracy: docs/runtime.md. */
#include "PassDef.h"
#include "Template.h"
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
 * are expanded: a function may use ops expanded after it. */
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

static bool runApproximateMath(MlirOperation root,
                               const DtPassOptions *options) {
  (void)options;
  MlirContext ctx = mlirOperationGetContext(root);
  MlirModule lib = mlirModuleCreateParse(
      ctx, mlirStringRefCreateFromCString(dtMathLibSource));
  if (mlirModuleIsNull(lib)) {
    mlirEmitError(mlirOperationGetLocation(root),
                  "dtensor-approximate-math: its math library does not parse");
    return false;
  }
  bool ok = true;
  size_t kinds = sizeof(kApproximated) / sizeof(kApproximated[0]);
  for (size_t k = 0; k < kinds && ok; ++k) {
    MlirBlock body = dtTemplateFunction(lib, kApproximated[k].function);
    Collect c = {kApproximated[k].op, {NULL, 0, 0}, false};
    mlirOperationWalk(root, collect, &c, MlirWalkPreOrder);
    ok = !c.failed && !mlirBlockIsNull(body);
    for (size_t i = 0; i < c.ops.count && ok; ++i) {
      MlirValue x = mlirOperationGetOperand(c.ops.ops[i], 0);
      ok = dtTemplateExpand(c.ops.ops[i], body, &x);
    }
    free(c.ops.ops);
  }
  mlirModuleDestroy(lib);
  if (!ok)
    mlirEmitError(mlirOperationGetLocation(root),
                  "dtensor-approximate-math: out of memory");
  return ok;
}

const DtPassDef dtApproximateMathPass = {
    .info = {"dtensor-approximate-math",
             "Replace f32 math.tanh and math.exp by straight-line "
             "polynomial code (vectorizable; exp within 1 ulp, tanh 5)",
             0, NULL},
    .verifyFirst = false,
    .run = runApproximateMath,
    .numDependentDialects = 3,
    .dependentDialects = {mlirGetDialectHandle__arith__,
                          mlirGetDialectHandle__math__,
                          mlirGetDialectHandle__func__},
};
