/* dtensor-autodiff's training step (Autodiff.h): with optimizer=sgd or
 * adam, @<f>_step applies the update to each differentiated argument (a
 * parameter) after @<f>_grad's gradients. Every update is elementwise over
 * its parameter, so a parameter sharded over any axes (FSDP's dp, tensor
 * parallel's tp) is updated where it lives, with its optimizer state laid
 * out the same way: no communication beyond the gradient's.
 *
 *   sgd:  p' = p - lr g
 *   adam: m' = b1 m + (1 - b1) g,  v' = b2 v + (1 - b2) g^2,
 *         p' = p - lr (m' / (1 - b1^t)) / (sqrt(v' / (1 - b2^t)) + eps)
 *
 * Adam's state comes in as arguments after @f's (m then v for each
 * parameter, then the step count t, a 0-d tensor counting from 1) and
 * goes out after the new parameters. */
#include "Autodiff.h"
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Template.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Func.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads float option `name` into `out`, within [lo, hi) (lo excluded when
 * `open`); false after an error at `at`. */
static bool number(MlirOperation at, const DtPassOptions *options,
                   const char *name, double lo, double hi, bool open,
                   double *out) {
  const char *text = dtPassOptionsGet(options, name);
  char *end;
  *out = strtod(text, &end);
  if (end == text || *end || !isfinite(*out) || *out < lo ||
      (open && *out == lo) || *out >= hi) {
    dtOpError(at, "dtensor-autodiff: %s='%s' is not a number in %s%g, %g)",
              name, text, open ? "(" : "[", lo, hi);
    return false;
  }
  return true;
}

