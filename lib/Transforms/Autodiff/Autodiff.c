/* dtensor-autodiff: reverse-mode gradients of a function on tensors.
 *
 * @f becomes @f_grad: a copy of @f whose return also gives the gradient of
 * one scalar result (a float tensor of one element) with respect to chosen
 * arguments. The copy's forward ops stay as they are (their values are the
 * stored activations); after them the reverse sweep visits each op whose
 * results carry an adjoint, last to first, and adds its operands'
 * contributions, written as MLIR text from templates (Template.h):
 *
 * - a linalg op (generic or named) through its indexing maps: for input i,
 *   a linalg.generic over the same loops with the op's inputs, result and
 *   result adjoint as inputs and input i's map as its output, whose body is
 *   the op's body followed by its scalar derivative (AutodiffLinalg.c,
 *   AutodiffScalar.c).
 *   The body may write its result (elementwise), add into its accumulator
 *   (sums and contractions), or take the max or min of it (the adjoint goes
 *   to the elements equal to the result);
 * - elementwise arith and math ops on tensors, the same way;
 * - tensor.extract_slice, insert_slice, pad, concat, expand_shape,
 *   collapse_shape and dtensor.annotate, by their inverses
 *   (AutodiffTensor.c);
 * - linalg.softmax decomposed first (dtensor-decompose-softmax);
 * - lookups by computed index (tensor.gather, tosa.gather, tensor.extract
 *   in a linalg body) made dtensor.gather first (dtensor-gathers); a
 *   gather's adjoint is a dtensor.scatter_add into zeros of the table, a
 *   scatter_add's a gather (AutodiffTensor.c);
 * - scf.for of constant bounds, unrolled first (AutodiffLoops.c): each
 *   iteration's values are stored activations;
 * - func.call, by a call of the callee's vjp function (built once per
 *   callee and set of differentiated arguments; it recomputes the callee);
 * - ops without a float tensor result on the path get no adjoint; any other
 *   op on the path is a located error naming it.
 *
 * Only values that depend on the chosen arguments (active values) get
 * adjoints. A gradient gets its argument's dtensor.layout as a result
 * attribute, so a sharded parameter's gradient comes back sharded the same
 * way (a data-parallel one reduced where the propagation decides). */
#include "Autodiff.h"
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Prepare/Gathers.h"
#include "Template.h"
#include "Util.h"

#include "mlir-c/AffineMap.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/Linalg.h"
#include "mlir-c/Dialect/Math.h"
#include "mlir-c/Dialect/Tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Entry {
  MlirValue value;
  MlirValue adjoint; /* null until a contribution arrives */
} Entry;

/* The vjp functions of called functions, built once per callee and set of
 * differentiated arguments. */
typedef struct Vjp {
  char callee[256], name[256];
  uint64_t mask;
  bool inProgress;
} Vjp;

typedef struct Run {
  MlirOperation module;
  Vjp *vjps;
  size_t count, capacity;
} Run;

static void callAdjoint(DtAd *ad, MlirOperation call);

static uint64_t valueHash(MlirValue v) {
  return dtHashMix(0, (uint64_t)(uintptr_t)v.ptr);
}

static bool sameValue(const void *entry, const void *key) {
  return ((const Entry *)entry)->value.ptr == ((const MlirValue *)key)->ptr;
}

static Entry *entryOf(DtAd *ad, MlirValue v) {
  return dtTableFind(&ad->entries, valueHash(v), sameValue, &v);
}

MlirValue dtAdAdjoint(DtAd *ad, MlirValue v) {
  Entry *e = entryOf(ad, v);
  return e ? e->adjoint : (MlirValue){NULL};
}

static void activate(DtAd *ad, MlirValue v) {
  if (entryOf(ad, v))
    return;
  Entry *e = dtTableInsert(&ad->entries, valueHash(v));
  if (!e) {
    ad->failed = true;
    return;
  }
  e->value = v;
}

static bool isFloatTensor(MlirType t) {
  return mlirTypeIsARankedTensor(t) &&
         mlirTypeIsAFloat(mlirShapedTypeGetElementType(t));
}

bool dtAdActive(DtAd *ad, MlirValue v) {
  return isFloatTensor(mlirValueGetType(v)) && entryOf(ad, v) != NULL;
}

