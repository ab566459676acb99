/* How a dtensor pass is defined: one DtPassDef per pass file, listed in
 * Passes.c. The shared wrapper verifies the input (dtensorVerify) before a
 * pass body runs and turns a false return into a pass failure. */
#ifndef DTENSOR_LIB_TRANSFORMS_PASSDEF_H
#define DTENSOR_LIB_TRANSFORMS_PASSDEF_H

#include "dtensor-c/Passes.h"

#include <stdbool.h>
#include <stdint.h>

#define DT_MAX_PASS_OPTIONS 16
#define DT_MAX_OPTION_VALUE 256

/// A pass's option values, one per DtensorPassOptionInfo, defaults filled in.
typedef struct DtPassOptions {
  const DtensorPassInfo *info;
  char values[DT_MAX_PASS_OPTIONS][DT_MAX_OPTION_VALUE];
  /* What a pass's own constructor hands it (borrowed), e.g. the rule
   * registry of dtensor-propagate; NULL when created by name. */
  const void *context;
  /* dtensor-spmd: where dtensor-propagate leaves its decisions and
   * dtensor-partition finds them (Table.h); NULL: in attributes. */
  struct DtDecisions *decisions;
} DtPassOptions;

typedef struct DtPassDef {
  DtensorPassInfo info;
  /// Whether the wrapper runs dtensorVerify first (false only for the
  /// verifier itself, which would otherwise run twice).
  bool verifyFirst;
  /// The pass body; returns false to fail the pass after emitting errors.
  bool (*run)(MlirOperation op, const DtPassOptions *options);
  /// Dialects whose ops the pass creates (loaded before it runs).
  int numDependentDialects;
  MlirDialectHandle (*dependentDialects[4])(void);
} DtPassDef;

/// Runs the upstream textual `pipeline` (nested as the root op's name
/// allows, e.g. "func.func(cse)") on `root` by a pass manager of its own
/// that does not verify between its passes (the outer one verifies the
/// calling pass's result); false when it does not parse or a pass failed.
bool dtRunUpstream(MlirOperation root, const char *pipeline);

/// As dtensorPassCreate, with `context` handed to the pass body through
/// its options.
MlirPass dtPassCreateWithContext(MlirStringRef argument, MlirStringRef options,
                                 const void *context, DtensorDiag *outDiag);

/// Creates the pass of `def` (which need not be in the registry).
MlirPass dtPassCreateFromDef(const DtPassDef *def, MlirStringRef options,
                             const void *context, DtensorDiag *outDiag);

/// Parses "key=value ..." for the options of `info` over their defaults.
bool dtPassOptionsParse(const DtensorPassInfo *info, MlirStringRef text,
                        DtPassOptions *out, DtensorDiag *outDiag);

/// Returns the value of option `name` (which must exist in the pass's info).
const char *dtPassOptionsGet(const DtPassOptions *options, const char *name);

/// Returns option `name` as an integer.
int64_t dtPassOptionsGetInt(const DtPassOptions *options, const char *name);

/// Returns option `name` as a bool.
bool dtPassOptionsGetBool(const DtPassOptions *options, const char *name);

/// Reads the file of option "calibration" into `*outCal` (NULL when the
/// option is empty); false after an error at `root` naming `pass` and the
/// file's line when it does not read.
struct DtensorCalibration;
bool dtPassReadCalibration(MlirOperation root, const char *pass,
                           const DtPassOptions *options,
                           struct DtensorCalibration **outCal);

/// Reads option "memory" (a byte count: 512MB, 16GiB, 1048576) into
/// `*outBytes` (-1 when the option is empty); false after an error at
/// `root` naming `pass` when it is no byte count.
bool dtPassReadBudget(MlirOperation root, const char *pass,
                      const DtPassOptions *options, int64_t *outBytes);

extern const DtPassDef dtVerifyPass;
extern const DtPassDef dtLowerRedistributePass;
extern const DtPassDef dtPropagatePass;
extern const DtPassDef dtAutoShardPass;
extern const DtPassDef dtPartitionPass;
extern const DtPassDef dtReportPass;
extern const DtPassDef dtSpmdPass;
extern const DtPassDef dtLowerToRuntimePass;
extern const DtPassDef dtLowerContractionsPass;
extern const DtPassDef dtPrepareContractionsPass;
extern const DtPassDef dtApproximateMathPass;
extern const DtPassDef dtExpandF8Pass;
extern const DtPassDef dtProfilePass;
extern const DtPassDef dtOuterParallelPass;
extern const DtPassDef dtReassociateReductionsPass;
extern const DtPassDef dtWidenReductionsPass;
extern const DtPassDef dtDecomposeSoftmaxPass;
extern const DtPassDef dtGathersPass;
extern const DtPassDef dtDecomposePacksPass;
extern const DtPassDef dtLowerGathersPass;
extern const DtPassDef dtAutodiffPass;
extern const DtPassDef dtInitsToInputsPass;
extern const DtPassDef dtEarlyDeallocPass;
extern const DtPassDef dtBucketCollectivesPass;
extern const DtPassDef dtScheduleCollectivesPass;
extern const DtPassDef dtInitsNearUsesPass;

/// What dtensor-spmd does before propagation (dtensor-gathers, tosa-to-scf,
/// dtensor-decompose-softmax, dtensor-decompose-packs), with propagation's
/// options; false after a located error.
bool dtSpmdPrepare(MlirOperation root, const DtPassOptions *propagate);

/// dtensor-decompose-softmax on `root`, for a pass that needs every
/// linalg.softmax decomposed first (dtensor-autodiff); false after a
/// located error.
bool dtDecomposeSoftmax(MlirOperation root);

/// Whether dtensor-decompose-softmax, dtensor-decompose-packs have work at
/// `op` (dtSpmdPrepare skips a step with nothing to do).
bool dtDecomposeSoftmaxFinds(MlirOperation op);
bool dtDecomposePacksFinds(MlirOperation op);
extern const DtPassDef dtGpuMemoryPass;
extern const DtPassDef dtGpuCheckHostPass;
extern const DtPassDef dtGpuSerialKernelsPass;
extern const DtPassDef dtGpuLoopOrderPass;
extern const DtPassDef dtViewGraphPass;
extern const DtPassDef dtCheckLoweredPass;
extern const DtPassDef dtApplyPlanPass;
extern const DtPassDef dtImportGspmdPass;
extern const DtPassDef dtImportShardPass;

#endif
