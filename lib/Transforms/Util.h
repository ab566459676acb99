/* Small helpers every pass file uses (dtIsOp comes with the dialect's
 * internal header). */
#ifndef DTENSOR_LIB_TRANSFORMS_UTIL_H
#define DTENSOR_LIB_TRANSFORMS_UTIL_H

#include "Dialect/DialectInternal.h"
#include "Support/Support.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/IR.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/// An MlirStringCallback that appends to the DtBuf `user` points to (to
/// print types, attributes, locations into a bounded buffer).
static inline void dtBufAppendCallback(MlirStringRef s, void *user) {
  dtBufAppend((DtBuf *)user, s.data, s.length);
}

/// A growing list of operations (what a walk collects to change after it).
typedef struct DtOpList {
  MlirOperation *ops;
  size_t count, capacity;
} DtOpList;

/// Appends `op`; false when out of memory (Util.c). Free `ops` when done.
bool dtOpListPush(DtOpList *list, MlirOperation op);

/// The attribute `name` of `op` (inherent or discardable), or null. The
/// name's length is known when compiling a literal one.
static inline MlirAttribute dtGetAttr(MlirOperation op, const char *name) {
  return mlirOperationGetAttributeByName(op,
                                         (MlirStringRef){name, strlen(name)});
}

/// The attribute `name` of argument `i` of function `func` (of result
/// `i` with `result`): its entry in arg_attrs (res_attrs), or null.
static inline MlirAttribute dtFuncArgAttr(MlirOperation func, bool result,
                                          intptr_t i, const char *name) {
  MlirAttribute list = dtGetAttr(func, result ? "res_attrs" : "arg_attrs");
  if (mlirAttributeIsNull(list) || !mlirAttributeIsAArray(list) || i < 0 ||
      i >= mlirArrayAttrGetNumElements(list))
    return mlirAttributeGetNull();
  return mlirDictionaryAttrGetElementByName(
      mlirArrayAttrGetElement(list, i), mlirStringRefCreateFromCString(name));
}

/// The symbol a func.call (or any op with a flat `callee`) calls; an empty
/// name for an op without one.
static inline MlirStringRef dtCalleeName(MlirOperation op) {
  MlirAttribute callee = dtGetAttr(op, "callee");
  if (mlirAttributeIsNull(callee) || !mlirAttributeIsAFlatSymbolRef(callee))
    return (MlirStringRef){"", 0};
  return mlirFlatSymbolRefAttrGetValue(callee);
}

/// The op of a linalg body that combines output `o` with its accumulator:
/// the op yielded for `o`, one of whose two operands is the body's block
/// argument of `o` (number `numInputs + o`), returned in `*outAcc`; null
/// otherwise (ReassociateReductions.c). Reassociation, widening and the
/// sharding rules read reductions through it.
MlirOperation dtReductionCombiner(MlirOperation op, int numInputs, int o,
                                  MlirValue *outAcc);

/// Replaces linalg.generic `op` by one with `n` operands (the first
/// `numIns` inputs, then as many inits as `op` has results) and their
/// `maps`, `op`'s other attributes and its body (moved: its block
/// arguments must already match); `op`'s results are replaced and `op`
/// destroyed. Returns the new op (InitsToInputs.c). At most 64 operands.
MlirOperation dtGenericRebuild(MlirOperation op, int n,
                               const MlirValue *operands,
                               const MlirAttribute *maps, int numIns);

/// Removes the dtensor.* attributes of a function's arguments and results
/// (SingleDevice.c).
void dtStripSignatureAttrs(MlirOperation func);

/// Whether a function's signature shows it partitioned (`partitioned`: an
/// argument or result with dtensor.global_shape, which partition adds) or
/// not (a dtensor.layout without it); the first such one is named in
/// `where` ("argument 0", "result 1") (SingleDevice.c).
bool dtSignatureFind(MlirOperation func, bool partitioned, char where[32]);

/// A named linalg op `name` (`numIns` inputs, then one init) before
/// `before`, its body filled in by linalg, with one result of `type` (on
/// tensors) or none (a null type: on memrefs); `maps` (may be null): its
/// indexing_maps (PrepareContractions.c).
MlirOperation dtNamedLinalg(MlirContext ctx, const char *name, MlirLocation loc,
                            int numIns, const MlirValue *operands,
                            MlirType type, MlirAttribute maps,
                            MlirOperation before);

#endif
