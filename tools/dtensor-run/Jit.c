/* dtensor-run PROG.mlir: compiles an annotated program twice with the
 * ExecutionEngine — as the single-device reference (annotations dropped) and
 * with dtensor-spmd for the mesh — then runs the SPMD program on N ranks
 * (forked after compiling, so it is compiled once) with inputs built from
 * one deterministic global array per argument, each rank getting its block
 * under its argument's layout, and checks every rank's result block against
 * the reference (rtol 1e-4). f32 tensors, one result (docs/runtime.md). */
#include "Run.h"

#include "dtensor-c/Dialect.h"
#include "dtensor-c/Passes.h"
#include "dtensor-rt/Runtime.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/ExecutionEngine.h"
#include "mlir-c/Pass.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 16

typedef struct Tensor {
  int rank;
  int64_t shape[DTENSOR_MAX_TENSOR_RANK]; /* global */
  DtensorShardingSpec spec;
  bool sharded; /* has a layout in the partitioned signature */
} Tensor;

typedef struct Run {
  const char *entry;
  char ciface[300];
  MlirExecutionEngine spmd;
  DtensorMesh *mesh;
  int numArgs;
  Tensor args[MAX_ARGS];
  Tensor result;
  float *globals[MAX_ARGS];
  float *reference;
  int64_t referenceCount;
} Run;

static void toStderr(MlirStringRef s, void *user) {
  (void)user;
  fwrite(s.data, 1, s.length, stderr);
}

static MlirLogicalResult report(MlirDiagnostic d, void *user) {
  (void)user;
  mlirLocationPrint(mlirDiagnosticGetLocation(d), toStderr, NULL);
  fputs(": ", stderr);
  mlirDiagnosticPrint(d, toStderr, NULL);
  fputs("\n", stderr);
  return mlirLogicalResultSuccess();
}

static bool nameIs(MlirOperation op, const char *name) {
  return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)),
                            mlirStringRefCreateFromCString(name));
}

static MlirOperation findEntry(MlirOperation module, const char *entry) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (!nameIs(op, "func.func") ||
        mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0))))
      continue;
    MlirStringRef name = mlirStringAttrGetValue(mlirOperationGetAttributeByName(
        op, mlirStringRefCreateFromCString("sym_name")));
    if (!entry || mlirStringRefEqual(name, mlirStringRefCreateFromCString(entry)))
      return op;
  }
  return (MlirOperation){NULL};
}

/* The reference: the program without its dtensor ops. */
typedef struct Strip {
  MlirOperation *ops;
  int count, cap;
} Strip;

static MlirWalkResult collectDtensor(MlirOperation op, void *user) {
  Strip *s = user;
  if (nameIs(op, "dtensor.annotate") || nameIs(op, "dtensor.redistribute")) {
    if (s->count == s->cap) {
      s->cap = s->cap ? 2 * s->cap : 64;
      s->ops = realloc(s->ops, sizeof(MlirOperation) * (size_t)s->cap);
    }
    s->ops[s->count++] = op;
  }
  return MlirWalkResultAdvance;
}

static bool runPipeline(MlirContext ctx, MlirOperation module, bool spmd,
                        bool toLLVM) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  DtensorDiag diag;
  bool ok = true;
  if (spmd)
    ok = mlirLogicalResultIsSuccess(dtensorAddSpmdPipeline(
        opm, mlirStringRefCreateFromCString(""), &diag));
  if (ok && toLLVM)
    ok = mlirLogicalResultIsSuccess(dtensorAddToLLVMPipeline(opm, &diag));
  if (!ok)
    fprintf(stderr, "dtensor-run: %s\n", diag.message);
  ok = ok && mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, module));
  mlirPassManagerDestroy(pm);
  return ok;
}

static float inputValue(int arg, int64_t linear) {
  return (float)((linear * 37 + arg * 11) % 101) / 101.0f - 0.5f;
}

