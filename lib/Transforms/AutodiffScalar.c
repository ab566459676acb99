/* Derivatives of scalar code as MLIR text (Autodiff.h): the body of a
 * linalg op, or an elementwise op on tensors, is printed again in generic
 * form, then its reverse sweep: each op's rule adds its result's adjoint,
 * times the op's partial derivative, to the adjoints of its float
 * operands. Integer and comparison ops carry no derivative; rounding ops
 * (floor, ceil, round) have derivative 0 where they have one. */
#include "Autodiff.h"

#include "Dialect/DialectInternal.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Named {
  MlirValue value;
  char name[DT_AD_NAME];
  char adjoint[DT_AD_NAME]; /* "" until a contribution arrives */
  char type[48];            /* the element type, printed */
} Named;

typedef struct Sweep {
  DtBuf *t;
  Named *named;
  int count;
  const char *prefix;
  int next; /* for fresh names */
} Sweep;

void dtAdElementType(MlirType type, char *out, size_t size) {
  if (mlirTypeIsAShaped(type))
    type = mlirShapedTypeGetElementType(type);
  dtTypePrint(type, out, size);
}

static bool isFloat(MlirValue v) {
  MlirType type = mlirValueGetType(v);
  if (mlirTypeIsAShaped(type))
    type = mlirShapedTypeGetElementType(type);
  return mlirTypeIsAFloat(type);
}

static Named *find(Sweep *s, MlirValue v) {
  for (int i = 0; i < s->count; ++i)
    if (mlirValueEqual(s->named[i].value, v))
      return &s->named[i];
  return NULL;
}

/* A fresh name, "%<prefix>d<k>". */
static const char *fresh(Sweep *s, char out[DT_AD_NAME]) {
  snprintf(out, DT_AD_NAME, "%%%sd%d", s->prefix, s->next++);
  return out;
}

static const char *constant(Sweep *s, const char *value, const char *type,
                            char out[DT_AD_NAME]) {
  dtBufPrintf(s->t, "    %s = arith.constant %s : %s\n", fresh(s, out), value,
              type);
  return out;
}

/* out = op(x, y) (y NULL: a unary op) of element type `type`. */
static const char *apply(Sweep *s, const char *op, const char *x, const char *y,
                         const char *type, char out[DT_AD_NAME]) {
  fresh(s, out);
  if (y)
    dtBufPrintf(s->t, "    %s = %s %s, %s : %s\n", out, op, x, y, type);
  else
    dtBufPrintf(s->t, "    %s = %s %s : %s\n", out, op, x, type);
  return out;
}

static const char *select(Sweep *s, const char *cond, const char *x,
                          const char *y, const char *type,
                          char out[DT_AD_NAME]) {
  dtBufPrintf(s->t, "    %s = arith.select %s, %s, %s : %s\n", fresh(s, out),
              cond, x, y, type);
  return out;
}

static const char *compare(Sweep *s, const char *pred, const char *x,
                           const char *y, const char *type,
                           char out[DT_AD_NAME]) {
  dtBufPrintf(s->t, "    %s = arith.cmpf %s, %s, %s : %s\n", fresh(s, out),
              pred, x, y, type);
  return out;
}

/* Adds `contribution` to the adjoint of operand `v` (floats only). */
static void add(Sweep *s, MlirValue v, const char *contribution) {
  Named *n = find(s, v);
  if (!n || !isFloat(v))
    return;
  if (!n->adjoint[0]) {
    snprintf(n->adjoint, DT_AD_NAME, "%s", contribution);
    return;
  }
  char sum[DT_AD_NAME];
  apply(s, "arith.addf", n->adjoint, contribution, n->type, sum);
  snprintf(n->adjoint, DT_AD_NAME, "%s", sum);
}

/* Prints `op` in generic form, its result named `result`. */
static void printOp(Sweep *s, MlirOperation op, const char *result) {
  DtBuf *t = s->t;
  char name[128];
  MlirStringRef opName = mlirIdentifierStr(mlirOperationGetName(op));
  snprintf(name, sizeof(name), "%.*s", (int)opName.length, opName.data);
  dtBufPrintf(t, "    %s%s\"%s\"(", result, result[0] ? " = " : "", name);
  intptr_t n = mlirOperationGetNumOperands(op);
  for (intptr_t i = 0; i < n; ++i)
    dtBufPrintf(t, "%s%s", i ? ", " : "",
                find(s, mlirOperationGetOperand(op, i))->name);
  dtBufPrintf(t, ")");
  intptr_t numAttrs = mlirOperationGetNumAttributes(op);
  for (intptr_t i = 0; i < numAttrs; ++i) {
    MlirNamedAttribute a = mlirOperationGetAttribute(op, i);
    MlirStringRef an = mlirIdentifierStr(a.name);
    char value[512];
    dtAttributePrint(a.attribute, value, sizeof(value));
    dtBufPrintf(t, "%s%.*s = %s", i ? ", " : " {", (int)an.length, an.data,
                value);
  }
  dtBufPrintf(t, "%s : (", numAttrs ? "}" : "");
  for (intptr_t i = 0; i < n; ++i)
    dtBufPrintf(t, "%s%s", i ? ", " : "",
                find(s, mlirOperationGetOperand(op, i))->type);
  char rtype[48] = "";
  if (mlirOperationGetNumResults(op) == 1)
    dtAdElementType(mlirValueGetType(mlirOperationGetResult(op, 0)), rtype,
                    sizeof(rtype));
  dtBufPrintf(t, ") -> %s%s%s\n", rtype[0] ? "" : "(", rtype,
              rtype[0] ? "" : ")");
}

