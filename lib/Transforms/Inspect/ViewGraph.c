/* dtensor-view-graph: a picture of each function as a Graphviz DOT graph
 * (the IR is left as it is). Nodes are the ops of the function's body (an
 * op with regions is one node) and its arguments; an edge goes from a
 * value's definition to each use, labelled with the value's layout where
 * the program says it (an argument's dtensor.layout, an op's result layout
 * after dtensor-propagate, an annotation's) and its type. Collectives are
 * filled orange, with their mesh axes and, after dtensor-report, the bytes
 * they move. `output=FILE` writes the graph there (stderr by default); a
 * FILE ending in .svg is rendered by Graphviz's `dot` (Debian's graphviz),
 * or refused with a message where `dot` is not installed. */
#include "PassDef.h"
#include "Util.h"

#include "Support/Support.h"
#include "dtensor-c/Dialect.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Diagnostics.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void toFile(MlirStringRef s, void *user) {
  fwrite(s.data, 1, s.length, (FILE *)user);
}

/* The layout spec the program states for result `index` of `op` (or for a
 * block argument: its function's argument attribute), or "". */
static void layoutOf(MlirValue v, char *out, size_t size) {
  out[0] = 0;
  MlirAttribute layout = {NULL};
  if (mlirValueIsAOpResult(v)) {
    MlirOperation def = mlirOpResultGetOwner(v);
    MlirAttribute a = dtGetAttr(def, DT_ATTR_LAYOUT);
    if (dtIsOp(def, DT_OP_ANNOTATE) || dtIsOp(def, DT_OP_REDISTRIBUTE))
      a = dtGetAttr(def, "layout");
    intptr_t index = mlirOpResultGetResultNumber(v);
    if (!mlirAttributeIsNull(a) && mlirAttributeIsAArray(a))
      a = index < mlirArrayAttrGetNumElements(a)
              ? mlirArrayAttrGetElement(a, index)
              : (MlirAttribute){NULL};
    layout = a;
  } else {
    MlirBlock block = mlirBlockArgumentGetOwner(v);
    MlirOperation func = mlirBlockGetParentOperation(block);
    if (dtIsOp(func, "func.func"))
      layout = dtFuncArgAttr(func, false, mlirBlockArgumentGetArgNumber(v),
                             DT_ATTR_LAYOUT);
  }
  DtensorLayoutAttrParts parts;
  if (!mlirAttributeIsNull(layout) && dtensorLayoutAttrGetParts(layout, &parts))
    snprintf(out, size, "%.*s", (int)(size - 1), parts.spec);
}

/* The type of `v` as MLIR prints it, without the "tensor<" wrapper. */
static void typeOf(MlirValue v, char *out, size_t size) {
  char text[256] = "";
  FILE *f = fmemopen(text, sizeof(text) - 1, "w");
  if (f) {
    mlirTypePrint(mlirValueGetType(v), toFile, f);
    fclose(f);
  }
  const char *t = text;
  size_t n = strlen(t);
  if (!strncmp(t, "tensor<", 7) && n > 8) {
    t += 7;
    n -= 8;
  }
  snprintf(out, size, "%.*s", (int)n, t);
}

/* A node id per op and block argument: their position in `nodes`. */
typedef struct Graph {
  FILE *out;
  DtOpList ops;
} Graph;

static int nodeOf(const Graph *g, MlirValue v) {
  if (!mlirValueIsAOpResult(v))
    return -1 - (int)mlirBlockArgumentGetArgNumber(v);
  MlirOperation def = mlirOpResultGetOwner(v);
  for (size_t i = 0; i < g->ops.count; ++i)
    if (mlirOperationEqual(g->ops.ops[i], def))
      return (int)i;
  return -1000000;
}

static bool isCollective(MlirOperation op) {
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  return name.length > 8 && !strncmp(name.data, "dtensor.", 8) &&
         !dtIsOp(op, DT_OP_ANNOTATE) && !dtIsOp(op, DT_OP_MESH) &&
         !dtIsOp(op, DT_OP_REDISTRIBUTE);
}

