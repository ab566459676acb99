/* dtensor-gathers: every lookup by computed indices becomes one
 * dtensor.gather, whose operands name the table and the indices, so
 * propagation, partition and autodiff see them (docs/gather.md):
 *
 * - tensor.gather %src[%idx] gather_dims([...]): one index tensor per
 *   gathered dim (a slice of %idx), the result expanded back when the op
 *   keeps the gathered dims as ones;
 * - tosa.gather: "nkc,nw->nwc";
 * - a tensor.extract in a linalg.generic body of a tensor defined outside
 *   the generic: an index that is a linalg.index of its own loop reads that
 *   loop; any other is computed by a linalg.generic over the loops it
 *   depends on (a copy of the body's ops that compute it), which gives an
 *   index tensor; the gather's result is read by the generic as a new input
 *   in place of the extract. When every index is a loop, the tensor itself
 *   becomes the input. An extract this cannot take apart (an index read
 *   from an accumulator, or inside a nested region) stays; dtensor-partition
 *   says so if its tensor is sharded. */
#include "Gathers.h"
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Template.h"
#include "Util.h"

#include "mlir-c/AffineExpr.h"
#include "mlir-c/AffineMap.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/Linalg.h"
#include "mlir-c/Dialect/Tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_SIZE (32 * 1024)
#define MAX_LOOPS 16
#define MAX_NEW 16
#define MAX_CHAIN 256

/* ---- tensor.gather and tosa.gather --------------------------------------- */

static void shapeText(DtBuf *t, MlirType type, int from, int to,
                      const char *elem) {
  dtBufPrintf(t, "tensor<");
  for (int d = from; d < to; ++d)
    dtBufPrintf(t, "%lldx", (long long)mlirShapedTypeGetDimSize(type, d));
  dtBufPrintf(t, "%s>", elem);
}

/* tensor<B...x1xelem>: the indices' batch dims and one coordinate. */
static void unitSliceText(DtBuf *t, MlirType idx, int nb, const char *elem) {
  dtBufPrintf(t, "tensor<");
  for (int d = 0; d < nb; ++d)
    dtBufPrintf(t, "%lldx", (long long)mlirShapedTypeGetDimSize(idx, d));
  dtBufPrintf(t, "1x%s>", elem);
}

/* %i0.. %i<k-1>: coordinate j of the index tensor %idx ([B..., k]) as a
 * tensor [B...] of `ie` elements (i64 when %idx holds index). */
static void indexSlicesText(DtBuf *t, MlirType idx, int k, const char *ie,
                            bool isIndex) {
  int m = (int)mlirShapedTypeGetRank(idx), nb = m - 1;
  char ty[512];
  const char *idxName = "%idx";
  if (isIndex) {
    dtTypePrint(idx, ty, sizeof(ty));
    dtBufPrintf(t, "  %%idx64 = arith.index_cast %%idx : %s to ", ty);
    shapeText(t, idx, 0, m, ie);
    dtBufPrintf(t, "\n");
    idxName = "%idx64";
  }
  for (int j = 0; j < k; ++j) {
    dtBufPrintf(t, "  %%s%d = tensor.extract_slice %s[", j, idxName);
    for (int d = 0; d < m; ++d)
      dtBufPrintf(t, "%s%d", d ? ", " : "", d == m - 1 ? j : 0);
    dtBufPrintf(t, "] [");
    for (int d = 0; d < m; ++d)
      dtBufPrintf(t, "%s%lld", d ? ", " : "",
                  d == m - 1 ? 1LL
                             : (long long)mlirShapedTypeGetDimSize(idx, d));
    dtBufPrintf(t, "] [");
    for (int d = 0; d < m; ++d)
      dtBufPrintf(t, "%s1", d ? ", " : "");
    dtBufPrintf(t, "] : ");
    shapeText(t, idx, 0, m, ie);
    dtBufPrintf(t, " to ");
    unitSliceText(t, idx, nb, ie);
    dtBufPrintf(t, "\n  %%i%d = tensor.collapse_shape %%s%d [", j, j);
    for (int d = 0; d < nb; ++d) {
      if (d + 1 < nb)
        dtBufPrintf(t, "%s[%d]", d ? ", " : "", d);
      else
        dtBufPrintf(t, "%s[%d, %d]", d ? ", " : "", d, d + 1);
    }
    dtBufPrintf(t, "] : ");
    unitSliceText(t, idx, nb, ie);
    dtBufPrintf(t, " into ");
    shapeText(t, idx, 0, nb, ie);
    dtBufPrintf(t, "\n");
  }
}

/* What tensor.gather and tensor.scatter share: the table (gather's
 * source, scatter's destination) of rank n, the indices [B..., k] (nb
 * batch dims), the dims they select, and the other side (gather's result,
 * scatter's source) rank-reduced or keeping the selected dims as ones. */
typedef struct Lookup {
  MlirType table, idx, other;
  int n, nb, k;
  bool picked[DTENSOR_MAX_TENSOR_RANK];
  bool reduced, isIndex;
  char e[64], ie[64]; /* element types: the table's, the indices' (i64) */
} Lookup;

