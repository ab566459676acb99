/* dtensor-compile: ahead-of-time compilation of an annotated program to an
 * object file (or assembly, LLVM IR, LLVM-dialect MLIR) that links with
 * libdtensor_rt into an executable run by dtensor-run. Argument parsing
 * only; the work is the library's (dtensorAddSpmdPipeline,
 * dtensorAddToLLVMPipeline, dtensorEmitModule). */
#include "Support/Support.h"
#include "dtensor-c/Dialect.h"
#include "dtensor-c/Passes.h"
#include "dtensor-c/Runner.h"
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
      "                       [--spmd-options 'OPTS'] [--no-spmd] "
      "[--exact-reductions]\n"
      "                       [--auto] [--auto-options 'OPTS']\n"
      "                       [--target cpu|cuda] [--gpu-options 'chip=sm_NN "
      "format=bin|isa boundary=host|device']\n"
      "       dtensor-compile PROG.mlir --bundle -o DIR [--target cpu|cuda] "
      "[--gpu-options OPTS]\n"
      "                       [--entry FUNC] [--threads] [--profile]\n"
      "  compiles the annotated program with dtensor-spmd (options as "
      "the pipeline's,\n  e.g. 'strict=true'; --no-spmd for a program "
      "already partitioned) and\n  dtensor-to-llvm, then writes an "
      "object file for this host (default), assembly,\n  LLVM IR or the "
      "LLVM-dialect module. Every function gets a C entry point\n"
      "  _mlir_ciface_<name>. Link the object with -ldtensor_rt -lm "
      "(no MLIR library)\n  and run the executable with dtensor-run "
      "-n N.\n"
      "  --target cuda compiles with dtensor-to-nvvm instead: kernels for "
      "the GPU\n  (sm_90 cubins by default, embedded), buffers in device "
      "memory, host code\n  calling libdtensor_rt's mgpu* functions, "
      "collectives on the nccl backend\n  (boundary=device in --gpu-options: "
      "entry points take device buffers;\n  docs/runtime.md).\n"
      "  --auto: dtensor-auto-shard chooses the layouts first; "
      "--auto-options: its\n  options, e.g. 'memory=16GiB' or 'mesh=2x4' "
      "for a program without a mesh.\n"
      "  --bundle writes what dtensor-check runs without MLIR: the "
      "single-device\n  reference and the SPMD program as shared objects "
      "and a manifest in DIR.\n"
      "  --exact-reductions (cpu): float sums keep the program's order "
      "(by default they\n  may be reordered so that they vectorize).\n"
      "  --threads (cpu): loops in threads (dtensor-to-llvm{threads=true}:"
      " LLVM's OpenMP\n  runtime, as many threads as the runtime gives BLAS);"
      " link an object with\n  -lomp too (a bundle links it itself).\n"
      "  --profile (cpu, --bundle): every op timed, for dtensor-check "
      "--profile.\n");
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

typedef struct Args {
  const char *input, *output, *emit, *spmdOptions, *target, *gpuOptions;
  const char *entry;       /* --entry FUNC (a bundle's) */
  const char *autoOptions; /* --auto-options OPTS, or NULL */
  bool autoShard;          /* --auto */
  bool bundle, exactReductions, threads, profile;
  int opt;
  bool spmd;
  DtensorEmitKind kind;
  bool emitMlir;
} Args;

