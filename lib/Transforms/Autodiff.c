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
 *   the op's body followed by its scalar derivative (AutodiffScalar.c).
 *   The body may write its result (elementwise), add into its accumulator
 *   (sums and contractions), or take the max or min of it (the adjoint goes
 *   to the elements equal to the result);
 * - elementwise arith and math ops on tensors, the same way;
 * - tensor.extract_slice, insert_slice, pad, concat, expand_shape,
 *   collapse_shape and dtensor.annotate, by their inverses;
 * - linalg.softmax decomposed first (dtensor-decompose-softmax);
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
#include "Table.h"
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
static void identityMap(DtBuf *t, int rank) {
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
    identityMap(&t, rank);
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

/* ---- linalg ops ------------------------------------------------------------
 */

typedef enum Combine { ELEMENTWISE, SUM, MAX, MIN } Combine;

static bool dependsOn(MlirValue v, MlirValue on, int depth) {
  if (mlirValueEqual(v, on))
    return true;
  if (!mlirValueIsAOpResult(v) || depth > 64)
    return false;
  MlirOperation def = mlirOpResultGetOwner(v);
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i)
    if (dependsOn(mlirOperationGetOperand(def, i), on, depth + 1))
      return true;
  return false;
}

/* How the body of a linalg op with accumulator `out` (null: none) makes
 * `yielded`; `*root` is what the derivative starts from. */
static bool combineOf(MlirBlock body, MlirValue out, MlirValue yielded,
                      Combine *kind, MlirValue *root) {
  *root = yielded;
  *kind = ELEMENTWISE;
  if (mlirValueIsNull(out) || !dependsOn(yielded, out, 0))
    return true;
  if (!mlirValueIsAOpResult(yielded))
    return false;
  MlirOperation c = mlirOpResultGetOwner(yielded);
  if (!mlirBlockEqual(mlirOperationGetBlock(c), body) ||
      mlirOperationGetNumOperands(c) != 2)
    return false;
  MlirValue a = mlirOperationGetOperand(c, 0),
            b = mlirOperationGetOperand(c, 1);
  MlirValue other = mlirValueEqual(a, out)   ? b
                    : mlirValueEqual(b, out) ? a
                                             : out;
  if (mlirValueEqual(other, out) || dependsOn(other, out, 0))
    return false;
  *root = other;
  if (dtIsOp(c, "arith.addf"))
    *kind = SUM;
  else if (dtIsOp(c, "arith.maximumf") || dtIsOp(c, "arith.maxnumf"))
    *kind = MAX;
  else if (dtIsOp(c, "arith.minimumf") || dtIsOp(c, "arith.minnumf"))
    *kind = MIN;
  else
    return false;
  return true;
}

static bool isProjection(MlirAffineMap m) {
  unsigned seen = 0;
  for (intptr_t r = 0; r < mlirAffineMapGetNumResults(m); ++r) {
    MlirAffineExpr e = mlirAffineMapGetResult(m, r);
    if (!mlirAffineExprIsADim(e))
      return false;
    unsigned bit = 1u << mlirAffineDimExprGetPosition(e);
    if (seen & bit)
      return false;
    seen |= bit;
  }
  return true;
}

static bool mapUses(MlirAffineMap m, intptr_t dim) {
  for (intptr_t r = 0; r < mlirAffineMapGetNumResults(m); ++r)
    if (mlirAffineExprIsFunctionOfDim(mlirAffineMapGetResult(m, r), dim))
      return true;
  return false;
}

static void mapText(DtBuf *t, MlirAttribute map) {
  dtBufPrintf(t, "affine_map<");
  mlirAffineMapPrint(mlirAffineMapAttrGetValue(map), dtBufSink, t);
  dtBufPrintf(t, ">");
}

#define MAX_LINALG_OPERANDS 32

