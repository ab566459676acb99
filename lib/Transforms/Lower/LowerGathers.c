/* dtensor-lower-gathers: dtensor.gather becomes a linalg.generic over its
 * result whose body reads the table by tensor.extract (out-of-range indices
 * read zero), and dtensor.scatter_add a nest of scf.for over the updates
 * that adds each in-range update into the destination — both on tensors,
 * before bufferization, written as a template per op (Template.h).
 * tensor.gather is made a dtensor.gather first (dtensor-gathers).
 * Dynamic sizes are refused with a located error. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Prepare/Gathers.h"
#include "Template.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/Linalg.h"
#include "mlir-c/Dialect/SCF.h"
#include "mlir-c/Dialect/Tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEMPLATE_SIZE (64 * 1024)

static MlirWalkResult collect(MlirOperation op, void *userData) {
  if ((dtIsOp(op, DT_OP_GATHER) || dtIsOp(op, DT_OP_SCATTER_ADD)) &&
      !dtOpListPush(userData, op))
    return MlirWalkResultInterrupt;
  return MlirWalkResultAdvance;
}

/* "0.0 : f32", "0 : i8": the zero of `elem`; false for other types. */
static bool zeroText(MlirType elem, DtBuf *t) {
  char e[64];
  dtTypePrint(elem, e, sizeof(e));
  if (mlirTypeIsAFloat(elem))
    dtBufPrintf(t, "0.0 : %s", e);
  else if (mlirTypeIsAInteger(elem) || mlirTypeIsAIndex(elem))
    dtBufPrintf(t, "%s : %s",
                mlirTypeIsAInteger(elem) && mlirIntegerTypeGetWidth(elem) == 1
                    ? "false"
                    : "0",
                e);
  else
    return false;
  return true;
}

/* The index `k` (%raw<k>) as an index, checked against the table dim's
 * size: %ok<k> (in range) and %l<k> (the position, 0 when out of range).
 * `elem` is the index tensor's element type. */
static void indexText(DtBuf *t, int k, MlirType elem, const char *indent) {
  char e[64];
  dtTypePrint(elem, e, sizeof(e));
  if (mlirTypeIsAIndex(elem))
    dtBufPrintf(t, "%s%%p%d = arith.addi %%raw%d, %%zero : index\n", indent, k,
                k);
  else
    dtBufPrintf(t, "%s%%p%d = arith.index_cast %%raw%d : %s to index\n", indent,
                k, k, e);
  dtBufPrintf(t,
              "%s%%lo%d = arith.cmpi sge, %%p%d, %%zero : index\n"
              "%s%%hi%d = arith.cmpi slt, %%p%d, %%size%d : index\n"
              "%s%%ok%d = arith.andi %%lo%d, %%hi%d : i1\n"
              "%s%%l%d = arith.select %%ok%d, %%p%d, %%zero : index\n",
              indent, k, k, indent, k, k, k, indent, k, k, k, indent, k, k, k);
}

/* The in-range flag of all indices: %all. */
static void allText(DtBuf *t, int n, const char *indent) {
  dtBufPrintf(t, "%s%%all0 = arith.andi %%ok0, %%true : i1\n", indent);
  for (int k = 1; k < n; ++k)
    dtBufPrintf(t, "%s%%all%d = arith.andi %%all%d, %%ok%d : i1\n", indent, k,
                k - 1, k);
  dtBufPrintf(t, "%s%%all = arith.andi %%all%d, %%true : i1\n", indent, n - 1);
}

static int position(const char *letters, char c) {
  const char *at = strchr(letters, c);
  return at ? (int)(at - letters) : -1;
}

/* The function header shared by both templates: the table or destination,
 * the index tensors, the updates (scatter); and the constants. */
