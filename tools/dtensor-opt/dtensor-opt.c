/* dtensor-opt: parse MLIR, run dtensor and upstream passes, print the result.
 *
 * Usage: dtensor-opt [options] [input.mlir|-] [-o output]
 * Exit status: 0 success, 1 any error diagnostic (or a failed expectation
 * under --verify-diagnostics), 2 usage errors. */
#include "Opt.h"
#include "Support/Support.h"

#include "dtensor-c/Dialect.h"
#include "dtensor-c/Passes.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef DTENSOR_VERSION
#define DTENSOR_VERSION "unknown"
#endif
#ifndef DTENSOR_MLIR_VERSION
#define DTENSOR_MLIR_VERSION "unknown"
#endif

/* ---- options ------------------------------------------------------------ */

typedef struct Options {
  const char *input;
  const char *output;
  bool splitInputFile;
  bool report; /* --dtensor-report: run the pass and print its findings */
  bool verifyDiagnostics;
  bool printIrAfterAll;
  bool printIrBeforeAll;
  bool timing;
  bool disableThreading;
  bool printGeneric;
  bool printDebugInfo;
  bool allowUnregistered;
  Text pipeline; /* pass flags, in order, as pipeline elements */
  const char *passPipeline;
  int statistics;          /* --mlir-pass-statistics: 1 list, 2 pipeline */
  long elideLarger;        /* --mlir-elide-elementsattrs-if-larger (0: no) */
  bool localScope;         /* --mlir-print-local-scope */
  bool emitBytecode;       /* --emit-bytecode */
  const char *printAfter;  /* --mlir-print-ir-after=PASS */
  const char *printBefore; /* --mlir-print-ir-before=PASS */
  Text expanded;           /* the pipeline run, when it differs (main) */
  bool verifyAlongside;    /* the result verified while it is printed */
} Options;

static bool printsIr(const Options *o) {
  return o->printIrAfterAll || o->printIrBeforeAll || o->printAfter ||
         o->printBefore;
}

/* The pipeline text the options give. */
static const char *pipelineText(const Options *o) {
  if (o->expanded.length)
    return o->expanded.data;
  return o->passPipeline ? o->passPipeline : o->pipeline.data;
}

/* mlir-opt --help of the same MLIR release, embedded at build time
 * (tools/CMakeLists.txt). */
extern const char dtUpstreamHelp[];

static void ignoreDiagnostic(MlirStringRef s, void *ud) {
  (void)s;
  (void)ud;
}

/* True if `name` is a pass or pipeline our registry knows. */
static bool upstreamPassExists(MlirContext ctx, const char *name, size_t n) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirLogicalResult r = mlirOpPassManagerAddPipeline(
      mlirPassManagerGetAsOpPassManager(pm), mlirStringRefCreate(name, n),
      ignoreDiagnostic, NULL);
  mlirPassManagerDestroy(pm);
  return mlirLogicalResultIsSuccess(r);
}

/* Prints the "Passes:" and "Pass Pipelines:" sections of the embedded
 * mlir-opt help, keeping each entry (a `--name` line at indent 6 and the
 * option lines under it) only where our registry accepts the name. */
static void printUpstreamPasses(void) {
  const char *sections[2] = {"\n    Passes:\n", "\n    Pass Pipelines:\n"};
  const char *titles[2] = {"UPSTREAM MLIR PASSES", "UPSTREAM MLIR PIPELINES"};
  dtensorRegisterUpstreamPasses();
  MlirContext ctx = mlirContextCreate();
  for (int s = 0; s < 2; ++s) {
    const char *p = strstr(dtUpstreamHelp, sections[s]);
    if (!p)
      continue;
    p += strlen(sections[s]);
    printf("\n%s (options as in mlir-opt):\n", titles[s]);
    bool keep = false;
    int shown = 0;
    while (*p) {
      const char *end = strchr(p, '\n');
      size_t len = end ? (size_t)(end - p) : strlen(p);
      /* A section ends at the next header (indent 4, not an enum value). */
      if (len > 4 && !strncmp(p, "    ", 4) && p[4] != ' ' && p[4] != '=')
        break;
      if (len > 8 && !strncmp(p, "      --", 8)) {
        const char *name = p + 8;
        size_t n = strcspn(name, " =\n");
        keep = strncmp(name, "test-", 5) && upstreamPassExists(ctx, name, n);
        shown += keep;
      }
      if (keep)
        printf("%.*s\n", (int)len, p);
      if (!end)
        break;
      p = end + 1;
    }
    if (!shown)
      printf("    (none found)\n");
  }
  mlirContextDestroy(ctx);
}