/* Values the body uses from outside the op (function-level scalars). */
static int captures(MlirBlock body, MlirValue *out, int max) {
  int n = 0;
  for (MlirOperation b = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(b); b = mlirOperationGetNextInBlock(b))
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(b); ++i) {
      MlirValue v = mlirOperationGetOperand(b, i);
      bool inside =
          mlirValueIsABlockArgument(v)
              ? mlirBlockEqual(mlirBlockArgumentGetOwner(v), body)
              : mlirBlockEqual(mlirOperationGetBlock(mlirOpResultGetOwner(v)),
                               body);
      bool known = false;
      for (int k = 0; k < n; ++k)
        known |= mlirValueEqual(out[k], v);
      if (!inside && !known && n < max)
        out[n++] = v;
    }
  return n;
}

/* The contribution of a linalg op (or an elementwise op on tensors, with
 * `elementwise` set) to each active input. */
static void linalgAdjoint(DtAd *ad, MlirOperation op, bool elementwise) {
  intptr_t numOperands = mlirOperationGetNumOperands(op);
  intptr_t numInputs = elementwise ? numOperands : numOperands - 1;
  if (mlirOperationGetNumResults(op) != 1 ||
      numOperands > MAX_LINALG_OPERANDS) {
    dtOpError(op,
              "has %d results and %d operands; dtensor-autodiff "
              "differentiates linalg ops of one result and at most %d "
              "operands",
              (int)mlirOperationGetNumResults(op), (int)numOperands,
              MAX_LINALG_OPERANDS);
    ad->failed = true;
    return;
  }
  MlirValue y = mlirOperationGetResult(op, 0);
  MlirType ty = mlirValueGetType(y);
  int rank = (int)mlirShapedTypeGetRank(ty);
  MlirValue dy = entryOf(ad, y)->adjoint;
  /* The scalar code, its inputs and its accumulator. */
  MlirOperation ops[256];
  int numOps = 0;
  MlirValue inputs[2 * MAX_LINALG_OPERANDS + 2];
  char names[2 * MAX_LINALG_OPERANDS + 2][DT_AD_NAME];
  const char *namePtrs[2 * MAX_LINALG_OPERANDS + 2];
  MlirValue root = y, out = {NULL}, caps[MAX_LINALG_OPERANDS];
  MlirAttribute maps = {NULL};
  Combine kind = ELEMENTWISE;
  int numCaps = 0, numLoops = rank;
  MlirBlock body = {NULL};
  if (elementwise) {
    ops[numOps++] = op;
    for (intptr_t i = 0; i < numOperands; ++i)
      inputs[i] = mlirOperationGetOperand(op, i);
  } else {
    if (mlirOperationGetNumRegions(op) != 1) {
      dtOpError(op, "is not a structured linalg op; dtensor-autodiff "
                    "differentiates those");
      ad->failed = true;
      return;
    }
    maps = mlirLinalgGetIndexingMapsAttribute(op);
    body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
    MlirOperation yield = mlirBlockGetTerminator(body);
    intptr_t numArgs = mlirBlockGetNumArguments(body);
    if (mlirAttributeIsNull(maps) || numArgs < numInputs ||
        mlirOperationGetNumOperands(yield) != 1) {
      dtOpError(op, "has no indexing maps or body dtensor-autodiff reads");
      ad->failed = true;
      return;
    }
    for (intptr_t i = 0; i < numInputs; ++i)
      inputs[i] = mlirBlockGetArgument(body, i);
    if (numArgs > numInputs)
      out = mlirBlockGetArgument(body, numInputs);
    for (MlirOperation b = mlirBlockGetFirstOperation(body);
         !mlirOperationEqual(b, yield) && numOps < 256;
         b = mlirOperationGetNextInBlock(b))
      ops[numOps++] = b;
    if (!combineOf(body, out, mlirOperationGetOperand(yield, 0), &kind,
                   &root)) {
      dtOpError(op, "combines its accumulator other than by add, max or min "
                    "(dtensor-autodiff differentiates those)");
      ad->failed = true;
      return;
    }
    numLoops = (int)mlirAffineMapGetNumDims(
        mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, 0)));
    numCaps = captures(body, caps, MAX_LINALG_OPERANDS);
  }
  int numNamed = (int)numInputs;
  for (int i = 0; i < numNamed; ++i)
    snprintf(names[i], DT_AD_NAME, "%%b%d", i);
  if (!mlirValueIsNull(out)) {
    inputs[numNamed] = out;
    snprintf(names[numNamed++], DT_AD_NAME, "%%bo");
  }
  for (int k = 0; k < numCaps; ++k) {
    inputs[numNamed] = caps[k];
    snprintf(names[numNamed++], DT_AD_NAME, "%%cap%d", k);
  }
  for (int i = 0; i < numNamed; ++i)
    namePtrs[i] = names[i];
  DtAdScalar sc = {ops, numOps, inputs, namePtrs, numNamed};
  MlirAttribute outMap = elementwise
                             ? (MlirAttribute){NULL}
                             : mlirArrayAttrGetElement(maps, numOperands - 1);
  if (!elementwise && kind == ELEMENTWISE)
    for (int l = 0; l < numLoops; ++l)
      if (!mapUses(mlirAffineMapAttrGetValue(outMap), l)) {
        dtOpError(op, "has a reduction loop but does not accumulate into its "
                      "result");
        ad->failed = true;
        return;
      }
  for (intptr_t i = 0; i < numInputs && !ad->failed; ++i) {
    MlirValue x = mlirOperationGetOperand(op, i);
    if (!dtAdActive(ad, x))
      continue;
    MlirType tx = mlirValueGetType(x);
    MlirAttribute inMap =
        elementwise ? (MlirAttribute){NULL} : mlirArrayAttrGetElement(maps, i);
    if (!elementwise && !isProjection(mlirAffineMapAttrGetValue(inMap))) {
      dtOpError(op,
                "reads operand %d through an indexing map that is not a "
                "projection; dtensor-autodiff cannot write its adjoint",
                (int)i);
      ad->failed = true;
      return;
    }
    char Ex[48], Ey[48];
    dtAdElementType(tx, Ex, sizeof(Ex));
    dtAdElementType(ty, Ey, sizeof(Ey));
    DtBuf t = dtBufInit(ad->text, DT_AD_TEXT_SIZE);
    dtBufPrintf(&t, "func.func @adj(");
    for (intptr_t k = 0; k < numInputs; ++k) {
      dtBufPrintf(&t, "%%x%d: ", (int)k);
      dtAdTypeText(&t, mlirValueGetType(mlirOperationGetOperand(op, k)));
      dtBufPrintf(&t, ", ");
    }
    dtBufPrintf(&t, "%%y: ");
    dtAdTypeText(&t, ty);
    dtBufPrintf(&t, ", %%dy: ");
    dtAdTypeText(&t, ty);
    dtBufPrintf(&t, ", %%init: ");
    dtAdTypeText(&t, ty);
    for (int k = 0; k < numCaps; ++k) {
      dtBufPrintf(&t, ", %%cap%d: ", k);
      dtAdTypeText(&t, mlirValueGetType(caps[k]));
    }
    dtBufPrintf(&t, ") -> ");
    dtAdTypeText(&t, tx);
    dtBufPrintf(&t, " {\n");
    dtAdZeros(&t, "z", tx);
    dtBufPrintf(&t, "  %%r = linalg.generic {indexing_maps = [");
    for (intptr_t k = 0; k < numInputs + 4; ++k) {
      dtBufPrintf(&t, "%s", k ? ", " : "");
      MlirAttribute m =
          k < numInputs
              ? (elementwise ? outMap : mlirArrayAttrGetElement(maps, k))
          : k < numInputs + 3 ? outMap
                              : inMap;
      if (!mlirAttributeIsNull(m)) {
        mapText(&t, m);
        continue;
      }
      identityMap(&t, rank);
    }
    dtBufPrintf(&t, "], iterator_types = [");
    for (int l = 0; l < numLoops; ++l)
      dtBufPrintf(&t, "%s\"%s\"", l ? ", " : "",
                  elementwise || mapUses(mlirAffineMapAttrGetValue(inMap), l)
                      ? "parallel"
                      : "reduction");
    dtBufPrintf(&t, "]} ins(");
    for (intptr_t k = 0; k < numInputs; ++k)
      dtBufPrintf(&t, "%%x%d, ", (int)k);
    dtBufPrintf(&t, "%%y, %%dy, %%init : ");
    for (intptr_t k = 0; k < numInputs; ++k) {
      dtAdTypeText(&t, mlirValueGetType(mlirOperationGetOperand(op, k)));
      dtBufPrintf(&t, ", ");
    }
    for (int k = 0; k < 3; ++k) {
      dtAdTypeText(&t, ty);
      dtBufPrintf(&t, "%s", k < 2 ? ", " : "");
    }
    dtBufPrintf(&t, ") outs(%%z : ");
    dtAdTypeText(&t, tx);
    dtBufPrintf(&t, ") {\n  ^bb0(");
    for (intptr_t k = 0; k < numInputs; ++k) {
      char E[48];
      dtAdElementType(mlirValueGetType(elementwise ? inputs[k] : inputs[k]), E,
                      sizeof(E));
      dtBufPrintf(&t, "%%b%d: %s, ", (int)k, E);
    }
    dtBufPrintf(&t, "%%by: %s, %%bg: %s, %%bo%s: %s, %%acc: %s):\n", Ey, Ey,
                mlirValueIsNull(out) ? "_unused" : "", Ey, Ex);
    char adj[DT_AD_NAME];
    MlirOperation bad = {NULL};
    if (!dtAdScalarVjp(&t, &sc, root, "%bg", (int)i, "s", adj, &bad)) {
      if (mlirOperationIsNull(bad))
        ad->failed = true;
      else if (elementwise)
        dtOpError(op, "has no derivative in dtensor-autodiff");
      else
        dtOpError(op,
                  "has '%.*s' in its body, which dtensor-autodiff cannot "
                  "differentiate",
                  (int)mlirIdentifierStr(mlirOperationGetName(bad)).length,
                  mlirIdentifierStr(mlirOperationGetName(bad)).data);
      ad->failed = true;
      return;
    }
    if (!adj[0])
      continue; /* the result does not depend on this input */
    if (kind == MAX || kind == MIN) {
      /* The adjoint goes where the element is the result. */
      const char *rootName = NULL;
      char found[DT_AD_NAME];
      for (int k = 0; k < numNamed && !rootName; ++k)
        if (mlirValueEqual(inputs[k], root))
          rootName = names[k];
      for (int k = 0; k < numOps && !rootName; ++k)
        if (mlirValueEqual(mlirOperationGetResult(ops[k], 0), root)) {
          snprintf(found, sizeof(found), "%%sf%d", k);
          rootName = found;
        }
      dtBufPrintf(&t,
                  "    %%eq = arith.cmpf oeq, %s, %%by : %s\n"
                  "    %%zr = arith.constant 0.0 : %s\n"
                  "    %%m = arith.select %%eq, %s, %%zr : %s\n",
                  rootName, Ey, Ex, adj, Ex);
      snprintf(adj, sizeof(adj), "%%m");
    }
    /* Loops outside input i's map add up; otherwise the body writes its
     * element (reading no init: see accumulate). */
    bool reduces = false;
    for (int l = 0; l < numLoops && !elementwise; ++l)
      reduces |= !mapUses(mlirAffineMapAttrGetValue(inMap), l);
    if (reduces)
      dtBufPrintf(&t, "    %%sum = arith.addf %%acc, %s : %s\n", adj, Ex);
    dtBufPrintf(&t, "    linalg.yield %s : %s\n  } -> ", reduces ? "%sum" : adj,
                Ex);
    dtAdTypeText(&t, tx);
    dtBufPrintf(&t, "\n  return %%r : ");
    dtAdTypeText(&t, tx);
    dtBufPrintf(&t, "\n}\n");
    MlirValue args[MAX_LINALG_OPERANDS + 3 + MAX_LINALG_OPERANDS];
    int n = 0;
    for (intptr_t k = 0; k < numInputs; ++k)
      args[n++] = mlirOperationGetOperand(op, k);
    args[n++] = y;
    args[n++] = dy;
    args[n++] = elementwise ? y : mlirOperationGetOperand(op, numOperands - 1);
    for (int k = 0; k < numCaps; ++k)
      args[n++] = caps[k];
    MlirValue dx;
    if (dtAdEmit(ad, op, &t, args, &dx, 1))
      dtAdAccumulate(ad, op, x, dx);
  }
  if (elementwise || ad->failed)
    return;
  /* The accumulator's initial value: added into a sum as it is. */
  MlirValue init = mlirOperationGetOperand(op, numOperands - 1);
  if (dtAdActive(ad, init)) {
    if (kind == SUM) {
      dtAdAccumulate(ad, op, init, dy);
    } else if (kind != ELEMENTWISE) {
      dtOpError(op, "takes the max or min into an initial value that depends "
                    "on the differentiated arguments");
      ad->failed = true;
    }
  }
}