static const char *readLookup(MlirOperation op, MlirType table, MlirType idx,
                              MlirType other, const char *dimsName, Lookup *l) {
  MlirAttribute dimsAttr = dtGetAttr(op, dimsName);
  if (!mlirShapedTypeHasStaticShape(table) ||
      !mlirShapedTypeHasStaticShape(idx) ||
      !mlirShapedTypeHasStaticShape(other))
    return "has dynamic sizes; only static shapes are compiled";
  l->table = table, l->idx = idx, l->other = other;
  l->n = (int)mlirShapedTypeGetRank(table);
  int m = (int)mlirShapedTypeGetRank(idx);
  l->k = mlirAttributeIsNull(dimsAttr)
             ? -1
             : (int)mlirDenseArrayGetNumElements(dimsAttr);
  l->nb = m - 1;
  if (m < 1 || l->k < 1 || l->k > DT_MAX_GATHER_INDICES ||
      mlirShapedTypeGetDimSize(idx, m - 1) != l->k)
    return "has malformed or too many (more than 8) dims to index";
  if (l->nb + l->n > 26)
    return "has more than 26 dims in its indices and table";
  memset(l->picked, 0, sizeof(l->picked));
  for (int j = 0; j < l->k; ++j) {
    int64_t g = mlirDenseI64ArrayGetElement(dimsAttr, j);
    if (g < 0 || g >= l->n)
      return "indexes a dim out of range";
    l->picked[g] = true;
  }
  int rank = (int)mlirShapedTypeGetRank(other);
  l->reduced = rank == l->nb + l->n - l->k;
  if (!l->reduced && rank != l->nb + l->n)
    return "has a result or source of neither rank the indices give";
  dtTypePrint(mlirShapedTypeGetElementType(table), l->e, sizeof(l->e));
  /* Index elements become i64, which the runtime carries (a sharded
   * index tensor moves like any other). */
  l->isIndex = mlirTypeIsAIndex(mlirShapedTypeGetElementType(idx));
  snprintf(l->ie, sizeof(l->ie), "i64");
  if (!l->isIndex)
    dtTypePrint(mlirShapedTypeGetElementType(idx), l->ie, sizeof(l->ie));
  return NULL;
}

/* `dims` of the lookup (the batch dims a.., then the table's): the table,
 * one index tensor per selected dim, then (`scatter`) the updates and the
 * table again, or the result. */
static void lookupDims(const Lookup *l, bool scatter, char *out, size_t size) {
  DtBuf dd = dtBufInit(out, size);
  for (int d = 0; d < l->n; ++d)
    dtBufPrintf(&dd, "%c", 'a' + l->nb + d);
  for (int j = 0; j < l->k; ++j) {
    dtBufPrintf(&dd, ",");
    for (int d = 0; d < l->nb; ++d)
      dtBufPrintf(&dd, "%c", 'a' + d);
  }
  dtBufPrintf(&dd, scatter ? "," : "->");
  for (int d = 0; d < l->nb; ++d)
    dtBufPrintf(&dd, "%c", 'a' + d);
  for (int d = 0; d < l->n; ++d)
    if (!l->picked[d])
      dtBufPrintf(&dd, "%c", 'a' + l->nb + d);
  if (scatter) {
    dtBufPrintf(&dd, "->");
    for (int d = 0; d < l->n; ++d)
      dtBufPrintf(&dd, "%c", 'a' + l->nb + d);
  }
}

/* The rank-reduced type of the other side: [B..., unselected dims]. */
static void reducedType(const Lookup *l, char *out, size_t size) {
  DtBuf g = dtBufInit(out, size);
  dtBufPrintf(&g, "tensor<");
  for (int d = 0; d < l->nb; ++d)
    dtBufPrintf(&g, "%lldx", (long long)mlirShapedTypeGetDimSize(l->idx, d));
  for (int d = 0; d < l->n; ++d)
    if (!l->picked[d])
      dtBufPrintf(&g, "%lldx",
                  (long long)mlirShapedTypeGetDimSize(l->table, d));
  dtBufPrintf(&g, "%s>", l->e);
}

/* The reassociation between the reduced type and the one with unit dims:
 * each kept dim starts a group, a unit dim joins the group before it (the
 * first when none is before). */
static void unitGroupsText(DtBuf *t, const Lookup *l) {
  int groupOf[2 * DTENSOR_MAX_TENSOR_RANK];
  int group = -1, total = l->nb + l->n, reducedRank = l->nb + l->n - l->k;
  for (int r = 0; r < total; ++r) {
    if (r < l->nb || !l->picked[r - l->nb])
      ++group;
    groupOf[r] = group;
  }
  dtBufPrintf(t, "[");
  for (int q = 0; q < reducedRank; ++q) {
    dtBufPrintf(t, "%s[", q ? ", " : "");
    bool first = true;
    for (int r = 0; r < total; ++r)
      if (groupOf[r] == q || (q == 0 && groupOf[r] < 0)) {
        dtBufPrintf(t, "%s%d", first ? "" : ", ", r);
        first = false;
      }
    dtBufPrintf(t, "]");
  }
  dtBufPrintf(t, "]");
}

/* The index tensors' types, ", T" each, into the template. */
static void indexTypesText(DtBuf *t, const Lookup *l) {
  for (int j = 0; j < l->k; ++j) {
    dtBufPrintf(t, ", ");
    shapeText(t, l->idx, 0, l->nb, l->ie);
  }
}

