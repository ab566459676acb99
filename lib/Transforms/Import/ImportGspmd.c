/* dtensor-import-gspmd: reads the GSPMD shardings that JAX and XLA put on
 * function arguments and results (`mhlo.sharding = "{devices=[2,1]<=[2]}"`)
 * and turns them into one dtensor mesh and a layout per value, so that
 * dtensor-spmd runs on programs exported for GSPMD (docs/import.md).
 *
 * A tiled sharding lists the tile count of every dim (and, with
 * last_tile_dim_replicate, a last count of replicas) and the devices in
 * row-major order over those tiles. When every sharding uses the devices in
 * iota order, the tiles of all of them are products of consecutive axes of
 * one mesh: the mesh whose axis boundaries are the union of the running
 * products of every sharding's counts (they must form a divisor chain). */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Util.h"

#include "dtensor-c/Dialect.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/Func.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIMS (DTENSOR_MAX_TENSOR_RANK + 1)
#define MAX_VALUES 4096

typedef struct Sharding {
  MlirOperation func;
  int index; /* argument or result position */
  bool isResult;
  bool tiled;   /* else replicated */
  int numTiles; /* tile counts, the replica count last if replicated */
  int64_t tiles[MAX_DIMS];
  bool lastReplicated;
  int rank; /* of the tensor */
} Sharding;

typedef struct Import {
  MlirOperation module;
  Sharding values[MAX_VALUES];
  int numValues;
  bool failed;
} Import;

#define fail(im, loc, ...)                                                     \
  (dtEmitError((loc), __VA_ARGS__), (im)->failed = true)

/* ---- the sharding strings ------------------------------------------------ */

static const char *skipSpace(const char *p) {
  while (*p == ' ')
    ++p;
  return p;
}

/* Reads "[a,b,...]" of positive integers. */
static const char *readList(const char *p, int64_t *out, int max, int *n) {
  if (*p != '[')
    return NULL;
  *n = 0;
  for (++p; *p && *p != ']';) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 1 || *n == max)
      return NULL;
    out[(*n)++] = v;
    p = end;
    if (*p == ',')
      ++p;
  }
  return *p == ']' ? p + 1 : NULL;
}

/* Parses one sharding; false with a message saying what is not
 * supported. */
static bool parseSharding(const char *text, Sharding *s, char *why,
                          size_t size) {
  const char *p = skipSpace(text);
  if (*p != '{') {
    snprintf(why, size, "expected '{' at the start");
    return false;
  }
  p = skipSpace(p + 1);
  if (*p == '{') {
    snprintf(why, size, "tuple shardings are not supported (only tensors)");
    return false;
  }
  if (!strncmp(p, "replicated", 10)) {
    s->tiled = false;
    p = skipSpace(p + 10);
  } else if (!strncmp(p, "maximal", 7) || !strncmp(p, "manual", 6) ||
             !strncmp(p, "unknown", 7)) {
    snprintf(why, size,
             "'%.*s' shardings have no dtensor layout (a value on "
             "one device, or manually partitioned); only tiled and "
             "replicated ones are imported",
             (int)strcspn(p, " }"), p);
    return false;
  } else if (!strncmp(p, "devices=", 8)) {
    s->tiled = true;
    p = readList(p + 8, s->tiles, MAX_DIMS, &s->numTiles);
    if (!p) {
      snprintf(why, size, "devices=[...] must list positive tile counts");
      return false;
    }
    int64_t total = 1;
    for (int i = 0; i < s->numTiles; ++i)
      total *= s->tiles[i];
    /* The device order: iota "<=[N]" (or "<=[a,b]" without a transpose),
     * or an explicit list that must be 0, 1, ..., N-1. */
    if (!strncmp(p, "<=", 2)) {
      int64_t dims[MAX_DIMS];
      int n;
      p = readList(p + 2, dims, MAX_DIMS, &n);
      if (!p) {
        snprintf(why, size, "the device iota '<=[...]' does not read");
        return false;
      }
      if (*p == 'T') {
        snprintf(why, size,
                 "a transposed device order (<=[...]T(...)) is "
                 "not supported: the devices must be in iota order");
        return false;
      }
    } else {
      for (int64_t d = 0; d < total; ++d) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v != d) {
          snprintf(why, size,
                   "device %lld is listed where device %lld "
                   "would be: only devices in iota order (0, 1, 2, ...) "
                   "are supported",
                   end == p ? -1LL : v, (long long)d);
          return false;
        }
        p = end;
        if (*p == ',')
          ++p;
      }
    }
    p = skipSpace(p);
    s->lastReplicated = false;
    if (!strncmp(p, "last_tile_dim_replicate", 23)) {
      s->lastReplicated = true;
      p = skipSpace(p + 23);
    } else if (!strncmp(p, "last_tile_dims={replicated}", 27)) {
      s->lastReplicated = true;
      p = skipSpace(p + 27);
    } else if (!strncmp(p, "last_tile_dims=", 15)) {
      snprintf(why, size,
               "subgroups other than {replicated} (%.*s) are not "
               "supported",
               (int)strcspn(p, " }"), p);
      return false;
    }
  } else {
    snprintf(why, size,
             "expected replicated, devices=[...], maximal or "
             "manual");
    return false;
  }
  /* Metadata is ignored; anything else is not understood. */
  if (!strncmp(p, "metadata=", 9)) {
    int depth = 0;
    for (p += 9; *p; ++p) {
      if (*p == '{')
        ++depth;
      else if (*p == '}' && depth-- == 1) {
        ++p;
        break;
      }
    }
    p = skipSpace(p);
  }
  if (*p != '}' || *skipSpace(p + 1)) {
    snprintf(why, size, "unexpected '%s'", p);
    return false;
  }
  return true;
}

