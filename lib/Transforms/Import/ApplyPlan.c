/* dtensor-apply-plan: shards a whole model from a plan file instead of
 * edited IR, as PyTorch's parallelize_module does for modules. The plan
 * (JSON, read with jansson; docs/plans.md) names a mesh and maps argument
 * names (globs) to layouts or to styles: colwise, rowwise, replicate,
 * data_parallel, sequence. An argument's name is its `dtensor.name` attribute,
 * else its name location (`loc("w1")`). Every rule must match an argument, and
 * rules that give one argument different layouts are an error. */
#include "Dialect/DialectInternal.h"
#include "PassDef.h"
#include "Util.h"

#include "Support/Support.h"

#include "dtensor-c/Dialect.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Func.h"

#include <fnmatch.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RULES 256

typedef struct Rule {
  const char *match;    /* glob over argument names */
  const char *function; /* glob over function names, or NULL: any */
  const char *layout;   /* a spec, or NULL */
  const char *style;    /* or a style, with */
  int axis;             /* its mesh axis */
  int dim;              /* the sequence style's tensor dim */
  int fsdpAxis;         /* "fsdp": also shard a dim the style leaves whole
                           over this axis (-1: none) */
  bool inOut;           /* weights stored [in, out] (x @ W); false: as
                           nn.Linear stores them, [out, in] (x @ W^T) */
  int interleave;       /* colwise: the split dim as this many interleaved
                           groups (fused q, k, v: 3); 0: none */
  int splitDim;         /* the dim the style split (for messages) */
  int matched;
} Rule;

typedef struct Plan {
  MlirOperation module;
  const char *path;
  char meshName[128];
  DtensorMesh *mesh;
  Rule rules[MAX_RULES];
  int numRules;
  bool inOut; /* the plan's "storage" (default: PyTorch's [out, in]) */
  bool failed;
} Plan;

/* Reports an error at `loc` and fails the pass. */
#define fail(p, loc, ...) (dtEmitError((loc), __VA_ARGS__), (p)->failed = true)

/* Where errors about the plan as a whole are reported: the module's first
 * operation with a known location (the implicit module has none). */
