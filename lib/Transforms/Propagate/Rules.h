/* Op sharding rules for dtensor-propagate, in the factor form of Shardy: an
 * op has factors (for linalg ops, its loops); every tensor dim of an operand
 * or result is one factor or none; sharding a factor over mesh axes shards
 * every dim it maps to, and sharding a reduction factor makes the results
 * Partial of the combiner's kind. One table entry per op family (Rules.c). */
#ifndef DTENSOR_LIB_TRANSFORMS_RULES_H
#define DTENSOR_LIB_TRANSFORMS_RULES_H

#include "dtensor-c/Layout.h"
#include "dtensor-c/Passes.h"
#include "mlir-c/IR.h"

#include <stdbool.h>

#define DT_MAX_FACTORS 16
#define DT_MAX_RULE_VALUES 16
#define DT_MAX_COMPOUNDS 16
#define DT_MAX_SUBFACTORS 8

/// A dim made of several factors, major first (the flat side of a reshape):
/// sharding it by axes fills the factors in order, each up to its size.
typedef struct DtCompound {
  int count;
  int factor[DT_MAX_SUBFACTORS];
} DtCompound;

/// How Partial operands may pass through an op unresolved.
typedef enum DtPartialFlow {
  DT_FLOW_NONE = 0,   /* every operand must be resolved */
  DT_FLOW_ALL_SUM,    /* add/sub: every tensor operand Partial(sum) alike */
  DT_FLOW_ONE_LINEAR, /* mul, contraction: one `linear` operand Partial(sum),
                         the others not Partial on those axes */
} DtPartialFlow;

/// What the rule says an op is.
typedef enum DtRuleKind {
  DT_RULE_FACTORS = 0, /* the factor form below */
  DT_RULE_FREE,        /* no tensor inputs (tensor.empty, constants): its
                          results take the layout their users want */
  DT_RULE_REPLICATE,   /* unknown: everything replicated */
  DT_RULE_NONE,        /* no tensors at all: nothing to do */
  DT_RULE_INVALID,     /* the op carries a rule that is wrong: `message` */
} DtRuleKind;

typedef struct DtRule {
  DtRuleKind kind;
  const char *family; /* for messages: "linalg", "elementwise", ... */
  int numFactors;
  /* Per factor: the combiner if it is a reduction (NONE when parallel), and
   * whether it may be sharded at all (a reduction with an unknown combiner
   * may not). */
  DtensorReduceKind reduce[DT_MAX_FACTORS];
  bool shardable[DT_MAX_FACTORS];
  int numOperands, numResults;
  /* Per operand/result: whether it is a ranked tensor, and per dim the
   * factor it is (-1: none, so replicated; <= -2: compound[-2 - v]). */
  bool operandIsTensor[DT_MAX_RULE_VALUES];
  int operandFactor[DT_MAX_RULE_VALUES][DTENSOR_MAX_TENSOR_RANK];
  bool resultIsTensor[DT_MAX_RULE_VALUES];
  int resultFactor[DT_MAX_RULE_VALUES][DTENSOR_MAX_TENSOR_RANK];
  int numCompounds;
  DtCompound compound[DT_MAX_COMPOUNDS];
  int64_t factorSize[DT_MAX_FACTORS]; /* for compound dims */
  DtPartialFlow flow;
  bool linear[DT_MAX_RULE_VALUES]; /* DT_FLOW_ONE_LINEAR: which operands */
  /* Operands that are accumulator inits (linalg outs): a Partial result
   * needs them Partial too, which a neutral init (fill) provides locally. */
  bool isInit[DT_MAX_RULE_VALUES];
  char message[256]; /* DT_RULE_INVALID: what is wrong */
} DtRule;

/// Rules an embedder registers per op name (dtensorRuleRegistryAdd).
typedef struct DtensorRuleRegistry DtensorRuleRegistry;

/// Returns the einsum rule registered for `opName`, or NULL.
const char *dtRuleRegistryLookup(const DtensorRuleRegistry *registry,
                                 MlirStringRef opName);

/// Fills `outRule` for `op`: from its `dtensor.rule` einsum attribute, the
/// registry's rule for its name (`registry` may be NULL), or the built-in
/// family. An op no rule covers is DT_RULE_REPLICATE with `family` saying
/// why; a malformed einsum is DT_RULE_INVALID.
void dtRuleGet(MlirOperation op, const DtensorRuleRegistry *registry,
               DtRule *outRule);

/// dtensor-partition's state (PartitionInternal.h).
typedef struct Part Part;

/// An op family: the ops it covers (`name`, or a prefix ending in '.'), its
/// sharding rule (false: the op does not fit it; the next rules are tried)
/// and what dtensor-partition does to its ops besides the common rewrite —
/// before the types become local (`partitionBefore`, which still sees the
/// global types) and after (`partitionAfter`); NULL: nothing. Adding a
/// family is one row of the table in Rules.c.
typedef struct DtOpFamily {
  const char *name;
  size_t nameLength;
  bool (*rule)(MlirOperation op, DtRule *r);
  void (*partitionBefore)(Part *p, MlirOperation op);
  void (*partitionAfter)(Part *p, MlirOperation op);
} DtOpFamily;

/// The family of `op`, or NULL (elementwise ops and others are decided by
/// their traits and bodies, not by name).
const DtOpFamily *dtOpFamilyOf(MlirOperation op);

/// Checks an einsum rule's syntax ("ij,jk->ik", reductions optionally
/// ":max"); false with a message in `outDiag` if it is malformed.
/// Reads from `op`'s body (a linalg op's region; an op without one is its
/// own body) which Partial(sum) operands it passes through: r->linear and
/// r->flow. `numInputs`: the operands before the inits.
void dtRuleReadLinearity(MlirOperation op, int numInputs, DtRule *r);

/// Whether every value `op`'s region yields is a zero constant (a
/// tensor.pad that pads with zeros, so it keeps sums).
bool dtRuleYieldsZero(MlirOperation op);

/// Writes the einsum rule of a tosa op with a rule ("abc,abc->abc",
/// "nhc,ncw,.,.->nhw", "abc->a.c:sum", ...) into `out`; false for other
/// ops or shapes it cannot express.
bool dtTosaEinsum(MlirOperation op, char *out, size_t capacity);

/// Which Partial(sum) operands a tosa op passes through: add/sub of two
/// Partials, matmul in either input, transpose, reduce_sum, concat of
/// Partials (r->flow, r->linear).
void dtTosaLinearity(MlirOperation op, DtRule *r);

bool dtRuleCheckEinsum(const char *text, DtensorDiag *outDiag);

#endif
