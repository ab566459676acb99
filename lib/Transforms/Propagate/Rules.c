/* Op sharding rules, one entry per op family:
 *  - linalg ops (named and generic): factors are the loops, read from the
 *    indexing maps; a loop no init map uses is a reduction, whose combiner
 *    is read from the body (addf/addi → sum, maximumf/maxsi → max, ...);
 *  - arith/math elementwise ops on tensors: one factor per dim;
 *  - linalg.softmax: every dim but the normalized one;
 *  - tensor.extract_slice/insert_slice, tensor.pad, tensor.concat: a dim
 *    kept whole is one factor through the op; a sliced, padded or
 *    concatenated dim is replicated;
 *  - tensor.empty, tensor.splat, arith.constant: free (their users decide);
 *  - dtensor.gather and dtensor.scatter_add: their `dims`, an einsum rule;
 *  - tosa elementwise, matmul, reductions, transpose, concat: einsum rules
 *    made from each op (RulesTosa.c);
 *  - an einsum rule: the op's `dtensor.rule` attribute or one an embedder
 *    registered for its name ("ij,jk->ik"; factors missing from every
 *    output are reductions, of sum unless the rule ends in ":max" etc.);
 *  - anything else with tensors: replicated.
 * Which Partial operands an op passes through is read from its body
 * (RulesLinear.c). */
#include "Rules.h"
#include "Partition/PartitionInternal.h"
#include "Util.h"

#include "mlir-c/AffineExpr.h"
#include "mlir-c/AffineMap.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Linalg.h"

#include "Support/Support.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool isRankedTensor(MlirType t) {
  return mlirTypeIsARankedTensor(t) &&
         mlirShapedTypeGetRank(t) <= DTENSOR_MAX_TENSOR_RANK;
}

enum { MAX_COMBINER_BODY_OPS = 256 };

/* Whether `v` depends on an accumulator: a block argument of `body` from
 * `numInputs` on, or a result of one of the `count` ops in `tainted`. */
static bool readsAccumulator(MlirValue v, MlirBlock body, int numInputs,
                             const void *const *tainted, int count) {
  if (mlirValueIsABlockArgument(v))
    return mlirBlockEqual(mlirBlockArgumentGetOwner(v), body) &&
           mlirBlockArgumentGetArgNumber(v) >= numInputs;
  MlirOperation def = mlirOpResultGetOwner(v);
  for (int k = 0; k < count; ++k)
    if (tainted[k] == def.ptr)
      return true;
  return false;
}

/* Whether each yielded value i is acc_i (+) f(inputs): an op whose one
 * operand is the accumulator of result i (block argument numInputs + i)
 * and whose other operand reads no accumulator. Only then may devices
 * reduce their parts of a split loop and combine the results: in
 * acc * 0.5 + x, or a select on acc, each element's weight depends on
 * where the loop starts. */
static bool combinesAccumulators(MlirOperation op, MlirBlock body,
                                 int numInputs, MlirOperation yield) {
  const void *tainted[MAX_COMBINER_BODY_OPS];
  int count = 0;
  for (MlirOperation o = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(o) && !mlirOperationEqual(o, yield);
       o = mlirOperationGetNextInBlock(o)) {
    /* A nested region may read an accumulator without an operand. */
    if (mlirOperationGetNumRegions(o) > 0)
      return false;
    bool reads = false;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(o) && !reads; ++i)
      reads = readsAccumulator(mlirOperationGetOperand(o, i), body, numInputs,
                               tainted, count);
    if (!reads)
      continue;
    if (count == MAX_COMBINER_BODY_OPS)
      return false;
    tainted[count++] = o.ptr;
  }
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(yield); ++i) {
    MlirValue acc;
    MlirOperation def = dtReductionCombiner(op, numInputs, (int)i, &acc);
    if (mlirOperationIsNull(def))
      return false;
    int accAt = mlirValueEqual(mlirOperationGetOperand(def, 0), acc) ? 0 : 1;
    if (readsAccumulator(mlirOperationGetOperand(def, 1 - accAt), body,
                         numInputs, tainted, count))
      return false;
  }
  return true;
}

/* The combiner a reduction body yields: the op defining each yielded value,
 * which all results must agree on, applied to the result's accumulator and
 * a value of the inputs alone; NONE if it is not a known one or the body
 * is not of that form. */