/* The update of one parameter of type `type` as a template @adj. */
static void updateText(DtBuf *t, MlirType type, bool adam, const double *h) {
  char E[48];
  dtAdElementType(type, E, sizeof(E));
  int rank = (int)mlirShapedTypeGetRank(type);
  int numIns = adam ? 5 : 2, numOuts = adam ? 3 : 1;
  dtBufPrintf(t, "func.func @adj(%%p: ");
  dtAdTypeText(t, type);
  dtBufPrintf(t, ", %%g: ");
  dtAdTypeText(t, type);
  if (adam) {
    dtBufPrintf(t, ", %%m: ");
    dtAdTypeText(t, type);
    dtBufPrintf(t, ", %%v: ");
    dtAdTypeText(t, type);
    dtBufPrintf(t, ", %%t: tensor<%s>", E);
  }
  dtBufPrintf(t, ") -> (");
  for (int k = 0; k < numOuts; ++k) {
    dtBufPrintf(t, "%s", k ? ", " : "");
    dtAdTypeText(t, type);
  }
  dtBufPrintf(t, ") {\n  %%e = tensor.empty() : ");
  dtAdTypeText(t, type);
  dtBufPrintf(t, "\n  %%r:%d = linalg.generic {indexing_maps = [", numOuts);
  for (int k = 0; k < numIns + numOuts; ++k) {
    dtBufPrintf(t, "%s", k ? ", " : "");
    if (adam && k == 4) {
      dtBufPrintf(t, "affine_map<(");
      for (int d = 0; d < rank; ++d)
        dtBufPrintf(t, "%sd%d", d ? ", " : "", d);
      dtBufPrintf(t, ") -> ()>");
    } else {
      dtAdIdentityMap(t, rank);
    }
  }
  dtBufPrintf(t, "], iterator_types = [");
  for (int d = 0; d < rank; ++d)
    dtBufPrintf(t, "%s\"parallel\"", d ? ", " : "");
  dtBufPrintf(t, "]} ins(%s : ", adam ? "%p, %g, %m, %v, %t" : "%p, %g");
  for (int k = 0; k < (adam ? 4 : 2); ++k) {
    dtBufPrintf(t, "%s", k ? ", " : "");
    dtAdTypeText(t, type);
  }
  if (adam)
    dtBufPrintf(t, ", tensor<%s>", E);
  dtBufPrintf(t, ") outs(");
  for (int k = 0; k < numOuts; ++k)
    dtBufPrintf(t, "%s%%e", k ? ", " : "");
  dtBufPrintf(t, " : ");
  for (int k = 0; k < numOuts; ++k) {
    dtBufPrintf(t, "%s", k ? ", " : "");
    dtAdTypeText(t, type);
  }
  dtBufPrintf(t, ") {\n  ^bb0(%%a: %s, %%b: %s", E, E);
  if (adam)
    dtBufPrintf(t, ", %%bm: %s, %%bv: %s, %%bt: %s", E, E, E);
  for (int k = 0; k < numOuts; ++k)
    dtBufPrintf(t, ", %%o%d: %s", k, E);
  dtBufPrintf(t, "):\n    %%lr = arith.constant %.17e : %s\n", h[0], E);
  if (!adam) {
    dtBufPrintf(t,
                "    %%s = arith.mulf %%b, %%lr : %s\n"
                "    %%n = arith.subf %%a, %%s : %s\n"
                "    linalg.yield %%n : %s\n",
                E, E, E);
  } else {
    dtBufPrintf(t,
                "    %%b1 = arith.constant %.17e : %s\n"
                "    %%b2 = arith.constant %.17e : %s\n"
                "    %%eps = arith.constant %.17e : %s\n"
                "    %%one = arith.constant 1.0 : %s\n",
                h[1], E, h[2], E, h[3], E, E);
    const char *ops[] = {
        "%c1 = arith.subf %one, %b1",  "%m1 = arith.mulf %b1, %bm",
        "%gm = arith.mulf %c1, %b",    "%mn = arith.addf %m1, %gm",
        "%c2 = arith.subf %one, %b2",  "%v1 = arith.mulf %b2, %bv",
        "%g2 = arith.mulf %b, %b",     "%gv = arith.mulf %c2, %g2",
        "%vn = arith.addf %v1, %gv",   "%p1 = math.powf %b1, %bt",
        "%d1 = arith.subf %one, %p1",  "%mh = arith.divf %mn, %d1",
        "%p2 = math.powf %b2, %bt",    "%d2 = arith.subf %one, %p2",
        "%vh = arith.divf %vn, %d2",   "%sq = math.sqrt %vh",
        "%den = arith.addf %sq, %eps", "%q = arith.divf %mh, %den",
        "%u = arith.mulf %lr, %q",     "%pn = arith.subf %a, %u"};
    for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); ++k)
      dtBufPrintf(t, "    %s : %s\n", ops[k], E);
    dtBufPrintf(t, "    linalg.yield %%pn, %%mn, %%vn : %s, %s, %s\n", E, E, E);
  }
  dtBufPrintf(t, "  } -> (");
  for (int k = 0; k < numOuts; ++k) {
    dtBufPrintf(t, "%s", k ? ", " : "");
    dtAdTypeText(t, type);
  }
  dtBufPrintf(t, ")\n  return ");
  for (int k = 0; k < numOuts; ++k)
    dtBufPrintf(t, "%s%%r#%d", k ? ", " : "", k);
  dtBufPrintf(t, " : ");
  for (int k = 0; k < numOuts; ++k) {
    dtBufPrintf(t, "%s", k ? ", " : "");
    dtAdTypeText(t, type);
  }
  dtBufPrintf(t, "\n}\n");
}

/* `dict` (an argument's or result's attributes) with the string attribute
 * `key` = `value`. */
static MlirAttribute withString(MlirContext ctx, MlirAttribute dict,
                                const char *key, const char *value) {
  MlirNamedAttribute elems[64];
  intptr_t n = 0;
  for (intptr_t i = 0; i < mlirDictionaryAttrGetNumElements(dict) && n < 63;
       ++i) {
    MlirNamedAttribute e = mlirDictionaryAttrGetElement(dict, i);
    if (!mlirStringRefEqual(mlirIdentifierStr(e.name),
                            mlirStringRefCreateFromCString(key)))
      elems[n++] = e;
  }
  elems[n++] = dtNamedAttr(
      ctx, key, mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(value)));
  return mlirDictionaryAttrGet(ctx, n, elems);
}

static MlirAttribute withName(MlirContext ctx, MlirAttribute dict,
                              const char *name) {
  return withString(ctx, dict, DT_ATTR_NAME, name);
}

