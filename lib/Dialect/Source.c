/* Parsing a source buffer into a module the way mlir-opt does: a single
 * top-level builtin.module is used as is; anything else (several top-level
 * ops, or one that is not a module) is wrapped in an implicit module.
 *
 * mlirOperationCreateParse names locations after the buffer but accepts only
 * one top-level op; mlirModuleCreateParse accepts any number (with attribute
 * aliases and resources, exactly as mlir-opt) but names the buffer "-". A
 * text whose first token is `module` is parsed by the first. Any other is
 * parsed by the second, silently, and its locations are renamed; only if
 * that fails is it parsed again by the first, which reports every error at
 * its place with its notes (and, having parsed it all, then says there are
 * several top-level ops, which is swallowed). A file is first parsed by
 * mlirModuleCreateParseFromFile, which names locations after it. */
#define _GNU_SOURCE /* memmem */
#include "DialectInternal.h"

#include "mlir-c/Diagnostics.h"

#include "Support/Support.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char kManyOps[] =
    "source must contain a single top-level operation";

typedef struct Parse {
  MlirContext ctx;
  MlirStringRef sourceName;
  bool manyOps;
  bool failed;
} Parse;

/* Swallows the named parse's "several top-level ops" error. */
static MlirLogicalResult swallowManyOps(MlirDiagnostic d, void *userData) {
  Parse *parse = userData;
  char text[sizeof(kManyOps)];
  DtBuf prefix = dtBufInit(text, sizeof(text));
  mlirDiagnosticPrint(d, dtBufSink, &prefix);
  if (prefix.length < sizeof(kManyOps) - 1 ||
      memcmp(text, kManyOps, sizeof(kManyOps) - 1)) {
    if (mlirDiagnosticGetSeverity(d) == MlirDiagnosticError)
      parse->failed = true;
    return mlirLogicalResultFailure();
  }
  parse->manyOps = true;
  return mlirLogicalResultSuccess();
}

/* Swallows everything the unnamed parse says: on failure the named parse
 * runs and reports it properly. */
static MlirLogicalResult swallowAll(MlirDiagnostic d, void *userData) {
  Parse *parse = userData;
  if (mlirDiagnosticGetSeverity(d) == MlirDiagnosticError)
    parse->failed = true;
  return mlirLogicalResultSuccess();
}

/* `loc` with the file "-" or "" renamed to the source's name, or a null
 * location if it names another file (one the user wrote in a loc(...)). */
static MlirLocation renamed(const Parse *p, MlirLocation loc) {
  if (!mlirLocationIsAFileLineColRange(loc))
    return (MlirLocation){NULL};
  MlirIdentifier file = mlirLocationFileLineColRangeGetFilename(loc);
  MlirStringRef name = mlirIdentifierStr(file);
  if (name.length > 1 || (name.length == 1 && name.data[0] != '-'))
    return (MlirLocation){NULL};
  return mlirLocationFileLineColRangeGet(
      p->ctx, p->sourceName,
      (unsigned)mlirLocationFileLineColRangeGetStartLine(loc),
      (unsigned)mlirLocationFileLineColRangeGetStartColumn(loc),
      (unsigned)mlirLocationFileLineColRangeGetEndLine(loc),
      (unsigned)mlirLocationFileLineColRangeGetEndColumn(loc));
}

static MlirWalkResult renameOp(MlirOperation op, void *userData) {
  Parse *p = userData;
  MlirLocation fixed = renamed(p, mlirOperationGetLocation(op));
  if (!mlirLocationIsNull(fixed))
    mlirOperationSetLocation(op, fixed);
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r) {
    MlirRegion region = mlirOperationGetRegion(op, r);
    for (MlirBlock b = mlirRegionGetFirstBlock(region); !mlirBlockIsNull(b);
         b = mlirBlockGetNextInRegion(b))
      for (intptr_t a = 0; a < mlirBlockGetNumArguments(b); ++a) {
        MlirValue arg = mlirBlockGetArgument(b, a);
        MlirLocation argFixed = renamed(p, mlirValueGetLocation(arg));
        if (!mlirLocationIsNull(argFixed))
          mlirBlockArgumentSetLocation(arg, argFixed);
      }
  }
  return MlirWalkResultAdvance;
}

