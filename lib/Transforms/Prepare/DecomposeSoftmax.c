/* dtensor-decompose-softmax: every linalg.softmax on tensors becomes the
 * four ops it stands for — the maximum along its dimension, exp(x - max),
 * the sum of those, a division — as linalg.generic ops, which the rest of
 * the pipeline fuses, vectorizes and lowers (linalg.softmax itself has no
 * lowering to loops). Written as a template per tensor type and dimension
 * (Template.h). Dynamic sizes are refused with a located error. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Support/Support.h"
#include "Template.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/Linalg.h"
#include "mlir-c/Dialect/Math.h"
#include "mlir-c/Dialect/Tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool dtDecomposeSoftmaxFinds(MlirOperation op) {
  return dtIsOp(op, "linalg.softmax");
}

static MlirWalkResult collect(MlirOperation op, void *userData) {
  if (dtDecomposeSoftmaxFinds(op) && !dtOpListPush(userData, op))
    return MlirWalkResultInterrupt;
  return MlirWalkResultAdvance;
}

/* "(d0, d1, ...)" of `rank` dims, `skip` left out (-1: none). */
static void dims(DtBuf *t, int rank, int skip) {
  dtBufPrintf(t, "(");
  bool first = true;
  for (int d = 0; d < rank; ++d) {
    if (d == skip)
      continue;
    dtBufPrintf(t, "%sd%d", first ? "" : ", ", d);
    first = false;
  }
  dtBufPrintf(t, ")");
}

/* The affine map of all `rank` dims to all but `skip` (-1: none). */
static void map(DtBuf *t, int rank, int skip) {
  dtBufPrintf(t, "affine_map<");
  dims(t, rank, -1);
  dtBufPrintf(t, " -> ");
  dims(t, rank, skip);
  dtBufPrintf(t, ">");
}

/* The template of a softmax of `type` along `dim`, @softmax(x, out), in
 * `t`; false for an element type without an infinity. */
static bool softmaxTemplate(MlirType type, int dim, DtBuf *t) {
  MlirType elem = mlirShapedTypeGetElementType(type);
  int rank = (int)mlirShapedTypeGetRank(type);
  const char *lowest = mlirTypeIsAF32(elem)    ? "0xFF800000"
                       : mlirTypeIsAF64(elem)  ? "0xFFF0000000000000"
                       : mlirTypeIsAF16(elem)  ? "0xFC00"
                       : mlirTypeIsABF16(elem) ? "0xFF80"
                                               : NULL;
  if (!lowest)
    return false;
  char E[32], T[512], R[512], id[256], proj[256], red[256], par[256];
  dtTypePrint(elem, E, sizeof(E));
  dtTypePrint(type, T, sizeof(T));
  DtBuf r = dtBufInit(R, sizeof(R)), i = dtBufInit(id, sizeof(id)),
        p = dtBufInit(proj, sizeof(proj)), rd = dtBufInit(red, sizeof(red)),
        pl = dtBufInit(par, sizeof(par));
  dtBufPrintf(&r, "tensor<");
  for (int d = 0; d < rank; ++d)
    if (d != dim)
      dtBufPrintf(&r, "%lldx", (long long)mlirShapedTypeGetDimSize(type, d));
  dtBufPrintf(&r, "%s>", E);
  map(&i, rank, -1);
  map(&p, rank, dim);
  for (int d = 0; d < rank; ++d) {
    dtBufPrintf(&rd, "%s\"%s\"", d ? ", " : "",
                d == dim ? "reduction" : "parallel");
    dtBufPrintf(&pl, "%s\"parallel\"", d ? ", " : "");
  }
  dtBufPrintf(t, "func.func @softmax(%%x: %s, %%out: %s) -> %s {\n", T, T, T);
  dtBufPrintf(t, "  %%e = tensor.empty() : %s\n", R);
  dtBufPrintf(t, "  %%lowest = arith.constant %s : %s\n", lowest, E);
  dtBufPrintf(t, "  %%zero = arith.constant 0.0 : %s\n", E);
  dtBufPrintf(t,
              "  %%m0 = linalg.fill ins(%%lowest : %s) outs(%%e : %s) -> %s\n",
              E, R, R);
  dtBufPrintf(
      t,
      "  %%m = linalg.generic {indexing_maps = [%s, %s], "
      "iterator_types = [%s]} ins(%%x : %s) outs(%%m0 : %s) {\n"
      "  ^bb0(%%v: %s, %%a: %s):\n    %%r = arith.maximumf %%a, %%v : %s\n"
      "    linalg.yield %%r : %s\n  } -> %s\n",
      id, proj, red, T, R, E, E, E, E, R);
  dtBufPrintf(
      t,
      "  %%ex = linalg.generic {indexing_maps = [%s, %s, %s], "
      "iterator_types = [%s]} ins(%%x, %%m : %s, %s) outs(%%out : %s) {\n"
      "  ^bb0(%%v: %s, %%mx: %s, %%o: %s):\n"
      "    %%c = arith.subf %%v, %%mx : %s\n    %%r = math.exp %%c : %s\n"
      "    linalg.yield %%r : %s\n  } -> %s\n",
      id, proj, id, par, T, R, T, E, E, E, E, E, E, T);
  dtBufPrintf(t, "  %%s0 = linalg.fill ins(%%zero : %s) outs(%%e : %s) -> %s\n",
              E, R, R);
  dtBufPrintf(t,
              "  %%s = linalg.generic {indexing_maps = [%s, %s], "
              "iterator_types = [%s]} ins(%%ex : %s) outs(%%s0 : %s) {\n"
              "  ^bb0(%%v: %s, %%a: %s):\n    %%r = arith.addf %%a, %%v : %s\n"
              "    linalg.yield %%r : %s\n  } -> %s\n",
              id, proj, red, T, R, E, E, E, E, R);
  dtBufPrintf(
      t,
      "  %%y = linalg.generic {indexing_maps = [%s, %s, %s], "
      "iterator_types = [%s]} ins(%%ex, %%s : %s, %s) outs(%%out : %s) {\n"
      "  ^bb0(%%v: %s, %%sum: %s, %%o: %s):\n"
      "    %%r = arith.divf %%v, %%sum : %s\n"
      "    linalg.yield %%r : %s\n  } -> %s\n",
      id, proj, id, par, T, R, T, E, E, E, E, E, T);
  dtBufPrintf(t, "  return %%y : %s\n}\n", T);
  return true;
}