static MlirLocation moduleLoc(const Plan *p) {
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(p->module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (mlirLocationIsAFileLineColRange(mlirOperationGetLocation(op)))
      return mlirOperationGetLocation(op);
  return mlirOperationGetLocation(p->module);
}

static const char *kStyles[] = {"colwise",       "rowwise",  "replicate",
                                "data_parallel", "sequence", "fsdp",
                                "vocab_parallel"};

/* "storage": "out_in" (nn.Linear's [out, in], the default) or "in_out";
 * -1 after an error. */
static int storageOf(Plan *p, json_t *v, const char *where, bool dflt) {
  if (!v)
    return dflt;
  const char *s = json_string_value(v);
  if (s && !strcmp(s, "out_in"))
    return 0;
  if (s && !strcmp(s, "in_out"))
    return 1;
  fail(p, moduleLoc(p),
       "plan '%s': %s\"storage\" must be \"out_in\" (weights as "
       "nn.Linear stores them, [out, in]: the default) or \"in_out\" "
       "([in, out], x @ W)",
       p->path, where);
  return -1;
}

/* ---- the plan file ------------------------------------------------------ */

static int axisOf(Plan *p, json_t *axis, int rule, int dflt) {
  if (!axis)
    return dflt;
  int rank = dtensorMeshGetRank(p->mesh);
  if (json_is_integer(axis) && json_integer_value(axis) >= 0 &&
      json_integer_value(axis) < rank)
    return (int)json_integer_value(axis);
  if (json_is_string(axis)) {
    int a = dtensorMeshFindAxis(p->mesh, json_string_value(axis),
                                strlen(json_string_value(axis)));
    if (a >= 0)
      return a;
  }
  char names[256] = "";
  for (int a = 0, k = 0; a < rank; ++a)
    k += snprintf(names + k, sizeof(names) - (size_t)k, "%s%s", a ? ", " : "",
                  dtensorMeshGetAxisName(p->mesh, a));
  fail(p, moduleLoc(p),
       "plan '%s': rule %d: axis %s is not an axis of mesh "
       "@%s (its axes: %s)",
       p->path, rule,
       json_is_string(axis) ? json_string_value(axis) : "(not a name)",
       p->meshName, names);
  return -1;
}

/* The mesh: an existing dtensor.mesh by name, or one the plan declares
 * (created when the module has none of that name). */
static bool readMesh(Plan *p, json_t *mesh) {
  MlirLocation loc = moduleLoc(p);
  const char *name = json_is_string(mesh) ? json_string_value(mesh)
                     : json_is_object(mesh)
                         ? json_string_value(json_object_get(mesh, "name"))
                         : NULL;
  if (!name) {
    fail(p, loc,
         "plan '%s': \"mesh\" must be a mesh's name or {\"name\", "
         "\"shape\", \"axes\"}",
         p->path);
    return false;
  }
  if (name[0] == '@')
    ++name;
  if (!name[0]) {
    fail(p, loc,
         "plan '%s': the mesh's name is empty (a dtensor.mesh needs "
         "a symbol name: \"mesh\": {\"name\": \"mesh\", ...})",
         p->path);
    return false;
  }
  snprintf(p->meshName, sizeof(p->meshName), "%s", name);
  DtensorDiag diag;
  MlirOperation existing =
      dtensorMeshOpLookup(p->module, mlirStringRefCreateFromCString(name));
  if (!mlirOperationIsNull(existing)) {
    p->mesh = dtensorMeshCreateFromOp(existing, &diag);
    if (!p->mesh)
      fail(p, loc, "plan '%s': mesh @%s: %s", p->path, name, diag.message);
    return p->mesh != NULL;
  }
  json_t *shape = json_is_object(mesh) ? json_object_get(mesh, "shape") : NULL;
  json_t *axes = json_is_object(mesh) ? json_object_get(mesh, "axes") : NULL;
  size_t rank = json_is_array(shape) ? json_array_size(shape) : 0;
  if (rank > DTENSOR_MAX_MESH_RANK) {
    fail(p, loc,
         "plan '%s': mesh @%s has %zu axes; at most %d are "
         "supported",
         p->path, name, rank, DTENSOR_MAX_MESH_RANK);
    return false;
  }
  if (!rank ||
      (axes && (!json_is_array(axes) || json_array_size(axes) != rank))) {
    fail(p, loc,
         "plan '%s': the module has no mesh @%s, and the plan does "
         "not declare it (\"mesh\": {\"name\": \"%s\", \"shape\": [2, 4], "
         "\"axes\": [\"dp\", \"tp\"]})",
         p->path, name, name);
    return false;
  }
  int64_t dims[DTENSOR_MAX_MESH_RANK];
  const char *names[DTENSOR_MAX_MESH_RANK];
  for (size_t a = 0; a < rank; ++a) {
    json_t *d = json_array_get(shape, a);
    dims[a] = json_is_integer(d) ? json_integer_value(d) : 0;
    names[a] = axes ? json_string_value(json_array_get(axes, a)) : NULL;
    if (axes && !names[a]) {
      fail(p, loc, "plan '%s': mesh axis names must be strings", p->path);
      return false;
    }
  }
  p->mesh = dtensorMeshCreate((int)rank, dims, axes ? names : NULL, &diag);
  if (!p->mesh) {
    fail(p, loc, "plan '%s': mesh @%s: %s", p->path, name, diag.message);
    return false;
  }
  /* Declare it at the top of the module. */
  dtMeshOpCreate(p->module, loc, name, p->mesh);
  return true;
}

static bool readRules(Plan *p, json_t *rules) {
  if (!json_is_array(rules) || json_array_size(rules) == 0 ||
      json_array_size(rules) > MAX_RULES) {
    fail(p, moduleLoc(p),
         "plan '%s': \"rules\" must be a list of 1 to %d "
         "rules",
         p->path, MAX_RULES);
    return false;
  }
  static const char *kKeys[] = {"match", "function", "layout",
                                "style", "axis",     "dim",
                                "fsdp",  "storage",  "interleave"};
  for (size_t i = 0; i < json_array_size(rules); ++i) {
    json_t *r = json_array_get(rules, i);
    int n = (int)i + 1;
    if (!json_is_object(r)) {
      fail(p, moduleLoc(p), "plan '%s': rule %d is not an object", p->path, n);
      return false;
    }
    const char *key;
    json_t *value;
    json_object_foreach(r, key, value) {
      bool known = false;
      for (size_t k = 0; k < sizeof(kKeys) / sizeof(kKeys[0]); ++k)
        known |= !strcmp(key, kKeys[k]);
      if (!known) {
        fail(p, moduleLoc(p),
             "plan '%s': rule %d: unknown key \"%s\" "
             "(valid: match, function, layout, style, axis, dim, fsdp, "
             "storage, interleave)",
             p->path, n, key);
        return false;
      }
    }
    Rule *rule = &p->rules[p->numRules++];
    memset(rule, 0, sizeof(*rule));
    rule->match = json_string_value(json_object_get(r, "match"));
    rule->function = json_string_value(json_object_get(r, "function"));
    rule->layout = json_string_value(json_object_get(r, "layout"));
    rule->style = json_string_value(json_object_get(r, "style"));
    if (!rule->match) {
      fail(p, moduleLoc(p),
           "plan '%s': rule %d has no \"match\" (a glob "
           "over argument names)",
           p->path, n);
      return false;
    }
    if (!rule->layout == !rule->style) {
      fail(p, moduleLoc(p),
           "plan '%s': rule %d ('%s') needs exactly one of "
           "\"layout\" and \"style\"",
           p->path, n, rule->match);
      return false;
    }
    if (rule->style) {
      bool known = false;
      for (size_t k = 0; k < sizeof(kStyles) / sizeof(kStyles[0]); ++k)
        known |= !strcmp(rule->style, kStyles[k]);
      if (!known) {
        fail(p, moduleLoc(p),
             "plan '%s': rule %d ('%s'): unknown style '%s' "
             "(valid: colwise, rowwise, replicate, data_parallel, "
             "sequence, fsdp, vocab_parallel)",
             p->path, n, rule->match, rule->style);
        return false;
      }
      /* Tensor parallel styles default to the last axis, data parallel to
       * the first. */
      int rank = dtensorMeshGetRank(p->mesh);
      int dflt =
          !strcmp(rule->style, "data_parallel") || !strcmp(rule->style, "fsdp")
              ? 0
              : rank - 1;
      if ((rule->axis = axisOf(p, json_object_get(r, "axis"), n, dflt)) < 0)
        return false;
    }
    /* The sequence style splits `dim` (default 1: [batch, seq, hidden]). */
    json_t *dim = json_object_get(r, "dim");
    rule->dim = 1;
    if (dim && (!rule->style || strcmp(rule->style, "sequence") ||
                !json_is_integer(dim) || json_integer_value(dim) < 0 ||
                json_integer_value(dim) >= DTENSOR_MAX_TENSOR_RANK)) {
      fail(p, moduleLoc(p),
           "plan '%s': rule %d ('%s'): \"dim\" is the sequence style's "
           "tensor dim, an integer from 0 to %d",
           p->path, n, rule->match, DTENSOR_MAX_TENSOR_RANK - 1);
      return false;
    }
    if (dim)
      rule->dim = (int)json_integer_value(dim);
    /* "fsdp": a tensor parallel style's parameter also sharded over the
     * data parallel axis (FSDP x TP). */
    json_t *fsdp = json_object_get(r, "fsdp");
    rule->fsdpAxis = -1;
    if (fsdp && !rule->style) {
      fail(p, moduleLoc(p),
           "plan '%s': rule %d ('%s'): \"fsdp\" goes with a style", p->path, n,
           rule->match);
      return false;
    }
    if (fsdp && (rule->fsdpAxis = axisOf(p, fsdp, n, 0)) < 0)
      return false;
    if (fsdp && rule->fsdpAxis == rule->axis) {
      fail(p, moduleLoc(p),
           "plan '%s': rule %d ('%s'): \"fsdp\" names the style's own axis",
           p->path, n, rule->match);
      return false;
    }
    /* How the weights are stored: the rule's, else the plan's. */
    json_t *storage = json_object_get(r, "storage");
    char where[160];
    snprintf(where, sizeof(where), "rule %d ('%s'): ", n, rule->match);
    int inOut = storageOf(p, storage, where, p->inOut);
    if (inOut < 0)
      return false;
    rule->inOut = inOut;
    if (storage && (!rule->style || (strcmp(rule->style, "colwise") &&
                                     strcmp(rule->style, "rowwise")))) {
      fail(p, moduleLoc(p),
           "plan '%s': rule %d ('%s'): \"storage\" goes with the colwise "
           "and rowwise styles",
           p->path, n, rule->match);
      return false;
    }
    /* "interleave": N groups on colwise's split dim (veScale's
     * InterleavedShard: a fused q, k, v weight keeps whole heads). */
    json_t *groups = json_object_get(r, "interleave");
    if (groups && (!rule->style || strcmp(rule->style, "colwise") ||
                   !json_is_integer(groups) || json_integer_value(groups) < 2 ||
                   json_integer_value(groups) > 64)) {
      fail(p, moduleLoc(p),
           "plan '%s': rule %d ('%s'): \"interleave\" is the colwise "
           "style's number of fused groups (fused q, k, v: 3), from 2 to 64",
           p->path, n, rule->match);
      return false;
    }
    rule->interleave = groups ? (int)json_integer_value(groups) : 0;
  }
  return true;
}

/* ---- arguments ----------------------------------------------------------- */

/* An argument's name: its dtensor.name, else its name location. */
static bool argName(MlirOperation func, intptr_t i, char *out, size_t size) {
  MlirAttribute attrs = dtGetAttr(func, "arg_attrs");
  if (!mlirAttributeIsNull(attrs) && i < mlirArrayAttrGetNumElements(attrs)) {
    MlirAttribute n = mlirDictionaryAttrGetElementByName(
        mlirArrayAttrGetElement(attrs, i),
        mlirStringRefCreateFromCString(DT_ATTR_NAME));
    if (!mlirAttributeIsNull(n) && mlirAttributeIsAString(n)) {
      MlirStringRef s = mlirStringAttrGetValue(n);
      snprintf(out, size, "%.*s", (int)s.length, s.data);
      return true;
    }
  }
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  MlirLocation loc = mlirValueGetLocation(mlirBlockGetArgument(entry, i));
  if (mlirLocationIsAName(loc)) {
    MlirStringRef s = mlirIdentifierStr(mlirLocationNameGetName(loc));
    snprintf(out, size, "%.*s", (int)s.length, s.data);
    return true;
  }
  return false;
}

/* The spec a rule gives a tensor of `rank` dims; false when the rule's
 * sequence dim is not one of them. */
static bool specOf(const Plan *p, Rule *r, int rank, char *out, size_t size) {
  if (r->layout) {
    snprintf(out, size, "%s", r->layout);
    return true;
  }
  /* Colwise shards the output features, rowwise the input features: dims
   * 0 and 1 of a weight stored as nn.Linear stores it ([out, in], x @
   * W^T), the last and the one before of one stored [in, out] (x @ W); a
   * vector (a bias) is output features, colwise splits it and rowwise
   * keeps it whole. Data parallel, FSDP and a vocabulary-parallel
   * embedding ([vocab, dim]) split dim 0. */
  int dim = -1;
  bool colwise = !strcmp(r->style, "colwise");
  if (colwise || !strcmp(r->style, "rowwise")) {
    if (rank == 1)
      dim = colwise ? 0 : -1;
    else if (rank >= 2)
      dim = (colwise == r->inOut) ? rank - 1 : rank - 2;
    else
      dim = 0; /* a 0-d argument has no features to split */
  } else if (!strcmp(r->style, "data_parallel") || !strcmp(r->style, "fsdp") ||
             !strcmp(r->style, "vocab_parallel"))
    dim = 0;
  else if (!strcmp(r->style, "sequence"))
    dim = r->dim;
  r->splitDim = dim;
  if (dim >= rank)
    return false;
  const char *axis = dtensorMeshGetAxisName(p->mesh, r->axis);
  /* FSDP's axis takes the first dim the style leaves whole (or joins the
   * style's on a vector's only dim). */
  int fdim = -1;
  const char *faxis =
      r->fsdpAxis >= 0 ? dtensorMeshGetAxisName(p->mesh, r->fsdpAxis) : NULL;
  for (int d = 0; d < rank && faxis && fdim < 0; ++d)
    if (d != dim)
      fdim = d;
  if (faxis && fdim < 0)
    fdim = dim;
  int k = snprintf(out, size, "[");
  for (int d = 0; d < rank; ++d) {
    k += snprintf(out + k, size - (size_t)k, "%s", d ? ", " : "");
    if (d != dim && d != fdim)
      k += snprintf(out + k, size - (size_t)k, "R");
    else if (d == dim && d == fdim)
      k += snprintf(out + k, size - (size_t)k, "S(%s, %s)", axis, faxis);
    else
      k +=
          snprintf(out + k, size - (size_t)k, "S(%s)", d == dim ? axis : faxis);
    if (d == dim && r->interleave)
      k += snprintf(out + k, size - (size_t)k, "i%d", r->interleave);
  }
  snprintf(out + k, size - (size_t)k, "]");
  return true;
}

static void applyToFunction(Plan *p, MlirOperation func, char *names,
                            size_t namesSize) {
  MlirContext ctx = mlirOperationGetContext(func);
  MlirStringRef fname = mlirStringAttrGetValue(dtGetAttr(func, "sym_name"));
  char fn[256];
  snprintf(fn, sizeof(fn), "%.*s", (int)fname.length, fname.data);
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry); ++i) {
    char name[256];
    if (!argName(func, i, name, sizeof(name)))
      continue;
    size_t used = strlen(names);
    snprintf(names + used, namesSize - used, "%s%s", used ? ", " : "", name);
    MlirType type = mlirValueGetType(mlirBlockGetArgument(entry, i));
    int chosen = -1;
    char spec[256] = "", other[256];
    for (int r = 0; r < p->numRules; ++r) {
      Rule *rule = &p->rules[r];
      if (fnmatch(rule->match, name, 0) != 0 ||
          (rule->function && fnmatch(rule->function, fn, 0) != 0))
        continue;
      ++rule->matched;
      if (!mlirTypeIsARankedTensor(type)) {
        fail(p, mlirOperationGetLocation(func),
             "plan '%s': rule %d ('%s') "
             "matches argument '%s' of @%s, which is not a ranked tensor",
             p->path, r + 1, rule->match, name, fn);
        return;
      }
      int rank = (int)mlirShapedTypeGetRank(type);
      if (!specOf(p, rule, rank, other, sizeof(other))) {
        fail(p, mlirOperationGetLocation(func),
             "plan '%s': rule %d ('%s') splits dim %d, but argument '%s' of "
             "@%s has %d dim%s",
             p->path, r + 1, rule->match, rule->splitDim, name, fn, rank,
             rank == 1 ? "" : "s");
        return;
      }
      if (chosen < 0) {
        chosen = r;
        snprintf(spec, sizeof(spec), "%s", other);
      } else if (strcmp(spec, other)) {
        fail(p, mlirOperationGetLocation(func),
             "plan '%s': conflicting "
             "rules for argument '%s' of @%s: rule %d ('%s') gives %s, rule "
             "%d ('%s') gives %s",
             p->path, name, fn, chosen + 1, p->rules[chosen].match, spec, r + 1,
             rule->match, other);
        return;
      }
    }
    if (chosen < 0)
      continue;
    DtensorShardingSpec parsed;
    DtensorDiag diag;
    int rank = (int)mlirShapedTypeGetRank(type);
    int64_t shape[DTENSOR_MAX_TENSOR_RANK];
    for (int d = 0; d < rank && d < DTENSOR_MAX_TENSOR_RANK; ++d)
      shape[d] = mlirShapedTypeGetDimSize(type, d);
    if (!dtensorShardingSpecParse(spec, p->mesh, &parsed, &diag) ||
        !dtensorShardingSpecCheck(&parsed, p->mesh, rank, shape, &diag)) {
      fail(p, mlirOperationGetLocation(func),
           "plan '%s': rule %d ('%s') "
           "gives argument '%s' of @%s the layout %s: %s",
           p->path, chosen + 1, p->rules[chosen].match, name, fn, spec,
           diag.message);
      return;
    }
    MlirAttribute layout = dtensorLayoutAttrGet(
        ctx, mlirStringRefCreateFromCString(p->meshName), &parsed);
    /* An annotation already there must agree. */
    MlirAttribute attrs = dtGetAttr(func, "arg_attrs");
    MlirAttribute have =
        mlirAttributeIsNull(attrs) || i >= mlirArrayAttrGetNumElements(attrs)
            ? attrs
            : mlirDictionaryAttrGetElementByName(
                  mlirArrayAttrGetElement(attrs, i),
                  mlirStringRefCreateFromCString(DT_ATTR_LAYOUT));
    if (!mlirAttributeIsNull(have) && !mlirAttributeEqual(have, layout)) {
      DtensorLayoutAttrParts parts;
      dtensorLayoutAttrGetParts(have, &parts);
      fail(p, mlirOperationGetLocation(func),
           "plan '%s': rule %d ('%s') "
           "gives argument '%s' of @%s the layout %s, but it is annotated "
           "%s",
           p->path, chosen + 1, p->rules[chosen].match, name, fn, spec,
           parts.spec);
      return;
    }
    mlirFuncSetArgAttr(func, i, mlirStringRefCreateFromCString(DT_ATTR_LAYOUT),
                       layout);
  }
}

