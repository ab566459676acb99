/* dtensor-opt: parse MLIR, run dtensor and upstream passes, print the result.
 *
 * Usage: dtensor-opt [options] [input.mlir|-] [-o output]
 * Exit status: 0 success, 1 any error diagnostic (or a failed expectation
 * under --verify-diagnostics), 2 usage errors. */
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

enum { EXIT_OK = 0, EXIT_ERROR = 1, EXIT_USAGE = 2 };

/* ---- growable buffers ------------------------------------------------- */

typedef struct Text {
  char *data;
  size_t length, capacity;
} Text;

static void textAppend(Text *t, const char *s, size_t n) {
  if (t->length + n + 1 > t->capacity) {
    size_t cap = t->capacity ? t->capacity : 256;
    while (cap < t->length + n + 1)
      cap *= 2;
    char *grown = realloc(t->data, cap);
    if (!grown) {
      fprintf(stderr, "dtensor-opt: out of memory\n");
      exit(EXIT_ERROR);
    }
    t->data = grown;
    t->capacity = cap;
  }
  memcpy(t->data + t->length, s, n);
  t->length += n;
  t->data[t->length] = '\0';
}

static void textAppendStr(Text *t, const char *s) {
  textAppend(t, s, strlen(s));
}

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
} Options;

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
         "dtensor-lower-redistribute, canonicalize, cse");
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
        textAppendStr(&o->pipeline, ",");
      textAppendStr(&o->pipeline, "dtensor-report");
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
        textAppendStr(&o->pipeline, ",");
      if (eq) {
        textAppend(&o->pipeline, name, (size_t)(eq - name));
        textAppendStr(&o->pipeline, "{");
        textAppendStr(&o->pipeline, eq + 1);
        textAppendStr(&o->pipeline, "}");
      } else
        textAppendStr(&o->pipeline, name);
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

/* ---- diagnostics --------------------------------------------------------- */

typedef struct Diagnostic {
  MlirDiagnosticSeverity severity;
  char *file; /* NULL for an unknown location */
  unsigned line, column;
  char *message;
} Diagnostic;

typedef struct DiagList {
  Diagnostic *items;
  size_t count, capacity;
  bool anyError;
} DiagList;

static void stringSink(MlirStringRef s, void *userData) {
  textAppend(userData, s.data, s.length);
}

static char *dupRef(MlirStringRef s) {
  char *copy = malloc(s.length + 1);
  if (copy) {
    memcpy(copy, s.data, s.length);
    copy[s.length] = '\0';
  }
  return copy;
}

/* The first file:line:col inside `loc` (through names, call sites, fused). */
static bool fileLocation(MlirLocation loc, MlirStringRef *file, unsigned *line,
                         unsigned *column) {
  if (mlirLocationIsAFileLineColRange(loc)) {
    *file = mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
    *line = (unsigned)mlirLocationFileLineColRangeGetStartLine(loc);
    *column = (unsigned)mlirLocationFileLineColRangeGetStartColumn(loc);
    return true;
  }
  if (mlirLocationIsAName(loc))
    return fileLocation(mlirLocationNameGetChildLoc(loc), file, line, column);
  if (mlirLocationIsACallSite(loc))
    return fileLocation(mlirLocationCallSiteGetCallee(loc), file, line, column);
  if (mlirLocationIsAFused(loc)) {
    intptr_t n = mlirLocationFusedGetNumLocations(loc);
    MlirLocation inner[16];
    if (n > 16 || n < 1)
      return false;
    mlirLocationFusedGetLocations(loc, inner);
    for (intptr_t i = 0; i < n; ++i)
      if (fileLocation(inner[i], file, line, column))
        return true;
  }
  return false;
}

