/* dtensor-opt's diagnostics: collected from the context, printed with
 * their source lines, and checked against expected-* comments
 * (--verify-diagnostics). */
#include "Opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable buffers ------------------------------------------------- */

void dtOptTextAppend(Text *t, const char *s, size_t n) {
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

void dtOptTextAppendStr(Text *t, const char *s) {
  dtOptTextAppend(t, s, strlen(s));
}

void dtOptTextSink(MlirStringRef s, void *userData) {
  dtOptTextAppend(userData, s.data, s.length);
}

/* ---- diagnostics --------------------------------------------------------- */

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
  mlirDiagnosticPrint(d, dtOptTextSink, &message);
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

MlirLogicalResult dtOptCollectDiagnostic(MlirDiagnostic d, void *userData) {
  addDiagnostic(userData, d);
  return mlirLogicalResultSuccess();
}

void dtOptClearDiagnostics(DiagList *list) {
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

const char *dtOptSourceText(const Source *src, size_t *length) {
  if (!src->text && src->path && src->loaded && !src->loaded->data) {
    FILE *f = fopen(src->path, "rb");
    char buffer[65536];
    size_t n;
    dtOptTextAppend(src->loaded, "", 0);
    while (f && (n = fread(buffer, 1, sizeof(buffer), f)) > 0)
      dtOptTextAppend(src->loaded, buffer, n);
    if (f)
      fclose(f);
  }
  if (!src->text && src->loaded && src->loaded->data) {
    *length = src->loaded->length;
    return src->loaded->data;
  }
  *length = src->length;
  return src->text;
}

static void printSourceLine(const Source *src, unsigned line, unsigned column) {
  size_t length;
  const char *text = dtOptSourceText(src, &length);
  if (!text)
    return;
  const char *p = text, *end = text + length;
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

void dtOptPrintDiagnostics(const Source *src, const DiagList *list) {
  for (size_t i = 0; i < list->count; ++i) {
    const Diagnostic *d = &list->items[i];
    printDiagnostic(src, d->severity, d->file, d->line, d->column, d->message);
  }
}

/* ---- --verify-diagnostics ------------------------------------------------ */

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
bool dtOptParseExpectations(const Source *src, const char *text, size_t length,
                            ExpectedList *out) {
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
bool dtOptCheckExpectations(const Source *src, const DiagList *diags,
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