/* ---- templates ---------------------------------------------------------- */

void dtAdTypeText(DtBuf *t, MlirType type) {
  mlirTypePrint(type, dtBufSink, t);
}

/* "%z = zeros of `type`" into the template. */
void dtAdZeros(DtBuf *t, const char *name, MlirType type) {
  char E[48];
  dtAdElementType(type, E, sizeof(E));
  dtBufPrintf(t, "  %%%s_c = arith.constant 0.0 : %s\n", name, E);
  dtBufPrintf(t, "  %%%s_e = tensor.empty() : ", name);
  dtAdTypeText(t, type);
  dtBufPrintf(t, "\n  %%%s = linalg.fill ins(%%%s_c : %s) outs(%%%s_e : ", name,
              name, E, name);
  dtAdTypeText(t, type);
  dtBufPrintf(t, ") -> ");
  dtAdTypeText(t, type);
  dtBufPrintf(t, "\n");
}

/* Parses the template in `t` (a function @adj), inlines it before the
 * sweep's insertion point with `args`, and stores what it returns. */
bool dtAdEmit(DtAd *ad, MlirOperation at, DtBuf *t, const MlirValue *args,
              MlirValue *results, intptr_t numResults) {
  if (t->length >= t->capacity) {
    dtOpError(at,
              "is too large to differentiate (its adjoint's text passes "
              "%d KiB)",
              DT_AD_TEXT_SIZE / 1024);
    return !(ad->failed = true);
  }
  MlirModule m =
      mlirModuleCreateParse(ad->ctx, mlirStringRefCreateFromCString(t->data));
  if (mlirModuleIsNull(m)) {
    if (getenv("DTENSOR_AUTODIFF_DEBUG"))
      fprintf(stderr, "%s\n", t->data);
    dtOpError(at, "has an adjoint dtensor-autodiff could not build (its "
                  "template did not parse)");
    return !(ad->failed = true);
  }
  bool ok =
      dtTemplateInline(ad->before, mlirOperationGetLocation(at),
                       dtTemplateFunction(m, "adj"), args, results, numResults);
  mlirModuleDestroy(m);
  if (!ok)
    ad->failed = true;
  return ok;
}

/* The identity map of `rank` dims. */
void dtAdIdentityMap(DtBuf *t, int rank) {
  dtBufPrintf(t, "affine_map<(");
  for (int d = 0; d < rank; ++d)
    dtBufPrintf(t, "%sd%d", d ? ", " : "", d);
  dtBufPrintf(t, ") -> (");
  for (int d = 0; d < rank; ++d)
    dtBufPrintf(t, "%sd%d", d ? ", " : "", d);
  dtBufPrintf(t, ")>");
}

/* Adds `contribution` to the adjoint of `v`. */
void dtAdAccumulate(DtAd *ad, MlirOperation at, MlirValue v,
                    MlirValue contribution) {
  Entry *e = entryOf(ad, v);
  if (!e || mlirValueIsNull(contribution))
    return;
  if (mlirValueIsNull(e->adjoint)) {
    e->adjoint = contribution;
    return;
  }
  MlirType type = mlirValueGetType(v);
  char E[48];
  dtAdElementType(type, E, sizeof(E));
  int rank = (int)mlirShapedTypeGetRank(type);
  DtBuf t = dtBufInit(ad->text, DT_AD_TEXT_SIZE);
  dtBufPrintf(&t, "func.func @adj(%%a: ");
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, ", %%b: ");
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, ") -> ");
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, " {\n  %%e = tensor.empty() : ");
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, "\n  %%r = linalg.generic {indexing_maps = [");
  for (int k = 0; k < 3; ++k) {
    dtBufPrintf(&t, "%s", k ? ", " : "");
    dtAdIdentityMap(&t, rank);
  }
  dtBufPrintf(&t, "], iterator_types = [");
  for (int d = 0; d < rank; ++d)
    dtBufPrintf(&t, "%s\"parallel\"", d ? ", " : "");
  /* (The sum does not read its init: linalg-fuse-elementwise-ops fuses a
   * producer that reads its init into a consumer with more loops as an
   * accumulation over them.) */
  dtBufPrintf(&t, "]} ins(%%a, %%b : ");
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, ", ");
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, ") outs(%%e : ");
  dtAdTypeText(&t, type);
  dtBufPrintf(&t,
              ") {\n  ^bb0(%%x: %s, %%y: %s, %%o: %s):\n    %%s = arith.addf "
              "%%x, %%y : %s\n    linalg.yield %%s : %s\n  } -> ",
              E, E, E, E, E);
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, "\n  return %%r : ");
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, "\n}\n");
  MlirValue args[2] = {e->adjoint, contribution}, sum;
  if (dtAdEmit(ad, at, &t, args, &sum, 1))
    e->adjoint = sum;
}