static void addDiagnostic(DiagList *list, MlirDiagnostic d) {
  if (list->count == list->capacity) {
    list->capacity = list->capacity ? 2 * list->capacity : 16;
    list->items = realloc(list->items, list->capacity * sizeof(Diagnostic));
    if (!list->items) {
      fprintf(stderr, "dtensor-opt: out of memory\n");
      exit(EXIT_ERROR);
    }
  }
  Diagnostic *out = &list->items[list->count++];
  out->severity = mlirDiagnosticGetSeverity(d);
  if (out->severity == MlirDiagnosticError)
    list->anyError = true;
  MlirStringRef file;
  out->file = NULL;
  out->line = out->column = 0;
  if (fileLocation(mlirDiagnosticGetLocation(d), &file, &out->line,
                   &out->column))
    out->file = dupRef(file);
  Text message = {0};
  mlirDiagnosticPrint(d, stringSink, &message);
  out->message = message.data ? message.data : dupRef((MlirStringRef){"", 0});
  for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); ++i)
    addDiagnostic(list, mlirDiagnosticGetNote(d, i));
}

/* MLIR attaches "see current operation: <op>" notes to verifier errors.
 * mlir-opt turns them off under --verify-diagnostics; the C API cannot, so
 * they are dropped there instead. */
static bool isOpDumpNote(const Diagnostic *d) {
  return d->severity == MlirDiagnosticNote &&
         !strncmp(d->message, "see current operation: ", 23);
}

static MlirLogicalResult collectDiagnostic(MlirDiagnostic d, void *userData) {
  addDiagnostic(userData, d);
  return mlirLogicalResultSuccess();
}

static void clearDiagnostics(DiagList *list) {
  for (size_t i = 0; i < list->count; ++i) {
    free(list->items[i].file);
    free(list->items[i].message);
  }
  list->count = 0;
  list->anyError = false;
}

static const char *severityName(MlirDiagnosticSeverity s) {
  switch (s) {
  case MlirDiagnosticError:
    return "error";
  case MlirDiagnosticWarning:
    return "warning";
  case MlirDiagnosticNote:
    return "note";
  case MlirDiagnosticRemark:
    return "remark";
  }
  return "error";
}

/* The input, for printing the source line under a diagnostic. */
typedef struct Source {
  const char *name;
  const char *text;
  size_t length;
} Source;

static void printSourceLine(const Source *src, unsigned line, unsigned column) {
  const char *p = src->text, *end = src->text + src->length;
  for (unsigned l = 1; l < line && p < end; ++l) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    p = nl ? nl + 1 : end;
  }
  if (p >= end || line == 0)
    return;
  const char *nl = memchr(p, '\n', (size_t)(end - p));
  int n = (int)((nl ? nl : end) - p);
  fprintf(stderr, "%.*s\n", n, p);
  for (unsigned c = 1; c < column && (int)c <= n; ++c)
    fputc(p[c - 1] == '\t' ? '\t' : ' ', stderr);
  fprintf(stderr, "^\n");
}

static void printDiagnostic(const Source *src, MlirDiagnosticSeverity sev,
                            const char *file, unsigned line, unsigned column,
                            const char *message) {
  if (file)
    fprintf(stderr, "%s:%u:%u: %s: %s\n", file, line, column, severityName(sev),
            message);
  else
    fprintf(stderr, "<unknown>: %s: %s\n", severityName(sev), message);
  if (file && !strcmp(file, src->name))
    printSourceLine(src, line, column);
}

static void printDiagnostics(const Source *src, const DiagList *list) {
  for (size_t i = 0; i < list->count; ++i) {
    const Diagnostic *d = &list->items[i];
    printDiagnostic(src, d->severity, d->file, d->line, d->column, d->message);
  }
}

/* ---- --verify-diagnostics ------------------------------------------------ */

typedef struct Expected {
  MlirDiagnosticSeverity severity;
  bool unknownLoc;
  unsigned line;     /* the line the diagnostic must be on */
  unsigned fromLine; /* the line of the comment */
  char *message;
  bool matched;
} Expected;

typedef struct ExpectedList {
  Expected *items;
  size_t count, capacity;
} ExpectedList;

static bool parseSeverity(const char *p, MlirDiagnosticSeverity *out,
                          size_t *length) {
  static const struct {
    const char *name;
    MlirDiagnosticSeverity sev;
  } kinds[] = {{"error", MlirDiagnosticError},
               {"warning", MlirDiagnosticWarning},
               {"remark", MlirDiagnosticRemark},
               {"note", MlirDiagnosticNote}};
  for (size_t k = 0; k < 4; ++k) {
    size_t n = strlen(kinds[k].name);
    if (!strncmp(p, kinds[k].name, n)) {
      *out = kinds[k].sev;
      *length = n;
      return true;
    }
  }
  return false;
}