static int64_t *descriptor(float *data, int rank, const int64_t *shape) {
  int64_t *d = calloc((size_t)(3 + 2 * rank), sizeof(int64_t));
  d[0] = d[1] = (int64_t)(intptr_t)data;
  d[2] = 0;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    d[3 + i] = shape[i];
    d[3 + rank + i] = stride;
    stride *= shape[i];
  }
  return d;
}

static int64_t product(int rank, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    n *= shape[i];
  return n;
}

static int64_t ravel(int rank, const int64_t *shape, const int64_t *idx) {
  int64_t l = 0;
  for (int i = 0; i < rank; ++i)
    l = l * shape[i] + idx[i];
  return l;
}

static void unravel(int64_t l, int rank, const int64_t *shape, int64_t *idx) {
  for (int i = rank - 1; i >= 0; --i) {
    idx[i] = l % shape[i];
    l /= shape[i];
  }
}

/* Invokes `fn` (a c-interface function with one memref result) on `args`;
 * returns the result's descriptor. */
static int64_t *invoke(MlirExecutionEngine jit, const char *fn,
                       int64_t **argDescs, int numArgs, int resultRank) {
  int64_t *result = calloc((size_t)(3 + 2 * resultRank), sizeof(int64_t));
  void *slots[MAX_ARGS + 1];
  void *ptrs[MAX_ARGS + 1];
  ptrs[0] = result;
  slots[0] = &ptrs[0];
  for (int i = 0; i < numArgs; ++i) {
    ptrs[i + 1] = argDescs[i];
    slots[i + 1] = &ptrs[i + 1];
  }
  if (mlirLogicalResultIsFailure(mlirExecutionEngineInvokePacked(
          jit, mlirStringRefCreateFromCString(fn), slots))) {
    fprintf(stderr, "dtensor-run: cannot call '%s'\n", fn);
    free(result);
    return NULL;
  }
  return result;
}

static bool layoutOf(const Run *r, const Tensor *t, DtensorLayout *out) {
  DtensorShardingSpec spec = t->spec;
  if (!t->sharded)
    dtensorShardingSpecInitReplicated(t->rank, &spec);
  return dtensorLayoutInit(r->mesh, &spec, t->rank, t->shape, DTENSOR_F32, out,
                           NULL);
}

static int runRank(int rank, void *arg) {
  Run *r = arg;
  int64_t *descs[MAX_ARGS];
  float *blocks[MAX_ARGS];
  for (int a = 0; a < r->numArgs; ++a) {
    DtensorLayout l;
    layoutOf(r, &r->args[a], &l);
    int64_t padded[DTENSOR_MAX_TENSOR_RANK], real[DTENSOR_MAX_TENSOR_RANK];
    dtensorLayoutGetMaxLocalShape(&l, padded);
    dtensorLayoutGetLocalShape(&l, rank, real);
    int64_t n = product(l.rank, padded);
    blocks[a] = calloc((size_t)n + 1, sizeof(float));
    for (int64_t e = 0; e < n; ++e) {
      int64_t idx[DTENSOR_MAX_TENSOR_RANK], g[DTENSOR_MAX_TENSOR_RANK];
      unravel(e, l.rank, padded, idx);
      bool inside = true;
      for (int d = 0; d < l.rank; ++d)
        inside &= idx[d] < real[d];
      if (!inside) {
        /* Padding holds NaN: a program that let it into a result would
         * differ from the reference. */
        blocks[a][e] = NAN;
        continue;
      }
      dtensorLayoutLocalToGlobal(&l, rank, idx, g);
      blocks[a][e] = r->globals[a][ravel(l.rank, l.shape, g)];
    }
    descs[a] = descriptor(blocks[a], l.rank, padded);
  }
  int64_t *res = invoke(r->spmd, r->ciface, descs, r->numArgs, r->result.rank);
  if (!res)
    exit(1);
  DtensorLayout l;
  layoutOf(r, &r->result, &l);
  int64_t padded[DTENSOR_MAX_TENSOR_RANK], real[DTENSOR_MAX_TENSOR_RANK];
  dtensorLayoutGetMaxLocalShape(&l, padded);
  dtensorLayoutGetLocalShape(&l, rank, real);
  const float *out = (const float *)(intptr_t)res[1] + res[2];
  double maxErr = 0;
  int64_t bad = 0, compared = 0;
  for (int64_t e = 0; e < product(l.rank, padded); ++e) {
    int64_t idx[DTENSOR_MAX_TENSOR_RANK], g[DTENSOR_MAX_TENSOR_RANK];
    unravel(e, l.rank, padded, idx);
    bool inside = true;
    for (int d = 0; d < l.rank; ++d)
      inside &= idx[d] < real[d];
    if (!inside)
      continue;
    dtensorLayoutLocalToGlobal(&l, rank, idx, g);
    double want = r->reference[ravel(l.rank, l.shape, g)], got = out[e];
    double err = fabs(got - want);
    if (isnan(err))
      err = INFINITY;
    if (err > maxErr)
      maxErr = err;
    bad += err > 1e-4 * fabs(want) + 1e-5;
    ++compared;
  }
  printf("rank %d: %lld result elements, %s the single-device run (max abs "
         "error %.3g)\n", rank, (long long)compared,
         bad ? "DIFFERENT from" : "equal to", maxErr);
  fflush(stdout);
  exit(bad ? 1 : 0); /* runs the runtime's finalize */
}

