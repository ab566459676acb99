/* dtensor-decompose-softmax: every linalg.softmax on tensors becomes the
 * four ops it stands for — the maximum along its dimension, exp(x - max),
 * the sum of those, a division — as linalg.generic ops, which the rest of
 * the pipeline fuses, vectorizes and lowers (linalg.softmax itself has no
 * lowering to loops). Written as a template per tensor type and dimension
 * (Template.h). Dynamic sizes are refused with a located error. */
#include "PassDef.h"
#include "Table.h"
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

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MlirWalkResult collect(MlirOperation op, void *userData) {
  if (dtIsOp(op, "linalg.softmax") && !dtOpListPush(userData, op))
    return MlirWalkResultInterrupt;
  return MlirWalkResultAdvance;
}

typedef struct Text {
  char *s;
  size_t n, cap;
  bool failed;
} Text;

static void put(Text *t, const char *s, size_t n) {
  if (t->failed)
    return;
  if (t->n + n + 1 > t->cap) {
    size_t cap = 2 * (t->n + n + 1);
    char *p = realloc(t->s, cap);
    if (!p) {
      t->failed = true;
      return;
    }
    t->s = p;
    t->cap = cap;
  }
  memcpy(t->s + t->n, s, n);
  t->n += n;
  t->s[t->n] = '\0';
}

