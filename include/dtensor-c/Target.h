/*===- dtensor-c/Target.h - ahead-of-time code generation ----------*- C -*-===*
 *
 * From a module in the LLVM dialect (after dtensorAddToLLVMPipeline) to a
 * relocatable object file for the host, through MLIR's LLVM IR translation
 * and the LLVM C API. The object links with libdtensor_rt (and MLIR's C
 * runner utilities, for memrefCopy) into an executable; see
 * docs/runtime.md.
 *
 *===----------------------------------------------------------------------===*/
#ifndef DTENSOR_C_TARGET_H
#define DTENSOR_C_TARGET_H

#include "dtensor-c/Support.h"
#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Output kinds of dtensorEmitModule.
typedef enum DtensorEmitKind {
  DTENSOR_EMIT_OBJECT = 0, /* a relocatable object file (PIC) */
  DTENSOR_EMIT_ASSEMBLY,   /* the same as assembly text */
  DTENSOR_EMIT_LLVM_IR,    /* the optimized LLVM IR as text */
} DtensorEmitKind;

/// Translates `module` (LLVM dialect) to LLVM IR, optimizes it at `optLevel`
/// (0 to 3) for the host CPU and writes `kind` to `path`. Registers the LLVM
/// translations in the module's context. On failure returns failure and
/// fills `outDiag` (a module not in the LLVM dialect, an unwritable path).
DTENSOR_EXPORT MlirLogicalResult dtensorEmitModule(MlirOperation module,
                                                   MlirStringRef path,
                                                   DtensorEmitKind kind,
                                                   int optLevel,
                                                   DtensorDiag *outDiag);

/// Adds `llvm.emit_c_interface` to every function with a body in `module`,
/// so that C code can call `_mlir_ciface_<name>` with memref descriptors
/// (results through a pointer first argument). Returns how many it marked.
DTENSOR_EXPORT int dtensorMarkCInterface(MlirOperation module);

#ifdef __cplusplus
}
#endif

#endif /* DTENSOR_C_TARGET_H */
