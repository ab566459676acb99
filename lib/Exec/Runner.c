/* The differential runner (dtensor-c/Runner.h): compiles an annotated
 * program twice with the ExecutionEngine — the single-device reference and
 * the dtensor-spmd program — and reads the entry's signature; the runner's
 * `call` invokes them. What needs no MLIR (inputs, the reference, buffers)
 * is in RunData.c, one rank's run in RunRank.c. */
#include "RunnerInternal.h"

#include "Dialect/DialectInternal.h"
#include "Support/Support.h"
#include "Transforms/Lower/RuntimeCall.h"

#include "dtensor-c/Dialect.h"
#include "dtensor-c/Passes.h"
#include "dtensor-c/Target.h"
#include "dtensor-rt/Checkpoint.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/ExecutionEngine.h"
#include "mlir-c/Pass.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- compiling ----------------------------------------------------------- */

static MlirOperation findEntry(MlirOperation module, const char *entry) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (!dtIsOp(op, "func.func") ||
        mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0))))
      continue;
    MlirStringRef name = mlirStringAttrGetValue(mlirOperationGetAttributeByName(
        op, mlirStringRefCreateFromCString("sym_name")));
    if (!entry ||
        mlirStringRefEqual(name, mlirStringRefCreateFromCString(entry)))
      return op;
  }
  return (MlirOperation){NULL};
}

static MlirOperation findMesh(MlirOperation module) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (dtIsOp(op, DT_OP_MESH))
      return op;
  return (MlirOperation){NULL};
}

/* Where runPipeline lowers the program to after `pipeline` (the reference:
 * for the CPU, never profiled). */
typedef enum Lowering {
  LOWER_NONE,
  LOWER_CPU,
  LOWER_GPU,
  LOWER_REFERENCE
} Lowering;

/* `options` without the options that start with `drop`. */
static void withoutOption(const char *options, const char *drop, char *out,
                          size_t size) {
  DtBuf b = dtBufInit(out, size);
  const char *p = options;
  while (*p) {
    size_t n = strcspn(p, " ");
    if (n && strncmp(p, drop, strlen(drop)))
      dtBufPrintf(&b, "%s%.*s", b.length ? " " : "", (int)n, p);
    p += n + (p[n] == ' ');
  }
  out[b.length < size ? b.length : size - 1] = '\0';
}

/* The runner's CPU options without profile=...: the reference is not
 * profiled (its events would be the parent's, and in the way). */
static void referenceOptions(const char *options, char *out, size_t size) {
  withoutOption(options, "profile", out, size);
}

/* threads=auto among the CPU options: threads=true when each of the mesh's
 * ranks will have more than one compute thread (DTENSOR_THREADS, else the
 * cores this process may run on shared among them, as the runtime counts)
 * and the build has LLVM's OpenMP runtime; else no threads. */
static void resolveThreads(DtensorRunner *r) {
  if (r->gpu || !strstr(r->gpuOptions, "threads=auto"))
    return;
  char rest[sizeof(r->gpuOptions)];
  withoutOption(r->gpuOptions, "threads=auto", rest, sizeof(rest));
  long perRank = 1;
#ifdef DTENSOR_LIBOMP
  const char *t = getenv("DTENSOR_THREADS");
  long cores = dtCoresToRunOn();
  perRank =
      t && *t ? strtol(t, NULL, 10) : cores / dtensorMeshGetNumDevices(r->mesh);
#endif
  DtBuf b = dtBufInit(r->gpuOptions, sizeof(r->gpuOptions));
  dtBufPrintf(&b, "%s%s%s", rest, *rest && perRank > 1 ? " " : "",
              perRank > 1 ? "threads=true" : "");
}

/* Runs `pipeline` (dtensorPassManagerAddPipeline's text), then
 * dtensor-to-llvm (LOWER_CPU) or dtensor-to-nvvm with device buffers at
 * the boundary and the runner's GPU options (LOWER_GPU) on `module`; the
 * passes' errors go to the context's diagnostic handler. */
