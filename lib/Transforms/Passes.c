/* The dtensor pass registry, option parsing and the external-pass wrapper
 * that every dtensor pass shares. */
#include "PassDef.h"

#include "Dialect/DialectInternal.h"
#include "dtensor-c/Planner.h"

#include "Support/Support.h"
#include "dtensor-c/Dialect.h"
#include "mlir-c/RegisterEverything.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const DtPassDef *const kPasses[] = {
    &dtVerifyPass,
    &dtPropagatePass,
    &dtAutoShardPass,
    &dtPartitionPass,
    &dtLowerRedistributePass,
    &dtReportPass,
    &dtLowerToRuntimePass,
    &dtLowerContractionsPass,
    &dtPrepareContractionsPass,
    &dtApproximateMathPass,
    &dtExpandF8Pass,
    &dtProfilePass,
    &dtOuterParallelPass,
    &dtReassociateReductionsPass,
    &dtWidenReductionsPass,
    &dtDecomposeSoftmaxPass,
    &dtGathersPass,
    &dtDecomposePacksPass,
    &dtLowerGathersPass,
    &dtAutodiffPass,
    &dtInitsToInputsPass,
    &dtEarlyDeallocPass,
    &dtBucketCollectivesPass,
    &dtScheduleCollectivesPass,
    &dtInitsNearUsesPass,
    &dtGpuMemoryPass,
    &dtGpuCheckHostPass,
    &dtGpuSerialKernelsPass,
    &dtGpuLoopOrderPass,
    &dtViewGraphPass,
    &dtCheckLoweredPass,
    &dtApplyPlanPass,
    &dtImportGspmdPass,
    &dtImportShardPass,
};

enum { kNumPasses = sizeof(kPasses) / sizeof(kPasses[0]) };

int dtensorPassGetNumRegistered(void) { return kNumPasses; }

const DtensorPassInfo *dtensorPassGetRegistered(int index) {
  return index >= 0 && index < kNumPasses ? &kPasses[index]->info : NULL;
}

static const DtPassDef *lookupDef(MlirStringRef argument) {
  for (int i = 0; i < kNumPasses; ++i)
    if (strlen(kPasses[i]->info.argument) == argument.length &&
        memcmp(kPasses[i]->info.argument, argument.data, argument.length) == 0)
      return kPasses[i];
  return NULL;
}

const DtensorPassInfo *dtensorPassLookup(MlirStringRef argument) {
  const DtPassDef *def = lookupDef(argument);
  return def ? &def->info : NULL;
}

/* Once per process: the pipeline and pass constructors call it, so that an
 * embedder who does not still gets upstream passes by name. */
static pthread_once_t upstreamOnce = PTHREAD_ONCE_INIT;

static void registerUpstream(void) { mlirRegisterAllPasses(); }

void dtensorRegisterUpstreamPasses(void) {
  pthread_once(&upstreamOnce, registerUpstream);
}

/* ---- options ------------------------------------------------------------ */

static int findOption(const DtensorPassInfo *info, const char *name,
                      size_t length) {
  for (int i = 0; i < info->numOptions; ++i)
    if (strlen(info->options[i].name) == length &&
        memcmp(info->options[i].name, name, length) == 0)
      return i;
  return -1;
}

const char *dtPassOptionsGet(const DtPassOptions *options, const char *name) {
  int i = findOption(options->info, name, strlen(name));
  return i < 0 ? "" : options->values[i];
}

int64_t dtPassOptionsGetInt(const DtPassOptions *options, const char *name) {
  return strtoll(dtPassOptionsGet(options, name), NULL, 10);
}

bool dtPassOptionsGetBool(const DtPassOptions *options, const char *name) {
  const char *v = dtPassOptionsGet(options, name);
  return strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
}

