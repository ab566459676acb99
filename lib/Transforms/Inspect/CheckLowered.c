/* dtensor-check-lowered: the last step of dtensor-to-llvm. Every op left
 * that is not in the LLVM dialect (an op the code generation has no
 * lowering for, or a conversion cast standing for one) is reported at its
 * location, naming it, and the pass fails — instead of LLVM's translation
 * failing later on a builtin.unrealized_conversion_cast or a "missing
 * LLVMTranslationDialectInterface". */
#include "PassDef.h"

#include "Util.h"
#include "mlir-c/BuiltinTypes.h"

#include "mlir-c/Diagnostics.h"

#include <stdio.h>
#include <string.h>

#define MAX_REPORTS 10

typedef struct Check {
  int reported;
  char first[MAX_REPORTS][128]; /* op names reported, one error each */
} Check;

static bool seen(Check *c, MlirStringRef name) {
  for (int i = 0; i < c->reported && i < MAX_REPORTS; ++i)
    if (strlen(c->first[i]) == name.length &&
        !memcmp(c->first[i], name.data, name.length))
      return true;
  return false;
}

static MlirWalkResult check(MlirOperation op, void *userData) {
  Check *c = userData;
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  /* OpenMP's ops (threads=true) are translated to LLVM IR as they are. */
  if (dtIsOpIn(op, "llvm.") || dtIsOpIn(op, "omp.") ||
      dtIsOp(op, "builtin.module") || seen(c, name))
    return MlirWalkResultAdvance;
  char message[512];
  /* An op left on an element type the code generation has no arithmetic
   * for (f8 floats but f8E4M3FN and f8E5M2, integers narrower than i8 but
   * i1): name the type. */
  char unsupported[64] = "";
  for (intptr_t i = 0;
       i < mlirOperationGetNumOperands(op) + mlirOperationGetNumResults(op) &&
       !unsupported[0];
       ++i) {
    MlirType t = mlirValueGetType(
        i < mlirOperationGetNumOperands(op)
            ? mlirOperationGetOperand(op, i)
            : mlirOperationGetResult(op, i - mlirOperationGetNumOperands(op)));
    if (mlirTypeIsAShaped(t))
      t = mlirShapedTypeGetElementType(t);
    /* f8E4M3FN and f8E5M2 are bytes by then (dtensor-expand-f8). */
    bool narrowFloat = mlirTypeIsAFloat(t) && mlirFloatTypeGetWidth(t) < 16 &&
                       !mlirTypeIsAFloat8E4M3FN(t) && !mlirTypeIsAFloat8E5M2(t);
    bool narrowInt = mlirTypeIsAInteger(t) && mlirIntegerTypeGetWidth(t) > 1 &&
                     mlirIntegerTypeGetWidth(t) < 8;
    if (narrowFloat || narrowInt)
      dtTypePrint(t, unsupported, sizeof(unsupported));
  }
  if (unsupported[0])
    snprintf(message, sizeof(message),
             "'%.*s' op computes on %s, an element type the CPU code "
             "generation does not support (floats of 16 to 64 bits, "
             "f8E4M3FN and f8E5M2, integers i1 and i8 to i64)",
             (int)name.length, name.data, unsupported);
  else if (dtIsOp(op, "builtin.unrealized_conversion_cast"))
    snprintf(message, sizeof(message),
             "a value here was not lowered to LLVM: an op that makes or uses "
             "it is not supported by the CPU code generation");
  else
    snprintf(message, sizeof(message),
             "'%.*s' op is not supported by the CPU code generation (it was "
             "not lowered to LLVM)",
             (int)name.length, name.data);
  mlirEmitError(mlirOperationGetLocation(op), message);
  if (c->reported < MAX_REPORTS)
    snprintf(c->first[c->reported], sizeof(c->first[0]), "%.*s",
             (int)name.length, name.data);
  ++c->reported;
  return c->reported >= MAX_REPORTS ? MlirWalkResultInterrupt
                                    : MlirWalkResultAdvance;
}

static bool runCheckLowered(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  Check c = {0, {{0}}};
  mlirOperationWalk(root, check, &c, MlirWalkPreOrder);
  return c.reported == 0;
}

const DtPassDef dtCheckLoweredPass = {
    .info = {"dtensor-check-lowered",
             "Report, at its location, every op left that is not in the LLVM "
             "dialect (the last step of dtensor-to-llvm)",
             0, NULL},
    .verifyFirst = false,
    .run = runCheckLowered,
    .numDependentDialects = 0,
};
