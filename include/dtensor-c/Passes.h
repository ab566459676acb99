/*===- dtensor-c/Passes.h - dtensor passes and pipelines ----------*- C -*-===*
 *
 * The dtensor passes, created from C and usable in any MLIR pass manager,
 * their registry (names, options) and a textual pipeline parser that mixes
 * dtensor and upstream passes. See docs/passes.md.
 *
 *===----------------------------------------------------------------------===*/
#ifndef DTENSOR_C_PASSES_H
#define DTENSOR_C_PASSES_H

#include "dtensor-c/Support.h"
#include "mlir-c/Pass.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The kind of value a pass option takes.
typedef enum DtensorPassOptionType {
  DTENSOR_OPTION_BOOL,   /* true/false, 1/0 */
  DTENSOR_OPTION_INT,    /* a decimal integer */
  DTENSOR_OPTION_STRING, /* any text (quote it if it has spaces or braces) */
  DTENSOR_OPTION_ENUM,   /* one of the '|'-separated `values` */
} DtensorPassOptionType;

/// One option of a pass, as `--help` lists it.
typedef struct DtensorPassOptionInfo {
  const char *name;
  DtensorPassOptionType type;
  const char *defaultValue;
  const char *values; /* DTENSOR_OPTION_ENUM: "a|b|c"; NULL otherwise */
  const char *description;
} DtensorPassOptionInfo;

/// A registered dtensor pass: its flag name, summary and options.
typedef struct DtensorPassInfo {
  const char *argument;
  const char *summary;
  int numOptions;
  const DtensorPassOptionInfo *options;
} DtensorPassInfo;

/// Returns the number of dtensor passes.
DTENSOR_EXPORT int dtensorPassGetNumRegistered(void);

/// Returns the `index`-th dtensor pass (borrowed, static), or NULL when out
/// of range.
DTENSOR_EXPORT const DtensorPassInfo *dtensorPassGetRegistered(int index);

/// Returns the dtensor pass whose flag name is `argument`, or NULL.
DTENSOR_EXPORT const DtensorPassInfo *dtensorPassLookup(MlirStringRef argument);

/// The name of dtensor's pipeline `index` (dtensor-spmd, dtensor-to-nvvm,
/// dtensor-to-llvm), or NULL past the last.
DTENSOR_EXPORT const char *dtensorPipelineGetRegistered(int index);

/// Creates the dtensor pass `argument` with `options` ("key=value ..."; may
/// be empty); the caller owns the pass (a pass manager takes it). Returns a
/// null pass and fills `outDiag` for an unknown pass or bad options.
DTENSOR_EXPORT MlirPass dtensorPassCreate(MlirStringRef argument,
                                          MlirStringRef options,
                                          DtensorDiag *outDiag);

/// Creates the `dtensor-verify` pass: runs dtensorVerify and fails on error.
DTENSOR_EXPORT MlirPass dtensorCreateVerifyPass(void);

/// Sharding rules for ops dtensor-propagate does not know, registered by an
/// embedder per op name (opaque).
typedef struct DtensorRuleRegistry DtensorRuleRegistry;

/// Creates an empty rule registry; the caller owns it and must keep it alive
/// as long as any pass created with it. Returns NULL if out of memory.
DTENSOR_EXPORT DtensorRuleRegistry *dtensorRuleRegistryCreate(void);

/// Destroys a registry; NULL is a no-op.
DTENSOR_EXPORT void dtensorRuleRegistryDestroy(DtensorRuleRegistry *registry);

/// Registers (or replaces) the rule of ops named `opName` as an einsum over
/// their tensor operands and results, e.g. "ij,jk->ik" (a factor absent from
/// every output is a reduction, of sum unless the rule ends in ":max" etc.;
/// '.' is a replicated dim). Returns false and fills `outDiag` if the rule
/// is malformed.
DTENSOR_EXPORT bool dtensorRuleRegistryAdd(DtensorRuleRegistry *registry,
                                           MlirStringRef opName,
                                           MlirStringRef einsum,
                                           DtensorDiag *outDiag);

/// Creates the `dtensor-propagate` pass with `options` ("strict=true ...")
/// that also uses the rules of `registry` (may be NULL). Returns a null pass
/// and fills `outDiag` on bad options.
DTENSOR_EXPORT MlirPass
dtensorCreatePropagatePass(const DtensorRuleRegistry *registry,
                           MlirStringRef options, DtensorDiag *outDiag);

/// Adds the `dtensor-spmd` pipeline to `pm`: dtensor-verify,
/// dtensor-propagate, dtensor-partition, dtensor-lower-redistribute,
/// canonicalize, cse. `options` ("strict=true strategy=greedy ...") go to
/// the passes that take them (strict, why: propagate; strategy, objective,
/// report: lower-redistribute; timing: print each step's time to stderr).
/// On failure returns failure and fills `outDiag`.
DTENSOR_EXPORT MlirLogicalResult dtensorAddSpmdPipeline(MlirOpPassManager pm,
                                                        MlirStringRef options,
                                                        DtensorDiag *outDiag);

/// Runs dtensor-auto-shard with `options` ("mesh=4 memory=16GiB", as the
/// pass takes them) on `module`: every argument, result and value without
/// a layout gets the one the integer program chose (docs/autoshard.md).
/// `devices` > 0 stands for mesh=`devices` where `options` give no mesh=
/// (dtensor-run's -n, Python's n=); 0: none.
/// The pass's located errors go to the context's diagnostic handler; on
/// failure (them, or bad options) returns failure and fills `outDiag`.
DTENSOR_EXPORT MlirLogicalResult dtensorAutoShard(MlirOperation module,
                                                  MlirStringRef options,
                                                  int64_t devices,
                                                  DtensorDiag *outDiag);