bool dtPassReadCalibration(MlirOperation root, const char *pass,
                           const DtPassOptions *options,
                           DtensorCalibration **outCal) {
  const char *path = dtPassOptionsGet(options, "calibration");
  *outCal = NULL;
  if (!path[0])
    return true;
  DtensorDiag diag;
  *outCal = dtensorCalibrationRead(path, &diag);
  if (*outCal)
    return true;
  /* At the module's first mesh: the file is read for the meshes. */
  MlirOperation at = root;
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  for (MlirOperation op = mlirBlockIsNull(top)
                              ? (MlirOperation){NULL}
                              : mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (dtIsOp(op, DT_OP_MESH)) {
      at = op;
      break;
    }
  dtOpError(at, "%s: calibration: %s", pass, diag.message);
  return false;
}

bool dtPassReadBudget(MlirOperation root, const char *pass,
                      const DtPassOptions *options, int64_t *outBytes) {
  const char *memory = dtPassOptionsGet(options, "memory");
  *outBytes = memory[0] ? dtByteCount(memory) : -1;
  if (!memory[0] || *outBytes > 0)
    return true;
  char msg[DT_MAX_OPTION_VALUE + 192];
  snprintf(msg, sizeof(msg),
           "%s: memory='%s' is not a byte count (a whole number with an "
           "optional unit: 512MB, 16GiB, 1048576)",
           pass, memory);
  mlirEmitError(mlirOperationGetLocation(root), msg);
  return false;
}

static bool isBoolText(const char *v) {
  return !strcmp(v, "true") || !strcmp(v, "false") || !strcmp(v, "1") ||
         !strcmp(v, "0");
}

static bool isEnumValue(const char *values, const char *v) {
  size_t n = strlen(v);
  for (const char *p = values; *p;) {
    size_t len = strcspn(p, "|");
    if (len == n && memcmp(p, v, n) == 0)
      return true;
    p += len + (p[len] == '|');
  }
  return false;
}

static bool checkValue(const DtensorPassInfo *info, int index,
                       const char *value, int column, DtensorDiag *diag) {
  const DtensorPassOptionInfo *o = &info->options[index];
  switch (o->type) {
  case DTENSOR_OPTION_BOOL:
    if (!isBoolText(value))
      return dtDiag(diag, column,
                    "option '%s' of '%s' takes true or false, "
                    "not '%s'",
                    o->name, info->argument, value);
    break;
  case DTENSOR_OPTION_INT: {
    char *end;
    errno = 0;
    strtoll(value, &end, 10);
    if (!*value || *end || errno)
      return dtDiag(diag, column,
                    "option '%s' of '%s' takes an integer, "
                    "not '%s'",
                    o->name, info->argument, value);
    break;
  }
  case DTENSOR_OPTION_ENUM:
    if (!isEnumValue(o->values, value))
      return dtDiag(diag, column,
                    "option '%s' of '%s' takes one of %s, not "
                    "'%s'",
                    o->name, info->argument, o->values, value);
    break;
  case DTENSOR_OPTION_STRING:
    break;
  }
  return true;
}

/* Parses "key=value key2=value2" (values may be quoted or brace-balanced;
 * a bare key sets a bool option to true) over the defaults. */
static bool parseOptions(const DtensorPassInfo *info, MlirStringRef text,
                         DtPassOptions *out, DtensorDiag *diag) {
  out->info = info;
  for (int i = 0; i < info->numOptions; ++i)
    snprintf(out->values[i], DT_MAX_OPTION_VALUE, "%s",
             info->options[i].defaultValue);
  size_t i = 0, n = text.length;
  const char *s = text.data;
  while (i < n) {
    while (i < n && isspace((unsigned char)s[i]))
      ++i;
    if (i == n)
      break;
    size_t keyStart = i;
    while (i < n && s[i] != '=' && !isspace((unsigned char)s[i]))
      ++i;
    int index = findOption(info, s + keyStart, i - keyStart);
    if (index < 0) {
      char list[512] = "";
      DtBuf valid = dtBufInit(list, sizeof(list));
      for (int k = 0; k < info->numOptions; ++k)
        dtBufPrintf(&valid, "%s%s", k ? ", " : "", info->options[k].name);
      return dtDiag(diag, (int)keyStart, "'%s' has no option '%.*s' (%s%s)",
                    info->argument, (int)(i - keyStart), s + keyStart,
                    info->numOptions ? "valid: " : "it takes no options", list);
    }
    char value[DT_MAX_OPTION_VALUE];
    size_t valueStart = i;
    if (i < n && s[i] == '=') {
      ++i;
      valueStart = i;
      size_t len = 0;
      if (i < n && (s[i] == '"' || s[i] == '\'')) {
        char quote = s[i++];
        while (i < n && s[i] != quote && len + 1 < sizeof(value))
          value[len++] = s[i++];
        if (i == n || s[i] != quote)
          return dtDiag(diag, (int)valueStart,
                        "unterminated quoted value "
                        "for option '%s'",
                        info->options[index].name);
        ++i;
      } else {
        int depth = 0;
        while (i < n && (depth > 0 || !isspace((unsigned char)s[i]))) {
          depth += s[i] == '{' ? 1 : s[i] == '}' ? -1 : 0;
          if (len + 1 >= sizeof(value))
            return dtDiag(diag, (int)valueStart,
                          "value of option '%s' is "
                          "longer than %d characters",
                          info->options[index].name, DT_MAX_OPTION_VALUE - 1);
          value[len++] = s[i++];
        }
      }
      value[len] = '\0';
    } else if (info->options[index].type == DTENSOR_OPTION_BOOL) {
      strcpy(value, "true");
    } else {
      return dtDiag(diag, (int)i,
                    "option '%s' of '%s' needs a value "
                    "('%s=...')",
                    info->options[index].name, info->argument,
                    info->options[index].name);
    }
    if (!checkValue(info, index, value, (int)valueStart, diag))
      return false;
    snprintf(out->values[index], DT_MAX_OPTION_VALUE, "%s", value);
  }
  return true;
}

/* ---- the external pass wrapper ------------------------------------------- */

typedef struct PassState {
  const DtPassDef *def;
  DtPassOptions options;
} PassState;

static void passConstruct(void *userData) { (void)userData; }

static void passDestruct(void *userData) { free(userData); }

static MlirLogicalResult passInitialize(MlirContext ctx, void *userData) {
  (void)ctx;
  (void)userData;
  return mlirLogicalResultSuccess();
}

static void *passClone(void *userData) {
  PassState *copy = malloc(sizeof(PassState));
  if (copy)
    memcpy(copy, userData, sizeof(PassState));
  return copy;
}

static void passRun(MlirOperation op, MlirExternalPass pass, void *userData) {
  const PassState *state = userData;
  if (state->def->verifyFirst &&
      mlirLogicalResultIsFailure(dtensorVerify(op))) {
    mlirExternalPassSignalFailure(pass);
    return;
  }
  if (!state->def->run(op, &state->options))
    mlirExternalPassSignalFailure(pass);
}

MlirPass dtensorPassCreate(MlirStringRef argument, MlirStringRef options,
                           DtensorDiag *outDiag) {
  return dtPassCreateWithContext(argument, options, NULL, outDiag);
}

bool dtPassOptionsParse(const DtensorPassInfo *info, MlirStringRef text,
                        DtPassOptions *out, DtensorDiag *outDiag) {
  out->context = NULL;
  out->decisions = NULL;
  return parseOptions(info, text, out, outDiag);
}

MlirPass dtPassCreateWithContext(MlirStringRef argument, MlirStringRef options,
                                 const void *context, DtensorDiag *outDiag) {
  const DtPassDef *def = lookupDef(argument);
  if (!def) {
    dtDiag(outDiag, 0, "'%.*s' is not a dtensor pass", (int)argument.length,
           argument.data);
    return (MlirPass){NULL};
  }
  return dtPassCreateFromDef(def, options, context, outDiag);
}

MlirPass dtPassCreateFromDef(const DtPassDef *def, MlirStringRef options,
                             const void *context, DtensorDiag *outDiag) {
  dtensorRegisterUpstreamPasses();
  PassState *state = malloc(sizeof(PassState));
  if (!state) {
    dtDiag(outDiag, 0, "out of memory");
    return (MlirPass){NULL};
  }
  state->def = def;
  if (!parseOptions(&def->info, options, &state->options, outDiag)) {
    free(state);
    return (MlirPass){NULL};
  }
  state->options.context = context;
  state->options.decisions = NULL;
  MlirExternalPassCallbacks callbacks = {passConstruct, passDestruct,
                                         passInitialize, passClone, passRun};
  /* The pass's TypeID is the address of its (static, pointer-aligned)
   * definition: unique per pass and stable for the process. */
  MlirStringRef name = mlirStringRefCreateFromCString(def->info.argument);
  MlirDialectHandle dialects[4];
  for (int i = 0; i < def->numDependentDialects; ++i)
    dialects[i] = def->dependentDialects[i]();
  return mlirCreateExternalPass(
      mlirTypeIDCreate(def), name, name,
      mlirStringRefCreateFromCString(def->info.summary),
      mlirStringRefCreateFromCString(""), def->numDependentDialects, dialects,
      callbacks, state);
}

bool dtRunUpstream(MlirOperation root, const char *pipeline) {
  MlirContext ctx = mlirOperationGetContext(root);
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(root));
  MlirPassManager pm = mlirPassManagerCreateOnOperation(ctx, name);
  mlirPassManagerEnableVerifier(pm, false);
  bool ok = mlirLogicalResultIsSuccess(mlirOpPassManagerAddPipeline(
      mlirPassManagerGetAsOpPassManager(pm),
      mlirStringRefCreateFromCString(pipeline), NULL, NULL));
  ok = ok && mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, root));
  mlirPassManagerDestroy(pm);
  return ok;
}
