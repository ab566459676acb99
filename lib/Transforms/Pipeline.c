/* The textual pass pipeline parser. MLIR's own parser does not know passes
 * created through the C API, so this one walks the pipeline grammar
 *   pipeline ::= element (',' element)*
 *   element  ::= op-name '(' pipeline? ')' | pass-name ('{' options '}')?
 * adds dtensor passes itself and hands every upstream pass, with its
 * options, to mlirOpPassManagerAddPipeline. */
#include "PassDef.h"

#include "Dialect/DialectInternal.h"
#include "Support/Support.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct Parser {
  const char *text;
  size_t length;
  size_t pos;
  DtensorDiag *diag;
} Parser;

static void skipSpace(Parser *p) {
  while (p->pos < p->length && isspace((unsigned char)p->text[p->pos]))
    ++p->pos;
}

static bool atEnd(Parser *p) { return p->pos >= p->length; }

static char peek(Parser *p) { return atEnd(p) ? '\0' : p->text[p->pos]; }

static bool isNameChar(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' ||
         c == '$';
}

/* The pipelines dtensor passes by name (dtensor-to-llvm takes no options,
 * so it is matched on its own below). */
static const struct {
  const char *name;
  MlirLogicalResult (*add)(MlirOpPassManager, MlirStringRef, DtensorDiag *);
} kPipelines[] = {{"dtensor-spmd", dtensorAddSpmdPipeline},
                  {"dtensor-to-nvvm", dtensorAddToNVVMPipeline},
                  {"dtensor-to-llvm", dtensorAddToLLVMPipelineWithOptions}};

const char *dtensorPipelineGetRegistered(int index) {
  int n = (int)(sizeof(kPipelines) / sizeof(kPipelines[0]));
  return index >= 0 && index < n ? kPipelines[index].name : NULL;
}

/* Finds the '}' closing the '{' at `p->pos`, skipping quoted text. */
static bool skipBraces(Parser *p) {
  size_t start = p->pos;
  int depth = 0;
  char quote = 0;
  for (; !atEnd(p); ++p->pos) {
    char c = p->text[p->pos];
    if (quote) {
      quote = c == quote ? 0 : quote;
      continue;
    }
    if (c == '"' || c == '\'')
      quote = c;
    else if (c == '{')
      ++depth;
    else if (c == '}' && --depth == 0) {
      ++p->pos;
      return true;
    }
  }
  return dtDiag(p->diag, (int)start, "unbalanced '{' in pass options");
}

static bool parseList(Parser *p, MlirOpPassManager pm, bool nested);

