/* Op sharding rules, one entry per op family:
 *  - linalg ops (named and generic): factors are the loops, read from the
 *    indexing maps; a loop no init map uses is a reduction, whose combiner
 *    is read from the body (addf/addi → sum, maximumf/maxsi → max, ...);
 *  - arith/math elementwise ops on tensors: one factor per dim;
 *  - tensor.empty, tensor.splat, arith.constant: free (their users decide);
 *  - anything else with tensors: replicated. */
#include "Rules.h"

#include "mlir-c/AffineExpr.h"
#include "mlir-c/AffineMap.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Linalg.h"

#include <string.h>

static bool nameIs(MlirOperation op, const char *name) {
  return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)),
                            mlirStringRefCreateFromCString(name));
}

static bool nameStarts(MlirOperation op, const char *prefix) {
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  size_t k = strlen(prefix);
  return n.length >= k && memcmp(n.data, prefix, k) == 0;
}

static bool isRankedTensor(MlirType t) {
  return mlirTypeIsARankedTensor(t) &&
         mlirShapedTypeGetRank(t) <= DTENSOR_MAX_TENSOR_RANK;
}

/* The combiner a reduction body yields: the op defining each yielded value,
 * which all results must agree on; NONE if it is not a known one. */
static DtensorReduceKind bodyCombiner(MlirOperation op) {
  if (mlirOperationGetNumRegions(op) < 1)
    return DTENSOR_REDUCE_NONE;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (mlirBlockIsNull(body))
    return DTENSOR_REDUCE_NONE;
  MlirOperation yield = mlirBlockGetTerminator(body);
  if (mlirOperationIsNull(yield) || mlirOperationGetNumOperands(yield) == 0)
    return DTENSOR_REDUCE_NONE;
  static const struct {
    const char *name;
    DtensorReduceKind kind;
  } kCombiners[] = {
      {"arith.addf", DTENSOR_REDUCE_SUM},     {"arith.addi", DTENSOR_REDUCE_SUM},
      {"arith.mulf", DTENSOR_REDUCE_PROD},    {"arith.muli", DTENSOR_REDUCE_PROD},
      {"arith.maximumf", DTENSOR_REDUCE_MAX}, {"arith.maxnumf", DTENSOR_REDUCE_MAX},
      {"arith.maxsi", DTENSOR_REDUCE_MAX},    {"arith.maxui", DTENSOR_REDUCE_MAX},
      {"arith.minimumf", DTENSOR_REDUCE_MIN}, {"arith.minnumf", DTENSOR_REDUCE_MIN},
      {"arith.minsi", DTENSOR_REDUCE_MIN},    {"arith.minui", DTENSOR_REDUCE_MIN},
  };
  DtensorReduceKind found = DTENSOR_REDUCE_NONE;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(yield); ++i) {
    MlirValue v = mlirOperationGetOperand(yield, i);
    if (!mlirValueIsAOpResult(v))
      return DTENSOR_REDUCE_NONE;
    MlirOperation def = mlirOpResultGetOwner(v);
    DtensorReduceKind kind = DTENSOR_REDUCE_NONE;
    for (size_t k = 0; k < sizeof(kCombiners) / sizeof(kCombiners[0]); ++k)
      if (nameIs(def, kCombiners[k].name))
        kind = kCombiners[k].kind;
    if (kind == DTENSOR_REDUCE_NONE || (i > 0 && kind != found))
      return DTENSOR_REDUCE_NONE;
    found = kind;
  }
  return found;
}

/* Reads the dims of one indexing map: the factor of each result that is a
 * plain loop dim, -1 for any other expression. */
