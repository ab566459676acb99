/* Sharding rules of tosa ops, written as einsum rules built from each op's
 * shapes and attributes (docs/propagation.md):
 *  - elementwise ops: one factor per result dim; an operand dim of size 1
 *    where the result's is not (a broadcast) and operands of another rank
 *    (zero points, a mul's shift) are replicated;
 *  - tosa.matmul [N,H,C] x [N,C,W] -> [N,H,W]: C is a sum;
 *  - tosa.reduce_sum/max/min/prod along `axis` (kept as a dim of 1): that
 *    axis is a reduction of that kind; tosa.argmax keeps its axis whole;
 *  - tosa.transpose: the factors follow `perms`;
 *  - tosa.concat: every dim but `axis`. */
#include "Rules.h"

#include "Dialect/DialectInternal.h"
#include "Support/Support.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

#include <string.h>

static const char *const kElementwise[] = {
    "tosa.abs",
    "tosa.add",
    "tosa.arithmetic_right_shift",
    "tosa.bitwise_and",
    "tosa.bitwise_not",
    "tosa.bitwise_or",
    "tosa.bitwise_xor",
    "tosa.cast",
    "tosa.ceil",
    "tosa.clamp",
    "tosa.clz",
    "tosa.cos",
    "tosa.equal",
    "tosa.erf",
    "tosa.exp",
    "tosa.floor",
    "tosa.greater",
    "tosa.greater_equal",
    "tosa.int_div",
    "tosa.log",
    "tosa.logical_and",
    "tosa.logical_left_shift",
    "tosa.logical_not",
    "tosa.logical_or",
    "tosa.logical_right_shift",
    "tosa.logical_xor",
    "tosa.maximum",
    "tosa.minimum",
    "tosa.mul",
    "tosa.negate",
    "tosa.pow",
    "tosa.reciprocal",
    "tosa.rsqrt",
    "tosa.select",
    "tosa.sigmoid",
    "tosa.sin",
    "tosa.sub",
    "tosa.tanh",
};

static const struct {
  const char *name, *kind;
} kReduce[] = {
    {"tosa.reduce_sum", "sum"},
    {"tosa.reduce_max", "max"},
    {"tosa.reduce_min", "min"},
    {"tosa.reduce_prod", "prod"},
};

static MlirType typeOfOperand(MlirOperation op, intptr_t i) {
  return mlirValueGetType(mlirOperationGetOperand(op, i));
}

static bool rankedStatic(MlirType t, intptr_t *rank) {
  if (!mlirTypeIsARankedTensor(t) || !mlirShapedTypeHasStaticShape(t))
    return false;
  *rank = mlirShapedTypeGetRank(t);
  return *rank <= 26;
}

/* Letters for a tensor of `rank` dims, one per dim ('a' + d). */
static void letters(DtBuf *b, intptr_t rank) {
  for (intptr_t d = 0; d < rank; ++d)
    dtBufPrintf(b, "%c", (char)('a' + d));
}

static bool elementwise(MlirOperation op, DtBuf *b) {
  MlirType res = mlirValueGetType(mlirOperationGetResult(op, 0));
  intptr_t rank;
  if (mlirOperationGetNumResults(op) != 1 || !rankedStatic(res, &rank))
    return false;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    MlirType t = typeOfOperand(op, i);
    intptr_t r;
    if (!mlirTypeIsATensor(t))
      continue;
    if (!rankedStatic(t, &r))
      return false;
    dtBufPrintf(b, "%s", i ? "," : "");
    for (intptr_t d = 0; d < r; ++d) {
      bool broadcast = r != rank || (mlirShapedTypeGetDimSize(t, d) == 1 &&
                                     mlirShapedTypeGetDimSize(res, d) != 1);
      dtBufPrintf(b, "%c", broadcast ? '.' : (char)('a' + d));
    }
  }
  dtBufPrintf(b, "->");
  letters(b, rank);
  return true;
}

static int64_t intAttr(MlirOperation op, const char *name) {
  MlirAttribute a =
      mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString(name));
  return mlirAttributeIsAInteger(a) ? mlirIntegerAttrGetValueInt(a) : -1;
}

/* One input along `axis` kept as a dim of 1 (`kind`) or dropped (argmax,
 * whose axis stays whole). */