static bool parseElement(Parser *p, MlirOpPassManager pm) {
  size_t start = p->pos;
  while (!atEnd(p) && isNameChar(peek(p)))
    ++p->pos;
  size_t nameLength = p->pos - start;
  if (nameLength == 0)
    return dtDiag(p->diag, (int)start,
                  "expected a pass name or an op name "
                  "followed by '('");
  MlirStringRef name = {p->text + start, nameLength};
  skipSpace(p);
  if (peek(p) == '(') {
    ++p->pos;
    char opName[256];
    snprintf(opName, sizeof(opName), "%.*s", (int)nameLength, name.data);
    MlirOpPassManager inner = mlirOpPassManagerGetNestedUnder(
        pm, mlirStringRefCreateFromCString(opName));
    if (!parseList(p, inner, true))
      return false;
    if (peek(p) != ')')
      return dtDiag(p->diag, (int)p->pos, "expected ')' to close '%s('",
                    opName);
    ++p->pos;
    return true;
  }
  size_t optionsStart = p->pos, optionsEnd = p->pos;
  if (peek(p) == '{') {
    if (!skipBraces(p))
      return false;
    optionsEnd = p->pos;
  }
  /* The pipelines that take options, as their C API adds them. */
  for (size_t i = 0; i < sizeof(kPipelines) / sizeof(kPipelines[0]); ++i) {
    if (!mlirStringRefEqual(name,
                            mlirStringRefCreateFromCString(kPipelines[i].name)))
      continue;
    MlirStringRef options = {"", 0};
    if (optionsEnd > optionsStart)
      options = (MlirStringRef){p->text + optionsStart + 1,
                                optionsEnd - optionsStart - 2};
    if (mlirLogicalResultIsFailure(kPipelines[i].add(pm, options, p->diag))) {
      if (p->diag)
        p->diag->column += (int)optionsStart + 1;
      return false;
    }
    return true;
  }
  if (dtensorPassLookup(name)) {
    MlirStringRef options = {"", 0};
    if (optionsEnd > optionsStart)
      options = (MlirStringRef){p->text + optionsStart + 1,
                                optionsEnd - optionsStart - 2};
    MlirPass pass = dtensorPassCreate(name, options, p->diag);
    if (!pass.ptr) {
      if (p->diag)
        p->diag->column += (int)optionsStart + 1;
      return false;
    }
    mlirOpPassManagerAddOwnedPass(pm, pass);
    return true;
  }
  /* An upstream pass: hand MLIR the element with its options. */
  MlirStringRef element = {p->text + start, optionsEnd - start};
  char text[DTENSOR_DIAG_MESSAGE_SIZE];
  DtBuf sink = dtBufInit(text, sizeof(text));
  if (mlirLogicalResultIsFailure(
          mlirOpPassManagerAddPipeline(pm, element, dtBufSink, &sink))) {
    /* MLIR's messages can span lines and start with the parser's own
     * "<buffer>:1:1: error: "; keep the first line's message. */
    text[strcspn(text, "\n")] = '\0';
    const char *message = strstr(text, "error: ");
    message = message ? message + strlen("error: ") : text;
    return dtDiag(p->diag, (int)start, "%s",
                  *message ? message : "invalid pass");
  }
  return true;
}

static bool parseList(Parser *p, MlirOpPassManager pm, bool nested) {
  skipSpace(p);
  if (nested && peek(p) == ')')
    return true;
  for (;;) {
    if (!parseElement(p, pm))
      return false;
    skipSpace(p);
    if (peek(p) != ',')
      break;
    ++p->pos;
    skipSpace(p);
  }
  if (!nested && !atEnd(p))
    return dtDiag(p->diag, (int)p->pos,
                  "expected ',' or the end of the "
                  "pipeline, found '%c'",
                  peek(p));
  if (nested && peek(p) != ')')
    return dtDiag(p->diag, (int)p->pos, "expected ',' or ')'%s",
                  atEnd(p) ? " before the end of the pipeline" : "");
  return true;
}

/* The op name a pass manager is anchored on, read from its printed form
 * ("builtin.module(...)"). */
static void anchorName(MlirOpPassManager pm, char *out, size_t capacity) {
  char text[DTENSOR_DIAG_MESSAGE_SIZE];
  DtBuf sink = dtBufInit(text, sizeof(text));
  mlirPrintPassPipeline(pm, dtBufSink, &sink);
  size_t n = strcspn(text, "(");
  if (n >= capacity)
    n = capacity - 1;
  memcpy(out, text, n);
  out[n] = '\0';
}