/* The optional designator of an expected-* comment at `*at` (after the
 * severity): @above, @below, @unknown, @+N, @-N; sets `e`'s line. False
 * after reporting a malformed one. */
static bool parseDesignator(const Source *src, const char **at, const char *eol,
                            unsigned column, Expected *e) {
  const char *s = *at;
  unsigned line = e->line;
  while (s < eol && (*s == ' ' || *s == '\t'))
    ++s;
  if (s < eol && *s == '@') {
    ++s;
    if (!strncmp(s, "above", 5)) {
      e->line = line - 1;
      s += 5;
    } else if (!strncmp(s, "below", 5)) {
      e->line = line + 1;
      s += 5;
    } else if (!strncmp(s, "unknown", 7)) {
      e->unknownLoc = true;
      s += 7;
    } else if (*s == '+' || *s == '-') {
      char sign = *s++;
      char *stop;
      long k = strtol(s, &stop, 10);
      if (stop == s || k < 0 || (sign == '-' && (unsigned long)k >= line)) {
        printDiagnostic(src, MlirDiagnosticError, src->name, line, column,
                        "expected a line offset after '@+' or '@-' that "
                        "stays inside the file");
        return false;
      }
      e->line = sign == '+' ? line + (unsigned)k : line - (unsigned)k;
      s = stop;
    } else {
      printDiagnostic(src, MlirDiagnosticError, src->name, line, column,
                      "unknown designator after '@': use @+N, @-N, "
                      "@above, @below or @unknown");
      return false;
    }
  }
  *at = s;
  return true;
}

static void pushExpected(ExpectedList *out, Expected e) {
  if (out->count == out->capacity) {
    out->capacity = out->capacity ? 2 * out->capacity : 16;
    out->items = realloc(out->items, out->capacity * sizeof(Expected));
    if (!out->items) {
      fprintf(stderr, "dtensor-opt: out of memory\n");
      exit(EXIT_ERROR);
    }
  }
  out->items[out->count++] = e;
}

/* Reads the expected-* comments of one chunk. Lines are absolute; a
 * malformed comment is reported and makes the check fail. */
static bool parseExpectations(const Source *src, const char *text,
                              size_t length, ExpectedList *out) {
  bool ok = true;
  unsigned line = 1;
  const char *p = text, *end = text + length;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol)
      eol = end;
    for (const char *q = p; q < eol;) {
      const char *hit = NULL;
      for (const char *s = q; s + 9 <= eol; ++s)
        if (!memcmp(s, "expected-", 9)) {
          hit = s;
          break;
        }
      if (!hit)
        break;
      const char *s = hit + 9;
      MlirDiagnosticSeverity sev;
      size_t n;
      unsigned column = (unsigned)(hit - p) + 1;
      if (!parseSeverity(s, &sev, &n)) {
        q = s;
        continue;
      }
      s += n;
      if (s + 3 <= eol && !strncmp(s, "-re", 3)) {
        printDiagnostic(src, MlirDiagnosticError, src->name, line, column,
                        "expected-*-re (regex expectations) is not "
                        "supported; use a substring in {{...}}");
        ok = false;
        break;
      }
      Expected e = {sev, false, line, line, NULL, false};
      if (!parseDesignator(src, &s, eol, column, &e)) {
        ok = false;
        break;
      }
      while (s < eol && (*s == ' ' || *s == '\t'))
        ++s;
      const char *close = NULL;
      if (s + 2 <= eol && !strncmp(s, "{{", 2))
        for (const char *c = eol - 2; c >= s + 2; --c)
          if (!strncmp(c, "}}", 2)) {
            close = c;
            break;
          }
      if (!close) {
        printDiagnostic(src, MlirDiagnosticError, src->name, line, column,
                        "expected '{{message}}' after the expected-* "
                        "designator");
        ok = false;
        break;
      }
      e.message = dupRef((MlirStringRef){s + 2, (size_t)(close - s - 2)});
      pushExpected(out, e);
      q = close + 2;
    }
    p = eol + 1;
    ++line;
  }
  return ok;
}