static void headerText(DtBuf *t, MlirOperation op, const DtGatherDims *d) {
  char names[DT_MAX_GATHER_INDICES + 2][16];
  const char *args[DT_MAX_GATHER_INDICES + 2];
  for (int i = 0; i < 2 + d->numIndices; ++i) {
    if (i == 0)
      snprintf(names[i], sizeof(names[i]), "table");
    else if (i <= d->numIndices)
      snprintf(names[i], sizeof(names[i]), "index%d", i - 1);
    else
      snprintf(names[i], sizeof(names[i]), "updates");
    args[i] = names[i];
  }
  dtTemplateSignature(t, "lower", op, args);
  dtBufPrintf(t, "  %%zero = arith.constant 0 : index\n"
                 "  %%one = arith.constant 1 : index\n"
                 "  %%true = arith.constant true\n");
  MlirType table = mlirValueGetType(mlirOperationGetOperand(op, 0));
  for (int k = 0; k < d->numIndices; ++k)
    dtBufPrintf(t, "  %%size%d = arith.constant %lld : index\n", k,
                (long long)mlirShapedTypeGetDimSize(table, d->gathered[k]));
}

/* The table coordinates: a gathered dim's %l<k>, another dim's loop
 * `loopName`<position of its letter in `loops`>. */
static void coordsText(DtBuf *t, const DtGatherDims *d, const char *loops,
                       const char *loopName) {
  dtBufPrintf(t, "[");
  for (int i = 0; d->table[i]; ++i) {
    int k = -1;
    for (int j = 0; j < d->numIndices; ++j)
      if (d->gathered[j] == i)
        k = j;
    if (k >= 0)
      dtBufPrintf(t, "%s%%l%d", i ? ", " : "", k);
    else
      dtBufPrintf(t, "%s%%%s%d", i ? ", " : "", loopName,
                  position(loops, d->table[i]));
  }
  dtBufPrintf(t, "]");
}

static bool gatherTemplate(MlirOperation op, const DtGatherDims *d, DtBuf *t) {
  MlirType result = mlirValueGetType(mlirOperationGetResult(op, 0));
  MlirType table = mlirValueGetType(mlirOperationGetOperand(op, 0));
  MlirType elem = mlirShapedTypeGetElementType(result);
  char ty[512], e[64], zero[96];
  DtBuf z = dtBufInit(zero, sizeof(zero));
  if (!zeroText(elem, &z))
    return false;
  dtTypePrint(elem, e, sizeof(e));
  int rank = (int)strlen(d->other);
  headerText(t, op, d);
  dtTypePrint(result, ty, sizeof(ty));
  dtBufPrintf(t, "  %%pad = arith.constant %s\n", zero);
  dtBufPrintf(t, "  %%empty = tensor.empty() : %s\n", ty);
  dtBufPrintf(t, "  %%r = linalg.generic {indexing_maps = [");
  for (int k = 0; k <= d->numIndices; ++k) {
    const char *letters = k < d->numIndices ? d->index[k] : d->other;
    dtBufPrintf(t, "%saffine_map<(", k ? ", " : "");
    for (int i = 0; i < rank; ++i)
      dtBufPrintf(t, "%sd%d", i ? ", " : "", i);
    dtBufPrintf(t, ") -> (");
    for (int i = 0; letters[i]; ++i)
      dtBufPrintf(t, "%sd%d", i ? ", " : "", position(d->other, letters[i]));
    dtBufPrintf(t, ")>");
  }
  dtBufPrintf(t, "], iterator_types = [");
  for (int i = 0; i < rank; ++i)
    dtBufPrintf(t, "%s\"parallel\"", i ? ", " : "");
  dtBufPrintf(t, "]} ins(");
  for (int k = 0; k < d->numIndices; ++k)
    dtBufPrintf(t, "%s%%index%d", k ? ", " : "", k);
  dtBufPrintf(t, " : ");
  for (int k = 0; k < d->numIndices; ++k) {
    dtTypePrint(mlirValueGetType(mlirOperationGetOperand(op, 1 + k)), ty,
                sizeof(ty));
    dtBufPrintf(t, "%s%s", k ? ", " : "", ty);
  }
  dtTypePrint(result, ty, sizeof(ty));
  dtBufPrintf(t, ") outs(%%empty : %s) {\n  ^bb0(", ty);
  for (int k = 0; k < d->numIndices; ++k) {
    char ie[64];
    dtTypePrint(mlirShapedTypeGetElementType(
                    mlirValueGetType(mlirOperationGetOperand(op, 1 + k))),
                ie, sizeof(ie));
    dtBufPrintf(t, "%%raw%d: %s, ", k, ie);
  }
  dtBufPrintf(t, "%%out: %s):\n", e);
  for (int i = 0; i < rank; ++i)
    dtBufPrintf(t, "    %%i%d = linalg.index %d : index\n", i, i);
  for (int k = 0; k < d->numIndices; ++k)
    indexText(t, k,
              mlirShapedTypeGetElementType(
                  mlirValueGetType(mlirOperationGetOperand(op, 1 + k))),
              "    ");
  allText(t, d->numIndices, "    ");
  dtTypePrint(table, ty, sizeof(ty));
  dtBufPrintf(t, "    %%v = tensor.extract %%table");
  coordsText(t, d, d->other, "i");
  dtBufPrintf(t, " : %s\n", ty);
  dtBufPrintf(t,
              "    %%y = arith.select %%all, %%v, %%pad : %s\n"
              "    linalg.yield %%y : %s\n",
              e, e);
  dtTypePrint(result, ty, sizeof(ty));
  dtBufPrintf(t, "  } -> %s\n  return %%r : %s\n}\n", ty, ty);
  return true;
}