static void printHelp(void) {
  printf(
      "OVERVIEW: dtensor-opt - the dtensor MLIR optimizer driver\n\n"
      "USAGE: dtensor-opt [options] [input.mlir|-] [-o output]\n\n"
      "OPTIONS:\n"
      "  -o <file>                    Write output to <file> (default: -)\n"
      "  --pass-pipeline=<pipeline>   Run a textual pipeline, e.g.\n"
      "                               'builtin.module(dtensor-verify, "
      "canonicalize)'\n"
      "  --<pass>[=<options>]         Run one pass (dtensor or upstream),\n"
      "                               e.g. --cse, --canonicalize=\"max-"
      "iterations=2\"\n"
      "  --dtensor-report             Run dtensor-report last and print "
      "its estimate\n"
      "                               (per-device memory, collectives) to "
      "stderr\n"
      "  --split-input-file           Process each '// -----' chunk "
      "separately\n"
      "  --verify-diagnostics         Check diagnostics against "
      "expected-error/\n"
      "                               warning/remark/note comments "
      "(@+N, @-N,\n"
      "                               @above, @below, @unknown)\n"
      "  --mlir-print-ir-after-all    Print the IR after every pass (stderr)\n"
      "  --mlir-print-ir-before-all   Print the IR before every pass "
      "(stderr)\n"
      "  --mlir-timing                Print pass timings (stderr)\n"
      "  --mlir-disable-threading     Run passes on one thread\n"
      "  --mlir-print-op-generic      Print ops in generic form\n"
      "  --mlir-print-debuginfo       Print locations\n"
      "  --mlir-print-ir-after=<pass> Print the IR after <pass> (stderr; a "
      "pass nested\n"
      "                               in func.func(...): after that whole "
      "element)\n"
      "  --mlir-print-ir-before=<pass> Print the IR before <pass>\n"
      "                               (with any IR printing, dtensor-spmd "
      "runs as its\n"
      "                               stages, so that each shows)\n"
      "  --mlir-pass-statistics       Print pass statistics (stderr)\n"
      "  --mlir-pass-statistics-display=list|pipeline\n"
      "  --mlir-elide-elementsattrs-if-larger=<n> Elide constants of more "
      "than n elements\n"
      "  --mlir-print-local-scope     Print attribute and type aliases "
      "inline\n"
      "  --emit-bytecode              Write MLIR bytecode instead of text\n"
      "  --allow-unregistered-dialect Accept ops of unknown dialects\n"
      "  --help                       Show this help\n"
      "  --version                    Show the version\n\n"
      "DTENSOR PASSES:\n");
  for (int i = 0; i < dtensorPassGetNumRegistered(); ++i) {
    const DtensorPassInfo *p = dtensorPassGetRegistered(i);
    printf("  --%-26s %s\n", p->argument, p->summary);
    for (int k = 0; k < p->numOptions; ++k) {
      const DtensorPassOptionInfo *o = &p->options[k];
      const char *type = o->type == DTENSOR_OPTION_BOOL   ? "bool"
                         : o->type == DTENSOR_OPTION_INT  ? "int"
                         : o->type == DTENSOR_OPTION_ENUM ? o->values
                                                          : "string";
      printf("      %s=<%s>  %s (default: %s)\n", o->name, type, o->description,
             o->defaultValue);
    }
  }
  printf("\nDTENSOR PIPELINES:\n"
         "  --%-26s %s\n"
         "      options: strict, why (to dtensor-propagate); strategy, "
         "objective, report (to dtensor-lower-redistribute)\n",
         "dtensor-spmd",
         "dtensor-verify, dtensor-propagate, dtensor-partition, "
         "dtensor-lower-redistribute, cse, canonicalize");
  printUpstreamPasses();
}