/* The reverse sweep's step for one op whose result carries an adjoint. */
static void opAdjoint(DtAd *ad, MlirOperation op) {
  bool tensorResult =
      mlirOperationGetNumResults(op) >= 1 &&
      mlirTypeIsARankedTensor(mlirValueGetType(mlirOperationGetResult(op, 0)));
  if (dtIsOpIn(op, "linalg."))
    dtAdLinalgAdjoint(ad, op, false);
  else if ((dtIsOpIn(op, "arith.") || dtIsOpIn(op, "math.")) && tensorResult &&
           mlirOperationGetNumRegions(op) == 0)
    dtAdLinalgAdjoint(ad, op, true);
  else if (dtIsOp(op, "func.call"))
    callAdjoint(ad, op);
  else if (dtAdIsTensorOp(op))
    dtAdTensorAdjoint(ad, op);
  else {
    dtOpError(op, "is on the path of the gradient and has no derivative in "
                  "dtensor-autodiff (it differentiates linalg ops, "
                  "elementwise arith and math, and tensor slices, pads, "
                  "concats and reshapes)");
    ad->failed = true;
  }
}

/* ---- the pass
 * ---------------------------------------------------------------- */

static MlirOperation findFunction(MlirOperation module, const char *name) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f)) {
    MlirAttribute sym = dtGetAttr(f, "sym_name");
    if (!mlirAttributeIsNull(sym) && mlirAttributeIsAString(sym)) {
      MlirStringRef s = mlirStringAttrGetValue(sym);
      if (s.length == strlen(name) && !memcmp(s.data, name, s.length))
        return f;
    }
  }
  return (MlirOperation){NULL};
}

/* The arguments of option `wrt` ("0,2"; empty: every float tensor). */
static bool readWrt(MlirOperation f, const char *wrt, bool *chosen,
                    intptr_t numArgs) {
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0));
  if (!wrt[0]) {
    bool any = false;
    for (intptr_t i = 0; i < numArgs; ++i)
      any |= chosen[i] =
          isFloatTensor(mlirValueGetType(mlirBlockGetArgument(entry, i)));
    if (!any)
      dtOpError(f, "has no float tensor argument to differentiate by");
    return any;
  }
  for (const char *p = wrt; *p;) {
    char *end;
    long i = strtol(p, &end, 10);
    if (end == p || (*end && *end != ',') || i < 0 || i >= numArgs) {
      dtOpError(f,
                "dtensor-autodiff: wrt='%s' is not a list of argument "
                "numbers from 0 to %d",
                wrt, (int)numArgs - 1);
      return false;
    }
    MlirType t = mlirValueGetType(mlirBlockGetArgument(entry, i));
    if (!isFloatTensor(t)) {
      char ts[256];
      dtTypePrint(t, ts, sizeof(ts));
      dtOpError(f,
                "dtensor-autodiff: argument %ld is %s, which has no "
                "gradient (only float tensors do)",
                i, ts);
      return false;
    }
    chosen[i] = true;
    p = *end ? end + 1 : end;
  }
  return true;
}

typedef struct UseCheck {
  DtAd *ad;
  bool any;
} UseCheck;

static MlirWalkResult usesActive(MlirOperation op, void *user) {
  UseCheck *u = user;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op) && !u->any; ++i)
    u->any = entryOf(u->ad, mlirOperationGetOperand(op, i)) != NULL;
  return u->any ? MlirWalkResultInterrupt : MlirWalkResultAdvance;
}

/* Marks the values that depend on the chosen arguments: the results of
 * every op that uses an active value, in its regions too (a loop body
 * reads the function's values directly). Returns the first scf.for with
 * active results (null: none). */