/* The template of a tensor.gather; NULL, or why it has none. */
static const char *tensorGatherTemplate(MlirOperation op, DtBuf *t) {
  MlirType src = mlirValueGetType(mlirOperationGetOperand(op, 0));
  MlirType idx = mlirValueGetType(mlirOperationGetOperand(op, 1));
  MlirType res = mlirValueGetType(mlirOperationGetResult(op, 0));
  Lookup l;
  const char *why = readLookup(op, src, idx, res, "gather_dims", &l);
  if (why)
    return why;
  char ty[512], dims[128], gt[512];
  static const char *const kNames[] = {"src", "idx"};
  dtTemplateSignature(t, "make", op, kNames);
  indexSlicesText(t, idx, l.k, l.ie, l.isIndex);
  lookupDims(&l, false, dims, sizeof(dims));
  reducedType(&l, gt, sizeof(gt));
  dtBufPrintf(t, "  %%g = \"dtensor.gather\"(%%src");
  for (int j = 0; j < l.k; ++j)
    dtBufPrintf(t, ", %%i%d", j);
  dtTypePrint(src, ty, sizeof(ty));
  dtBufPrintf(t, ") {dims = \"%s\"} : (%s", dims, ty);
  indexTypesText(t, &l);
  dtBufPrintf(t, ") -> %s\n", gt);
  if (l.reduced) {
    dtBufPrintf(t, "  return %%g : %s\n}\n", gt);
    return NULL;
  }
  dtBufPrintf(t, "  %%r = tensor.expand_shape %%g ");
  unitGroupsText(t, &l);
  dtBufPrintf(t, " output_shape [");
  for (int r = 0; r < l.nb + l.n; ++r)
    dtBufPrintf(t, "%s%lld", r ? ", " : "",
                (long long)mlirShapedTypeGetDimSize(res, r));
  dtTypePrint(res, ty, sizeof(ty));
  dtBufPrintf(t, "] : %s into %s\n  return %%r : %s\n}\n", gt, ty, ty);
  return NULL;
}

/* An overwriting scatter as two scatter_adds, so it shards, is
 * differentiated and checks its indices as they do: which elements the
 * updates hit (a scatter_add of ones into zeros), those elements of the
 * destination zeroed, then the updates added there. The indices are
 * unique (tensor.scatter's `unique`, tosa.scatter's rule), so each hit
 * element takes its update; an index out of range is dropped. `%dest`,
 * `%u` (the rank-reduced updates) and the index tensors %i0.. are defined;
 * the result is %r. */
static const char *overwriteText(DtBuf *t, MlirType dest, const char *updType,
                                 const char *dims, int k,
                                 const char *indexTypes) {
  MlirType elem = mlirShapedTypeGetElementType(dest);
  bool isFloat = mlirTypeIsAFloat(elem);
  if (!isFloat &&
      !(mlirTypeIsAInteger(elem) && mlirIntegerTypeGetWidth(elem) > 1))
    return "overwrites elements of a type a scatter does not add (floats "
           "and integers wider than i1)";
  char e[64], dt[512];
  dtTypePrint(elem, e, sizeof(e));
  dtTypePrint(dest, dt, sizeof(dt));
  char ids[128];
  DtBuf ib = dtBufInit(ids, sizeof(ids));
  for (int j = 0; j < k; ++j)
    dtBufPrintf(&ib, ", %%i%d", j);
  dtBufPrintf(t,
              "  %%zc = arith.constant %s : %s\n"
              "  %%oc = arith.constant %s : %s\n"
              "  %%zeros = tensor.splat %%zc : %s\n"
              "  %%ones = tensor.splat %%oc : %s\n",
              isFloat ? "0.0" : "0", e, isFloat ? "1.0" : "1", e, dt, updType);
  dtBufPrintf(t,
              "  %%hit = \"dtensor.scatter_add\"(%%zeros%s, %%ones) {dims = "
              "\"%s\"} : (%s%s, %s) -> %s\n",
              ids, dims, dt, indexTypes, updType, dt);
  dtBufPrintf(t, "  %%c = %s %%hit, %%zeros : %s\n",
              isFloat ? "arith.cmpf one," : "arith.cmpi ne,", dt);
  char mask[512];
  snprintf(mask, sizeof(mask), "%s", dt);
  char *x = strrchr(mask, 'x');
  if (x)
    snprintf(x + 1, sizeof(mask) - (size_t)(x + 1 - mask), "i1>");
  dtBufPrintf(t, "  %%cleared = arith.select %%c, %%zeros, %%dest : %s, %s\n",
              mask, dt);
  dtBufPrintf(t,
              "  %%r = \"dtensor.scatter_add\"(%%cleared%s, %%u) {dims = "
              "\"%s\"} : (%s%s, %s) -> %s\n  return %%r : %s\n}\n",
              ids, dims, dt, indexTypes, updType, dt, dt);
  return NULL;
}

