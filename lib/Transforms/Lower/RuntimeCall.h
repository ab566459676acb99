/* What the passes that lower to libdtensor_rt calls share
 * (LowerToRuntime.c, LowerContractions.c): building ops before a given
 * op, private declarations of runtime functions and constant i64 globals
 * (each created once per module), unranked memref arguments, and the
 * runtime's element-type names. */
#ifndef DTENSOR_LIB_TRANSFORMS_RUNTIMECALL_H
#define DTENSOR_LIB_TRANSFORMS_RUNTIMECALL_H

#include "Dialect/DialectInternal.h"
#include "mlir-c/IR.h"

#include <stdbool.h>
#include <stdint.h>

/// Where runtime calls are built: a module's body and its symbol table.
typedef struct DtRtBuilder {
  MlirContext ctx;
  MlirBlock top;
  MlirSymbolTable symbols;
} DtRtBuilder;

/// Starts building in `module` (the caller ends with dtRtBuilderEnd).
DtRtBuilder dtRtBuilderBegin(MlirOperation module);

/// Releases the builder's symbol table.
void dtRtBuilderEnd(DtRtBuilder *b);

/// Creates op `name` from its parts before `before` (at the end of the
/// module body when `before` is null) and returns it.
MlirOperation dtRtBuild(DtRtBuilder *b, const char *name, MlirLocation loc,
                        int nOperands, const MlirValue *operands, int nResults,
                        const MlirType *results, int nAttrs,
                        const MlirNamedAttribute *attrs, MlirOperation before);

/// The constant 1-D i64 global `sym` holding `values` (created once).
void dtRtEnsureGlobal(DtRtBuilder *b, const char *sym, int n,
                      const int64_t *values, MlirLocation loc);

/// The private declaration of runtime function `sym` (created once).
void dtRtEnsureCallee(DtRtBuilder *b, const char *sym, MlirType fn,
                      MlirLocation loc);

/// An i64 constant before `before`.
MlirValue dtRtConstI64(DtRtBuilder *b, int64_t v, MlirOperation before);

/// `memref` cast to an unranked memref before `before`.
MlirValue dtRtCastUnranked(DtRtBuilder *b, MlirValue memref,
                           MlirOperation before);

/// Global `sym` (`n` i64) as an unranked memref, read before `before`.
MlirValue dtRtGlobal(DtRtBuilder *b, const char *sym, int n,
                     MlirOperation before);

/// A func.call of `callee` with `args` and no results before `before`.
void dtRtCall(DtRtBuilder *b, const char *callee, MlirLocation loc, int nArgs,
              const MlirValue *args, MlirOperation before);

/// The same with one result of type `result`, which it returns.
MlirValue dtRtCallValue(DtRtBuilder *b, const char *callee, MlirLocation loc,
                        int nArgs, const MlirValue *args, MlirType result,
                        MlirOperation before);

/// The runtime's name of element type `t` ("f32", "bf16", ...; its
/// DtrtDtype in `*outCode` unless it is NULL), or NULL for a type the
/// runtime does not carry.
const char *dtRtTypeName(MlirType t, int64_t *outCode);

#endif
