/* The differential runner of libdtensor (dtensor-c/Runner.h), in process
 * on one rank: a matmul's signature as the runner reads it, the reference
 * on inputs the caller sets, the rank's run equal to it, a corrupted
 * reference found different, and programs the runner refuses with their
 * reasons; then dtensorRunnerLaunch forking the ranks of a two-device mesh
 * from this process (whose runtime context is a one-rank job's by then),
 * and launches it refuses. */
#include "dtensor-c/Runner.h"
#include "dtensor-c/Dialect.h"
#include "dtensor-c/Passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "Check.h"

static const char kMatmul[] =
    "\"dtensor.mesh\"() {sym_name = \"m\", shape = array<i64: 1>, "
    "axis_names = [\"d\"]} : () -> ()\n"
    "func.func @mm(%a: tensor<4x3xf32> {dtensor.layout = "
    "#dtensor.layout<@m, \"[S(d), R]\">, dtensor.name = \"a\"},\n"
    "              %b: tensor<3x2xf32>) -> tensor<4x2xf32> {\n"
    "  %z = arith.constant 0.0 : f32\n"
    "  %e = tensor.empty() : tensor<4x2xf32>\n"
    "  %i = linalg.fill ins(%z : f32) outs(%e : tensor<4x2xf32>) -> "
    "tensor<4x2xf32>\n"
    "  %c = linalg.matmul ins(%a, %b : tensor<4x3xf32>, tensor<3x2xf32>) "
    "outs(%i : tensor<4x2xf32>) -> tensor<4x2xf32>\n"
    "  return %c : tensor<4x2xf32>\n"
    "}\n";

/* A matmul on two devices, its contraction split: a sum across the ranks
 * (a collective of the runtime). */
static const char kMatmul2[] =
    "\"dtensor.mesh\"() {sym_name = \"m\", shape = array<i64: 2>, "
    "axis_names = [\"d\"]} : () -> ()\n"
    "func.func @mm(%a: tensor<4x4xf32> {dtensor.layout = "
    "#dtensor.layout<@m, \"[R, S(d)]\">},\n"
    "              %b: tensor<4x2xf32> {dtensor.layout = "
    "#dtensor.layout<@m, \"[S(d), R]\">}) -> tensor<4x2xf32> {\n"
    "  %z = arith.constant 0.0 : f32\n"
    "  %e = tensor.empty() : tensor<4x2xf32>\n"
    "  %i = linalg.fill ins(%z : f32) outs(%e : tensor<4x2xf32>) -> "
    "tensor<4x2xf32>\n"
    "  %c = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x2xf32>) "
    "outs(%i : tensor<4x2xf32>) -> tensor<4x2xf32>\n"
    "  return %c : tensor<4x2xf32>\n"
    "}\n";

static const char kNoResult[] =
    "\"dtensor.mesh\"() {sym_name = \"m\", shape = array<i64: 1>, "
    "axis_names = [\"d\"]} : () -> ()\n"
    "func.func @f(%a: tensor<4xf32>) { return }\n";

static DtensorRunner *create(MlirContext ctx, const char *text,
                             const char *entry, DtensorDiag *diag) {
  MlirOperation m =
      dtensorSourceParse(ctx, mlirStringRefCreateFromCString(text),
                         mlirStringRefCreateFromCString("runner-test"));
  CHECK(!mlirOperationIsNull(m));
  diag->message[0] = 0;
  return mlirOperationIsNull(m) ? NULL : dtensorRunnerCreate(m, entry, diag);
}

static MlirLogicalResult quiet(MlirDiagnostic d, void *user) {
  (void)d;
  (void)user;
  return mlirLogicalResultSuccess();
}