static bool is(MlirOperation op, const char *name) { return dtIsOp(op, name); }

/* Ops whose float results carry no derivative of their operands. */
static bool isConstantLike(MlirOperation op) {
  static const char *kNames[] = {
      "arith.constant", "arith.sitofp", "arith.uitofp",   "math.floor",
      "math.ceil",      "math.round",   "math.roundeven", "math.trunc"};
  for (size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i)
    if (is(op, kNames[i]))
      return true;
  return false;
}

/* The contributions of `op` (result adjoint `g`) to its operands. */
static bool rule(Sweep *s, MlirOperation op, const char *g) {
  Named *res = find(s, mlirOperationGetResult(op, 0));
  const char *E = res->type, *r = res->name;
  intptr_t n = mlirOperationGetNumOperands(op);
  MlirValue v0 = n > 0 ? mlirOperationGetOperand(op, 0) : (MlirValue){NULL};
  MlirValue v1 = n > 1 ? mlirOperationGetOperand(op, 1) : (MlirValue){NULL};
  const char *a = n > 0 ? find(s, v0)->name : NULL;
  const char *b = n > 1 ? find(s, v1)->name : NULL;
  char x[DT_AD_NAME], y[DT_AD_NAME], z[DT_AD_NAME], w[DT_AD_NAME];
  if (isConstantLike(op))
    return true;
  if (is(op, "arith.addf")) {
    add(s, v0, g);
    add(s, v1, g);
  } else if (is(op, "arith.subf")) {
    add(s, v0, g);
    add(s, v1, apply(s, "arith.negf", g, NULL, E, x));
  } else if (is(op, "arith.mulf")) {
    add(s, v0, apply(s, "arith.mulf", g, b, E, x));
    add(s, v1, apply(s, "arith.mulf", g, a, E, y));
  } else if (is(op, "arith.divf")) {
    add(s, v0, apply(s, "arith.divf", g, b, E, x));
    apply(s, "arith.mulf", g, r, E, y);
    apply(s, "arith.divf", y, b, E, z);
    add(s, v1, apply(s, "arith.negf", z, NULL, E, w));
  } else if (is(op, "arith.negf")) {
    add(s, v0, apply(s, "arith.negf", g, NULL, E, x));
  } else if (is(op, "arith.maximumf") || is(op, "arith.maxnumf") ||
             is(op, "arith.minimumf") || is(op, "arith.minnumf")) {
    bool max = is(op, "arith.maximumf") || is(op, "arith.maxnumf");
    compare(s, max ? "oge" : "ole", a, b, E, x);
    constant(s, "0.0", E, y);
    add(s, v0, select(s, x, g, y, E, z));
    add(s, v1, select(s, x, y, g, E, w));
  } else if (is(op, "arith.select")) {
    MlirValue v2 = mlirOperationGetOperand(op, 2);
    constant(s, "0.0", E, y);
    add(s, v1, select(s, a, g, y, E, z));
    add(s, v2, select(s, a, y, g, E, w));
  } else if (is(op, "arith.extf") || is(op, "arith.truncf")) {
    Named *in = find(s, v0);
    dtBufPrintf(s->t, "    %s = %s %s : %s to %s\n", fresh(s, x),
                is(op, "arith.extf") ? "arith.truncf" : "arith.extf", g, E,
                in->type);
    add(s, v0, x);
  } else if (is(op, "math.exp")) {
    add(s, v0, apply(s, "arith.mulf", g, r, E, x));
  } else if (is(op, "math.exp2")) {
    apply(s, "arith.mulf", g, r, E, x);
    constant(s, "0.69314718055994529", E, y);
    add(s, v0, apply(s, "arith.mulf", x, y, E, z));
  } else if (is(op, "math.log")) {
    add(s, v0, apply(s, "arith.divf", g, a, E, x));
  } else if (is(op, "math.log2")) {
    constant(s, "0.69314718055994529", E, x);
    apply(s, "arith.mulf", a, x, E, y);
    add(s, v0, apply(s, "arith.divf", g, y, E, z));
  } else if (is(op, "math.log1p")) {
    constant(s, "1.0", E, x);
    apply(s, "arith.addf", a, x, E, y);
    add(s, v0, apply(s, "arith.divf", g, y, E, z));
  } else if (is(op, "math.tanh")) {
    apply(s, "arith.mulf", r, r, E, x);
    constant(s, "1.0", E, y);
    apply(s, "arith.subf", y, x, E, z);
    add(s, v0, apply(s, "arith.mulf", g, z, E, w));
  } else if (is(op, "math.sqrt")) {
    apply(s, "arith.addf", r, r, E, x);
    add(s, v0, apply(s, "arith.divf", g, x, E, y));
  } else if (is(op, "math.rsqrt")) {
    apply(s, "arith.mulf", r, r, E, x);
    apply(s, "arith.mulf", x, r, E, y);
    constant(s, "-0.5", E, z);
    apply(s, "arith.mulf", y, z, E, w);
    add(s, v0, apply(s, "arith.mulf", g, w, E, x));
  } else if (is(op, "math.erf")) {
    apply(s, "arith.mulf", a, a, E, x);
    apply(s, "arith.negf", x, NULL, E, y);
    apply(s, "math.exp", y, NULL, E, z);
    constant(s, "1.1283791670955126", E, w);
    apply(s, "arith.mulf", z, w, E, x);
    add(s, v0, apply(s, "arith.mulf", g, x, E, y));
  } else if (is(op, "math.powf")) {
    apply(s, "arith.mulf", g, r, E, x);
    apply(s, "arith.mulf", x, b, E, y);
    add(s, v0, apply(s, "arith.divf", y, a, E, z));
    apply(s, "math.log", a, NULL, E, w);
    add(s, v1, apply(s, "arith.mulf", x, w, E, y));
  } else if (is(op, "math.absf")) {
    constant(s, "0.0", E, x);
    compare(s, "oge", a, x, E, y);
    apply(s, "arith.negf", g, NULL, E, z);
    add(s, v0, select(s, y, g, z, E, w));
  } else if (is(op, "math.sin") || is(op, "math.cos")) {
    bool sin = is(op, "math.sin");
    apply(s, sin ? "math.cos" : "math.sin", a, NULL, E, x);
    apply(s, "arith.mulf", g, x, E, y);
    add(s, v0, sin ? y : apply(s, "arith.negf", y, NULL, E, z));
  } else if (is(op, "math.fma")) {
    add(s, v0, apply(s, "arith.mulf", g, b, E, x));
    add(s, v1, apply(s, "arith.mulf", g, a, E, y));
    add(s, mlirOperationGetOperand(op, 2), g);
  } else {
    return false;
  }
  return true;
}