/* The template of a tensor.scatter (source, destination, indices). */
static const char *tensorScatterTemplate(MlirOperation op, DtBuf *t) {
  MlirType src = mlirValueGetType(mlirOperationGetOperand(op, 0));
  MlirType dest = mlirValueGetType(mlirOperationGetOperand(op, 1));
  MlirType idx = mlirValueGetType(mlirOperationGetOperand(op, 2));
  Lookup l;
  const char *why = readLookup(op, dest, idx, src, "scatter_dims", &l);
  if (why)
    return why;
  if (mlirShapedTypeGetRank(dest) == 0)
    return "scatters into a 0-d tensor";
  char ty[512], dims[128], ut[512], types[1024];
  static const char *const kNames[] = {"src", "dest", "idx"};
  dtTemplateSignature(t, "make", op, kNames);
  indexSlicesText(t, idx, l.k, l.ie, l.isIndex);
  lookupDims(&l, true, dims, sizeof(dims));
  reducedType(&l, ut, sizeof(ut));
  if (l.reduced) {
    dtBufPrintf(t, "  %%u = tensor.cast %%src : %s to %s\n", ut, ut);
  } else {
    dtBufPrintf(t, "  %%u = tensor.collapse_shape %%src ");
    unitGroupsText(t, &l);
    dtTypePrint(src, ty, sizeof(ty));
    dtBufPrintf(t, " : %s into %s\n", ty, ut);
  }
  DtBuf tb = dtBufInit(types, sizeof(types));
  indexTypesText(&tb, &l);
  return overwriteText(t, dest, ut, dims, l.k, types);
}

/* tosa.scatter (values_in [N, K, C], indices [N, W], input [N, W, C]). */
static const char *tosaScatterTemplate(MlirOperation op, DtBuf *t) {
  MlirType dest = mlirValueGetType(mlirOperationGetOperand(op, 0));
  MlirType idx = mlirValueGetType(mlirOperationGetOperand(op, 1));
  MlirType upd = mlirValueGetType(mlirOperationGetOperand(op, 2));
  if (!mlirShapedTypeHasStaticShape(dest) ||
      !mlirShapedTypeHasStaticShape(idx) || !mlirShapedTypeHasStaticShape(upd))
    return "has dynamic sizes; only static shapes are compiled";
  char it[512], ut[512];
  dtTypePrint(idx, it, sizeof(it));
  dtTypePrint(upd, ut, sizeof(ut));
  static const char *const kNames[] = {"dest", "i0", "u"};
  dtTemplateSignature(t, "make", op, kNames);
  char types[600];
  snprintf(types, sizeof(types), ", %s", it);
  return overwriteText(t, dest, ut, "nkc,nw,nwc->nkc", 1, types);
}

/* tosa.gather (values [N, K, C], indices [N, W]): "nkc,nw->nwc". */
static const char *tosaGatherTemplate(MlirOperation op, DtBuf *t) {
  MlirType values = mlirValueGetType(mlirOperationGetOperand(op, 0));
  if (!mlirShapedTypeHasStaticShape(values) ||
      mlirShapedTypeGetRank(values) != 3)
    return "has dynamic sizes; only static shapes are compiled";
  static const char *const kNames[] = {"src", "idx"};
  dtTemplateSignature(t, "make", op, kNames);
  char v[512], ix[512], r[512];
  dtTypePrint(values, v, sizeof(v));
  dtTypePrint(mlirValueGetType(mlirOperationGetOperand(op, 1)), ix, sizeof(ix));
  dtTypePrint(mlirValueGetType(mlirOperationGetResult(op, 0)), r, sizeof(r));
  dtBufPrintf(t,
              "  %%g = \"dtensor.gather\"(%%src, %%idx) "
              "{dims = \"nkc,nw->nwc\"} : (%s, %s) -> %s\n"
              "  return %%g : %s\n}\n",
              v, ix, r, r);
  return NULL;
}

/* Replaces a tensor.gather, tensor.scatter, tosa.gather or tosa.scatter
 * by its template; false after a located error. */
static bool makeFromOp(MlirOperation op, char *text) {
  DtBuf t = dtBufInit(text, TEXT_SIZE);
  const char *why = NULL;
  if (dtIsOp(op, "tosa.gather")) {
    why = tosaGatherTemplate(op, &t);
  } else if (dtIsOp(op, "tensor.gather")) {
    why = tensorGatherTemplate(op, &t);
  } else if (dtIsOp(op, "tensor.scatter")) {
    why = tensorScatterTemplate(op, &t);
  } else {
    why = tosaScatterTemplate(op, &t);
  }
  if (why) {
    dtOpError(op, "%s", why);
    return false;
  }
  MlirValue args[3];
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op) && i < 3; ++i)
    args[i] = mlirOperationGetOperand(op, i);
  return dtTemplateReplace(op, &t, "make", args,
                           "made a dtensor.gather or scatter_add");
}

/* ---- lookups in linalg bodies -------------------------------------------- */

/* Whether `v` is defined inside `g` (in its regions). */
static bool definedInside(MlirValue v, MlirOperation g) {
  MlirOperation at =
      mlirValueIsABlockArgument(v)
          ? mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v))
          : mlirOperationGetParentOperation(mlirOpResultGetOwner(v));
  for (; !mlirOperationIsNull(at); at = mlirOperationGetParentOperation(at))
    if (mlirOperationEqual(at, g))
      return true;
  return false;
}