static int usage(const char *format, const char *arg) {
  fprintf(stderr, "dtensor-opt: ");
  fprintf(stderr, format, arg);
  fprintf(stderr, "\nRun 'dtensor-opt --help' for usage.\n");
  return EXIT_USAGE;
}

static int parseArgs(int argc, char **argv, Options *o) {
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "-o")) {
      if (++i == argc)
        return usage("%s needs a file name", "-o");
      o->output = argv[i];
    } else if (!strcmp(a, "--help") || !strcmp(a, "-help") ||
               !strcmp(a, "-h")) {
      printHelp();
      exit(EXIT_OK);
    } else if (!strcmp(a, "--version")) {
      printf("dtensor-opt %s (MLIR %s)\n", DTENSOR_VERSION,
             DTENSOR_MLIR_VERSION);
      exit(EXIT_OK);
    } else if (!strcmp(a, "--split-input-file")) {
      o->splitInputFile = true;
    } else if (!strcmp(a, "--dtensor-report")) {
      o->report = true;
      if (o->pipeline.length)
        dtOptTextAppendStr(&o->pipeline, ",");
      dtOptTextAppendStr(&o->pipeline, "dtensor-report");
    } else if (!strcmp(a, "--verify-diagnostics")) {
      o->verifyDiagnostics = true;
    } else if (!strcmp(a, "--mlir-print-ir-after-all")) {
      o->printIrAfterAll = true;
    } else if (!strcmp(a, "--mlir-print-ir-before-all")) {
      o->printIrBeforeAll = true;
    } else if (!strcmp(a, "--mlir-timing")) {
      o->timing = true;
    } else if (!strcmp(a, "--mlir-disable-threading")) {
      o->disableThreading = true;
    } else if (!strcmp(a, "--mlir-print-op-generic")) {
      o->printGeneric = true;
    } else if (!strcmp(a, "--allow-unregistered-dialect")) {
      o->allowUnregistered = true;
    } else if (!strcmp(a, "--mlir-print-debuginfo")) {
      o->printDebugInfo = true;
    } else if (!strcmp(a, "--mlir-pass-statistics")) {
      o->statistics = o->statistics ? o->statistics : 1;
    } else if (!strncmp(a, "--mlir-pass-statistics-display=", 31)) {
      if (strcmp(a + 31, "list") && strcmp(a + 31, "pipeline"))
        return usage("--mlir-pass-statistics-display takes list or "
                     "pipeline, not '%s'",
                     a + 31);
      o->statistics = strcmp(a + 31, "list") ? 2 : 1;
    } else if (!strncmp(a, "--mlir-elide-elementsattrs-if-larger=", 37)) {
      o->elideLarger = dtWholeNumber(a + 37, 1, 1L << 40);
      if (o->elideLarger < 1)
        return usage("--mlir-elide-elementsattrs-if-larger takes a number of "
                     "elements, not '%s'",
                     a + 37);
    } else if (!strcmp(a, "--mlir-print-local-scope")) {
      o->localScope = true;
    } else if (!strcmp(a, "--emit-bytecode")) {
      o->emitBytecode = true;
    } else if (!strncmp(a, "--mlir-print-ir-after=", 22)) {
      o->printAfter = a + 22;
    } else if (!strncmp(a, "--mlir-print-ir-before=", 23)) {
      o->printBefore = a + 23;
    } else if (!strncmp(a, "--pass-pipeline=", 16)) {
      o->passPipeline = a + 16;
    } else if (!strcmp(a, "--pass-pipeline")) {
      if (++i == argc)
        return usage("%s needs a pipeline", "--pass-pipeline");
      o->passPipeline = argv[i];
    } else if (!strcmp(a, "-") || a[0] != '-') {
      if (o->input)
        return usage("more than one input file ('%s')", a);
      o->input = a;
    } else if (a[0] == '-' && a[1] != '\0') {
      /* A pass flag: --name or --name=options becomes `name{options}`. */
      const char *name = a + (a[1] == '-' ? 2 : 1);
      const char *eq = strchr(name, '=');
      if (!*name || name[0] == '=')
        return usage("'%s' is not an option", a);
      if (o->pipeline.length)
        dtOptTextAppendStr(&o->pipeline, ",");
      if (eq) {
        dtOptTextAppend(&o->pipeline, name, (size_t)(eq - name));
        dtOptTextAppendStr(&o->pipeline, "{");
        dtOptTextAppendStr(&o->pipeline, eq + 1);
        dtOptTextAppendStr(&o->pipeline, "}");
      } else
        dtOptTextAppendStr(&o->pipeline, name);
    }
  }
  if (o->passPipeline && o->pipeline.length)
    return usage("%s cannot be combined with individual pass flags",
                 "--pass-pipeline");
  if (!o->input)
    o->input = "-";
  if (!o->output)
    o->output = "-";
  return -1;
}

