/* dtensor-report: the seed's "DProxy" estimate on a per-device program. Per
 * function: the bytes of each device's arguments, results and largest
 * tensor, its peak (Memory.c: arguments plus the values live at the op
 * where their sum is largest, the largest of them named; with
 * memory=BYTES a function over that budget is a located error), and every
 * collective with the bytes it moves per device and its
 * modelled time under the mesh's link model (the planner's cost formulas).
 * Only ops that communicate count (a local split moves nothing), and a
 * function's totals include its callees' once per call site. The MLIR C
 * API cannot emit remarks, so the report is written as attributes:
 * `dtensor.cost = {bytes, modelled_us}` on each collective and `dtensor.report
 * = {...}` on the function; dtensorReportPrint (which `dtensor-opt
 * --dtensor-report` calls) prints them (docs/partition.md). */
#include "Memory.h"
#include "PassDef.h"
#include "Util.h"

#include "Support/Support.h"

#include "dtensor-c/Dialect.h"
#include "dtensor-c/Planner.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Totals {
  int64_t largest, moved, count;
  double us;
  bool failed;
  DtOpList calls; /* the function's func.call ops */
  /* What its callees add, once per call site (addCallees). */
  int64_t calleeCount, calleeMoved;
  double calleeUs;
} Totals;

static MlirNamedAttribute named(MlirContext ctx, const char *name,
                                MlirAttribute value) {
  return mlirNamedAttributeGet(
      mlirIdentifierGet(ctx, mlirStringRefCreateFromCString(name)), value);
}

/* Prices one collective by the planner's model; broadcast and permute
 * move the whole block once. */
static void priceCollective(MlirOperation op, Totals *t) {
  const DtCollectiveInfo *info = dtCollectiveOf(op);
  bool known = info && info->pattern >= 0;
  DtensorCommPattern pattern =
      known ? (DtensorCommPattern)info->pattern : DTENSOR_COMM_IDENTITY;
  bool pointToPoint = dtIsOp(op, DT_OP_BROADCAST) || dtIsOp(op, DT_OP_PERMUTE);
  /* Only what communicates: a local split or a local Partial moves
   * nothing between devices. */
  bool local = pattern == DTENSOR_COMM_IDENTITY ||
               pattern == DTENSOR_COMM_LOCAL_SPLIT ||
               pattern == DTENSOR_COMM_LOCAL_PARTIAL;
  if (local && !pointToPoint)
    return;
  MlirAttribute ref = dtGetAttr(op, "mesh");
  MlirAttribute axesAttr = dtGetAttr(op, "mesh_axes");
  if (mlirAttributeIsNull(ref) || !mlirAttributeIsAFlatSymbolRef(ref) ||
      mlirAttributeIsNull(axesAttr) || !mlirAttributeIsADenseI64Array(axesAttr))
    return;
  MlirOperation meshOp =
      dtensorMeshOpLookup(op, mlirFlatSymbolRefAttrGetValue(ref));
  DtensorMesh *mesh = mlirOperationIsNull(meshOp)
                          ? NULL
                          : dtensorMeshCreateFromOp(meshOp, NULL);
  if (!mesh)
    return; /* the verifier reports it */
  int axes[DTENSOR_MAX_MESH_RANK], n = 0;
  for (intptr_t i = 0;
       i < mlirDenseArrayGetNumElements(axesAttr) && n < DTENSOR_MAX_MESH_RANK;
       ++i)
    axes[n++] = (int)mlirDenseI64ArrayGetElement(axesAttr, i);
  int64_t in = dtTensorBytes(mlirValueGetType(mlirOperationGetOperand(op, 0)));
  int64_t out = dtTensorBytes(mlirValueGetType(mlirOperationGetResult(op, 0)));
  DtensorPlanOptions options;
  dtensorPlanOptionsInit(&options);
  DtensorCommCost c =
      pointToPoint
          ? dtensorPointToPointGetCost(mesh, n, axes, in)
          : dtensorCommGetCostOnAxes(mesh, pattern, n, axes, in, out, &options);
  dtensorMeshDestroy(mesh);
  MlirContext ctx = mlirOperationGetContext(op);
  MlirNamedAttribute fields[2] = {
      named(ctx, "bytes",
            mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), c.bytesPerDevice)),
      named(ctx, "modelled_us",
            mlirFloatAttrDoubleGet(ctx, mlirF64TypeGet(ctx), c.forwardUs)),
  };
  mlirOperationSetDiscardableAttributeByName(
      op, mlirStringRefCreateFromCString(DT_ATTR_COST),
      mlirDictionaryAttrGet(ctx, 2, fields));
  t->moved += c.bytesPerDevice;
  t->us += c.forwardUs;
  ++t->count;
}