static void testMatmul(MlirContext ctx) {
  DtensorDiag diag;
  DtensorRunner *r = create(ctx, kMatmul, NULL, &diag);
  CHECK(r != NULL);
  if (!r) {
    fprintf(stderr, "runner: %s\n", diag.message);
    return;
  }
  CHECK(!strcmp(dtensorRunnerGetEntry(r), "mm"));
  CHECK(dtensorRunnerGetNumArguments(r) == 2);
  CHECK(dtensorRunnerGetNumResults(r) == 1);
  const DtensorRunTensor *a = dtensorRunnerGetArgument(r, 0);
  const DtensorRunTensor *b = dtensorRunnerGetArgument(r, 1);
  const DtensorRunTensor *c = dtensorRunnerGetResult(r, 0);
  CHECK(!strcmp(a->name, "a") && !strcmp(b->name, "arg1"));
  CHECK(!strcmp(c->name, "result0") && c->dtype == DTRT_F32);
  CHECK(a->rank == 2 && a->shape[0] == 4 && a->shape[1] == 3);
  CHECK(a->spec.numAxes[0] == 1 && a->spec.numAxes[1] == 0);
  CHECK(dtensorRunnerGetArgument(r, 2) == NULL);
  CHECK(dtensorRunnerGetReference(r, 0) == NULL);
  float *av = dtensorRunnerGetArgumentData(r, 0);
  float *bv = dtensorRunnerGetArgumentData(r, 1);
  for (int i = 0; i < 12; ++i)
    av[i] = (float)(i + 1);
  for (int i = 0; i < 6; ++i)
    bv[i] = (float)(i % 3) - 1.0f;
  CHECK(dtensorRunnerComputeReference(r, &diag));
  const float *ref = dtensorRunnerGetReference(r, 0);
  CHECK(ref != NULL);
  for (int i = 0; ref && i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      float want = 0;
      for (int k = 0; k < 3; ++k)
        want += av[i * 3 + k] * bv[k * 2 + j];
      CHECK(fabsf(ref[i * 2 + j] - want) < 1e-5f);
    }
  DtensorRankOptions o = {NULL, NULL, 2, NULL, false, NULL};
  DtensorRankReport rep;
  CHECK(dtensorRunnerRunRank(r, 0, &o, &rep, &diag));
  CHECK(rep.compared == 8 && rep.different == 0 && rep.maxAbsError < 1e-5);
  CHECK(rep.steps == 2 && rep.minStepSeconds > 0 &&
        rep.minStepSeconds <= rep.medianStepSeconds);
  /* The program's own buffers during a step: at least its 4x2 f32 result
   * (malloc's usable size may be more), far from the arguments' sizes. */
  CHECK(rep.peakBufferBytes >= 32 && rep.peakBufferBytes < 4096);
  /* A reference that disagrees: the rank says so. */
  ((float *)ref)[3] += 1.0f;
  o.repeat = 0;
  CHECK(dtensorRunnerRunRank(r, 0, &o, &rep, &diag));
  CHECK(rep.compared == 8 && rep.different == 1 && rep.steps == 0);
  CHECK(fabs(rep.maxAbsError - 1.0) < 1e-5);
  /* ... and still times its steps: the other ranks of a job, which cannot
   * know, run theirs and wait for its collectives. */
  o.repeat = 2;
  CHECK(dtensorRunnerRunRank(r, 0, &o, &rep, &diag));
  CHECK(rep.different == 1 && rep.steps == 2);
  o.repeat = 0;
  /* One infinity in the reference neither passes nor widens the tolerance
   * of the other elements (its scale was the largest magnitude: inf). */
  float kept = ref[0];
  ((float *)ref)[0] = INFINITY;
  CHECK(dtensorRunnerRunRank(r, 0, &o, &rep, &diag));
  CHECK(rep.different == 2 && isinf(rep.maxAbsError));
  /* Put back: equal again. */
  ((float *)ref)[0] = kept;
  ((float *)ref)[3] -= 1.0f;
  CHECK(dtensorRunnerRunRank(r, 0, &o, &rep, &diag));
  CHECK(rep.different == 0);
  /* A chosen tolerance: 1e-3 off is different by default, equal within
   * rtol 1e-2, different again within atol 1e-4 alone. */
  ((float *)ref)[5] *= 1.001f;
  CHECK(dtensorRunnerRunRank(r, 0, &o, &rep, &diag));
  CHECK(rep.different == 1);
  DtensorTolerance loose = {1e-2, 0};
  o.tolerance = &loose;
  CHECK(dtensorRunnerRunRank(r, 0, &o, &rep, &diag));
  CHECK(rep.different == 0);
  DtensorTolerance tight = {0, 1e-4};
  o.tolerance = &tight;
  CHECK(dtensorRunnerRunRank(r, 0, &o, &rep, &diag));
  CHECK(rep.different == 1);
  dtensorRunnerDestroy(r);
}

static void testRefused(MlirContext ctx) {
  DtensorDiag diag;
  CHECK(create(ctx, kMatmul, "nope", &diag) == NULL);
  CHECK(strstr(diag.message, "no function 'nope'") != NULL);
  CHECK(create(ctx, kNoResult, NULL, &diag) == NULL);
  CHECK(strstr(diag.message, "returns nothing") != NULL);
  dtensorRunnerDestroy(NULL);
}

