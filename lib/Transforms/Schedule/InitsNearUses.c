/* dtensor-inits-near-uses: on the per-device program after cse, each op of
 * a block that uses a fill (or another value that only initializes and
 * holds a buffer) gets its own, right before it, in the functions under a
 * memory budget (memory=, or the dtensor.memory dtensor-auto-shard leaves).
 * cse merges the fills of every layer into one, which bufferization keeps
 * from its first user to its last; the work is in dtInitsNearUses
 * (Propagate/PropagateInits.c, the home of values that only initialize). */
#include "PassDef.h"
#include "Propagate/Propagate.h"

static bool runInitsNearUses(MlirOperation root, const DtPassOptions *options) {
  int64_t budget;
  if (!dtPassReadBudget(root, "dtensor-inits-near-uses", options, &budget))
    return false;
  if (dtInitsNearUses(root, budget > 0))
    return true;
  dtOpError(root, "dtensor-inits-near-uses: out of memory");
  return false;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"memory", DTENSOR_OPTION_STRING, "", NULL,
     "a budget (512MB, 16GiB, 1048576): every function gets its users their "
     "own fills; default: those with a dtensor.memory budget"},
};

const DtPassDef dtInitsNearUsesPass = {
    .info = {"dtensor-inits-near-uses",
             "Give each op that uses a fill (a value that only initializes "
             "and holds a buffer) its own, right before it, so that none "
             "lives from its first user to its last (functions under a "
             "memory budget)",
             (int)(sizeof(kOptions) / sizeof(kOptions[0])), kOptions},
    .verifyFirst = true,
    .run = runInitsNearUses,
};