static bool readMap(MlirAttribute mapAttr, int numFactors, int *outFactor,
                    int rank) {
  if (!mlirAttributeIsAAffineMap(mapAttr))
    return false;
  MlirAffineMap map = mlirAffineMapAttrGetValue(mapAttr);
  if (mlirAffineMapGetNumDims(map) != numFactors ||
      mlirAffineMapGetNumResults(map) != rank)
    return false;
  for (int d = 0; d < rank; ++d) {
    MlirAffineExpr e = mlirAffineMapGetResult(map, d);
    outFactor[d] =
        mlirAffineExprIsADim(e) ? (int)mlirAffineDimExprGetPosition(e) : -1;
  }
  return true;
}

static void replicate(DtRule *r, const char *why) {
  r->kind = DT_RULE_REPLICATE;
  r->family = why;
}

static void linalgRule(MlirOperation op, DtRule *r) {
  MlirAttribute maps = mlirLinalgGetIndexingMapsAttribute(op);
  intptr_t numOperands = mlirOperationGetNumOperands(op);
  if (mlirAttributeIsNull(maps) || !mlirAttributeIsAArray(maps) ||
      mlirArrayAttrGetNumElements(maps) != numOperands ||
      numOperands < r->numResults) {
    replicate(r, "a linalg op without indexing maps for every operand");
    return;
  }
  MlirAffineMap first =
      mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, 0));
  int numFactors = (int)mlirAffineMapGetNumDims(first);
  if (numFactors > DT_MAX_FACTORS) {
    replicate(r, "a linalg op with more loops than the propagator handles");
    return;
  }
  r->kind = DT_RULE_FACTORS;
  r->family = "linalg";
  r->numFactors = numFactors;
  /* Tensor semantics: the last numResults operands are the inits, one per
   * result, with the result's map. */
  int numInputs = (int)numOperands - r->numResults;
  bool usedByInit[DT_MAX_FACTORS] = {false};
  for (int i = 0; i < (int)numOperands; ++i) {
    MlirType t = mlirValueGetType(mlirOperationGetOperand(op, i));
    int rank = r->operandIsTensor[i] ? (int)mlirShapedTypeGetRank(t) : 0;
    int *factors = r->operandFactor[i];
    /* Scalars (fill's value) have maps with no results. */
    if (!readMap(mlirArrayAttrGetElement(maps, i), numFactors, factors,
                 rank)) {
      replicate(r, "a linalg op whose indexing maps do not match its "
                   "operand ranks");
      return;
    }
    r->isInit[i] = i >= numInputs;
    if (i >= numInputs) {
      for (int d = 0; d < rank; ++d)
        if (factors[d] >= 0)
          usedByInit[factors[d]] = true;
      memcpy(r->resultFactor[i - numInputs], factors, sizeof(int) * (size_t)rank);
    }
  }
  DtensorReduceKind combiner = bodyCombiner(op);
  for (int f = 0; f < numFactors; ++f) {
    r->reduce[f] = usedByInit[f] ? DTENSOR_REDUCE_NONE : combiner;
    r->shardable[f] = usedByInit[f] || combiner != DTENSOR_REDUCE_NONE;
  }
  if (mlirLinalgIsAContractionOp(op)) {
    r->flow = DT_FLOW_ONE_LINEAR;
    for (int i = 0; i < numInputs; ++i)
      r->linear[i] = true;
  } else if (nameIs(op, "linalg.add") || nameIs(op, "linalg.sub")) {
    r->flow = DT_FLOW_ALL_SUM;
  } else if (nameIs(op, "linalg.mul")) {
    r->flow = DT_FLOW_ONE_LINEAR;
    for (int i = 0; i < numInputs; ++i)
      r->linear[i] = true;
  }
}