/* Whether the first token of the text (after blanks and comments) is the
 * keyword `module`. */
static bool startsWithModule(MlirStringRef source) {
  size_t i = 0, n = source.length;
  const char *t = source.data;
  for (;;) {
    while (i < n &&
           (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r'))
      ++i;
    if (i + 1 < n && t[i] == '/' && t[i + 1] == '/') {
      while (i < n && t[i] != '\n')
        ++i;
      continue;
    }
    break;
  }
  return n - i >= 6 && !memcmp(t + i, "module", 6) &&
         (n - i == 6 || !(isalnum((unsigned char)t[i + 6]) || t[i + 6] == '_' ||
                          t[i + 6] == '.' || t[i + 6] == '$'));
}

/* The parser of an IRDL dialect rejects custom syntax without a word. The
 * first `dtensor.<op>` written as a bare op name (not quoted, not in a
 * comment or string, not an attribute `#dtensor.` nor an attribute name
 * before `=`) is the likely cause. */
static void reportSilentFailure(MlirContext ctx, MlirStringRef source,
                                MlirStringRef sourceName) {
  const char *t = source.data;
  size_t n = source.length;
  unsigned line = 1, col = 1;
  bool inString = false;
  for (size_t i = 0; i < n; ++i, ++col) {
    char c = t[i];
    if (c == '\n') {
      ++line;
      col = 0;
      inString = false;
      continue;
    }
    if (inString) {
      if (c == '\\')
        ++i, ++col;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
      continue;
    }
    if (c == '/' && i + 1 < n && t[i + 1] == '/') {
      while (i + 1 < n && t[i + 1] != '\n')
        ++i;
      continue;
    }
    bool start =
        i == 0 || !(isalnum((unsigned char)t[i - 1]) || t[i - 1] == '_' ||
                    t[i - 1] == '.' || t[i - 1] == '#' || t[i - 1] == '!' ||
                    t[i - 1] == '@' || t[i - 1] == '%');
    if (!start || n - i < 9 || memcmp(t + i, "dtensor.", 8))
      continue;
    size_t e = i + 8;
    while (e < n && (isalnum((unsigned char)t[e]) || t[e] == '_'))
      ++e;
    size_t after = e;
    while (after < n && (t[after] == ' ' || t[after] == '\t'))
      ++after;
    if (after < n && t[after] == '=')
      continue; /* an attribute name: {dtensor.layout = ...} */
    char message[256];
    snprintf(message, sizeof(message),
             "'%.*s' is written in custom syntax, which the dtensor dialect "
             "(defined with IRDL) does not have; write it in the generic "
             "form \"%.*s\"(operands) {attributes} : (types) -> types",
             (int)(e - i), t + i, (int)(e - i), t + i);
    mlirEmitError(mlirLocationFileLineColGet(ctx, sourceName, line, col),
                  message);
    return;
  }
  mlirEmitError(mlirLocationFileLineColGet(ctx, sourceName, 1, 1),
                "the source does not parse (the parser gave no reason)");
}

/* MLIR 22's parser crashes (a segmentation fault, no diagnostic) on a dense
 * array of `index`, `array<index: ...>` (llvm/llvm-project#179045, fixed
 * after 22.1 by rejecting it). The text is checked before it is parsed: the
 * first such array outside comments and strings is reported at its place.
 * Returns whether the text is free of them. */
static bool noIndexArray(MlirContext ctx, const char *t, size_t n,
                         MlirStringRef sourceName) {
  for (const char *hit = t;
       (hit = memmem(hit, (size_t)(t + n - hit), "array<", 6)) != NULL;
       hit += 6) {
    const char *q = hit + 6, *end = t + n;
    while (q < end && (*q == ' ' || *q == '\t'))
      ++q;
    if (end - q < 5 || memcmp(q, "index", 5) ||
        (q + 5 < end && (isalnum((unsigned char)q[5]) || q[5] == '_')))
      continue;
    /* Inside a comment or a string? Both end at the line's end. */
    const char *line = hit;
    while (line > t && line[-1] != '\n')
      --line;
    bool inString = false, quoted = false;
    for (const char *c = line; c < hit && !quoted; ++c) {
      if (inString && *c == '\\')
        ++c;
      else if (*c == '"')
        inString = !inString;
      else if (!inString && c[0] == '/' && c + 1 < hit && c[1] == '/')
        quoted = true;
    }
    if (quoted || inString)
      continue;
    unsigned lineNo = 1;
    for (const char *c = t; c < line; ++c)
      lineNo += *c == '\n';
    mlirEmitError(
        mlirLocationFileLineColGet(ctx, sourceName, lineNo,
                                   (unsigned)(hit - line) + 1),
        "a dense array of index (array<index: ...>) is not accepted: MLIR "
        "22's parser crashes on it (llvm/llvm-project#179045); write "
        "array<i64: ...>");
    return false;
  }
  return true;
}

/* MLIR's parser recurses once per nested bracket, paren, brace or angle
 * bracket and overflows its stack (a segmentation fault) somewhere past a
 * few thousand levels. No program nests that deep: the text is checked
 * before it is parsed and the first place past the limit is reported.
 * Strings and `//` comments are skipped; `->`, `<=` and `>=` are not
 * brackets. Returns whether the nesting stays within the limit. */
/* The bytes the nesting scan looks at; every other byte is skipped by a
 * table lookup (the scan was a tenth of the parse's time on a large
 * program when it also counted lines and columns at every byte). */
enum {
  kNestOpen = 1,
  kNestClose,
  kNestAngleOpen,
  kNestAngleClose,
  kNestQuote,
  kNestSlash
};
static const unsigned char kNestClass[256] = {
    ['('] = kNestOpen,      ['['] = kNestOpen,       ['{'] = kNestOpen,
    [')'] = kNestClose,     [']'] = kNestClose,      ['}'] = kNestClose,
    ['<'] = kNestAngleOpen, ['>'] = kNestAngleClose, ['"'] = kNestQuote,
    ['/'] = kNestSlash};

static bool nestingWithinLimit(MlirContext ctx, const char *t, size_t n,
                               MlirStringRef sourceName) {
  int depth = 0;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = kNestClass[(unsigned char)t[i]];
    if (!c)
      continue;
    bool next = i + 1 < n && t[i + 1] == '=';
    if (c == kNestQuote) {
      for (++i; i < n && t[i] != '"' && t[i] != '\n'; ++i)
        if (t[i] == '\\' && i + 1 < n)
          ++i;
    } else if (c == kNestSlash) {
      if (i + 1 < n && t[i + 1] == '/') {
        const char *eol = memchr(t + i, '\n', n - i);
        i = eol ? (size_t)(eol - t) - 1 : n;
      }
    } else if (c == kNestOpen || (c == kNestAngleOpen && !next)) {
      if (++depth > DTENSOR_MAX_NESTING) {
        /* The place, counted only now. */
        unsigned line = 1;
        size_t lineStart = 0;
        for (size_t k = 0; k < i; ++k)
          if (t[k] == '\n') {
            ++line;
            lineStart = k + 1;
          }
        char message[128];
        snprintf(message, sizeof(message),
                 "nesting deeper than %d levels "
                 "here: MLIR's parser would overflow its stack",
                 DTENSOR_MAX_NESTING);
        mlirEmitError(mlirLocationFileLineColGet(ctx, sourceName, line,
                                                 (unsigned)(i - lineStart) + 1),
                      message);
        return false;
      }
    } else if ((c == kNestClose || (c == kNestAngleClose &&
                                    !(i > 0 && t[i - 1] == '-') && !next)) &&
               depth > 0) {
      --depth;
    }
  }
  return true;
}

/* An implicit module has no place in the text (line 0): its location
 * becomes unknown; an explicit one keeps its own. */
static void unplaceImplicitModule(MlirOperation module) {
  MlirLocation own = mlirOperationGetLocation(module);
  if (!mlirLocationIsAFileLineColRange(own) ||
      mlirLocationFileLineColRangeGetStartLine(own) == 0)
    mlirOperationSetLocation(
        module, mlirLocationUnknownGet(mlirOperationGetContext(module)));
}

MlirOperation dtensorSourceParse(MlirContext ctx, MlirStringRef source,
                                 MlirStringRef sourceName) {
  Parse parse = {ctx, sourceName, false, false};
  if (!noIndexArray(ctx, source.data, source.length, sourceName) ||
      !nestingWithinLimit(ctx, source.data, source.length, sourceName))
    return (MlirOperation){NULL};
  if (!startsWithModule(source)) {
    MlirDiagnosticHandlerID handler =
        mlirContextAttachDiagnosticHandler(ctx, swallowAll, &parse, NULL);
    MlirModule module = mlirModuleCreateParse(ctx, source);
    mlirContextDetachDiagnosticHandler(ctx, handler);
    if (!mlirModuleIsNull(module)) {
      MlirOperation result = mlirModuleGetOperation(module);
      mlirOperationWalk(result, renameOp, &parse, MlirWalkPreOrder);
      unplaceImplicitModule(result);
      return result;
    }
  }
  /* A text that starts with `module`, or one that failed: the named parse
   * reports every error at its place, with its notes. */
  MlirDiagnosticHandlerID handler =
      mlirContextAttachDiagnosticHandler(ctx, swallowManyOps, &parse, NULL);
  MlirOperation op = mlirOperationCreateParse(ctx, source, sourceName);
  mlirContextDetachDiagnosticHandler(ctx, handler);
  if (mlirOperationIsNull(op)) {
    if (!parse.failed && !parse.manyOps)
      reportSilentFailure(ctx, source, sourceName);
    else if (parse.manyOps)
      mlirEmitError(mlirLocationUnknownGet(ctx),
                    "the source does not parse as a module");
    return op;
  }
  if (dtIsOp(op, "builtin.module"))
    return op;
  MlirModule module = mlirModuleCreateEmpty(mlirLocationUnknownGet(ctx));
  mlirBlockAppendOwnedOperation(mlirModuleGetBody(module), op);
  return mlirModuleGetOperation(module);
}

/* ---- diagnostics as text ------------------------------------------------- */

static void appendOne(DtBuf *t, MlirDiagnostic d) {
  static const char *kNames[] = {"error", "warning", "note", "remark"};
  MlirLocation loc = mlirDiagnosticGetLocation(d);
  if (mlirLocationIsAFileLineColRange(loc)) {
    MlirStringRef file =
        mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
    char pos[64];
    dtBufAppend(t, file.data, file.length);
    int n = snprintf(pos, sizeof(pos), ":%d:%d",
                     mlirLocationFileLineColRangeGetStartLine(loc),
                     mlirLocationFileLineColRangeGetStartColumn(loc));
    dtBufAppend(t, pos, (size_t)n);
  } else {
    mlirLocationPrint(loc, dtBufSink, t);
  }
  MlirDiagnosticSeverity sev = mlirDiagnosticGetSeverity(d);
  const char *name = (unsigned)sev < 4 ? kNames[sev] : "error";
  dtBufAppend(t, ": ", 2);
  dtBufAppend(t, name, strlen(name));
  dtBufAppend(t, ": ", 2);
  mlirDiagnosticPrint(d, dtBufSink, t);
}

size_t dtensorDiagnosticFormat(MlirDiagnostic d, char *out, size_t size) {
  DtBuf t = dtBufInit(out, size);
  appendOne(&t, d);
  for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); ++i) {
    dtBufAppend(&t, "\n", 1);
    appendOne(&t, mlirDiagnosticGetNote(d, i));
  }
  return t.length;
}