static bool readSignature(Run *r, MlirOperation func) {
  MlirAttribute args = mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("arg_attrs"));
  MlirAttribute results = mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("res_attrs"));
  MlirType fnType = mlirTypeAttrGetValue(mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("function_type")));
  r->numArgs = (int)mlirFunctionTypeGetNumInputs(fnType);
  if (r->numArgs > MAX_ARGS || mlirFunctionTypeGetNumResults(fnType) != 1) {
    fprintf(stderr, "dtensor-run: the entry must take at most %d tensors and "
            "return one\n", MAX_ARGS);
    return false;
  }
  for (int k = 0; k <= r->numArgs; ++k) {
    bool isResult = k == r->numArgs;
    Tensor *t = isResult ? &r->result : &r->args[k];
    MlirType type = isResult ? mlirFunctionTypeGetResult(fnType, 0)
                             : mlirFunctionTypeGetInput(fnType, k);
    if (!mlirTypeIsARankedTensor(type) ||
        !mlirTypeIsAF32(mlirShapedTypeGetElementType(type))) {
      fprintf(stderr, "dtensor-run: the entry's %s %d is not an f32 tensor; "
              "only f32 tensors are run so far\n",
              isResult ? "result" : "argument", isResult ? 0 : k);
      return false;
    }
    MlirAttribute list = isResult ? results : args;
    MlirAttribute dict = mlirAttributeIsNull(list)
                             ? list
                             : mlirArrayAttrGetElement(list, isResult ? 0 : k);
    MlirAttribute global = mlirAttributeIsNull(dict)
                               ? dict
                               : mlirDictionaryAttrGetElementByName(
                                     dict, mlirStringRefCreateFromCString(
                                               "dtensor.global_shape"));
    MlirAttribute layout = mlirAttributeIsNull(dict)
                               ? dict
                               : mlirDictionaryAttrGetElementByName(
                                     dict, mlirStringRefCreateFromCString(
                                               "dtensor.layout"));
    t->rank = (int)mlirShapedTypeGetRank(type);
    for (int d = 0; d < t->rank; ++d)
      t->shape[d] = mlirAttributeIsNull(global)
                        ? mlirShapedTypeGetDimSize(type, d)
                        : mlirDenseI64ArrayGetElement(global, d);
    t->sharded = !mlirAttributeIsNull(layout);
    if (t->sharded) {
      DtensorLayoutAttrParts parts;
      DtensorDiag diag;
      if (!dtensorLayoutAttrGetParts(layout, &parts) ||
          !dtensorShardingSpecParse(parts.spec, r->mesh, &t->spec, &diag)) {
        fprintf(stderr, "dtensor-run: a layout of the entry does not read\n");
        return false;
      }
    }
  }
  return true;
}