/* arith/math elementwise: every tensor operand and result of one shape. */
static bool elementwiseRule(MlirOperation op, DtRule *r) {
  if (!(nameStarts(op, "arith.") || nameStarts(op, "math.")) ||
      mlirOperationGetNumRegions(op) != 0 || r->numResults == 0)
    return false;
  MlirType shape = mlirValueGetType(mlirOperationGetResult(op, 0));
  if (!r->resultIsTensor[0])
    return false;
  for (int i = 0; i < r->numOperands; ++i) {
    MlirType t = mlirValueGetType(mlirOperationGetOperand(op, i));
    if (!r->operandIsTensor[i] ||
        !mlirShapedTypeHasStaticShape(t) ||
        mlirShapedTypeGetRank(t) != mlirShapedTypeGetRank(shape))
      return false;
    for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); ++d)
      if (mlirShapedTypeGetDimSize(t, d) != mlirShapedTypeGetDimSize(shape, d))
        return false;
  }
  int rank = (int)mlirShapedTypeGetRank(shape);
  r->kind = DT_RULE_FACTORS;
  r->family = "elementwise";
  r->numFactors = rank;
  for (int f = 0; f < rank; ++f) {
    r->reduce[f] = DTENSOR_REDUCE_NONE;
    r->shardable[f] = true;
  }
  for (int i = 0; i < r->numOperands; ++i)
    for (int d = 0; d < rank; ++d)
      r->operandFactor[i][d] = d;
  for (int i = 0; i < r->numResults; ++i)
    for (int d = 0; d < rank; ++d)
      r->resultFactor[i][d] = d;
  static const char *const kSum[] = {"arith.addf", "arith.subf", "arith.addi",
                                     "arith.subi", "arith.negf"};
  for (size_t k = 0; k < sizeof(kSum) / sizeof(kSum[0]); ++k)
    if (nameIs(op, kSum[k]))
      r->flow = DT_FLOW_ALL_SUM;
  if (nameIs(op, "arith.mulf") || nameIs(op, "arith.muli")) {
    r->flow = DT_FLOW_ONE_LINEAR;
    for (int i = 0; i < r->numOperands; ++i)
      r->linear[i] = true;
  } else if (nameIs(op, "arith.divf")) {
    r->flow = DT_FLOW_ONE_LINEAR;
    r->linear[0] = true;
  }
  return true;
}

void dtRuleGet(MlirOperation op, DtRule *r) {
  memset(r, 0, sizeof(*r));
  intptr_t numOperands = mlirOperationGetNumOperands(op);
  intptr_t numResults = mlirOperationGetNumResults(op);
  if (numOperands > DT_MAX_RULE_VALUES || numResults > DT_MAX_RULE_VALUES) {
    replicate(r, "an op with more operands or results than the propagator "
                 "handles");
    return;
  }
  r->numOperands = (int)numOperands;
  r->numResults = (int)numResults;
  bool anyTensor = false, tensorInput = false;
  for (int i = 0; i < r->numOperands; ++i) {
    r->operandIsTensor[i] =
        isRankedTensor(mlirValueGetType(mlirOperationGetOperand(op, i)));
    anyTensor |= r->operandIsTensor[i];
    tensorInput |= r->operandIsTensor[i];
  }
  for (int i = 0; i < r->numResults; ++i) {
    r->resultIsTensor[i] =
        isRankedTensor(mlirValueGetType(mlirOperationGetResult(op, i)));
    anyTensor |= r->resultIsTensor[i];
  }
  for (int i = 0; i < DT_MAX_RULE_VALUES; ++i)
    for (int d = 0; d < DTENSOR_MAX_TENSOR_RANK; ++d)
      r->operandFactor[i][d] = r->resultFactor[i][d] = -1;
  if (!anyTensor) {
    r->kind = DT_RULE_NONE;
    r->family = "no tensors";
    return;
  }
  if (nameStarts(op, "linalg.")) {
    linalgRule(op, r);
    return;
  }
  if (!tensorInput && mlirOperationGetNumRegions(op) == 0 &&
      (nameIs(op, "tensor.empty") || nameIs(op, "arith.constant") ||
       nameIs(op, "tensor.splat"))) {
    r->kind = DT_RULE_FREE;
    r->family = "free";
    return;
  }
  if (elementwiseRule(op, r))
    return;
  replicate(r, "an op with no sharding rule");
}