static MlirOperation markActive(DtAd *ad, MlirBlock entry, const bool *chosen) {
  MlirOperation loop = {NULL};
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry); ++i)
    if (chosen[i])
      activate(ad, mlirBlockGetArgument(entry, i));
  for (MlirOperation op = mlirBlockGetFirstOperation(entry);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    UseCheck u = {ad, false};
    mlirOperationWalk(op, usesActive, &u, MlirWalkPreOrder);
    for (intptr_t r = 0; r < mlirOperationGetNumResults(op) && u.any; ++r)
      activate(ad, mlirOperationGetResult(op, r));
    if (u.any && mlirOperationIsNull(loop) && dtIsOp(op, "scf.for") &&
        mlirOperationGetNumResults(op) > 0)
      loop = op;
  }
  return loop;
}

/* A float tensor of `type` filled with `value`, built before the sweep's
 * insertion point. */
static MlirValue filled(DtAd *ad, MlirOperation at, MlirType type,
                        const char *value) {
  char E[48];
  dtAdElementType(type, E, sizeof(E));
  DtBuf t = dtBufInit(ad->text, DT_AD_TEXT_SIZE);
  dtBufPrintf(&t, "func.func @adj() -> ");
  dtAdTypeText(&t, type);
  dtBufPrintf(&t,
              " {\n  %%c = arith.constant %s : %s\n  %%e = tensor.empty() : ",
              value, E);
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, "\n  %%r = linalg.fill ins(%%c : %s) outs(%%e : ", E);
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, ") -> ");
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, "\n  return %%r : ");
  dtAdTypeText(&t, type);
  dtBufPrintf(&t, "\n}\n");
  MlirValue r = {NULL};
  dtAdEmit(ad, at, &t, NULL, &r, 1);
  return r;
}

/* Gives `g` the return `operands` (its old return `ret` destroyed) and
 * the function type of its entry block's arguments and those operands. */
void dtAdReplaceReturn(MlirOperation g, MlirOperation ret,
                       const MlirValue *operands, intptr_t n) {
  MlirOperationState st =
      mlirOperationStateGet(mlirStringRefCreateFromCString("func.return"),
                            mlirOperationGetLocation(ret));
  mlirOperationStateAddOperands(&st, n, operands);
  MlirOperation newRet = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(ret), ret, newRet);
  mlirOperationDestroy(ret);
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(g, 0));
  /* A training step has three arguments per parameter: any number. */
  intptr_t numInputs = mlirBlockGetNumArguments(entry);
  MlirType *types = malloc(sizeof(MlirType) * (size_t)(numInputs + n + 1));
  if (!types) {
    dtOpError(g, "dtensor-autodiff: out of memory");
    return;
  }
  for (intptr_t i = 0; i < numInputs; ++i)
    types[i] = mlirValueGetType(mlirBlockGetArgument(entry, i));
  for (intptr_t i = 0; i < n; ++i)
    types[numInputs + i] = mlirValueGetType(operands[i]);
  mlirOperationSetAttributeByName(
      g, mlirStringRefCreateFromCString("function_type"),
      mlirTypeAttrGet(mlirFunctionTypeGet(mlirOperationGetContext(g), numInputs,
                                          types, n, types + numInputs)));
  free(types);
}

static MlirAttribute argAttr(MlirOperation f, intptr_t i, const char *name) {
  MlirAttribute attrs = dtGetAttr(f, "arg_attrs");
  if (mlirAttributeIsNull(attrs) || i >= mlirArrayAttrGetNumElements(attrs))
    return (MlirAttribute){NULL};
  return mlirDictionaryAttrGetElementByName(
      mlirArrayAttrGetElement(attrs, i), mlirStringRefCreateFromCString(name));
}

/* A copy of function `f` named `name`, inserted after it. */
static MlirOperation copyFunction(MlirOperation f, const char *name) {
  MlirOperation g = mlirOperationClone(f);
  mlirOperationSetAttributeByName(
      g, mlirStringRefCreateFromCString("sym_name"),
      mlirStringAttrGet(mlirOperationGetContext(f),
                        mlirStringRefCreateFromCString(name)));
  mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(f), f, g);
  return g;
}

