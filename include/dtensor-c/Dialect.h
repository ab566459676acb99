/*===- dtensor-c/Dialect.h - the dtensor dialect from C -----------*- C -*-===*
 *
 * Registration of the dtensor dialect (defined in IRDL and loaded at context
 * set-up), layout attributes, mesh symbols and the dialect verifier.
 * See docs/dialect.md.
 *
 *===----------------------------------------------------------------------===*/
#ifndef DTENSOR_C_DIALECT_H
#define DTENSOR_C_DIALECT_H

#include "dtensor-c/Layout.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/// How deep a program may nest: brackets in its text (the parse functions
/// below refuse deeper text, located, before MLIR's recursive parser would
/// overflow its stack) and regions in its ops (the passes refuse deeper
/// IR at the op).
#define DTENSOR_MAX_NESTING 1000

/// Loads the dtensor dialect into `ctx` (loading the irdl dialect first);
/// returns failure, with a diagnostic on the context, if it does not load.
DTENSOR_EXPORT MlirLogicalResult dtensorContextLoadDialect(MlirContext ctx);

/// Creates a context with every upstream dialect registered and the dtensor
/// dialect loaded; the caller owns it (mlirContextDestroy). Returns a null
/// context if the dialect does not load.
DTENSOR_EXPORT MlirContext dtensorContextCreate(void);

/// Parses `source` into a builtin.module as mlir-opt does: a single top-level
/// module is returned as is, anything else is wrapped in an implicit module.
/// Locations name `sourceName`, lines and columns are those of `source`.
/// Returns a null operation after emitting diagnostics on failure; the
/// caller owns the result (mlirOperationDestroy).
DTENSOR_EXPORT MlirOperation dtensorSourceParse(MlirContext ctx,
                                                MlirStringRef source,
                                                MlirStringRef sourceName);

/// Reads the file at `path` and parses it as dtensorSourceParse does
/// (locations name `path`). Returns a null operation on failure: after
/// emitting diagnostics if it did not parse, or with `outDiag` filled
/// (`outDiag->column` is -1) if the file could not be read. The caller
/// owns the result.
DTENSOR_EXPORT MlirOperation dtensorSourceParseFile(MlirContext ctx,
                                                    const char *path,
                                                    DtensorDiag *outDiag);

/// Verifies `op` and writes it through `callback`, as text printed with
/// `flags` or, when `bytecode`, as MLIR bytecode; the text reaches
/// `callback` only once `op` verifies. With `alongside` the verifier runs on
/// a thread of its own while this one prints into memory (on a large
/// program the two take about as long as the longer one): the context's
/// multithreading must be on (the default), and its diagnostic handlers are
/// then called from that thread, while this one only prints. Sets `flags`
/// to assume the op verified. Returns whether it verified (false after
/// the verifier's diagnostics, or an error if the text did not fit in
/// memory).
DTENSOR_EXPORT bool dtensorPrintVerified(MlirOperation op,
                                         MlirOpPrintingFlags flags,
                                         bool bytecode, bool alongside,
                                         MlirStringCallback callback,
                                         void *userData);

/// Writes `diagnostic` as compilers print one, `file:line:col: error:
/// message` (the location as MLIR prints it when it has no file), followed
/// by its notes on lines of their own, into `out` (`size` bytes, always
/// terminated, truncated if longer). Returns the length it needed.
DTENSOR_EXPORT size_t dtensorDiagnosticFormat(MlirDiagnostic diagnostic,
                                              char *out, size_t size);

/// Returns whether `attr` is a `#dtensor.layout<@mesh, "spec">`.
DTENSOR_EXPORT bool dtensorAttributeIsALayout(MlirAttribute attr);

/// Builds `#dtensor.layout<@meshName, "spec">` from a spec; returns a null
/// attribute if the mesh name is not a plain identifier.
DTENSOR_EXPORT MlirAttribute dtensorLayoutAttrGet(
    MlirContext ctx, MlirStringRef meshName, const DtensorShardingSpec *spec);

/// The two parameters of a layout attribute, as text.
typedef struct DtensorLayoutAttrParts {
  char mesh[256];
  char spec[1024];
} DtensorLayoutAttrParts;

/// Reads the mesh symbol name and spec text of a layout attribute; returns
/// false if `attr` is not a layout (or its parameters are too long).
DTENSOR_EXPORT bool dtensorLayoutAttrGetParts(MlirAttribute attr,
                                              DtensorLayoutAttrParts *outParts);

/// Returns the `dtensor.mesh` op named `name` in the nearest module enclosing
/// (or being) `from`, or a null operation if there is none.
DTENSOR_EXPORT MlirOperation dtensorMeshOpLookup(MlirOperation from,
                                                 MlirStringRef name);

/// Creates the DtensorMesh that a `dtensor.mesh` op declares; returns NULL
/// and fills `outDiag` if its attributes are invalid. The caller owns it.
DTENSOR_EXPORT DtensorMesh *dtensorMeshCreateFromOp(MlirOperation meshOp,
                                                    DtensorDiag *outDiag);

/// Reads a layout attribute used inside `from` for a value of `tensorType`:
/// looks the mesh up, parses and checks the spec against the type. On
/// success `*outMesh` is a mesh the caller owns and `outLayout` borrows it;
/// on failure returns false and fills `outDiag`.
DTENSOR_EXPORT bool
dtensorLayoutFromAttr(MlirOperation from, MlirAttribute attr,
                      MlirType tensorType, DtensorMesh **outMesh,
                      DtensorLayout *outLayout, DtensorDiag *outDiag);

/// Converts an MLIR element type to a DtensorElementType; false if it is not
/// one that layouts support.
DTENSOR_EXPORT bool dtensorElementTypeFromMlir(MlirType type,
                                               DtensorElementType *outType);

/// Verifies every dtensor construct in `op` and below beyond what IRDL
/// checks (meshes, specs, ranks, local shapes, collective fields); emits an
/// error at each offending op's location and returns failure if any.
DTENSOR_EXPORT MlirLogicalResult dtensorVerify(MlirOperation op);

#ifdef __cplusplus
}
#endif

#endif /* DTENSOR_C_DIALECT_H */
