/* Linearity read from op bodies: which Partial(sum) operands an op passes
 * through unresolved. A linalg body (or one elementwise op) is evaluated
 * over a small lattice — zero, constant (the same on every device: not
 * Partial), linear in the Partial operands, anything else — and a set of
 * operands may stay Partial when every yielded value is linear in them:
 * then summing each device's result gives the result of the sums. */
#include "Rules.h"

#include "Dialect/DialectInternal.h"
#include "mlir-c/BuiltinAttributes.h"

#include <string.h>

typedef enum Lin {
  LIN_ZERO,   /* 0: linear and constant at once */
  LIN_CONST,  /* not Partial: the same value on every device */
  LIN_LINEAR, /* a sum of terms each linear in one Partial operand */
  LIN_OTHER,
} Lin;

/* What an op does to the lattice. */
typedef enum LinOp {
  OP_OTHER,
  OP_ADD,
  OP_SUB,
  OP_NEG,
  OP_MUL,
  OP_DIV,
  OP_CAST, /* keeps sums: wider or narrower floats, sign-extended ints */
  OP_SELECT,
  OP_INDEX, /* linalg.index: the same on every device */
} LinOp;

static const struct {
  const char *name;
  LinOp kind;
} kLinOps[] = {
    {"arith.addf", OP_ADD},     {"arith.addi", OP_ADD},
    {"arith.subf", OP_SUB},     {"arith.subi", OP_SUB},
    {"arith.negf", OP_NEG},     {"arith.mulf", OP_MUL},
    {"arith.muli", OP_MUL},     {"arith.divf", OP_DIV},
    {"arith.extf", OP_CAST},    {"arith.truncf", OP_CAST},
    {"arith.sitofp", OP_CAST},  {"arith.extsi", OP_CAST},
    {"arith.trunci", OP_CAST},  {"arith.select", OP_SELECT},
    {"linalg.index", OP_INDEX},
};

static LinOp linOpOf(MlirOperation op) {
  for (size_t k = 0; k < sizeof(kLinOps) / sizeof(kLinOps[0]); ++k)
    if (dtIsOp(op, kLinOps[k].name))
      return kLinOps[k].kind;
  return OP_OTHER;
}

/* A scalar arith.constant: zero, or another constant. */
static Lin constantClass(MlirOperation def) {
  MlirAttribute v = mlirOperationGetAttributeByName(
      def, mlirStringRefCreateFromCString("value"));
  if (mlirAttributeIsAFloat(v) && mlirFloatAttrGetValueDouble(v) == 0.0)
    return LIN_ZERO;
  if (mlirAttributeIsAInteger(v) && mlirIntegerAttrGetValueInt(v) == 0)
    return LIN_ZERO;
  return LIN_CONST;
}

static bool isConst(Lin a) { return a == LIN_ZERO || a == LIN_CONST; }

/* a + b and a - b (the sign does not change the class). */
static Lin sum(Lin a, Lin b) {
  if (a == LIN_ZERO)
    return b;
  if (b == LIN_ZERO)
    return a;
  if (a == b && a != LIN_OTHER)
    return a;
  return LIN_OTHER; /* linear plus a constant is affine, not linear */
}

/* a * b: linear in the Partial only when one factor is the same on every
 * device and the other is itself linear (c * (x * x) is not: summing the
 * devices' squares is not the square of the sum). A zero factor zeroes
 * anything but an unknown value (0 * inf is NaN). */
static Lin product(Lin a, Lin b) {
  if ((a == LIN_ZERO && b != LIN_OTHER) || (b == LIN_ZERO && a != LIN_OTHER))
    return LIN_ZERO;
  if (isConst(a) && isConst(b))
    return LIN_CONST;
  if (isConst(a))
    return b;
  if (isConst(b))
    return a;
  return LIN_OTHER; /* linear times linear is quadratic */
}

/* Two values one of which is chosen by a condition the same everywhere. */
static Lin join(Lin a, Lin b) {
  if (a == LIN_ZERO)
    return b == LIN_ZERO || b == LIN_CONST || b == LIN_LINEAR ? b : LIN_OTHER;
  if (b == LIN_ZERO)
    return join(b, a);
  return a == b ? a : LIN_OTHER;
}

/* The class of `op`'s result from its operands' classes `in`. */
static Lin opClass(MlirOperation op, const Lin *in, int n) {
  bool allConst = true;
  for (int i = 0; i < n; ++i)
    allConst &= isConst(in[i]);
  if (mlirOperationGetNumRegions(op) > 0)
    return LIN_OTHER;
  switch (linOpOf(op)) {
  case OP_ADD:
  case OP_SUB:
    return n == 2 ? sum(in[0], in[1]) : LIN_OTHER;
  case OP_NEG:
  case OP_CAST:
    return n == 1 ? in[0] : LIN_OTHER;
  case OP_MUL:
    return n == 2 ? product(in[0], in[1]) : LIN_OTHER;
  case OP_DIV:
    /* x / c is x * (1/c): linear only in a linear x, and never over a
     * zero (±inf's sign would follow each device's share). */
    if (n != 2 || in[1] != LIN_CONST)
      return LIN_OTHER;
    return in[0];
  case OP_SELECT:
    return n == 3 && isConst(in[0]) ? join(in[1], in[2]) : LIN_OTHER;
  case OP_INDEX:
    return LIN_CONST;
  case OP_OTHER:
    break;
  }
  if (dtIsOp(op, "arith.constant"))
    return constantClass(op);
  return allConst ? LIN_CONST : LIN_OTHER;
}

