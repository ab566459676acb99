/* dtensor-propagate: ops whose decision propagates other code first:
 * func.call (the callee), scf.for (its body, to a fixed point of the
 * iteration arguments' layouts), scf.if (both branches) and scf.while (its
 * regions, from replicated carried values). */
#include "PropagateRegions.h"
#include "Decisions.h"
#include "Propagate.h"
#include "PropagateRefine.h"
#include "PropagateStrategy.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Func.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The `dtensor.layout` of argument or result `i` of `func`, if it has one. */
bool dtPropFuncLayout(Prop *p, MlirOperation func, bool result, intptr_t i,
                      DtensorShardingSpec *out) {
  MlirAttribute l = dtFuncArgAttr(func, result, i, DT_ATTR_LAYOUT);
  if (mlirAttributeIsNull(l))
    return false;
  MlirType fnType = mlirTypeAttrGetValue(dtGetAttr(func, "function_type"));
  MlirType t = result ? mlirFunctionTypeGetResult(fnType, i)
                      : mlirFunctionTypeGetInput(fnType, i);
  char what[96];
  snprintf(what, sizeof(what), "the layout of %s %ld of the callee",
           result ? "result" : "argument", (long)i);
  return dtPropReadLayout(p, func, l, t, what, out);
}

/* func.call: the callee is propagated first (its unannotated arguments take
 * the layouts the call's operands have), then the call needs the callee's
 * argument layouts and its results have the callee's result layouts. A
 * recursive call, or a callee without a body, uses the layouts its
 * signature declares and replicates the rest. */
__attribute__((noinline)) void dtPropDecideCall(Prop *p, MlirOperation op,
                                                const DtRule *r,
                                                Info **operands,
                                                Info **results) {
  MlirAttribute ref = dtGetAttr(op, "callee");
  MlirOperation callee = {NULL};
  if (!mlirAttributeIsNull(ref) && mlirAttributeIsAFlatSymbolRef(ref))
    callee = mlirSymbolTableLookup(p->funcs->symbols,
                                   mlirFlatSymbolRefAttrGetValue(ref));
  if (mlirOperationIsNull(callee) || !dtIsOp(callee, "func.func")) {
    dtPropError(p, op,
                "calls a function that is not a func.func of this module");
    return;
  }
  bool recursive =
      dtPropFuncListed(p->funcs->active, p->funcs->numActive, callee);
  if (dtPropHasBody(callee) && !recursive &&
      !dtPropFuncListed(p->funcs->done, p->funcs->numDone, callee)) {
    for (int i = 0; i < r->numOperands; ++i) {
      DtensorShardingSpec declared;
      if (!operands[i] || !operands[i]->known ||
          dtPropFuncLayout(p, callee, false, i, &declared))
        continue;
      DtensorShardingSpec s = specOf(operands[i]);
      resolved(&s); /* arguments arrive resolved */
      mlirFuncSetArgAttr(callee, i,
                         mlirStringRefCreateFromCString(DT_ATTR_LAYOUT),
                         dtPropLayoutAttr(p, &s));
    }
    if (!dtPropFunction(p, callee)) {
      p->failed = true;
      return;
    }
  }
  Choice *c = malloc(sizeof(Choice));
  if (!c) {
    dtPropError(p, op, "out of memory");
    return;
  }
  for (int i = 0; i < r->numOperands; ++i)
    if (operands[i] && !dtPropFuncLayout(p, callee, false, i, &c->operands[i]))
      initSpec(operands[i]->rank, &c->operands[i]);
  for (int j = 0; j < r->numResults; ++j)
    if (results[j] && !dtPropFuncLayout(p, callee, true, j, &c->results[j]))
      initSpec(results[j]->rank, &c->results[j]);
  if (!p->failed) {
    DtRule callRule = *r;
    callRule.kind = DT_RULE_FACTORS;
    callRule.family = "call";
    MlirStringRef name = mlirFlatSymbolRefAttrGetValue(ref);
    dtPropRecord(p, op, &callRule, operands, results, c,
                 originOf(dtPropKeep(p, "the signature of @%.*s",
                                     (int)name.length, name.data)));
  }
  free(c);
}

/* ---- structured control flow --------------------------------------------- */

/* Forgets what a loop body decided, so it can be decided again with other
 * iteration-argument layouts: user annotations stay. */
static MlirWalkResult forget(MlirOperation op, void *userData) {
  Prop *p = userData;
  dtPropUnmarkDecided(p, op);
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j) {
    Info *in = dtPropInfo(p, mlirOperationGetResult(op, j));
    if (!in || !in->isTensor || in->fixed)
      continue;
    in->known = false;
    if (in->demandPriority == INT64_MAX)
      in->hasDemand = false;
  }
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r)
    for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
         !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
      for (intptr_t i = 0; i < mlirBlockGetNumArguments(b); ++i) {
        Info *in = dtPropInfo(p, mlirBlockGetArgument(b, i));
        if (in && in->isTensor && !in->fixed)
          in->known = false;
      }
  return MlirWalkResultAdvance;
}

