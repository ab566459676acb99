/*===- dtensor-c/Runner.h - differential runs of annotated programs --*- C
 * -*-===*
 *
 * The check dtensor-run makes, as a library: an annotated program is
 * compiled twice with MLIR's ExecutionEngine — as the single-device
 * reference (annotations dropped) and with dtensor-spmd for its mesh — the
 * reference runs on global inputs, and each rank of the mesh runs the SPMD
 * program on its blocks of the same inputs (laid out under the entry's
 * argument layouts) and compares its result blocks with the reference's.
 *
 * Ranks are processes: dtensorRunnerLaunch forks one per device of the mesh
 * (after dtensorRunnerComputeReference, so the program is compiled once)
 * and gathers their reports; a caller with its own launcher (mpirun) calls
 * dtensorRunnerRunRank in each. Nothing here prints or exits.
 *
 *===----------------------------------------------------------------------===*/
#ifndef DTENSOR_C_RUNNER_H
#define DTENSOR_C_RUNNER_H

#include "dtensor-c/Layout.h"
#include "dtensor-c/Planner.h"
#include "dtensor-c/Support.h"
#include "dtensor-rt/Launch.h"
#include "dtensor-rt/Runtime.h"
#include "mlir-c/IR.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/// A program compiled for a differential run.
typedef struct DtensorRunner DtensorRunner;

/// An argument or a result of the entry, as the global program sees it.
typedef struct DtensorRunTensor {
  char name[128]; /* its dtensor.name, else arg<i> / result<i> */
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK]; /* global */
  DtrtDtype dtype;
  DtensorShardingSpec spec; /* replicated where the signature has none */
} DtensorRunTensor;

/// Compiles `module` (an annotated program; a program of MLIR's shard
/// dialect or with GSPMD shardings is imported first) for a differential
/// run of its function `entry` (NULL: the first function with a body), and
/// fills every argument with deterministic inputs. Takes ownership of
/// `module`. Returns NULL and fills `outDiag` when the program does not
/// compile, has no entry or mesh, or its entry takes or returns what the
/// runner cannot build or compare (it must return at least one tensor;
/// tensors of the runtime's element types).
DTENSOR_EXPORT DtensorRunner *dtensorRunnerCreate(MlirOperation module,
                                                  const char *entry,
                                                  DtensorDiag *outDiag);

/// As dtensorRunnerCreate, with the SPMD program compiled for `target`:
/// "cpu" (dtensor-to-llvm with `gpuOptions` as its options, e.g.
/// "exact-reductions=true", which the reference gets too; "threads=auto":
/// loops in threads when each of the mesh's ranks has more than one
/// compute thread, DTENSOR_THREADS or the cores shared among them), or "cuda"
/// (dtensor-to-nvvm with `gpuOptions`, e.g. "chip=sm_90"; its entry takes
/// and returns device buffers, so each rank copies its blocks to the GPU,
/// and the results back to compare them; the ranks run on the nccl
/// backend). The reference runs on the CPU.
DTENSOR_EXPORT DtensorRunner *
dtensorRunnerCreateForTarget(MlirOperation module, const char *entry,
                             const char *target, const char *gpuOptions,
                             DtensorDiag *outDiag);

/// A bundle: a directory with the reference and the SPMD program compiled
/// ahead of time as shared objects and a manifest (the entry, the target,
/// the mesh, each argument and result: name, element type, global shape,
/// layout), which dtensorRunnerOpenBundle (and dtensor-check) run where
/// MLIR is not installed: only libdtensor_rt and the vendor libraries are
/// needed. Each shared object defines DTENSOR_BUNDLE_CALL_PREFIX<entry>,
/// taking an array of pointers: the results' room, then each argument's
/// memref descriptor, and DTENSOR_BUNDLE_SIGNATURE, the manifest's lines
/// after the first as a NUL-terminated string, which must equal the
/// manifest beside it.
#define DTENSOR_BUNDLE_MAGIC "dtensor-bundle 1"
#define DTENSOR_BUNDLE_SIGNATURE "_dtensor_bundle_signature"
#define DTENSOR_BUNDLE_MANIFEST "manifest.txt"
#define DTENSOR_BUNDLE_REFERENCE "reference"
#define DTENSOR_BUNDLE_SPMD "spmd"
#define DTENSOR_BUNDLE_CALL_PREFIX "_dtensor_call_"

