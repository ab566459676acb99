/* dtensor-autodiff's parts (Autodiff.c: the pass, its adjoints of tensor
 * ops; AutodiffScalar.c: derivatives of scalar code, as MLIR text). */
#ifndef DTENSOR_LIB_TRANSFORMS_AUTODIFF_H
#define DTENSOR_LIB_TRANSFORMS_AUTODIFF_H

#include "Support/Support.h"

#include "mlir-c/IR.h"

#include <stdbool.h>

#define DT_AD_NAME 32

/// Scalar code to differentiate: `ops` (each with one result, or none),
/// whose operands outside them are the `numInputs` values `inputs`, named
/// `inputNames` in the text. Tensor-typed values stand for their elements
/// (an elementwise op on tensors is its scalar op).
typedef struct DtAdScalar {
  const MlirOperation *ops;
  int numOps;
  const MlirValue *inputs;
  const char *const *inputNames;
  int numInputs;
} DtAdScalar;

/// Writes to `t` the ops of `s` the derivative needs (generic form, results
/// named %<prefix>f<i>), then the reverse sweep from `root` (one of their
/// results or inputs) seeded with the value named `seed`, and names in
/// `outAdjoint` the adjoint of input `target` ("" when it does not depend on
/// it). `outInputsUsed[k]`: whether the text reads input k (an input no
/// derivative reads is left out of the adjoint's op: a contraction's
/// adjoint stays a two-input contraction, which runs on BLAS). `keepRoot`:
/// print `root` even if the sweep does not read it (the caller compares
/// with it). False with `*outBad` set to the op that has no derivative (or
/// has several results).
bool dtAdScalarVjp(DtBuf *t, const DtAdScalar *s, MlirValue root,
                   const char *seed, int target, const char *prefix,
                   bool keepRoot, bool *outInputsUsed,
                   char outAdjoint[DT_AD_NAME], MlirOperation *outBad);

/// The element type of `type` (itself when it is not shaped), printed.
void dtAdElementType(MlirType type, char *out, size_t size);

/* ---- the reverse sweep (Autodiff.c) -------------------------------------- */

#define DT_AD_TEXT_SIZE (256 * 1024)

/// One function's reverse sweep: its ops go before `before`; `entries`
/// holds the active values (those that depend on the chosen arguments) and
/// their adjoints; `text` is scratch for templates.
typedef struct DtAd {
  MlirContext ctx;
  MlirOperation before;
  DtTable entries;
  char *text;
  bool failed;
  struct Run *run; /* the pass's state (the vjps of callees) */
} DtAd;

/// The adjoint of `v` so far (null: none).
MlirValue dtAdAdjoint(DtAd *ad, MlirValue v);

/// Whether `v` is an active float tensor.
bool dtAdActive(DtAd *ad, MlirValue v);

/// Parses the template in `t` (a function @adj), inserts it before the
/// sweep's point with `args`, and stores what it returns in `results`;
/// false (the sweep failed, with an error at `at`) otherwise.
bool dtAdEmit(DtAd *ad, MlirOperation at, DtBuf *t, const MlirValue *args,
              MlirValue *results, intptr_t numResults);

/// Adds `contribution` to the adjoint of `v` (nothing if `v` is inactive).
void dtAdAccumulate(DtAd *ad, MlirOperation at, MlirValue v,
                    MlirValue contribution);

/// Prints `type` into a template.
void dtAdTypeText(DtBuf *t, MlirType type);

/// "%<name> = zeros of `type`" (three lines) into a template.
void dtAdZeros(DtBuf *t, const char *name, MlirType type);

/// The identity affine map of `rank` dims, into a template.
void dtAdIdentityMap(DtBuf *t, int rank);

/* ---- linalg ops (AutodiffLinalg.c) ------------------------------------------
 */

/// Adds the contributions of a linalg op (generic or named), or of an
/// elementwise arith/math op on tensors (`elementwise`), to its active
/// inputs' adjoints (and to its init's, for a sum).
void dtAdLinalgAdjoint(DtAd *ad, MlirOperation op, bool elementwise);

/// Gives function `g` the return `operands` (its return `ret` destroyed) and
/// the type of its entry block's arguments and those results.
void dtAdReplaceReturn(MlirOperation g, MlirOperation ret,
                       const MlirValue *operands, intptr_t n);

/* ---- the training step (AutodiffStep.c) ------------------------------------
 */

struct DtPassOptions;

/// Adds @<f>_step after @<f>_grad (`grad`, whose first `numResults` results
/// are @f's, then a gradient per `chosen` argument): the gradients applied
/// by the options' optimizer (sgd, adam; lr, beta1, beta2, eps). False
/// after a located error.
bool dtAdBuildStep(MlirOperation module, MlirOperation f, MlirOperation grad,
                   const bool *chosen, intptr_t numResults,
                   const struct DtPassOptions *options);

/* ---- loops (AutodiffLoops.c) ----------------------------------------------
 */

/// The most iterations of an scf.for dtensor-autodiff unrolls.
#define DT_AD_MAX_UNROLL 256

/// The value of an index or integer `arith.constant`, or false.
bool dtAdConstantIndex(MlirValue v, int64_t *out);

/// Replaces `loop` (an scf.for of constant bounds) by its iterations, one
/// after the other; false after a located error (bounds not constants, too
/// many iterations) or when out of memory.
bool dtAdUnrollLoop(MlirOperation loop);

/* ---- tensor ops (AutodiffTensor.c) ----------------------------------------
 */

/// Whether `op` is a tensor op with an adjoint here (slices, pad, concat,
/// reshapes, cast, dtensor.annotate).
bool dtAdIsTensorOp(MlirOperation op);

/// Adds the contributions of `op` (its result carries an adjoint) to its
/// operands'.
void dtAdTensorAdjoint(DtAd *ad, MlirOperation op);

#endif