/* ---- running ------------------------------------------------------------- */

static bool readInput(const char *path, Text *out) {
  FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
  if (!f) {
    fprintf(stderr, "dtensor-opt: cannot open '%s': %s\n", path,
            strerror(errno));
    return false;
  }
  char buffer[65536];
  size_t n;
  dtOptTextAppend(out, "", 0);
  while ((n = fread(buffer, 1, sizeof(buffer), f)) > 0)
    dtOptTextAppend(out, buffer, n);
  bool ok = !ferror(f);
  if (!ok)
    fprintf(stderr, "dtensor-opt: cannot read '%s': %s\n", path,
            strerror(errno));
  if (f != stdin)
    fclose(f);
  return ok;
}

static bool isRegularFile(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whether `path` opens for reading (else says why, as readInput). */
static bool canRead(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "dtensor-opt: cannot open '%s': %s\n", path,
            strerror(errno));
    return false;
  }
  fclose(f);
  return true;
}

/* The C API's printer hands over every token on its own: they are
 * gathered here and written in large pieces. */
typedef struct Sink {
  FILE *file;
  size_t used;
  char buffer[1 << 16];
} Sink;

static void sinkFlush(Sink *k) {
  fwrite(k->buffer, 1, k->used, k->file);
  k->used = 0;
}

static void bufferedSink(MlirStringRef s, void *userData) {
  Sink *k = userData;
  if (k->used + s.length > sizeof(k->buffer))
    sinkFlush(k);
  if (s.length > sizeof(k->buffer)) {
    fwrite(s.data, 1, s.length, k->file);
    return;
  }
  memcpy(k->buffer + k->used, s.data, s.length);
  k->used += s.length;
}

/* Whether the result can be verified while it is printed instead of by
 * the pass manager before (on a 10^4-block program the verifier takes
 * 0.15 s and printing 0.09 s, one after the other on one core): only
 * when `pm` runs a single pass (between passes the pass manager verifies,
 * which a later pass relies on), with a second processor to run on and
 * the context's threads (its uniquing is then safe from two threads),
 * nothing else reading the result first (--dtensor-report), one module
 * (--split-input-file writes a separator before each) and no
 * instrumentation whose figures include the verifier (--mlir-timing,
 * statistics, IR printing). */
static bool canVerifyAlongside(const Options *o, MlirPassManager pm) {
  if (o->timing || o->statistics || o->disableThreading || o->report ||
      o->splitInputFile || printsIr(o) || dtCoresToRunOn() < 2)
    return false;
  Text text = {0};
  mlirPrintPassPipeline(mlirPassManagerGetAsOpPassManager(pm), dtOptTextSink,
                        &text);
  Element e[2];
  bool one = text.data && dtOptSplitPipeline(text.data, e, 2) == 1 &&
             memchr(e[0].text, '(', e[0].length) == NULL;
  free(text.data);
  return one;
}