static bool startsWith(MlirOperation op, const char *prefix) {
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  return n.length >= strlen(prefix) && !memcmp(n.data, prefix, strlen(prefix));
}

/* The reverse sweep's step for one op whose result carries an adjoint. */
static void opAdjoint(DtAd *ad, MlirOperation op) {
  bool tensorResult =
      mlirOperationGetNumResults(op) >= 1 &&
      mlirTypeIsARankedTensor(mlirValueGetType(mlirOperationGetResult(op, 0)));
  if (startsWith(op, "linalg."))
    linalgAdjoint(ad, op, false);
  else if ((startsWith(op, "arith.") || startsWith(op, "math.")) &&
           tensorResult && mlirOperationGetNumRegions(op) == 0)
    linalgAdjoint(ad, op, true);
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

/* Marks the values that depend on the chosen arguments. */
static void markActive(DtAd *ad, MlirBlock entry, const bool *chosen) {
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry); ++i)
    if (chosen[i])
      activate(ad, mlirBlockGetArgument(entry, i));
  for (MlirOperation op = mlirBlockGetFirstOperation(entry);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    bool any = false;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op) && !any; ++i)
      any = entryOf(ad, mlirOperationGetOperand(op, i)) != NULL;
    for (intptr_t r = 0; r < mlirOperationGetNumResults(op) && any; ++r)
      activate(ad, mlirOperationGetResult(op, r));
  }
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