/* Reads the command line; returns -1 to go on, else the exit status. */
static int parseArgs(int argc, char **argv, Args *a) {
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (!strcmp(arg, "-o") && i + 1 < argc)
      a->output = argv[++i];
    else if (!strcmp(arg, "--emit") && i + 1 < argc)
      a->emit = argv[++i];
    else if (!strcmp(arg, "--spmd-options") && i + 1 < argc)
      a->spmdOptions = argv[++i];
    else if (!strcmp(arg, "--target") && i + 1 < argc)
      a->target = argv[++i];
    else if (!strcmp(arg, "--gpu-options") && i + 1 < argc)
      a->gpuOptions = argv[++i];
    else if (!strcmp(arg, "--auto"))
      a->autoShard = true;
    else if (!strcmp(arg, "--auto-options") && i + 1 < argc)
      a->autoOptions = argv[++i];
    else if (!strcmp(arg, "--no-spmd"))
      a->spmd = false;
    else if (!strcmp(arg, "--bundle"))
      a->bundle = true;
    else if (!strcmp(arg, "--exact-reductions"))
      a->exactReductions = true;
    else if (!strcmp(arg, "--threads"))
      a->threads = true;
    else if (!strcmp(arg, "--profile"))
      a->profile = true;
    else if (!strcmp(arg, "--entry") && i + 1 < argc)
      a->entry = argv[++i];
    else if (arg[0] == '-' && arg[1] == 'O' && arg[2] >= '0' && arg[2] <= '3' &&
             !arg[3])
      a->opt = arg[2] - '0';
    else if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
      return usage(stdout, 0);
    else if (arg[0] == '-' && arg[1]) {
      fprintf(stderr, "dtensor-compile: unknown option '%s'\n", arg);
      return usage(stderr, 2);
    } else if (!a->input)
      a->input = arg;
    else {
      fprintf(stderr, "dtensor-compile: more than one input ('%s')\n", arg);
      return usage(stderr, 2);
    }
  }
  a->emitMlir = !strcmp(a->emit, "mlir");
  if (!strcmp(a->emit, "asm"))
    a->kind = DTENSOR_EMIT_ASSEMBLY;
  else if (!strcmp(a->emit, "llvm"))
    a->kind = DTENSOR_EMIT_LLVM_IR;
  else if (strcmp(a->emit, "obj") && !a->emitMlir) {
    fprintf(stderr,
            "dtensor-compile: --emit '%s' (valid: obj, asm, llvm, "
            "mlir)\n",
            a->emit);
    return 2;
  }
  if (strcmp(a->target, "cpu") && strcmp(a->target, "cuda")) {
    fprintf(stderr, "dtensor-compile: --target '%s' (valid: cpu, cuda)\n",
            a->target);
    return 2;
  }
  if (a->bundle && (!a->spmd || *a->spmdOptions || strcmp(a->emit, "obj"))) {
    fprintf(stderr, "dtensor-compile: --bundle compiles the annotated program "
                    "as dtensor-run does (no --no-spmd, --spmd-options or "
                    "--emit)\n");
    return 2;
  }
  if (a->autoOptions && !a->autoShard) {
    fprintf(stderr, "dtensor-compile: --auto-options needs --auto\n");
    return 2;
  }
  if (a->autoShard && !a->spmd) {
    fprintf(stderr, "dtensor-compile: --auto chooses layouts for "
                    "dtensor-spmd; --no-spmd takes a program already "
                    "partitioned\n");
    return 2;
  }
  if ((a->threads || a->profile) && !strcmp(a->target, "cuda")) {
    fprintf(stderr, "dtensor-compile: --%s applies to --target cpu\n",
            a->threads ? "threads" : "profile");
    return 2;
  }
  if (a->profile && !a->bundle) {
    fprintf(stderr, "dtensor-compile: --profile applies to --bundle (its "
                    "manifest names the ops that dtensor-check --profile "
                    "times)\n");
    return 2;
  }
  if (a->entry && !a->bundle) {
    fprintf(stderr, "dtensor-compile: --entry applies to --bundle\n");
    return 2;
  }
  if (!a->input || !a->output) {
    fprintf(stderr, "dtensor-compile: %s\n",
            a->input ? "-o OUT is required" : "no input program");
    return usage(stderr, 2);
  }
  return -1;
}

/* dtensor-to-llvm's options, in `out`. */
static const char *cpuOptions(const Args *a, char *out, size_t size) {
  snprintf(out, size, "%s%s%s",
           a->exactReductions ? "exact-reductions=true " : "",
           a->threads ? "threads=true " : "", a->profile ? "profile=true" : "");
  return out;
}

/* dtensor-spmd (unless --no-spmd) and dtensor-to-llvm (or dtensor-to-nvvm
 * for --target cuda) on `module`. */