/* "did you mean" for a pass name the registry does not know. */
static void suggest(const char *message) {
  const char *q = strchr(message, '\'');
  const char *e = q ? strchr(q + 1, '\'') : NULL;
  char best[128];
  if (q && e && strstr(e, "does not refer to a registered pass") &&
      dtOptSuggestPass(q + 1, (size_t)(e - q - 1), dtUpstreamHelp, best,
                       sizeof(best)))
    fprintf(stderr, "dtensor-opt: did you mean '%s'?\n", best);
}

/* Builds the pass manager for pipeline `text`; returns false (after a
 * message) for a bad pipeline, which is a usage error. */
static bool buildPassManagerFor(MlirContext ctx, const Options *o,
                                const char *text, MlirOpPrintingFlags flags,
                                bool instrument, MlirPassManager *out) {
  MlirPassManager pm = mlirPassManagerCreateOnOperation(
      ctx, mlirStringRefCreateFromCString("builtin.module"));
  DtensorDiag diag;
  if (text && mlirLogicalResultIsFailure(dtensorPassManagerAddPipeline(
                  mlirPassManagerGetAsOpPassManager(pm),
                  mlirStringRefCreateFromCString(text), &diag))) {
    fprintf(stderr,
            "dtensor-opt: invalid pass pipeline '%s' (at column "
            "%d): %s\n",
            text, diag.column + 1, diag.message);
    suggest(diag.message);
    mlirPassManagerDestroy(pm);
    return false;
  }
  if (instrument && o->statistics)
    mlirPassManagerEnableStatistics(pm, o->statistics == 2
                                            ? MLIR_PASS_DISPLAY_MODE_PIPELINE
                                            : MLIR_PASS_DISPLAY_MODE_LIST);
  if (instrument && o->timing)
    mlirPassManagerEnableTiming(pm);
  if (instrument && (o->printIrAfterAll || o->printIrBeforeAll))
    mlirPassManagerEnableIRPrinting(pm, o->printIrBeforeAll, o->printIrAfterAll,
                                    true, false, false, flags,
                                    mlirStringRefCreateFromCString(""));
  *out = pm;
  return true;
}

static bool buildPassManager(MlirContext ctx, const Options *o,
                             MlirOpPrintingFlags flags, bool instrument,
                             MlirPassManager *out) {
  return buildPassManagerFor(ctx, o, pipelineText(o), flags, instrument, out);
}

static void toStderr(MlirStringRef s, void *userData) {
  (void)userData;
  fwrite(s.data, 1, s.length, stderr);
}

/* The printing flags the options ask for. */
static MlirOpPrintingFlags printingFlags(const Options *o) {
  MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
  if (o->printGeneric)
    mlirOpPrintingFlagsPrintGenericOpForm(flags);
  if (o->printDebugInfo)
    mlirOpPrintingFlagsEnableDebugInfo(flags, true, false);
  if (o->elideLarger > 0)
    mlirOpPrintingFlagsElideLargeElementsAttrs(flags, o->elideLarger);
  if (o->localScope)
    mlirOpPrintingFlagsUseLocalScope(flags);
  return flags;
}

/* The IR of `module` to stderr under a dump header, as mlir-opt prints it. */
static void dumpIr(MlirOperation module, const char *when, const char *pass,
                   size_t passLength, MlirOpPrintingFlags flags) {
  fprintf(stderr, "// -----// IR Dump %s %.*s //----- //\n", when,
          (int)passLength, pass);
  mlirOperationPrintWithFlags(module, flags, toStderr, NULL);
  fprintf(stderr, "\n\n");
}

/* --mlir-print-ir-after/before=PASS: the C API prints after every pass or
 * none, so the pipeline runs one top-level element at a time and the IR is
 * printed around the elements that are PASS or hold it (a nested pass:
 * around its whole element). */
