/* dtensor-inits-near-uses: on the per-device program after cse, each op of
 * a block that uses a fill (or another value that only initializes and
 * holds a buffer) gets its own, right before it. cse merges the fills of
 * every layer into one, which bufferization keeps from its first user to
 * its last; the work is in dtInitsNearUses (Propagate/PropagateInits.c,
 * the home of values that only initialize). */
#include "PassDef.h"
#include "Propagate/Propagate.h"

static bool runInitsNearUses(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  if (dtInitsNearUses(root))
    return true;
  dtOpError(root, "dtensor-inits-near-uses: out of memory");
  return false;
}

const DtPassDef dtInitsNearUsesPass = {
    .info = {"dtensor-inits-near-uses",
             "Give each op that uses a fill (a value that only initializes "
             "and holds a buffer) its own, right before it, so that none "
             "lives from its first user to its last",
             0, NULL},
    .verifyFirst = true,
    .run = runInitsNearUses,
};
