/* dtDiag, the string builder and the number readers of Support.h. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "Support.h"

bool dtDiag(DtensorDiag *diag, int column, const char *format, ...) {
  if (!diag)
    return false;
  va_list args;
  va_start(args, format);
  vsnprintf(diag->message, sizeof(diag->message), format, args);
  va_end(args);
  diag->column = column;
  return false;
}

DtBuf dtBufInit(char *data, size_t capacity) {
  DtBuf buf = {data, capacity, 0};
  if (data && capacity)
    data[0] = '\0';
  return buf;
}

void dtBufPrintf(DtBuf *buf, const char *format, ...) {
  va_list args;
  va_start(args, format);
  size_t room = buf->length < buf->capacity ? buf->capacity - buf->length : 0;
  char *at = room ? buf->data + buf->length : NULL;
  int n = vsnprintf(at, room, format, args);
  va_end(args);
  if (n > 0)
    buf->length += (size_t)n;
}

void dtBufAppend(DtBuf *buf, const char *data, size_t n) {
  if (buf->length + 1 < buf->capacity) {
    size_t room = buf->capacity - 1 - buf->length;
    size_t k = n < room ? n : room;
    if (k)
      memcpy(buf->data + buf->length, data, k);
    buf->data[buf->length + k] = '\0';
  }
  buf->length += n;
}

void dtBufPrintList(DtBuf *buf, const int64_t *v, intptr_t n) {
  dtBufPrintf(buf, "[");
  for (intptr_t i = 0; i < n; ++i)
    dtBufPrintf(buf, "%s%lld", i ? ", " : "", (long long)v[i]);
  dtBufPrintf(buf, "]");
}

long dtWholeNumber(const char *text, long lo, long hi) {
  char *end;
  long v = strtol(text, &end, 10);
  return *text && !*end && v >= lo && v <= hi ? v : -1;
}

double dtRealNumber(const char *text, double lo, double hi) {
  char *end;
  double v = strtod(text, &end);
  return *text && !*end && isfinite(v) && v >= lo && v <= hi ? v : NAN;
}

int64_t dtByteCount(const char *text) {
  static const struct {
    const char *unit;
    double scale;
  } kUnits[] = {{"", 1},         {"B", 1},        {"KiB", 0x1p10},
                {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40},
                {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},
                {"TB", 1e12}};
  char *end;
  double v = strtod(text, &end);
  if (end == text || !isfinite(v) || v < 0)
    return -1;
  while (*end == ' ')
    ++end;
  for (size_t i = 0; i < sizeof(kUnits) / sizeof(kUnits[0]); ++i)
    if (!strcmp(end, kUnits[i].unit)) {
      double bytes = v * kUnits[i].scale;
      /* A fraction only with a unit: "1.5" bytes is no count. */
      if (bytes >= 0x1p63 || (!*end && bytes != (double)(int64_t)bytes))
        return -1;
      return (int64_t)bytes;
    }
  return -1;
}