bool dtAdBuildStep(MlirOperation module, MlirOperation f, MlirOperation grad,
                   const bool *chosen, intptr_t numResults,
                   const DtPassOptions *options) {
  const char *opt = dtPassOptionsGet(options, "optimizer");
  bool adam = !strcmp(opt, "adam");
  double h[4] = {0};
  if (!number(f, options, "lr", 0.0, INFINITY, true, &h[0]) ||
      (adam && (!number(f, options, "beta1", 0.0, 1.0, false, &h[1]) ||
                !number(f, options, "beta2", 0.0, 1.0, false, &h[2]) ||
                !number(f, options, "eps", 0.0, INFINITY, true, &h[3]))))
    return false;
  MlirStringRef fname = mlirStringAttrGetValue(dtGetAttr(f, "sym_name"));
  char name[256];
  snprintf(name, sizeof(name), "%.*s_step", (int)fname.length, fname.data);
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation o = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    MlirAttribute sym = dtGetAttr(o, "sym_name");
    if (!mlirAttributeIsNull(sym) && mlirAttributeIsAString(sym) &&
        mlirStringRefEqual(mlirStringAttrGetValue(sym),
                           mlirStringRefCreateFromCString(name))) {
      dtOpError(f, "dtensor-autodiff: the module already has a @%s", name);
      return false;
    }
  }
  MlirContext ctx = mlirOperationGetContext(f);
  MlirOperation step = mlirOperationClone(grad);
  mlirOperationSetAttributeByName(
      step, mlirStringRefCreateFromCString("sym_name"),
      mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(name)));
  mlirBlockInsertOwnedOperationAfter(top, grad, step);
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(step, 0));
  MlirOperation ret = mlirBlockGetTerminator(entry);
  intptr_t numArgs = mlirBlockGetNumArguments(entry);
  /* Parameters, their gradients (after @f's results) and Adam's state. */
  MlirValue params[256], grads[256], m[256], v[256], t = {NULL};
  intptr_t n = 0;
  for (intptr_t i = 0; i < numArgs && n < 256; ++i)
    if (chosen[i]) {
      params[n] = mlirBlockGetArgument(entry, i);
      grads[n] = mlirOperationGetOperand(ret, numResults + n);
      ++n;
    }
  MlirLocation loc = mlirOperationGetLocation(f);
  if (adam) {
    for (intptr_t k = 0; k < n; ++k)
      m[k] = mlirBlockAddArgument(entry, mlirValueGetType(params[k]), loc);
    for (intptr_t k = 0; k < n; ++k)
      v[k] = mlirBlockAddArgument(entry, mlirValueGetType(params[k]), loc);
    MlirType elem = mlirShapedTypeGetElementType(mlirValueGetType(params[0]));
    t = mlirBlockAddArgument(
        entry, mlirRankedTensorTypeGet(0, NULL, elem, mlirAttributeGetNull()),
        loc);
  }
  /* @f's results (at most 256), then each parameter's new value and
   * state (at most 256 parameters). */
  MlirValue outs[256 + 3 * 256];
  intptr_t numOuts = 0;
  for (intptr_t r = 0; r < numResults; ++r)
    outs[numOuts++] = mlirOperationGetOperand(ret, r);
  MlirValue newM[256], newV[256];
  char *text = malloc(DT_AD_TEXT_SIZE);
  bool ok = text != NULL;
  for (intptr_t k = 0; k < n && ok; ++k) {
    DtBuf b = dtBufInit(text, DT_AD_TEXT_SIZE);
    updateText(&b, mlirValueGetType(params[k]), adam, h);
    MlirModule tm =
        b.length < DT_AD_TEXT_SIZE
            ? mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(text))
            : (MlirModule){NULL};
    if (mlirModuleIsNull(tm)) {
      dtOpError(f, "dtensor-autodiff: the %s update did not build", opt);
      ok = false;
      break;
    }
    MlirValue args[5] = {params[k], grads[k], adam ? m[k] : params[k],
                         adam ? v[k] : params[k], t};
    MlirValue res[3];
    ok = dtTemplateInline(ret, loc, dtTemplateFunction(tm, "adj"), args, res,
                          adam ? 3 : 1);
    mlirModuleDestroy(tm);
    outs[numOuts++] = res[0];
    newM[k] = res[1];
    newV[k] = res[2];
  }
  free(text);
  if (!ok) {
    mlirOperationDestroy(step);
    return false;
  }
  for (intptr_t k = 0; adam && k < n; ++k)
    outs[numOuts++] = newM[k];
  for (intptr_t k = 0; adam && k < n; ++k)
    outs[numOuts++] = newV[k];
  dtAdReplaceReturn(step, ret, outs, numOuts);
  /* Attributes: @f's results keep theirs; each new parameter and its state
   * (in and out) are laid out as the parameter's gradient is. */
  MlirAttribute gradRes = dtGetAttr(grad, "res_attrs");
  MlirAttribute gradArgs = dtGetAttr(grad, "arg_attrs");
  MlirAttribute empty = mlirDictionaryAttrGet(ctx, 0, NULL);
  MlirAttribute resAttrs[256 + 3 * 256], argAttrs[256 + 2 * 256 + 1];
  for (intptr_t r = 0; r < numOuts; ++r) {
    /* result r of the step: @f's result r, or parameter k's (new value,
     * m, v) whose layout is the gradient's, result numResults + k. */
    intptr_t from = r < numResults ? r : numResults + (r - numResults) % n;
    resAttrs[r] = mlirAttributeIsNull(gradRes)
                      ? empty
                      : mlirArrayAttrGetElement(gradRes, from);
  }
  intptr_t numIns = mlirBlockGetNumArguments(entry);
  for (intptr_t i = 0; i < numIns; ++i) {
    if (i < numArgs)
      argAttrs[i] = mlirAttributeIsNull(gradArgs)
                        ? empty
                        : mlirArrayAttrGetElement(gradArgs, i);
    else if (i < numArgs + 2 * n)
      argAttrs[i] = resAttrs[numResults + (i - numArgs) % n];
    else
      argAttrs[i] = empty; /* t */
  }
  /* Names, so that a loop feeds each result back by name: a new parameter
   * is its parameter's name (its dtensor.name, else the positional
   * arg<i>), Adam's state PyTorch's "<name>.exp_avg", "<name>.exp_avg_sq"
   * and "adam.step" (t, which comes in only). */
  char pname[256][128];
  for (intptr_t i = 0, k = 0; i < numArgs && k < n; ++i) {
    if (!chosen[i])
      continue;
    MlirAttribute nm = mlirDictionaryAttrGetElementByName(
        argAttrs[i], mlirStringRefCreateFromCString(DT_ATTR_NAME));
    if (!mlirAttributeIsNull(nm) && mlirAttributeIsAString(nm)) {
      MlirStringRef v = mlirStringAttrGetValue(nm);
      snprintf(pname[k], sizeof(pname[k]), "%.*s", (int)v.length, v.data);
    } else {
      snprintf(pname[k], sizeof(pname[k]), "arg%d", (int)i);
    }
    ++k;
  }
  for (intptr_t k = 0; k < n; ++k) {
    char state[160];
    resAttrs[numResults + k] =
        withName(ctx, resAttrs[numResults + k], pname[k]);
    for (int which = 0; adam && which < 2; ++which) {
      snprintf(state, sizeof(state), "%s.%s", pname[k],
               which ? "exp_avg_sq" : "exp_avg");
      intptr_t at = numResults + (1 + which) * n + k;
      resAttrs[at] = withName(ctx, resAttrs[at], state);
      argAttrs[numArgs + which * n + k] =
          withName(ctx, argAttrs[numArgs + which * n + k], state);
    }
  }
  if (adam)
    argAttrs[numArgs + 2 * n] = withName(ctx, empty, "adam.step");
  /* What each argument is, for memory reports: the parameters updated,
   * the optimizer's state, and the rest (the batch). */
  for (intptr_t i = 0; i < numIns; ++i)
    argAttrs[i] = withString(ctx, argAttrs[i], DT_ATTR_ROLE,
                             i >= numArgs ? "optimizer_state"
                             : chosen[i]  ? "parameter"
                                          : "input");
  mlirOperationSetAttributeByName(step,
                                  mlirStringRefCreateFromCString("res_attrs"),
                                  mlirArrayAttrGet(ctx, numOuts, resAttrs));
  mlirOperationSetAttributeByName(step,
                                  mlirStringRefCreateFromCString("arg_attrs"),
                                  mlirArrayAttrGet(ctx, numIns, argAttrs));
  return true;
}