static bool runPipeline(const DtensorRunner *r, MlirOperation module,
                        const char *pipeline, Lowering lower,
                        DtensorDiag *outDiag) {
  MlirPassManager pm = mlirPassManagerCreate(mlirOperationGetContext(module));
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  bool ok = mlirLogicalResultIsSuccess(dtensorPassManagerAddPipeline(
      opm, mlirStringRefCreateFromCString(pipeline), outDiag));
  char gpuOptions[160];
  snprintf(gpuOptions, sizeof(gpuOptions), "boundary=device %s",
           r ? r->gpuOptions : "");
  char cpuOptions[160];
  referenceOptions(r && !r->gpu ? r->gpuOptions : "", cpuOptions,
                   sizeof(cpuOptions));
  if (ok && (lower == LOWER_CPU || lower == LOWER_REFERENCE))
    ok = mlirLogicalResultIsSuccess(dtensorAddToLLVMPipelineWithOptions(
        opm,
        mlirStringRefCreateFromCString(lower == LOWER_REFERENCE ? cpuOptions
                                       : r && !r->gpu           ? r->gpuOptions
                                                                : ""),
        outDiag));
  else if (ok && lower == LOWER_GPU)
    ok = mlirLogicalResultIsSuccess(dtensorAddToNVVMPipeline(
        opm, mlirStringRefCreateFromCString(gpuOptions), outDiag));
  const char *target = lower == LOWER_CPU || lower == LOWER_REFERENCE
                           ? "dtensor-to-llvm"
                       : lower == LOWER_GPU ? "dtensor-to-nvvm"
                                            : "";
  if (ok && mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, module)))
    ok = dtDiag(outDiag, -1, "%s%s%s failed (its errors are above)", pipeline,
                *pipeline && *target ? ", " : "", target);
  mlirPassManagerDestroy(pm);
  return ok;
}

/* The entry's argument or result `pos` (`isResult`) into `t`. */
static bool readTensor(DtensorRunner *r, MlirOperation func, bool isResult,
                       int pos, DtensorRunTensor *t, DtensorDiag *outDiag) {
  MlirType fnType = mlirTypeAttrGetValue(mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("function_type")));
  MlirType type = isResult ? mlirFunctionTypeGetResult(fnType, pos)
                           : mlirFunctionTypeGetInput(fnType, pos);
  int64_t code = 0;
  if (!mlirTypeIsARankedTensor(type) ||
      !dtRtTypeName(mlirShapedTypeGetElementType(type), &code))
    return dtDiag(outDiag, -1,
                  "the entry's %s %d is not a ranked tensor of f32, f64, "
                  "f16, bf16, f8E4M3FN, f8E5M2, i32, i64, i8, i16, i1 or "
                  "ui8, the types dtensor-run builds inputs for and "
                  "compares",
                  isResult ? "result" : "argument", pos);
  t->dtype = (DtrtDtype)code;
  MlirAttribute list = mlirOperationGetAttributeByName(
      func,
      mlirStringRefCreateFromCString(isResult ? "res_attrs" : "arg_attrs"));
  MlirAttribute dict =
      mlirAttributeIsNull(list) ? list : mlirArrayAttrGetElement(list, pos);
  MlirAttribute global = {NULL}, layout = {NULL}, name = {NULL};
  if (!mlirAttributeIsNull(dict)) {
    global = mlirDictionaryAttrGetElementByName(
        dict, mlirStringRefCreateFromCString(DT_ATTR_GLOBAL_SHAPE));
    layout = mlirDictionaryAttrGetElementByName(
        dict, mlirStringRefCreateFromCString(DT_ATTR_LAYOUT));
    name = mlirDictionaryAttrGetElementByName(
        dict, mlirStringRefCreateFromCString(DT_ATTR_NAME));
  }
  if (!mlirAttributeIsNull(name) && mlirAttributeIsAString(name)) {
    MlirStringRef v = mlirStringAttrGetValue(name);
    snprintf(t->name, sizeof(t->name), "%.*s", (int)v.length, v.data);
  } else {
    snprintf(t->name, sizeof(t->name), "%s%d", isResult ? "result" : "arg",
             pos);
  }
  t->rank = (int)mlirShapedTypeGetRank(type);
  for (int d = 0; d < t->rank; ++d)
    t->shape[d] = mlirAttributeIsNull(global)
                      ? mlirShapedTypeGetDimSize(type, d)
                      : mlirDenseI64ArrayGetElement(global, d);
  dtensorShardingSpecInitReplicated(t->rank, &t->spec);
  if (mlirAttributeIsNull(layout))
    return true;
  DtensorLayoutAttrParts parts;
  DtensorDiag diag;
  if (!dtensorLayoutAttrGetParts(layout, &parts) ||
      !dtensorShardingSpecParse(parts.spec, r->mesh, &t->spec, &diag))
    return dtDiag(outDiag, -1, "the layout of the entry's %s %d does not read",
                  isResult ? "result" : "argument", pos);
  return true;
}

