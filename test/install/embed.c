/* A compiler that embeds dtensor-mlir: reads an annotated program, runs
 * dtensor-spmd on it through the C API (include/dtensor-c) and says how
 * many collectives the per-device program has. Built against an installed
 * prefix by test/install/install.sh. */
#include "dtensor-c/Dialect.h"
#include "dtensor-c/Passes.h"
#include "mlir-c/Pass.h"

#include <stdio.h>
#include <string.h>

static MlirWalkResult count(MlirOperation op, void *user) {
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  if (name.length > 8 && !strncmp(name.data, "dtensor.", 8) &&
      (strstr(name.data, "all_") || strstr(name.data, "reduce_scatter")))
    ++*(int *)user;
  return MlirWalkResultAdvance;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: embed PROG.mlir\n");
    return 2;
  }
  MlirContext ctx = dtensorContextCreate();
  DtensorDiag diag;
  MlirOperation module = dtensorSourceParseFile(ctx, argv[1], &diag);
  if (mlirOperationIsNull(module)) {
    fprintf(stderr, "embed: %s\n", diag.message);
    return 1;
  }
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  if (mlirLogicalResultIsFailure(
          dtensorAddSpmdPipeline(mlirPassManagerGetAsOpPassManager(pm),
                                 mlirStringRefCreateFromCString(""), &diag)) ||
      mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, module))) {
    fprintf(stderr, "embed: dtensor-spmd failed %s\n", diag.message);
    return 1;
  }
  int collectives = 0;
  mlirOperationWalk(module, count, &collectives, MlirWalkPreOrder);
  printf("embed: dtensor-spmd ran; %d collective%s\n", collectives,
         collectives == 1 ? "" : "s");
  mlirPassManagerDestroy(pm);
  mlirOperationDestroy(module);
  mlirContextDestroy(ctx);
  return 0;
}