static bool runSegmented(MlirContext ctx, const Options *o,
                         MlirOperation module, MlirOpPrintingFlags flags) {
  const char *text = pipelineText(o);
  Element elements[256];
  int n = dtOptSplitPipeline(text ? text : "", elements, 256);
  if (n < 0) {
    fprintf(stderr, "dtensor-opt: more than 256 passes with "
                    "--mlir-print-ir-after/before\n");
    return false;
  }
  bool any = false, ok = true;
  for (int i = 0; ok && i < n; ++i) {
    const Element *e = &elements[i];
    char *one = strndup(e->text, e->length);
    if (!one)
      return false;
    bool before = o->printBefore && dtOptElementNames(e, o->printBefore);
    bool after = o->printAfter && dtOptElementNames(e, o->printAfter);
    any |= before || after;
    if (before)
      dumpIr(module, "Before", e->text, e->nameLength, flags);
    MlirPassManager pm;
    if (!buildPassManagerFor(ctx, o, one, flags, true, &pm))
      exit(EXIT_USAGE);
    ok = mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, module));
    mlirPassManagerDestroy(pm);
    if (ok && after)
      dumpIr(module, "After", e->text, e->nameLength, flags);
    free(one);
  }
  if (!any)
    fprintf(stderr,
            "dtensor-opt: note: no pass of the pipeline is '%s'; nothing "
            "was printed\n",
            o->printAfter ? o->printAfter : o->printBefore);
  return ok;
}

/* Writes `module` to `out` (after a separator when `separate`); with
 * o->verifyAlongside verified meanwhile (dtensorPrintVerified), and
 * written only if it verifies. Returns whether it was written. */
static bool printResult(const Options *o, MlirOperation module, bool separate,
                        FILE *out) {
  if (separate)
    fprintf(out, "// -----\n");
  MlirOpPrintingFlags flags = printingFlags(o);
  static Sink sink;
  sink.file = out;
  sink.used = 0;
  bool ok = true;
  if (o->verifyAlongside) {
    ok = dtensorPrintVerified(module, flags, o->emitBytecode, true,
                              bufferedSink, &sink);
  } else {
    /* The parser verified the module and the pass manager verified it
     * after every pass: printing need not verify it again (on large
     * programs that is a tenth of the run). */
    mlirOpPrintingFlagsAssumeVerified(flags);
    if (o->emitBytecode)
      mlirOperationWriteBytecode(module, bufferedSink, &sink);
    else
      mlirOperationPrintWithFlags(module, flags, bufferedSink, &sink);
  }
  sinkFlush(&sink);
  mlirOpPrintingFlagsDestroy(flags);
  if (ok && !o->emitBytecode)
    fprintf(out, "\n");
  return ok;
}

/* Processes one chunk; returns whether it succeeded (for
 * --verify-diagnostics: whether the diagnostics matched). */
static bool runChunk(MlirContext ctx, const Options *o, const Source *src,
                     const char *text, size_t length, DiagList *diags,
                     MlirOpPrintingFlags flags, FILE *out, bool *printed) {
  ExpectedList expected = {0};
  bool expectationsOk = true;
  if (o->verifyDiagnostics)
    expectationsOk = dtOptParseExpectations(src, text, length, &expected);
  dtOptClearDiagnostics(diags);
  /* A whole regular file is parsed from its path (the parser then names
   * locations after it); a chunk, stdin, a pipe or a device from the text
   * already read (reading those again would find nothing, or block). */
  MlirOperation module;
  struct stat inputStat;
  if (!o->splitInputFile && strcmp(o->input, "-") &&
      stat(o->input, &inputStat) == 0 && S_ISREG(inputStat.st_mode)) {
    DtensorDiag readDiag;
    module = dtensorSourceParseFile(ctx, o->input, &readDiag);
    if (mlirOperationIsNull(module) && readDiag.message[0])
      mlirEmitError(mlirLocationUnknownGet(ctx), readDiag.message);
  } else {
    if (!text)
      text = dtOptSourceText(src, &length);
    module = dtensorSourceParse(ctx, (MlirStringRef){text ? text : "", length},
                                mlirStringRefCreateFromCString(src->name));
  }
  bool ok = !mlirOperationIsNull(module);
  if (ok) {
    if (o->printAfter || o->printBefore) {
      ok = runSegmented(ctx, o, module, flags);
    } else {
      MlirPassManager pm;
      if (!buildPassManager(ctx, o, flags, true, &pm))
        exit(EXIT_USAGE);
      if (o->verifyAlongside)
        mlirPassManagerEnableVerifier(pm, false);
      ok = mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, module));
      /* Destroying the pass manager prints the --mlir-timing report. */
      mlirPassManagerDestroy(pm);
    }
    if (!ok && !diags->anyError)
      mlirEmitError(mlirOperationGetLocation(module),
                    "a pass failed without reporting why");
  }
  ok = ok && !diags->anyError;
  if (ok && o->report)
    dtensorReportPrint(module, mlirStringRefCreateFromCString(src->name),
                       toStderr, NULL);
  if (ok && printResult(o, module, *printed, out))
    *printed = true;
  else
    ok = false;
  /* The last chunk's module is left to the end of the process, which
   * frees it at once instead of an op at a time (main skips destroying the
   * context for the same reason). */
  if (!mlirOperationIsNull(module) && o->splitInputFile)
    mlirOperationDestroy(module);
  if (o->verifyDiagnostics) {
    bool matched = dtOptCheckExpectations(src, diags, &expected);
    free(expected.items);
    return expectationsOk && matched;
  }
  dtOptPrintDiagnostics(src, diags);
  return ok;
}

