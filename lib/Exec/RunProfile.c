/* dtensorRunnerProfileReport: the ranks' profile events (lib/Runtime/
 * Profile.c writes "<path>.rank<N>") named after dtensor-profile's op list,
 * merged into one Chrome trace (a track per rank) and summed into a table
 * by op, the largest total first. */
#include "RunnerInternal.h"

#include "Support/Support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct Total {
  int64_t id;
  int64_t calls;
  double seconds;
} Total;

static int byTime(const void *a, const void *b) {
  double x = ((const Total *)a)->seconds, y = ((const Total *)b)->seconds;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The kind of profiled op `name` ("linalg.generic ... at f.mlir:3:1" ->
 * "linalg.generic"; "call dtrt_mlir_wait_f32 ..." -> "dtrt_mlir_wait_f32"):
 * its length from `*start`. */
static size_t kindOf(const char *name, const char **start) {
  if (!strncmp(name, "call ", 5))
    name += 5;
  *start = name;
  return strcspn(name, " ");
}

/* `s` as the body of a JSON string. */
static void jsonText(FILE *f, const char *s) {
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\')
      fputc('\\', f);
    if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", (unsigned char)*s);
    else
      fputc(*s, f);
  }
}

bool dtensorRunnerProfileReport(const DtensorRunner *r, const char *path,
                                int numRanks, FILE *table,
                                DtensorDiag *outDiag) {
  if (r->numProfileOps == 0)
    return dtDiag(outDiag, -1,
                  "the program was not compiled for a profile "
                  "(dtensor-to-llvm{profile=true})");
  Total *totals = calloc((size_t)r->numProfileOps, sizeof(Total));
  DtOutput out;
  if (!totals)
    return dtDiag(outDiag, -1, "out of memory");
  if (!dtOutputOpen(&out, path, outDiag)) {
    free(totals);
    return false;
  }
  FILE *f = out.file;
  fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  bool first = true, ok = true;
  double origin = -1;
  for (int k = 0; k < numRanks && ok; ++k) {
    char rankPath[4096];
    snprintf(rankPath, sizeof(rankPath), "%s.rank%d", path, k);
    FILE *in = fopen(rankPath, "r");
    if (!in) {
      ok = dtDiag(outDiag, -1, "rank %d wrote no profile ('%s')", k, rankPath);
      break;
    }
    fprintf(f,
            "%s{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
            "\"args\": {\"name\": \"rank %d\"}}",
            first ? "" : ",\n", k, k);
    first = false;
    long long id;
    double start, seconds;
    while (fscanf(in, "%lld %lf %lf", &id, &start, &seconds) == 3) {
      if (id < 0 || id >= r->numProfileOps)
        continue;
      if (origin < 0)
        origin = start; /* the ranks share the monotonic clock */
      totals[id].id = id;
      totals[id].calls += 1;
      totals[id].seconds += seconds;
      /* The event's name: the op's kind (a call: the callee). */
      const char *name;
      size_t kind = kindOf(r->profileOps[id], &name);
      fprintf(f,
              ",\n{\"name\": \"%.*s\", \"ph\": \"X\", \"pid\": %d, "
              "\"tid\": 0, \"ts\": %.3f, \"dur\": %.3f, "
              "\"args\": {\"op\": \"",
              (int)kind, name, k, 1e6 * (start - origin), 1e6 * seconds);
      jsonText(f, r->profileOps[id]);
      fprintf(f, "\"}}");
    }
    fclose(in);
    unlink(rankPath);
  }
  fprintf(f, "\n]}\n");
  ok = dtOutputClose(&out, ok, outDiag) && ok;
  if (ok && table) {
    double all = 0;
    for (int i = 0; i < r->numProfileOps; ++i) {
      totals[i].id = i;
      all += totals[i].seconds;
    }
    qsort(totals, (size_t)r->numProfileOps, sizeof(Total), byTime);
    fprintf(table,
            "profile: %d ranks, summed over them (trace: %s)\n"
            "%10s %7s %10s %6s  op\n",
            numRanks, path, "total ms", "calls", "mean us", "share");
    for (int i = 0; i < r->numProfileOps; ++i) {
      if (!totals[i].calls)
        continue;
      fprintf(table, "%10.3f %7lld %10.1f %5.1f%%  %s\n",
              1e3 * totals[i].seconds, (long long)totals[i].calls,
              1e6 * totals[i].seconds / (double)totals[i].calls,
              all > 0 ? 100 * totals[i].seconds / all : 0,
              r->profileOps[totals[i].id]);
    }
    /* By kind: every op of a kind together (torch.profiler's
     * key_averages), in the order of their first, largest op. */
    fprintf(table, "by kind:\n");
    for (int i = 0; i < r->numProfileOps; ++i) {
      const char *name, *other;
      size_t n = kindOf(r->profileOps[totals[i].id], &name);
      bool seen = !totals[i].calls;
      for (int j = 0; j < i && !seen; ++j)
        seen = totals[j].calls &&
               kindOf(r->profileOps[totals[j].id], &other) == n &&
               !strncmp(other, name, n);
      if (seen)
        continue;
      double seconds = 0;
      long long calls = 0;
      for (int j = i; j < r->numProfileOps; ++j)
        if (totals[j].calls &&
            kindOf(r->profileOps[totals[j].id], &other) == n &&
            !strncmp(other, name, n)) {
          seconds += totals[j].seconds;
          calls += totals[j].calls;
        }
      fprintf(table, "%10.3f %7lld %10.1f %5.1f%%  %.*s\n", 1e3 * seconds,
              calls, 1e6 * seconds / (double)calls,
              all > 0 ? 100 * seconds / all : 0, (int)n, name);
    }
  }
  free(totals);
  return ok;
}