/* ---- printing ------------------------------------------------------------ */

/* The printed text, held until the op verifies. */
typedef struct Held {
  char *data;
  size_t length, capacity;
  bool full; /* out of memory: the rest was dropped */
} Held;

static void hold(MlirStringRef s, void *userData) {
  Held *h = userData;
  h->full = h->full || !dtArrayAppend((void **)&h->data, &h->length,
                                      &h->capacity, 1, s.data, s.length);
}

typedef struct Verification {
  MlirOperation op;
  bool ok;
} Verification;

static void *verifyOnThread(void *userData) {
  Verification *v = userData;
  v->ok = mlirOperationVerify(v->op);
  return NULL;
}

static void print(MlirOperation op, MlirOpPrintingFlags flags, bool bytecode,
                  MlirStringCallback callback, void *userData) {
  if (bytecode)
    mlirOperationWriteBytecode(op, callback, userData);
  else
    mlirOperationPrintWithFlags(op, flags, callback, userData);
}

bool dtensorPrintVerified(MlirOperation op, MlirOpPrintingFlags flags,
                          bool bytecode, bool alongside,
                          MlirStringCallback callback, void *userData) {
  mlirOpPrintingFlagsAssumeVerified(flags);
  Verification v = {op, true};
  pthread_t verifier;
  if (!alongside || pthread_create(&verifier, NULL, verifyOnThread, &v)) {
    if (!mlirOperationVerify(op))
      return false;
    print(op, flags, bytecode, callback, userData);
    return true;
  }
  Held held = {NULL, 0, 0, false};
  print(op, flags, bytecode, hold, &held);
  pthread_join(verifier, NULL);
  if (v.ok && held.full)
    mlirEmitError(mlirOperationGetLocation(op),
                  "out of memory holding the printed result");
  bool ok = v.ok && !held.full;
  if (ok)
    callback((MlirStringRef){held.data ? held.data : "", held.length},
             userData);
  free(held.data);
  return ok;
}