bool dtAdScalarVjp(DtBuf *t, const DtAdScalar *sc, MlirValue root,
                   const char *seed, int target, const char *prefix,
                   char outAdjoint[DT_AD_NAME], MlirOperation *outBad) {
  outAdjoint[0] = '\0';
  Named *named =
      calloc((size_t)(sc->numInputs + sc->numOps) + 1, sizeof(Named));
  if (!named)
    return false;
  Sweep s = {t, named, 0, prefix, 0};
  for (int i = 0; i < sc->numInputs; ++i) {
    Named *n = &named[s.count++];
    n->value = sc->inputs[i];
    snprintf(n->name, DT_AD_NAME, "%s", sc->inputNames[i]);
    dtAdElementType(mlirValueGetType(n->value), n->type, sizeof(n->type));
  }
  bool ok = true;
  for (int i = 0; i < sc->numOps && ok; ++i) {
    MlirOperation op = sc->ops[i];
    for (intptr_t k = 0; k < mlirOperationGetNumOperands(op) && ok; ++k)
      ok = find(&s, mlirOperationGetOperand(op, k)) != NULL;
    if (!ok || mlirOperationGetNumResults(op) != 1 ||
        mlirOperationGetNumRegions(op) != 0) {
      *outBad = op;
      free(named);
      return false;
    }
    Named *n = &named[s.count++];
    n->value = mlirOperationGetResult(op, 0);
    snprintf(n->name, DT_AD_NAME, "%%%sf%d", prefix, i);
    dtAdElementType(mlirValueGetType(n->value), n->type, sizeof(n->type));
    printOp(&s, op, n->name);
  }
  Named *start = find(&s, root);
  if (start && isFloat(root))
    snprintf(start->adjoint, DT_AD_NAME, "%s", seed);
  for (int i = sc->numOps - 1; i >= 0 && ok; --i) {
    MlirOperation op = sc->ops[i];
    Named *res = find(&s, mlirOperationGetResult(op, 0));
    char g[DT_AD_NAME];
    snprintf(g, sizeof(g), "%s", res->adjoint);
    if (!g[0])
      continue;
    if (!rule(&s, op, g)) {
      *outBad = op;
      ok = false;
    }
  }
  if (ok)
    snprintf(outAdjoint, DT_AD_NAME, "%s", named[target].adjoint);
  free(named);
  return ok;
}