/* The partitioned entry's signature: global shapes, layouts and names. */
static bool readSignature(DtensorRunner *r, MlirOperation func,
                          DtensorDiag *outDiag) {
  MlirType fnType = mlirTypeAttrGetValue(mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("function_type")));
  if (!dtRunAllocSignature(r, (int)mlirFunctionTypeGetNumInputs(fnType),
                           (int)mlirFunctionTypeGetNumResults(fnType), outDiag))
    return false;
  for (int i = 0; i < r->numArgs; ++i)
    if (!readTensor(r, func, false, i, &r->args[i], outDiag))
      return false;
  for (int k = 0; k < r->numResults; ++k)
    if (!readTensor(r, func, true, k, &r->results[k], outDiag))
      return false;
  return true;
}

/* The runtime's functions, which compiled programs call, for the JIT. */
static void registerRuntime(MlirExecutionEngine jit) {
  static const struct {
    const char *name;
    void *fn;
  } kSymbols[] = {
#define DT_RUN_TYPED(suffix, code)                                             \
  {"dtrt_mlir_collective_" #suffix, (void *)dtrt_mlir_collective_##suffix},    \
      {"dtrt_mlir_permute_" #suffix, (void *)dtrt_mlir_permute_##suffix},      \
      {"dtrt_mlir_collective_start_" #suffix,                                  \
       (void *)dtrt_mlir_collective_start_##suffix},                           \
      {"dtrt_mlir_wait_" #suffix, (void *)dtrt_mlir_wait_##suffix},
      DTRT_TYPED_SUFFIXES(DT_RUN_TYPED)
#undef DT_RUN_TYPED
          {"dtrt_mlir_mesh_coord", (void *)dtrt_mlir_mesh_coord},
      {"dtrt_mlir_init", (void *)dtrt_mlir_init},
      {"dtrt_profile_begin", (void *)dtrt_profile_begin},
      {"dtrt_profile_end", (void *)dtrt_profile_end},
      {"_mlir_memref_to_llvm_alloc", (void *)_mlir_memref_to_llvm_alloc},
      {"_mlir_memref_to_llvm_aligned_alloc",
       (void *)_mlir_memref_to_llvm_aligned_alloc},
      {"_mlir_memref_to_llvm_free", (void *)_mlir_memref_to_llvm_free},
      {"memrefCopy", (void *)memrefCopy},
      {"mgpuStreamCreate", (void *)mgpuStreamCreate},
      {"mgpuStreamDestroy", (void *)mgpuStreamDestroy},
      {"mgpuStreamSynchronize", (void *)mgpuStreamSynchronize},
      {"mgpuMemAlloc", (void *)mgpuMemAlloc},
      {"mgpuMemFree", (void *)mgpuMemFree},
      {"mgpuMemcpy", (void *)mgpuMemcpy},
      {"mgpuModuleLoad", (void *)mgpuModuleLoad},
      {"mgpuModuleLoadJIT", (void *)mgpuModuleLoadJIT},
      {"mgpuModuleUnload", (void *)mgpuModuleUnload},
      {"mgpuModuleGetFunction", (void *)mgpuModuleGetFunction},
      {"mgpuLaunchKernel", (void *)mgpuLaunchKernel},
#define DT_CONTRACT_SYMBOL(a, b, c)                                            \
  {"dtrt_mlir_contract_" #a "_" #b "_" #c,                                     \
   (void *)dtrt_mlir_contract_##a##_##b##_##c},
      DTRT_CONTRACT_TYPES(DT_CONTRACT_SYMBOL)
#undef DT_CONTRACT_SYMBOL
  };
  for (size_t k = 0; k < sizeof(kSymbols) / sizeof(kSymbols[0]); ++k)
    mlirExecutionEngineRegisterSymbol(
        jit, mlirStringRefCreateFromCString(kSymbols[k].name), kSymbols[k].fn);
}

/* The runner's `call` on the ExecutionEngines: the packed interface takes
 * a pointer to each argument. */
static bool jitCall(const DtensorRunner *r, bool spmd, void **args) {
  int n = r->numArgs + 1;
  void **slots = calloc((size_t)n, sizeof(void *));
  if (!slots)
    return false;
  for (int i = 0; i < n; ++i)
    slots[i] = &args[i];
  MlirExecutionEngine jit = {r->programs[spmd ? 1 : 0]};
  bool ok = mlirLogicalResultIsSuccess(mlirExecutionEngineInvokePacked(
      jit, mlirStringRefCreateFromCString(r->entry), slots));
  free(slots);
  return ok;
}

static void jitRelease(DtensorRunner *r) {
  for (int i = 0; i < 2; ++i)
    if (r->programs[i]) {
      MlirExecutionEngine jit = {r->programs[i]};
      mlirExecutionEngineDestroy(jit);
    }
}

/* A program with loops in threads (threads=true among the CPU options)
 * calls LLVM's OpenMP runtime, which the JIT loads. */
static MlirExecutionEngine jitCompile(const DtensorRunner *r,
                                      MlirOperation module) {
  int numLibs = 0;
  MlirStringRef libs[1];
#ifdef DTENSOR_LIBOMP
  if (strstr(r->gpuOptions, "threads=true"))
    libs[numLibs++] = mlirStringRefCreateFromCString(DTENSOR_LIBOMP);
#endif
  /* LLVM's perf listener (Debian's LLVM has it) writes a jitdump of every
   * JIT-compiled program to $JITDUMPDIR/.debug/jit, else ~/.debug/jit, and
   * never removes it (a day of test runs here: about 1 GB). Unless the user
   * asks for it (JITDUMPDIR set, for `perf inject --jit`), it goes to a
   * private directory removed at once: the listener, one per process and
   * made with the first engine, keeps its file open and writes to it
   * unlinked until the process ends. */
  static bool dumpPlaced;
  char dumpDir[4096] = "";
  if (!dumpPlaced && !getenv("JITDUMPDIR") &&
      dtMakeTempDir("dtensor-jit", dumpDir, sizeof(dumpDir)))
    setenv("JITDUMPDIR", dumpDir, 1);
  dumpPlaced = true;
  MlirExecutionEngine jit = mlirExecutionEngineCreate(
      mlirModuleFromOperation(module), 2, numLibs, libs, false, false);
  if (dumpDir[0]) {
    unsetenv("JITDUMPDIR");
    dtRemoveTree(dumpDir);
  }
  if (!mlirExecutionEngineIsNull(jit))
    registerRuntime(jit);
  return jit;
}

/* The entry and the mesh of `module` (a shard-dialect or GSPMD program is
 * imported first). */
static bool findEntryAndMesh(DtensorRunner *r, MlirOperation module,
                             const char *entry, DtensorDiag *outDiag) {
  if (mlirOperationIsNull(findMesh(module)) &&
      !runPipeline(NULL, module, "dtensor-import-shard, dtensor-import-gspmd",
                   LOWER_NONE, outDiag))
    return false;
  MlirOperation func = findEntry(module, entry), meshOp = findMesh(module);
  if (mlirOperationIsNull(func) && entry)
    return dtDiag(outDiag, -1, "the program has no function '%s' (--entry)",
                  entry);
  if (mlirOperationIsNull(func))
    return dtDiag(outDiag, -1,
                  "the program has no entry function (a function with a "
                  "body)");
  /* A program written for one device runs on one: a mesh of one device
   * is declared for it (a layout naming a mesh that is not declared was
   * refused by the verifier already). */
  if (mlirOperationIsNull(meshOp)) {
    int64_t one = 1;
    DtensorDiag diag;
    DtensorMesh *single = dtensorMeshCreate(1, &one, NULL, &diag);
    if (!single)
      return dtDiag(outDiag, -1, "out of memory");
    meshOp = dtMeshOpCreate(module, mlirOperationGetLocation(module),
                            "dtensor_one_device", single);
    dtensorMeshDestroy(single);
  }
  MlirStringRef name = mlirStringAttrGetValue(mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("sym_name")));
  if (name.length >= sizeof(r->entry))
    return dtDiag(outDiag, -1, "the entry's name is too long");
  /* mlirExecutionEngineInvokePacked adds the "_mlir_ciface_" itself. */
  snprintf(r->entry, sizeof(r->entry), "%.*s", (int)name.length, name.data);
  DtensorDiag diag;
  r->mesh = dtensorMeshCreateFromOp(meshOp, &diag);
  if (!r->mesh)
    return dtDiag(outDiag, -1, "its dtensor.mesh is not valid: %s",
                  diag.message);
  dtensorMeshPrint(r->mesh, r->meshText, sizeof(r->meshText));
  mlirOperationSetDiscardableAttributeByName(
      func, mlirStringRefCreateFromCString("llvm.emit_c_interface"),
      mlirUnitAttrGet(r->ctx));
  return true;
}

/* What each op a profiled program times is (dtensor-profile's
 * dtensor.profile_ops), kept to name the events. */
static bool readProfileOps(DtensorRunner *r, MlirOperation module,
                           DtensorDiag *outDiag) {
  MlirAttribute ops = mlirOperationGetAttributeByName(
      module, mlirStringRefCreateFromCString("dtensor.profile_ops"));
  if (mlirAttributeIsNull(ops) || !mlirAttributeIsAArray(ops))
    return true;
  intptr_t n = mlirArrayAttrGetNumElements(ops);
  r->profileOps = calloc((size_t)n + 1, sizeof(char *));
  if (!r->profileOps)
    return dtDiag(outDiag, -1, "out of memory");
  for (intptr_t k = 0; k < n; ++k) {
    MlirStringRef s = mlirStringAttrGetValue(mlirArrayAttrGetElement(ops, k));
    r->profileOps[k] = strndup(s.data, s.length);
    if (!r->profileOps[k])
      return dtDiag(outDiag, -1, "out of memory");
    r->numProfileOps = (int)k + 1;
  }
  return true;
}

/* Compiles the reference (a copy without annotations) and the SPMD program
 * (partitioned, its signature read, then lowered). */
/* What becomes of a lowered program (`which`: 0 the reference, 1 the SPMD
 * program): JIT-compiled, or written into a bundle. */
typedef bool (*Finish)(DtensorRunner *r, int which, MlirOperation lowered,
                       void *user, DtensorDiag *outDiag);

static bool jitFinish(DtensorRunner *r, int which, MlirOperation lowered,
                      void *user, DtensorDiag *outDiag) {
  (void)user;
  MlirExecutionEngine jit = jitCompile(r, lowered);
  r->programs[which] = jit.ptr;
  if (!r->programs[which])
    return dtDiag(outDiag, -1,
                  "the ExecutionEngine did not compile the program");
  /* The JIT compiles at the first lookup: look the entry up here, so the
   * ranks forked from this process (every launch) inherit machine code
   * instead of each compiling the program again. */
  if (r->entry[0] && !mlirExecutionEngineLookupPacked(
                         jit, mlirStringRefCreateFromCString(r->entry)))
    return dtDiag(outDiag, -1, "the compiled program has no entry @%s",
                  r->entry);
  return true;
}

/* Compiles the reference (a copy without annotations) and the SPMD program
 * (partitioned, its signature read, then lowered), each handed to
 * `finish`. */
static bool compile(DtensorRunner *r, MlirOperation module, Finish finish,
                    void *user, DtensorDiag *outDiag) {
  MlirOperation ref = mlirOperationClone(module);
  dtensorStripToSingleDevice(ref);
  /* Both are finished once the signature is known (a bundle's shared
   * objects carry it). */
  bool ok =
      runPipeline(r, ref, "", LOWER_REFERENCE, outDiag) &&
      runPipeline(r, module, "dtensor-spmd", LOWER_NONE, outDiag) &&
      readSignature(r, findEntry(module, r->entry), outDiag) &&
      runPipeline(r, module, "", r->gpu ? LOWER_GPU : LOWER_CPU, outDiag) &&
      readProfileOps(r, module, outDiag) && finish(r, 0, ref, user, outDiag) &&
      finish(r, 1, module, user, outDiag);
  mlirOperationDestroy(ref);
  return ok;
}

DtensorRunner *dtensorRunnerCreate(MlirOperation module, const char *entry,
                                   DtensorDiag *outDiag) {
  return dtensorRunnerCreateForTarget(module, entry, "cpu", "", outDiag);
}

/* A runner for `target` with its options, before compiling; NULL after a
 * message (`module` destroyed). */
static DtensorRunner *newRunner(MlirOperation module, const char *target,
                                const char *gpuOptions, DtensorDiag *outDiag) {
  DtensorRunner *r = calloc(1, sizeof(DtensorRunner));
  bool known = target && (!strcmp(target, "cpu") || !strcmp(target, "cuda"));
  if (!r || !known || strlen(gpuOptions ? gpuOptions : "") >= 128) {
    mlirOperationDestroy(module);
    free(r);
    dtDiag(outDiag, -1,
           !r       ? "out of memory"
           : !known ? "unknown target (valid: cpu, cuda)"
                    : "the GPU options are too long");
    return NULL;
  }
#ifndef DTENSOR_LIBOMP
  if (strstr(gpuOptions ? gpuOptions : "", "threads=true")) {
    mlirOperationDestroy(module);
    free(r);
    dtDiag(outDiag, -1,
           "threads=true needs LLVM's OpenMP runtime, which this build did "
           "not find (install libomp-22-dev and build again)");
    return NULL;
  }
#endif
  r->gpu = !strcmp(target, "cuda");
  r->call = jitCall;
  r->release = jitRelease;
  snprintf(r->gpuOptions, sizeof(r->gpuOptions), "%s",
           gpuOptions ? gpuOptions : "");
  r->ctx = mlirOperationGetContext(module);
  return r;
}

DtensorRunner *dtensorRunnerCreateForTarget(MlirOperation module,
                                            const char *entry,
                                            const char *target,
                                            const char *gpuOptions,
                                            DtensorDiag *outDiag) {
  DtensorRunner *r = newRunner(module, target, gpuOptions, outDiag);
  if (!r)
    return NULL;
  bool ok = findEntryAndMesh(r, module, entry, outDiag);
  if (ok)
    resolveThreads(r);
  ok = ok && compile(r, module, jitFinish, NULL, outDiag) &&
       dtRunMakeInputs(r, outDiag);
  mlirOperationDestroy(module);
  if (!ok) {
    dtensorRunnerDestroy(r);
    return NULL;
  }
  return r;
}

/* ---- bundles: the programs ahead of time (dtensor-check runs them) ------- */

/* The op `name` at the top of `module`, or null. */
static MlirOperation topSymbol(MlirOperation module, const char *name) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    MlirAttribute sym = mlirOperationGetAttributeByName(
        op, mlirStringRefCreateFromCString("sym_name"));
    if (!mlirAttributeIsNull(sym) &&
        mlirStringRefEqual(mlirStringAttrGetValue(sym),
                           mlirStringRefCreateFromCString(name)))
      return op;
  }
  return (MlirOperation){NULL};
}

/* Adds `void DTENSOR_BUNDLE_CALL_PREFIX<entry>(void **args)` to a lowered
 * module: the entry's C interface with its pointer arguments (the results'
 * room, then each argument's descriptor) from an array, the runner's
 * `call` convention, so that a bundle needs no code per arity. */
static bool addCallWrapper(MlirOperation module, const char *entry,
                           const char *signature, DtensorDiag *outDiag) {
  char ciface[300];
  snprintf(ciface, sizeof(ciface), "_mlir_ciface_%s", entry);
  MlirOperation fn = topSymbol(module, ciface);
  if (mlirOperationIsNull(fn))
    return dtDiag(outDiag, -1, "the lowered program has no %s", ciface);
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(fn, 0));
  if (mlirBlockIsNull(body))
    return dtDiag(outDiag, -1, "%s has no body", ciface);
  intptr_t n = mlirBlockGetNumArguments(body);
  size_t capacity = 1024 + 200 * (size_t)n + 3 * strlen(signature);
  char *text = malloc(capacity);
  if (!text)
    return dtDiag(outDiag, -1, "out of memory");
  DtBuf b = dtBufInit(text, capacity);
  dtBufPrintf(&b, "llvm.func @%s(", ciface);
  for (intptr_t i = 0; i < n; ++i)
    dtBufPrintf(&b, "%s!llvm.ptr", i ? ", " : "");
  dtBufPrintf(&b, ")\nllvm.func @%s%s(%%args: !llvm.ptr) {\n",
              DTENSOR_BUNDLE_CALL_PREFIX, entry);
  for (intptr_t i = 0; i < n; ++i)
    dtBufPrintf(&b,
                "  %%p%ld = llvm.getelementptr %%args[%ld] : (!llvm.ptr) -> "
                "!llvm.ptr, !llvm.ptr\n  %%a%ld = llvm.load %%p%ld : "
                "!llvm.ptr -> !llvm.ptr\n",
                (long)i, (long)i, (long)i, (long)i);
  dtBufPrintf(&b, "  llvm.call @%s(", ciface);
  for (intptr_t i = 0; i < n; ++i)
    dtBufPrintf(&b, "%s%%a%ld", i ? ", " : "", (long)i);
  dtBufPrintf(&b, ") : (");
  for (intptr_t i = 0; i < n; ++i)
    dtBufPrintf(&b, "%s!llvm.ptr", i ? ", " : "");
  dtBufPrintf(&b, ") -> ()\n  llvm.return\n}\n");
  /* The manifest's signature, NUL-terminated, for dtensorRunnerOpenBundle
   * to compare with the manifest beside it. */
  dtBufPrintf(&b, "llvm.mlir.global external constant @%s(\"",
              DTENSOR_BUNDLE_SIGNATURE);
  for (const char *c = signature; *c; ++c)
    if (*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\')
      dtBufPrintf(&b, "%c", *c);
    else
      dtBufPrintf(&b, "\\%02X", (unsigned char)*c);
  dtBufPrintf(&b, "\\00\") {addr_space = 0 : i32} : !llvm.array<%zu x i8>\n",
              strlen(signature) + 1);
  MlirModule parsed = mlirModuleCreateParse(
      mlirOperationGetContext(module), mlirStringRefCreateFromCString(text));
  free(text);
  if (mlirModuleIsNull(parsed))
    return dtDiag(outDiag, -1, "the bundle's call wrapper does not parse");
  char wrapper[300];
  snprintf(wrapper, sizeof(wrapper), "%s%s", DTENSOR_BUNDLE_CALL_PREFIX, entry);
  const char *moved[2] = {wrapper, DTENSOR_BUNDLE_SIGNATURE};
  for (int k = 0; k < 2; ++k) {
    MlirOperation w = topSymbol(mlirModuleGetOperation(parsed), moved[k]);
    mlirOperationRemoveFromParent(w);
    mlirBlockAppendOwnedOperation(
        mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)), w);
  }
  mlirModuleDestroy(parsed);
  return true;
}