static bool reduction(MlirOperation op, const char *kind, DtBuf *b) {
  intptr_t rank;
  int64_t axis = intAttr(op, "axis");
  if (!rankedStatic(typeOfOperand(op, 0), &rank) || axis < 0 || axis >= rank)
    return false;
  for (intptr_t d = 0; d < rank; ++d)
    dtBufPrintf(b, "%c", kind || d != axis ? (char)('a' + d) : '.');
  dtBufPrintf(b, "->");
  for (intptr_t d = 0; d < rank; ++d)
    if (d != axis)
      dtBufPrintf(b, "%c", (char)('a' + d));
    else if (kind)
      dtBufPrintf(b, ".");
  if (kind)
    dtBufPrintf(b, ":%s", kind);
  return true;
}

static bool transpose(MlirOperation op, DtBuf *b) {
  MlirAttribute perms = mlirOperationGetAttributeByName(
      op, mlirStringRefCreateFromCString("perms"));
  intptr_t rank;
  if (!rankedStatic(typeOfOperand(op, 0), &rank) ||
      !mlirAttributeIsADenseI32Array(perms) ||
      mlirDenseArrayGetNumElements(perms) != rank)
    return false;
  letters(b, rank);
  dtBufPrintf(b, "->");
  for (intptr_t d = 0; d < rank; ++d) {
    int32_t p = mlirDenseI32ArrayGetElement(perms, d);
    if (p < 0 || p >= rank)
      return false;
    dtBufPrintf(b, "%c", (char)('a' + p));
  }
  return true;
}

static bool concat(MlirOperation op, DtBuf *b) {
  intptr_t rank;
  int64_t axis = intAttr(op, "axis");
  if (!rankedStatic(mlirValueGetType(mlirOperationGetResult(op, 0)), &rank) ||
      axis < 0 || axis >= rank)
    return false;
  for (intptr_t i = 0; i <= mlirOperationGetNumOperands(op); ++i) {
    if (i)
      dtBufPrintf(b, i == mlirOperationGetNumOperands(op) ? "->" : ",");
    for (intptr_t d = 0; d < rank; ++d)
      dtBufPrintf(b, "%c", d == axis ? '.' : (char)('a' + d));
  }
  return true;
}

bool dtTosaEinsum(MlirOperation op, char *out, size_t capacity) {
  DtBuf b = dtBufInit(out, capacity);
  bool ok = false;
  for (size_t k = 0; k < sizeof(kElementwise) / sizeof(kElementwise[0]); ++k)
    if (dtIsOp(op, kElementwise[k]))
      ok = elementwise(op, &b);
  for (size_t k = 0; k < sizeof(kReduce) / sizeof(kReduce[0]); ++k)
    if (dtIsOp(op, kReduce[k].name))
      ok = reduction(op, kReduce[k].kind, &b);
  if (dtIsOp(op, "tosa.argmax"))
    ok = reduction(op, NULL, &b);
  if (dtIsOp(op, "tosa.transpose"))
    ok = transpose(op, &b);
  if (dtIsOp(op, "tosa.concat"))
    ok = concat(op, &b);
  if (dtIsOp(op, "tosa.matmul")) {
    /* A, B, and (tosa 1.0) two zero points of one element. */
    dtBufPrintf(&b, "nhc,ncw");
    for (intptr_t i = 2; i < mlirOperationGetNumOperands(op); ++i)
      dtBufPrintf(&b, ",.");
    dtBufPrintf(&b, "->nhw");
    ok = mlirOperationGetNumOperands(op) >= 2;
  }
  return ok && b.length < capacity;
}

void dtTosaLinearity(MlirOperation op, DtRule *r) {
  /* Sums of two Partials, and their concatenation, stay Partial. */
  if (dtIsOp(op, "tosa.add") || dtIsOp(op, "tosa.sub") ||
      dtIsOp(op, "tosa.concat")) {
    r->flow = DT_FLOW_ALL_SUM;
    return;
  }
  /* One Partial operand through a linear op (a matmul's other input and
   * zero points are not Partial). */
  bool first = dtIsOp(op, "tosa.transpose") || dtIsOp(op, "tosa.reduce_sum") ||
               dtIsOp(op, "tosa.matmul");
  if (!first)
    return;
  r->flow = DT_FLOW_ONE_LINEAR;
  r->linear[0] = true;
  r->linear[1] = dtIsOp(op, "tosa.matmul");
}
