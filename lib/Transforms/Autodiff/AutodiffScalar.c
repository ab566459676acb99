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

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Named {
  MlirValue value;
  char name[DT_AD_NAME];
  char adjoint[DT_AD_NAME]; /* "" until a contribution arrives */
  char type[48];            /* the element type, printed */
  bool used;                /* read by the sweep's text (or by an op it
                               needs) */
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

/* Whether `text` (of `n` bytes) names `name` (a whole token). */
static bool mentions(const char *text, size_t n, const char *name) {
  size_t len = strlen(name);
  for (size_t i = 0; i + len <= n; ++i) {
    if (memcmp(text + i, name, len))
      continue;
    char next = i + len < n ? text[i + len] : ' ';
    if (!isalnum((unsigned char)next) && next != '_')
      return true;
  }
  return false;
}

/* Keeps, of the `n` bytes of lines "    %x = ..." in `text`, those that
 * `want` needs (it, and what the lines defining what it reads read), in
 * order; returns the new length. */
static size_t prune(char *text, size_t n, const char *want) {
  enum { MAX_LINES = 4096 };
  size_t starts[MAX_LINES + 1];
  int count = 0;
  for (size_t i = 0; i < n && count < MAX_LINES; ++i)
    if (i == 0 || text[i - 1] == '\n')
      starts[count++] = i;
  if (count == MAX_LINES || !want[0])
    return want[0] ? n : 0;
  starts[count] = n;
  bool keep[MAX_LINES] = {false};
  /* Names wanted so far, as a text of " %a %b ..." (small bodies). */
  char wanted[8192];
  DtBuf w = dtBufInit(wanted, sizeof(wanted));
  dtBufPrintf(&w, " %s ", want);
  for (int l = count - 1; l >= 0; --l) {
    const char *line = text + starts[l];
    size_t len = starts[l + 1] - starts[l];
    const char *name = line;
    while (name < line + len && *name != '%')
      ++name;
    size_t nameLen = 0;
    while (name + nameLen < line + len && name[nameLen] != ' ')
      ++nameLen;
    char key[DT_AD_NAME + 2];
    snprintf(key, sizeof(key), " %.*s ", (int)nameLen, name);
    if (w.length >= w.capacity || !strstr(wanted, key))
      continue;
    keep[l] = true;
    /* What it reads: every other %name on the line. */
    for (const char *p = name + nameLen; p < line + len; ++p) {
      if (*p != '%')
        continue;
      size_t k = 0;
      while (p + k < line + len &&
             (isalnum((unsigned char)p[k]) || p[k] == '%' || p[k] == '_'))
        ++k;
      dtBufPrintf(&w, "%.*s ", (int)k, p);
    }
  }
  if (w.length >= w.capacity) /* too many names to track: keep it all */
    return n;
  size_t out = 0;
  for (int l = 0; l < count; ++l)
    if (keep[l]) {
      memmove(text + out, text + starts[l], starts[l + 1] - starts[l]);
      out += starts[l + 1] - starts[l];
    }
  return out;
}

bool dtAdScalarVjp(DtBuf *t, const DtAdScalar *sc, MlirValue root,
                   const char *seed, int target, const char *prefix,
                   bool keepRoot, bool *outInputsUsed,
                   char outAdjoint[DT_AD_NAME], MlirOperation *outBad) {
  outAdjoint[0] = '\0';
  Named *named =
      calloc((size_t)(sc->numInputs + sc->numOps) + 1, sizeof(Named));
  char *revText = malloc(DT_AD_TEXT_SIZE);
  if (!named || !revText) {
    free(named);
    free(revText);
    return false;
  }
  DtBuf rev = dtBufInit(revText, DT_AD_TEXT_SIZE);
  Sweep s = {&rev, named, 0, prefix, 0};
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
      free(revText);
      return false;
    }
    Named *n = &named[s.count++];
    n->value = mlirOperationGetResult(op, 0);
    snprintf(n->name, DT_AD_NAME, "%%%sf%d", prefix, i);
    dtAdElementType(mlirValueGetType(n->value), n->type, sizeof(n->type));
  }
  Named *start = find(&s, root);
  if (start && isFloat(root))
    snprintf(start->adjoint, DT_AD_NAME, "%s", seed);
  if (start && keepRoot)
    start->used = true;
  /* The reverse sweep, into its own text; each rule marks the values its
   * text reads. */
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
      break;
    }
  }
  /* Only the lines the target's adjoint needs (a rule writes every
   * operand's contribution), and the values they read. */
  size_t revLength =
      ok ? prune(revText, rev.length < rev.capacity ? rev.length : rev.capacity,
                 named[target].adjoint)
         : 0;
  for (int k = 0; k < s.count && ok; ++k)
    named[k].used |= mentions(revText, revLength, named[k].name);
  /* The forward ops whose values the sweep reads, and what they read. */
  for (int i = sc->numOps - 1; i >= 0 && ok; --i) {
    MlirOperation op = sc->ops[i];
    if (!find(&s, mlirOperationGetResult(op, 0))->used)
      continue;
    for (intptr_t k = 0; k < mlirOperationGetNumOperands(op); ++k)
      find(&s, mlirOperationGetOperand(op, k))->used = true;
  }
  s.t = t;
  for (int i = 0; i < sc->numOps && ok; ++i) {
    Named *n = find(&s, mlirOperationGetResult(sc->ops[i], 0));
    if (n->used)
      printOp(&s, sc->ops[i], n->name);
  }
  if (ok) {
    dtBufAppend(t, revText, revLength);
    if (rev.length >= rev.capacity)
      t->length = t->capacity; /* overflowed: the caller refuses it */
    snprintf(outAdjoint, DT_AD_NAME, "%s", named[target].adjoint);
    for (int k = 0; k < sc->numInputs; ++k)
      outInputsUsed[k] = named[k].used;
  }
  free(named);
  free(revText);
  return ok;
}
