/* dtensor-opt's parts: the driver (dtensor-opt.c) and the diagnostics it
 * collects, prints and checks against expected-* comments
 * (Diagnostics.c). */
#ifndef DTENSOR_TOOLS_DTENSOR_OPT_OPT_H
#define DTENSOR_TOOLS_DTENSOR_OPT_OPT_H

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"

#include <stdbool.h>
#include <stddef.h>

enum { EXIT_OK = 0, EXIT_ERROR = 1, EXIT_USAGE = 2 };

/// A growable NUL-terminated buffer (exits on out of memory).
typedef struct Text {
  char *data;
  size_t length, capacity;
} Text;

void dtOptTextAppend(Text *t, const char *s, size_t n);
void dtOptTextAppendStr(Text *t, const char *s);
/// An MlirStringCallback appending to the Text `userData`.
void dtOptTextSink(MlirStringRef s, void *userData);

/// A diagnostic as collected (its text and location copied).
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

/// The input: its name in messages and its text.
typedef struct Source {
  const char *name;
  const char *text;
  size_t length;
  /// A regular file's text is read only when a diagnostic quotes it
  /// (dtOptSourceText): parsing reads the file by its path. NULL when
  /// `text` is the whole input already.
  const char *path;
  Text *loaded;
} Source;

/// The source's text, read now from `path` if it was not read yet (a
/// file that cannot be read then has no text: diagnostics go without
/// their source line).
const char *dtOptSourceText(const Source *src, size_t *length);

/// An expected-* comment of --verify-diagnostics.
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

/// The context's diagnostic handler: appends to the DiagList `userData`.
MlirLogicalResult dtOptCollectDiagnostic(MlirDiagnostic d, void *userData);

/// Frees the collected diagnostics; the list is empty again.
void dtOptClearDiagnostics(DiagList *list);

/// Prints the diagnostics as file:line:col: severity: message, with the
/// source line and a caret.
void dtOptPrintDiagnostics(const Source *src, const DiagList *list);

/// Reads the expected-* comments of one chunk (lines are absolute); a
/// malformed comment is reported and makes it return false.
bool dtOptParseExpectations(const Source *src, const char *text, size_t length,
                            ExpectedList *out);

/// Matches each diagnostic with one expectation; reports the unexpected
/// and the missing; frees the expectations.
bool dtOptCheckExpectations(const Source *src, const DiagList *diags,
                            ExpectedList *expected);

/* ---- pipeline text (PipelineText.c) ------------------------------------- */

/// One top-level element of a pipeline: its text and the length of its
/// pass name.
typedef struct Element {
  const char *text;
  size_t length, nameLength;
} Element;

/// The closest registered pass name to want[0..n) (dtensor passes and the
/// upstream ones of mlir-opt's help) into `out`, if one is close enough.
bool dtOptSuggestPass(const char *want, size_t n, const char *upstreamHelp,
                      char *out, size_t size);

/// The top-level elements of `text` (a list, or builtin.module(...)) into
/// `out`; their count, or -1 when there are more than `capacity`.
int dtOptSplitPipeline(const char *text, Element *out, int capacity);

/// Whether element `e` is pass `name`, or holds it nested.
bool dtOptElementNames(const Element *e, const char *name);

#endif
