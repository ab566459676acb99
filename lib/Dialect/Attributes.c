/* Layout attributes, mesh symbols and element types. */
#include "DialectInternal.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"

#include "Support/Support.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dtBufSink(MlirStringRef text, void *buf) {
  dtBufAppend(buf, text.data, text.length);
}

size_t dtAttributePrint(MlirAttribute attr, char *buffer, size_t capacity) {
  DtBuf b = dtBufInit(buffer, capacity);
  mlirAttributePrint(attr, dtBufSink, &b);
  return b.length;
}

size_t dtTypePrint(MlirType type, char *buffer, size_t capacity) {
  DtBuf b = dtBufInit(buffer, capacity);
  mlirTypePrint(type, dtBufSink, &b);
  return b.length;
}

void dtEmitError(MlirLocation loc, const char *format, ...) {
  char message[2304];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  mlirEmitError(loc, message);
}

void dtOpErrorV(MlirOperation op, const char *format, va_list args) {
  char message[2048];
  vsnprintf(message, sizeof(message), format, args);
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  dtEmitError(mlirOperationGetLocation(op), "'%.*s' op %s", (int)name.length,
              name.data, message);
}

void dtOpError(MlirOperation op, const char *format, ...) {
  va_list args;
  va_start(args, format);
  dtOpErrorV(op, format, args);
  va_end(args);
}

MlirOperation dtEnclosingModule(MlirOperation op) {
  while (!mlirOperationIsNull(op) && !dtIsOp(op, "builtin.module"))
    op = mlirOperationGetParentOperation(op);
  return op;
}

/* Whether `attr` belongs to the dtensor dialect (no printing needed). */
static bool isDtensorAttribute(MlirAttribute attr) {
  if (mlirAttributeIsNull(attr))
    return false;
  MlirDialect dialect = mlirAttributeGetDialect(attr);
  if (mlirDialectIsNull(dialect))
    return false;
  MlirStringRef ns = mlirDialectGetNamespace(dialect);
  return ns.length == 7 && memcmp(ns.data, "dtensor", 7) == 0;
}

static const char kLayoutPrefix[] = "#dtensor.layout<";

bool dtensorAttributeIsALayout(MlirAttribute attr) {
  if (!isDtensorAttribute(attr))
    return false;
  /* The C API cannot read a dynamic attribute's name: print its head. */
  char head[sizeof(kLayoutPrefix)];
  dtAttributePrint(attr, head, sizeof(head));
  return strcmp(head, kLayoutPrefix) == 0;
}

static bool isPlainSymbol(const char *s, size_t n) {
  if (n == 0 || (!isalpha((unsigned char)s[0]) && s[0] != '_'))
    return false;
  for (size_t i = 1; i < n; ++i)
    if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '$' &&
        s[i] != '.' && s[i] != '-')
      return false;
  return true;
}

MlirAttribute dtensorLayoutAttrGet(MlirContext ctx, MlirStringRef meshName,
                                   const DtensorShardingSpec *spec) {
  if (!isPlainSymbol(meshName.data, meshName.length) || meshName.length > 200)
    return (MlirAttribute){NULL};
  char specText[512], text[768];
  dtensorShardingSpecPrint(spec, specText, sizeof(specText));
  snprintf(text, sizeof(text), "#dtensor.layout<@%.*s, \"%s\">",
           (int)meshName.length, meshName.data, specText);
  return mlirAttributeParseGet(ctx, mlirStringRefCreateFromCString(text));
}

/* Reads an MLIR string literal starting at the opening quote into `out`. */
static const char *readQuoted(const char *p, char *out, size_t capacity) {
  if (*p != '"')
    return NULL;
  ++p;
  size_t n = 0;
  while (*p && *p != '"') {
    char c = *p++;
    if (c == '\\') {
      if (isxdigit((unsigned char)p[0]) && isxdigit((unsigned char)p[1])) {
        char hex[3] = {p[0], p[1], 0};
        c = (char)strtol(hex, NULL, 16);
        p += 2;
      } else if (*p) {
        c = *p++;
        if (c == 'n')
          c = '\n';
        else if (c == 't')
          c = '\t';
      }
    }
    if (n + 1 >= capacity)
      return NULL;
    out[n++] = c;
  }
  if (*p != '"')
    return NULL;
  out[n] = '\0';
  return p + 1;
}