static MlirWalkResult visit(MlirOperation op, void *userData) {
  Totals *t = userData;
  for (intptr_t j = 0; j < mlirOperationGetNumResults(op); ++j) {
    int64_t b = dtTensorBytes(mlirValueGetType(mlirOperationGetResult(op, j)));
    if (b > t->largest)
      t->largest = b;
  }
  const char *early =
      dtIsOp(op, DT_OP_REDISTRIBUTE)
          ? "'dtensor.redistribute' op is not lowered yet: run "
            "dtensor-lower-redistribute before dtensor-report"
      : dtIsOp(op, DT_OP_ANNOTATE)
          ? "'dtensor.annotate' op in a global program: dtensor-report "
            "estimates the per-device program (run dtensor-spmd first)"
          : NULL;
  if (early) {
    mlirEmitError(mlirOperationGetLocation(op), early);
    t->failed = true;
    return MlirWalkResultInterrupt;
  }
  priceCollective(op, t);
  if (dtIsOp(op, "func.call") && !dtOpListPush(&t->calls, op)) {
    t->failed = true;
    return MlirWalkResultInterrupt;
  }
  return MlirWalkResultAdvance;
}

/* The function of the module that `call` calls, as an index into `funcs`
 * (-1: an external or unknown callee). */
static int calleeIndex(MlirOperation call, const DtOpList *funcs) {
  MlirStringRef name = dtCalleeName(call);
  if (!name.length)
    return -1;
  for (size_t i = 0; i < funcs->count; ++i)
    if (mlirStringRefEqual(
            mlirStringAttrGetValue(dtGetAttr(funcs->ops[i], "sym_name")), name))
      return (int)i;
  return -1;
}

/* Adds to function `i`'s totals its callees' totals, once per call site
 * (a call in a loop counts once: trip counts are not known here); `state`
 * is 0 (not done), 1 (in progress: a recursive call adds nothing more) or
 * 2 (done). */
static void addCallees(int i, const DtOpList *funcs, Totals *totals,
                       int *state) {
  if (state[i])
    return;
  state[i] = 1;
  Totals *t = &totals[i];
  for (size_t c = 0; c < t->calls.count; ++c) {
    int j = calleeIndex(t->calls.ops[c], funcs);
    if (j < 0 || state[j] == 1)
      continue;
    addCallees(j, funcs, totals, state);
    t->calleeCount += totals[j].count + totals[j].calleeCount;
    t->calleeMoved += totals[j].moved + totals[j].calleeMoved;
    t->calleeUs += totals[j].us + totals[j].calleeUs;
  }
  state[i] = 2;
}

/* Function `f`'s own totals (its arguments, results, collectives and
 * calls); false after an error. */
static bool ownTotals(MlirOperation f, Totals *t, int64_t *args,
                      int64_t *results) {
  /* Global sizes reported as per-device ones would be wrong by the device
   * count: a function not partitioned yet is refused. */
  char where[32];
  if (dtSignatureFind(f, false, where)) {
    char message[320];
    snprintf(message, sizeof(message),
             "'func.func' op was not partitioned: %s has a dtensor.layout but "
             "no dtensor.global_shape; dtensor-report estimates the "
             "per-device program (run dtensor-spmd first)",
             where);
    mlirEmitError(mlirOperationGetLocation(f), message);
    return false;
  }
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0));
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry); ++i) {
    int64_t b = dtTensorBytes(mlirValueGetType(mlirBlockGetArgument(entry, i)));
    *args += b;
    if (b > t->largest)
      t->largest = b;
  }
  MlirType fnType = mlirTypeAttrGetValue(dtGetAttr(f, "function_type"));
  for (intptr_t j = 0; j < mlirFunctionTypeGetNumResults(fnType); ++j)
    *results += dtTensorBytes(mlirFunctionTypeGetResult(fnType, j));
  mlirOperationWalk(f, visit, t, MlirWalkPreOrder);
  return !t->failed;
}

