/* dtensor-lower-contractions: after bufferization, every floating-point
 * contraction C += A·B on memrefs — linalg.matmul, batch_matmul, matvec,
 * vecmat, dot, their transposed forms, linalg.contract, or a linalg.generic
 * whose indexing maps are projected permutations and whose body multiplies
 * its two inputs and adds the product to its output — becomes a call of
 * libdtensor_rt's dtrt_mlir_contract_<a>_<b>_<c> (runtime/Contract.c: a
 * BLAS call per point of the loops BLAS does not take) with the maps as a
 * constant global. The recognition reads only indexing maps and the body,
 * so any transposition, strided view or batch dims are taken. Integer
 * contractions, bodies that do anything else (a cast other than extf, an
 * activation folded in) and element types the runtime has no entry for
 * stay linalg ops, for convert-linalg-to-loops. */
#include "PassDef.h"
#include "RuntimeCall.h"
#include "Table.h"
#include "Util.h"

#include "dtensor-rt/Runtime.h"
#include "mlir-c/AffineExpr.h"
#include "mlir-c/AffineMap.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/Linalg.h"
#include "mlir-c/Dialect/MemRef.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LOOPS 16 /* the runtime's limit */

/* The (A, B, C) element types the runtime has an entry for. */
static bool runtimeTakes(const char *a, const char *b, const char *c) {
  static const char *const kTypes[][3] = {
#define DT_CONTRACT_ROW(x, y, z) {#x, #y, #z},
      DTRT_CONTRACT_TYPES(DT_CONTRACT_ROW)
#undef DT_CONTRACT_ROW
  };
  for (size_t i = 0; i < sizeof(kTypes) / sizeof(kTypes[0]); ++i)
    if (!strcmp(kTypes[i][0], a) && !strcmp(kTypes[i][1], b) &&
        !strcmp(kTypes[i][2], c))
      return true;
  return false;
}

static bool valueIs(MlirValue v, MlirValue w) { return mlirValueEqual(v, w); }

/* `v` is block argument `arg`, or an arith.extf of it. */
static bool readsArg(MlirValue v, MlirValue arg) {
  if (valueIs(v, arg))
    return true;
  if (!mlirValueIsAOpResult(v))
    return false;
  MlirOperation def = mlirOpResultGetOwner(v);
  return dtIsOp(def, "arith.extf") &&
         valueIs(mlirOperationGetOperand(def, 0), arg);
}

/* The body is exactly yield(out + a * b), with extf on a and b allowed. */
static bool isMulAddBody(MlirOperation op) {
  if (mlirOperationGetNumRegions(op) != 1)
    return false;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (mlirBlockIsNull(body) || mlirBlockGetNumArguments(body) != 3)
    return false;
  MlirValue a = mlirBlockGetArgument(body, 0), b = mlirBlockGetArgument(body, 1),
            c = mlirBlockGetArgument(body, 2);
  MlirValue product = {NULL}, sum = {NULL};
  for (MlirOperation o = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (dtIsOp(o, "arith.extf")) {
      MlirValue x = mlirOperationGetOperand(o, 0);
      if (!valueIs(x, a) && !valueIs(x, b))
        return false;
    } else if (dtIsOp(o, "arith.mulf") && !product.ptr) {
      MlirValue x = mlirOperationGetOperand(o, 0),
                y = mlirOperationGetOperand(o, 1);
      if (!((readsArg(x, a) && readsArg(y, b)) ||
            (readsArg(x, b) && readsArg(y, a))))
        return false;
      product = mlirOperationGetResult(o, 0);
    } else if (dtIsOp(o, "arith.addf") && product.ptr && !sum.ptr) {
      MlirValue x = mlirOperationGetOperand(o, 0),
                y = mlirOperationGetOperand(o, 1);
      if (!((valueIs(x, c) && valueIs(y, product)) ||
            (valueIs(x, product) && valueIs(y, c))))
        return false;
      sum = mlirOperationGetResult(o, 0);
    } else if (dtIsOp(o, "linalg.yield")) {
      return sum.ptr && mlirOperationGetNumOperands(o) == 1 &&
             valueIs(mlirOperationGetOperand(o, 0), sum);
    } else {
      return false;
    }
  }
  return false;
}

/* The loops each operand's dims read, flattened after the loop count into
 * `out` (1 + the ranks); false when a map is not a projected permutation
 * or there are more loops than the runtime takes. */
static bool readMaps(MlirOperation op, int64_t *out, int *outCount) {
  MlirAttribute maps = mlirLinalgGetIndexingMapsAttribute(op);
  if (mlirAttributeIsNull(maps) || mlirArrayAttrGetNumElements(maps) != 3)
    return false;
  int n = 1;
  for (intptr_t i = 0; i < 3; ++i) {
    MlirAffineMap map =
        mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, i));
    intptr_t loops = mlirAffineMapGetNumDims(map);
    if (loops > MAX_LOOPS || mlirAffineMapGetNumSymbols(map))
      return false;
    out[0] = loops;
    for (intptr_t r = 0; r < mlirAffineMapGetNumResults(map); ++r) {
      MlirAffineExpr e = mlirAffineMapGetResult(map, r);
      if (!mlirAffineExprIsADim(e) || n >= 1 + 3 * MAX_LOOPS)
        return false;
      out[n++] = mlirAffineDimExprGetPosition(e);
    }
  }
  *outCount = n;
  return true;
}

