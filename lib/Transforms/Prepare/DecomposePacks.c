/* dtensor-decompose-packs: every linalg.pack and linalg.unpack on tensors
 * becomes the ops it stands for — pack: a tensor.pad to whole tiles (with
 * its padding value), a tensor.expand_shape splitting each tiled dim into
 * (outer, tile), a linalg.transpose to (outer dims in outer_dims_perm
 * order, then the tiles); unpack: the inverse transpose, a
 * tensor.collapse_shape, and a tensor.extract_slice back to the
 * destination's size. Those ops have sharding rules and bufferize, which
 * linalg.pack does not (upstream decomposes it only in a test pass).
 * Dynamic sizes or tiles are refused with a located error. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Support/Support.h"
#include "Template.h"
#include "Util.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/Linalg.h"
#include "mlir-c/Dialect/Tensor.h"

#include <stdlib.h>
#include <string.h>

#define TEXT_SIZE (32 * 1024)

bool dtDecomposePacksFinds(MlirOperation op) {
  return dtIsOp(op, "linalg.pack") || dtIsOp(op, "linalg.unpack");
}

static MlirWalkResult collect(MlirOperation op, void *userData) {
  if (dtDecomposePacksFinds(op) && !dtOpListPush(userData, op))
    return MlirWalkResultInterrupt;
  return MlirWalkResultAdvance;
}

static int arrayOf(MlirOperation op, const char *name, int64_t *out) {
  MlirAttribute a = dtGetAttr(op, name);
  if (mlirAttributeIsNull(a))
    return -1;
  int n = (int)mlirDenseArrayGetNumElements(a);
  for (int i = 0; i < n && i < DTENSOR_MAX_TENSOR_RANK; ++i)
    out[i] = mlirDenseI64ArrayGetElement(a, i);
  return n;
}

static void tensorText(DtBuf *t, const int64_t *shape, int n, const char *e) {
  dtBufPrintf(t, "tensor<");
  for (int i = 0; i < n; ++i)
    dtBufPrintf(t, "%lldx", (long long)shape[i]);
  dtBufPrintf(t, "%s>", e);
}

/* What a pack or unpack does, read from the op: the unpacked shape (the
 * pack's source, the unpack's destination), the padded shape, the expanded
 * shape with its groups, and the permutation from expanded to packed. */
typedef struct Layout {
  int n, k;
  int64_t plain[DTENSOR_MAX_TENSOR_RANK], padded[DTENSOR_MAX_TENSOR_RANK];
  int64_t expanded[2 * DTENSOR_MAX_TENSOR_RANK];
  int64_t perm[2 * DTENSOR_MAX_TENSOR_RANK];
  int group[DTENSOR_MAX_TENSOR_RANK]; /* first expanded dim of each dim */
  bool tiled[DTENSOR_MAX_TENSOR_RANK];
  bool needsPad;
} Layout;

static const char *readLayout(MlirOperation op, MlirType plainType, Layout *l) {
  int64_t pos[DTENSOR_MAX_TENSOR_RANK], tiles[DTENSOR_MAX_TENSOR_RANK],
      outer[DTENSOR_MAX_TENSOR_RANK];
  l->n = (int)mlirShapedTypeGetRank(plainType);
  if (l->n > DTENSOR_MAX_TENSOR_RANK)
    return "has more dims than dtensor-decompose-packs handles";
  l->k = arrayOf(op, "inner_dims_pos", pos);
  int numTiles = arrayOf(op, "static_inner_tiles", tiles);
  int numOuter = arrayOf(op, "outer_dims_perm", outer);
  if (l->k < 0 || numTiles != l->k)
    return "has malformed inner_dims_pos or inner_tiles";
  for (int i = 0; i < l->k; ++i)
    if (tiles[i] == mlirShapedTypeGetDynamicSize() || tiles[i] <= 0)
      return "has dynamic tiles; only static ones are compiled";
  if (numOuter < 0)
    for (int d = 0; d < l->n; ++d)
      outer[d] = d;
  else if (numOuter != l->n)
    return "has an outer_dims_perm of the wrong length";
  int64_t tileOf[DTENSOR_MAX_TENSOR_RANK];
  memset(l->tiled, 0, sizeof(l->tiled));
  for (int i = 0; i < l->k; ++i) {
    if (pos[i] < 0 || pos[i] >= l->n || l->tiled[pos[i]])
      return "has an inner_dims_pos out of range or repeated";
    l->tiled[pos[i]] = true;
    tileOf[pos[i]] = tiles[i];
  }
  l->needsPad = false;
  int e = 0;
  for (int d = 0; d < l->n; ++d) {
    l->plain[d] = mlirShapedTypeGetDimSize(plainType, d);
    l->group[d] = e;
    if (!l->tiled[d]) {
      l->padded[d] = l->plain[d];
      l->expanded[e++] = l->plain[d];
      continue;
    }
    int64_t outerSize = (l->plain[d] + tileOf[d] - 1) / tileOf[d];
    l->padded[d] = outerSize * tileOf[d];
    l->needsPad |= l->padded[d] != l->plain[d];
    l->expanded[e++] = outerSize;
    l->expanded[e++] = tileOf[d];
  }
  /* Packed dim j < n: the outer part of dim outer[j]; n + i: the tile of
   * dim pos[i]. */
  for (int j = 0; j < l->n; ++j) {
    if (outer[j] < 0 || outer[j] >= l->n)
      return "has an outer_dims_perm out of range";
    l->perm[j] = l->group[outer[j]];
  }
  for (int i = 0; i < l->k; ++i)
    l->perm[l->n + i] = l->group[pos[i]] + 1;
  return NULL;
}

