/* Private helpers of the layout algebra. */
#ifndef DTENSOR_LIB_LAYOUT_DIAG_H
#define DTENSOR_LIB_LAYOUT_DIAG_H

#include "dtensor-c/Support.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// Fills `diag` (if not NULL) with a printf-formatted message and a column;
/// always returns false so callers can `return dtDiag(...)`.
bool dtDiag(DtensorDiag *diag, int column, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b
/// near INT64_MAX (one home for the layout algebra and the planner).
static inline int64_t dtCeilDiv(int64_t a, int64_t b) {
  return a / b + (a % b != 0);
}

/// A bounded string builder with snprintf semantics: `length` counts every
/// byte asked for, even past `capacity`.
typedef struct DtBuf {
  char *data;
  size_t capacity;
  size_t length;
} DtBuf;

/// Starts a builder on `data` (may be NULL when `capacity` is 0).
DtBuf dtBufInit(char *data, size_t capacity);

/// Appends printf-formatted text.
void dtBufPrintf(DtBuf *buf, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

#endif