static MlirOperation findMesh(MlirOperation module) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (nameIs(op, "dtensor.mesh"))
      return op;
  return (MlirOperation){NULL};
}

static void registerRuntime(MlirExecutionEngine jit) {
  static const struct {
    const char *name;
    void *fn;
  } kSymbols[] = {
      {"dtrt_mlir_collective_f32", (void *)dtrt_mlir_collective_f32},
      {"dtrt_mlir_collective_f64", (void *)dtrt_mlir_collective_f64},
      {"dtrt_mlir_collective_f16", (void *)dtrt_mlir_collective_f16},
      {"dtrt_mlir_collective_bf16", (void *)dtrt_mlir_collective_bf16},
      {"dtrt_mlir_collective_i32", (void *)dtrt_mlir_collective_i32},
      {"dtrt_mlir_collective_i64", (void *)dtrt_mlir_collective_i64},
      {"dtrt_mlir_permute_f32", (void *)dtrt_mlir_permute_f32},
      {"dtrt_mlir_permute_f64", (void *)dtrt_mlir_permute_f64},
      {"dtrt_mlir_permute_f16", (void *)dtrt_mlir_permute_f16},
      {"dtrt_mlir_permute_bf16", (void *)dtrt_mlir_permute_bf16},
      {"dtrt_mlir_permute_i32", (void *)dtrt_mlir_permute_i32},
      {"dtrt_mlir_permute_i64", (void *)dtrt_mlir_permute_i64},
      {"dtrt_mlir_mesh_coord", (void *)dtrt_mlir_mesh_coord},
  };
  for (size_t k = 0; k < sizeof(kSymbols) / sizeof(kSymbols[0]); ++k)
    mlirExecutionEngineRegisterSymbol(
        jit, mlirStringRefCreateFromCString(kSymbols[k].name), kSymbols[k].fn);
}

