/* What the runner's files share: the compiled program and the entry's
 * tensors (Runner.c: compiling, the signature, inputs and the reference;
 * RunRank.c: one rank's blocks, its check and its timed steps). */
#ifndef DTENSOR_LIB_EXEC_RUNNERINTERNAL_H
#define DTENSOR_LIB_EXEC_RUNNERINTERNAL_H

#include "dtensor-c/Runner.h"
#include "dtensor-rt/Checkpoint.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct DtensorRunner {
  char entry[256]; /* the entry's name (the c-interface wrapper's suffix) */
  bool gpu;        /* the SPMD program runs on the GPU (target cuda): it
                      takes and returns device buffers (boundary=device) */
  char gpuOptions[128];
  MlirContext ctx;
  /* The reference (0) and the SPMD program (1): ExecutionEngines
   * (Runner.c) or a bundle's shared objects (Bundle.c); `call` invokes one
   * with `args` (the results' room, then each argument's descriptor) and
   * `release` frees them. */
  void *programs[2];
  void *entries[2]; /* a bundle's call wrappers */
  bool (*call)(const DtensorRunner *r, bool spmd, void **args);
  void (*release)(DtensorRunner *r);
  DtensorMesh *mesh;
  char meshText[256];
  int numArgs, numResults;
  DtensorRunTensor *args, *results; /* numArgs and numResults of each */
  void **globals;                   /* each argument's global value */
  void **referenceData;  /* each result's first element, once computed */
  void **referenceAlloc; /* and the buffers the reference allocated */
  char **profileOps;     /* what each profiled op is (dtensor.profile_ops) */
  int numProfileOps;
  void **referenceInputs; /* the reference's copies of the arguments (a
                             result may be one of them) */
};

/// Elements as doubles, through the runtime's conversions (every element
/// type the runner accepts is exact in a double).
double dtRunLoad(const void *data, DtrtDtype t, int64_t i);
void dtRunStore(void *data, DtrtDtype t, int64_t i, double v);

/// Whether `t` is a floating-point type.
bool dtRunIsFloat(DtrtDtype t);

/// The number of elements of a shape.
int64_t dtRunCount(int rank, const int64_t *shape);

/// Zeroed room for `elements` elements of `t` (one more, so 0 is fine);
/// NULL, with `outDiag` naming `what` and the size, when it does not fit
/// in this machine's memory or cannot be allocated.
void *dtRunAlloc(const DtensorRunTensor *t, int64_t elements, const char *what,
                 DtensorDiag *outDiag);

/// A memref descriptor of a dense row-major buffer (calloc'ed; NULL when
/// out of memory).
int64_t *dtRunDescriptor(void *data, int rank, const int64_t *shape);

/// Invokes the entry of the SPMD program (`spmd`) or the reference on
/// `argDescs`. Its memref results come back
/// one descriptor after the other; `outData[k]` gets result k's first
/// element and `outAlloc[k]` its buffer, or, when `outData` is NULL, the
/// results are freed. False with `outDiag`.
bool dtRunInvoke(const DtensorRunner *r, bool spmd, int64_t **argDescs,
                 void **outData, void **outAlloc, DtensorDiag *outDiag);

/// The elements of `t`'s padded block (every rank's is the largest).
int64_t dtRunBlockCount(const DtensorRunner *r, const DtensorRunTensor *t);

/// Fills this rank's padded block of `t` from its global value `global`
/// (padding NaN or 1e9; a pending sum's or product's neutral element where
/// the rank does not own it): into `*desc`'s buffer, or a new one with its
/// descriptor when `*desc` is NULL. False with `outDiag`.
bool dtRunFillBlock(const DtensorRunner *r, const DtensorRunTensor *t, int rank,
                    const void *global, int64_t **desc, DtensorDiag *outDiag);

/// Writes the elements of this rank's block of `t` (padding aside) into
/// their places in the global value `global`.
void dtRunPlaceBlock(const DtensorRunner *r, const DtensorRunTensor *t,
                     int rank, const void *block, void *global);

/// Resolves a Partial block of `t` in place (one all_reduce per pending
/// mesh axis, each with its kind), so every rank holds the value. False
/// with `outDiag`.
bool dtRunResolvePartial(const DtensorRunner *r, const DtensorRunTensor *t,
                         void *block, int rank, DtensorDiag *outDiag);

/// Room for the entry's `numArgs` arguments and `numResults` results (at
/// least one), their inputs and the reference's. False with `outDiag`.
bool dtRunAllocSignature(DtensorRunner *r, int numArgs, int numResults,
                         DtensorDiag *outDiag);

/// The deterministic global inputs: small values, integers for integer
/// types (so sums and products stay exact). False with `outDiag`.
bool dtRunMakeInputs(DtensorRunner *r, DtensorDiag *outDiag);

/// The tensor of checkpoint `c` that gives argument `index` (`t`): the one
/// of its name, else the positional arg<index> (written into `positional`;
/// a list of inputs).
const char *dtRunArgumentName(const DtrtCheckpoint *c,
                              const DtensorRunTensor *t, int index,
                              char positional[32]);

/// The signature lines of a bundle's manifest (entry, target, mesh, then
/// "argument|result NAME TYPE SHAPE SPEC" each) from `r`'s signature,
/// malloc'd; NULL with `outDiag` (a name with a space, no memory).
char *dtRunManifestText(const DtensorRunner *r, DtensorDiag *outDiag);

#endif
