/* Ahead-of-time code generation: an LLVM-dialect module to LLVM IR
 * (mlirTranslateModuleToLLVMIR), optimized with the new pass manager
 * (default<On>), then an object file, assembly or IR text for the host
 * (the LLVM C API's target machine). */
#include "Support/Support.h"
#include "dtensor-c/Target.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/RegisterEverything.h"
#include "mlir-c/Target/LLVMIR.h"

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MlirLogicalResult failWith(DtensorDiag *d, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static MlirLogicalResult failWith(DtensorDiag *d, const char *format, ...) {
  if (d) {
    va_list args;
    va_start(args, format);
    vsnprintf(d->message, sizeof(d->message), format, args);
    va_end(args);
    d->column = -1;
  }
  return mlirLogicalResultFailure();
}

static bool isFunc(MlirOperation op) {
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  return (n.length == 9 && !memcmp(n.data, "func.func", 9)) ||
         (n.length == 9 && !memcmp(n.data, "llvm.func", 9));
}

int dtensorMarkCInterface(MlirOperation module) {
  MlirContext ctx = mlirOperationGetContext(module);
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  int marked = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (!isFunc(op) ||
        mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0))))
      continue;
    mlirOperationSetDiscardableAttributeByName(
        op, mlirStringRefCreateFromCString("llvm.emit_c_interface"),
        mlirUnitAttrGet(ctx));
    ++marked;
  }
  return marked;
}

MlirLogicalResult dtensorEmitModule(MlirOperation module, MlirStringRef path,
                                    DtensorEmitKind kind, int optLevel,
                                    DtensorDiag *outDiag) {
  if (optLevel < 0 || optLevel > 3)
    return failWith(outDiag, "optimization level %d (valid: 0 to 3)", optLevel);
  if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
    return failWith(outDiag, "this LLVM has no code generator for the host");
  mlirRegisterAllLLVMTranslations(mlirOperationGetContext(module));
  LLVMContextRef llctx = LLVMContextCreate();
  LLVMModuleRef m = mlirTranslateModuleToLLVMIR(module, llctx);
  if (!m) {
    LLVMContextDispose(llctx);
    return failWith(outDiag, "the module does not translate to LLVM IR (is "
                             "it in the LLVM dialect? run the dtensor-to-llvm "
                             "pipeline first)");
  }
  char *triple = LLVMGetDefaultTargetTriple();
  char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
  char *error = NULL;
  LLVMTargetRef target;
  MlirLogicalResult result = mlirLogicalResultSuccess();
  LLVMTargetMachineRef tm = NULL;
  char *file = strndup(path.data, path.length);
  if (LLVMGetTargetFromTriple(triple, &target, &error)) {
    result = failWith(outDiag, "target %s: %s", triple, error);
    goto done;
  }
  static const LLVMCodeGenOptLevel kLevels[4] = {
      LLVMCodeGenLevelNone, LLVMCodeGenLevelLess, LLVMCodeGenLevelDefault,
      LLVMCodeGenLevelAggressive};
  tm = LLVMCreateTargetMachine(target, triple, cpu, features, kLevels[optLevel],
                               LLVMRelocPIC, LLVMCodeModelDefault);
  LLVMSetTarget(m, triple);
  LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
  char *layoutText = LLVMCopyStringRepOfTargetData(layout);
  LLVMSetDataLayout(m, layoutText);
  LLVMDisposeMessage(layoutText);
  LLVMDisposeTargetData(layout);
  char passes[32];
  snprintf(passes, sizeof(passes), "default<O%d>", optLevel);
  LLVMPassBuilderOptionsRef options = LLVMCreatePassBuilderOptions();
  LLVMErrorRef err = LLVMRunPasses(m, passes, tm, options);
  LLVMDisposePassBuilderOptions(options);
  if (err) {
    char *msg = LLVMGetErrorMessage(err);
    result = failWith(outDiag, "optimizing: %s", msg);
    LLVMDisposeErrorMessage(msg);
    goto done;
  }
  /* Made in memory, then written through dtOutputOpen: complete or not
   * at all, and never through a link another user planted at the path. */
  LLVMMemoryBufferRef buffer = NULL;
  char *text = NULL;
  if (kind == DTENSOR_EMIT_LLVM_IR) {
    text = LLVMPrintModuleToString(m);
  } else if (LLVMTargetMachineEmitToMemoryBuffer(tm, m,
                                                 kind == DTENSOR_EMIT_ASSEMBLY
                                                     ? LLVMAssemblyFile
                                                     : LLVMObjectFile,
                                                 &error, &buffer)) {
    result = failWith(outDiag, "emitting '%s': %s", file, error);
    goto done;
  }
  DtOutput out;
  if (!dtOutputOpen(&out, file, outDiag)) {
    result = mlirLogicalResultFailure();
  } else {
    const char *data = text ? text : LLVMGetBufferStart(buffer);
    size_t size = text ? strlen(text) : LLVMGetBufferSize(buffer);
    fwrite(data, 1, size, out.file);
    if (!dtOutputClose(&out, true, outDiag))
      result = mlirLogicalResultFailure();
  }
  if (text)
    LLVMDisposeMessage(text);
  if (buffer)
    LLVMDisposeMemoryBuffer(buffer);
done:
  if (error)
    LLVMDisposeMessage(error);
  if (tm)
    LLVMDisposeTargetMachine(tm);
  free(file);
  LLVMDisposeMessage(triple);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(features);
  LLVMDisposeModule(m);
  LLVMContextDispose(llctx);
  return result;
}
