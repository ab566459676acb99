/* dtensor-expand-f8: f8 arithmetic computed in f32 and rounded. Upstream's
 * arith-emulate-unsupported-floats first rewrites every arith op on
 * f8E4M3FN or f8E5M2 as the f32 op between an arith.extf and an
 * arith.truncf; then each extf from and truncf to those types becomes the
 * bit code of its function in MathLib.mlir (f8 values are bytes in LLVM,
 * which has no f8 type). A conversion between f8 and another float goes
 * through f32: exact from f8 and from f16/bf16; from f64 rounded twice.
 * In dtensor-to-llvm and dtensor-to-nvvm (the bit code is plain arith). */
#include "PassDef.h"
#include "Template.h"
#include "Util.h"

#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/Math.h"
#include "mlir-c/Pass.h"

#include <stdlib.h>
#include <string.h>

extern const char dtMathLibSource[];

/* The f8 types with a conversion in MathLib.mlir (extf_<name>,
 * truncf_<name>). */
static const char *f8Name(MlirType t) {
  if (mlirTypeIsAFloat8E4M3FN(t))
    return "f8E4M3FN";
  if (mlirTypeIsAFloat8E5M2(t))
    return "f8E5M2";
  return NULL;
}

typedef struct Found {
  DtOpList ops;
  bool failed;
} Found;

/* Scalar extf from and truncf to an f8 type. */
static MlirWalkResult collect(MlirOperation op, void *userData) {
  Found *f = userData;
  bool ext = dtIsOp(op, "arith.extf"), trunc = dtIsOp(op, "arith.truncf");
  if (!ext && !trunc)
    return MlirWalkResultAdvance;
  MlirType from = mlirValueGetType(mlirOperationGetOperand(op, 0));
  MlirType to = mlirValueGetType(mlirOperationGetResult(op, 0));
  if (!f8Name(ext ? from : to))
    return MlirWalkResultAdvance;
  if (!dtOpListPush(&f->ops, op)) {
    f->failed = true;
    return MlirWalkResultInterrupt;
  }
  return MlirWalkResultAdvance;
}

/* `name` (a one-operand cast) of `v` to `to`, before `before`. */
static MlirValue cast(MlirOperation before, const char *name, MlirValue v,
                      MlirType to) {
  MlirOperationState st = mlirOperationStateGet(
      mlirStringRefCreateFromCString(name), mlirOperationGetLocation(before));
  mlirOperationStateAddOperands(&st, 1, &v);
  mlirOperationStateAddResults(&st, 1, &to);
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(before), before,
                                      op);
  return mlirOperationGetResult(op, 0);
}

/* `v` (a float) as f32: extended, or truncated from f64. */
static MlirValue toF32(MlirOperation before, MlirValue v) {
  MlirType t = mlirValueGetType(v);
  MlirType f32 = mlirF32TypeGet(mlirTypeGetContext(t));
  if (mlirTypeEqual(t, f32))
    return v;
  return cast(before, mlirTypeIsAF64(t) ? "arith.truncf" : "arith.extf", v,
              f32);
}

/* Replaces the f8 conversion `op` by its function's code (through f32). */
static bool expand(MlirModule lib, MlirOperation op) {
  bool ext = dtIsOp(op, "arith.extf");
  MlirValue in = mlirOperationGetOperand(op, 0);
  MlirValue out = mlirOperationGetResult(op, 0);
  MlirType f8 = mlirValueGetType(ext ? in : out);
  MlirType to = mlirValueGetType(out);
  MlirType f32 = mlirF32TypeGet(mlirTypeGetContext(to));
  char name[32];
  strcpy(name, ext ? "extf_" : "truncf_");
  strcat(name, f8Name(f8));
  MlirBlock body = dtTemplateFunction(lib, name);
  if (mlirBlockIsNull(body))
    return false;
  MlirValue arg = ext ? in : toF32(op, in), result;
  if (!dtTemplateInline(op, mlirOperationGetLocation(op), body, &arg, &result,
                        1))
    return false;
  /* From f8 to f16, bf16 or f64: the exact f32 value, rounded or widened. */
  if (ext && !mlirTypeEqual(to, f32))
    result = cast(op, mlirTypeIsAF64(to) ? "arith.extf" : "arith.truncf",
                  result, to);
  mlirValueReplaceAllUsesOfWith(out, result);
  mlirOperationDestroy(op);
  return true;
}

static bool runExpandF8(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  MlirContext ctx = mlirOperationGetContext(root);
  /* The arithmetic first: each op on f8 becomes the f32 op between
   * conversions. */
  bool ok = dtRunUpstream(
      root, "func.func(arith-emulate-unsupported-floats{source-types="
            "f8E4M3FN,f8E5M2 target-type=f32})");
  if (!ok) {
    mlirEmitError(mlirOperationGetLocation(root),
                  "dtensor-expand-f8: arith-emulate-unsupported-floats failed");
    return false;
  }
  Found f = {{NULL, 0, 0}, false};
  mlirOperationWalk(root, collect, &f, MlirWalkPreOrder);
  if (f.ops.count == 0 || f.failed) {
    free(f.ops.ops);
    if (f.failed)
      mlirEmitError(mlirOperationGetLocation(root),
                    "dtensor-expand-f8: out of memory");
    return !f.failed;
  }
  MlirModule lib = mlirModuleCreateParse(
      ctx, mlirStringRefCreateFromCString(dtMathLibSource));
  ok = !mlirModuleIsNull(lib);
  for (size_t i = 0; i < f.ops.count && ok; ++i)
    ok = expand(lib, f.ops.ops[i]);
  free(f.ops.ops);
  if (!mlirModuleIsNull(lib))
    mlirModuleDestroy(lib);
  if (!ok)
    mlirEmitError(mlirOperationGetLocation(root),
                  "dtensor-expand-f8: its conversions did not parse, or "
                  "memory ran out");
  return ok;
}

const DtPassDef dtExpandF8Pass = {
    .info = {"dtensor-expand-f8",
             "Compute f8E4M3FN and f8E5M2 arithmetic in f32, rounded to "
             "nearest even (upstream's float emulation, then each conversion "
             "as bit code)",
             0, NULL},
    .verifyFirst = false,
    .run = runExpandF8,
    .numDependentDialects = 3,
    .dependentDialects = {mlirGetDialectHandle__arith__,
                          mlirGetDialectHandle__math__,
                          mlirGetDialectHandle__func__},
};