static bool runApplyPlan(MlirOperation module, const DtPassOptions *options) {
  Plan *p = calloc(1, sizeof(Plan));
  if (!p)
    return false;
  p->module = module;
  p->path = dtPassOptionsGet(options, "plan");
  if (!p->path[0]) {
    fail(p, moduleLoc(p), "dtensor-apply-plan needs plan=FILE");
    free(p);
    return false;
  }
  json_error_t jerr;
  DtensorDiag diag;
  FILE *file = dtOpenRegularFile(p->path, &diag);
  json_t *root = file ? json_loadf(file, 0, &jerr) : NULL;
  if (file)
    fclose(file);
  if (!file)
    fail(p, moduleLoc(p), "plan %s", diag.message);
  else if (!root)
    fail(p, moduleLoc(p), "plan '%s':%d:%d: %s", p->path, jerr.line,
         jerr.column, jerr.text);
  else if (!json_is_object(root))
    fail(p, moduleLoc(p), "plan '%s': not a JSON object", p->path);
  const char *key;
  json_t *value;
  if (!p->failed)
    json_object_foreach(root, key, value) if (strcmp(key, "mesh") &&
                                              strcmp(key, "rules") &&
                                              strcmp(key, "storage")) {
      fail(p, moduleLoc(p),
           "plan '%s': unknown key \"%s\" (valid: mesh, "
           "rules, storage)",
           p->path, key);
      break;
    }
  if (!p->failed) {
    int inOut = storageOf(p, json_object_get(root, "storage"), "", false);
    p->inOut = inOut == 1;
  }
  if (!p->failed && readMesh(p, json_object_get(root, "mesh")) &&
      readRules(p, json_object_get(root, "rules"))) {
    char names[4096] = "";
    MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation f = mlirBlockGetFirstOperation(top);
         !mlirOperationIsNull(f) && !p->failed;
         f = mlirOperationGetNextInBlock(f))
      if (dtIsOp(f, "func.func") && !mlirBlockIsNull(mlirRegionGetFirstBlock(
                                        mlirOperationGetRegion(f, 0))))
        applyToFunction(p, f, names, sizeof(names));
    for (int r = 0; r < p->numRules && !p->failed; ++r)
      if (!p->rules[r].matched)
        fail(p, moduleLoc(p),
             "plan '%s': rule %d ('%s') matches no argument "
             "(names come from a dtensor.name attribute or a name location; "
             "the module's named arguments: %s)",
             p->path, r + 1, p->rules[r].match, names[0] ? names : "none");
  }
  bool ok = !p->failed;
  json_decref(root);
  dtensorMeshDestroy(p->mesh);
  free(p);
  return ok;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"plan", DTENSOR_OPTION_STRING, "", NULL,
     "the plan file (JSON: a mesh and rules mapping argument-name globs to "
     "layouts or styles; docs/plans.md)"},
};

const DtPassDef dtApplyPlanPass = {
    .info = {"dtensor-apply-plan",
             "Annotate function arguments with layouts from a plan file "
             "(argument-name globs to layouts or colwise/rowwise/replicate/"
             "data_parallel/sequence/fsdp styles)",
             1, kOptions},
    .verifyFirst = true,
    .run = runApplyPlan,
};
