/* The dtensor-spmd pipeline as one pass: decompose-softmax, propagate,
 * partition,
 * lower-redistribute, canonicalize and cse in a row, so that the input is
 * verified once and MLIR verifies the result once, instead of after every
 * step (on large programs the verifier costs as much as a step), and
 * propagation's decisions reach partition in a table instead of as
 * attributes. Its options go to the steps that take them. */
#include "Decisions.h"
#include "Inspect/Memory.h"
#include "PassDef.h"
#include "Prepare/Gathers.h"
#include "Support/Support.h"

#include "mlir-c/Pass.h"

#include <stdio.h>
#include <time.h>

/* cse and canonicalize, as cleanUp runs them. cse goes first: programs
 * repeat their inits (a tensor.empty and a linalg.fill per layer), which
 * cse merges in one hashing walk, so canonicalize visits a third of the ops
 * (a 10,000-block Megatron chain: 40,000 tensor.empty and 20,000 fills ->
 * 2 and 1; the step 0.20 -> 0.15 s); the result was the same on every
 * program of test/, examples/ and bench/. */
#define DT_SPMD_CLEANUP "cse, canonicalize{region-simplify=disabled}"

/* cse and canonicalize on the result, by a pass manager of their own that
 * does not verify in between (the outer one verifies this pass's result).
 * canonicalize leaves regions' blocks alone: the steps before make no
 * blocks, and simplifying them took a third of canonicalize's time on a
 * 1,000-block Megatron chain (callgrind). */
static bool cleanUp(MlirOperation root) {
  return dtRunUpstream(root, DT_SPMD_CLEANUP);
}

/* Which of dtSpmdPrepare's steps have work in a program: found in one
 * walk, so that the others do not walk it (on a 10^4-block program the
 * four walks took 40 ms). No step makes ops a later one looks for. */
typedef struct Census {
  bool gathers, tosaControl, softmax, packs;
} Census;

static MlirWalkResult takeCensus(MlirOperation op, void *userData) {
  Census *c = userData;
  c->gathers |= dtGathersFinds(op, true);
  c->tosaControl |= dtIsOp(op, "tosa.cond_if") || dtIsOp(op, "tosa.while_loop");
  c->softmax |= dtDecomposeSoftmaxFinds(op);
  c->packs |= dtDecomposePacksFinds(op);
  return MlirWalkResultAdvance;
}

/* With the timing option: the time since `*last`, printed for `step`
 * (--mlir-timing sees one pass). */
static void stepDone(bool timing, const char *step, struct timespec *last) {
  if (!timing)
    return;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  fprintf(stderr, "dtensor-spmd: %s %.3f s\n", step,
          (double)(now.tv_sec - last->tv_sec) +
              1e-9 * (double)(now.tv_nsec - last->tv_nsec));
  *last = now;
}

/* The options of dtensor-spmd that go to dtensor-propagate, and to
 * dtensor-lower-redistribute, as option text (with auto=true propagation
 * follows what dtensor-auto-shard chose: its own auto is off, and so its
 * memory budget). */
static void propagateOptions(const DtPassOptions *options, char *text,
                             size_t size) {
  snprintf(
      text, size,
      "strict=%s why=%s calibration='%s' choice=%s cost=%s auto=false "
      "solver=%s time-limit='%s' layers=%s",
      dtPassOptionsGet(options, "strict"), dtPassOptionsGet(options, "why"),
      dtPassOptionsGet(options, "calibration"),
      dtPassOptionsGet(options, "choice"), dtPassOptionsGet(options, "cost"),
      dtPassOptionsGet(options, "solver"),
      dtPassOptionsGet(options, "time-limit"),
      dtPassOptionsGet(options, "layers"));
}

/* With auto=true, the options of dtensor-spmd that go to
 * dtensor-auto-shard. */