bool dtensorLayoutAttrGetParts(MlirAttribute attr,
                               DtensorLayoutAttrParts *outParts) {
  if (!isDtensorAttribute(attr))
    return false;
  char text[1536];
  if (dtAttributePrint(attr, text, sizeof(text)) >= sizeof(text) ||
      strncmp(text, kLayoutPrefix, strlen(kLayoutPrefix)) != 0)
    return false;
  const char *p = text + strlen(kLayoutPrefix);
  if (*p++ != '@')
    return false;
  if (*p == '"') {
    p = readQuoted(p, outParts->mesh, sizeof(outParts->mesh));
    if (!p)
      return false;
  } else {
    size_t n = strcspn(p, ", >");
    if (n >= sizeof(outParts->mesh))
      return false;
    memcpy(outParts->mesh, p, n);
    outParts->mesh[n] = '\0';
    p += n;
  }
  while (*p == ' ')
    ++p;
  if (*p++ != ',')
    return false;
  while (*p == ' ')
    ++p;
  p = readQuoted(p, outParts->spec, sizeof(outParts->spec));
  return p && *p == '>';
}

MlirOperation dtensorMeshOpLookup(MlirOperation from, MlirStringRef name) {
  MlirOperation module = dtEnclosingModule(from);
  if (mlirOperationIsNull(module))
    return module;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (!dtIsOp(op, DT_OP_MESH))
      continue;
    MlirAttribute sym = mlirOperationGetAttributeByName(
        op, mlirStringRefCreateFromCString("sym_name"));
    if (!mlirAttributeIsNull(sym) && mlirAttributeIsAString(sym) &&
        mlirStringRefEqual(mlirStringAttrGetValue(sym), name))
      return op;
  }
  return (MlirOperation){NULL};
}

static MlirAttribute getAttr(MlirOperation op, const char *name) {
  return mlirOperationGetAttributeByName(op,
                                         mlirStringRefCreateFromCString(name));
}