static void drawFunction(Graph *g, MlirOperation func) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  MlirStringRef name = mlirStringAttrGetValue(dtGetAttr(func, "sym_name"));
  fprintf(g->out, "  subgraph \"cluster_%.*s\" {\n    label=\"@%.*s\";\n",
          (int)name.length, name.data, (int)name.length, name.data);
  g->ops.count = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    dtOpListPush(&g->ops, op);
  for (intptr_t a = 0; a < mlirBlockGetNumArguments(body); ++a)
    fprintf(
        g->out,
        "    \"%.*s_a%ld\" [shape=box, style=rounded, label=\"arg %ld\"];\n",
        (int)name.length, name.data, (long)a, (long)a);
  for (size_t i = 0; i < g->ops.count; ++i) {
    MlirOperation op = g->ops.ops[i];
    MlirStringRef opName = mlirIdentifierStr(mlirOperationGetName(op));
    char extra[160] = "";
    if (isCollective(op)) {
      MlirAttribute axes = dtGetAttr(op, "mesh_axes");
      MlirAttribute cost = dtGetAttr(op, DT_ATTR_COST);
      DtBuf b = dtBufInit(extra, sizeof(extra));
      if (!mlirAttributeIsNull(axes) && mlirAttributeIsADenseI64Array(axes)) {
        dtBufPrintf(&b, "\\naxes");
        for (intptr_t k = 0; k < mlirDenseArrayGetNumElements(axes); ++k)
          dtBufPrintf(&b, " %lld",
                      (long long)mlirDenseI64ArrayGetElement(axes, k));
      }
      MlirAttribute bytes =
          mlirAttributeIsNull(cost)
              ? cost
              : mlirDictionaryAttrGetElementByName(
                    cost, mlirStringRefCreateFromCString("bytes"));
      if (!mlirAttributeIsNull(bytes))
        dtBufPrintf(&b, "\\n%lld bytes",
                    (long long)mlirIntegerAttrGetValueInt(bytes));
    }
    fprintf(
        g->out, "    \"%.*s_%zu\" [label=\"%.*s%s\"%s];\n", (int)name.length,
        name.data, i, (int)opName.length, opName.data, extra,
        isCollective(op) ? ", style=filled, fillcolor=orange, penwidth=2" : "");
  }
  for (size_t i = 0; i < g->ops.count; ++i) {
    MlirOperation op = g->ops.ops[i];
    for (intptr_t k = 0; k < mlirOperationGetNumOperands(op); ++k) {
      MlirValue v = mlirOperationGetOperand(op, k);
      int from = nodeOf(g, v);
      if (from == -1000000)
        continue; /* defined outside the function's body */
      char layout[256], type[256];
      layoutOf(v, layout, sizeof(layout));
      typeOf(v, type, sizeof(type));
      if (from >= 0)
        fprintf(g->out, "    \"%.*s_%d\"", (int)name.length, name.data, from);
      else
        fprintf(g->out, "    \"%.*s_a%d\"", (int)name.length, name.data,
                -1 - from);
      fprintf(g->out, " -> \"%.*s_%zu\" [label=\"%s%s%s\"];\n",
              (int)name.length, name.data, i, layout, layout[0] ? "\\n" : "",
              type);
    }
  }
  fprintf(g->out, "  }\n");
}

/* Starts Graphviz's dot rendering SVG into `svgOut`, its DOT input the
 * stream returned (NULL if it cannot start), its pid in `*outPid`. Run with
 * an argument vector, not a shell: the path never reaches one. */
static FILE *startDot(FILE *svgOut, pid_t *outPid) {
  int fds[2];
  if (pipe(fds) != 0)
    return NULL;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], 0);
  posix_spawn_file_actions_adddup2(&actions, fileno(svgOut), 1);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  char *argv[] = {"dot", "-Tsvg", NULL};
  extern char **environ;
  int e = posix_spawnp(outPid, "dot", &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[0]);
  FILE *in = e == 0 ? fdopen(fds[1], "w") : NULL;
  if (!in)
    close(fds[1]);
  return in;
}

static bool runViewGraph(MlirOperation root, const DtPassOptions *options) {
  const char *path = dtPassOptionsGet(options, "output");
  size_t n = strlen(path);
  bool svg = n > 4 && !strcmp(path + n - 4, ".svg");
  MlirLocation loc = mlirOperationGetLocation(root);
  char message[4400];
  DtOutput file;
  DtensorDiag diag;
  FILE *out = stderr;
  pid_t dot = -1;
  if (n && !dtOutputOpen(&file, path, &diag)) {
    snprintf(message, sizeof(message), "dtensor-view-graph: %s", diag.message);
    mlirEmitError(loc, message);
    return false;
  }
  if (n)
    out = svg ? startDot(file.file, &dot) : file.file;
  if (!out) {
    dtOutputClose(&file, false, NULL);
    mlirEmitError(loc, "dtensor-view-graph: an .svg output needs Graphviz's "
                       "'dot' (apt-get install graphviz); write a .dot file "
                       "instead");
    return false;
  }
  Graph g = {out, {0}};
  fprintf(out, "digraph dtensor {\n  node [shape=ellipse, fontsize=10];\n"
               "  edge [fontsize=9];\n");
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(root, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(top);
       !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f))
    if (dtIsOp(f, "func.func") &&
        !mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0))))
      drawFunction(&g, f);
  fprintf(out, "}\n");
  free(g.ops.ops);
  bool ok = !ferror(out);
  if (svg) {
    int status = 0;
    ok = fclose(out) == 0 && ok;
    ok = waitpid(dot, &status, 0) == dot && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0 && ok;
  }
  if (n && !dtOutputClose(&file, ok, &diag))
    ok = false;
  if (!ok)
    mlirEmitError(loc, "dtensor-view-graph: writing the graph failed");
  return ok;
}

static const DtensorPassOptionInfo kOptions[] = {
    {"output", DTENSOR_OPTION_STRING, "", NULL,
     "write the DOT graph to this file (default: stderr); a name ending in "
     ".svg is rendered by Graphviz's dot"},
};

const DtPassDef dtViewGraphPass = {
    .info = {"dtensor-view-graph",
             "Draw each function as a Graphviz graph: layouts on the edges, "
             "collectives highlighted (the IR is unchanged)",
             1, kOptions},
    .verifyFirst = false,
    .run = runViewGraph,
    .numDependentDialects = 0,
};
