/* Contractions the runtime runs on BLAS, recognized from indexing maps
 * and the body alone (Contraction.c), for dtensor-prepare-contractions
 * (on tensors) and dtensor-lower-contractions (on memrefs). */
#ifndef DTENSOR_LIB_TRANSFORMS_CONTRACTION_H
#define DTENSOR_LIB_TRANSFORMS_CONTRACTION_H

#include "dtensor-rt/Runtime.h"
#include "mlir-c/IR.h"

#include <stdbool.h>
#include <stdint.h>

/// The runtime's limit on the loops of a contraction.
#define DT_CONTRACTION_MAX_LOOPS DTRT_CONTRACT_MAX_LOOPS
/// The size of the flattened maps: the loop count, then each operand's dims.
#define DT_CONTRACTION_MAPS (1 + 3 * DT_CONTRACTION_MAX_LOOPS)

/// Whether `op` (a linalg op on tensors or memrefs) is C += A·B with
/// projected-permutation maps, a body that is exactly out + a * b (extf on
/// a and b allowed) and element types the runtime has an entry for
/// (DTRT_CONTRACT_TYPES): their names in `outNames`, the loop count and
/// each operand dim's loop in `outMaps` (`*outNumMaps` entries).
bool dtContractionMatchBlas(MlirOperation op, const char *outNames[3],
                            int64_t *outMaps, int *outNumMaps);

/// What `fill` fills with a floating-point zero: a linalg.fill, or a
/// linalg.generic that writes one value to every element (a fill
/// generalized); null for any other op.
MlirValue dtZeroFillOutput(MlirOperation fill);

/// The zero (an arith.constant) a zero fill writes; null for any other op.
MlirValue dtZeroFillValue(MlirOperation fill);

/// Whether dtZeroFillOutput finds a zero fill.
bool dtIsZeroFill(MlirOperation fill);

#endif