/* ---- the mesh ------------------------------------------------------------ */

/* The mesh of all tiled shardings: the union of their running products,
 * which must form a chain of divisors of the device count. */
static int meshOf(Import *im, int64_t *axes, int64_t *outDevices) {
  int64_t bounds[64];
  int nb = 0;
  int64_t devices = 0;
  const Sharding *first = NULL;
  for (int v = 0; v < im->numValues; ++v) {
    const Sharding *s = &im->values[v];
    if (!s->tiled)
      continue;
    int64_t prod = 1;
    for (int i = 0; i < s->numTiles; ++i) {
      prod *= s->tiles[i];
      bool seen = false;
      for (int b = 0; b < nb; ++b)
        seen |= bounds[b] == prod;
      if (!seen && prod > 1 && nb < 64)
        bounds[nb++] = prod;
    }
    if (devices && prod != devices) {
      fail(im, mlirOperationGetLocation(s->func),
           "GSPMD shardings use %lld "
           "and %lld devices in one module; they must use the same devices",
           (long long)devices, (long long)prod);
      return -1;
    }
    if (!first)
      first = s;
    devices = prod;
  }
  *outDevices = devices;
  for (int i = 1; i < nb; ++i) /* sort */
    for (int j = i; j > 0 && bounds[j - 1] > bounds[j]; --j) {
      int64_t t = bounds[j];
      bounds[j] = bounds[j - 1];
      bounds[j - 1] = t;
    }
  int n = 0;
  int64_t prev = 1;
  for (int b = 0; b < nb; ++b) {
    if (bounds[b] % prev) {
      fail(im, mlirOperationGetLocation(first->func),
           "the GSPMD shardings "
           "of this module split the devices in orders no one mesh has (tile "
           "products %lld and %lld do not divide each other)",
           (long long)prev, (long long)bounds[b]);
      return -1;
    }
    if (n == DTENSOR_MAX_MESH_RANK) {
      fail(im, mlirOperationGetLocation(first->func),
           "the GSPMD shardings "
           "need a mesh of more than %d axes",
           DTENSOR_MAX_MESH_RANK);
      return -1;
    }
    axes[n++] = bounds[b] / prev;
    prev = bounds[b];
  }
  return n;
}

/* The spec of `s` on the mesh: each tile count is the product of the next
 * consecutive axes. */
static bool specOf(Import *im, const Sharding *s, const int64_t *axes,
                   int numAxes, char *out, size_t size) {
  int k = snprintf(out, size, "[");
  int a = 0;
  int dims = s->tiled ? s->numTiles - (s->lastReplicated ? 1 : 0) : s->rank;
  for (int d = 0; d < dims; ++d) {
    int64_t want = s->tiled ? s->tiles[d] : 1, got = 1;
    char dimAxes[64] = "";
    int na = 0;
    while (got < want && a < numAxes) {
      got *= axes[a];
      na += snprintf(dimAxes + na, sizeof(dimAxes) - (size_t)na, "%d", a);
      ++a;
    }
    if (got != want) {
      fail(im, mlirOperationGetLocation(s->func),
           "%s %d: a tile count of %lld "
           "does not fit the mesh",
           s->isResult ? "result" : "argument", s->index, (long long)want);
      return false;
    }
    k += snprintf(out + k, size - (size_t)k, "%s%s%s", d ? ", " : "",
                  na ? "S" : "R", dimAxes);
  }
  snprintf(out + k, size - (size_t)k, "]");
  return true;
}

