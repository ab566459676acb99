/* dtensor-import-shard: programs annotated for MLIR's upstream `shard`
 * dialect become dtensor programs (docs/import.md): each `shard.grid`
 * becomes a `dtensor.mesh` of the same name and shape, each `shard.shard
 * %v to %s` a `dtensor.annotate` of %v with the layout that `%s`'s
 * `split_axes` give (grid axes per tensor dim, major first), and the
 * `shard.sharding` and `shard.grid` ops go. Halos, explicit shard offsets
 * and dynamic sizes have no dtensor layout: an error at the op. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Util.h"

#include "dtensor-c/Dialect.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Ops {
  MlirOperation *ops;
  size_t count, cap;
} Ops;

static void push(Ops *o, MlirOperation op) {
  if (o->count == o->cap) {
    o->cap = o->cap ? 2 * o->cap : 64;
    o->ops = realloc(o->ops, sizeof(MlirOperation) * o->cap);
  }
  o->ops[o->count++] = op;
}

typedef struct Found {
  Ops grids, shardings, shards, others; /* others: any other shard op */
} Found;

static MlirWalkResult collect(MlirOperation op, void *user) {
  Found *f = user;
  if (dtIsOp(op, "shard.grid"))
    push(&f->grids, op);
  else if (dtIsOp(op, "shard.sharding"))
    push(&f->shardings, op);
  else if (dtIsOp(op, "shard.shard"))
    push(&f->shards, op);
  else if (dtIsOpIn(op, "shard."))
    push(&f->others, op);
  return MlirWalkResultAdvance;
}

static bool emptyArray(MlirOperation op, const char *name) {
  MlirAttribute a = dtGetAttr(op, name);
  return mlirAttributeIsNull(a) || mlirDenseArrayGetNumElements(a) == 0;
}

/* The spec of a shard.sharding from its split_axes, printed as
 * `#shard<axisarray[[0], [], [1, 2]]>` (the C API cannot read the
 * attribute's parameters). */
static bool specOf(MlirOperation sharding, int rank, char *out, size_t size) {
  char text[1024];
  dtAttributePrint(dtGetAttr(sharding, "split_axes"), text, sizeof(text));
  const char *p = strstr(text, "axisarray[");
  if (!p)
    return false;
  p += strlen("axisarray[");
  int k = snprintf(out, size, "[");
  int d = 0;
  for (; *p == '['; ++d) {
    ++p;
    char axes[64] = "";
    int na = 0;
    while (*p && *p != ']') {
      char *end;
      long a = strtol(p, &end, 10);
      if (end == p)
        return false;
      na += snprintf(axes + na, sizeof(axes) - (size_t)na, "%s%ld",
                     na ? "," : "", a);
      p = end;
      while (*p == ',' || *p == ' ')
        ++p;
    }
    if (*p != ']')
      return false;
    ++p;
    while (*p == ',' || *p == ' ')
      ++p;
    if (d < rank)
      k += snprintf(out + k, size - (size_t)k, "%s%s%s%s", d ? ", " : "",
                    na ? "S(" : "R", axes, na ? ")" : "");
  }
  /* split_axes may stop before the last dims: those are whole. */
  for (; d < rank; ++d)
    k += snprintf(out + k, size - (size_t)k, "%sR", d ? ", " : "");
  snprintf(out + k, size - (size_t)k, "]");
  return true;
}