/* Whether the line starting at `p` is a chunk separator ("// -----"). */
static bool isSeparator(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t'))
    ++p;
  return end - p >= 8 && !memcmp(p, "// -----", 8);
}

/* Runs the pipeline on the whole input, or on each chunk of
 * --split-input-file; false if any run failed. */
static bool runAll(MlirContext ctx, const Options *o, const Source *src,
                   DiagList *diags, MlirOpPrintingFlags flags, FILE *out) {
  bool ok = true, printed = false;
  if (!o->splitInputFile)
    return runChunk(ctx, o, src, src->text, src->length, diags, flags, out,
                    &printed);
  /* Each chunk is padded with the newlines of the lines before it, so
   * line numbers in diagnostics are those of the whole file. */
  const char *p = src->text, *end = src->text + src->length;
  const char *chunkStart = p;
  unsigned line = 1, chunkLine = 1;
  Text chunk = {0};
  for (;;) {
    const char *eol = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
    const char *next = eol ? eol + 1 : end;
    bool separator = p < end && isSeparator(p, eol ? eol : end);
    if (separator || p >= end) {
      chunk.length = 0;
      dtOptTextAppend(&chunk, "", 0);
      for (unsigned k = 1; k < chunkLine; ++k)
        dtOptTextAppendStr(&chunk, "\n");
      dtOptTextAppend(&chunk, chunkStart, (size_t)(p - chunkStart));
      ok &= runChunk(ctx, o, src, chunk.data, chunk.length, diags, flags, out,
                     &printed);
      if (p >= end)
        break;
      chunkStart = next;
      chunkLine = line + 1;
    }
    p = next;
    ++line;
  }
  free(chunk.data);
  return ok;
}

/* o->expanded: the pipeline with each top-level dtensor-spmd spelled out
 * as its stages (dtensorSpmdStages); false after a message. */
static bool expandSpmd(Options *o) {
  const char *text = o->passPipeline ? o->passPipeline : o->pipeline.data;
  Element elements[256];
  int n = dtOptSplitPipeline(text ? text : "", elements, 256);
  bool any = false;
  for (int i = 0; i < n && !any; ++i)
    any = elements[i].nameLength == 12 &&
          !strncmp(elements[i].text, "dtensor-spmd", 12);
  if (!any)
    return true;
  dtOptTextAppend(&o->expanded, "", 0);
  for (int i = 0; i < n; ++i) {
    const Element *e = &elements[i];
    if (i)
      dtOptTextAppendStr(&o->expanded, ", ");
    if (e->nameLength != 12 || strncmp(e->text, "dtensor-spmd", 12)) {
      dtOptTextAppend(&o->expanded, e->text, e->length);
      continue;
    }
    /* dtensor-spmd{OPTIONS}: the options between the braces. */
    MlirStringRef options = {"", 0};
    if (e->length > 13 && e->text[12] == '{')
      options = (MlirStringRef){e->text + 13, e->length - 14};
    char stages[4096];
    DtensorDiag diag;
    if (mlirLogicalResultIsFailure(
            dtensorSpmdStages(options, stages, sizeof(stages), &diag))) {
      fprintf(stderr, "dtensor-opt: dtensor-spmd: %s\n", diag.message);
      return false;
    }
    dtOptTextAppendStr(&o->expanded, stages);
  }
  return true;
}