/* One generic being taken apart. */
typedef struct Generic {
  MlirOperation op;
  MlirBlock body;
  MlirContext ctx;
  MlirLocation loc;
  int numInputs, numOutputs, numLoops;
  int64_t loopSize[MAX_LOOPS];
  MlirAttribute maps;
  /* The new inputs, their maps, and the extracts they replace. */
  int numNew;
  MlirValue newInput[MAX_NEW];
  MlirAttribute newMap[MAX_NEW];
  MlirOperation replaced[MAX_NEW];
} Generic;

/* The loop dim a map result is (-1: not a plain dim). */
static int mapDim(MlirAffineMap map, intptr_t k) {
  MlirAffineExpr e = mlirAffineMapGetResult(map, k);
  return mlirAffineExprIsADim(e) ? (int)mlirAffineDimExprGetPosition(e) : -1;
}

static MlirAffineMap mapOf(const Generic *g, int operand) {
  return mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(g->maps, operand));
}

/* Reads the loops' sizes from the operands' shapes; false when one is not
 * static or no operand spans it. */
static bool loopSizes(Generic *g) {
  int n = g->numLoops;
  for (int d = 0; d < n; ++d)
    g->loopSize[d] = -1;
  for (int i = 0; i < g->numInputs + g->numOutputs; ++i) {
    MlirType t = mlirValueGetType(mlirOperationGetOperand(g->op, i));
    if (!mlirTypeIsARankedTensor(t))
      continue;
    MlirAffineMap m = mapOf(g, i);
    for (intptr_t k = 0; k < mlirAffineMapGetNumResults(m); ++k) {
      int d = mapDim(m, k);
      int64_t size = mlirShapedTypeGetDimSize(t, k);
      if (d >= 0 && size != mlirShapedTypeGetDynamicSize())
        g->loopSize[d] = size;
    }
  }
  for (int d = 0; d < n; ++d)
    if (g->loopSize[d] < 0)
      return false;
  return true;
}

/* What one index depends on: the loops (a bit each), the inputs it reads
 * and the body's ops that compute it. */
typedef struct Chain {
  uint32_t loops;
  uint64_t inputs;
  int numOps;
  MlirOperation ops[MAX_CHAIN];
} Chain;

static bool inChain(const Chain *c, MlirOperation op) {
  for (int i = 0; i < c->numOps; ++i)
    if (mlirOperationEqual(c->ops[i], op))
      return true;
  return false;
}

static bool pureDialect(MlirOperation op) {
  return dtIsOpIn(op, "arith.") || dtIsOpIn(op, "math.") ||
         dtIsOpIn(op, "index.");
}

/* Follows `v` back to the loops and inputs; false when it reads anything
 * else of the body (an accumulator, a nested region, an op with effects). */
static bool follow(const Generic *g, MlirValue v, Chain *c, int depth) {
  if (depth > 64 || !definedInside(v, g->op))
    return depth <= 64;
  if (mlirValueIsABlockArgument(v)) {
    if (!mlirBlockEqual(mlirBlockArgumentGetOwner(v), g->body))
      return false;
    int a = (int)mlirBlockArgumentGetArgNumber(v);
    if (a >= g->numInputs || a >= 64)
      return false;
    MlirAffineMap m = mapOf(g, a);
    for (intptr_t k = 0; k < mlirAffineMapGetNumResults(m); ++k) {
      int d = mapDim(m, k);
      if (d < 0)
        return false;
      c->loops |= 1u << d;
    }
    c->inputs |= 1ull << a;
    return true;
  }
  MlirOperation op = mlirOpResultGetOwner(v);
  if (!mlirBlockEqual(mlirOperationGetBlock(op), g->body))
    return false;
  if (inChain(c, op))
    return true;
  if (dtIsOp(op, "linalg.index")) {
    c->loops |= 1u << mlirIntegerAttrGetValueInt(dtGetAttr(op, "dim"));
  } else if (!pureDialect(op) || mlirOperationGetNumRegions(op) != 0 ||
             mlirOperationGetNumResults(op) != 1) {
    return false;
  }
  if (c->numOps == MAX_CHAIN)
    return false;
  c->ops[c->numOps++] = op;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i)
    if (!follow(g, mlirOperationGetOperand(op, i), c, depth + 1))
      return false;
  return true;
}

/* The position of loop `d` among the loops set in `loops`. */
static int rankIn(uint32_t loops, int d) {
  int r = 0;
  for (int k = 0; k < d; ++k)
    r += (loops >> k) & 1;
  return r;
}

static MlirType tensorOf(const Generic *g, uint32_t loops, MlirType elem) {
  int64_t shape[MAX_LOOPS];
  int n = 0;
  for (int d = 0; d < g->numLoops; ++d)
    if ((loops >> d) & 1)
      shape[n++] = g->loopSize[d];
  return mlirRankedTensorTypeGet(n, shape, elem, mlirAttributeGetNull());
}

/* A map from all the generic's loops to those in `loops`. */
static MlirAttribute projection(const Generic *g, uint32_t loops) {
  MlirAffineExpr exprs[MAX_LOOPS];
  int n = 0;
  for (int d = 0; d < g->numLoops; ++d)
    if ((loops >> d) & 1)
      exprs[n++] = mlirAffineDimExprGet(g->ctx, d);
  return mlirAffineMapAttrGet(
      mlirAffineMapGet(g->ctx, g->numLoops, 0, n, exprs));
}