/* Matches each diagnostic against one unmatched expectation; reports every
 * unexpected diagnostic and every expectation not produced. */
static bool checkExpectations(const Source *src, const DiagList *diags,
                              ExpectedList *expected) {
  bool ok = true;
  for (size_t i = 0; i < diags->count; ++i) {
    const Diagnostic *d = &diags->items[i];
    if (isOpDumpNote(d))
      continue;
    bool known = d->file && !strcmp(d->file, src->name);
    Expected *match = NULL;
    for (size_t k = 0; k < expected->count && !match; ++k) {
      Expected *e = &expected->items[k];
      if (e->matched || e->severity != d->severity)
        continue;
      if (e->unknownLoc ? d->file != NULL : !known || e->line != d->line)
        continue;
      if (strstr(d->message, e->message))
        match = e;
    }
    if (match) {
      match->matched = true;
      continue;
    }
    ok = false;
    char message[2048];
    snprintf(message, sizeof(message), "unexpected %s: %s",
             severityName(d->severity), d->message);
    printDiagnostic(src, MlirDiagnosticError, d->file, d->line, d->column,
                    message);
  }
  for (size_t k = 0; k < expected->count; ++k) {
    Expected *e = &expected->items[k];
    if (e->matched)
      continue;
    ok = false;
    char message[2048];
    snprintf(message, sizeof(message), "expected %s \"%s\" was not produced",
             severityName(e->severity), e->message);
    printDiagnostic(src, MlirDiagnosticError, src->name, e->fromLine, 1,
                    message);
  }
  for (size_t k = 0; k < expected->count; ++k)
    free(expected->items[k].message);
  expected->count = 0;
  return ok;
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
  textAppend(out, "", 0);
  while ((n = fread(buffer, 1, sizeof(buffer), f)) > 0)
    textAppend(out, buffer, n);
  bool ok = !ferror(f);
  if (!ok)
    fprintf(stderr, "dtensor-opt: cannot read '%s': %s\n", path,
            strerror(errno));
  if (f != stdin)
    fclose(f);
  return ok;
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

/* Builds the pass manager; returns false (after a message) for a bad
 * pipeline, which is a usage error. */
static bool buildPassManager(MlirContext ctx, const Options *o,
                             MlirOpPrintingFlags flags, bool instrument,
                             MlirPassManager *out) {
  MlirPassManager pm = mlirPassManagerCreateOnOperation(
      ctx, mlirStringRefCreateFromCString("builtin.module"));
  const char *text = o->passPipeline ? o->passPipeline : o->pipeline.data;
  DtensorDiag diag;
  if (text && mlirLogicalResultIsFailure(dtensorPassManagerAddPipeline(
                  mlirPassManagerGetAsOpPassManager(pm),
                  mlirStringRefCreateFromCString(text), &diag))) {
    fprintf(stderr,
            "dtensor-opt: invalid pass pipeline '%s' (at column "
            "%d): %s\n",
            text, diag.column + 1, diag.message);
    mlirPassManagerDestroy(pm);
    return false;
  }
  if (instrument && o->timing)
    mlirPassManagerEnableTiming(pm);
  if (instrument && (o->printIrAfterAll || o->printIrBeforeAll))
    mlirPassManagerEnableIRPrinting(pm, o->printIrBeforeAll, o->printIrAfterAll,
                                    true, false, false, flags,
                                    mlirStringRefCreateFromCString(""));
  *out = pm;
  return true;
}

static int64_t intField(MlirAttribute dict, const char *name) {
  MlirAttribute a = mlirDictionaryAttrGetElementByName(
      dict, mlirStringRefCreateFromCString(name));
  return mlirAttributeIsNull(a) ? 0 : mlirIntegerAttrGetValueInt(a);
}

static double floatField(MlirAttribute dict, const char *name) {
  MlirAttribute a = mlirDictionaryAttrGetElementByName(
      dict, mlirStringRefCreateFromCString(name));
  return mlirAttributeIsNull(a) ? 0.0 : mlirFloatAttrGetValueDouble(a);
}

typedef struct ReportWalk {
  const Source *src;
} ReportWalk;

static MlirWalkResult printCollective(MlirOperation op, void *userData) {
  ReportWalk *w = userData;
  MlirAttribute cost = mlirOperationGetDiscardableAttributeByName(
      op, mlirStringRefCreateFromCString("dtensor.cost"));
  if (mlirAttributeIsNull(cost))
    return MlirWalkResultAdvance;
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  MlirLocation loc = mlirOperationGetLocation(op);
  int line = 0;
  if (mlirLocationIsAFileLineColRange(loc))
    line = mlirLocationFileLineColRangeGetStartLine(loc);
  fprintf(stderr, "    %-24.*s %12lld bytes %12.3f us   %s:%d\n",
          (int)name.length, name.data, (long long)intField(cost, "bytes"),
          floatField(cost, "modelled_us"), w->src->name, line);
  return MlirWalkResultAdvance;
}

/* --dtensor-report: what the dtensor-report pass wrote, as a table. */
static void printReport(const Source *src, MlirOperation module) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f)) {
    MlirAttribute r = mlirOperationGetDiscardableAttributeByName(
        f, mlirStringRefCreateFromCString("dtensor.report"));
    if (mlirAttributeIsNull(r))
      continue;
    MlirStringRef fname =
        mlirStringAttrGetValue(mlirOperationGetAttributeByName(
            f, mlirStringRefCreateFromCString("sym_name")));
    fprintf(
        stderr,
        "dtensor report: @%.*s, per device\n"
        "  arguments %lld bytes, results %lld bytes, largest tensor %lld "
        "bytes\n"
        "  %lld collectives, %lld bytes moved, %.3f us modelled\n",
        (int)fname.length, fname.data, (long long)intField(r, "argument_bytes"),
        (long long)intField(r, "result_bytes"),
        (long long)intField(r, "largest_tensor_bytes"),
        (long long)intField(r, "collectives"),
        (long long)intField(r, "bytes_moved"), floatField(r, "modelled_us"));
    ReportWalk w = {src};
    mlirOperationWalk(f, printCollective, &w, MlirWalkPreOrder);
  }
}