static void fail(MlirOperation op, const char *message) {
  char full[512];
  snprintf(full, sizeof(full), "'linalg.softmax' op %s", message);
  mlirEmitError(mlirOperationGetLocation(op), full);
}

bool dtDecomposeSoftmax(MlirOperation root) {
  DtOpList found = {NULL, 0, 0};
  mlirOperationWalk(root, collect, &found, MlirWalkPreOrder);
  bool ok = true;
  for (size_t i = 0; i < found.count && ok; ++i) {
    MlirOperation op = found.ops[i];
    if (mlirOperationGetNumResults(op) != 1) {
      fail(op, "on memrefs: dtensor-decompose-softmax runs on tensors, "
               "before bufferization");
      ok = false;
      break;
    }
    MlirType type = mlirValueGetType(mlirOperationGetResult(op, 0));
    MlirAttribute dimAttr = dtGetAttr(op, "dimension");
    if (!mlirShapedTypeHasStaticShape(type)) {
      fail(op, "has dynamic sizes; only static shapes are compiled");
      ok = false;
      break;
    }
    int dim = (int)mlirIntegerAttrGetValueInt(dimAttr);
    if (mlirShapedTypeGetRank(type) > 16) {
      fail(op, "has more than 16 dims");
      ok = false;
      break;
    }
    char text[16384];
    DtBuf t = dtBufInit(text, sizeof(text));
    if (!softmaxTemplate(type, dim, &t)) {
      fail(op, "has an element type other than f32, f64, f16 or bf16");
      ok = false;
      break;
    }
    MlirValue args[2] = {mlirOperationGetOperand(op, 0),
                         mlirOperationGetOperand(op, 1)};
    ok = dtTemplateReplace(op, &t, "softmax", args, "decomposed");
  }
  free(found.ops);
  return ok;
}

static bool runDecomposeSoftmax(MlirOperation root,
                                const DtPassOptions *options) {
  (void)options;
  return dtDecomposeSoftmax(root);
}

const DtPassDef dtDecomposeSoftmaxPass = {
    .info = {"dtensor-decompose-softmax",
             "Turn every linalg.softmax on tensors into the linalg.generic "
             "ops it stands for (max, exp(x - max), sum, division)",
             0, NULL},
    .verifyFirst = false,
    .run = runDecomposeSoftmax,
    .numDependentDialects = 4,
    .dependentDialects = {mlirGetDialectHandle__arith__,
                          mlirGetDialectHandle__math__,
                          mlirGetDialectHandle__tensor__,
                          mlirGetDialectHandle__linalg__},
};