/* A linalg.generic over the loops of `c` that computes `index` (an index
 * value of the body) into an i64 tensor of those loops (a type the
 * runtime carries), before the generic. */
static MlirValue indexTensor(Generic *g, const Chain *c, MlirValue index) {
  MlirContext ctx = g->ctx;
  uint32_t loops = c->loops;
  int n = __builtin_popcount(loops);
  MlirType i64 = mlirIntegerTypeGet(ctx, 64);
  MlirType out = tensorOf(g, loops, i64);
  MlirValue operands[65];
  MlirAttribute maps[65];
  MlirType argTypes[65];
  MlirLocation argLocs[65];
  int numIns = 0;
  MlirValue oldArgs[64];
  for (int a = 0; a < g->numInputs && a < 64; ++a) {
    if (!((c->inputs >> a) & 1))
      continue;
    operands[numIns] = mlirOperationGetOperand(g->op, a);
    MlirAffineMap m = mapOf(g, a);
    MlirAffineExpr exprs[DTENSOR_MAX_TENSOR_RANK];
    intptr_t nr = mlirAffineMapGetNumResults(m);
    for (intptr_t k = 0; k < nr; ++k)
      exprs[k] = mlirAffineDimExprGet(ctx, rankIn(loops, mapDim(m, k)));
    maps[numIns] = mlirAffineMapAttrGet(mlirAffineMapGet(ctx, n, 0, nr, exprs));
    oldArgs[numIns] = mlirBlockGetArgument(g->body, a);
    argTypes[numIns] = mlirValueGetType(oldArgs[numIns]);
    argLocs[numIns] = g->loc;
    ++numIns;
  }
  MlirValue empty = mlirOperationGetResult(
      dtOpCreate(g->op, g->loc, "tensor.empty", 0, NULL, 1, &out, 0, NULL), 0);
  operands[numIns] = empty;
  maps[numIns] = mlirAffineMapAttrGet(mlirAffineMapMultiDimIdentityGet(ctx, n));
  argTypes[numIns] = i64;
  argLocs[numIns] = g->loc;
  MlirBlock block = mlirBlockCreate(numIns + 1, argTypes, argLocs);
  /* The chain's ops in body order, reading the new block's arguments. */
  MlirValue from[MAX_CHAIN + 64], to[MAX_CHAIN + 64];
  int mapped = 0;
  for (int i = 0; i < numIns; ++i) {
    from[mapped] = oldArgs[i];
    to[mapped++] = mlirBlockGetArgument(block, i);
  }
  for (MlirOperation o = mlirBlockGetFirstOperation(g->body);
       !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (!inChain(c, o))
      continue;
    MlirOperation copy = mlirOperationClone(o);
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(copy); ++i) {
      MlirValue v = mlirOperationGetOperand(copy, i);
      for (int k = 0; k < mapped; ++k)
        if (mlirValueEqual(from[k], v))
          mlirOperationSetOperand(copy, i, to[k]);
    }
    if (dtIsOp(o, "linalg.index")) {
      int d = (int)mlirIntegerAttrGetValueInt(dtGetAttr(o, "dim"));
      mlirOperationSetAttributeByName(
          copy, mlirStringRefCreateFromCString("dim"),
          mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), rankIn(loops, d)));
    }
    mlirBlockAppendOwnedOperation(block, copy);
    from[mapped] = mlirOperationGetResult(o, 0);
    to[mapped++] = mlirOperationGetResult(copy, 0);
  }
  MlirValue yielded = index;
  for (int k = 0; k < mapped; ++k)
    if (mlirValueEqual(from[k], index))
      yielded = to[k];
  MlirOperation cast = dtOpCreateDetached(g->loc, "arith.index_cast", 1,
                                          &yielded, 1, &i64, 0, NULL);
  mlirBlockAppendOwnedOperation(block, cast);
  yielded = mlirOperationGetResult(cast, 0);
  mlirBlockAppendOwnedOperation(block,
                                dtOpCreateDetached(g->loc, "linalg.yield", 1,
                                                   &yielded, 0, NULL, 0, NULL));
  MlirAttribute parallel = mlirAttributeParseGet(
      ctx, mlirStringRefCreateFromCString("#linalg.iterator_type<parallel>"));
  MlirAttribute iters[MAX_LOOPS];
  for (int d = 0; d < n; ++d)
    iters[d] = parallel;
  int32_t segments[2] = {numIns, 1};
  MlirNamedAttribute attrs[3] = {
      dtNamedAttr(ctx, "indexing_maps",
                  mlirArrayAttrGet(ctx, numIns + 1, maps)),
      dtNamedAttr(ctx, "iterator_types", mlirArrayAttrGet(ctx, n, iters)),
      dtNamedAttr(ctx, "operandSegmentSizes",
                  mlirDenseI32ArrayGet(ctx, 2, segments))};
  MlirOperationState st = mlirOperationStateGet(
      mlirStringRefCreateFromCString("linalg.generic"), g->loc);
  mlirOperationStateAddOperands(&st, numIns + 1, operands);
  mlirOperationStateAddResults(&st, 1, &out);
  mlirOperationStateAddAttributes(&st, 3, attrs);
  MlirRegion region = mlirRegionCreate();
  mlirRegionAppendOwnedBlock(region, block);
  mlirOperationStateAddOwnedRegions(&st, 1, &region);
  MlirOperation made = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(g->op), g->op,
                                      made);
  return mlirOperationGetResult(made, 0);
}