DtensorMesh *dtensorMeshCreateFromOp(MlirOperation meshOp,
                                     DtensorDiag *outDiag) {
  MlirAttribute shapeAttr = getAttr(meshOp, "shape");
  MlirAttribute namesAttr = getAttr(meshOp, "axis_names");
  if (mlirAttributeIsNull(shapeAttr) ||
      !mlirAttributeIsADenseI64Array(shapeAttr)) {
    dtDiag(outDiag, -1, "'shape' must be an array<i64: ...> of axis sizes");
    return NULL;
  }
  intptr_t rank = mlirDenseArrayGetNumElements(shapeAttr);
  if (rank < 1 || rank > DTENSOR_MAX_MESH_RANK) {
    dtDiag(outDiag, -1, "a mesh has 1 to %d axes, not %ld",
           DTENSOR_MAX_MESH_RANK, (long)rank);
    return NULL;
  }
  if (mlirAttributeIsNull(namesAttr) || !mlirAttributeIsAArray(namesAttr) ||
      mlirArrayAttrGetNumElements(namesAttr) != rank) {
    dtDiag(outDiag, -1,
           "'axis_names' must be an array of %ld strings, one per axis",
           (long)rank);
    return NULL;
  }
  int64_t shape[DTENSOR_MAX_MESH_RANK];
  char names[DTENSOR_MAX_MESH_RANK][DTENSOR_MAX_AXIS_NAME];
  const char *namePtrs[DTENSOR_MAX_MESH_RANK];
  for (intptr_t a = 0; a < rank; ++a) {
    shape[a] = mlirDenseI64ArrayGetElement(shapeAttr, a);
    MlirAttribute n = mlirArrayAttrGetElement(namesAttr, a);
    if (!mlirAttributeIsAString(n)) {
      dtDiag(outDiag, -1, "'axis_names' entry %ld is not a string", (long)a);
      return NULL;
    }
    MlirStringRef s = mlirStringAttrGetValue(n);
    if (s.length >= DTENSOR_MAX_AXIS_NAME) {
      dtDiag(outDiag, -1,
             "mesh axis name '%.*s' is longer than %d "
             "characters",
             (int)s.length, s.data, DTENSOR_MAX_AXIS_NAME - 1);
      return NULL;
    }
    if (s.length) /* an empty name may have no data pointer */
      memcpy(names[a], s.data, s.length);
    names[a][s.length] = '\0';
    namePtrs[a] = names[a];
  }
  DtensorMesh *mesh = dtensorMeshCreate((int)rank, shape, namePtrs, outDiag);
  if (!mesh)
    return NULL;
  MlirAttribute lat = getAttr(meshOp, "latency_us");
  MlirAttribute bw = getAttr(meshOp, "bandwidth_gbps");
  const char *which[2] = {"latency_us", "bandwidth_gbps"};
  MlirAttribute link[2] = {lat, bw};
  for (int k = 0; k < 2; ++k) {
    if (mlirAttributeIsNull(link[k]))
      continue;
    if (!mlirAttributeIsADenseF64Array(link[k]) ||
        mlirDenseArrayGetNumElements(link[k]) != rank) {
      dtDiag(outDiag, -1,
             "'%s' must be an array<f64: ...> of %ld values, "
             "one per axis",
             which[k], (long)rank);
      dtensorMeshDestroy(mesh);
      return NULL;
    }
  }
  for (intptr_t a = 0; a < rank; ++a) {
    DtensorLink l = dtensorMeshGetLink(mesh, (int)a);
    if (!mlirAttributeIsNull(lat))
      l.latencyUs = mlirDenseF64ArrayGetElement(lat, a);
    if (!mlirAttributeIsNull(bw))
      l.bandwidthGBps = mlirDenseF64ArrayGetElement(bw, a);
    if (!dtensorMeshSetLink(mesh, (int)a, l, outDiag)) {
      dtensorMeshDestroy(mesh);
      return NULL;
    }
  }
  MlirAttribute ids = getAttr(meshOp, "device_ids");
  if (!mlirAttributeIsNull(ids)) {
    if (!mlirAttributeIsADenseI64Array(ids)) {
      dtDiag(outDiag, -1, "'device_ids' must be an array<i64: ...>");
      dtensorMeshDestroy(mesh);
      return NULL;
    }
    intptr_t n = mlirDenseArrayGetNumElements(ids);
    int64_t buf[4096];
    if (n > 4096) {
      dtDiag(outDiag, -1, "'device_ids' lists more than 4096 devices");
      dtensorMeshDestroy(mesh);
      return NULL;
    }
    for (intptr_t i = 0; i < n; ++i)
      buf[i] = mlirDenseI64ArrayGetElement(ids, i);
    if (!dtensorMeshSetDeviceIds(mesh, n, buf, outDiag)) {
      dtensorMeshDestroy(mesh);
      return NULL;
    }
  }
  return mesh;
}

