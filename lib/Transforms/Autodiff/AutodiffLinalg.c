/* dtensor-autodiff's adjoints of linalg ops and of elementwise ops on
 * tensors (Autodiff.h): for input i, a linalg.generic over the op's loops
 * whose output map is input i's and whose body is the op's body followed by
 * its scalar derivative (AutodiffScalar.c). */
#include "Autodiff.h"
#include "Dialect/DialectInternal.h"
#include "Util.h"

#include "mlir-c/AffineExpr.h"
#include "mlir-c/AffineMap.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Linalg.h"

#include <stdio.h>

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

/* Whether `v` is defined inside `op`'s regions. */
static bool definedInside(MlirValue v, MlirOperation op) {
  MlirBlock block = mlirValueIsABlockArgument(v)
                        ? mlirBlockArgumentGetOwner(v)
                        : mlirOperationGetBlock(mlirOpResultGetOwner(v));
  if (mlirBlockIsNull(block))
    return false;
  for (MlirOperation p = mlirBlockGetParentOperation(block);
       !mlirOperationIsNull(p); p = mlirOperationGetParentOperation(p))
    if (mlirOperationEqual(p, op))
      return true;
  return false;
}

typedef struct ActiveRead {
  DtAd *ad;
  MlirOperation op;     /* the linalg op */
  MlirOperation reader; /* the body op that reads an active value */
  MlirValue value;
} ActiveRead;

static MlirWalkResult findActiveRead(MlirOperation b, void *user) {
  ActiveRead *a = user;
  if (mlirOperationEqual(b, a->op))
    return MlirWalkResultAdvance;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(b); ++i) {
    MlirValue v = mlirOperationGetOperand(b, i);
    if (!definedInside(v, a->op) && dtAdActive(a->ad, v)) {
      a->reader = b;
      a->value = v;
      return MlirWalkResultInterrupt;
    }
  }
  return MlirWalkResultAdvance;
}

/* A body that reads a value on the gradient's path other than through the
 * op's operands gets no adjoint for it; without one the gradient would be
 * silently zero, so it is a located error. (dtensor-gathers has made every
 * lookup it can take apart a dtensor.gather operand before this.) */
static bool readsActiveFromOutside(DtAd *ad, MlirOperation op) {
  ActiveRead a = {ad, op, {NULL}, {NULL}};
  mlirOperationWalk(op, findActiveRead, &a, MlirWalkPreOrder);
  if (mlirOperationIsNull(a.reader))
    return false;
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(a.reader));
  dtOpError(op,
            "reads a value on the gradient's path from inside its body "
            "('%.*s' uses it, not an operand of the op) in a way "
            "dtensor-gathers cannot make a gather of (an index read from "
            "an accumulator or inside a nested region): pass the tensor "
            "as an input with an indexing map",
            (int)name.length, name.data);
  return true;
}

/* The contribution of a linalg op (or an elementwise op on tensors, with
 * `elementwise` set) to each active input. */