int dtRunMlir(const char *path, const char *entry, int n, const char *backend,
              const char *timeout) {
  if (strcmp(backend, "shm")) {
    fprintf(stderr, "dtensor-run: MLIR programs run on the shm backend so "
            "far\n");
    return 2;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "dtensor-run: cannot open '%s': %s\n", path,
            strerror(errno));
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)size + 1);
  size_t got = fread(text, 1, (size_t)size, f);
  fclose(f);
  text[got] = '\0';
  MlirContext ctx = dtensorContextCreate();
  dtensorRegisterUpstreamPasses();
  mlirContextAttachDiagnosticHandler(ctx, report, NULL, NULL);
  MlirOperation spmd = dtensorSourceParse(
      ctx, (MlirStringRef){text, got}, mlirStringRefCreateFromCString(path));
  free(text);
  if (mlirOperationIsNull(spmd))
    return 1;
  static Run r;
  r.entry = entry;
  MlirOperation func = findEntry(spmd, entry);
  MlirOperation meshOp = findMesh(spmd);
  if (mlirOperationIsNull(func) || mlirOperationIsNull(meshOp)) {
    fprintf(stderr, "dtensor-run: '%s' has no %s\n", path,
            mlirOperationIsNull(func) ? "entry function" : "dtensor.mesh");
    return 1;
  }
  MlirStringRef fname = mlirStringAttrGetValue(mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("sym_name")));
  /* mlirExecutionEngineInvokePacked adds the "_mlir_ciface_" itself. */
  snprintf(r.ciface, sizeof(r.ciface), "%.*s", (int)fname.length, fname.data);
  DtensorDiag diag;
  r.mesh = dtensorMeshCreateFromOp(meshOp, &diag);
  if (!r.mesh || dtensorMeshGetNumDevices(r.mesh) != n) {
    fprintf(stderr, "dtensor-run: the program's mesh has %lld devices; run "
            "it with -n %lld\n",
            r.mesh ? (long long)dtensorMeshGetNumDevices(r.mesh) : 0LL,
            r.mesh ? (long long)dtensorMeshGetNumDevices(r.mesh) : 0LL);
    return 2;
  }
  /* The reference: a copy without annotations, to LLVM. */
  MlirOperation ref = mlirOperationClone(spmd);
  Strip strip = {NULL, 0, 0};
  mlirOperationWalk(ref, collectDtensor, &strip, MlirWalkPreOrder);
  for (int k = 0; k < strip.count; ++k) {
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(strip.ops[k], 0),
                                  mlirOperationGetOperand(strip.ops[k], 0));
    mlirOperationDestroy(strip.ops[k]);
  }
  free(strip.ops);
  MlirOperation refFunc = findEntry(ref, entry);
  mlirOperationSetDiscardableAttributeByName(
      refFunc, mlirStringRefCreateFromCString("llvm.emit_c_interface"),
      mlirUnitAttrGet(ctx));
  mlirOperationSetDiscardableAttributeByName(
      func, mlirStringRefCreateFromCString("llvm.emit_c_interface"),
      mlirUnitAttrGet(ctx));
  if (!runPipeline(ctx, ref, false, true))
    return 1;
  /* The SPMD program: partitioned (its signature read), then to LLVM. */
  if (!runPipeline(ctx, spmd, true, false) || !readSignature(&r, findEntry(spmd, entry)))
    return 1;
  if (!runPipeline(ctx, spmd, false, true))
    return 1;
  /* Bufferization may copy buffers with memrefCopy, from MLIR's C runner
   * utilities. */
  MlirStringRef libs[1] = {mlirStringRefCreateFromCString(
      DTENSOR_MLIR_LIB_DIR "/libmlir_c_runner_utils.so")};
  MlirExecutionEngine refJit = mlirExecutionEngineCreate(
      mlirModuleFromOperation(ref), 2, 1, libs, false, false);
  r.spmd = mlirExecutionEngineCreate(mlirModuleFromOperation(spmd), 2, 1, libs,
                                     false, false);
  if (mlirExecutionEngineIsNull(refJit) || mlirExecutionEngineIsNull(r.spmd)) {
    fprintf(stderr, "dtensor-run: the ExecutionEngine did not compile the "
            "program\n");
    return 1;
  }
  registerRuntime(r.spmd);

  /* Inputs and the reference result. */
  int64_t *descs[MAX_ARGS];
  for (int a = 0; a < r.numArgs; ++a) {
    int64_t count = product(r.args[a].rank, r.args[a].shape);
    r.globals[a] = malloc(sizeof(float) * (size_t)(count + 1));
    /* The reference gets its own copy: bufferized code may write its
     * arguments in place. */
    float *copy = malloc(sizeof(float) * (size_t)(count + 1));
    for (int64_t e = 0; e < count; ++e)
      r.globals[a][e] = copy[e] = inputValue(a, e);
    descs[a] = descriptor(copy, r.args[a].rank, r.args[a].shape);
  }
  int64_t *res = invoke(refJit, r.ciface, descs, r.numArgs, r.result.rank);
  if (!res)
    return 1;
  r.reference = (float *)(intptr_t)res[1] + res[2];
  printf("dtensor-run: %s compiled for %d ranks; single-device reference "
         "computed\n", path, n);
  fflush(stdout);
  int status = dtRunLaunch(n, backend, timeout, runRank, &r);
  if (!status)
    printf("dtensor-run: every rank's result equals the single-device run\n");
  return status;
}