static void testLaunch(MlirContext ctx) {
  DtensorDiag diag;
  DtensorRunner *r = create(ctx, kMatmul2, NULL, &diag);
  CHECK(r != NULL);
  if (!r)
    return;
  DtrtLaunchOptions launch = {2, "shm", 30, NULL, 0, 0, NULL, 0};
  DtensorRankOptions o = {NULL, NULL, 0, NULL, false, NULL};
  DtensorRankReport reps[2];
  int code = -1;
  /* Before the reference, and with a count that is not the mesh's. */
  CHECK(!dtensorRunnerLaunch(r, &launch, &o, reps, &code, &diag));
  CHECK(strstr(diag.message, "dtensorRunnerComputeReference") != NULL);
  CHECK(dtensorRunnerComputeReference(r, &diag));
  launch.numRanks = 3;
  CHECK(!dtensorRunnerLaunch(r, &launch, &o, reps, &code, &diag));
  CHECK(strstr(diag.message, "mesh has 2 devices, not 3 ranks") != NULL);
  launch.numRanks = 2;
  /* This process's runtime context is a one-rank job's: the ranks make
   * their own. */
  CHECK(dtrtWorldSize(dtrtProcessContext()) == 1);
  CHECK(dtensorRunnerLaunch(r, &launch, &o, reps, &code, &diag));
  CHECK(code == 0);
  for (int k = 0; k < 2; ++k)
    CHECK(reps[k].compared == 8 && reps[k].different == 0);
  /* A wrong reference: every rank ran and says so. */
  ((float *)dtensorRunnerGetReference(r, 0))[7] += 1.0f;
  CHECK(dtensorRunnerLaunch(r, &launch, &o, reps, &code, &diag));
  CHECK(reps[0].different == 1 && reps[1].different == 1);
  /* A rank that cannot run (its checkpoint is missing): the launch fails
   * and names it. */
  o.loadDir = "/nonexistent/dtensor-runner-test";
  CHECK(!dtensorRunnerLaunch(r, &launch, &o, reps, &code, &diag));
  CHECK(code == 1 && strstr(diag.message, "rank ") != NULL);
  dtensorRunnerDestroy(r);
}

/* The SPMD program compiled for the GPU (PTX, so no ptxas is needed): the
 * same signature; where a GPU is present, the rank's run on it equals the
 * reference (elsewhere the run is left to scripts/gpu-check.sh). */
static void testGpu(MlirContext ctx) {
  DtensorDiag diag = {0};
  MlirOperation m =
      dtensorSourceParse(ctx, mlirStringRefCreateFromCString(kMatmul2),
                         mlirStringRefCreateFromCString("runner-test"));
  CHECK(dtensorRunnerCreateForTarget(m, NULL, "tpu", "", &diag) == NULL);
  CHECK(strstr(diag.message, "unknown target") != NULL);
  m = dtensorSourceParse(ctx, mlirStringRefCreateFromCString(kMatmul2),
                         mlirStringRefCreateFromCString("runner-test"));
  DtensorRunner *r =
      dtensorRunnerCreateForTarget(m, NULL, "cuda", "format=isa", &diag);
  CHECK(r != NULL);
  if (!r) {
    fprintf(stderr, "runner (cuda): %s\n", diag.message);
    return;
  }
  CHECK(dtensorRunnerGetNumArguments(r) == 2);
  CHECK(dtensorRunnerComputeReference(r, &diag));
  dtensorRunnerDestroy(r);
  m = dtensorSourceParse(ctx, mlirStringRefCreateFromCString(kMatmul),
                         mlirStringRefCreateFromCString("runner-test"));
  r = dtensorRunnerCreateForTarget(m, NULL, "cuda", "format=isa", &diag);
  CHECK(r != NULL && dtensorRunnerComputeReference(r, &diag));
  char why[512];
  if (r && dtrtCudaProbe(why, sizeof(why))) {
    DtensorRankOptions o = {NULL, NULL, 3, NULL, false, NULL};
    DtensorRankReport rep;
    CHECK(dtensorRunnerRunRank(r, 0, &o, &rep, &diag));
    CHECK(rep.compared == 8 && rep.different == 0 && rep.steps == 3);
  } else {
    printf("runner-test: no GPU here, the GPU run is not checked (%s)\n", why);
  }
  dtensorRunnerDestroy(r);
}

int main(void) {
  /* One rank of a one-rank job, as a launcher would say. */
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  MlirContext ctx = dtensorContextCreate();
  dtensorRegisterUpstreamPasses();
  mlirContextAttachDiagnosticHandler(ctx, quiet, NULL, NULL);
  testMatmul(ctx);
  testRefused(ctx);
  testLaunch(ctx);
  testGpu(ctx);
  mlirContextDestroy(ctx);
  printf("runner-test: %d passed, %d failed\n", checks - failures, failures);
  return failures != 0;
}