/// dtensor-spmd with `options` spelled out as the pipeline of its stages
/// (dtensor-verify, dtensor-gathers, func.func(tosa-to-scf),
/// dtensor-decompose-softmax, dtensor-decompose-packs,
/// dtensor-propagate{...}, dtensor-partition,
/// dtensor-lower-redistribute{...}, dtensor-bucket-collectives{...},
/// canonicalize, cse, dtensor-schedule-collectives),
/// which computes the same with propagation's decisions passed as
/// attributes and the IR verified after each stage; dtensor-opt runs it
/// when IR printing is asked for, so that every stage shows. Writes the
/// text into `buffer` (snprintf's way); failure with `outDiag` for bad
/// options or too small a buffer.
DTENSOR_EXPORT MlirLogicalResult dtensorSpmdStages(MlirStringRef options,
                                                   char *buffer,
                                                   size_t capacity,
                                                   DtensorDiag *outDiag);

/// Adds the `dtensor-to-llvm` pipeline to `pm`: dtensor-lower-to-runtime
/// (collectives become calls of libdtensor_rt), dtensor-lower-gathers,
/// tosa to scf, linalg, arith and tensor, dtensor-decompose-packs,
/// dtensor-decompose-softmax,
/// dtensor-widen-reductions (f16/bf16 sums accumulate in f32),
/// dtensor-prepare-contractions,
/// linalg-fuse-elementwise-ops,
/// one-shot-bufferize with function boundaries of identity layout
/// (arguments and results are contiguous row-major buffers),
/// buffer-deallocation-pipeline, convert-bufferization-to-memref,
/// dtensor-lower-contractions (contractions
/// become BLAS calls of libdtensor_rt), dtensor-approximate-math,
/// dtensor-reassociate-reductions, convert-linalg-to-loops,
/// convert-scf-to-cf, expand-strided-metadata, finalize-memref-to-llvm
/// (allocations through libdtensor_rt), convert-to-llvm,
/// convert-math-to-libm, reconcile-unrealized-casts, dtensor-check-lowered
/// (a located error for any op not lowered).
DTENSOR_EXPORT MlirLogicalResult dtensorAddToLLVMPipeline(MlirOpPassManager pm,
                                                          DtensorDiag *outDiag);

/// dtensorAddToLLVMPipeline with `options` as in the pipeline text:
/// `exact-reductions=true` leaves out dtensor-reassociate-reductions, so
/// float sums and products keep the program's order (not vectorized);
/// false (the default) lets them be reordered. False with `outDiag` for
/// an unknown option.
DTENSOR_EXPORT MlirLogicalResult dtensorAddToLLVMPipelineWithOptions(
    MlirOpPassManager pm, MlirStringRef options, DtensorDiag *outDiag);

/// Adds the GPU target's pipeline (`dtensor-to-nvvm`, docs/runtime.md):
/// buffers in device memory, loops mapped to kernels, kernels compiled for
/// `chip=sm_NN` (default sm_90) as cubins (`format=bin`, the default, by
/// CUDA's ptxas on PATH) or PTX (`format=isa`), host code calling the
/// runtime's mgpu* functions. `options` as in the pipeline text.
DTENSOR_EXPORT MlirLogicalResult dtensorAddToNVVMPipeline(MlirOpPassManager pm,
                                                          MlirStringRef options,
                                                          DtensorDiag *outDiag);

/// Registers every upstream MLIR pass so that pipelines can name them, once
/// per process (later calls do nothing). The pass and pipeline constructors
/// below call it themselves.
DTENSOR_EXPORT void dtensorRegisterUpstreamPasses(void);

/// Parses `pipeline` and adds it to `pm`. The text is either a list of
/// elements (`a, b{k=v}, func.func(c)`) or one anchored pipeline
/// (`builtin.module(a, b)`) whose anchor must be `pm`'s. dtensor passes and
/// upstream passes mix freely. On failure returns failure and fills
/// `outDiag` (its column is 0-based in `pipeline`).
DTENSOR_EXPORT MlirLogicalResult dtensorPassManagerAddPipeline(
    MlirOpPassManager pm, MlirStringRef pipeline, DtensorDiag *outDiag);

/// Prints what the dtensor-report pass wrote on `module` as a table through
/// `callback`: per reported function its bytes and collectives, then one
/// line per collective with its bytes, modelled time and
/// `sourceName`:line. Returns how many functions it reported (0: the pass
/// did not run).
DTENSOR_EXPORT int dtensorReportPrint(MlirOperation module,
                                      MlirStringRef sourceName,
                                      MlirStringCallback callback,
                                      void *userData);

/// Turns an annotated global program into the single-device program it
/// stands for (the reference a partitioned run is compared with): every
/// dtensor.annotate, and every dtensor.redistribute between values of the
/// same type, is replaced by its operand, and function arguments and
/// results lose their dtensor attributes. Meshes stay (nothing reads
/// them; dtensor-lower-to-runtime removes them).
DTENSOR_EXPORT void dtensorStripToSingleDevice(MlirOperation module);

#ifdef __cplusplus
}
#endif

#endif /* DTENSOR_C_PASSES_H */
