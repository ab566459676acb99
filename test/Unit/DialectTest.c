/* The dtensor dialect loads from its IRDL definition and layout attributes
 * read back through the public API. */
#include "dtensor-c/Dialect.h"
#include "dtensor-c/Passes.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"

#include <stdio.h>
#include <string.h>

#include "Check.h"

static const char *kProgram =
    "module {\n"
    "  \"dtensor.mesh\"() {sym_name = \"mesh\", shape = array<i64: 2, 4>,\n"
    "    axis_names = [\"dp\", \"tp\"], bandwidth_gbps = array<f64: 50.0, "
    "200.0>} : () -> ()\n"
    "  func.func @f(%a: tensor<10x8xf32>) -> tensor<10x8xf32> {\n"
    "    %0 = \"dtensor.annotate\"(%a) {layout = #dtensor.layout<@mesh, "
    "\"[S(tp), S0]\">}"
    " : (tensor<10x8xf32>) -> tensor<10x8xf32>\n"
    "    return %0 : tensor<10x8xf32>\n"
    "  }\n"
    "}\n";

static MlirOperation findOp(MlirBlock block, const char *name) {
  for (MlirOperation op = mlirBlockGetFirstOperation(block);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
    if (n.length == strlen(name) && memcmp(n.data, name, n.length) == 0)
      return op;
  }
  return (MlirOperation){NULL};
}

/* An embedder registers an einsum rule for an op of its own and runs
 * dtensor-propagate from C. */
static void testRuleRegistry(void) {
  MlirContext ctx = dtensorContextCreate();
  mlirContextSetAllowUnregisteredDialects(ctx, true);
  static const char *program =
      "\"dtensor.mesh\"() {sym_name = \"tp\", shape = array<i64: 4>, "
      "axis_names = [\"tp\"]} : () -> ()\n"
      "func.func @f(%x: tensor<8x32xf32> {dtensor.layout = "
      "#dtensor.layout<@tp, \"[R, S0]\">}, %w: tensor<32x16xf32>) -> "
      "tensor<8x16xf32> {\n"
      "  %y = \"my.matmul\"(%x, %w) : (tensor<8x32xf32>, tensor<32x16xf32>) "
      "-> tensor<8x16xf32>\n"
      "  return %y : tensor<8x16xf32>\n}\n";
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(program));
  CHECK(!mlirModuleIsNull(module));
  DtensorRuleRegistry *rules = dtensorRuleRegistryCreate();
  DtensorDiag diag;
  CHECK(!dtensorRuleRegistryAdd(
      rules, mlirStringRefCreateFromCString("my.matmul"),
      mlirStringRefCreateFromCString("ij,jk->I"), &diag));
  CHECK(strstr(diag.message, "unexpected 'I'") != NULL);
  CHECK(dtensorRuleRegistryAdd(
      rules, mlirStringRefCreateFromCString("my.matmul"),
      mlirStringRefCreateFromCString("ij,jk->ik"), &diag));
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirPass pass = dtensorCreatePropagatePass(
      rules, mlirStringRefCreateFromCString(""), &diag);
  CHECK(pass.ptr != NULL);
  mlirPassManagerAddOwnedPass(pm, pass);
  CHECK(mlirLogicalResultIsSuccess(
      mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module))));
  MlirOperation func = findOp(mlirModuleGetBody(module), "func.func");
  MlirOperation mm = findOp(
      mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0)), "my.matmul");
  MlirAttribute l = mlirOperationGetAttributeByName(
      mm, mlirStringRefCreateFromCString("dtensor.layout"));
  DtensorLayoutAttrParts parts;
  /* j is sharded by x's layout and is a reduction: the result is Partial. */
  CHECK(dtensorLayoutAttrGetParts(l, &parts));
  CHECK(strcmp(parts.spec, "[R, R] Psum(0)") == 0);
  MlirPass bad = dtensorCreatePropagatePass(
      rules, mlirStringRefCreateFromCString("strict=maybe"), &diag);
  CHECK(bad.ptr == NULL);
  CHECK(strstr(diag.message, "takes true or false") != NULL);
  mlirPassManagerDestroy(pm);
  dtensorRuleRegistryDestroy(rules);
  dtensorRuleRegistryDestroy(NULL);
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
}

/* What reached a print callback, and the diagnostics emitted. */
typedef struct Printed {
  char text[4096];
  size_t length;
  int calls, errors;
  char error[512];
} Printed;

static void collectText(MlirStringRef s, void *userData) {
  Printed *p = userData;
  ++p->calls;
  if (p->length + s.length < sizeof(p->text)) {
    memcpy(p->text + p->length, s.data, s.length);
    p->length += s.length;
    p->text[p->length] = 0;
  }
}

static MlirLogicalResult countErrors(MlirDiagnostic d, void *userData) {
  Printed *p = userData;
  if (mlirDiagnosticGetSeverity(d) == MlirDiagnosticError) {
    ++p->errors;
    dtensorDiagnosticFormat(d, p->error, sizeof(p->error));
  }
  return mlirLogicalResultSuccess();
}

/* dtensorPrintVerified, on its own thread and not: a valid module prints
 * as mlirOperationPrint prints it (and as bytecode); one that does not
 * verify prints nothing and reports why. */