enum { MAX_BODY_OPS = 128 };

/* The classes of a body's ops, in order (one result each, else OTHER). */
typedef struct Body {
  MlirBlock block;
  uint64_t partial; /* the block arguments that are Partial */
  int count;
  const void *ops[MAX_BODY_OPS];
  Lin cls[MAX_BODY_OPS];
} Body;

static Lin valueClass(const Body *b, MlirValue v) {
  if (mlirValueIsABlockArgument(v)) {
    if (!mlirBlockEqual(mlirBlockArgumentGetOwner(v), b->block))
      return LIN_CONST;
    intptr_t i = mlirBlockArgumentGetArgNumber(v);
    return i < 64 && (b->partial >> i & 1) ? LIN_LINEAR : LIN_CONST;
  }
  MlirOperation def = mlirOpResultGetOwner(v);
  for (int k = 0; k < b->count; ++k)
    if (b->ops[k] == def.ptr)
      return b->cls[k];
  /* Defined above the body: a scalar, the same on every device. */
  return dtIsOp(def, "arith.constant") ? constantClass(def) : LIN_CONST;
}

/* Whether every value `body`'s terminator yields is linear in the block
 * arguments `partial` (or zero). */
static bool yieldsLinear(MlirBlock block, uint64_t partial) {
  Body b;
  b.block = block;
  b.partial = partial;
  b.count = 0;
  MlirOperation term = mlirBlockGetTerminator(block);
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op) && !mlirOperationEqual(op, term);
       op = mlirOperationGetNextInBlock(op)) {
    if (b.count == MAX_BODY_OPS)
      return false;
    Lin in[8];
    int n = (int)mlirOperationGetNumOperands(op);
    Lin cls = LIN_OTHER;
    if (n <= 8 && mlirOperationGetNumResults(op) == 1) {
      for (int i = 0; i < n; ++i)
        in[i] = valueClass(&b, mlirOperationGetOperand(op, i));
      cls = opClass(op, in, n);
    }
    b.ops[b.count] = op.ptr;
    b.cls[b.count++] = cls;
  }
  if (mlirOperationIsNull(term) || mlirOperationGetNumOperands(term) == 0)
    return false;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(term); ++i) {
    Lin c = valueClass(&b, mlirOperationGetOperand(term, i));
    if (c != LIN_LINEAR && c != LIN_ZERO)
      return false;
  }
  return true;
}

bool dtRuleYieldsZero(MlirOperation op) {
  if (mlirOperationGetNumRegions(op) < 1)
    return false;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (mlirBlockIsNull(body))
    return false;
  Body b = {body, 0, 0, {NULL}, {LIN_OTHER}};
  MlirOperation term = mlirBlockGetTerminator(body);
  /* Only constants may be computed on the way: no op of the body counts. */
  if (mlirOperationIsNull(term) || mlirOperationGetNumOperands(term) == 0)
    return false;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(term); ++i) {
    MlirValue v = mlirOperationGetOperand(term, i);
    if (mlirValueIsABlockArgument(v) ||
        !dtIsOp(mlirOpResultGetOwner(v), "arith.constant") ||
        valueClass(&b, v) != LIN_ZERO)
      return false;
  }
  return true;
}

/* One elementwise op as its own body: linear in the operands `partial`. */
static bool opLinear(MlirOperation op, uint64_t partial) {
  int n = (int)mlirOperationGetNumOperands(op);
  if (n > 8)
    return false;
  Lin in[8];
  for (int i = 0; i < n; ++i)
    in[i] = (partial >> i & 1) ? LIN_LINEAR : LIN_CONST;
  return opClass(op, in, n) == LIN_LINEAR;
}

void dtRuleReadLinearity(MlirOperation op, int numInputs, DtRule *r) {
  MlirBlock body = {NULL};
  if (mlirOperationGetNumRegions(op) > 0)
    body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  int numArgs = mlirBlockIsNull(body) ? r->numOperands
                                      : (int)mlirBlockGetNumArguments(body);
  if (r->numOperands > 64 || numArgs > 64)
    return;
  /* Inits (a reduction's accumulator) are Partial with the result. */
  uint64_t inits = 0, inputs = 0;
  for (int i = 0; i < r->numOperands && i < numArgs; ++i) {
    if (!r->operandIsTensor[i])
      continue;
    if (i >= numInputs)
      inits |= 1ull << i;
    else
      inputs |= 1ull << i;
  }
  bool any = false;
  for (int i = 0; i < numInputs && i < numArgs; ++i) {
    if (!(inputs >> i & 1))
      continue;
    uint64_t p = (1ull << i) | inits;
    r->linear[i] =
        mlirBlockIsNull(body) ? opLinear(op, p) : yieldsLinear(body, p);
    any |= r->linear[i];
  }
  if (any)
    r->flow = DT_FLOW_ONE_LINEAR;
  else if (inputs &&
           (mlirBlockIsNull(body) ? opLinear(op, inputs | inits)
                                  : yieldsLinear(body, inputs | inits)))
    r->flow = DT_FLOW_ALL_SUM;
}
