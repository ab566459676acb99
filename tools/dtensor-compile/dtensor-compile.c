/* dtensor-compile: ahead-of-time compilation of an annotated program to an
 * object file (or assembly, LLVM IR, LLVM-dialect MLIR) that links with
 * libdtensor_rt into an executable run by dtensor-run. Argument parsing
 * only; the work is the library's (dtensorAddSpmdPipeline,
 * dtensorAddToLLVMPipeline, dtensorEmitModule). */
#include "dtensor-c/Dialect.h"
#include "dtensor-c/Passes.h"
#include "dtensor-c/Target.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Pass.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(FILE *out, int code) {
  fprintf(
      out,
      "usage: dtensor-compile PROG.mlir -o OUT [--emit obj|asm|llvm|mlir] "
      "[-O0|-O1|-O2|-O3]\n"
      "                       [--spmd-options 'OPTS'] [--no-spmd]\n"
      "  compiles the annotated program with dtensor-spmd (options as "
      "the pipeline's,\n  e.g. 'strict=true'; --no-spmd for a program "
      "already partitioned) and\n  dtensor-to-llvm, then writes an "
      "object file for this host (default), assembly,\n  LLVM IR or the "
      "LLVM-dialect module. Every function gets a C entry point\n"
      "  _mlir_ciface_<name>. Link the object with -ldtensor_rt "
      "-lmlir_c_runner_utils -lm\n  and run the executable with dtensor-run "
      "-n N.\n");
  return code;
}

static void toFile(MlirStringRef s, void *user) {
  fwrite(s.data, 1, s.length, (FILE *)user);
}

static MlirLogicalResult report(MlirDiagnostic d, void *user) {
  (void)user;
  char text[2048];
  dtensorDiagnosticFormat(d, text, sizeof(text));
  fprintf(stderr, "%s\n", text);
  return mlirLogicalResultSuccess();
}

int main(int argc, char **argv) {
  const char *input = NULL, *output = NULL, *emit = "obj", *spmdOptions = "";
  int opt = 2;
  bool spmd = true;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc)
      output = argv[++i];
    else if (!strcmp(argv[i], "--emit") && i + 1 < argc)
      emit = argv[++i];
    else if (!strcmp(argv[i], "--spmd-options") && i + 1 < argc)
      spmdOptions = argv[++i];
    else if (!strcmp(argv[i], "--no-spmd"))
      spmd = false;
    else if (argv[i][0] == '-' && argv[i][1] == 'O' && argv[i][2] >= '0' &&
             argv[i][2] <= '3' && !argv[i][3])
      opt = argv[i][2] - '0';
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
      return usage(stdout, 0);
    else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "dtensor-compile: unknown option '%s'\n", argv[i]);
      return usage(stderr, 2);
    } else if (!input)
      input = argv[i];
    else {
      fprintf(stderr, "dtensor-compile: more than one input ('%s')\n", argv[i]);
      return usage(stderr, 2);
    }
  }
  DtensorEmitKind kind = DTENSOR_EMIT_OBJECT;
  bool emitMlir = !strcmp(emit, "mlir");
  if (!strcmp(emit, "asm"))
    kind = DTENSOR_EMIT_ASSEMBLY;
  else if (!strcmp(emit, "llvm"))
    kind = DTENSOR_EMIT_LLVM_IR;
  else if (strcmp(emit, "obj") && !emitMlir) {
    fprintf(stderr,
            "dtensor-compile: --emit '%s' (valid: obj, asm, llvm, "
            "mlir)\n",
            emit);
    return 2;
  }
  if (!input || !output) {
    fprintf(stderr, "dtensor-compile: %s\n",
            input ? "-o OUT is required" : "no input program");
    return usage(stderr, 2);
  }
  MlirContext ctx = dtensorContextCreate();
  dtensorRegisterUpstreamPasses();
  mlirContextAttachDiagnosticHandler(ctx, report, NULL, NULL);
  DtensorDiag diag;
  MlirOperation module = dtensorSourceParseFile(ctx, input, &diag);
  if (mlirOperationIsNull(module)) {
    if (diag.message[0])
      fprintf(stderr, "dtensor-compile: %s\n", diag.message);
    return 1;
  }
  dtensorMarkCInterface(module);
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  if ((spmd && mlirLogicalResultIsFailure(dtensorAddSpmdPipeline(
                   opm, mlirStringRefCreateFromCString(spmdOptions), &diag))) ||
      mlirLogicalResultIsFailure(dtensorAddToLLVMPipeline(opm, &diag))) {
    fprintf(stderr, "dtensor-compile: %s\n", diag.message);
    return 2;
  }
  if (mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, module)))
    return 1;
  mlirPassManagerDestroy(pm);
  if (emitMlir) {
    FILE *f = fopen(output, "w");
    if (!f) {
      fprintf(stderr, "dtensor-compile: cannot write '%s': %s\n", output,
              strerror(errno));
      return 1;
    }
    mlirOperationPrint(module, toFile, f);
    fputs("\n", f);
    return fclose(f) ? 1 : 0;
  }
  if (mlirLogicalResultIsFailure(dtensorEmitModule(
          module, mlirStringRefCreateFromCString(output), kind, opt, &diag))) {
    fprintf(stderr, "dtensor-compile: %s\n", diag.message);
    return 1;
  }
  mlirOperationDestroy(module);
  mlirContextDestroy(ctx);
  return 0;
}