static DtensorReduceKind bodyCombiner(MlirOperation op, int numInputs) {
  if (mlirOperationGetNumRegions(op) < 1)
    return DTENSOR_REDUCE_NONE;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (mlirBlockIsNull(body))
    return DTENSOR_REDUCE_NONE;
  MlirOperation yield = mlirBlockGetTerminator(body);
  if (mlirOperationIsNull(yield) || mlirOperationGetNumOperands(yield) == 0 ||
      !combinesAccumulators(op, body, numInputs, yield))
    return DTENSOR_REDUCE_NONE;
  static const struct {
    const char *name;
    DtensorReduceKind kind;
  } kCombiners[] = {
      {"arith.addf", DTENSOR_REDUCE_SUM},
      {"arith.addi", DTENSOR_REDUCE_SUM},
      {"arith.mulf", DTENSOR_REDUCE_PROD},
      {"arith.muli", DTENSOR_REDUCE_PROD},
      {"arith.maximumf", DTENSOR_REDUCE_MAX},
      {"arith.maxnumf", DTENSOR_REDUCE_MAX},
      {"arith.maxsi", DTENSOR_REDUCE_MAX},
      {"arith.maxui", DTENSOR_REDUCE_MAX},
      {"arith.minimumf", DTENSOR_REDUCE_MIN},
      {"arith.minnumf", DTENSOR_REDUCE_MIN},
      {"arith.minsi", DTENSOR_REDUCE_MIN},
      {"arith.minui", DTENSOR_REDUCE_MIN},
  };
  DtensorReduceKind found = DTENSOR_REDUCE_NONE;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(yield); ++i) {
    MlirValue v = mlirOperationGetOperand(yield, i);
    if (!mlirValueIsAOpResult(v))
      return DTENSOR_REDUCE_NONE;
    MlirOperation def = mlirOpResultGetOwner(v);
    DtensorReduceKind kind = DTENSOR_REDUCE_NONE;
    for (size_t k = 0; k < sizeof(kCombiners) / sizeof(kCombiners[0]); ++k)
      if (dtIsOp(def, kCombiners[k].name))
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

static bool linalgRule(MlirOperation op, DtRule *r) {
  MlirAttribute maps = mlirLinalgGetIndexingMapsAttribute(op);
  intptr_t numOperands = mlirOperationGetNumOperands(op);
  if (mlirAttributeIsNull(maps) || !mlirAttributeIsAArray(maps) ||
      mlirArrayAttrGetNumElements(maps) != numOperands ||
      numOperands < r->numResults) {
    replicate(r, "a linalg op without indexing maps for every operand");
    return true;
  }
  MlirAffineMap first =
      mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, 0));
  int numFactors = (int)mlirAffineMapGetNumDims(first);
  if (numFactors > DT_MAX_FACTORS) {
    replicate(r, "a linalg op with more loops than the propagator handles");
    return true;
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
    if (!readMap(mlirArrayAttrGetElement(maps, i), numFactors, factors, rank)) {
      replicate(r, "a linalg op whose indexing maps do not match its "
                   "operand ranks");
      return true;
    }
    r->isInit[i] = i >= numInputs;
    if (i >= numInputs) {
      for (int d = 0; d < rank; ++d)
        if (factors[d] >= 0)
          usedByInit[factors[d]] = true;
      memcpy(r->resultFactor[i - numInputs], factors,
             sizeof(int) * (size_t)rank);
    }
  }
  DtensorReduceKind combiner = bodyCombiner(op, numInputs);
  for (int f = 0; f < numFactors; ++f) {
    r->reduce[f] = usedByInit[f] ? DTENSOR_REDUCE_NONE : combiner;
    r->shardable[f] = usedByInit[f] || combiner != DTENSOR_REDUCE_NONE;
  }
  dtRuleReadLinearity(op, numInputs, r);
  return true;
}