static bool scatterTemplate(MlirOperation op, const DtGatherDims *d, DtBuf *t) {
  MlirType dest = mlirValueGetType(mlirOperationGetOperand(op, 0));
  MlirType updates =
      mlirValueGetType(mlirOperationGetOperand(op, 1 + d->numIndices));
  MlirType elem = mlirShapedTypeGetElementType(dest);
  if (!(mlirTypeIsAFloat(elem) ||
        (mlirTypeIsAInteger(elem) && mlirIntegerTypeGetWidth(elem) > 1)))
    return false;
  const char *add = mlirTypeIsAFloat(elem) ? "arith.addf" : "arith.addi";
  char ty[512], e[64], ut[512];
  dtTypePrint(elem, e, sizeof(e));
  dtTypePrint(dest, ty, sizeof(ty));
  dtTypePrint(updates, ut, sizeof(ut));
  headerText(t, op, d);
  int rank = (int)strlen(d->other);
  for (int i = 0; i < rank; ++i)
    dtBufPrintf(t, "  %%n%d = arith.constant %lld : index\n", i,
                (long long)mlirShapedTypeGetDimSize(updates, i));
  /* One loop per dim of the updates, outermost first; loop i's
   * accumulator is %a<i + 1>, the destination's before the loops. */
  char indent[2 * DTENSOR_MAX_TENSOR_RANK + 8];
  memset(indent, ' ', sizeof(indent));
  int depth = 2;
  indent[depth] = '\0';
  for (int i = 0; i < rank; ++i) {
    dtBufPrintf(t,
                "%s%%r%d = scf.for %%u%d = %%zero to %%n%d step %%one "
                "iter_args(%%a%d = %%%s%.0d) -> (%s) {\n",
                indent, i, i, i, i + 1, i ? "a" : "table", i, ty);
    indent[depth] = ' ';
    depth += 2;
    indent[depth] = '\0';
  }
  char acc[16];
  if (rank)
    snprintf(acc, sizeof(acc), "a%d", rank);
  else
    snprintf(acc, sizeof(acc), "table");
  for (int k = 0; k < d->numIndices; ++k) {
    char it[512];
    dtTypePrint(mlirValueGetType(mlirOperationGetOperand(op, 1 + k)), it,
                sizeof(it));
    dtBufPrintf(t, "%s%%raw%d = tensor.extract %%index%d[", indent, k, k);
    for (int i = 0; d->index[k][i]; ++i)
      dtBufPrintf(t, "%s%%u%d", i ? ", " : "",
                  position(d->other, d->index[k][i]));
    dtBufPrintf(t, "] : %s\n", it);
    indexText(t, k,
              mlirShapedTypeGetElementType(
                  mlirValueGetType(mlirOperationGetOperand(op, 1 + k))),
              indent);
  }
  allText(t, d->numIndices, indent);
  dtBufPrintf(t, "%s%%w = scf.if %%all -> (%s) {\n", indent, ty);
  dtBufPrintf(t, "%s  %%v = tensor.extract %%updates[", indent);
  for (int i = 0; i < rank; ++i)
    dtBufPrintf(t, "%s%%u%d", i ? ", " : "", i);
  dtBufPrintf(t, "] : %s\n%s  %%old = tensor.extract %%%s", ut, indent, acc);
  coordsText(t, d, d->other, "u");
  dtBufPrintf(t, " : %s\n%s  %%s = %s %%old, %%v : %s\n", ty, indent, add, e);
  dtBufPrintf(t, "%s  %%new = tensor.insert %%s into %%%s", indent, acc);
  coordsText(t, d, d->other, "u");
  dtBufPrintf(t, " : %s\n%s  scf.yield %%new : %s\n", ty, indent, ty);
  dtBufPrintf(t, "%s} else {\n%s  scf.yield %%%s : %s\n%s}\n", indent, indent,
              acc, ty, indent);
  for (int i = rank - 1; i >= 0; --i) {
    if (i == rank - 1)
      dtBufPrintf(t, "%sscf.yield %%w : %s\n", indent, ty);
    else
      dtBufPrintf(t, "%sscf.yield %%r%d : %s\n", indent, i + 1, ty);
    depth -= 2;
    indent[depth] = '\0';
    dtBufPrintf(t, "%s}\n", indent);
  }
  dtBufPrintf(t, "  return %%%s : %s\n}\n", rank ? "r0" : "w", ty);
  return true;
}

