/* Loading the dtensor dialect from its IRDL definition. */
#include "DialectInternal.h"

#include "dtensor-c/Dialect.h"

#include "mlir-c/Dialect/IRDL.h"
#include "mlir-c/RegisterEverything.h"

/* Generated from lib/Dialect/dtensor.irdl.mlir by cmake/EmbedText.cmake. */
extern const char dtIrdlSource[];

MlirLogicalResult dtensorContextLoadDialect(MlirContext ctx) {
  if (mlirContextIsRegisteredOperation(
          ctx, mlirStringRefCreateFromCString(DT_OP_MESH)))
    return mlirLogicalResultSuccess();
  mlirDialectHandleLoadDialect(mlirGetDialectHandle__irdl__(), ctx);
  MlirModule definition =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(dtIrdlSource));
  if (mlirModuleIsNull(definition))
    return mlirLogicalResultFailure();
  MlirLogicalResult result = mlirLoadIRDLDialects(definition);
  mlirModuleDestroy(definition);
  return result;
}

MlirContext dtensorContextCreate(void) {
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  MlirContext ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  /* Created without threads, the context's type, attribute and affine
   * uniquers still took their thread-safe path (measured with callgrind:
   * twice the instructions in StorageUniquer); turning threading off once
   * more sets them single-threaded, 3.4 % of all the instructions of a
   * 1000-block dtensor-spmd. */
  mlirContextEnableMultithreading(ctx, false);
  /* gpu-module-to-binary translates kernels to LLVM IR inside a pipeline
   * (the GPU target), not only at emission. */
  mlirRegisterAllLLVMTranslations(ctx);
  if (mlirLogicalResultIsFailure(dtensorContextLoadDialect(ctx))) {
    mlirContextDestroy(ctx);
    return (MlirContext){NULL};
  }
  return ctx;
}
