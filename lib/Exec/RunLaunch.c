/* dtensorRunnerLaunch: every rank of a differential run in its own process
 * (dtrtLaunch), each rank's report handed back through one shared mapping
 * made before the fork. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "RunnerInternal.h"

#include "Support/Support.h"

#include <string.h>
#include <sys/mman.h>

/* What one rank hands back. */
typedef struct RankSlot {
  int ran; /* 1 when dtensorRunnerRunRank returned true */
  DtensorRankReport report;
  DtensorDiag diag;
} RankSlot;

typedef struct Launch {
  DtensorRunner *runner;
  const DtensorRankOptions *options;
  RankSlot *slots;
} Launch;

/* In a rank's process: a difference is a result, not a failure, so only a
 * rank that could not run stops the others. */
static int runOneRank(int rank, void *arg) {
  Launch *l = arg;
  RankSlot *s = &l->slots[rank];
  s->diag.message[0] = '\0';
  s->ran =
      dtensorRunnerRunRank(l->runner, rank, l->options, &s->report, &s->diag);
  return s->ran ? 0 : 1;
}

bool dtensorRunnerLaunch(DtensorRunner *r, const DtrtLaunchOptions *launch,
                         const DtensorRankOptions *options,
                         DtensorRankReport *outReports, int *outExitCode,
                         DtensorDiag *outDiag) {
  if (outExitCode)
    *outExitCode = 1;
  int64_t devices = dtensorMeshGetNumDevices(dtensorRunnerGetMesh(r));
  if (launch->numRanks != devices)
    return dtDiag(outDiag, -1,
                  "the program's mesh has %lld devices, not %d ranks",
                  (long long)devices, launch->numRanks);
  if (!options->unchecked && !dtensorRunnerGetReference(r, 0))
    return dtDiag(outDiag, -1,
                  "the reference is not computed "
                  "(dtensorRunnerComputeReference first)");
  size_t bytes = (size_t)launch->numRanks * sizeof(RankSlot);
  RankSlot *slots = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (slots == MAP_FAILED)
    return dtDiag(outDiag, -1, "no memory for the ranks' reports");
  memset(slots, 0, bytes);
  Launch l = {r, options, slots};
  DtrtLaunchResult result;
  DtrtStatus s = dtrtLaunch(launch, runOneRank, &l, &result);
  for (int k = 0; k < launch->numRanks; ++k)
    outReports[k] = slots[k].report;
  if (outExitCode)
    *outExitCode = result.exitCode;
  bool ok = s == DTRT_OK;
  int bad = result.failedRank;
  if (!ok && bad >= 0 && slots[bad].diag.message[0])
    dtDiag(outDiag, -1, "rank %d: %s (%s)", bad, slots[bad].diag.message,
           result.message);
  else if (!ok)
    dtDiag(outDiag, -1, "%s", result.message);
  munmap(slots, bytes);
  return ok;
}