static void autoShardOptions(const DtPassOptions *options, char *text,
                             size_t size) {
  snprintf(
      text, size,
      "memory='%s' why=%s solver=%s time-limit='%s' calibration='%s' "
      "cost=%s layers=%s",
      dtPassOptionsGet(options, "memory"), dtPassOptionsGet(options, "why"),
      dtPassOptionsGet(options, "solver"),
      dtPassOptionsGet(options, "time-limit"),
      dtPassOptionsGet(options, "calibration"),
      dtPassOptionsGet(options, "cost"), dtPassOptionsGet(options, "layers"));
}

static void lowerOptions(const DtPassOptions *options, char *text,
                         size_t size) {
  snprintf(text, size, "strategy=%s objective=%s report=%s calibration='%s'",
           dtPassOptionsGet(options, "strategy"),
           dtPassOptionsGet(options, "objective"),
           dtPassOptionsGet(options, "report"),
           dtPassOptionsGet(options, "calibration"));
}

/* auto=true with memory=: the compiled program's peak (dtensor-report's
 * count, collectives' results included) is checked against the budget,
 * which the plan's own model estimates: never a plan over it in silence.
 * (Without auto=true the budget bounds the schedule of collectives only;
 * dtensor-report{memory=...} checks a program.) */
static bool withinBudget(MlirOperation root, const DtPassOptions *options) {
  const char *memory = dtPassOptionsGet(options, "memory");
  if (!dtPassOptionsGetBool(options, "auto") || !memory[0])
    return true;
  int64_t budget = dtByteCount(memory);
  DtMemoryPeak peak;
  MlirOperation f;
  if (!dtMemoryLargestPeak(root, &peak, &f) || peak.peakBytes <= budget)
    return true;
  char msg[256];
  snprintf(msg, sizeof(msg),
           "dtensor-spmd: the compiled program needs %lld bytes per device "
           "at its peak, over memory=%s (%lld bytes) that automatic "
           "sharding planned for; dtensor-report{memory=%s} names the "
           "largest values",
           (long long)peak.peakBytes, memory, (long long)budget, memory);
  mlirEmitError(
      mlirOperationGetLocation(mlirOperationIsNull(peak.at) ? f : peak.at),
      msg);
  return false;
}

bool dtSpmdPrepare(MlirOperation root, const DtPassOptions *propagate) {
  Census c = {false, false, false, false};
  mlirOperationWalk(root, takeCensus, &c, MlirWalkPreOrder);
  /* Lookups by computed index get their table as an operand, and
   * scatters become scatter_adds (before tosa-to-scf, which would make
   * tosa.scatter a loop). */
  bool ok = !c.gathers || dtGathersPass.run(root, propagate);
  /* tosa.cond_if and tosa.while_loop become scf.if and scf.while
   * (upstream's tosa-to-scf), whose regions propagation enters. */
  ok = ok && (!c.tosaControl || dtRunUpstream(root, "func.func(tosa-to-scf)"));
  /* linalg.softmax has no sharding rule of its own: its generics do (rows
   * stay sharded unless the softmax dim is). */
  ok = ok && (!c.softmax || dtDecomposeSoftmaxPass.run(root, propagate));
  /* Packs as the pad, reshape and transpose they are, which have rules. */
  return ok && (!c.packs || dtDecomposePacksPass.run(root, propagate));
}