/* ---- the pass ------------------------------------------------------------ */

static void collect(Import *im, MlirOperation func, bool results) {
  MlirAttribute list = dtGetAttr(func, results ? "res_attrs" : "arg_attrs");
  if (mlirAttributeIsNull(list))
    return;
  MlirType fnType = mlirTypeAttrGetValue(dtGetAttr(func, "function_type"));
  for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(list); ++i) {
    MlirAttribute s = mlirDictionaryAttrGetElementByName(
        mlirArrayAttrGetElement(list, i),
        mlirStringRefCreateFromCString("mhlo.sharding"));
    if (mlirAttributeIsNull(s))
      continue;
    MlirType type = results ? mlirFunctionTypeGetResult(fnType, i)
                            : mlirFunctionTypeGetInput(fnType, i);
    const char *what = results ? "result" : "argument";
    if (!mlirAttributeIsAString(s) || !mlirTypeIsARankedTensor(type)) {
      fail(im, mlirOperationGetLocation(func),
           "%s %d: mhlo.sharding must be "
           "a string on a ranked tensor",
           what, (int)i);
      continue;
    }
    if (im->numValues == MAX_VALUES) {
      fail(im, mlirOperationGetLocation(func), "more than %d shardings",
           MAX_VALUES);
      return;
    }
    Sharding *sh = &im->values[im->numValues];
    memset(sh, 0, sizeof(*sh));
    sh->func = func;
    sh->index = (int)i;
    sh->isResult = results;
    sh->rank = (int)mlirShapedTypeGetRank(type);
    MlirStringRef text = mlirStringAttrGetValue(s);
    char buf[1024], why[512];
    snprintf(buf, sizeof(buf), "%.*s", (int)text.length, text.data);
    if (!parseSharding(buf, sh, why, sizeof(why))) {
      fail(im, mlirOperationGetLocation(func),
           "%s %d: mhlo.sharding \"%s\": "
           "%s",
           what, (int)i, buf, why);
      continue;
    }
    int dims =
        sh->tiled ? sh->numTiles - (sh->lastReplicated ? 1 : 0) : sh->rank;
    if (dims != sh->rank) {
      fail(im, mlirOperationGetLocation(func),
           "%s %d: mhlo.sharding \"%s\" "
           "tiles %d dims of a tensor of %d",
           what, (int)i, buf, dims, sh->rank);
      continue;
    }
    ++im->numValues;
  }
}

static void setLayout(MlirOperation func, const Sharding *s,
                      MlirAttribute layout) {
  MlirContext ctx = mlirOperationGetContext(func);
  const char *key = s->isResult ? "res_attrs" : "arg_attrs";
  MlirAttribute list = dtGetAttr(func, key);
  intptr_t n = mlirArrayAttrGetNumElements(list);
  MlirAttribute *dicts = malloc(sizeof(MlirAttribute) * (size_t)n);
  for (intptr_t i = 0; i < n; ++i) {
    MlirAttribute d = mlirArrayAttrGetElement(list, i);
    if (i != s->index) {
      dicts[i] = d;
      continue;
    }
    /* The sharding is replaced by the layout. */
    intptr_t m = mlirDictionaryAttrGetNumElements(d);
    MlirNamedAttribute *entries =
        malloc(sizeof(MlirNamedAttribute) * (size_t)(m + 1));
    int k = 0;
    for (intptr_t j = 0; j < m; ++j) {
      MlirNamedAttribute e = mlirDictionaryAttrGetElement(d, j);
      if (!mlirStringRefEqual(mlirIdentifierStr(e.name),
                              mlirStringRefCreateFromCString("mhlo.sharding")))
        entries[k++] = e;
    }
    entries[k++] = mlirNamedAttributeGet(
        mlirIdentifierGet(ctx, mlirStringRefCreateFromCString(DT_ATTR_LAYOUT)),
        layout);
    dicts[i] = mlirDictionaryAttrGet(ctx, k, entries);
    free(entries);
  }
  mlirOperationSetAttributeByName(func, mlirStringRefCreateFromCString(key),
                                  mlirArrayAttrGet(ctx, n, dicts));
  free(dicts);
}