typedef struct Lower {
  DtRtBuilder b;
  bool failed;
} Lower;

/* One contraction on memrefs to a runtime call; false when it stays a
 * linalg op. */
static bool lowerOne(Lower *l, MlirOperation op) {
  if (mlirOperationGetNumOperands(op) != 3 || !isMulAddBody(op))
    return false;
  const char *names[3];
  MlirType types[3];
  for (int i = 0; i < 3; ++i) {
    types[i] = mlirValueGetType(mlirOperationGetOperand(op, i));
    if (!mlirTypeIsAMemRef(types[i]))
      return false;
    int64_t code;
    names[i] = dtRtTypeName(mlirShapedTypeGetElementType(types[i]), &code);
    if (!names[i])
      return false;
  }
  if (!runtimeTakes(names[0], names[1], names[2]))
    return false;
  int64_t maps[1 + 3 * MAX_LOOPS];
  int numMaps;
  if (!readMaps(op, maps, &numMaps))
    return false;
  /* One global per distinct set of maps: __dtensor_contract_<values>. */
  char sym[8 + 20 + 4 * (1 + 3 * MAX_LOOPS)] = "__dtensor_contract";
  size_t at = strlen(sym);
  for (int i = 0; i < numMaps; ++i)
    at += (size_t)snprintf(sym + at, sizeof(sym) - at, "_%lld",
                           (long long)maps[i]);
  MlirLocation loc = mlirOperationGetLocation(op);
  dtRtEnsureGlobal(&l->b, sym, numMaps, maps, loc);
  char callee[64];
  snprintf(callee, sizeof(callee), "dtrt_mlir_contract_%s_%s_%s", names[0],
           names[1], names[2]);
  MlirType inputs[4] = {
      mlirUnrankedMemRefTypeGet(mlirIntegerTypeGet(l->b.ctx, 64),
                                mlirAttributeGetNull())};
  for (int i = 0; i < 3; ++i)
    inputs[1 + i] = mlirUnrankedMemRefTypeGet(
        mlirShapedTypeGetElementType(types[i]), mlirAttributeGetNull());
  dtRtEnsureCallee(&l->b, callee,
                   mlirFunctionTypeGet(l->b.ctx, 4, inputs, 0, NULL), loc);
  MlirValue args[4] = {dtRtGlobal(&l->b, sym, numMaps, op)};
  for (int i = 0; i < 3; ++i)
    args[1 + i] = dtRtCastUnranked(&l->b, mlirOperationGetOperand(op, i), op);
  dtRtCall(&l->b, callee, loc, 4, args, op);
  mlirOperationDestroy(op);
  return true;
}

static MlirWalkResult collect(MlirOperation op, void *userData) {
  if (mlirLinalgIsAContractionOp(op) &&
      !dtOpListPush(userData, op))
    return MlirWalkResultInterrupt;
  return MlirWalkResultAdvance;
}

static bool runLowerContractions(MlirOperation root,
                                 const DtPassOptions *options) {
  (void)options;
  Lower l = {dtRtBuilderBegin(root), false};
  DtOpList found = {NULL, 0, 0};
  mlirOperationWalk(root, collect, &found, MlirWalkPreOrder);
  for (size_t i = 0; i < found.count; ++i) {
    MlirOperation op = found.ops[i];
    if (mlirOperationGetNumResults(op) > 0) {
      MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
      char message[256];
      snprintf(message, sizeof(message),
               "'%.*s' op is on tensors: dtensor-lower-contractions runs on "
               "memrefs, after one-shot-bufferize",
               (int)name.length, name.data);
      mlirEmitError(mlirOperationGetLocation(op), message);
      l.failed = true;
      break;
    }
    lowerOne(&l, op);
  }
  free(found.ops);
  dtRtBuilderEnd(&l.b);
  return !l.failed;
}

const DtPassDef dtLowerContractionsPass = {
    .info = {"dtensor-lower-contractions",
             "Turn every floating-point contraction on memrefs (matmul, "
             "batch_matmul, matvec, dot, transposed or generic) into a BLAS "
             "call of libdtensor_rt (dtrt_mlir_contract_<types>)",
             0, NULL},
    .verifyFirst = false,
    .run = runLowerContractions,
    .numDependentDialects = 3,
    .dependentDialects = {mlirGetDialectHandle__memref__,
                          mlirGetDialectHandle__arith__,
                          mlirGetDialectHandle__func__},
};