/* Appends `extra` results to the return and the type of `g`. */
static void appendResults(MlirOperation g, MlirOperation ret,
                          const MlirValue *extra, intptr_t numExtra) {
  MlirContext ctx = mlirOperationGetContext(g);
  intptr_t numOld = mlirOperationGetNumOperands(ret);
  MlirValue operands[256];
  MlirType types[256];
  for (intptr_t i = 0; i < numOld + numExtra; ++i) {
    operands[i] =
        i < numOld ? mlirOperationGetOperand(ret, i) : extra[i - numOld];
    types[i] = mlirValueGetType(operands[i]);
  }
  MlirOperationState st =
      mlirOperationStateGet(mlirStringRefCreateFromCString("func.return"),
                            mlirOperationGetLocation(ret));
  mlirOperationStateAddOperands(&st, numOld + numExtra, operands);
  MlirOperation newRet = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(ret), ret, newRet);
  mlirOperationDestroy(ret);
  MlirType fnType = mlirTypeAttrGetValue(dtGetAttr(g, "function_type"));
  intptr_t numInputs = mlirFunctionTypeGetNumInputs(fnType);
  MlirType inputs[256];
  for (intptr_t i = 0; i < numInputs; ++i)
    inputs[i] = mlirFunctionTypeGetInput(fnType, i);
  mlirOperationSetAttributeByName(
      g, mlirStringRefCreateFromCString("function_type"),
      mlirTypeAttrGet(mlirFunctionTypeGet(ctx, numInputs, inputs,
                                          numOld + numExtra, types)));
}