DT_TUNE_ALLOCATOR;

int main(int argc, char **argv) {
  Options o = {0};
  int status = parseArgs(argc, argv, &o);
  if (status >= 0)
    return status;

  MlirContext ctx = dtensorContextCreate();
  if (mlirContextIsNull(ctx)) {
    fprintf(stderr, "dtensor-opt: the dtensor dialect did not load\n");
    return EXIT_ERROR;
  }
  dtensorRegisterUpstreamPasses();
  mlirContextSetAllowUnregisteredDialects(ctx, o.allowUnregistered);
  if (o.printIrAfterAll || o.printIrBeforeAll || o.disableThreading)
    mlirContextEnableMultithreading(ctx, false);
  DiagList diags = {0};
  mlirContextAttachDiagnosticHandler(ctx, dtOptCollectDiagnostic, &diags, NULL);
  MlirOpPrintingFlags flags = printingFlags(&o);
  if (o.emitBytecode && o.splitInputFile) {
    fprintf(stderr, "dtensor-opt: --emit-bytecode writes one module; it "
                    "cannot be combined with --split-input-file\n");
    return EXIT_USAGE;
  }
  /* With IR printing, dtensor-spmd runs as its stages, so that each one
   * shows (the one-pass form computes the same, verified once). */
  if (printsIr(&o) && !expandSpmd(&o))
    return EXIT_USAGE;

  /* Check the pipeline before reading any input: a bad one is usage. */
  MlirPassManager probe;
  if (!buildPassManager(ctx, &o, flags, false, &probe))
    return EXIT_USAGE;
  o.verifyAlongside = canVerifyAlongside(&o, probe);
  mlirPassManagerDestroy(probe);

  /* A whole regular file is parsed from its path (runChunk): its text is
   * read only if a diagnostic quotes it (on a large program, reading it
   * ahead cost a tenth of the parse). Chunks, expectations and streams
   * need the text now. */
  Text input = {0}, loaded = {0};
  bool lazy = !o.splitInputFile && !o.verifyDiagnostics &&
              strcmp(o.input, "-") && isRegularFile(o.input);
  if (lazy ? !canRead(o.input) : !readInput(o.input, &input))
    return EXIT_ERROR;
  Source src = {strcmp(o.input, "-") ? o.input : "<stdin>", input.data,
                input.length, lazy ? o.input : NULL, &loaded};
  /* The output file is replaced only by a complete result: a failed run
   * leaves it as it was (never empty or partial, which a build system
   * would take as up to date); a link planted there is not followed
   * (dtOutputOpen). */
  DtOutput out;
  DtensorDiag diag;
  if (!dtOutputOpen(&out, o.output, &diag)) {
    fprintf(stderr, "dtensor-opt: %s\n", diag.message);
    return EXIT_ERROR;
  }
  bool ok = runAll(ctx, &o, &src, &diags, flags, out.file);
  /* A write that failed (a full disk, a closed pipe) is an error, not a
   * truncated result with status 0. */
  if (!dtOutputClose(&out, ok, &diag)) {
    fprintf(stderr, "dtensor-opt: %s\n", diag.message);
    ok = false;
  }
  mlirOpPrintingFlagsDestroy(flags);
  dtOptClearDiagnostics(&diags);
  free(diags.items);
  free(input.data);
  free(loaded.data);
  free(o.pipeline.data);
  if (o.splitInputFile)
    mlirContextDestroy(ctx);
  return ok ? EXIT_OK : EXIT_ERROR;
}
