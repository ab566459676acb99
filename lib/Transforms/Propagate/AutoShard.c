/* dtensor-auto-shard: what dtensor-spmd does before propagation, then
 * dtensor-propagate with auto=true (PropagateAuto.c chooses;
 * docs/autoshard.md). Its output is the program
 * with a layout on every argument, result and value, ready for
 * dtensor-spmd, to be read, kept and edited. */
#include "PassDef.h"

#include "mlir-c/Diagnostics.h"

#include <stdio.h>

static bool runAutoShard(MlirOperation root, const DtPassOptions *options) {
  char text[6 * DT_MAX_OPTION_VALUE + 128];
  snprintf(text, sizeof(text),
           "auto=true memory='%s' why=%s solver=%s time-limit='%s' "
           "calibration='%s' cost=%s",
           dtPassOptionsGet(options, "memory"),
           dtPassOptionsGet(options, "why"),
           dtPassOptionsGet(options, "solver"),
           dtPassOptionsGet(options, "time-limit"),
           dtPassOptionsGet(options, "calibration"),
           dtPassOptionsGet(options, "cost"));
  DtPassOptions propagate;
  DtensorDiag diag;
  if (!dtPassOptionsParse(&dtPropagatePass.info,
                          mlirStringRefCreateFromCString(text), &propagate,
                          &diag)) {
    mlirEmitError(mlirOperationGetLocation(root), diag.message);
    return false;
  }
  propagate.context = options->context;
  propagate.decisions = options->decisions;
  return dtSpmdPrepare(root, &propagate) &&
         dtPropagatePass.run(root, &propagate);
}

static const DtensorPassOptionInfo kOptions[] = {
    {"memory", DTENSOR_OPTION_STRING, "", NULL,
     "the bytes each device may hold (512MB, 16GiB, 1048576); default "
     "unbounded"},
    {"why", DTENSOR_OPTION_BOOL, "false", NULL,
     "print per argument chosen its layout, bytes, conversions and the best "
     "plan with another layout; the step's modelled time and peak"},
    {"solver", DTENSOR_OPTION_ENUM, "default", "default|cbc|glpk",
     "the integer program solver (default: CBC when built, else GLPK)"},
    {"time-limit", DTENSOR_OPTION_STRING, "60", NULL,
     "the solver's seconds per function; then the best plan found and its "
     "gap"},
    {"calibration", DTENSOR_OPTION_STRING, "", NULL,
     "price collectives with this measured cost file (dtensor-run "
     "--calibrate)"},
    {"cost", DTENSOR_OPTION_BOOL, "false", NULL,
     "print each function's modelled cost and how it was chosen"},
};

const DtPassDef dtAutoShardPass = {
    .info = {"dtensor-auto-shard",
             "Choose the layout of every argument, result and value without "
             "one on the function's mesh, minimizing the modelled step time "
             "within a memory budget (an integer program)",
             (int)(sizeof(kOptions) / sizeof(kOptions[0])), kOptions},
    .verifyFirst = true,
    .run = runAutoShard,
};