/* A region's yield: operand k must have `want[k]`. Never inlined (into
 * dtPropDecideIf and dtPropDecideFor, which recurse per nesting level). */
__attribute__((noinline)) static void
decideYield(Prop *p, MlirOperation yield, const DtensorShardingSpec *want,
            int count) {
  dtPropMarkDecided(p, yield);
  MlirAttribute attrs[DT_MAX_RULE_VALUES];
  MlirAttribute unit = mlirUnitAttrGet(p->ctx);
  bool any = false;
  for (int k = 0; k < count; ++k) {
    Info *in = dtPropInfo(p, mlirOperationGetOperand(yield, k));
    attrs[k] = unit;
    if (!in || !in->isTensor)
      continue;
    any = true;
    if (!in->known)
      dtPropAdopt(p, in, &want[k], yield);
    attrs[k] = dtPropLayoutAttr(p, &want[k]);
    DtensorShardingSpec cur = specOf(in);
    if (in->known && !dtensorShardingSpecEqual(&cur, &want[k]))
      dtPropDescribeRedistribution(p, yield, k, in, &want[k], NULL);
  }
  if (any) {
    dtPropDecided(p, yield, DT_DECIDED_OPERANDS, dtPropArray(p, count, attrs));
    const DtensorShardingSpec *need[DT_MAX_RULE_VALUES];
    for (int k = 0; k < count; ++k) {
      Info *in = dtPropInfo(p, mlirOperationGetOperand(yield, k));
      need[k] = in && in->isTensor ? &want[k] : NULL;
    }
    dtPropNoteNeeds(p, yield, count, need, false);
  }
}

/* scf.for: the iteration arguments start with the layouts of the inits
 * (or of what the results are wanted as); the body is propagated; while
 * the yielded layouts differ, they become the iteration arguments' and the
 * body is propagated again (a fixed point, at most 4 rounds); what still
 * differs is redistributed at the yield. */
__attribute__((noinline)) void dtPropDecideFor(Prop *p, MlirOperation op,
                                               DtRule *r, Info **operands,
                                               Info **results) {
  int n = r->numResults, first = r->numOperands - n;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (first < 0 || mlirBlockIsNull(body) ||
      mlirBlockGetNumArguments(body) != n + 1) {
    dtPropError(p, op, "has a form dtensor-propagate does not know");
    return;
  }
  Choice *c = malloc(sizeof(Choice));
  if (!c) {
    dtPropError(p, op, "out of memory");
    return;
  }
  for (int k = 0; k < n; ++k) {
    Info *init = operands[first + k], *res = results[k];
    if (!res)
      continue;
    if (init && init->known)
      c->results[k] = specOf(init);
    else if (res->hasDemand)
      c->results[k] = demandOf(res);
    else
      initSpec(res->rank, &c->results[k]);
    resolved(&c->results[k]);
  }
  MlirOperation yield = mlirBlockGetTerminator(body);
  for (int round = 0; round < 4 && !p->failed; ++round) {
    if (round > 0)
      for (MlirOperation o = mlirBlockGetFirstOperation(body);
           !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o))
        mlirOperationWalk(o, forget, p, MlirWalkPreOrder);
    for (int k = 0; k < n; ++k) {
      Info *arg = dtPropInfo(p, mlirBlockGetArgument(body, k + 1));
      if (!arg || !arg->isTensor)
        continue;
      arg->known = true;
      setSpec(arg, &c->results[k]);
      arg->origin = originOf("an iteration argument");
    }
    dtPropBlock(p, body);
    bool stable = true;
    for (int k = 0; k < n; ++k) {
      Info *y = dtPropInfo(p, mlirOperationGetOperand(yield, k));
      if (!results[k] || !y || !y->known)
        continue;
      DtensorShardingSpec next = specOf(y);
      resolved(&next);
      if (!dtensorShardingSpecEqual(&next, &c->results[k])) {
        stable = false;
        if (round < 3)
          c->results[k] = next;
      }
    }
    if (stable)
      break;
  }
  decideYield(p, yield, c->results, n);
  for (int k = 0; k < n; ++k)
    if (operands[first + k])
      c->operands[first + k] = c->results[k];
  r->kind = DT_RULE_FACTORS; /* as in dtPropDecideIf */
  r->family = "scf.for";
  if (!p->failed)
    dtPropRecord(p, op, r, operands, results, c,
                 originOf("the loop's iteration arguments"));
  free(c);
}

/* scf.if: both branches are propagated; each result has the layout the
 * then-branch yields (or the else-branch's, or its demand), and both yields
 * must give it. */