MlirOperation dtensorSourceParseFile(MlirContext ctx, const char *path,
                                     DtensorDiag *outDiag) {
  outDiag->column = -1;
  outDiag->message[0] = 0;
  /* The parser reading the file itself names locations after it, which
   * saves renaming every one (a tenth of a large parse). Only if that
   * fails is the text parsed as above, to report why. */
  Parse parse = {ctx, mlirStringRefCreateFromCString(path), false, false};
  /* The text is checked first (noIndexArray, nestingWithinLimit) through a
   * mapping of the file; a file that cannot be mapped (a pipe, say) is
   * read and parsed as text below, which checks it too. */
  int fd = open(path, O_RDONLY);
  struct stat st;
  bool mapped = false;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void *text = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (text != MAP_FAILED) {
      mapped = true;
      bool clean =
          noIndexArray(ctx, text, (size_t)st.st_size, parse.sourceName) &&
          nestingWithinLimit(ctx, text, (size_t)st.st_size, parse.sourceName);
      munmap(text, (size_t)st.st_size);
      if (!clean) {
        close(fd);
        return (MlirOperation){NULL};
      }
    }
  }
  if (fd >= 0)
    close(fd);
  if (mapped) {
    MlirDiagnosticHandlerID handler =
        mlirContextAttachDiagnosticHandler(ctx, swallowAll, &parse, NULL);
    MlirModule parsed = mlirModuleCreateParseFromFile(
        ctx, mlirStringRefCreateFromCString(path));
    mlirContextDetachDiagnosticHandler(ctx, handler);
    if (!mlirModuleIsNull(parsed)) {
      MlirOperation result = mlirModuleGetOperation(parsed);
      unplaceImplicitModule(result);
      return result;
    }
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(outDiag->message, sizeof(outDiag->message), "cannot read '%s': %s",
             path, strerror(errno));
    return (MlirOperation){NULL};
  }
  size_t cap = 1 << 16, n = 0;
  char *text = malloc(cap);
  for (size_t got; text && (got = fread(text + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      char *grown = realloc(text, cap *= 2);
      if (!grown)
        free(text);
      text = grown;
    }
  }
  bool bad = ferror(f) || !text;
  fclose(f);
  if (bad) {
    free(text);
    snprintf(outDiag->message, sizeof(outDiag->message), "cannot read '%s': %s",
             path, text ? "read error" : "out of memory");
    return (MlirOperation){NULL};
  }
  MlirOperation module = dtensorSourceParse(
      ctx, (MlirStringRef){text, n}, mlirStringRefCreateFromCString(path));
  free(text);
  return module;
}