static bool runImportShard(MlirOperation module, const DtPassOptions *options) {
  (void)options;
  Found f = {{0}, {0}, {0}, {0}};
  mlirOperationWalk(module, collect, &f, MlirWalkPreOrder);
  MlirContext ctx = mlirOperationGetContext(module);
  bool ok = true;
  /* What else of the shard dialect a program holds (get_sharding, its
   * collectives, process indices) has no dtensor counterpart here: named
   * at its place rather than left in the per-device program. An unused
   * get_sharding reads nothing and goes. */
  for (size_t i = 0; i < f.others.count && ok; ++i) {
    MlirOperation op = f.others.ops[i];
    if (dtIsOp(op, "shard.get_sharding") &&
        mlirOpOperandIsNull(
            mlirValueGetFirstUse(mlirOperationGetResult(op, 0)))) {
      mlirOperationDestroy(op);
      continue;
    }
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
    dtEmitError(mlirOperationGetLocation(op),
                "'%.*s' op is not imported: "
                "dtensor-import-shard takes shard.grid, shard.sharding and "
                "shard.shard (state layouts with them; dtensor-spmd inserts "
                "the collectives)",
                (int)n.length, n.data);
    ok = false;
  }
  /* Meshes: same name and shape, axes named a0, a1, ... (so that a spec
   * can name them by position). */
  for (size_t i = 0; i < f.grids.count && ok; ++i) {
    MlirOperation g = f.grids.ops[i];
    MlirAttribute shape = dtGetAttr(g, "shape");
    MlirStringRef name = mlirStringAttrGetValue(dtGetAttr(g, "sym_name"));
    int rank = (int)mlirDenseArrayGetNumElements(shape);
    int64_t dims[DTENSOR_MAX_MESH_RANK];
    bool dynamic = rank > DTENSOR_MAX_MESH_RANK;
    for (int a = 0; a < rank && !dynamic; ++a)
      dynamic = (dims[a] = mlirDenseI64ArrayGetElement(shape, a)) < 1;
    DtensorDiag diag;
    DtensorMesh *mesh =
        dynamic ? NULL : dtensorMeshCreate(rank, dims, NULL, &diag);
    if (!mesh) {
      dtEmitError(mlirOperationGetLocation(g), "shard.grid @%.*s: %s",
                  (int)name.length, name.data,
                  dynamic ? "a grid of dynamic or more than 8 axes has no "
                            "dtensor mesh"
                          : diag.message);
      ok = false;
      break;
    }
    char sym[256];
    snprintf(sym, sizeof(sym), "%.*s", (int)name.length, name.data);
    MlirOperation meshOp =
        dtMeshOpCreate(module, mlirOperationGetLocation(g), sym, mesh);
    /* In place of the grid, so that symbol order is kept. */
    mlirOperationMoveBefore(meshOp, g);
    dtensorMeshDestroy(mesh);
  }
  /* Shardings: only split axes. */
  for (size_t i = 0; i < f.shardings.count && ok; ++i) {
    MlirOperation s = f.shardings.ops[i];
    if (mlirOperationGetNumOperands(s) || !emptyArray(s, "static_halo_sizes") ||
        !emptyArray(s, "static_sharded_dims_offsets")) {
      dtEmitError(mlirOperationGetLocation(s),
                  "shard.sharding with halo "
                  "sizes, explicit shard offsets or dynamic sizes has no "
                  "dtensor layout; only split_axes are imported");
      ok = false;
    }
  }
  /* Shard ops: annotations. */
  DtIds ids = dtIdsGet(ctx);
  MlirOperation *replaced = calloc(f.shards.count + 1, sizeof(MlirOperation));
  for (size_t i = 0; i < f.shards.count && ok; ++i) {
    MlirOperation sh = f.shards.ops[i];
    MlirValue value = mlirOperationGetOperand(sh, 0);
    MlirOperation sharding =
        mlirOperationGetNumOperands(sh) > 1
            ? mlirOpResultGetOwner(mlirOperationGetOperand(sh, 1))
            : (MlirOperation){NULL};
    MlirType type = mlirValueGetType(value);
    if (mlirOperationIsNull(sharding) || !dtIsOp(sharding, "shard.sharding") ||
        !mlirTypeIsARankedTensor(type)) {
      dtEmitError(mlirOperationGetLocation(sh),
                  "shard.shard of a value whose "
                  "sharding is not a shard.sharding op in this function, or "
                  "of a non-tensor, is not imported");
      ok = false;
      break;
    }
    char spec[512];
    int rank = (int)mlirShapedTypeGetRank(type);
    if (!specOf(sharding, rank, spec, sizeof(spec))) {
      dtEmitError(mlirOperationGetLocation(sh), "the split_axes of its "
                                                "shard.sharding do not read");
      ok = false;
      break;
    }
    MlirStringRef grid =
        mlirFlatSymbolRefAttrGetValue(dtGetAttr(sharding, "grid"));
    DtensorShardingSpec parsed;
    DtensorDiag diag;
    if (!dtensorShardingSpecParse(spec, NULL, &parsed, &diag)) {
      dtEmitError(mlirOperationGetLocation(sh), "split_axes %s: %s", spec,
                  diag.message);
      ok = false;
      break;
    }
    MlirAttribute layout = dtensorLayoutAttrGet(ctx, grid, &parsed);
    MlirOperation annotate =
        dtBuildAnnotate(&ids, sh, mlirOperationGetLocation(sh), value, layout);
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(sh, 0),
                                  mlirOperationGetResult(annotate, 0));
    replaced[i] = sh;
  }
  if (ok) {
    for (size_t i = 0; i < f.shards.count; ++i)
      mlirOperationDestroy(replaced[i]);
    for (size_t i = 0; i < f.shardings.count; ++i) {
      MlirValue r = mlirOperationGetResult(f.shardings.ops[i], 0);
      if (!mlirOpOperandIsNull(mlirValueGetFirstUse(r))) {
        dtEmitError(mlirOperationGetLocation(f.shardings.ops[i]),
                    "this "
                    "shard.sharding is used by an op other than shard.shard; "
                    "it is not imported");
        ok = false;
        break;
      }
      mlirOperationDestroy(f.shardings.ops[i]);
    }
    for (size_t i = 0; i < f.grids.count && ok; ++i)
      mlirOperationDestroy(f.grids.ops[i]);
  }
  free(replaced);
  free(f.grids.ops);
  free(f.shardings.ops);
  free(f.shards.ops);
  free(f.others.ops);
  /* Not checked before (the input is the shard dialect's), so the result
   * is: the meshes and layouts made, and any dtensor IR already there. */
  return ok && mlirLogicalResultIsSuccess(dtensorVerify(module));
}

const DtPassDef dtImportShardPass = {
    .info = {"dtensor-import-shard",
             "Turn upstream shard dialect grids and shardings (shard.grid, "
             "shard.sharding, shard.shard) into dtensor meshes and "
             "annotations",
             0, NULL},
    .verifyFirst = false,
    .run = runImportShard,
};