bool dtensorElementTypeFromMlir(MlirType type, DtensorElementType *outType) {
  if (mlirTypeIsAF32(type))
    *outType = DTENSOR_F32;
  else if (mlirTypeIsAF64(type))
    *outType = DTENSOR_F64;
  else if (mlirTypeIsAF16(type))
    *outType = DTENSOR_F16;
  else if (mlirTypeIsABF16(type))
    *outType = DTENSOR_BF16;
  else if (mlirTypeIsAFloat8E4M3FN(type))
    *outType = DTENSOR_F8E4M3FN;
  else if (mlirTypeIsAFloat8E5M2(type))
    *outType = DTENSOR_F8E5M2;
  else if (mlirTypeIsAInteger(type) && mlirIntegerTypeIsUnsigned(type)) {
    /* Unsigned integers are not their signless kin: a max differs. */
    if (mlirIntegerTypeGetWidth(type) != 8)
      return false;
    *outType = DTENSOR_UI8;
  } else if (mlirTypeIsAInteger(type) && !mlirIntegerTypeIsSigned(type)) {
    switch (mlirIntegerTypeGetWidth(type)) {
    case 1:
      *outType = DTENSOR_I1;
      break;
    case 8:
      *outType = DTENSOR_I8;
      break;
    case 16:
      *outType = DTENSOR_I16;
      break;
    case 32:
      *outType = DTENSOR_I32;
      break;
    case 64:
      *outType = DTENSOR_I64;
      break;
    default:
      return false;
    }
  } else
    return false;
  return true;
}

bool dtensorLayoutFromAttr(MlirOperation from, MlirAttribute attr,
                           MlirType tensorType, DtensorMesh **outMesh,
                           DtensorLayout *outLayout, DtensorDiag *outDiag) {
  DtensorLayoutAttrParts parts;
  *outMesh = NULL;
  if (!dtensorLayoutAttrGetParts(attr, &parts))
    return dtDiag(outDiag, -1,
                  "expected a #dtensor.layout<@mesh, \"spec\"> "
                  "attribute");
  MlirOperation meshOp =
      dtensorMeshOpLookup(from, mlirStringRefCreateFromCString(parts.mesh));
  if (mlirOperationIsNull(meshOp))
    return dtDiag(outDiag, -1,
                  "unknown mesh '@%s': declare it with "
                  "\"dtensor.mesh\"() {sym_name = \"%s\", ...} in the "
                  "enclosing module",
                  parts.mesh, parts.mesh);
  DtensorMesh *mesh = dtensorMeshCreateFromOp(meshOp, outDiag);
  if (!mesh)
    return false;
  DtensorShardingSpec spec;
  if (!dtensorShardingSpecParse(parts.spec, mesh, &spec, outDiag)) {
    char detail[DTENSOR_DIAG_MESSAGE_SIZE];
    snprintf(detail, sizeof(detail), "%s", outDiag ? outDiag->message : "");
    dtensorMeshDestroy(mesh);
    return dtDiag(outDiag, -1,
                  "malformed sharding spec \"%s\" (column %d): "
                  "%s",
                  parts.spec, outDiag ? outDiag->column + 1 : 0, detail);
  }
  if (!mlirTypeIsARankedTensor(tensorType)) {
    dtensorMeshDestroy(mesh);
    return dtDiag(outDiag, -1,
                  "a layout applies to a ranked tensor, not "
                  "this type");
  }
  int rank = (int)mlirShapedTypeGetRank(tensorType);
  if (rank > DTENSOR_MAX_TENSOR_RANK) {
    dtensorMeshDestroy(mesh);
    return dtDiag(outDiag, -1,
                  "tensors of rank %d are not supported (at "
                  "most %d)",
                  rank, DTENSOR_MAX_TENSOR_RANK);
  }
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  for (int d = 0; d < rank; ++d) {
    if (mlirShapedTypeIsDynamicDim(tensorType, d)) {
      dtensorMeshDestroy(mesh);
      return dtDiag(outDiag, -1,
                    "dim %d is dynamic; sharded tensors need "
                    "static shapes",
                    d);
    }
    shape[d] = mlirShapedTypeGetDimSize(tensorType, d);
  }
  DtensorElementType et;
  if (!dtensorElementTypeFromMlir(mlirShapedTypeGetElementType(tensorType),
                                  &et)) {
    dtensorMeshDestroy(mesh);
    return dtDiag(outDiag, -1,
                  "unsupported element type (valid: f32, f64, "
                  "f16, bf16, i1, i8, i16, i32, i64)");
  }
  if (!dtensorLayoutInit(mesh, &spec, rank, shape, et, outLayout, outDiag)) {
    dtensorMeshDestroy(mesh);
    return false;
  }
  *outMesh = mesh;
  return true;
}