MlirLogicalResult dtensorPassManagerAddPipeline(MlirOpPassManager pm,
                                                MlirStringRef pipeline,
                                                DtensorDiag *outDiag) {
  dtensorRegisterUpstreamPasses();
  Parser p = {pipeline.data, pipeline.length, 0, outDiag};
  skipSpace(&p);
  if (atEnd(&p))
    return mlirLogicalResultSuccess();
  /* `anchor(...)` spanning the whole text, with pm's anchor, is anchored. */
  size_t start = p.pos;
  while (!atEnd(&p) && isNameChar(peek(&p)))
    ++p.pos;
  char anchor[256];
  anchorName(pm, anchor, sizeof(anchor));
  size_t nameLength = p.pos - start;
  skipSpace(&p);
  bool anchored = peek(&p) == '(' && nameLength == strlen(anchor) &&
                  memcmp(pipeline.data + start, anchor, nameLength) == 0;
  if (anchored) {
    ++p.pos;
    if (!parseList(&p, pm, true))
      return mlirLogicalResultFailure();
    if (peek(&p) != ')') {
      dtDiag(outDiag, (int)p.pos, "expected ')' to close '%s('", anchor);
      return mlirLogicalResultFailure();
    }
    ++p.pos;
    skipSpace(&p);
    if (!atEnd(&p)) {
      dtDiag(outDiag, (int)p.pos, "unexpected text after the pipeline");
      return mlirLogicalResultFailure();
    }
    return mlirLogicalResultSuccess();
  }
  p.pos = start;
  return parseList(&p, pm, false) ? mlirLogicalResultSuccess()
                                  : mlirLogicalResultFailure();
}

/* What both targets do on tensors before bufferization: gathers lowered,
 * tosa to scf (control flow), linalg and arith (apply_scale included),
 * packs and softmax decomposed, half sums widened (the elementwise casts that
 * adds become linalg after it), and then bufferization with contractions
 * lowered to runtime calls. */
#define TO_LINALG_STEPS                                                        \
  "dtensor-lower-gathers, func.func(tosa-to-scf, tosa-to-linalg-named, "       \
  "tosa-to-linalg, tosa-to-arith{include-apply-rescale=true}, "                \
  "tosa-to-tensor, convert-elementwise-to-linalg), "                           \
  "dtensor-decompose-packs, dtensor-decompose-softmax, "                       \
  "dtensor-widen-reductions, "
#define BUFFERIZE_STEPS                                                        \
  "dtensor-prepare-contractions, dtensor-inits-to-inputs, "                    \
  "linalg-fuse-elementwise-ops, "                                              \
  "one-shot-bufferize{bufferize-function-boundaries "                          \
  "function-boundary-type-conversion=identity-layout-map "                     \
  "allow-return-allocs-from-loops}, "                                          \
  "buffer-deallocation-pipeline, convert-bufferization-to-memref, "            \
  "dtensor-lower-contractions, "

/* dtensor-spmd: every step as one pass (Spmd.c: verified once, not after
 * every step). */
MlirLogicalResult dtensorAddSpmdPipeline(MlirOpPassManager pm,
                                         MlirStringRef options,
                                         DtensorDiag *outDiag) {
  MlirPass pass = dtPassCreateFromDef(&dtSpmdPass, options, NULL, outDiag);
  if (!pass.ptr)
    return mlirLogicalResultFailure();
  mlirOpPassManagerAddOwnedPass(pm, pass);
  return mlirLogicalResultSuccess();
}

MlirLogicalResult dtensorAutoShard(MlirOperation module, MlirStringRef options,
                                   int64_t devices, DtensorDiag *outDiag) {
  DtPassOptions parsed;
  if (!dtPassOptionsParse(&dtAutoShardPass.info, options, &parsed, outDiag))
    return mlirLogicalResultFailure();
  /* Without mesh= of their own, the options ask for `devices`. */
  char text[DT_MAX_PASS_OPTIONS * (DT_MAX_OPTION_VALUE + 32)];
  snprintf(text, sizeof(text), "%.*s", (int)options.length, options.data);
  if (devices > 0 && !dtPassOptionsGet(&parsed, "mesh")[0])
    snprintf(text + strlen(text), sizeof(text) - strlen(text), " mesh=%lld",
             (long long)devices);
  MlirPass pass = dtPassCreateFromDef(
      &dtAutoShardPass, mlirStringRefCreateFromCString(text), NULL, outDiag);
  if (!pass.ptr)
    return mlirLogicalResultFailure();
  MlirPassManager pm = mlirPassManagerCreate(mlirOperationGetContext(module));
  mlirOpPassManagerAddOwnedPass(mlirPassManagerGetAsOpPassManager(pm), pass);
  bool ok = mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, module));
  mlirPassManagerDestroy(pm);
  if (!ok)
    dtDiag(outDiag, -1,
           "dtensor-auto-shard chose no layouts (its errors are above)");
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