/* How a sweep's return operands get their first adjoints. */
typedef struct Seeds {
  int which;       /* >= 0: ones for this return operand */
  MlirValue *args; /* else: the adjoint of return operand r is args[r]
                      (null: none) */
} Seeds;

/* The reverse sweep of function `g` (one block): its values that depend on
 * the `chosen` arguments are active, the return's operands are seeded by
 * `seeds`, every op is visited last to first, and `grads` receives the
 * gradient of each chosen argument (zeros when nothing flows to it). */
static bool sweep(Run *run, MlirOperation g, const bool *chosen,
                  const Seeds *seeds, MlirValue *grads, intptr_t *numGrads) {
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(g, 0));
  MlirOperation ret = mlirBlockGetTerminator(entry);
  DtAd ad = {mlirOperationGetContext(g), ret,   dtTableInit(sizeof(Entry)),
             malloc(DT_AD_TEXT_SIZE),    false, run};
  if (!ad.text)
    return false;
  /* Softmax as the generics it stands for, which have derivatives; loops
   * on the path unrolled, each iteration's values kept. */
  ad.failed = !dtDecomposeSoftmax(g) || !dtGathersMake(g, true);
  for (MlirOperation loop = markActive(&ad, entry, chosen);
       !mlirOperationIsNull(loop) && !ad.failed;
       loop = markActive(&ad, entry, chosen)) {
    dtTableFree(&ad.entries);
    ad.failed = !dtAdUnrollLoop(loop);
  }
  /* The forward ops, to visit last to first (the sweep's ops go after
   * them). */
  DtOpList forward = {NULL, 0, 0};
  for (MlirOperation op = mlirBlockGetFirstOperation(entry);
       !mlirOperationEqual(op, ret) && !ad.failed;
       op = mlirOperationGetNextInBlock(op))
    ad.failed = !dtOpListPush(&forward, op);
  for (intptr_t r = 0; r < mlirOperationGetNumOperands(ret) && !ad.failed;
       ++r) {
    MlirValue v = mlirOperationGetOperand(ret, r);
    if (seeds->which == r && entryOf(&ad, v))
      entryOf(&ad, v)->adjoint = filled(&ad, ret, mlirValueGetType(v), "1.0");
    else if (seeds->which < 0 && !mlirValueIsNull(seeds->args[r]))
      dtAdAccumulate(&ad, ret, v, seeds->args[r]);
  }
  for (size_t k = forward.count; k-- > 0 && !ad.failed;) {
    MlirOperation op = forward.ops[k];
    bool carries = false;
    for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r) {
      Entry *e = entryOf(&ad, mlirOperationGetResult(op, r));
      carries |= e && !mlirValueIsNull(e->adjoint);
    }
    if (carries)
      opAdjoint(&ad, op);
  }
  *numGrads = 0;
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry) && !ad.failed; ++i) {
    if (!chosen[i])
      continue;
    MlirValue arg = mlirBlockGetArgument(entry, i);
    Entry *e = entryOf(&ad, arg);
    grads[(*numGrads)++] = e && !mlirValueIsNull(e->adjoint)
                               ? e->adjoint
                               : filled(&ad, ret, mlirValueGetType(arg), "0.0");
  }
  bool ok = !ad.failed;
  dtTableFree(&ad.entries);
  free(forward.ops);
  free(ad.text);
  return ok;
}

/* ---- calls
 * --------------------------------------------------------------------- */

/* The vector-Jacobian product of @callee for the arguments `chosen`:
 * @<callee>_vjp<k>(its arguments, then an adjoint per float tensor result)
 * returns the chosen arguments' adjoints, recomputing the forward ops
 * (a checkpoint at the call). Built once per callee and argument set. */