static bool runSpmd(MlirOperation root, const DtPassOptions *options) {
  char text[7 * DT_MAX_OPTION_VALUE + 160];
  DtPassOptions propagate, partition, lower, bucket, schedule, near;
  propagateOptions(options, text, sizeof(text));
  bool ok = dtPassOptionsParse(&dtPropagatePass.info,
                               mlirStringRefCreateFromCString(text), &propagate,
                               NULL);
  propagate.context = options->context;
  ok = ok &&
       dtPassOptionsParse(&dtPartitionPass.info,
                          mlirStringRefCreateFromCString(""), &partition, NULL);
  lowerOptions(options, text, sizeof(text));
  ok = ok &&
       dtPassOptionsParse(&dtLowerRedistributePass.info,
                          mlirStringRefCreateFromCString(text), &lower, NULL);
  snprintf(text, sizeof(text), "bucket-bytes=%s",
           dtPassOptionsGet(options, "bucket-bytes"));
  ok = ok &&
       dtPassOptionsParse(&dtBucketCollectivesPass.info,
                          mlirStringRefCreateFromCString(text), &bucket, NULL);
  /* Under a budget every user gets its own fill, and the schedule stays
   * within it (or program order's peak); a budget that is not a byte
   * count is an error before any step. */
  int64_t budget;
  ok = ok && dtPassReadBudget(root, "dtensor-spmd", options, &budget);
  snprintf(text, sizeof(text), "memory='%s'",
           dtPassOptionsGet(options, "memory"));
  ok = ok &&
       dtPassOptionsParse(&dtInitsNearUsesPass.info,
                          mlirStringRefCreateFromCString(text), &near, NULL);
  ok = ok && dtPassOptionsParse(&dtScheduleCollectivesPass.info,
                                mlirStringRefCreateFromCString(text), &schedule,
                                NULL);
  bool timing = dtPassOptionsGetBool(options, "timing");
  struct timespec last;
  clock_gettime(CLOCK_MONOTONIC, &last);
  /* Propagation's decisions go to partition in memory. */
  DtDecisions decisions = dtDecisionsInit();
  propagate.decisions = partition.decisions = &decisions;
  /* auto=true: dtensor-auto-shard chooses first (its plan compiled and
   * checked against the budget), then propagation follows its
   * annotations. */
  if (ok && dtPassOptionsGetBool(options, "auto")) {
    DtPassOptions autoShard;
    autoShardOptions(options, text, sizeof(text));
    ok = dtPassOptionsParse(&dtAutoShardPass.info,
                            mlirStringRefCreateFromCString(text), &autoShard,
                            NULL);
    autoShard.context = options->context;
    ok = ok && dtAutoShardPass.run(root, &autoShard);
    stepDone(ok && timing, "auto-shard", &last);
  }
  ok = ok && dtSpmdPrepare(root, &propagate);
  stepDone(ok && timing, "prepare", &last);
  ok = ok && dtPropagatePass.run(root, &propagate);
  stepDone(ok && timing, "propagate", &last);
  ok = ok && dtPartitionPass.run(root, &partition);
  stepDone(ok && timing, "partition", &last);
  dtDecisionsFree(&decisions);
  ok = ok && dtLowerRedistributePass.run(root, &lower);
  stepDone(ok && timing, "lower-redistribute", &last);
  ok = ok && dtBucketCollectivesPass.run(root, &bucket);
  stepDone(ok && timing, "bucket-collectives", &last);
  ok = ok && cleanUp(root);
  stepDone(ok && timing, "canonicalize+cse", &last);
  ok = ok && dtInitsNearUsesPass.run(root, &near);
  stepDone(ok && timing, "inits-near-uses", &last);
  ok = ok && dtScheduleCollectivesPass.run(root, &schedule);
  stepDone(ok && timing, "schedule-collectives", &last);
  return ok && withinBudget(root, options);
}