MlirLogicalResult dtensorAddToLLVMPipeline(MlirOpPassManager pm,
                                           DtensorDiag *outDiag) {
  return dtensorAddToLLVMPipelineWithOptions(
      pm, mlirStringRefCreateFromCString(""), outDiag);
}

/* With threads=true, loops in threads: affine loops, whose outermost loop
 * that upstream's dependence analysis finds parallel becomes an OpenMP
 * worksharing loop (LLVM's libomp), the loops inside it sequential, so that
 * LLVM still vectorizes the innermost; a parallel loop inside another loop
 * stays sequential (dtensor-outer-parallel). A reduction's outer dims are
 * parallel (each iteration its own output row); a loop that carries a
 * value stays sequential. */
#define THREADED_LOOPS                                                         \
  "func.func(convert-linalg-to-affine-loops), "                                \
  "func.func(affine-parallelize{max-nested=1}), lower-affine, "                \
  "dtensor-outer-parallel, convert-scf-to-openmp, canonicalize"

/* dtensor-to-llvm{exact-reductions=true|false profile=... threads=...}:
 * runtime calls, tosa to linalg, then bufferization (each buffer freed
 * after its last use: dtensor-early-dealloc) and LLVM conversion. */
MlirLogicalResult dtensorAddToLLVMPipelineWithOptions(MlirOpPassManager pm,
                                                      MlirStringRef options,
                                                      DtensorDiag *outDiag) {
  bool exact = false, profile = false, threads = false;
  char text[256];
  snprintf(text, sizeof(text), "%.*s", (int)options.length, options.data);
  for (char *save = NULL, *tok = strtok_r(text, " ", &save); tok;
       tok = strtok_r(NULL, " ", &save)) {
    if (!strcmp(tok, "exact-reductions=true") ||
        !strcmp(tok, "exact-reductions"))
      exact = true;
    else if (!strcmp(tok, "exact-reductions=false"))
      exact = false;
    else if (!strcmp(tok, "profile=true") || !strcmp(tok, "profile"))
      profile = true;
    else if (!strcmp(tok, "profile=false"))
      profile = false;
    else if (!strcmp(tok, "threads=true") || !strcmp(tok, "threads"))
      threads = true;
    else if (!strcmp(tok, "threads=false"))
      threads = false;
    else
      return dtDiag(outDiag, 0,
                    "'dtensor-to-llvm' option '%s': expected "
                    "exact-reductions=true|false, profile=true|false or "
                    "threads=true|false",
                    tok),
             mlirLogicalResultFailure();
  }
  MlirPass pass = dtensorPassCreate(
      mlirStringRefCreateFromCString("dtensor-lower-to-runtime"),
      mlirStringRefCreateFromCString(""), outDiag);
  if (!pass.ptr)
    return mlirLogicalResultFailure();
  mlirOpPassManagerAddOwnedPass(pm, pass);
  char pipeline[2048];
  snprintf(
      pipeline, sizeof(pipeline),
      TO_LINALG_STEPS
      "func.func(convert-elementwise-to-linalg), " BUFFERIZE_STEPS
      "dtensor-early-dealloc, dtensor-expand-f8, dtensor-approximate-math, "
      "%s%s"
      "%s, expand-strided-metadata, lower-affine, "
      "convert-scf-to-cf, "
      "finalize-memref-to-llvm{use-generic-functions}, convert-to-llvm, "
      "convert-math-to-libm, convert-to-llvm, reconcile-unrealized-casts, "
      "dtensor-check-lowered",
      exact ? "" : "dtensor-reassociate-reductions, ",
      profile ? "dtensor-profile, " : "",
      threads ? THREADED_LOOPS : "convert-linalg-to-loops");
  return dtensorPassManagerAddPipeline(
      pm, mlirStringRefCreateFromCString(pipeline), outDiag);
}