static void groups(DtBuf *t, const Layout *l) {
  dtBufPrintf(t, "[");
  for (int d = 0; d < l->n; ++d) {
    if (l->tiled[d])
      dtBufPrintf(t, "%s[%d, %d]", d ? ", " : "", l->group[d], l->group[d] + 1);
    else
      dtBufPrintf(t, "%s[%d]", d ? ", " : "", l->group[d]);
  }
  dtBufPrintf(t, "]");
}

/* The op's source and destination types and element type, printed. */
typedef struct Types {
  MlirType src, dst;
  char e[64], st[512], dt[512];
} Types;

static void readTypes(MlirOperation op, Types *ty) {
  ty->src = mlirValueGetType(mlirOperationGetOperand(op, 0));
  ty->dst = mlirValueGetType(mlirOperationGetOperand(op, 1));
  dtTypePrint(mlirShapedTypeGetElementType(ty->src), ty->e, sizeof(ty->e));
  dtTypePrint(ty->src, ty->st, sizeof(ty->st));
  dtTypePrint(ty->dst, ty->dt, sizeof(ty->dt));
}

static const char *packTemplate(MlirOperation op, DtBuf *t, bool *withPad) {
  Types ty;
  readTypes(op, &ty);
  const char *e = ty.e, *st = ty.st, *dt = ty.dt;
  Layout l;
  const char *why = readLayout(op, ty.src, &l);
  if (why)
    return why;
  *withPad = mlirOperationGetNumOperands(op) > 2;
  if (l.needsPad && !*withPad)
    return "does not tile its source evenly and has no padding_value";
  static const char *const kArgs[] = {"src", "dest", "pad"};
  dtTemplateSignature(t, "decompose", op, kArgs);
  const char *padded = "%src";
  if (l.needsPad) {
    int64_t high[DTENSOR_MAX_TENSOR_RANK] = {0},
            zeros[DTENSOR_MAX_TENSOR_RANK] = {0};
    for (int d = 0; d < l.n; ++d) {
      high[d] = l.padded[d] - l.plain[d];
      zeros[d] = 0;
    }
    dtBufPrintf(t, "  %%p = tensor.pad %%src low");
    dtBufPrintList(t, zeros, l.n);
    dtBufPrintf(t, " high");
    dtBufPrintList(t, high, l.n);
    dtBufPrintf(t, " {\n  ^bb0(");
    for (int d = 0; d < l.n; ++d)
      dtBufPrintf(t, "%s%%i%d: index", d ? ", " : "", d);
    dtBufPrintf(t, "):\n    tensor.yield %%pad : %s\n  } : %s to ", e, st);
    tensorText(t, l.padded, l.n, e);
    dtBufPrintf(t, "\n");
    padded = "%p";
  }
  dtBufPrintf(t, "  %%x = tensor.expand_shape %s ", padded);
  groups(t, &l);
  dtBufPrintf(t, " output_shape ");
  dtBufPrintList(t, l.expanded, l.n + l.k);
  dtBufPrintf(t, " : ");
  tensorText(t, l.padded, l.n, e);
  dtBufPrintf(t, " into ");
  tensorText(t, l.expanded, l.n + l.k, e);
  dtBufPrintf(t, "\n  %%r = linalg.transpose ins(%%x : ");
  tensorText(t, l.expanded, l.n + l.k, e);
  dtBufPrintf(t, ") outs(%%dest : %s) permutation = ", dt);
  dtBufPrintList(t, l.perm, l.n + l.k);
  dtBufPrintf(t, "\n  return %%r : %s\n}\n", dt);
  return NULL;
}