/* "argument 2 'w1' tensor<64x256xf32>" or "linalg.matmul at f.mlir:12
 * tensor<16x256xf32>": what a value is, for messages. */
static void describe(MlirValue v, char *out, size_t size) {
  DtBuf b = dtBufInit(out, size);
  if (mlirValueIsABlockArgument(v)) {
    intptr_t n = mlirBlockArgumentGetArgNumber(v);
    MlirOperation f = mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v));
    MlirAttribute name = dtFuncArgAttr(f, false, n, DT_ATTR_NAME);
    dtBufPrintf(&b, "argument %ld", (long)n);
    if (!mlirAttributeIsNull(name) && mlirAttributeIsAString(name)) {
      MlirStringRef text = mlirStringAttrGetValue(name);
      dtBufPrintf(&b, " '%.*s'", (int)text.length, text.data);
    }
  } else {
    MlirOperation op = mlirOpResultGetOwner(v);
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
    MlirLocation loc = mlirOperationGetLocation(op);
    dtBufPrintf(&b, "%.*s", (int)name.length, name.data);
    if (mlirLocationIsAFileLineColRange(loc)) {
      MlirStringRef file =
          mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
      dtBufPrintf(&b, " at %.*s:%d", (int)file.length, file.data,
                  mlirLocationFileLineColRangeGetStartLine(loc));
    }
  }
  dtBufAppend(&b, " ", 1);
  mlirTypePrint(mlirValueGetType(v), dtBufAppendCallback, &b);
}

/* The peak's fields of the report: its bytes, its collectives' share,
 * where it is and its largest values (for dtensorReportPrint). */
static void peakFields(MlirContext ctx, const DtMemoryPeak *m,
                       MlirNamedAttribute *fields) {
  MlirType i64 = mlirIntegerTypeGet(ctx, 64);
  fields[0] = named(ctx, "peak_bytes", mlirIntegerAttrGet(i64, m->peakBytes));
  fields[1] = named(ctx, "peak_collective_bytes",
                    mlirIntegerAttrGet(i64, m->collectiveBytes));
  MlirAttribute largest[DT_MEMORY_LARGEST];
  for (int k = 0; k < m->numLargest; ++k) {
    char text[400];
    int n = snprintf(text, sizeof(text),
                     "%lld bytes: ", (long long)m->largestBytes[k]);
    describe(m->largest[k], text + n, sizeof(text) - (size_t)n);
    largest[k] = mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(text));
  }
  fields[2] =
      named(ctx, "peak_largest", mlirArrayAttrGet(ctx, m->numLargest, largest));
  MlirLocation at = mlirOperationIsNull(m->at)
                        ? mlirLocationUnknownGet(ctx)
                        : mlirOperationGetLocation(m->at);
  fields[4] =
      named(ctx, "parameter_bytes", mlirIntegerAttrGet(i64, m->parameterBytes));
  fields[5] = named(ctx, "optimizer_state_bytes",
                    mlirIntegerAttrGet(i64, m->optimizerBytes));
  fields[3] = named(
      ctx, "peak_line",
      mlirIntegerAttrGet(i64, mlirLocationIsAFileLineColRange(at)
                                  ? mlirLocationFileLineColRangeGetStartLine(at)
                                  : 0));
}

/* A located error when `m` is over `budget` bytes, naming its largest
 * values; false then. */
static bool withinBudget(MlirOperation f, const DtMemoryPeak *m,
                         int64_t budget) {
  if (budget < 0 || m->peakBytes <= budget)
    return true;
  char message[2048];
  DtBuf b = dtBufInit(message, sizeof(message));
  MlirStringRef name = mlirStringAttrGetValue(dtGetAttr(f, "sym_name"));
  dtBufPrintf(&b,
              "@%.*s needs %lld bytes per device at its peak, over the "
              "memory budget of %lld bytes (arguments %lld); the largest "
              "values live there:",
              (int)name.length, name.data, (long long)m->peakBytes,
              (long long)budget, (long long)m->argumentBytes);
  for (int k = 0; k < m->numLargest; ++k) {
    char text[400];
    describe(m->largest[k], text, sizeof(text));
    dtBufPrintf(&b, "%s %lld bytes (%s)", k ? "," : "",
                (long long)m->largestBytes[k], text);
  }
  mlirEmitError(
      mlirOperationGetLocation(mlirOperationIsNull(m->at) ? f : m->at),
      message);
  return false;
}