static const char *vjpOf(Run *run, MlirOperation callee, const bool *chosen,
                         MlirOperation call) {
  MlirStringRef cname = mlirStringAttrGetValue(dtGetAttr(callee, "sym_name"));
  uint64_t mask = 0;
  intptr_t numArgs = mlirOperationGetNumOperands(call);
  for (intptr_t i = 0; i < numArgs && i < 64; ++i)
    mask |= (uint64_t)chosen[i] << i;
  for (size_t k = 0; k < run->count; ++k) {
    Vjp *v = &run->vjps[k];
    if (v->mask != mask || strlen(v->callee) != cname.length ||
        memcmp(v->callee, cname.data, cname.length))
      continue;
    if (v->inProgress) {
      dtOpError(call,
                "calls @%s recursively; dtensor-autodiff differentiates "
                "calls that do not recurse",
                v->callee);
      return NULL;
    }
    return v->name;
  }
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(callee, 0));
  if (numArgs > 64 || mlirOperationGetNumResults(call) > 64 ||
      mlirBlockIsNull(body) ||
      !mlirBlockIsNull(mlirBlockGetNextInRegion(body))) {
    dtOpError(call,
              "calls @%.*s, which dtensor-autodiff cannot differentiate "
              "(a declaration, several blocks, or over 64 arguments or "
              "results)",
              (int)cname.length, cname.data);
    return NULL;
  }
  Vjp *v = dtArrayPush((void **)&run->vjps, &run->count, &run->capacity,
                       sizeof(Vjp));
  if (!v)
    return NULL;
  size_t index = run->count - 1;
  snprintf(v->callee, sizeof(v->callee), "%.*s", (int)cname.length, cname.data);
  for (int k = 0;; ++k) {
    snprintf(v->name, sizeof(v->name), "%.*s_vjp%d", (int)cname.length,
             cname.data, k);
    if (mlirOperationIsNull(findFunction(run->module, v->name)))
      break;
  }
  v->mask = mask;
  v->inProgress = true;
  char name[256];
  snprintf(name, sizeof(name), "%s", v->name);
  MlirOperation g = copyFunction(callee, name);
  mlirOperationSetAttributeByName(
      g, mlirStringRefCreateFromCString("sym_visibility"),
      mlirStringAttrGet(mlirOperationGetContext(g),
                        mlirStringRefCreateFromCString("private")));
  mlirOperationRemoveAttributeByName(
      g, mlirStringRefCreateFromCString("res_attrs"));
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(g, 0));
  MlirOperation ret = mlirBlockGetTerminator(entry);
  intptr_t numResults = mlirOperationGetNumOperands(ret);
  MlirValue seedArgs[256] = {{NULL}};
  for (intptr_t r = 0; r < numResults && r < 256; ++r) {
    MlirValue res = mlirOperationGetOperand(ret, r);
    if (isFloatTensor(mlirValueGetType(res)))
      seedArgs[r] = mlirBlockAddArgument(entry, mlirValueGetType(res),
                                         mlirOperationGetLocation(call));
  }
  Seeds seeds = {-1, seedArgs};
  MlirValue grads[64];
  intptr_t numGrads = 0;
  bool ok = sweep(run, g, chosen, &seeds, grads, &numGrads);
  v = &run->vjps[index]; /* (the array may have moved) */
  v->inProgress = false;
  if (!ok)
    return NULL;
  dtAdReplaceReturn(g, mlirBlockGetTerminator(entry), grads, numGrads);
  return v->name;
}