/* Takes extract `x` apart if it reads a tensor from outside by indices
 * this can compute; false only when out of room for new inputs. */
static bool takeApart(Generic *g, MlirOperation x) {
  MlirValue table = mlirOperationGetOperand(x, 0);
  MlirType tt = mlirValueGetType(table);
  int rank = (int)mlirOperationGetNumOperands(x) - 1;
  if (definedInside(table, g->op) || !mlirTypeIsARankedTensor(tt) ||
      !mlirShapedTypeHasStaticShape(tt) || g->numNew == MAX_NEW)
    return g->numNew < MAX_NEW;
  int follows[DTENSOR_MAX_TENSOR_RANK]; /* the loop, or -1: gathered */
  uint32_t used = 0;
  int numGathered = 0;
  Chain chains[DT_MAX_GATHER_INDICES];
  MlirValue indices[DT_MAX_GATHER_INDICES];
  for (int j = 0; j < rank; ++j) {
    MlirValue e = mlirOperationGetOperand(x, 1 + j);
    follows[j] = -1;
    if (!mlirValueIsABlockArgument(e) &&
        dtIsOp(mlirOpResultGetOwner(e), "linalg.index") &&
        mlirBlockEqual(mlirOperationGetBlock(mlirOpResultGetOwner(e)),
                       g->body)) {
      int d = (int)mlirIntegerAttrGetValueInt(
          dtGetAttr(mlirOpResultGetOwner(e), "dim"));
      if (!((used >> d) & 1)) {
        follows[j] = d;
        used |= 1u << d;
        continue;
      }
    }
    if (numGathered == DT_MAX_GATHER_INDICES)
      return true;
    Chain *c = &chains[numGathered];
    c->loops = 0;
    c->inputs = 0;
    c->numOps = 0;
    if (!follow(g, e, c, 0))
      return true;
    indices[numGathered++] = e;
  }
  int slot = g->numNew;
  if (numGathered == 0) {
    /* A plain read: the tensor itself, at its loops. */
    MlirAffineExpr exprs[DTENSOR_MAX_TENSOR_RANK];
    for (int j = 0; j < rank; ++j)
      exprs[j] = mlirAffineDimExprGet(g->ctx, follows[j]);
    g->newInput[slot] = table;
    g->newMap[slot] = mlirAffineMapAttrGet(
        mlirAffineMapGet(g->ctx, g->numLoops, 0, rank, exprs));
    g->replaced[slot] = x;
    g->numNew++;
    return true;
  }
  /* The index tensors all span the loops any of them depends on (the op
   * takes them of one type). Letters: loop d is 'a' + d; the gathered
   * dims 'q'... */
  uint32_t indexLoops = 0;
  uint64_t indexInputs = 0;
  for (int k = 0; k < numGathered; ++k) {
    indexLoops |= chains[k].loops;
    indexInputs |= chains[k].inputs;
  }
  uint32_t resultLoops = used | indexLoops;
  char dims[256];
  DtBuf t = dtBufInit(dims, sizeof(dims));
  for (int j = 0, k = 0; j < rank; ++j)
    dtBufPrintf(&t, "%c", follows[j] >= 0 ? 'a' + follows[j] : 'q' + k++);
  for (int k = 0; k < numGathered; ++k) {
    dtBufPrintf(&t, ",");
    for (int d = 0; d < g->numLoops; ++d)
      if ((indexLoops >> d) & 1)
        dtBufPrintf(&t, "%c", 'a' + d);
  }
  dtBufPrintf(&t, "->");
  for (int d = 0; d < g->numLoops; ++d)
    if ((resultLoops >> d) & 1)
      dtBufPrintf(&t, "%c", 'a' + d);
  MlirValue operands[1 + DT_MAX_GATHER_INDICES];
  operands[0] = table;
  for (int k = 0; k < numGathered; ++k) {
    chains[k].loops = indexLoops;
    chains[k].inputs = indexInputs;
    operands[1 + k] = indexTensor(g, &chains[k], indices[k]);
  }
  MlirType result = tensorOf(g, resultLoops, mlirShapedTypeGetElementType(tt));
  MlirNamedAttribute attr = dtNamedAttr(
      g->ctx, "dims",
      mlirStringAttrGet(g->ctx, mlirStringRefCreateFromCString(dims)));
  MlirOperation gather =
      dtOpCreate(g->op, mlirOperationGetLocation(x), DT_OP_GATHER,
                 1 + numGathered, operands, 1, &result, 1, &attr);
  g->newInput[slot] = mlirOperationGetResult(gather, 0);
  g->newMap[slot] = projection(g, resultLoops);
  g->replaced[slot] = x;
  g->numNew++;
  return true;
}

/* Rebuilds the generic with its new inputs after the old ones; each
 * replaced extract reads the new block argument instead. */
