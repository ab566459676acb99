/* The dtensor verifier: what IRDL cannot check (mesh symbols, spec syntax,
 * ranks, local shapes, collective fields). Every error is emitted at the
 * offending op's location; verification goes on past the first error so a
 * user sees all of them in one run. */
#include "DialectInternal.h"
#include "Support/Support.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Layouts already found valid, keyed on (attribute, type, module): both
 * are uniqued, so a program that uses one layout on many values checks it
 * once. */
typedef struct Checked {
  const void *attr, *type, *module;
} Checked;

typedef struct Verifier {
  bool failed;
  DtTable checked; /* Checked entries */
} Verifier;

static uint64_t hashChecked(const Checked *c) {
  return dtHashMix(dtHashMix(dtHashMix(0, (uint64_t)(uintptr_t)c->attr),
                             (uint64_t)(uintptr_t)c->type),
                   (uint64_t)(uintptr_t)c->module);
}

static bool sameChecked(const void *entry, const void *key) {
  return !memcmp(entry, key, sizeof(Checked));
}

static bool isChecked(const Verifier *v, const Checked *c) {
  return dtTableFind(&v->checked, hashChecked(c), sameChecked, c) != NULL;
}

static void addChecked(Verifier *v, const Checked *c) {
  Checked *entry = dtTableInsert(&v->checked, hashChecked(c));
  if (entry) /* else not cached: checked again next time */
    *entry = *c;
}

static void printShape(int rank, const int64_t *shape, char *out,
                       size_t capacity);

static const void *moduleOf(MlirOperation op) {
  for (MlirOperation o = op; !mlirOperationIsNull(o);
       o = mlirOperationGetParentOperation(o))
    if (dtIsOp(o, "builtin.module"))
      return o.ptr;
  return NULL;
}

#define MAX_GROUP_DEVICES (1 << 20)

static MlirAttribute getAttr(MlirOperation op, const char *name) {
  return mlirOperationGetAttributeByName(op,
                                         mlirStringRefCreateFromCString(name));
}