/* arith/math elementwise: every tensor operand and result of one shape. */
static bool elementwiseRule(MlirOperation op, DtRule *r) {
  if (!(dtIsOpIn(op, "arith.") || dtIsOpIn(op, "math.")) ||
      mlirOperationGetNumRegions(op) != 0 || r->numResults == 0)
    return false;
  MlirType shape = mlirValueGetType(mlirOperationGetResult(op, 0));
  if (!r->resultIsTensor[0])
    return false;
  for (int i = 0; i < r->numOperands; ++i) {
    MlirType t = mlirValueGetType(mlirOperationGetOperand(op, i));
    if (!r->operandIsTensor[i] || !mlirShapedTypeHasStaticShape(t) ||
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
  dtRuleReadLinearity(op, r->numOperands, r);
  return true;
}

/* ---- tensor ops that keep some dims whole ------------------------------- */

static MlirAttribute attrOf(MlirOperation op, const char *name) {
  return mlirOperationGetAttributeByName(op,
                                         mlirStringRefCreateFromCString(name));
}

static int64_t arrayAt(MlirAttribute a, intptr_t i) {
  return mlirDenseI64ArrayGetElement(a, i);
}

/* One factor per dim of `rank`, shared by the listed tensor operands and
 * the result, except the dims `keep` says are not kept whole. */
static void keptDims(DtRule *r, const char *family, int rank, const bool *keep,
                     const int *tensorOperands, int count) {
  r->kind = DT_RULE_FACTORS;
  r->family = family;
  r->numFactors = rank;
  for (int d = 0; d < rank; ++d) {
    r->shardable[d] = keep[d];
    r->reduce[d] = DTENSOR_REDUCE_NONE;
    r->resultFactor[0][d] = keep[d] ? d : -1;
    for (int k = 0; k < count; ++k)
      r->operandFactor[tensorOperands[k]][d] = keep[d] ? d : -1;
  }
}

static bool sliceRule(MlirOperation op, DtRule *r) {
  bool extract = dtIsOp(op, "tensor.extract_slice");
  MlirAttribute offsets = attrOf(op, "static_offsets");
  MlirAttribute sizes = attrOf(op, "static_sizes");
  MlirAttribute strides = attrOf(op, "static_strides");
  if (mlirAttributeIsNull(offsets) || mlirAttributeIsNull(sizes) ||
      mlirAttributeIsNull(strides) || !mlirAttributeIsADenseI64Array(offsets))
    return false;
  /* The big tensor (source of extract, dest of insert) and the small one. */
  MlirType big = mlirValueGetType(mlirOperationGetOperand(op, extract ? 0 : 1));
  MlirType small = extract ? mlirValueGetType(mlirOperationGetResult(op, 0))
                           : mlirValueGetType(mlirOperationGetOperand(op, 0));
  int rank = (int)mlirShapedTypeGetRank(big);
  if (!mlirTypeIsARankedTensor(small) || mlirShapedTypeGetRank(small) != rank ||
      mlirDenseArrayGetNumElements(offsets) != rank || rank > DT_MAX_FACTORS)
    return false; /* rank-reducing slices: replicated */
  bool keep[DT_MAX_FACTORS] = {false};
  for (int d = 0; d < rank; ++d)
    keep[d] = arrayAt(offsets, d) == 0 && arrayAt(strides, d) == 1 &&
              arrayAt(sizes, d) == mlirShapedTypeGetDimSize(big, d) &&
              !mlirShapedTypeIsDynamicDim(big, d);
  int tensors[2] = {0, 1};
  keptDims(r, extract ? "extract_slice" : "insert_slice", rank, keep, tensors,
           extract ? 1 : 2);
  /* An extract of one of the equal groups of a dim (offset and size a
   * multiple of the size that divides it: q out of a fused qkv) sees the
   * dim as [groups, size] and takes the size factor whole: a shard of
   * that factor is an interleaved shard of the dim (S0i3) and a plain
   * shard of the slice. */
  for (int d = 0; extract && d < rank; ++d) {
    int64_t n = mlirShapedTypeGetDimSize(big, d), size = arrayAt(sizes, d);
    if (keep[d] || mlirShapedTypeIsDynamicDim(big, d) ||
        arrayAt(strides, d) != 1 || size <= 0 || n % size != 0 ||
        arrayAt(offsets, d) % size != 0 || r->numFactors == DT_MAX_FACTORS ||
        r->numCompounds == DT_MAX_COMPOUNDS)
      continue;
    int groups = r->numFactors++;
    r->shardable[groups] = false;
    r->reduce[groups] = DTENSOR_REDUCE_NONE;
    r->factorSize[groups] = n / size;
    r->shardable[d] = true;
    r->factorSize[d] = size;
    r->resultFactor[0][d] = d;
    DtCompound *c = &r->compound[r->numCompounds];
    c->count = 2;
    c->factor[0] = groups;
    c->factor[1] = d;
    r->operandFactor[0][d] = -2 - r->numCompounds++;
  }
  /* A slice of a sum is the sum of the slices; an insert keeps sums when
   * both tensors are sums. */
  r->flow = extract ? DT_FLOW_ONE_LINEAR : DT_FLOW_ALL_SUM;
  r->linear[0] = extract;
  return true;
}

static bool padRule(MlirOperation op, DtRule *r) {
  MlirAttribute low = attrOf(op, "static_low"),
                high = attrOf(op, "static_high");
  MlirType t = mlirValueGetType(mlirOperationGetOperand(op, 0));
  int rank = (int)mlirShapedTypeGetRank(t);
  if (mlirAttributeIsNull(low) || mlirAttributeIsNull(high) ||
      mlirDenseArrayGetNumElements(low) != rank || rank > DT_MAX_FACTORS)
    return false;
  bool keep[DT_MAX_FACTORS];
  for (int d = 0; d < rank; ++d)
    keep[d] = arrayAt(low, d) == 0 && arrayAt(high, d) == 0;
  int tensors[1] = {0};
  keptDims(r, "pad", rank, keep, tensors, 1);
  if (dtRuleYieldsZero(op)) { /* zeros keep sums */
    r->flow = DT_FLOW_ONE_LINEAR;
    r->linear[0] = true;
  }
  return true;
}

static bool concatRule(MlirOperation op, DtRule *r) {
  MlirAttribute dim = attrOf(op, "dim");
  MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
  int rank = (int)mlirShapedTypeGetRank(t);
  if (mlirAttributeIsNull(dim) || !mlirAttributeIsAInteger(dim) ||
      rank > DT_MAX_FACTORS || r->numOperands > DT_MAX_RULE_VALUES)
    return false;
  bool keep[DT_MAX_FACTORS];
  for (int d = 0; d < rank; ++d)
    keep[d] = d != mlirIntegerAttrGetValueInt(dim);
  int tensors[DT_MAX_RULE_VALUES];
  for (int i = 0; i < r->numOperands; ++i)
    tensors[i] = i;
  keptDims(r, "concat", rank, keep, tensors, r->numOperands);
  r->flow = DT_FLOW_ALL_SUM;
  return true;
}

/* linalg.softmax: every dim but the one it normalizes along. */
static bool softmaxRule(MlirOperation op, DtRule *r) {
  MlirAttribute dim = attrOf(op, "dimension");
  MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
  int rank = (int)mlirShapedTypeGetRank(t);
  if (mlirAttributeIsNull(dim) || !mlirAttributeIsAInteger(dim) ||
      r->numOperands != 2 || rank > DT_MAX_FACTORS)
    return false;
  bool keep[DT_MAX_FACTORS];
  for (int d = 0; d < rank; ++d)
    keep[d] = d != mlirIntegerAttrGetValueInt(dim);
  int tensors[2] = {0, 1};
  keptDims(r, "softmax", rank, keep, tensors, 2);
  r->isInit[1] = true;
  return true;
}

/* ---- reshapes ------------------------------------------------------------ */

/* collapse_shape and expand_shape: a factor per dim of the finer side; each
 * dim of the coarser side is its group of factors (a compound dim, major
 * first), so a sharded flat dim splits its axes over the group where the
 * sizes allow (docs/propagation.md). */
static bool reshapeRule(MlirOperation op, DtRule *r) {
  bool collapse = dtIsOp(op, "tensor.collapse_shape");
  MlirAttribute groups = attrOf(op, "reassociation");
  MlirType src = mlirValueGetType(mlirOperationGetOperand(op, 0));
  MlirType dst = mlirValueGetType(mlirOperationGetResult(op, 0));
  MlirType fine = collapse ? src : dst, coarse = collapse ? dst : src;
  if (mlirAttributeIsNull(groups) || !mlirAttributeIsAArray(groups) ||
      !mlirShapedTypeHasStaticShape(fine) ||
      !mlirShapedTypeHasStaticShape(coarse) ||
      mlirShapedTypeGetRank(fine) > DT_MAX_FACTORS ||
      mlirArrayAttrGetNumElements(groups) != mlirShapedTypeGetRank(coarse))
    return false;
  int numFactors = (int)mlirShapedTypeGetRank(fine);
  int fineSlot = collapse ? 0 : -1, coarseSlot = collapse ? -1 : 0;
  int *fineDims = collapse ? r->operandFactor[0] : r->resultFactor[0];
  int *coarseDims = collapse ? r->resultFactor[0] : r->operandFactor[0];
  (void)fineSlot;
  (void)coarseSlot;
  r->kind = DT_RULE_FACTORS;
  r->family = collapse ? "collapse_shape" : "expand_shape";
  r->numFactors = numFactors;
  for (int f = 0; f < numFactors; ++f) {
    r->shardable[f] = true;
    r->reduce[f] = DTENSOR_REDUCE_NONE;
    r->factorSize[f] = mlirShapedTypeGetDimSize(fine, f);
    fineDims[f] = f;
  }
  for (intptr_t g = 0; g < mlirArrayAttrGetNumElements(groups); ++g) {
    MlirAttribute group = mlirArrayAttrGetElement(groups, g);
    intptr_t n =
        mlirAttributeIsAArray(group) ? mlirArrayAttrGetNumElements(group) : 0;
    if (n == 1) {
      coarseDims[g] =
          (int)mlirIntegerAttrGetValueInt(mlirArrayAttrGetElement(group, 0));
      continue;
    }
    if (n == 0 || n > DT_MAX_SUBFACTORS || r->numCompounds == DT_MAX_COMPOUNDS)
      return false;
    DtCompound *c = &r->compound[r->numCompounds];
    c->count = (int)n;
    for (intptr_t k = 0; k < n; ++k)
      c->factor[k] =
          (int)mlirIntegerAttrGetValueInt(mlirArrayAttrGetElement(group, k));
    coarseDims[g] = -2 - r->numCompounds++;
  }
  r->flow = DT_FLOW_ONE_LINEAR; /* the same elements, in another shape */
  r->linear[0] = true;
  return true;
}

/* tosa.reshape: the dims of both sides split into groups of equal size
 * (walking both shapes, major first); a group of one dim on one side and
 * several on the other is a compound of those factors, as for
 * expand/collapse_shape. A group with several dims on both sides (4x6 to
 * 6x4) has no factor rule: the op does not fit (replicated). */
static bool tosaReshapeRule(MlirOperation op, DtRule *r) {
  MlirType src = mlirValueGetType(mlirOperationGetOperand(op, 0));
  MlirType dst = mlirValueGetType(mlirOperationGetResult(op, 0));
  if (!mlirTypeIsARankedTensor(src) || !mlirTypeIsARankedTensor(dst) ||
      !mlirShapedTypeHasStaticShape(src) || !mlirShapedTypeHasStaticShape(dst))
    return false;
  int ns = (int)mlirShapedTypeGetRank(src),
      nd = (int)mlirShapedTypeGetRank(dst);
  if (ns + nd > DT_MAX_FACTORS || ns == 0 || nd == 0)
    return false;
  r->kind = DT_RULE_FACTORS;
  r->family = "reshape";
  int i = 0, j = 0;
  while (i < ns || j < nd) {
    if (i == ns || j == nd)
      return false; /* one side has dims left over */
    int firstI = i, firstJ = j;
    int64_t ps = mlirShapedTypeGetDimSize(src, i++);
    int64_t pd = mlirShapedTypeGetDimSize(dst, j++);
    while (ps != pd) {
      if (ps < pd && i < ns)
        ps *= mlirShapedTypeGetDimSize(src, i++);
      else if (pd < ps && j < nd)
        pd *= mlirShapedTypeGetDimSize(dst, j++);
      else
        return false;
    }
    int countI = i - firstI, countJ = j - firstJ;
    if (countI > 1 && countJ > 1)
      return false;
    /* The factors are the dims of the side with more of them. */
    bool srcFine = countI >= countJ;
    MlirType fine = srcFine ? src : dst;
    int first = srcFine ? firstI : firstJ, count = srcFine ? countI : countJ;
    int *fineDims = srcFine ? r->operandFactor[0] : r->resultFactor[0];
    int *coarseDims = srcFine ? r->resultFactor[0] : r->operandFactor[0];
    int coarse = srcFine ? firstJ : firstI;
    int f0 = r->numFactors;
    for (int k = 0; k < count; ++k) {
      int f = r->numFactors++;
      r->shardable[f] = true;
      r->reduce[f] = DTENSOR_REDUCE_NONE;
      r->factorSize[f] = mlirShapedTypeGetDimSize(fine, first + k);
      fineDims[first + k] = f;
    }
    if (count == 1) {
      coarseDims[coarse] = f0;
      continue;
    }
    if (count > DT_MAX_SUBFACTORS || r->numCompounds == DT_MAX_COMPOUNDS)
      return false;
    DtCompound *c = &r->compound[r->numCompounds];
    c->count = count;
    for (int k = 0; k < count; ++k)
      c->factor[k] = f0 + k;
    coarseDims[coarse] = -2 - r->numCompounds++;
  }
  r->flow = DT_FLOW_ONE_LINEAR; /* the same elements, in another shape */
  r->linear[0] = true;
  return true;
}

/* The values of the tosa.const_shape that makes `v`, into `out` (at most
 * `capacity`); their count, -1 when `v` is not a constant shape. */
static int constShape(MlirValue v, int64_t *out, int capacity) {
  if (!mlirValueIsAOpResult(v))
    return -1;
  MlirOperation def = mlirOpResultGetOwner(v);
  MlirAttribute values = attrOf(def, "values");
  if (!dtIsOp(def, "tosa.const_shape") || mlirAttributeIsNull(values) ||
      !mlirAttributeIsADenseElements(values))
    return -1;
  intptr_t n = mlirElementsAttrGetNumElements(values);
  if (n > capacity)
    return -1;
  for (intptr_t k = 0; k < n; ++k)
    out[k] = mlirIntegerAttrGetValueInt(
        mlirElementsAttrGetValue(values, 1, (uint64_t[]){(uint64_t)k}));
  return (int)n;
}

/* tosa.slice: the dims it takes whole (start 0, size the dim's) are
 * shared by the input and the result; the others are replicated. */
static bool tosaSliceRule(MlirOperation op, DtRule *r) {
  MlirType t = mlirValueGetType(mlirOperationGetOperand(op, 0));
  int64_t start[DT_MAX_FACTORS], size[DT_MAX_FACTORS];
  if (r->numOperands != 3 || !mlirTypeIsARankedTensor(t) ||
      mlirShapedTypeGetRank(t) > DT_MAX_FACTORS)
    return false;
  int rank = (int)mlirShapedTypeGetRank(t);
  if (constShape(mlirOperationGetOperand(op, 1), start, DT_MAX_FACTORS) !=
          rank ||
      constShape(mlirOperationGetOperand(op, 2), size, DT_MAX_FACTORS) != rank)
    return false;
  bool keep[DT_MAX_FACTORS];
  for (int d = 0; d < rank; ++d)
    keep[d] = start[d] == 0 && !mlirShapedTypeIsDynamicDim(t, d) &&
              size[d] == mlirShapedTypeGetDimSize(t, d);
  int tensors[1] = {0};
  keptDims(r, "slice", rank, keep, tensors, 1);
  r->flow = DT_FLOW_ONE_LINEAR; /* a slice of a sum is the sum of slices */
  r->linear[0] = true;
  return true;
}

/* ---- einsum rules -------------------------------------------------------- */

/* Parses "ij,jk->ik[:kind]" into per-tensor factor letters. A '.' is a dim
 * of no factor (replicated). */
typedef struct Einsum {
  int numInputs, numOutputs;
  char dims[2 * DT_MAX_RULE_VALUES][DTENSOR_MAX_TENSOR_RANK + 1];
  DtensorReduceKind kind;
} Einsum;

static bool parseEinsum(const char *text, Einsum *e, DtensorDiag *diag) {
  memset(e, 0, sizeof(*e));
  e->kind = DTENSOR_REDUCE_SUM;
  const char *p = text;
  bool outputs = false;
  int current = 0, len = 0;
  for (;; ++p) {
    char ch = *p;
    if ((ch >= 'a' && ch <= 'z') || ch == '.') {
      if (len == DTENSOR_MAX_TENSOR_RANK)
        return dtDiag(diag, (int)(p - text), "a tensor of more than %d dims",
                      DTENSOR_MAX_TENSOR_RANK);
      e->dims[current][len++] = ch;
      continue;
    }
    if (ch == ',' || ch == '\0' || ch == ':' || (ch == '-' && p[1] == '>')) {
      e->dims[current][len] = '\0'; /* len 0: a rank-0 tensor */
      ++current;
      len = 0;
      if (current == 2 * DT_MAX_RULE_VALUES)
        return dtDiag(diag, (int)(p - text), "too many tensors");
      if (outputs)
        ++e->numOutputs;
      else
        ++e->numInputs;
      if (ch == '-') {
        if (outputs)
          return dtDiag(diag, (int)(p - text), "a second '->'");
        outputs = true;
        ++p;
        continue;
      }
      if (ch == ':') {
        const char *kind = p + 1;
        if (!dtensorReduceKindParse(kind, strlen(kind), &e->kind) ||
            e->kind == DTENSOR_REDUCE_NONE)
          return dtDiag(diag, (int)(kind - text),
                        "expected a reduce kind "
                        "after ':' (sum, max, min, avg, prod)");
        break;
      }
      if (ch == '\0')
        break;
      continue;
    }
    if (ch == ' ')
      continue;
    return dtDiag(diag, (int)(p - text),
                  "unexpected '%c' (an einsum rule "
                  "is like \"ij,jk->ik\" with lower-case factor letters, '.' "
                  "for a replicated dim, and an optional \":max\")",
                  ch);
  }
  if (!outputs)
    return dtDiag(diag, -1, "an einsum rule needs '->' and the outputs");
  return true;
}

bool dtRuleCheckEinsum(const char *text, DtensorDiag *outDiag) {
  Einsum e;
  return parseEinsum(text, &e, outDiag);
}

static void invalid(DtRule *r, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void invalid(DtRule *r, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(r->message, sizeof(r->message), format, args);
  va_end(args);
  r->kind = DT_RULE_INVALID;
  r->family = "einsum";
}

static void einsumRule(MlirOperation op, const char *text, DtRule *r) {
  Einsum e;
  DtensorDiag diag;
  if (!parseEinsum(text, &e, &diag)) {
    invalid(r, "its sharding rule \"%s\" is malformed: %s", text, diag.message);
    return;
  }
  int numTensorOperands = 0, numTensorResults = 0;
  for (int i = 0; i < r->numOperands; ++i)
    numTensorOperands += r->operandIsTensor[i];
  for (int j = 0; j < r->numResults; ++j)
    numTensorResults += r->resultIsTensor[j];
  if (e.numInputs != numTensorOperands || e.numOutputs != numTensorResults) {
    invalid(r,
            "its sharding rule \"%s\" names %d inputs and %d outputs, "
            "but the op has %d tensor operands and %d tensor results",
            text, e.numInputs, e.numOutputs, numTensorOperands,
            numTensorResults);
    return;
  }
  int factorOf[26];
  for (int k = 0; k < 26; ++k)
    factorOf[k] = -1;
  int numFactors = 0;
  bool inOutput[26] = {false};
  for (int t = 0; t < e.numInputs + e.numOutputs; ++t)
    for (const char *c = e.dims[t]; *c; ++c)
      if (*c != '.') {
        if (factorOf[*c - 'a'] < 0)
          factorOf[*c - 'a'] = numFactors++;
        inOutput[*c - 'a'] |= t >= e.numInputs;
      }
  if (numFactors > DT_MAX_FACTORS) {
    invalid(r, "its sharding rule has more than %d factors", DT_MAX_FACTORS);
    return;
  }
  r->kind = DT_RULE_FACTORS;
  r->family = "einsum";
  r->numFactors = numFactors;
  for (int k = 0; k < 26; ++k)
    if (factorOf[k] >= 0) {
      r->reduce[factorOf[k]] = inOutput[k] ? DTENSOR_REDUCE_NONE : e.kind;
      r->shardable[factorOf[k]] = true;
    }
  int t = 0;
  for (int i = 0; i < r->numOperands; ++i) {
    if (!r->operandIsTensor[i])
      continue;
    MlirType type = mlirValueGetType(mlirOperationGetOperand(op, i));
    if ((int)strlen(e.dims[t]) != mlirShapedTypeGetRank(type)) {
      invalid(r,
              "its sharding rule gives input %d %d dims, but operand %d "
              "has rank %ld",
              t, (int)strlen(e.dims[t]), i, (long)mlirShapedTypeGetRank(type));
      return;
    }
    for (int d = 0; e.dims[t][d]; ++d)
      r->operandFactor[i][d] =
          e.dims[t][d] == '.' ? -1 : factorOf[e.dims[t][d] - 'a'];
    ++t;
  }
  for (int j = 0; j < r->numResults; ++j) {
    if (!r->resultIsTensor[j])
      continue;
    MlirType type = mlirValueGetType(mlirOperationGetResult(op, j));
    if ((int)strlen(e.dims[t]) != mlirShapedTypeGetRank(type)) {
      invalid(r,
              "its sharding rule gives output %d %d dims, but result %d "
              "has rank %ld",
              t - e.numInputs, (int)strlen(e.dims[t]), j,
              (long)mlirShapedTypeGetRank(type));
      return;
    }
    for (int d = 0; e.dims[t][d]; ++d)
      r->resultFactor[j][d] =
          e.dims[t][d] == '.' ? -1 : factorOf[e.dims[t][d] - 'a'];
    ++t;
  }
}

/* Values made from nothing (no tensor operand, no region) take the layout
 * their users want. */
static bool freeRule(MlirOperation op, DtRule *r) {
  for (int i = 0; i < r->numOperands; ++i)
    if (r->operandIsTensor[i])
      return false;
  if (mlirOperationGetNumRegions(op) != 0)
    return false;
  r->kind = DT_RULE_FREE;
  r->family = "free";
  return true;
}

/* tosa ops: an einsum rule made from the op (RulesTosa.c). */
static bool tosaRule(MlirOperation op, DtRule *r) {
  char text[256];
  if (!dtTosaEinsum(op, text, sizeof(text)))
    return false;
  einsumRule(op, text, r);
  r->family = "tosa";
  if (r->kind == DT_RULE_FACTORS)
    dtTosaLinearity(op, r);
  return true;
}

/* dtensor.gather and dtensor.scatter_add: their `dims` is an einsum rule.
 * A gather's gathered letter is missing from its result, so sharding it is
 * a sum over devices: each looks up its block of the table (indices
 * outside read zero) and the result is Partial(sum), PyTorch's
 * MaskPartial. A scatter_add's summed letters (the updates' that the
 * destination lacks) likewise make its result Partial; its destination is
 * the accumulator's init. Both are linear in the table or updates. */
static bool gatherRule(MlirOperation op, DtRule *r) {
  DtGatherDims d;
  char text[256];
  MlirAttribute dims = dtGetAttr(op, "dims");
  if (mlirAttributeIsNull(dims) || !mlirAttributeIsAString(dims))
    return false;
  MlirStringRef v = mlirStringAttrGetValue(dims);
  snprintf(text, sizeof(text), "%.*s", (int)v.length, v.data);
  DtensorDiag diag;
  if (!dtGatherDimsParse(text, dtIsOp(op, DT_OP_SCATTER_ADD), &d, &diag))
    return false;
  einsumRule(op, text, r);
  if (r->kind != DT_RULE_FACTORS)
    return true;
  r->family = "gather";
  r->flow = DT_FLOW_ONE_LINEAR;
  if (d.scatter) {
    r->isInit[0] = true;
    r->linear[1 + d.numIndices] = true;
  } else {
    r->linear[0] = true;
  }
  return true;
}

/* The families, exact names before the prefixes that contain them; each
 * name's length counted when compiling (the table is read for every op). */
#define FAMILY(name, ...) {name, sizeof(name) - 1, __VA_ARGS__}
static const DtOpFamily kFamilies[] = {
    FAMILY("linalg.generic", linalgRule, dtPartOffsetIndices, NULL),
    FAMILY("linalg.map", linalgRule, dtPartOffsetIndices, NULL),
    FAMILY("linalg.softmax", softmaxRule, NULL, NULL),
    FAMILY("linalg.", linalgRule, NULL, NULL),
    FAMILY(DT_OP_GATHER, gatherRule, NULL, dtPartFixGather),
    FAMILY(DT_OP_SCATTER_ADD, gatherRule, NULL, dtPartFixGather),
    FAMILY("tensor.extract_slice", sliceRule, NULL, dtPartFixSliceSizes),
    FAMILY("tensor.insert_slice", sliceRule, NULL, dtPartFixSliceSizes),
    FAMILY("tensor.pad", padRule, NULL, NULL),
    FAMILY("tensor.collapse_shape", reshapeRule, NULL, NULL),
    FAMILY("tensor.expand_shape", reshapeRule, NULL, dtPartFixExpandShape),
    FAMILY("tensor.concat", concatRule, NULL, NULL),
    FAMILY("tensor.empty", freeRule, NULL, NULL),
    FAMILY("tensor.splat", freeRule, NULL, NULL),
    FAMILY("arith.constant", freeRule, NULL, dtPartFixConstant),
    FAMILY("tosa.reshape", tosaReshapeRule, NULL, dtPartFixTosaShape),
    FAMILY("tosa.slice", tosaSliceRule, NULL, dtPartFixTosaShape),
    FAMILY("tosa.", tosaRule, NULL, NULL),
};
#undef FAMILY

const DtOpFamily *dtOpFamilyOf(MlirOperation op) {
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  for (size_t k = 0; k < sizeof(kFamilies) / sizeof(kFamilies[0]); ++k) {
    const char *f = kFamilies[k].name;
    size_t n = kFamilies[k].nameLength;
    bool prefix = f[n - 1] == '.';
    if (prefix ? name.length > n && !memcmp(name.data, f, n)
               : name.length == n && !memcmp(name.data, f, n))
      return &kFamilies[k];
  }
  return NULL;
}

void dtRuleGet(MlirOperation op, const DtensorRuleRegistry *registry,
               DtRule *r) {
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
  bool anyTensor = false;
  for (int i = 0; i < r->numOperands; ++i) {
    r->operandIsTensor[i] =
        isRankedTensor(mlirValueGetType(mlirOperationGetOperand(op, i)));
    anyTensor |= r->operandIsTensor[i];
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
  MlirAttribute rule = attrOf(op, DT_ATTR_RULE);
  if (!mlirAttributeIsNull(rule)) {
    if (!mlirAttributeIsAString(rule)) {
      invalid(r, "its 'dtensor.rule' must be a string such as \"ij,jk->ik\"");
      return;
    }
    char text[256];
    MlirStringRef v = mlirStringAttrGetValue(rule);
    snprintf(text, sizeof(text), "%.*s", (int)v.length, v.data);
    einsumRule(op, text, r);
    return;
  }
  const char *registered = dtRuleRegistryLookup(
      registry, mlirIdentifierStr(mlirOperationGetName(op)));
  if (registered) {
    einsumRule(op, registered, r);
    return;
  }
  const DtOpFamily *family = dtOpFamilyOf(op);
  if (family && family->rule(op, r))
    return;
  if (elementwiseRule(op, r))
    return;
  replicate(r, "an op with no sharding rule");
}

/* ---- the registry -------------------------------------------------------- */

typedef struct RegisteredRule {
  char *name;
  char *rule;
} RegisteredRule;

struct DtensorRuleRegistry {
  RegisteredRule *rules;
  int count, capacity;
};

DtensorRuleRegistry *dtensorRuleRegistryCreate(void) {
  return calloc(1, sizeof(DtensorRuleRegistry));
}

void dtensorRuleRegistryDestroy(DtensorRuleRegistry *registry) {
  if (!registry)
    return;
  for (int i = 0; i < registry->count; ++i) {
    free(registry->rules[i].name);
    free(registry->rules[i].rule);
  }
  free(registry->rules);
  free(registry);
}

static char *copyRef(MlirStringRef s) {
  char *c = malloc(s.length + 1);
  if (c) {
    memcpy(c, s.data, s.length);
    c[s.length] = '\0';
  }
  return c;
}

bool dtensorRuleRegistryAdd(DtensorRuleRegistry *registry, MlirStringRef opName,
                            MlirStringRef einsum, DtensorDiag *outDiag) {
  char *rule = copyRef(einsum), *name = copyRef(opName);
  if (!rule || !name) {
    free(rule);
    free(name);
    return dtDiag(outDiag, -1, "out of memory");
  }
  if (!dtRuleCheckEinsum(rule, outDiag)) {
    free(rule);
    free(name);
    return false;
  }
  for (int i = 0; i < registry->count; ++i)
    if (!strcmp(registry->rules[i].name, name)) {
      free(registry->rules[i].rule);
      registry->rules[i].rule = rule;
      free(name);
      return true;
    }
  if (registry->count == registry->capacity) {
    int cap = registry->capacity ? 2 * registry->capacity : 8;
    RegisteredRule *rules =
        realloc(registry->rules, sizeof(RegisteredRule) * (size_t)cap);
    if (!rules) {
      free(rule);
      free(name);
      return dtDiag(outDiag, -1, "out of memory");
    }
    registry->rules = rules;
    registry->capacity = cap;
  }
  registry->rules[registry->count++] = (RegisteredRule){name, rule};
  return true;
}

const char *dtRuleRegistryLookup(const DtensorRuleRegistry *registry,
                                 MlirStringRef opName) {
  if (!registry)
    return NULL;
  for (int i = 0; i < registry->count; ++i)
    if (strlen(registry->rules[i].name) == opName.length &&
        !memcmp(registry->rules[i].name, opName.data, opName.length))
      return registry->rules[i].rule;
  return NULL;
}