static bool runReport(MlirOperation root, const DtPassOptions *options) {
  const char *memory = dtPassOptionsGet(options, "memory");
  int64_t budget = memory && *memory ? dtByteCount(memory) : -1;
  MlirContext ctx = mlirOperationGetContext(root);
  if (memory && *memory && budget < 0) {
    mlirEmitError(mlirOperationGetLocation(root),
                  "dtensor-report: memory='...' needs a byte count such as "
                  "16GiB, 512MB or 1048576");
    return false;
  }
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  DtOpList funcs = {0};
  for (MlirOperation f = mlirBlockIsNull(top) ? (MlirOperation){NULL}
                                              : mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f))
    if (dtIsOp(f, "func.func") &&
        !mlirBlockIsNull(
            mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0))) &&
        !dtOpListPush(&funcs, f)) {
      free(funcs.ops);
      return false;
    }
  size_t n = funcs.count;
  Totals *totals = calloc(n + 1, sizeof(Totals));
  int64_t *bytes = calloc(2 * n + 1, sizeof(int64_t));
  int *state = calloc(n + 1, sizeof(int));
  bool *valid = calloc(n + 1, sizeof(bool));
  bool ok = totals && bytes && state && valid;
  bool allValid = ok;
  for (size_t i = 0; ok && i < n; ++i) {
    valid[i] =
        ownTotals(funcs.ops[i], &totals[i], &bytes[2 * i], &bytes[2 * i + 1]);
    allValid &= valid[i];
  }
  for (size_t i = 0; ok && i < n; ++i)
    if (valid[i])
      addCallees((int)i, &funcs, totals, state);
  for (size_t i = 0; ok && i < n; ++i) {
    if (!valid[i])
      continue;
    const Totals *t = &totals[i];
    DtMemoryPeak m;
    if (!dtMemoryPeakOf(funcs.ops[i], &m)) {
      ok = false;
      break;
    }
    allValid &= withinBudget(funcs.ops[i], &m, budget);
    MlirType i64 = mlirIntegerTypeGet(ctx, 64);
    MlirNamedAttribute fields[14] = {
        named(ctx, "argument_bytes", mlirIntegerAttrGet(i64, bytes[2 * i])),
        named(ctx, "result_bytes", mlirIntegerAttrGet(i64, bytes[2 * i + 1])),
        named(ctx, "largest_tensor_bytes", mlirIntegerAttrGet(i64, t->largest)),
        named(ctx, "collectives",
              mlirIntegerAttrGet(i64, t->count + t->calleeCount)),
        named(ctx, "collectives_in_callees",
              mlirIntegerAttrGet(i64, t->calleeCount)),
        named(ctx, "bytes_moved",
              mlirIntegerAttrGet(i64, t->moved + t->calleeMoved)),
        named(ctx, "modelled_us",
              mlirFloatAttrDoubleGet(ctx, mlirF64TypeGet(ctx),
                                     t->us + t->calleeUs)),
        named(ctx, "calls", mlirIntegerAttrGet(i64, (int64_t)t->calls.count)),
    };
    peakFields(ctx, &m, fields + 8);
    mlirOperationSetDiscardableAttributeByName(
        funcs.ops[i], mlirStringRefCreateFromCString(DT_ATTR_REPORT),
        mlirDictionaryAttrGet(ctx, 14, fields));
  }
  for (size_t i = 0; totals && i < n; ++i)
    free(totals[i].calls.ops);
  free(totals);
  free(bytes);
  free(state);
  free(valid);
  free(funcs.ops);
  return ok && allValid;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"memory", DTENSOR_OPTION_STRING, "", NULL,
     "the bytes a device has (16GiB, 512MB, 1048576): a function whose peak "
     "needs more is an error naming its largest values (default: no "
     "budget)"},
};

const DtPassDef dtReportPass = {
    .info = {"dtensor-report",
             "Estimate per-device memory and communication of a per-device "
             "program (attributes dtensor.report and dtensor.cost)",
             1, kOptions},
    .verifyFirst = true,
    .run = runReport,
};

/* ---- printing ------------------------------------------------------------ */

static int64_t intField(MlirAttribute dict, const char *name) {
  MlirAttribute a = mlirDictionaryAttrGetElementByName(
      dict, mlirStringRefCreateFromCString(name));
  return mlirAttributeIsNull(a) ? 0 : mlirIntegerAttrGetValueInt(a);
}