static const char *unpackTemplate(MlirOperation op, DtBuf *t) {
  Types ty;
  readTypes(op, &ty);
  const char *e = ty.e, *st = ty.st, *dt = ty.dt;
  Layout l;
  const char *why = readLayout(op, ty.dst, &l);
  if (why)
    return why;
  int64_t inverse[2 * DTENSOR_MAX_TENSOR_RANK] = {0};
  for (int j = 0; j < l.n + l.k; ++j)
    inverse[l.perm[j]] = j;
  static const char *const kArgs[] = {"src", "dest"};
  dtTemplateSignature(t, "decompose", op, kArgs);
  dtBufPrintf(t, "  %%e = tensor.empty() : ");
  tensorText(t, l.expanded, l.n + l.k, e);
  dtBufPrintf(t, "\n  %%x = linalg.transpose ins(%%src : %s) outs(%%e : ", st);
  tensorText(t, l.expanded, l.n + l.k, e);
  dtBufPrintf(t, ") permutation = ");
  dtBufPrintList(t, inverse, l.n + l.k);
  dtBufPrintf(t, "\n  %%c = tensor.collapse_shape %%x ");
  groups(t, &l);
  dtBufPrintf(t, " : ");
  tensorText(t, l.expanded, l.n + l.k, e);
  dtBufPrintf(t, " into ");
  tensorText(t, l.padded, l.n, e);
  dtBufPrintf(t, "\n");
  const char *result = "%c";
  if (l.needsPad) {
    int64_t zeros[DTENSOR_MAX_TENSOR_RANK] = {0},
            ones[DTENSOR_MAX_TENSOR_RANK] = {0};
    for (int d = 0; d < l.n; ++d) {
      zeros[d] = 0;
      ones[d] = 1;
    }
    dtBufPrintf(t, "  %%s = tensor.extract_slice %%c");
    dtBufPrintList(t, zeros, l.n);
    dtBufPrintf(t, " ");
    dtBufPrintList(t, l.plain, l.n);
    dtBufPrintf(t, " ");
    dtBufPrintList(t, ones, l.n);
    dtBufPrintf(t, " : ");
    tensorText(t, l.padded, l.n, e);
    dtBufPrintf(t, " to %s\n", dt);
    result = "%s";
  }
  dtBufPrintf(t, "  return %s : %s\n}\n", result, dt);
  return NULL;
}

bool dtDecomposePacks(MlirOperation root) {
  DtOpList found = {NULL, 0, 0};
  mlirOperationWalk(root, collect, &found, MlirWalkPreOrder);
  char *text = found.count ? malloc(TEXT_SIZE) : NULL;
  bool ok = !found.count || text;
  if (!ok)
    dtOpError(found.ops[0], "out of memory");
  for (size_t i = 0; i < found.count && ok; ++i) {
    MlirOperation op = found.ops[i];
    bool pack = dtIsOp(op, "linalg.pack"), withPad = false;
    if (mlirOperationGetNumResults(op) != 1) {
      dtOpError(op, "on memrefs: dtensor-decompose-packs runs on tensors");
      ok = false;
      break;
    }
    for (intptr_t k = 0; k < 2 && ok; ++k)
      if (!mlirShapedTypeHasStaticShape(
              mlirValueGetType(mlirOperationGetOperand(op, k)))) {
        dtOpError(op, "has dynamic sizes; only static shapes are compiled");
        ok = false;
      }
    if (!ok)
      break;
    DtBuf t = dtBufInit(text, TEXT_SIZE);
    const char *why =
        pack ? packTemplate(op, &t, &withPad) : unpackTemplate(op, &t);
    if (why) {
      dtOpError(op, "%s", why);
      ok = false;
      break;
    }
    MlirValue args[3] = {mlirOperationGetOperand(op, 0),
                         mlirOperationGetOperand(op, 1),
                         withPad ? mlirOperationGetOperand(op, 2)
                                 : mlirOperationGetOperand(op, 0)};
    ok = dtTemplateReplace(op, &t, "decompose", args, "decomposed");
  }
  free(text);
  free(found.ops);
  return ok;
}

static bool runDecomposePacks(MlirOperation root,
                              const DtPassOptions *options) {
  (void)options;
  return dtDecomposePacks(root);
}

const DtPassDef dtDecomposePacksPass = {
    .info = {"dtensor-decompose-packs",
             "Turn every linalg.pack and linalg.unpack on tensors into the "
             "pad, expand_shape and transpose (unpack: transpose, "
             "collapse_shape, extract_slice) they stand for",
             0, NULL},
    .verifyFirst = false,
    .run = runDecomposePacks,
    .numDependentDialects = 3,
    .dependentDialects = {mlirGetDialectHandle__func__,
                          mlirGetDialectHandle__linalg__,
                          mlirGetDialectHandle__tensor__},
};