/// Compiles `module` as dtensorRunnerCreateForTarget does and writes the
/// bundle into `dir` (made if missing; the shared objects are linked by
/// `$CC`, else `cc`). Takes ownership of `module`. False with `outDiag`.
DTENSOR_EXPORT bool
dtensorRunnerExportBundle(MlirOperation module, const char *entry,
                          const char *target, const char *gpuOptions,
                          const char *dir, DtensorDiag *outDiag);

/// A runner over the bundle in `dir` (its inputs made as
/// dtensorRunnerCreate makes them); NULL with `outDiag` when the manifest
/// does not read or a shared object does not load. A GPU bundle loads its
/// kernels at once, so it needs a CUDA device.
DTENSOR_EXPORT DtensorRunner *dtensorRunnerOpenBundle(const char *dir,
                                                      DtensorDiag *outDiag);

/// Destroys a runner; NULL is a no-op.
DTENSOR_EXPORT void dtensorRunnerDestroy(DtensorRunner *runner);

/// The program's mesh (owned by the runner).
DTENSOR_EXPORT const DtensorMesh *
dtensorRunnerGetMesh(const DtensorRunner *runner);

/// The entry's name.
DTENSOR_EXPORT const char *dtensorRunnerGetEntry(const DtensorRunner *runner);

/// The number of the entry's arguments and results.
DTENSOR_EXPORT int dtensorRunnerGetNumArguments(const DtensorRunner *runner);
DTENSOR_EXPORT int dtensorRunnerGetNumResults(const DtensorRunner *runner);

/// Argument `i` or result `k` of the entry (borrowed).
DTENSOR_EXPORT const DtensorRunTensor *
dtensorRunnerGetArgument(const DtensorRunner *runner, int i);
DTENSOR_EXPORT const DtensorRunTensor *
dtensorRunnerGetResult(const DtensorRunner *runner, int k);

/// The global value of argument `i`, row-major in its element type
/// (borrowed, writable until dtensorRunnerComputeReference).
DTENSOR_EXPORT void *dtensorRunnerGetArgumentData(DtensorRunner *runner, int i);

/// Reads every argument whole from the checkpoint `dir` by name, after
/// checking each one's element type and shape; a positional tensor
/// (`arg<i>`) that no argument takes is an error. False with `outDiag`.
DTENSOR_EXPORT bool dtensorRunnerLoadArguments(DtensorRunner *runner,
                                               const char *dir,
                                               DtensorDiag *outDiag);

/// Runs the single-device program on the arguments. False with `outDiag`.
DTENSOR_EXPORT bool dtensorRunnerComputeReference(DtensorRunner *runner,
                                                  DtensorDiag *outDiag);

/// The reference's result `k` (global, row-major; borrowed), or NULL before
/// dtensorRunnerComputeReference.
DTENSOR_EXPORT const void *
dtensorRunnerGetReference(const DtensorRunner *runner, int k);

/// How close a float result must be to the reference: every finite
/// element within atol + rtol * |reference| (numpy's allclose).
typedef struct DtensorTolerance {
  double rtol, atol;
} DtensorTolerance;

/// What one rank does besides the checked run.
typedef struct DtensorRankOptions {
  const char *loadDir; /* the arguments' blocks from this checkpoint */
  const char *saveDir; /* the results' blocks into this checkpoint */
  int repeat;          /* timed runs after the checked one (0: none) */
  const DtensorTolerance *tolerance; /* NULL: the defaults below */
  bool unchecked;      /* no reference: run and save, compare nothing (a step
                          of a training loop; the report's `compared` is 0) */
  const char *profile; /* a program compiled with profile=true: the rank
                          writes its events to "<profile>.rank<N>" at the
                          end (dtensorRunnerProfileReport merges them) */
} DtensorRankOptions;

