/* dtensor-opt's pipeline text: "did you mean" for a pass name that is not
 * registered, the top-level elements of a pipeline (for
 * --mlir-print-ir-after=PASS, which the C API cannot filter: the driver
 * runs the elements one by one and prints where asked), and dtensor-spmd
 * spelled out as its stages (so that IR printing shows each stage). */
#include "Opt.h"

#include "dtensor-c/Passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The edit distance of a[0..n) and b[0..m) (both under 128 characters). */
static size_t distance(const char *a, size_t n, const char *b, size_t m) {
  size_t row[128];
  if (n >= 128 || m >= 128)
    return (size_t)-1;
  for (size_t j = 0; j <= m; ++j)
    row[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      size_t up = row[j];
      size_t best = diagonal + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      diagonal = up;
    }
  }
  return row[m];
}

typedef struct Suggestion {
  const char *name;
  size_t length, cost;
} Suggestion;

static void consider(Suggestion *s, const char *want, size_t n,
                     const char *name, size_t length) {
  size_t d = distance(want, n, name, length);
  if (d < s->cost) {
    s->name = name;
    s->length = length;
    s->cost = d;
  }
}

bool dtOptSuggestPass(const char *want, size_t n, const char *upstreamHelp,
                      char *out, size_t size) {
  Suggestion s = {NULL, 0, (size_t)-1};
  for (int i = 0; i < dtensorPassGetNumRegistered(); ++i) {
    const char *name = dtensorPassGetRegistered(i)->argument;
    consider(&s, want, n, name, strlen(name));
  }
  for (int i = 0; dtensorPipelineGetRegistered(i); ++i) {
    const char *name = dtensorPipelineGetRegistered(i);
    consider(&s, want, n, name, strlen(name));
  }
  /* The upstream passes as mlir-opt --help lists them ("      --name"). */
  for (const char *p = strstr(upstreamHelp, "\n      --"); p;
       p = strstr(p + 1, "\n      --")) {
    const char *name = p + 9;
    size_t length = strcspn(name, " =\n");
    if (strncmp(name, "test-", 5) && strncmp(name, "mlir-", 5))
      consider(&s, want, n, name, length);
  }
  size_t limit = n / 3 > 2 ? n / 3 : 2;
  if (!s.name || s.cost == 0 || s.cost > limit)
    return false;
  snprintf(out, size, "%.*s", (int)s.length, s.name);
  return true;
}

int dtOptSplitPipeline(const char *text, Element *out, int capacity) {
  /* An anchored pipeline, builtin.module(...): its contents. */
  const char *begin = text, *end = text + strlen(text);
  while (begin < end && (*begin == ' ' || *begin == '\t'))
    ++begin;
  if (!strncmp(begin, "builtin.module(", 15)) {
    begin += 15;
    while (end > begin && end[-1] != ')')
      --end;
    if (end > begin)
      --end;
  }
  int count = 0, depth = 0;
  const char *start = begin;
  for (const char *p = begin; p <= end; ++p) {
    char c = p < end ? *p : ',';
    if (c == '(' || c == '{')
      ++depth;
    else if (c == ')' || c == '}')
      --depth;
    else if (c == '\'' || c == '"') {
      const char *close = strchr(p + 1, c);
      p = close && close < end ? close : end - 1;
      continue;
    }
    if (c != ',' || depth > 0)
      continue;
    while (start < p && (*start == ' ' || *start == '\t' || *start == '\n'))
      ++start;
    const char *stop = p;
    while (stop > start &&
           (stop[-1] == ' ' || stop[-1] == '\t' || stop[-1] == '\n'))
      --stop;
    if (stop > start) {
      if (count == capacity)
        return -1;
      out[count].text = start;
      out[count].length = (size_t)(stop - start);
      out[count].nameLength = strcspn(start, "{( \t");
      if (out[count].nameLength > out[count].length)
        out[count].nameLength = out[count].length;
      ++count;
    }
    start = p + 1;
  }
  return count;
}

bool dtOptElementNames(const Element *e, const char *name) {
  size_t n = strlen(name);
  /* The element itself, or a pass nested in it (func.func(cse)). */
  for (const char *p = e->text; p + n <= e->text + e->length; ++p)
    if (!strncmp(p, name, n) &&
        (p == e->text || strchr("(, {", p[-1]) != NULL) &&
        (p + n == e->text + e->length || strchr("{(), ", p[n]) != NULL))
      return true;
  return false;
}