static bool runImportGspmd(MlirOperation module, const DtPassOptions *options) {
  Import *im = calloc(1, sizeof(Import));
  if (!im)
    return false;
  im->module = module;
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f))
    if (dtIsOp(f, "func.func")) {
      collect(im, f, false);
      collect(im, f, true);
    }
  int64_t axes[DTENSOR_MAX_MESH_RANK], devices = 0;
  int numAxes = im->failed || !im->numValues ? 0 : meshOf(im, axes, &devices);
  int64_t wanted = dtPassOptionsGetInt(options, "devices");
  const char *meshName = dtPassOptionsGet(options, "mesh");
  if (!im->failed && im->numValues && devices == 0) {
    /* Only replicated values: the device count must be given. */
    if (wanted < 1)
      fail(im, mlirOperationGetLocation(im->values[0].func),
           "every GSPMD "
           "sharding here is replicated, which does not say how many devices "
           "there are: give devices=N");
    else {
      axes[0] = wanted;
      numAxes = 1;
      devices = wanted;
    }
  } else if (!im->failed && wanted > 0 && wanted != devices) {
    fail(im, mlirOperationGetLocation(im->values[0].func),
         "the GSPMD "
         "shardings use %lld devices, not the %lld of devices=",
         (long long)devices, (long long)wanted);
  }
  if (im->failed || !im->numValues) {
    bool ok = !im->failed;
    free(im);
    return ok;
  }
  if (numAxes == 0) { /* tiles of 1 only: one axis of every device */
    axes[0] = devices;
    numAxes = 1;
  }
  /* The mesh, then every layout. */
  MlirContext ctx = mlirOperationGetContext(module);
  MlirOperation existing =
      dtensorMeshOpLookup(module, mlirStringRefCreateFromCString(meshName));
  if (!mlirOperationIsNull(existing)) {
    fail(im, mlirOperationGetLocation(existing),
         "a mesh @%s exists already; "
         "name the imported one with mesh=NAME",
         meshName);
    free(im);
    return false;
  }
  const char *axisNames[DTENSOR_MAX_MESH_RANK];
  char nameText[DTENSOR_MAX_MESH_RANK][16];
  for (int a = 0; a < numAxes; ++a) {
    snprintf(nameText[a], sizeof(nameText[a]), "g%d", a);
    axisNames[a] = nameText[a];
  }
  DtensorDiag meshDiag;
  DtensorMesh *mesh = dtensorMeshCreate(numAxes, axes, axisNames, &meshDiag);
  if (!mesh) {
    fail(im, mlirOperationGetLocation(im->values[0].func),
         "the imported "
         "mesh: %s",
         meshDiag.message);
    free(im);
    return false;
  }
  dtMeshOpCreate(module, mlirOperationGetLocation(im->values[0].func), meshName,
                 mesh);
  dtensorMeshDestroy(mesh);
  for (int v = 0; v < im->numValues && !im->failed; ++v) {
    const Sharding *s = &im->values[v];
    char spec[256];
    DtensorShardingSpec parsed;
    DtensorDiag diag;
    if (!specOf(im, s, axes, numAxes, spec, sizeof(spec)))
      break;
    if (!dtensorShardingSpecParse(spec, NULL, &parsed, &diag)) {
      fail(im, mlirOperationGetLocation(s->func), "%s %d: %s",
           s->isResult ? "result" : "argument", s->index, diag.message);
      break;
    }
    setLayout(s->func, s,
              dtensorLayoutAttrGet(
                  ctx, mlirStringRefCreateFromCString(meshName), &parsed));
  }
  bool ok = !im->failed;
  free(im);
  return ok;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"mesh", DTENSOR_OPTION_STRING, "gspmd", NULL,
     "the name of the mesh to declare"},
    {"devices", DTENSOR_OPTION_INT, "0", NULL,
     "the device count (needed when every sharding is replicated; checked "
     "otherwise)"},
};

const DtPassDef dtImportGspmdPass = {
    .info = {"dtensor-import-gspmd",
             "Turn GSPMD mhlo.sharding strings on function arguments and "
             "results into a dtensor mesh and layouts",
             2, kOptions},
    .verifyFirst = true,
    .run = runImportGspmd,
};