void dtAdLinalgAdjoint(DtAd *ad, MlirOperation op, bool elementwise) {
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
  MlirValue dy = dtAdAdjoint(ad, y);
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
    if (readsActiveFromOutside(ad, op)) {
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
         !mlirOperationEqual(b, yield); b = mlirOperationGetNextInBlock(b)) {
      if (numOps == 256) {
        /* Never a derivative of part of the body. */
        dtOpError(op, "has a body of more than 256 ops; dtensor-autodiff "
                      "differentiates bodies of at most 256");
        ad->failed = true;
        return;
      }
      ops[numOps++] = b;
    }
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
    /* The body first: it says which inputs the derivative reads. */
    bool keepRoot = kind == MAX || kind == MIN;
    bool used[2 * MAX_LINALG_OPERANDS + 2] = {false};
    char adj[DT_AD_NAME];
    MlirOperation bad = {NULL};
    DtBuf body = dtBufInit(ad->text + DT_AD_TEXT_SIZE / 2, DT_AD_TEXT_SIZE / 2);
    if (!dtAdScalarVjp(&body, &sc, root, "%bg", (int)i, "s", keepRoot, used,
                       adj, &bad)) {
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
    if (keepRoot) {
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
      dtBufPrintf(&body,
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
      dtBufPrintf(&body, "    %%sum = arith.addf %%acc, %s : %s\n", adj, Ex);
    dtBufPrintf(&body, "    linalg.yield %s : %s\n", reduces ? "%sum" : adj,
                Ex);
    /* The op's inputs the body reads, then the result (for max and min),
     * the result's adjoint, and the init (when the body reads it). */
    bool useInit = !mlirValueIsNull(out) && used[numInputs];
    MlirValue args[MAX_LINALG_OPERANDS + 3 + MAX_LINALG_OPERANDS];
    MlirAttribute argMaps[MAX_LINALG_OPERANDS + 3];
    char argNames[MAX_LINALG_OPERANDS + 3][DT_AD_NAME];
    int n = 0;
    for (intptr_t k = 0; k < numInputs; ++k)
      if (used[k]) {
        args[n] = mlirOperationGetOperand(op, k);
        argMaps[n] = elementwise ? outMap : mlirArrayAttrGetElement(maps, k);
        snprintf(argNames[n++], DT_AD_NAME, "%%b%d", (int)k);
      }
    if (keepRoot) {
      args[n] = y;
      argMaps[n] = outMap;
      snprintf(argNames[n++], DT_AD_NAME, "%%by");
    }
    args[n] = dy;
    argMaps[n] = outMap;
    snprintf(argNames[n++], DT_AD_NAME, "%%bg");
    if (useInit) {
      args[n] = mlirOperationGetOperand(op, numOperands - 1);
      argMaps[n] = outMap;
      snprintf(argNames[n++], DT_AD_NAME, "%%bo");
    }
    int numIns = n;
    for (int k = 0; k < numCaps; ++k)
      args[n++] = caps[k];
    DtBuf t = dtBufInit(ad->text, DT_AD_TEXT_SIZE / 2);
    dtBufPrintf(&t, "func.func @adj(");
    /* (Captured scalars keep their names: the body reads them.) */
    for (int k = 0; k < n; ++k) {
      if (k < numIns)
        dtBufPrintf(&t, "%s%%a%d: ", k ? ", " : "", k);
      else
        dtBufPrintf(&t, ", %%cap%d: ", k - numIns);
      dtAdTypeText(&t, mlirValueGetType(args[k]));
    }
    dtBufPrintf(&t, ") -> ");
    dtAdTypeText(&t, tx);
    dtBufPrintf(&t, " {\n");
    dtAdZeros(&t, "z", tx);
    dtBufPrintf(&t, "  %%r = linalg.generic {indexing_maps = [");
    for (int k = 0; k <= numIns; ++k) {
      dtBufPrintf(&t, "%s", k ? ", " : "");
      MlirAttribute m = k < numIns ? argMaps[k] : inMap;
      if (!mlirAttributeIsNull(m))
        mapText(&t, m);
      else
        dtAdIdentityMap(&t, rank);
    }
    dtBufPrintf(&t, "], iterator_types = [");
    for (int l = 0; l < numLoops; ++l)
      dtBufPrintf(&t, "%s\"%s\"", l ? ", " : "",
                  elementwise || mapUses(mlirAffineMapAttrGetValue(inMap), l)
                      ? "parallel"
                      : "reduction");
    dtBufPrintf(&t, "]} ins(");
    for (int k = 0; k < numIns; ++k)
      dtBufPrintf(&t, "%s%%a%d", k ? ", " : "", k);
    dtBufPrintf(&t, " : ");
    for (int k = 0; k < numIns; ++k) {
      dtBufPrintf(&t, "%s", k ? ", " : "");
      dtAdTypeText(&t, mlirValueGetType(args[k]));
    }
    dtBufPrintf(&t, ") outs(%%z : ");
    dtAdTypeText(&t, tx);
    dtBufPrintf(&t, ") {\n  ^bb0(");
    for (int k = 0; k < numIns; ++k) {
      char E[48];
      dtAdElementType(mlirValueGetType(args[k]), E, sizeof(E));
      dtBufPrintf(&t, "%s: %s, ", argNames[k], E);
    }
    dtBufPrintf(&t, "%%acc: %s):\n", Ex);
    dtBufAppend(&t, body.data,
                body.length < body.capacity ? body.length : body.capacity);
    if (body.length >= body.capacity)
      t.length = t.capacity;
    dtBufPrintf(&t, "  } -> ");
    dtAdTypeText(&t, tx);
    dtBufPrintf(&t, "\n  return %%r : ");
    dtAdTypeText(&t, tx);
    dtBufPrintf(&t, "\n}\n");
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