/* The printing flags the options ask for. */
static MlirOpPrintingFlags printingFlags(const Options *o) {
  MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
  if (o->printGeneric)
    mlirOpPrintingFlagsPrintGenericOpForm(flags);
  if (o->printDebugInfo)
    mlirOpPrintingFlagsEnableDebugInfo(flags, true, false);
  return flags;
}

/* Processes one chunk; returns whether it succeeded (for
 * --verify-diagnostics: whether the diagnostics matched). */
static bool runChunk(MlirContext ctx, const Options *o, const Source *src,
                     const char *text, size_t length, DiagList *diags,
                     MlirOpPrintingFlags flags, FILE *out, bool *printed) {
  ExpectedList expected = {0};
  bool expectationsOk = true;
  if (o->verifyDiagnostics)
    expectationsOk = parseExpectations(src, text, length, &expected);
  clearDiagnostics(diags);
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
    module = dtensorSourceParse(ctx, (MlirStringRef){text, length},
                                mlirStringRefCreateFromCString(src->name));
  }
  bool ok = !mlirOperationIsNull(module);
  if (ok) {
    MlirPassManager pm;
    if (!buildPassManager(ctx, o, flags, true, &pm))
      exit(EXIT_USAGE);
    ok = mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, module));
    /* Destroying the pass manager prints the --mlir-timing report. */
    mlirPassManagerDestroy(pm);
    if (!ok && !diags->anyError)
      mlirEmitError(mlirOperationGetLocation(module),
                    "a pass failed without reporting why");
  }
  ok = ok && !diags->anyError;
  if (ok && o->report)
    printReport(src, module);
  if (ok) {
    if (*printed)
      fprintf(out, "// -----\n");
    /* The parser verified the module and the pass manager verified it
     * after every pass: printing need not verify it again (on large
     * programs that is a tenth of the run). */
    MlirOpPrintingFlags final = printingFlags(o);
    mlirOpPrintingFlagsAssumeVerified(final);
    static Sink sink;
    sink.file = out;
    sink.used = 0;
    mlirOperationPrintWithFlags(module, final, bufferedSink, &sink);
    sinkFlush(&sink);
    mlirOpPrintingFlagsDestroy(final);
    fprintf(out, "\n");
    *printed = true;
  }
  /* The last chunk's module is left to the end of the process, which
   * frees it at once instead of an op at a time (main skips destroying the
   * context for the same reason). */
  if (!mlirOperationIsNull(module) && o->splitInputFile)
    mlirOperationDestroy(module);
  if (o->verifyDiagnostics) {
    bool matched = checkExpectations(src, diags, &expected);
    free(expected.items);
    return expectationsOk && matched;
  }
  printDiagnostics(src, diags);
  return ok;
}