static void printf_(Text *t, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void printf_(Text *t, const char *format, ...) {
  char buf[2048];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  put(t, buf, n < 0 ? 0 : (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static void appendRef(MlirStringRef s, void *user) {
  put(user, s.data, s.length);
}

/* "(d0, d1, ...)" of `rank` dims, `skip` left out (-1: none). */
static void dims(Text *t, int rank, int skip) {
  put(t, "(", 1);
  bool first = true;
  for (int d = 0; d < rank; ++d) {
    if (d == skip)
      continue;
    printf_(t, "%sd%d", first ? "" : ", ", d);
    first = false;
  }
  put(t, ")", 1);
}

/* The template of a softmax of `type` along `dim`: @softmax(x, out). */
static bool softmaxTemplate(MlirType type, int dim, Text *t) {
  MlirType elem = mlirShapedTypeGetElementType(type);
  int rank = (int)mlirShapedTypeGetRank(type);
  const char *lowest = mlirTypeIsAF32(elem)    ? "0xFF800000"
                       : mlirTypeIsAF64(elem)  ? "0xFFF0000000000000"
                       : mlirTypeIsAF16(elem)  ? "0xFC00"
                       : mlirTypeIsABF16(elem) ? "0xFF80"
                                               : NULL;
  if (!lowest)
    return false;
  Text e = {NULL, 0, 0, false}, T = {NULL, 0, 0, false},
       R = {NULL, 0, 0, false};
  mlirTypePrint(elem, appendRef, &e);
  mlirTypePrint(type, appendRef, &T);
  put(&R, "tensor<", 7);
  for (int d = 0; d < rank; ++d)
    if (d != dim)
      printf_(&R, "%lldx", (long long)mlirShapedTypeGetDimSize(type, d));
  printf_(&R, "%s>", e.s);
  Text id = {NULL, 0, 0, false}, proj = {NULL, 0, 0, false},
       reduce = {NULL, 0, 0, false}, parallel = {NULL, 0, 0, false};
  put(&id, "affine_map<", 11);
  dims(&id, rank, -1);
  put(&id, " -> ", 4);
  dims(&id, rank, -1);
  put(&id, ">", 1);
  put(&proj, "affine_map<", 11);
  dims(&proj, rank, -1);
  put(&proj, " -> ", 4);
  dims(&proj, rank, dim);
  put(&proj, ">", 1);
  for (int d = 0; d < rank; ++d) {
    printf_(&reduce, "%s\"%s\"", d ? ", " : "",
            d == dim ? "reduction" : "parallel");
    printf_(&parallel, "%s\"parallel\"", d ? ", " : "");
  }
  bool ok = !(e.failed || T.failed || R.failed || id.failed || proj.failed ||
              reduce.failed || parallel.failed);
  if (ok) {
    const char *E = e.s;
    printf_(t, "func.func @softmax(%%x: %s, %%out: %s) -> %s {\n", T.s, T.s,
            T.s);
    printf_(t, "  %%e = tensor.empty() : %s\n", R.s);
    printf_(t, "  %%lowest = arith.constant %s : %s\n", lowest, E);
    printf_(t, "  %%zero = arith.constant 0.0 : %s\n", E);
    printf_(t, "  %%m0 = linalg.fill ins(%%lowest : %s) outs(%%e : %s) -> %s\n",
            E, R.s, R.s);
    printf_(t, "  %%m = linalg.generic {indexing_maps = [%s, %s], "
            "iterator_types = [%s]} ins(%%x : %s) outs(%%m0 : %s) {\n"
            "  ^bb0(%%v: %s, %%a: %s):\n    %%r = arith.maximumf %%a, %%v : %s\n"
            "    linalg.yield %%r : %s\n  } -> %s\n",
            id.s, proj.s, reduce.s, T.s, R.s, E, E, E, E, R.s);
    printf_(t, "  %%ex = linalg.generic {indexing_maps = [%s, %s, %s], "
            "iterator_types = [%s]} ins(%%x, %%m : %s, %s) outs(%%out : %s) {\n"
            "  ^bb0(%%v: %s, %%mx: %s, %%o: %s):\n"
            "    %%c = arith.subf %%v, %%mx : %s\n    %%r = math.exp %%c : %s\n"
            "    linalg.yield %%r : %s\n  } -> %s\n",
            id.s, proj.s, id.s, parallel.s, T.s, R.s, T.s, E, E, E, E, E, E,
            T.s);
    printf_(t, "  %%s0 = linalg.fill ins(%%zero : %s) outs(%%e : %s) -> %s\n",
            E, R.s, R.s);
    printf_(t, "  %%s = linalg.generic {indexing_maps = [%s, %s], "
            "iterator_types = [%s]} ins(%%ex : %s) outs(%%s0 : %s) {\n"
            "  ^bb0(%%v: %s, %%a: %s):\n    %%r = arith.addf %%a, %%v : %s\n"
            "    linalg.yield %%r : %s\n  } -> %s\n",
            id.s, proj.s, reduce.s, T.s, R.s, E, E, E, E, R.s);
    printf_(t, "  %%y = linalg.generic {indexing_maps = [%s, %s, %s], "
            "iterator_types = [%s]} ins(%%ex, %%s : %s, %s) outs(%%out : %s) {\n"
            "  ^bb0(%%v: %s, %%sum: %s, %%o: %s):\n"
            "    %%r = arith.divf %%v, %%sum : %s\n"
            "    linalg.yield %%r : %s\n  } -> %s\n",
            id.s, proj.s, id.s, parallel.s, T.s, R.s, T.s, E, E, E, E, E, T.s);
    printf_(t, "  return %%y : %s\n}\n", T.s);
    ok = !t->failed;
  }
  free(e.s);
  free(T.s);
  free(R.s);
  free(id.s);
  free(proj.s);
  free(reduce.s);
  free(parallel.s);
  return ok;
}

static void fail(MlirOperation op, const char *message) {
  char full[512];
  snprintf(full, sizeof(full), "'linalg.softmax' op %s", message);
  mlirEmitError(mlirOperationGetLocation(op), full);
}

static bool runDecomposeSoftmax(MlirOperation root,
                                const DtPassOptions *options) {
  (void)options;
  DtOpList found = {NULL, 0, 0};
  mlirOperationWalk(root, collect, &found, MlirWalkPreOrder);
  MlirContext ctx = mlirOperationGetContext(root);
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
    Text t = {NULL, 0, 0, false};
    if (!softmaxTemplate(type, dim, &t)) {
      fail(op, t.failed ? "cannot be decomposed: out of memory"
                        : "has an element type other than f32, f64, f16 or "
                          "bf16");
      free(t.s);
      ok = false;
      break;
    }
    MlirModule tmpl =
        mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(t.s));
    free(t.s);
    if (mlirModuleIsNull(tmpl)) {
      fail(op, "cannot be decomposed (its template did not parse)");
      ok = false;
      break;
    }
    MlirValue args[2] = {mlirOperationGetOperand(op, 0),
                         mlirOperationGetOperand(op, 1)};
    ok = dtTemplateExpand(op, dtTemplateFunction(tmpl, "softmax"), args);
    mlirModuleDestroy(tmpl);
    if (!ok)
      fail(op, "cannot be decomposed: out of memory");
  }
  free(found.ops);
  return ok;
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