static double floatField(MlirAttribute dict, const char *name) {
  MlirAttribute a = mlirDictionaryAttrGetElementByName(
      dict, mlirStringRefCreateFromCString(name));
  return mlirAttributeIsNull(a) ? 0.0 : mlirFloatAttrGetValueDouble(a);
}

typedef struct Printer {
  MlirStringRef source;
  MlirStringCallback callback;
  void *userData;
} Printer;

static void emit(const Printer *p, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void emit(const Printer *p, const char *format, ...) {
  char line[1024];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(line, sizeof(line), format, args);
  va_end(args);
  if (n > 0)
    p->callback((MlirStringRef){line, (size_t)n < sizeof(line)
                                          ? (size_t)n
                                          : sizeof(line) - 1},
                p->userData);
}

static MlirWalkResult printCollective(MlirOperation op, void *userData) {
  const Printer *p = userData;
  MlirAttribute cost = dtGetAttr(op, DT_ATTR_COST);
  if (mlirAttributeIsNull(cost))
    return MlirWalkResultAdvance;
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  MlirLocation loc = mlirOperationGetLocation(op);
  int line = mlirLocationIsAFileLineColRange(loc)
                 ? mlirLocationFileLineColRangeGetStartLine(loc)
                 : 0;
  emit(p, "    %-24.*s %12lld bytes %12.3f us   %.*s:%d\n", (int)name.length,
       name.data, (long long)intField(cost, "bytes"),
       floatField(cost, "modelled_us"), (int)p->source.length, p->source.data,
       line);
  return MlirWalkResultAdvance;
}

int dtensorReportPrint(MlirOperation module, MlirStringRef sourceName,
                       MlirStringCallback callback, void *userData) {
  Printer p = {sourceName, callback, userData};
  int reported = 0;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f)) {
    MlirAttribute r = dtGetAttr(f, DT_ATTR_REPORT);
    if (mlirAttributeIsNull(r))
      continue;
    ++reported;
    MlirStringRef fname = mlirStringAttrGetValue(dtGetAttr(f, "sym_name"));
    int64_t count = intField(r, "collectives");
    int64_t inCallees = intField(r, "collectives_in_callees");
    char callees[96] = "";
    if (inCallees)
      snprintf(callees, sizeof(callees),
               " (%lld in called functions, once per call site)",
               (long long)inCallees);
    int64_t parameters = intField(r, "parameter_bytes");
    int64_t state = intField(r, "optimizer_state_bytes");
    char roles[160] = "";
    if (parameters || state)
      snprintf(roles, sizeof(roles),
               " (parameters %lld, optimizer state %lld, inputs %lld)",
               (long long)parameters, (long long)state,
               (long long)(intField(r, "argument_bytes") - parameters - state));
    emit(&p,
         "dtensor report: @%.*s, per device\n"
         "  arguments %lld bytes%s, results %lld bytes, largest tensor %lld "
         "bytes\n"
         "  peak %lld bytes at %.*s:%lld (arguments and the values live "
         "there; collective results %lld bytes), the largest:\n",
         (int)fname.length, fname.data,
         (long long)intField(r, "argument_bytes"), roles,
         (long long)intField(r, "result_bytes"),
         (long long)intField(r, "largest_tensor_bytes"),
         (long long)intField(r, "peak_bytes"), (int)p.source.length,
         p.source.data, (long long)intField(r, "peak_line"),
         (long long)intField(r, "peak_collective_bytes"));
    MlirAttribute largest = mlirDictionaryAttrGetElementByName(
        r, mlirStringRefCreateFromCString("peak_largest"));
    for (intptr_t k = 0; !mlirAttributeIsNull(largest) &&
                         k < mlirArrayAttrGetNumElements(largest);
         ++k) {
      MlirStringRef text =
          mlirStringAttrGetValue(mlirArrayAttrGetElement(largest, k));
      emit(&p, "    %.*s\n", (int)text.length, text.data);
    }
    emit(&p, "  %lld collective%s%s, %lld bytes moved, %.3f us modelled\n",
         (long long)count, count == 1 ? "" : "s", callees,
         (long long)intField(r, "bytes_moved"), floatField(r, "modelled_us"));
    mlirOperationWalk(f, printCollective, &p, MlirWalkPreOrder);
  }
  return reported;
}