/// What one rank found: the result elements it compared (padding aside),
/// how many differ from the reference (floats by default: rtol 1e-4 plus
/// 1e-5 of the result's scale, its largest finite magnitude if over 1;
/// f16, bf16: 2e-2 and 1e-2; or the options' tolerance; integers exactly;
/// a NaN or an infinity on either side only equals the same), the
/// largest absolute error, and with `repeat` the fastest and median step
/// and the median time a step spent in collective calls (blocked in them
/// or waiting for started ones: the communication it did not hide;
/// dtrtCompiledCommSeconds), and the most bytes the program's own buffers
/// (its intermediate values and results, not its arguments) held at once
/// in a timed step (dtrtBufferPeak).
typedef struct DtensorRankReport {
  int64_t compared, different;
  double maxAbsError;
  int steps;
  double minStepSeconds, medianStepSeconds;
  double medianCommSeconds;
  int64_t peakBufferBytes;
} DtensorRankReport;

/// Runs the SPMD program as `rank` of the runtime's process context (the
/// arguments' blocks from the global inputs, or from `options->loadDir`),
/// resolves Partial results with all_reduce, compares the blocks with the
/// reference and, when they are equal, times `options->repeat` more steps.
/// Every rank calls it (the collectives are collective). False with
/// `outDiag` when the run fails; a difference is reported in `outReport`.
DTENSOR_EXPORT bool dtensorRunnerRunRank(DtensorRunner *runner, int rank,
                                         const DtensorRankOptions *options,
                                         DtensorRankReport *outReport,
                                         DtensorDiag *outDiag);

/// The lines dtensor-run prints for one rank's report ("rank 0: 4096 result
/// elements, equal to the single-device run (max abs error 1.2e-06)", and
/// the step times when it has them), snprintf's way: returns the length
/// needed, writes at most `capacity` bytes with a NUL.
DTENSOR_EXPORT size_t dtensorRankReportFormat(const DtensorRunner *runner,
                                              int rank,
                                              const DtensorRankReport *report,
                                              char *buffer, size_t capacity);

/// Runs every rank in its own process (dtrtLaunch with `launch`, whose
/// numRanks must be the mesh's device count; each rank calls
/// dtensorRunnerRunRank with `options`) after dtensorRunnerComputeReference
/// (not needed with `options->unchecked`),
/// and fills `outReports[rank]` for every rank. True when every rank ran
/// (a difference from the reference is in its report, not a failure);
/// false with `outDiag` naming the rank that failed and why, or why the job
/// could not start or was stopped. `outExitCode` (NULL: not wanted) gets
/// the launch's exit code: 0, 1, or 128 + the signal that stopped it.
DTENSOR_EXPORT bool dtensorRunnerLaunch(DtensorRunner *runner,
                                        const DtrtLaunchOptions *launch,
                                        const DtensorRankOptions *options,
                                        DtensorRankReport *outReports,
                                        int *outExitCode, DtensorDiag *outDiag);

/// A job whose ranks stay up between steps: a training loop's calls run
/// the entry once each without launching, compiling or checking anything,
/// and a result that is the next step's value of an argument (the same
/// name and layout, nothing pending: a step's new parameters and optimizer
/// state, as dtensor-autodiff names them) stays on the ranks as that
/// argument's block. CPU programs; no reference is computed.
typedef struct DtensorRunSession DtensorRunSession;

/// Starts the ranks (`launch->numRanks` must be the mesh's device count)
/// in a launcher process of their own; they wait for steps. A step that
/// takes longer than `timeoutSeconds` (<= 0: no limit) stops the job. NULL
/// with `outDiag` (a GPU program, no memory, no process).
DTENSOR_EXPORT DtensorRunSession *
dtensorRunSessionStart(DtensorRunner *runner, const DtrtLaunchOptions *launch,
                       double timeoutSeconds, DtensorDiag *outDiag);