/* Runs `argv` and waits; false with `outDiag` unless it exits 0. */
static bool runCommand(char *const argv[], DtensorDiag *outDiag) {
  pid_t pid = fork();
  if (pid == 0) {
    execvp(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    return dtDiag(outDiag, -1,
                  "'%s %s %s %s %s' failed (a C compiler links the bundle's "
                  "shared objects; set CC to choose it)",
                  argv[0], argv[1], argv[2], argv[3], argv[4]);
  return true;
}

static bool exportFinish(DtensorRunner *r, int which, MlirOperation lowered,
                         void *user, DtensorDiag *outDiag) {
  const char *dir = user;
  char object[4096], shared[4096];
  const char *name = which ? DTENSOR_BUNDLE_SPMD : DTENSOR_BUNDLE_REFERENCE;
  snprintf(object, sizeof(object), "%s/%s.o", dir, name);
  snprintf(shared, sizeof(shared), "%s/%s.so", dir, name);
  char *signature = dtRunManifestText(r, outDiag);
  bool wrapped =
      signature && addCallWrapper(lowered, r->entry, signature, outDiag);
  free(signature);
  if (!wrapped || mlirLogicalResultIsFailure(dtensorEmitModule(
                      lowered, mlirStringRefCreateFromCString(object),
                      DTENSOR_EMIT_OBJECT, 2, outDiag)))
    return false;
  const char *cc = getenv("CC");
  char *argv[8] = {
      (char *)(cc && *cc ? cc : "cc"), "-shared", "-o", shared, object, NULL};
  /* Loops in threads call LLVM's OpenMP runtime: the shared object needs
   * it, found where this library found it. */
  char rpath[4200];
  if (strstr(r->gpuOptions, "threads=true")) {
#ifdef DTENSOR_LIBOMP
    snprintf(rpath, sizeof(rpath), "-Wl,-rpath,%s", DTENSOR_LIBOMP);
    *strrchr(rpath, '/') = 0;
    argv[5] = DTENSOR_LIBOMP;
    argv[6] = rpath;
#else
    unlink(object);
    return dtDiag(outDiag, -1,
                  "loops in threads need LLVM's OpenMP runtime, which this "
                  "build did not find (libomp-22-dev)");
#endif
  }
  bool ok = runCommand(argv, outDiag);
  unlink(object);
  return ok;
}

static bool writeManifest(const DtensorRunner *r, const char *dir,
                          DtensorDiag *outDiag) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, DTENSOR_BUNDLE_MANIFEST);
  char *text = dtRunManifestText(r, outDiag);
  if (!text)
    return false;
  DtOutput out;
  bool ok = dtOutputOpen(&out, path, outDiag);
  if (ok) {
    fprintf(out.file, "%s\n%s", DTENSOR_BUNDLE_MAGIC, text);
    ok = dtOutputClose(&out, true, outDiag);
  }
  free(text);
  return ok;
}

bool dtensorRunnerExportBundle(MlirOperation module, const char *entry,
                               const char *target, const char *gpuOptions,
                               const char *dir, DtensorDiag *outDiag) {
  DtensorRunner *r = newRunner(module, target, gpuOptions, outDiag);
  if (!r)
    return false;
  /* A directory another user made or may write is refused: dtensor-check
   * would load what she put there as the bundle's code. */
  bool ok = mkdir(dir, 0777) == 0 || errno == EEXIST ||
            dtDiag(outDiag, -1, "cannot make the directory '%s': %s", dir,
                   strerror(errno));
  ok = ok && dtCheckTrustedDir(dir, outDiag);
  ok = ok && findEntryAndMesh(r, module, entry, outDiag) &&
       compile(r, module, exportFinish, (void *)dir, outDiag) &&
       writeManifest(r, dir, outDiag);
  mlirOperationDestroy(module);
  dtensorRunnerDestroy(r);
  return ok;
}