/* dtensor-to-nvvm{chip=sm_90 format=bin}: the GPU target. Collectives to
 * runtime calls, tosa to linalg, bufferization, every buffer in device
 * memory (dtensor-gpu-memory), contractions to cuBLAS calls, loops with a
 * parallel dim turned innermost-first (dtensor-gpu-loop-order), tiled 32x8
 * and mapped to blocks and threads, kernels outlined, what stays on the host
 * checked (dtensor-gpu-check-host), then MLIR's NVVM pipeline: kernels to
 * cubins (format=bin, by CUDA's ptxas on PATH) or PTX (format=isa, compiled
 * by the driver at load), host code to LLVM calling the runtime's mgpu*
 * functions (lib/Runtime/Cuda.c). */
MlirLogicalResult dtensorAddToNVVMPipeline(MlirOpPassManager pm,
                                           MlirStringRef options,
                                           DtensorDiag *outDiag) {
  char chip[32] = "sm_90", format[8] = "bin", boundary[8] = "host";
  char text[256];
  snprintf(text, sizeof(text), "%.*s", (int)options.length, options.data);
  for (char *save = NULL, *tok = strtok_r(text, " ", &save); tok;
       tok = strtok_r(NULL, " ", &save)) {
    if (!strncmp(tok, "chip=", 5) && strlen(tok + 5) < sizeof(chip) &&
        !strncmp(tok + 5, "sm_", 3) && strlen(tok + 5) > 3 &&
        strspn(tok + 8, "0123456789a") == strlen(tok + 8))
      snprintf(chip, sizeof(chip), "%s", tok + 5);
    else if (!strcmp(tok, "format=bin") || !strcmp(tok, "format=isa"))
      snprintf(format, sizeof(format), "%s", tok + 7);
    else if (!strcmp(tok, "boundary=host") || !strcmp(tok, "boundary=device"))
      snprintf(boundary, sizeof(boundary), "%s", tok + 9);
    else
      return dtDiag(outDiag, 0,
                    "'dtensor-to-nvvm' option '%s': expected chip=sm_NN, "
                    "format=bin|isa or boundary=host|device",
                    tok),
             mlirLogicalResultFailure();
  }
  /* MLIR finds the CUDA toolkit (libdevice for math functions, ptxas) by
   * CUDA_ROOT, CUDA_HOME or CUDA_PATH; without them, where our machines
   * have it. */
  if (!getenv("CUDA_ROOT") && !getenv("CUDA_HOME") && !getenv("CUDA_PATH") &&
      access("/usr/local/cuda/nvvm/libdevice", R_OK) == 0)
    setenv("CUDA_HOME", "/usr/local/cuda", 0);
  char pipeline[2048];
  snprintf(pipeline, sizeof(pipeline),
           "dtensor-lower-to-runtime, " TO_LINALG_STEPS
           "func.func(convert-elementwise-to-linalg, "
           "linalg-generalize-named-ops), " BUFFERIZE_STEPS
           "dtensor-expand-f8, dtensor-gpu-memory{boundary=%s}, "
           "func.func(convert-linalg-to-parallel-loops), "
           "dtensor-gpu-loop-order, "
           "func.func(scf-parallel-loop-tiling{parallel-loop-tile-sizes=32,8 "
           "no-min-max-bounds=true}, sccp, "
           "gpu-map-parallel-loops, convert-parallel-loops-to-gpu), "
           "dtensor-gpu-serial-kernels, "
           "gpu-kernel-outlining, dtensor-gpu-check-host, lower-affine, "
           "func.func(gpu-async-region), "
           "gpu-lower-to-nvvm-pipeline{cubin-chip=%s cubin-features=+ptx80 "
           "cubin-format=%s}",
           boundary, chip, format);
  return dtensorPassManagerAddPipeline(
      pm, mlirStringRefCreateFromCString(pipeline), outDiag);
}