static const DtensorPassOptionInfo kOptions[] = {
    {"strict", DTENSOR_OPTION_BOOL, "false", NULL,
     "dtensor-propagate: no implicit redistribution"},
    {"why", DTENSOR_OPTION_BOOL, "false", NULL,
     "dtensor-propagate: explain every layout"},
    {"choice", DTENSOR_OPTION_ENUM, "whole", "whole|order|enumerate",
     "dtensor-propagate: how op strategies are chosen"},
    {"cost", DTENSOR_OPTION_BOOL, "false", NULL,
     "dtensor-propagate: print each function's modelled cost"},
    {"auto", DTENSOR_OPTION_BOOL, "false", NULL,
     "dtensor-propagate: choose the layouts of arguments and results "
     "without one too (dtensor-auto-shard)"},
    {"memory", DTENSOR_OPTION_STRING, "", NULL,
     "the bytes each device may hold (16GiB): dtensor-schedule-collectives "
     "stays within it; with auto=true dtensor-auto-shard's budget, the "
     "compiled program checked against it"},
    {"solver", DTENSOR_OPTION_ENUM, "default", "default|cbc|glpk",
     "with auto=true: the integer program solver"},
    {"time-limit", DTENSOR_OPTION_STRING, "60", NULL,
     "with auto=true: the solver's seconds per function"},
    {"layers", DTENSOR_OPTION_ENUM, "alike", "alike|free",
     "with auto=true: repeated layers pick alike (solved once)"},
    {"strategy", DTENSOR_OPTION_ENUM, "optimal", "optimal|greedy",
     "dtensor-lower-redistribute: how plans are searched"},
    {"objective", DTENSOR_OPTION_ENUM, "forward", "forward|forward+backward",
     "dtensor-lower-redistribute: what the search minimizes"},
    {"report", DTENSOR_OPTION_BOOL, "false", NULL,
     "dtensor-lower-redistribute: attach each plan's cost"},
    {"calibration", DTENSOR_OPTION_STRING, "", NULL,
     "dtensor-propagate and dtensor-lower-redistribute: price collectives "
     "with this measured cost file (dtensor-run --calibrate)"},
    {"bucket-bytes", DTENSOR_OPTION_INT, "26214400", NULL,
     "dtensor-bucket-collectives: the most bytes one merged all_reduce "
     "takes"},
    {"timing", DTENSOR_OPTION_BOOL, "false", NULL,
     "print the time of each step to stderr (--mlir-timing sees one pass)"},
};

const DtPassDef dtSpmdPass = {
    .info = {"dtensor-spmd",
             "dtensor-propagate, dtensor-partition, "
             "dtensor-lower-redistribute, dtensor-bucket-collectives, "
             "cse, canonicalize, dtensor-inits-near-uses and "
             "dtensor-schedule-collectives as one pass",
             (int)(sizeof(kOptions) / sizeof(kOptions[0])), kOptions},
    .verifyFirst = true,
    .run = runSpmd,
};

MlirLogicalResult dtensorSpmdStages(MlirStringRef options, char *buffer,
                                    size_t capacity, DtensorDiag *outDiag) {
  DtPassOptions parsed;
  if (!dtPassOptionsParse(&dtSpmdPass.info, options, &parsed, outDiag))
    return mlirLogicalResultFailure();
  char propagate[7 * DT_MAX_OPTION_VALUE + 160],
      lower[4 * DT_MAX_OPTION_VALUE + 96],
      chooser[7 * DT_MAX_OPTION_VALUE + 160] = "";
  propagateOptions(&parsed, propagate, sizeof(propagate));
  lowerOptions(&parsed, lower, sizeof(lower));
  if (dtPassOptionsGetBool(&parsed, "auto")) {
    char text[7 * DT_MAX_OPTION_VALUE + 120];
    autoShardOptions(&parsed, text, sizeof(text));
    snprintf(chooser, sizeof(chooser), "dtensor-auto-shard{%s}, ", text);
  }
  int n = snprintf(
      buffer, capacity,
      "dtensor-verify, %sdtensor-gathers, func.func(tosa-to-scf), "
      "dtensor-decompose-softmax, dtensor-decompose-packs, "
      "dtensor-propagate{%s}, dtensor-partition, "
      "dtensor-lower-redistribute{%s}, "
      "dtensor-bucket-collectives{bucket-bytes=%s}, " DT_SPMD_CLEANUP
      ", dtensor-inits-near-uses{memory='%s'}, "
      "dtensor-schedule-collectives{memory='%s'}",
      chooser, propagate, lower, dtPassOptionsGet(&parsed, "bucket-bytes"),
      dtPassOptionsGet(&parsed, "memory"), dtPassOptionsGet(&parsed, "memory"));
  if (n < 0 || (size_t)n >= capacity)
    return dtDiag(outDiag, 0, "the stages of dtensor-spmd do not fit"),
           mlirLogicalResultFailure();
  return mlirLogicalResultSuccess();
}