static void testPrintVerified(void) {
  MlirContext ctx = dtensorContextCreate();
  MlirModule module = mlirModuleCreateParse(
      ctx, mlirStringRefCreateFromCString("func.func @f(%a: f32) -> f32 {\n"
                                          "  %b = arith.addf %a, %a : f32\n"
                                          "  return %b : f32\n}\n"));
  CHECK(!mlirModuleIsNull(module));
  MlirOperation op = mlirModuleGetOperation(module);
  Printed plain = {{0}, 0, 0, 0, {0}};
  mlirOperationPrint(op, collectText, &plain);
  for (int alongside = 0; alongside < 2; ++alongside) {
    Printed got = {{0}, 0, 0, 0, {0}};
    MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
    CHECK(dtensorPrintVerified(op, flags, false, alongside, collectText, &got));
    CHECK(strcmp(got.text, plain.text) == 0);
    Printed bytes = {{0}, 0, 0, 0, {0}};
    CHECK(
        dtensorPrintVerified(op, flags, true, alongside, collectText, &bytes));
    CHECK(bytes.length > 4 && memcmp(bytes.text, "ML\xefR", 4) == 0);
    mlirOpPrintingFlagsDestroy(flags);
  }
  /* The function now says it returns an i32: its return does not match. */
  MlirOperation func = mlirBlockGetFirstOperation(mlirModuleGetBody(module));
  MlirType f32 = mlirF32TypeGet(ctx), i32 = mlirIntegerTypeGet(ctx, 32);
  mlirOperationSetAttributeByName(
      func, mlirStringRefCreateFromCString("function_type"),
      mlirTypeAttrGet(mlirFunctionTypeGet(ctx, 1, &f32, 1, &i32)));
  for (int alongside = 0; alongside < 2; ++alongside) {
    Printed got = {{0}, 0, 0, 0, {0}};
    MlirDiagnosticHandlerID h =
        mlirContextAttachDiagnosticHandler(ctx, countErrors, &got, NULL);
    MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
    CHECK(
        !dtensorPrintVerified(op, flags, false, alongside, collectText, &got));
    mlirOpPrintingFlagsDestroy(flags);
    mlirContextDetachDiagnosticHandler(ctx, h);
    CHECK(got.calls == 0 && got.length == 0);
    CHECK(got.errors >= 1);
    CHECK(strstr(got.error, "doesn't match function result type") != NULL);
  }
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
}

int main(void) {
  testRuleRegistry();
  testPrintVerified();
  MlirContext ctx = dtensorContextCreate();
  CHECK(!mlirContextIsNull(ctx));
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kProgram));
  CHECK(!mlirModuleIsNull(module));
  MlirBlock body = mlirModuleGetBody(module);
  MlirOperation func = findOp(body, "func.func");
  MlirBlock fbody = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  MlirOperation annotate = findOp(fbody, "dtensor.annotate");
  CHECK(!mlirOperationIsNull(annotate));
  MlirAttribute attr = mlirOperationGetAttributeByName(
      annotate, mlirStringRefCreateFromCString("layout"));
  CHECK(dtensorAttributeIsALayout(attr));
  DtensorLayoutAttrParts parts;
  CHECK(dtensorLayoutAttrGetParts(attr, &parts));
  CHECK(strcmp(parts.mesh, "mesh") == 0);
  CHECK(strcmp(parts.spec, "[S(tp), S0]") == 0);
  DtensorMesh *mesh = NULL;
  DtensorLayout layout;
  DtensorDiag diag;
  MlirType type = mlirValueGetType(mlirOperationGetResult(annotate, 0));
  CHECK(dtensorLayoutFromAttr(annotate, attr, type, &mesh, &layout, &diag));
  if (mesh) {
    CHECK(dtensorMeshGetLink(mesh, 1).bandwidthGBps == 200.0);
    int64_t shape[2];
    dtensorLayoutGetLocalShape(&layout, 3, shape); /* (0,3): 10/4 -> 1, 8/2 */
    CHECK(shape[0] == 1 && shape[1] == 4);
  }
  dtensorMeshDestroy(mesh);
  /* a spec with an unknown axis fails with a message naming it */
  MlirAttribute bad = mlirAttributeParseGet(
      ctx,
      mlirStringRefCreateFromCString("#dtensor.layout<@mesh, \"[S(pp), R]\">"));
  CHECK(!dtensorLayoutFromAttr(annotate, bad, type, &mesh, &layout, &diag));
  CHECK(strstr(diag.message, "unknown mesh axis 'pp'") != NULL);
  MlirAttribute noMesh = mlirAttributeParseGet(
      ctx,
      mlirStringRefCreateFromCString("#dtensor.layout<@other, \"[R, R]\">"));
  CHECK(!dtensorLayoutFromAttr(annotate, noMesh, type, &mesh, &layout, &diag));
  CHECK(strstr(diag.message, "unknown mesh '@other'") != NULL);
  /* building an attribute round-trips */
  MlirAttribute built = dtensorLayoutAttrGet(
      ctx, mlirStringRefCreateFromCString("mesh"), &layout.spec);
  CHECK(dtensorLayoutAttrGetParts(built, &parts));
  CHECK(strcmp(parts.mesh, "mesh") == 0 && strcmp(parts.spec, "[S1, S0]") == 0);
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