static void opError(Verifier *v, MlirOperation op, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static void opError(Verifier *v, MlirOperation op, const char *format, ...) {
  va_list args;
  va_start(args, format);
  dtOpErrorV(op, format, args);
  va_end(args);
  v->failed = true;
}

/* Checks `attr` as a layout for a value of `type`; `what` names the value in
 * the message. On success fills `outLayout`/`outMesh` when asked. */
static bool checkLayout(Verifier *v, MlirOperation op, MlirAttribute attr,
                        MlirType type, const char *what, DtensorMesh **outMesh,
                        DtensorLayout *outLayout) {
  Checked key = {attr.ptr, type.ptr, moduleOf(op)};
  if (!outMesh && !mlirAttributeIsNull(attr) && isChecked(v, &key))
    return true;
  DtensorMesh *mesh = NULL;
  DtensorLayout layout;
  DtensorDiag diag;
  if (!dtensorLayoutFromAttr(op, attr, type, &mesh, &layout, &diag)) {
    opError(v, op, "%s: %s", what, diag.message);
    return false;
  }
  if (!mlirAttributeIsNull(attr))
    addChecked(v, &key);
  if (outMesh) {
    *outMesh = mesh;
    *outLayout = layout;
  } else
    dtensorMeshDestroy(mesh);
  return true;
}

/* ---- dtensor.mesh ------------------------------------------------------ */

static void verifyMesh(Verifier *v, MlirOperation op) {
  MlirOperation parent = mlirOperationGetParentOperation(op);
  if (mlirOperationIsNull(parent) || !dtIsOp(parent, "builtin.module")) {
    opError(v, op,
            "must be at the top level of a builtin.module, where "
            "layouts can refer to it by name");
    return;
  }
  MlirAttribute sym = getAttr(op, "sym_name");
  if (mlirAttributeIsNull(sym) || !mlirAttributeIsAString(sym)) {
    opError(v, op, "needs a string 'sym_name'");
    return;
  }
  MlirStringRef name = mlirStringAttrGetValue(sym);
  for (MlirOperation prev =
           mlirBlockGetFirstOperation(mlirOperationGetBlock(op));
       !mlirOperationEqual(prev, op);
       prev = mlirOperationGetNextInBlock(prev)) {
    MlirAttribute other = getAttr(prev, "sym_name");
    if (dtIsOp(prev, DT_OP_MESH) && !mlirAttributeIsNull(other) &&
        mlirAttributeIsAString(other) &&
        mlirStringRefEqual(mlirStringAttrGetValue(other), name)) {
      opError(v, op,
              "redefines mesh '@%.*s'; mesh names must be unique in a "
              "module",
              (int)name.length, name.data);
      return;
    }
  }
  DtensorDiag diag;
  DtensorMesh *mesh = dtensorMeshCreateFromOp(op, &diag);
  if (!mesh) {
    opError(v, op, "%s", diag.message);
    return;
  }
  dtensorMeshDestroy(mesh);
}

/* ---- layouts on functions and on ops ------------------------------------ */

static MlirAttribute dictLayout(MlirAttribute dict) {
  if (mlirAttributeIsNull(dict) || !mlirAttributeIsADictionary(dict))
    return (MlirAttribute){NULL};
  return mlirDictionaryAttrGetElementByName(
      dict, mlirStringRefCreateFromCString(DT_ATTR_LAYOUT));
}

/* `arg_attrs`/`res_attrs` of any function-like op with a `function_type`. */
static void verifyFunctionLayouts(Verifier *v, MlirOperation op) {
  if (mlirOperationGetNumRegions(op) == 0)
    return; /* function-like ops have a body region */
  MlirAttribute fnType = getAttr(op, "function_type");
  if (mlirAttributeIsNull(fnType) || !mlirAttributeIsAType(fnType))
    return;
  MlirType type = mlirTypeAttrGetValue(fnType);
  if (!mlirTypeIsAFunction(type))
    return;
  const char *keys[2] = {"arg_attrs", "res_attrs"};
  const char *what[2] = {"argument", "result"};
  for (int k = 0; k < 2; ++k) {
    MlirAttribute list = getAttr(op, keys[k]);
    if (mlirAttributeIsNull(list) || !mlirAttributeIsAArray(list))
      continue;
    intptr_t n = mlirArrayAttrGetNumElements(list);
    intptr_t count = k == 0 ? mlirFunctionTypeGetNumInputs(type)
                            : mlirFunctionTypeGetNumResults(type);
    for (intptr_t i = 0; i < n && i < count; ++i) {
      MlirAttribute layout = dictLayout(mlirArrayAttrGetElement(list, i));
      if (mlirAttributeIsNull(layout))
        continue;
      MlirType t = k == 0 ? mlirFunctionTypeGetInput(type, i)
                          : mlirFunctionTypeGetResult(type, i);
      char label[64];
      snprintf(label, sizeof(label), "dtensor.layout of %s %ld", what[k],
               (long)i);
      MlirAttribute global = mlirDictionaryAttrGetElementByName(
          mlirArrayAttrGetElement(list, i),
          mlirStringRefCreateFromCString(DT_ATTR_GLOBAL_SHAPE));
      if (mlirAttributeIsNull(global)) {
        checkLayout(v, op, layout, t, label, NULL, NULL);
        continue;
      }
      /* A partitioned function: the layout is of the global shape, the
       * type is its padded local block. */
      if (!mlirAttributeIsADenseI64Array(global) ||
          !mlirTypeIsARankedTensor(t) ||
          mlirDenseArrayGetNumElements(global) != mlirShapedTypeGetRank(t) ||
          mlirShapedTypeGetRank(t) > DTENSOR_MAX_TENSOR_RANK) {
        opError(v, op,
                "dtensor.global_shape of %s %ld must be an "
                "array<i64: ...> with one entry per dim of its type",
                what[k], (long)i);
        continue;
      }
      int rank = (int)mlirShapedTypeGetRank(t);
      int64_t shape[DTENSOR_MAX_TENSOR_RANK], local[DTENSOR_MAX_TENSOR_RANK];
      for (int d = 0; d < rank; ++d)
        shape[d] = mlirDenseI64ArrayGetElement(global, d);
      MlirType globalType = mlirRankedTensorTypeGet(
          rank, shape, mlirShapedTypeGetElementType(t), mlirAttributeGetNull());
      DtensorMesh *mesh;
      DtensorLayout l;
      if (!checkLayout(v, op, layout, globalType, label, &mesh, &l))
        continue;
      dtensorLayoutGetMaxLocalShape(&l, local);
      dtensorMeshDestroy(mesh);
      bool same = mlirShapedTypeHasStaticShape(t);
      for (int d = 0; same && d < rank; ++d)
        same = mlirShapedTypeGetDimSize(t, d) == local[d];
      if (!same) {
        char want[256];
        printShape(rank, local, want, sizeof(want));
        opError(v, op,
                "%s %ld has global shape %s... whose local block under "
                "its layout is %s, but its type is not",
                what[k], (long)i, "(dtensor.global_shape)", want);
      }
    }
  }
}

/* A per-value list attribute (`dtensor.layout` of results, or
 * `dtensor.operand_layouts`): one layout per value, `unit` for non-tensor
 * values; a single layout is accepted for one result. */
static void verifyLayoutList(Verifier *v, MlirOperation op, const char *name,
                             bool results) {
  MlirAttribute attr = mlirOperationGetDiscardableAttributeByName(
      op, mlirStringRefCreateFromCString(name));
  if (mlirAttributeIsNull(attr))
    return;
  intptr_t count = results ? mlirOperationGetNumResults(op)
                           : mlirOperationGetNumOperands(op);
  const char *what = results ? "result" : "operand";
  if (results && dtensorAttributeIsALayout(attr)) {
    if (count != 1) {
      opError(v, op,
              "has %ld results, so its '%s' must be an array of %ld "
              "layouts",
              (long)count, name, (long)count);
      return;
    }
    checkLayout(v, op, attr, mlirValueGetType(mlirOperationGetResult(op, 0)),
                "dtensor.layout of result 0", NULL, NULL);
    return;
  }
  if (!mlirAttributeIsAArray(attr) ||
      mlirArrayAttrGetNumElements(attr) != count) {
    opError(v, op,
            "'%s' must be %san array of %ld entries, one per %s (a "
            "#dtensor.layout, or unit for a non-tensor %s)",
            name, results ? "a #dtensor.layout (one result) or " : "",
            (long)count, what, what);
    return;
  }
  for (intptr_t i = 0; i < count; ++i) {
    MlirAttribute e = mlirArrayAttrGetElement(attr, i);
    if (mlirAttributeIsAUnit(e))
      continue;
    MlirValue value = results ? mlirOperationGetResult(op, i)
                              : mlirOperationGetOperand(op, i);
    char label[96];
    snprintf(label, sizeof(label), "%s of %s %ld", name, what, (long)i);
    checkLayout(v, op, e, mlirValueGetType(value), label, NULL, NULL);
  }
}

static void verifyOpLayout(Verifier *v, MlirOperation op) {
  verifyLayoutList(v, op, DT_ATTR_LAYOUT, true);
  verifyLayoutList(v, op, DT_ATTR_OPERAND_LAYOUTS, false);
}

/* ---- dtensor.annotate / dtensor.redistribute ---------------------------- */

static void verifyAnnotate(Verifier *v, MlirOperation op) {
  MlirType type = mlirValueGetType(mlirOperationGetOperand(op, 0));
  checkLayout(v, op, getAttr(op, "layout"), type, "layout", NULL, NULL);
  MlirAttribute priority = getAttr(op, "priority");
  if (mlirAttributeIsNull(priority))
    return;
  if (!mlirAttributeIsAInteger(priority) ||
      !mlirTypeIsAInteger(mlirAttributeGetType(priority)) ||
      mlirIntegerAttrGetValueInt(priority) < 0)
    opError(v, op,
            "'priority' must be a non-negative integer (0 is the "
            "strongest constraint)");
}

static bool sameMeshName(MlirAttribute a, MlirAttribute b) {
  DtensorLayoutAttrParts pa, pb;
  return dtensorLayoutAttrGetParts(a, &pa) &&
         dtensorLayoutAttrGetParts(b, &pb) && strcmp(pa.mesh, pb.mesh) == 0;
}

static void printShape(int rank, const int64_t *shape, char *out,
                       size_t capacity) {
  size_t n = 0;
  out[0] = '\0';
  for (int d = 0; d < rank && n < capacity; ++d)
    n += (size_t)snprintf(out + n, capacity - n, "%s%lld", d ? "x" : "",
                          (long long)shape[d]);
}

/* Before partitioning both sides have the global type; after it, the op
 * carries `global_shape` and each side has its layout's padded local shape
 * (the largest shard, which every device allocates). */
static void verifyRedistribute(Verifier *v, MlirOperation op) {
  MlirAttribute src = getAttr(op, "src"), dst = getAttr(op, "dst");
  MlirType inType = mlirValueGetType(mlirOperationGetOperand(op, 0));
  MlirType outType = mlirValueGetType(mlirOperationGetResult(op, 0));
  if (!sameMeshName(src, dst)) {
    opError(v, op,
            "'src' and 'dst' must be layouts on the same mesh; "
            "moving a tensor between meshes is not a redistribution");
    return;
  }
  MlirAttribute global = getAttr(op, "global_shape");
  if (mlirAttributeIsNull(global)) {
    if (!mlirTypeEqual(inType, outType)) {
      opError(v, op,
              "input and result types must be equal (global shapes); "
              "after partitioning add 'global_shape'");
      return;
    }
    checkLayout(v, op, src, inType, "src", NULL, NULL);
    checkLayout(v, op, dst, inType, "dst", NULL, NULL);
    return;
  }
  if (!mlirAttributeIsADenseI64Array(global) ||
      !mlirTypeIsARankedTensor(inType) || !mlirTypeIsARankedTensor(outType) ||
      mlirDenseArrayGetNumElements(global) != mlirShapedTypeGetRank(inType) ||
      mlirShapedTypeGetRank(inType) != mlirShapedTypeGetRank(outType) ||
      mlirShapedTypeGetRank(inType) > DTENSOR_MAX_TENSOR_RANK) {
    opError(v, op,
            "'global_shape' must be an array<i64: ...> with one entry "
            "per dim of the (ranked, equal-rank) input and result");
    return;
  }
  int rank = (int)mlirShapedTypeGetRank(inType);
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  for (int d = 0; d < rank; ++d)
    shape[d] = mlirDenseI64ArrayGetElement(global, d);
  MlirType elt = mlirShapedTypeGetElementType(inType);
  if (!mlirTypeEqual(elt, mlirShapedTypeGetElementType(outType))) {
    opError(v, op, "input and result element types differ");
    return;
  }
  MlirType globalType =
      mlirRankedTensorTypeGet(rank, shape, elt, mlirAttributeGetNull());
  MlirAttribute sides[2] = {src, dst};
  MlirType local[2] = {inType, outType};
  const char *names[2] = {"src", "dst"};
  const char *values[2] = {"input", "result"};
  for (int s = 0; s < 2; ++s) {
    DtensorMesh *mesh;
    DtensorLayout layout;
    if (!checkLayout(v, op, sides[s], globalType, names[s], &mesh, &layout))
      continue;
    int64_t expect[DTENSOR_MAX_TENSOR_RANK];
    dtensorLayoutGetMaxLocalShape(&layout, expect);
    dtensorMeshDestroy(mesh);
    bool ok = !mlirShapedTypeHasStaticShape(local[s]) ? false : true;
    for (int d = 0; ok && d < rank; ++d)
      ok = mlirShapedTypeGetDimSize(local[s], d) == expect[d];
    if (!ok) {
      char want[256], got[512];
      printShape(rank, expect, want, sizeof(want));
      dtTypePrint(local[s], got, sizeof(got));
      opError(v, op,
              "%s type %s does not match the local shape %s of "
              "'%s' on the global shape",
              values[s], got, want, names[s]);
    }
  }
}

/* ---- collectives --------------------------------------------------------- */

typedef enum DimRole { ROLE_NONE, ROLE_GATHER, ROLE_SHARD } DimRole;

/* Looks up the op's `mesh` symbol; returns NULL (after an error) if absent. */
static DtensorMesh *meshOf(Verifier *v, MlirOperation op) {
  MlirAttribute ref = getAttr(op, "mesh");
  if (mlirAttributeIsNull(ref) || !mlirAttributeIsAFlatSymbolRef(ref)) {
    opError(v, op, "'mesh' must be a flat symbol reference such as @mesh");
    return NULL;
  }
  MlirStringRef name = mlirFlatSymbolRefAttrGetValue(ref);
  MlirOperation meshOp = dtensorMeshOpLookup(op, name);
  if (mlirOperationIsNull(meshOp)) {
    opError(v, op,
            "unknown mesh '@%.*s': declare it with \"dtensor.mesh\" "
            "in the enclosing module",
            (int)name.length, name.data);
    return NULL;
  }
  DtensorDiag diag;
  DtensorMesh *mesh = dtensorMeshCreateFromOp(meshOp, &diag);
  if (!mesh)
    opError(v, op, "mesh '@%.*s' is invalid: %s", (int)name.length, name.data,
            diag.message);
  return mesh;
}

/* Checks `mesh_axes` and returns the number of devices in one group (the
 * product of the axis sizes), or 0 after an error. */
static int64_t checkMeshAxes(Verifier *v, MlirOperation op,
                             const DtensorMesh *mesh, bool required) {
  MlirAttribute axes = getAttr(op, "mesh_axes");
  int rank = dtensorMeshGetRank(mesh);
  if (mlirAttributeIsNull(axes) && !required)
    return dtensorMeshGetNumDevices(mesh);
  if (mlirAttributeIsNull(axes) || !mlirAttributeIsADenseI64Array(axes)) {
    opError(v, op, "'mesh_axes' must be an array<i64: ...> of mesh axes");
    return 0;
  }
  intptr_t n = mlirDenseArrayGetNumElements(axes);
  if (n == 0 || n > rank) {
    opError(v, op,
            "'mesh_axes' must list 1 to %d distinct axes of the "
            "mesh, not %ld",
            rank, (long)n);
    return 0;
  }
  bool seen[DTENSOR_MAX_MESH_RANK] = {false};
  int64_t group = 1;
  for (intptr_t i = 0; i < n; ++i) {
    int64_t a = mlirDenseI64ArrayGetElement(axes, i);
    if (a < 0 || a >= rank) {
      opError(v, op,
              "mesh axis %lld is out of range: the mesh has axes 0 to "
              "%d",
              (long long)a, rank - 1);
      return 0;
    }
    if (seen[a]) {
      opError(v, op, "mesh axis %lld is listed twice in 'mesh_axes'",
              (long long)a);
      return 0;
    }
    seen[a] = true;
    group *= dtensorMeshGetAxisSize(mesh, (int)a);
  }
  return group;
}

/* Reads a dim attribute in [0, rank); returns -1 after an error. */
static int64_t checkDim(Verifier *v, MlirOperation op, const char *name,
                        intptr_t rank) {
  MlirAttribute attr = getAttr(op, name);
  if (mlirAttributeIsNull(attr) || !mlirAttributeIsAInteger(attr)) {
    opError(v, op, "'%s' must be an integer", name);
    return -1;
  }
  int64_t d = mlirIntegerAttrGetValueInt(attr);
  if (d < 0 || d >= rank) {
    opError(v, op,
            "'%s' is %lld, out of range for a rank-%ld tensor (valid: "
            "0 to %ld)",
            name, (long long)d, (long)rank, (long)rank - 1);
    return -1;
  }
  return d;
}

static bool checkReduce(Verifier *v, MlirOperation op) {
  MlirAttribute attr = getAttr(op, "reduce");
  DtensorReduceKind kind;
  if (!mlirAttributeIsNull(attr) && mlirAttributeIsAString(attr)) {
    MlirStringRef s = mlirStringAttrGetValue(attr);
    if (dtensorReduceKindParse(s.data, s.length, &kind) &&
        kind != DTENSOR_REDUCE_NONE)
      return true;
  }
  opError(v, op,
          "'reduce' must be one of \"sum\", \"max\", \"min\", \"avg\", "
          "\"prod\"");
  return false;
}

static bool checkTensor(Verifier *v, MlirOperation op, MlirType type,
                        const char *what) {
  if (!mlirTypeIsARankedTensor(type) || !mlirShapedTypeHasStaticShape(type)) {
    opError(v, op,
            "%s must be a statically shaped tensor: collectives run "
            "on per-device shapes",
            what);
    return false;
  }
  return true;
}

static void checkGroupPosition(Verifier *v, MlirOperation op, int64_t group) {
  if (dtIsOp(op, DT_OP_BROADCAST)) {
    MlirAttribute root = getAttr(op, "root");
    int64_t r =
        mlirAttributeIsAInteger(root) ? mlirIntegerAttrGetValueInt(root) : -1;
    if (r < 0 || r >= group)
      opError(v, op,
              "'root' %lld is not a position in the group (valid: 0 "
              "to %lld)",
              (long long)r, (long long)group - 1);
    return;
  }
  if (!dtIsOp(op, DT_OP_PERMUTE))
    return;
  MlirAttribute pairs = getAttr(op, "pairs");
  if (!mlirAttributeIsADenseI64Array(pairs) ||
      mlirDenseArrayGetNumElements(pairs) % 2 != 0) {
    opError(v, op,
            "'pairs' must be an array<i64: src0, dst0, src1, dst1, "
            "...> of group positions");
    return;
  }
  if (group > MAX_GROUP_DEVICES) {
    opError(v, op, "groups of more than %d devices are not supported",
            MAX_GROUP_DEVICES);
    return;
  }
  intptr_t n = mlirDenseArrayGetNumElements(pairs) / 2;
  /* Sources and targets must each be distinct: a bitmap per role. */
  unsigned char *used = calloc((size_t)group, 1);
  if (!used)
    return;
  for (intptr_t i = 0; i < n; ++i) {
    for (int role = 0; role < 2; ++role) {
      int64_t p = mlirDenseI64ArrayGetElement(pairs, 2 * i + role);
      if (p < 0 || p >= group) {
        opError(v, op,
                "pair %ld: position %lld is not in the group (valid: "
                "0 to %lld)",
                (long)i, (long long)p, (long long)group - 1);
        free(used);
        return;
      }
      unsigned char bit = (unsigned char)(1u << role);
      if (used[p] & bit) {
        opError(v, op, "pair %ld: position %lld is %s twice", (long)i,
                (long long)p, role == 0 ? "a source" : "a target");
        free(used);
        return;
      }
      used[p] |= bit;
    }
  }
  free(used);
}

static void verifyCollective(Verifier *v, MlirOperation op,
                             const DtCollectiveInfo *info) {
  DtensorMesh *mesh = meshOf(v, op);
  if (!mesh)
    return;
  int64_t group = checkMeshAxes(v, op, mesh, true);
  dtensorMeshDestroy(mesh);
  if (group == 0)
    return;
  if (info->reduces && !checkReduce(v, op))
    return;
  checkGroupPosition(v, op, group);
  MlirType in = mlirValueGetType(mlirOperationGetOperand(op, 0));
  MlirType out = mlirValueGetType(mlirOperationGetResult(op, 0));
  if (!checkTensor(v, op, in, "the operand") ||
      !checkTensor(v, op, out, "the result"))
    return;
  intptr_t rank = mlirShapedTypeGetRank(in);
  if (mlirShapedTypeGetRank(out) != rank ||
      !mlirTypeEqual(mlirShapedTypeGetElementType(in),
                     mlirShapedTypeGetElementType(out))) {
    opError(v, op,
            "operand and result must have the same rank and element "
            "type");
    return;
  }
  int64_t gatherDim = -1, shardDim = -1;
  if (info->gatherDim &&
      (gatherDim = checkDim(v, op, info->gatherDim, rank)) < 0)
    return;
  if (info->shardDim && (shardDim = checkDim(v, op, info->shardDim, rank)) < 0)
    return;
  if (gatherDim >= 0 && gatherDim == shardDim) {
    opError(v, op, "'gather_dim' and 'shard_dim' must differ");
    return;
  }
  /* Uneven shards follow ceil-div chunks: the gathered dim N has chunks of
   * ceil(N / group), and a dim of size N splits into chunks of that size. */
  for (intptr_t d = 0; d < rank; ++d) {
    int64_t a = mlirShapedTypeGetDimSize(in, d);
    int64_t b = mlirShapedTypeGetDimSize(out, d);
    if (d == gatherDim && dtCeilDiv(b, group) != a)
      opError(v, op,
              "result dim %ld (%lld) gathered over %lld devices needs "
              "an operand dim of %lld, not %lld",
              (long)d, (long long)b, (long long)group,
              (long long)dtCeilDiv(b, group), (long long)a);
    else if (d == shardDim && dtCeilDiv(a, group) != b)
      opError(v, op,
              "operand dim %ld (%lld) split over %lld devices gives "
              "a result dim of %lld, not %lld",
              (long)d, (long long)a, (long long)group,
              (long long)dtCeilDiv(a, group), (long long)b);
    else if (d != gatherDim && d != shardDim && a != b)
      opError(v, op,
              "operand and result differ in dim %ld (%lld vs %lld), "
              "which this collective does not change",
              (long)d, (long long)a, (long long)b);
  }
}

static void verifyMeshIndex(Verifier *v, MlirOperation op) {
  DtensorMesh *mesh = meshOf(v, op);
  if (!mesh)
    return;
  MlirAttribute axes = getAttr(op, "mesh_axes");
  intptr_t expect = mlirAttributeIsNull(axes)
                        ? dtensorMeshGetRank(mesh)
                        : (mlirAttributeIsADenseI64Array(axes)
                               ? mlirDenseArrayGetNumElements(axes)
                               : 0);
  if (checkMeshAxes(v, op, mesh, false) != 0 &&
      mlirOperationGetNumResults(op) != expect)
    opError(v, op, "returns %ld indices but the %s has %ld axes",
            (long)mlirOperationGetNumResults(op),
            mlirAttributeIsNull(axes) ? "mesh" : "'mesh_axes' list",
            (long)expect);
  dtensorMeshDestroy(mesh);
}

/* ---- the walk ------------------------------------------------------------ */

/* IRDL guarantees one operand and one result for these ops, but the
 * verifier may run on IR that was never verified: check before reading. */
static bool hasOneInOut(Verifier *v, MlirOperation op) {
  if (mlirOperationGetNumOperands(op) == 1 &&
      mlirOperationGetNumResults(op) == 1)
    return true;
  opError(v, op, "expects one operand and one result");
  return false;
}

static MlirWalkResult visit(MlirOperation op, void *userData) {
  Verifier *v = userData;
  verifyFunctionLayouts(v, op);
  verifyOpLayout(v, op);
  if (!dtIsOpIn(op, "dtensor."))
    return MlirWalkResultAdvance;
  if (dtIsOp(op, DT_OP_MESH))
    verifyMesh(v, op);
  else if (dtIsOp(op, DT_OP_ANNOTATE)) {
    if (hasOneInOut(v, op))
      verifyAnnotate(v, op);
  } else if (dtIsOp(op, DT_OP_REDISTRIBUTE)) {
    if (hasOneInOut(v, op))
      verifyRedistribute(v, op);
  } else if (dtIsOp(op, DT_OP_MESH_INDEX))
    verifyMeshIndex(v, op);
  else if (dtIsOp(op, DT_OP_GATHER) || dtIsOp(op, DT_OP_SCATTER_ADD)) {
    DtGatherDims dims;
    v->failed |= !dtGatherDimsOf(op, &dims);
  } else if (dtCollectiveOf(op) && hasOneInOut(v, op))
    verifyCollective(v, op, dtCollectiveOf(op));
  return MlirWalkResultAdvance;
}

MlirLogicalResult dtensorVerify(MlirOperation op) {
  Verifier v = {false, dtTableInit(sizeof(Checked))};
  mlirOperationWalk(op, visit, &v, MlirWalkPreOrder);
  dtTableFree(&v.checked);
  return v.failed ? mlirLogicalResultFailure() : mlirLogicalResultSuccess();
}