/* Replaces `op` by its template; false after a located error. */
static bool lowerOne(MlirOperation op, char *text) {
  DtGatherDims d;
  if (!dtGatherDimsOf(op, &d))
    return false;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
    MlirType type = mlirValueGetType(mlirOperationGetOperand(op, i));
    if (mlirTypeIsAShaped(type) && !mlirShapedTypeHasStaticShape(type)) {
      dtOpError(op, "has dynamic sizes; only static shapes are compiled");
      return false;
    }
  }
  DtBuf t = dtBufInit(text, TEMPLATE_SIZE);
  bool made =
      d.scatter ? scatterTemplate(op, &d, &t) : gatherTemplate(op, &d, &t);
  if (!made) {
    char e[64];
    dtTypePrint(mlirShapedTypeGetElementType(
                    mlirValueGetType(mlirOperationGetOperand(op, 0))),
                e, sizeof(e));
    dtOpError(op, "on %s elements is not supported (%s)", e,
              d.scatter ? "a scatter_add adds floats or integers wider than "
                          "i1"
                        : "a gather reads float, integer or index elements");
    return false;
  }
  MlirValue args[DT_MAX_GATHER_INDICES + 2];
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i)
    args[i] = mlirOperationGetOperand(op, i);
  return dtTemplateReplace(op, &t, "lower", args, "lowered");
}

bool dtLowerGathers(MlirOperation root) {
  if (!dtGathersMake(root, false))
    return false;
  DtOpList found = {NULL, 0, 0};
  mlirOperationWalk(root, collect, &found, MlirWalkPreOrder);
  char *text = found.count ? malloc(TEMPLATE_SIZE) : NULL;
  bool ok = !found.count || text;
  if (!ok)
    dtOpError(found.ops[0], "cannot be lowered: out of memory");
  for (size_t i = 0; i < found.count && ok; ++i)
    ok = lowerOne(found.ops[i], text);
  free(text);
  free(found.ops);
  return ok;
}

static bool runLowerGathers(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  return dtLowerGathers(root);
}

const DtPassDef dtLowerGathersPass = {
    .info = {"dtensor-lower-gathers",
             "Lower dtensor.gather (and tensor.gather) to a linalg.generic "
             "that reads the table by tensor.extract, and "
             "dtensor.scatter_add to scf.for loops, on tensors",
             0, NULL},
    .verifyFirst = false,
    .run = runLowerGathers,
    .numDependentDialects = 4,
    .dependentDialects = {mlirGetDialectHandle__arith__,
                          mlirGetDialectHandle__linalg__,
                          mlirGetDialectHandle__scf__,
                          mlirGetDialectHandle__tensor__},
};