static MlirAttribute argAttr(MlirOperation f, intptr_t i, const char *name) {
  MlirAttribute attrs = dtGetAttr(f, "arg_attrs");
  if (mlirAttributeIsNull(attrs) || i >= mlirArrayAttrGetNumElements(attrs))
    return (MlirAttribute){NULL};
  return mlirDictionaryAttrGetElementByName(
      mlirArrayAttrGetElement(attrs, i), mlirStringRefCreateFromCString(name));
}

/* Builds @<f><suffix> from @f. */
static bool differentiate(MlirOperation module, MlirOperation f,
                          const DtPassOptions *options) {
  MlirStringRef fname = mlirStringAttrGetValue(dtGetAttr(f, "sym_name"));
  char gname[256];
  snprintf(gname, sizeof(gname), "%.*s%s", (int)fname.length, fname.data,
           dtPassOptionsGet(options, "suffix"));
  if (!mlirOperationIsNull(findFunction(module, gname))) {
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
  MlirOperation g = mlirOperationClone(f);
  mlirOperationSetAttributeByName(
      g, mlirStringRefCreateFromCString("sym_name"),
      mlirStringAttrGet(mlirOperationGetContext(f),
                        mlirStringRefCreateFromCString(gname)));
  mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(f), f, g);
  MlirBlock gEntry = mlirRegionGetFirstBlock(mlirOperationGetRegion(g, 0));
  MlirOperation gRet = mlirBlockGetTerminator(gEntry);
  DtAd ad = {mlirOperationGetContext(f), gRet, dtTableInit(sizeof(Entry)),
             malloc(DT_AD_TEXT_SIZE), false};
  if (!ad.text) {
    free(chosen);
    return false;
  }
  /* Softmax as the generics it stands for, which have derivatives. */
  ad.failed = !dtDecomposeSoftmax(g);
  markActive(&ad, gEntry, chosen);
  MlirValue result = mlirOperationGetOperand(gRet, which);
  /* The forward ops, to visit last to first (the sweep's ops go after
   * them). */
  DtOpList forward = {NULL, 0, 0};
  for (MlirOperation op = mlirBlockGetFirstOperation(gEntry);
       !mlirOperationEqual(op, gRet) && !ad.failed;
       op = mlirOperationGetNextInBlock(op))
    ad.failed = !dtOpListPush(&forward, op);
  if (entryOf(&ad, result))
    entryOf(&ad, result)->adjoint = filled(&ad, gRet, rt, "1.0");
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
  MlirValue grads[256];
  intptr_t numGrads = 0;
  for (intptr_t i = 0; i < numArgs && !ad.failed && numGrads < 256; ++i) {
    if (!chosen[i])
      continue;
    MlirValue arg = mlirBlockGetArgument(gEntry, i);
    Entry *e = entryOf(&ad, arg);
    grads[numGrads++] = e && !mlirValueIsNull(e->adjoint)
                            ? e->adjoint
                            : filled(&ad, gRet, mlirValueGetType(arg), "0.0");
  }
  bool ok = !ad.failed;
  if (ok) {
    intptr_t numOld = mlirOperationGetNumOperands(gRet);
    appendResults(g, gRet, grads, numGrads);
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
  } else {
    mlirOperationDestroy(g);
  }
  dtTableFree(&ad.entries);
  free(forward.ops);
  free(ad.text);
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
  return differentiate(module, f, options);
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
};

const DtPassDef dtAutodiffPass = {
    .info = {"dtensor-autodiff",
             "Add @<f>_grad: @f's results, then the gradients of one scalar "
             "result by the chosen arguments (reverse mode)",
             4, kOptions},
    .verifyFirst = true,
    .run = runAutodiff,
    .numDependentDialects = 4,
    .dependentDialects = {mlirGetDialectHandle__arith__,
                          mlirGetDialectHandle__math__,
                          mlirGetDialectHandle__tensor__,
                          mlirGetDialectHandle__linalg__},
};