MlirOperation dtMeshOpCreate(MlirOperation module, MlirLocation loc,
                             const char *name, const DtensorMesh *mesh) {
  MlirContext ctx = mlirOperationGetContext(module);
  int rank = dtensorMeshGetRank(mesh);
  int64_t shape[DTENSOR_MAX_MESH_RANK];
  MlirAttribute names[DTENSOR_MAX_MESH_RANK];
  for (int a = 0; a < rank; ++a) {
    shape[a] = dtensorMeshGetAxisSize(mesh, a);
    names[a] = mlirStringAttrGet(
        ctx, mlirStringRefCreateFromCString(dtensorMeshGetAxisName(mesh, a)));
  }
  MlirNamedAttribute attrs[3] = {
      dtNamedAttr(ctx, "sym_name",
                  mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(name))),
      dtNamedAttr(ctx, "shape", mlirDenseI64ArrayGet(ctx, rank, shape)),
      dtNamedAttr(ctx, "axis_names", mlirArrayAttrGet(ctx, rank, names)),
  };
  MlirOperation op =
      dtOpCreateDetached(loc, DT_OP_MESH, 0, NULL, 0, NULL, 3, attrs);
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  MlirOperation first = mlirBlockGetFirstOperation(top);
  if (mlirOperationIsNull(first))
    mlirBlockAppendOwnedOperation(top, op);
  else
    mlirBlockInsertOwnedOperationBefore(top, first, op);
  return op;
}

/* ---- the layout cache ---------------------------------------------------- */

typedef struct LayoutEntry {
  const void *attr, *type;
  MlirIdentifier mesh;
  DtensorShardingSpec spec;
} LayoutEntry;

static bool sameLayoutKey(const void *entry, const void *key) {
  const LayoutEntry *e = entry, *k = key;
  return e->attr == k->attr && e->type == k->type;
}

DtLayoutCache dtLayoutCacheInit(void) {
  DtLayoutCache c = {dtTableInit(sizeof(LayoutEntry))};
  return c;
}

bool dtLayoutCacheRead(DtLayoutCache *c, MlirOperation from, MlirAttribute attr,
                       MlirType type, DtensorShardingSpec *outSpec,
                       MlirIdentifier *outMesh, DtensorDiag *outDiag) {
  LayoutEntry key;
  key.attr = attr.ptr;
  key.type = type.ptr;
  uint64_t hash = dtHashMix(dtHashMix(7, (uint64_t)(uintptr_t)attr.ptr),
                            (uint64_t)(uintptr_t)type.ptr);
  LayoutEntry *hit = dtTableFind(&c->table, hash, sameLayoutKey, &key);
  if (!hit) {
    DtensorLayoutAttrParts parts;
    if (!dtensorLayoutAttrGetParts(attr, &parts))
      return dtDiag(outDiag, -1, "expected a #dtensor.layout");
    DtensorMesh *mesh = NULL;
    DtensorLayout layout;
    if (!dtensorLayoutFromAttr(from, attr, type, &mesh, &layout, outDiag))
      return false;
    dtensorMeshDestroy(mesh);
    key.spec = layout.spec;
    key.mesh = mlirIdentifierGet(mlirAttributeGetContext(attr),
                                 mlirStringRefCreateFromCString(parts.mesh));
    hit = dtTableInsert(&c->table, hash);
    if (hit) /* only a cache */
      *hit = key;
    else
      hit = &key;
  }
  *outSpec = hit->spec;
  if (outMesh)
    *outMesh = hit->mesh;
  return true;
}

void dtLayoutCacheFree(DtLayoutCache *c) { dtTableFree(&c->table); }