/// Where to write argument `index`'s global value (row-major, its runtime
/// type) for the next step; the ranks take their blocks of it at that
/// step (a carried value is replaced). The value stays for later steps
/// until it is carried or written again. NULL for a bad index.
DTENSOR_EXPORT void *dtensorRunSessionArgument(DtensorRunSession *session,
                                               int index);

/// The argument result `result` stays on the ranks as, or -1.
DTENSOR_EXPORT int dtensorRunSessionCarried(const DtensorRunSession *session,
                                            int result);

/// Runs one step. Results with `wanted[k]` (NULL: those not carried) are
/// assembled into their global values (Partial ones reduced), readable with
/// dtensorRunSessionResult until the next command. `outSeconds` (NULL: not
/// wanted) gets the slowest rank's time in the program. False with
/// `outDiag` (an argument never given, a rank that failed: the job is then
/// over).
DTENSOR_EXPORT bool dtensorRunSessionStep(DtensorRunSession *session,
                                          const bool *wanted,
                                          double *outSeconds,
                                          DtensorDiag *outDiag);

/// Result `k`'s global value after the last step that wanted it.
DTENSOR_EXPORT const void *
dtensorRunSessionResult(const DtensorRunSession *session, int k);

/// Argument `index`'s current global value, assembled from the ranks'
/// blocks (a carried one: the last step's result). NULL with `outDiag`.
DTENSOR_EXPORT const void *dtensorRunSessionFetch(DtensorRunSession *session,
                                                  int index,
                                                  DtensorDiag *outDiag);

/// The profile of the steps since the last one (a program compiled with
/// "profile=true"): the ranks write their events and forget them, merged as
/// dtensorRunnerProfileReport does (a Chrome trace at `path`, the table to
/// `table` unless NULL). False with `outDiag`.
DTENSOR_EXPORT bool dtensorRunSessionProfile(DtensorRunSession *session,
                                             const char *path, FILE *table,
                                             DtensorDiag *outDiag);

/// Stops the ranks and frees the session (NULL: nothing). False with
/// `outDiag` when the job had failed or did not end cleanly.
DTENSOR_EXPORT bool dtensorRunSessionClose(DtensorRunSession *session,
                                           DtensorDiag *outDiag);

/// The per-op profile of a run whose program was compiled with
/// "profile=true" among its target options and whose ranks had
/// `options.profile` = `path`: merges the ranks' events ("<path>.rank<N>",
/// removed) into a Chrome trace at `path` (chrome://tracing or Perfetto:
/// one track per rank, each event an op with its shapes and source
/// location) and prints to `table` (NULL: not) each op kind's calls, total
/// and mean time and share, summed over the ranks, the largest first
/// (torch.profiler's key_averages). False with `outDiag`.
DTENSOR_EXPORT bool dtensorRunnerProfileReport(const DtensorRunner *runner,
                                               const char *path, int numRanks,
                                               FILE *table,
                                               DtensorDiag *outDiag);

/// Times the runtime's all_gather, all_reduce, reduce_scatter and all_to_all
/// (f32, 1 KiB to 2 MiB per device, the slowest rank's best batch) on every
/// group of `mesh`'s axes of more than one device, this process being one
/// rank of a job of the mesh's size (the runtime's environment; every rank
/// calls it), and fits latency + bytes / bandwidth per (collective, group);
/// then times f32 products from 8x8x8 to 256x256x256 through the runtime's
/// contraction path with every rank computing at once (the slowest rank's
/// median batch) and fits overhead + multiply-adds / rate.
/// At most `repeats` runs per batch. Rank 0 gets the calibration in
/// `*outCal` (the caller owns it), the others NULL. False with `outDiag`
/// when the job does not match the mesh or a collective fails.
DTENSOR_EXPORT bool dtensorCalibrationMeasure(const DtensorMesh *mesh,
                                              int repeats,
                                              DtensorCalibration **outCal,
                                              DtensorDiag *outDiag);

#ifdef __cplusplus
}
#endif

#endif /* DTENSOR_C_RUNNER_H */