__attribute__((noinline)) void dtPropDecideIf(Prop *p, MlirOperation op,
                                              DtRule *r, Info **operands,
                                              Info **results) {
  MlirBlock branch[2] = {{NULL}, {NULL}};
  for (int b = 0; b < 2 && b < mlirOperationGetNumRegions(op); ++b) {
    branch[b] = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, b));
    if (!mlirBlockIsNull(branch[b]))
      dtPropBlock(p, branch[b]);
  }
  Choice *c = malloc(sizeof(Choice));
  if (!c) {
    dtPropError(p, op, "out of memory");
    return;
  }
  int n = r->numResults;
  for (int k = 0; k < n; ++k) {
    if (!results[k])
      continue;
    bool set = false;
    if (results[k]->hasDemand) {
      c->results[k] = demandOf(results[k]);
      set = true;
    }
    for (int b = 0; b < 2 && !set; ++b) {
      if (mlirBlockIsNull(branch[b]))
        continue;
      Info *y = dtPropInfo(
          p, mlirOperationGetOperand(mlirBlockGetTerminator(branch[b]), k));
      if (y && y->known) {
        c->results[k] = specOf(y);
        set = true;
      }
    }
    if (!set)
      initSpec(results[k]->rank, &c->results[k]);
    resolved(&c->results[k]);
  }
  for (int b = 0; b < 2; ++b)
    if (!mlirBlockIsNull(branch[b]) && n > 0)
      decideYield(p, mlirBlockGetTerminator(branch[b]), c->results, n);
  /* Recorded as a factor rule of its own family (the rule is decide's, on
   * the heap: a copy here would put it in every level's frame). */
  r->kind = DT_RULE_FACTORS;
  r->family = "scf.if";
  if (!p->failed)
    dtPropRecord(p, op, r, operands, results, c,
                 originOf("the branches' results"));
  free(c);
}

/* scf.while: the loop runs replicated. Every value it carries (the inits,
 * the before region's arguments, what the condition forwards, the after
 * region's arguments and yield, the results) is replicated, so every
 * device evaluates the same condition and runs the same iterations, and
 * the collectives its regions need meet. The regions are propagated from
 * there (they may split what they compute inside); what the condition
 * forwards and the body yields is redistributed to replicated. Splitting a
 * while loop's carried values would need its condition agreed among the
 * devices every iteration: not done. */
__attribute__((noinline)) void dtPropDecideWhile(Prop *p, MlirOperation op,
                                                 DtRule *r, Info **operands,
                                                 Info **results) {
  MlirBlock before = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  MlirBlock after = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 1));
  int n = r->numOperands, m = r->numResults;
  if (mlirBlockIsNull(before) || mlirBlockIsNull(after) ||
      mlirBlockGetNumArguments(before) != n ||
      mlirBlockGetNumArguments(after) != m || m + 1 > DT_MAX_RULE_VALUES) {
    dtPropError(p, op, "has a form dtensor-propagate does not know");
    return;
  }
  Choice *c = malloc(sizeof(Choice));
  DtensorShardingSpec *forwarded =
      malloc(sizeof(DtensorShardingSpec) * DT_MAX_RULE_VALUES);
  if (!c || !forwarded) {
    free(c);
    free(forwarded);
    dtPropError(p, op, "out of memory");
    return;
  }
  for (int i = 0; i < n; ++i)
    if (operands[i])
      initSpec(operands[i]->rank, &c->operands[i]);
  for (int j = 0; j < m; ++j) {
    if (results[j])
      initSpec(results[j]->rank, &c->results[j]);
    forwarded[j + 1] = c->results[j];
  }
  MlirBlock blocks[2] = {before, after};
  for (int b = 0; b < 2 && !p->failed; ++b) {
    for (intptr_t k = 0; k < mlirBlockGetNumArguments(blocks[b]); ++k) {
      Info *arg = dtPropInfo(p, mlirBlockGetArgument(blocks[b], k));
      if (!arg || !arg->isTensor)
        continue;
      DtensorShardingSpec rep;
      initSpec(arg->rank, &rep);
      arg->known = true;
      setSpec(arg, &rep);
      arg->origin = originOf("a while loop's carried value (replicated)");
    }
    dtPropBlock(p, blocks[b]);
  }
  if (!p->failed) {
    MlirOperation condition = mlirBlockGetTerminator(before);
    decideYield(p, condition, forwarded,
                (int)mlirOperationGetNumOperands(condition));
    decideYield(p, mlirBlockGetTerminator(after), c->operands, n);
  }
  r->kind = DT_RULE_FACTORS; /* as in dtPropDecideIf */
  r->family = "scf.while";
  if (!p->failed)
    dtPropRecord(p, op, r, operands, results, c,
                 originOf("a while loop runs replicated"));
  free(forwarded);
  free(c);
}