static int lower(MlirContext ctx, MlirOperation module, const Args *a) {
  DtensorDiag diag;
  char options[128];
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  if ((a->spmd &&
       mlirLogicalResultIsFailure(dtensorAddSpmdPipeline(
           opm, mlirStringRefCreateFromCString(a->spmdOptions), &diag))) ||
      mlirLogicalResultIsFailure(
          strcmp(a->target, "cuda")
              ? dtensorAddToLLVMPipelineWithOptions(
                    opm,
                    mlirStringRefCreateFromCString(
                        cpuOptions(a, options, sizeof(options))),
                    &diag)
              : dtensorAddToNVVMPipeline(
                    opm, mlirStringRefCreateFromCString(a->gpuOptions),
                    &diag))) {
    fprintf(stderr, "dtensor-compile: %s\n", diag.message);
    return 2;
  }
  bool ok = mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, module));
  mlirPassManagerDestroy(pm);
  return ok ? 0 : 1;
}

/* Writes the lowered module as MLIR text or through dtensorEmitModule. */
static int writeOutput(MlirOperation module, const Args *a) {
  if (a->emitMlir) {
    DtOutput out;
    DtensorDiag diag;
    if (!dtOutputOpen(&out, a->output, &diag)) {
      fprintf(stderr, "dtensor-compile: %s\n", diag.message);
      return 1;
    }
    mlirOperationPrint(module, toFile, out.file);
    fputs("\n", out.file);
    if (!dtOutputClose(&out, true, &diag)) {
      fprintf(stderr, "dtensor-compile: %s\n", diag.message);
      return 1;
    }
    return 0;
  }
  DtensorDiag diag;
  if (mlirLogicalResultIsFailure(
          dtensorEmitModule(module, mlirStringRefCreateFromCString(a->output),
                            a->kind, a->opt, &diag))) {
    fprintf(stderr, "dtensor-compile: %s\n", diag.message);
    return 1;
  }
  return 0;
}

DT_TUNE_ALLOCATOR;

int main(int argc, char **argv) {
  Args a = {.emit = "obj",
            .spmdOptions = "",
            .target = "cpu",
            .gpuOptions = "",
            .opt = 2,
            .spmd = true,
            .kind = DTENSOR_EMIT_OBJECT};
  int status = parseArgs(argc, argv, &a);
  if (status >= 0)
    return status;
  MlirContext ctx = dtensorContextCreate();
  dtensorRegisterUpstreamPasses();
  mlirContextAttachDiagnosticHandler(ctx, report, NULL, NULL);
  DtensorDiag diag;
  MlirOperation module = dtensorSourceParseFile(ctx, a.input, &diag);
  if (mlirOperationIsNull(module)) {
    if (diag.message[0])
      fprintf(stderr, "dtensor-compile: %s\n", diag.message);
    return 1;
  }
  if (a.autoShard &&
      mlirLogicalResultIsFailure(dtensorAutoShard(
          module,
          mlirStringRefCreateFromCString(a.autoOptions ? a.autoOptions : ""), 0,
          &diag))) {
    fprintf(stderr, "dtensor-compile: --auto: %s\n", diag.message);
    mlirContextDestroy(ctx);
    return 1;
  }
  if (a.bundle) {
    /* The runner's compilation (reference and SPMD program), written as
     * shared objects and a manifest for dtensor-check. */
    char options[128];
    status =
        dtensorRunnerExportBundle(module, a.entry, a.target,
                                  strcmp(a.target, "cuda")
                                      ? cpuOptions(&a, options, sizeof(options))
                                      : a.gpuOptions,
                                  a.output, &diag)
            ? 0
            : 1;
    if (status)
      fprintf(stderr, "dtensor-compile: %s\n", diag.message);
    mlirContextDestroy(ctx);
    return status;
  }
  dtensorMarkCInterface(module);
  status = lower(ctx, module, &a);
  if (!status)
    status = writeOutput(module, &a);
  mlirOperationDestroy(module);
  mlirContextDestroy(ctx);
  return status;
}