/* Whether the line starting at `p` is a chunk separator ("// -----"). */
static bool isSeparator(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t'))
    ++p;
  return end - p >= 8 && !memcmp(p, "// -----", 8);
}

/* The stream `-o` writes to. A regular file (or a new one) is written
 * through a temporary file beside it, named in `tmpPath`, which replaces it
 * at the end: the input may be the same file (read again by the parser),
 * and a failed run must not truncate it. Pipes and devices (/dev/null) are
 * written directly (`tmpPath` stays empty). */
static FILE *openOutput(const char *path, char *tmpPath, size_t size) {
  if (!strcmp(path, "-"))
    return stdout;
  struct stat st;
  bool exists = stat(path, &st) == 0;
  if (exists && !S_ISREG(st.st_mode))
    return fopen(path, "w");
  if ((size_t)snprintf(tmpPath, size, "%s.dtensor-opt-XXXXXX", path) >= size) {
    tmpPath[0] = 0;
    errno = ENAMETOOLONG;
    return NULL;
  }
  int fd = mkstemp(tmpPath);
  if (fd < 0) {
    tmpPath[0] = 0;
    return NULL;
  }
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, exists ? (st.st_mode & 07777) : (0666 & ~mask));
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    unlink(tmpPath);
    tmpPath[0] = 0;
  }
  return f;
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
      textAppend(&chunk, "", 0);
      for (unsigned k = 1; k < chunkLine; ++k)
        textAppendStr(&chunk, "\n");
      textAppend(&chunk, chunkStart, (size_t)(p - chunkStart));
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
  mlirContextAttachDiagnosticHandler(ctx, collectDiagnostic, &diags, NULL);
  MlirOpPrintingFlags flags = printingFlags(&o);

  /* Check the pipeline before reading any input: a bad one is usage. */
  MlirPassManager probe;
  if (!buildPassManager(ctx, &o, flags, false, &probe))
    return EXIT_USAGE;
  mlirPassManagerDestroy(probe);

  Text input = {0};
  if (!readInput(o.input, &input))
    return EXIT_ERROR;
  Source src = {strcmp(o.input, "-") ? o.input : "<stdin>", input.data,
                input.length};
  char tmpPath[4096 + 32] = "";
  FILE *out = openOutput(o.output, tmpPath, sizeof(tmpPath));
  if (!out) {
    fprintf(stderr, "dtensor-opt: cannot write '%s': %s\n", o.output,
            strerror(errno));
    return EXIT_ERROR;
  }

  bool ok = runAll(ctx, &o, &src, &diags, flags, out);
  /* A write that failed (a full disk, a closed pipe) is an error, not a
   * truncated result with status 0. */
  bool written = !ferror(out);
  written = (out != stdout ? fclose(out) : fflush(out)) == 0 && written;
  if (!written) {
    fprintf(stderr, "dtensor-opt: cannot write '%s': %s\n",
            strcmp(o.output, "-") ? o.output : "<stdout>", strerror(errno));
    ok = false;
  }
  /* The output file is replaced only by a complete result: a failed run
   * leaves it as it was (never empty or partial, which a build system
   * would take as up to date). */
  if (tmpPath[0] && ok && rename(tmpPath, o.output) != 0) {
    fprintf(stderr, "dtensor-opt: cannot write '%s': %s\n", o.output,
            strerror(errno));
    ok = false;
  }
  if (tmpPath[0] && !ok)
    unlink(tmpPath);
  mlirOpPrintingFlagsDestroy(flags);
  clearDiagnostics(&diags);
  free(diags.items);
  free(input.data);
  free(o.pipeline.data);
  if (o.splitInputFile)
    mlirContextDestroy(ctx);
  return ok ? EXIT_OK : EXIT_ERROR;
}