/* A call's adjoint: a call of the callee's vjp function. */
static void callAdjoint(DtAd *ad, MlirOperation call) {
  Run *run = ad->run;
  MlirStringRef cname = dtCalleeName(call);
  char name[256];
  snprintf(name, sizeof(name), "%.*s", (int)cname.length, cname.data);
  MlirOperation callee = findFunction(run->module, name);
  intptr_t numArgs = mlirOperationGetNumOperands(call);
  bool chosen[64] = {false};
  bool any = false;
  for (intptr_t i = 0; i < numArgs && i < 64; ++i)
    any |= chosen[i] = dtAdActive(ad, mlirOperationGetOperand(call, i));
  if (!any)
    return;
  if (mlirOperationIsNull(callee)) {
    dtOpError(call, "calls @%s, which the module does not define", name);
    ad->failed = true;
    return;
  }
  const char *vjp = vjpOf(run, callee, chosen, call);
  if (!vjp) {
    ad->failed = true;
    return;
  }
  MlirValue operands[128];
  MlirType types[64];
  intptr_t n = 0, numGrads = 0;
  for (intptr_t i = 0; i < numArgs && n < 64; ++i)
    operands[n++] = mlirOperationGetOperand(call, i);
  for (intptr_t r = 0; r < mlirOperationGetNumResults(call) && n < 128; ++r) {
    MlirValue res = mlirOperationGetResult(call, r);
    if (!isFloatTensor(mlirValueGetType(res)))
      continue;
    MlirValue adj = dtAdAdjoint(ad, res);
    operands[n++] = mlirValueIsNull(adj)
                        ? filled(ad, ad->before, mlirValueGetType(res), "0.0")
                        : adj;
  }
  for (intptr_t i = 0; i < numArgs; ++i)
    if (chosen[i])
      types[numGrads++] = mlirValueGetType(mlirOperationGetOperand(call, i));
  MlirContext ctx = mlirOperationGetContext(call);
  MlirNamedAttribute callee_attr = dtNamedAttr(
      ctx, "callee",
      mlirFlatSymbolRefAttrGet(ctx, mlirStringRefCreateFromCString(vjp)));
  MlirOperationState st =
      mlirOperationStateGet(mlirStringRefCreateFromCString("func.call"),
                            mlirOperationGetLocation(call));
  mlirOperationStateAddOperands(&st, n, operands);
  mlirOperationStateAddResults(&st, numGrads, types);
  mlirOperationStateAddAttributes(&st, 1, &callee_attr);
  MlirOperation vcall = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(ad->before),
                                      ad->before, vcall);
  for (intptr_t i = 0, k = 0; i < numArgs; ++i)
    if (chosen[i])
      dtAdAccumulate(ad, call, mlirOperationGetOperand(call, i),
                     mlirOperationGetResult(vcall, k++));
}

/* Builds @<f><suffix> from @f. */
static bool differentiate(Run *run, MlirOperation f,
                          const DtPassOptions *options) {
  MlirStringRef fname = mlirStringAttrGetValue(dtGetAttr(f, "sym_name"));
  char gname[256];
  snprintf(gname, sizeof(gname), "%.*s%s", (int)fname.length, fname.data,
           dtPassOptionsGet(options, "suffix"));
  if (!mlirOperationIsNull(findFunction(run->module, gname))) {
    dtOpError(f, "dtensor-autodiff: the module already has a @%s", gname);
    return false;
  }
  MlirRegion region = mlirOperationGetRegion(f, 0);
  MlirBlock entry = mlirRegionGetFirstBlock(region);
  if (mlirBlockIsNull(entry) ||
      !mlirBlockIsNull(mlirBlockGetNextInRegion(entry))) {
    dtOpError(f, "dtensor-autodiff differentiates functions of one block");
    return false;
  }
  intptr_t numArgs = mlirBlockGetNumArguments(entry);
  MlirOperation ret = mlirBlockGetTerminator(entry);
  if (numArgs > 256 || mlirOperationGetNumOperands(ret) > 256) {
    dtOpError(f, "dtensor-autodiff differentiates functions of at most 256 "
                 "arguments and 256 results");
    return false;
  }
  int64_t which = dtPassOptionsGetInt(options, "result");
  if (which < 0 || which >= mlirOperationGetNumOperands(ret)) {
    dtOpError(f, "dtensor-autodiff: result=%lld, but @%.*s has %d results",
              (long long)which, (int)fname.length, fname.data,
              (int)mlirOperationGetNumOperands(ret));
    return false;
  }
  MlirType rt = mlirValueGetType(mlirOperationGetOperand(ret, which));
  bool scalar = isFloatTensor(rt) && mlirShapedTypeHasStaticShape(rt);
  for (intptr_t d = 0; scalar && d < mlirShapedTypeGetRank(rt); ++d)
    scalar = mlirShapedTypeGetDimSize(rt, d) == 1;
  if (!scalar) {
    char ts[256];
    dtTypePrint(rt, ts, sizeof(ts));
    dtOpError(f,
              "dtensor-autodiff: result %lld is %s; the gradient is of a "
              "scalar (a float tensor of one element, e.g. tensor<f32>)",
              (long long)which, ts);
    return false;
  }
  bool *chosen = calloc((size_t)numArgs + 1, sizeof(bool));
  if (!chosen ||
      !readWrt(f, dtPassOptionsGet(options, "wrt"), chosen, numArgs)) {
    free(chosen);
    return false;
  }
  /* The copy: forward ops as they are, then the sweep before its return. */
  MlirOperation g = copyFunction(f, gname);
  MlirBlock gEntry = mlirRegionGetFirstBlock(mlirOperationGetRegion(g, 0));
  MlirValue grads[256];
  intptr_t numGrads = 0;
  Seeds seeds = {(int)which, NULL};
  bool ok = sweep(run, g, chosen, &seeds, grads, &numGrads);
  if (ok) {
    MlirOperation gRet = mlirBlockGetTerminator(gEntry);
    intptr_t numOld = mlirOperationGetNumOperands(gRet);
    MlirValue all[512];
    for (intptr_t i = 0; i < numOld && i < 256; ++i)
      all[i] = mlirOperationGetOperand(gRet, i);
    for (intptr_t k = 0; k < numGrads; ++k)
      all[numOld + k] = grads[k];
    dtAdReplaceReturn(g, gRet, all, numOld + numGrads);
    /* A gradient is laid out as its argument. */
    for (intptr_t i = 0, k = 0; i < numArgs; ++i) {
      if (!chosen[i])
        continue;
      MlirAttribute layout = argAttr(f, i, DT_ATTR_LAYOUT);
      if (!mlirAttributeIsNull(layout))
        mlirFuncSetResultAttr(g, numOld + k,
                              mlirStringRefCreateFromCString(DT_ATTR_LAYOUT),
                              layout);
      ++k;
    }
    if (strcmp(dtPassOptionsGet(options, "optimizer"), "none"))
      ok = dtAdBuildStep(run->module, f, g, chosen, numOld, options);
  } else {
    mlirOperationDestroy(g);
  }
  free(chosen);
  return ok;
}