static void rebuild(Generic *g) {
  MlirValue operands[64];
  MlirAttribute maps[64];
  int numIns = g->numInputs, n = 0; /* hoistFrom checked the count */
  for (int i = 0; i < numIns; ++i) {
    operands[n] = mlirOperationGetOperand(g->op, i);
    maps[n++] = mlirArrayAttrGetElement(g->maps, i);
  }
  for (int k = 0; k < g->numNew; ++k) {
    operands[n] = g->newInput[k];
    maps[n++] = g->newMap[k];
    MlirValue x = mlirOperationGetResult(g->replaced[k], 0);
    MlirValue arg = mlirBlockInsertArgument(g->body, (unsigned)(numIns + k),
                                            mlirValueGetType(x), g->loc);
    mlirValueReplaceAllUsesOfWith(x, arg);
    mlirOperationDestroy(g->replaced[k]);
  }
  for (int k = 0; k < g->numOutputs; ++k) {
    operands[n] = mlirOperationGetOperand(g->op, numIns + k);
    maps[n++] = mlirArrayAttrGetElement(g->maps, numIns + k);
  }
  dtGenericRebuild(g->op, n, operands, maps, numIns + g->numNew);
}

static void hoistFrom(MlirOperation op) {
  Generic g = {.op = op,
               .ctx = mlirOperationGetContext(op),
               .loc = mlirOperationGetLocation(op)};
  g.numOutputs = (int)mlirOperationGetNumResults(op);
  g.numInputs = (int)mlirOperationGetNumOperands(op) - g.numOutputs;
  g.maps = dtGetAttr(op, "indexing_maps");
  MlirAttribute iters = dtGetAttr(op, "iterator_types");
  if (g.numOutputs == 0 || mlirAttributeIsNull(g.maps) ||
      mlirAttributeIsNull(iters) ||
      mlirArrayAttrGetNumElements(g.maps) != g.numInputs + g.numOutputs)
    return;
  g.numLoops = (int)mlirArrayAttrGetNumElements(iters);
  g.body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (g.numLoops > MAX_LOOPS || g.numInputs + g.numOutputs + MAX_NEW > 64 ||
      !loopSizes(&g))
    return;
  for (MlirOperation o = mlirBlockGetFirstOperation(g.body);
       !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o))
    if (dtIsOp(o, "tensor.extract") && !takeApart(&g, o))
      break;
  if (g.numNew)
    rebuild(&g);
}

/* ---- the pass ------------------------------------------------------------ */

typedef struct Found {
  DtOpList ops;      /* tensor.gather, tosa.gather */
  DtOpList generics; /* generics whose body reads a tensor from outside */
  bool hoist;
} Found;

/* Whether a generic's body extracts from a tensor defined outside it. */
static bool readsOutside(MlirOperation g) {
  if (mlirOperationGetNumRegions(g) != 1)
    return false;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(g, 0));
  for (MlirOperation o = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o))
    if (dtIsOp(o, "tensor.extract") &&
        !definedInside(mlirOperationGetOperand(o, 0), g))
      return true;
  return false;
}

static bool isGatherOrScatter(MlirOperation op) {
  return dtIsOp(op, "tensor.gather") || dtIsOp(op, "tosa.gather") ||
         dtIsOp(op, "tensor.scatter") || dtIsOp(op, "tosa.scatter");
}

static bool hoistsFrom(MlirOperation op) {
  return dtIsOp(op, "linalg.generic") && readsOutside(op);
}

bool dtGathersFinds(MlirOperation op, bool hoist) {
  return isGatherOrScatter(op) || (hoist && hoistsFrom(op));
}

static MlirWalkResult collect(MlirOperation op, void *userData) {
  Found *f = userData;
  if (isGatherOrScatter(op)) {
    if (!dtOpListPush(&f->ops, op))
      return MlirWalkResultInterrupt;
  } else if (f->hoist && hoistsFrom(op) && !dtOpListPush(&f->generics, op)) {
    return MlirWalkResultInterrupt;
  }
  return MlirWalkResultAdvance;
}

bool dtGathersMake(MlirOperation root, bool hoist) {
  Found f = {{NULL, 0, 0}, {NULL, 0, 0}, hoist};
  mlirOperationWalk(root, collect, &f, MlirWalkPreOrder);
  bool ok = true;
  char *text = f.ops.count ? malloc(TEXT_SIZE) : NULL;
  if (f.ops.count && !text) {
    dtOpError(f.ops.ops[0], "out of memory");
    ok = false;
  }
  for (size_t i = 0; i < f.ops.count && ok; ++i)
    ok = makeFromOp(f.ops.ops[i], text);
  free(text);
  /* Inner generics first: taking an outer one apart rebuilds it (its
   * body moves, the inner ones with it). */
  for (size_t i = f.generics.count; i-- > 0 && ok;)
    hoistFrom(f.generics.ops[i]);
  free(f.ops.ops);
  free(f.generics.ops);
  return ok;
}

static bool runGathers(MlirOperation root, const DtPassOptions *options) {
  (void)options;
  return dtGathersMake(root, true);
}

const DtPassDef dtGathersPass = {
    .info = {"dtensor-gathers",
             "Make a dtensor.gather of each tensor.gather, tosa.gather and "
             "lookup by computed index (tensor.extract) in a linalg.generic "
             "body, so propagation, partition and autodiff see the table",
             0, NULL},
    .verifyFirst = false,
    .run = runGathers,
    .numDependentDialects = 3,
    .dependentDialects = {mlirGetDialectHandle__arith__,
                          mlirGetDialectHandle__linalg__,
                          mlirGetDialectHandle__tensor__},
};