static bool runAutodiff(MlirOperation module, const DtPassOptions *options) {
  const char *name = dtPassOptionsGet(options, "function");
  if (!name[0]) {
    dtOpError(module, "dtensor-autodiff needs function=NAME (the function to "
                      "differentiate)");
    return false;
  }
  MlirOperation f = findFunction(module, name);
  if (mlirOperationIsNull(f) || !dtIsOp(f, "func.func")) {
    dtOpError(module, "dtensor-autodiff: the module has no function @%s", name);
    return false;
  }
  Run run = {module, NULL, 0, 0};
  bool ok = differentiate(&run, f, options);
  free(run.vjps);
  return ok;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"function", DTENSOR_OPTION_STRING, "", NULL,
     "the function to differentiate"},
    {"result", DTENSOR_OPTION_INT, "0", NULL,
     "which of its results is the scalar to differentiate (a float tensor "
     "of one element)"},
    {"wrt", DTENSOR_OPTION_STRING, "", NULL,
     "argument numbers to differentiate by, e.g. 1,2 (default: every float "
     "tensor argument)"},
    {"suffix", DTENSOR_OPTION_STRING, "_grad", NULL,
     "the new function's name is the function's with this suffix"},
    {"optimizer", DTENSOR_OPTION_ENUM, "none", "none|sgd|adam",
     "also add @<f>_step: the gradients applied to the differentiated "
     "arguments by SGD or Adam"},
    {"lr", DTENSOR_OPTION_STRING, "0.001", NULL, "the learning rate"},
    {"beta1", DTENSOR_OPTION_STRING, "0.9", NULL, "Adam's beta1"},
    {"beta2", DTENSOR_OPTION_STRING, "0.999", NULL, "Adam's beta2"},
    {"eps", DTENSOR_OPTION_STRING, "1e-8", NULL, "Adam's epsilon"},
};

const DtPassDef dtAutodiffPass = {
    .info = {"dtensor-autodiff",
             "Add @<f>_grad: @f's results, then the gradients of one scalar "
             "result by the chosen arguments (reverse mode); with optimizer=, "
             "@<f>_step applies them",
             9, kOptions},
    .verifyFirst = true,
    .run = runAutodiff,
    .numDependentDialects = 4,
    .dependentDialects = {mlirGetDialectHandle__arith__,
                          mlirGetDialectHandle__math__,
                          mlirGetDialectHandle__tensor__,
                          mlirGetDialectHandle__linalg__},
};
