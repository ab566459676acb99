/* Function signatures and what they say of a program: global (layouts) or
 * partitioned (layouts and global shapes, the calling convention); the
 * removal of their dtensor attributes; and from an annotated global program
 * to the single-device program it stands for. */
#include "Util.h"

#include "dtensor-c/Passes.h"
#include "mlir-c/BuiltinAttributes.h"

#include <stdio.h>
#include <stdlib.h>

/* `key` (arg_attrs or res_attrs) of `f` without its dtensor.* entries. */
static void stripList(MlirOperation f, const char *key) {
  MlirContext ctx = mlirOperationGetContext(f);
  MlirAttribute list = dtGetAttr(f, key);
  if (mlirAttributeIsNull(list) || !mlirAttributeIsAArray(list))
    return;
  intptr_t n = mlirArrayAttrGetNumElements(list);
  MlirAttribute *dicts = malloc(sizeof(MlirAttribute) * (size_t)(n + 1));
  if (!dicts)
    return;
  for (intptr_t i = 0; i < n; ++i) {
    MlirAttribute d = mlirArrayAttrGetElement(list, i);
    intptr_t m = mlirDictionaryAttrGetNumElements(d), kept = 0;
    MlirNamedAttribute *entries =
        malloc(sizeof(MlirNamedAttribute) * (size_t)(m + 1));
    for (intptr_t j = 0; entries && j < m; ++j) {
      MlirNamedAttribute e = mlirDictionaryAttrGetElement(d, j);
      MlirStringRef name = mlirIdentifierStr(e.name);
      if (name.length < 8 || memcmp(name.data, "dtensor.", 8))
        entries[kept++] = e;
    }
    dicts[i] = mlirDictionaryAttrGet(ctx, kept, entries);
    free(entries);
  }
  mlirOperationSetAttributeByName(f, mlirStringRefCreateFromCString(key),
                                  mlirArrayAttrGet(ctx, n, dicts));
  free(dicts);
}

void dtStripSignatureAttrs(MlirOperation func) {
  stripList(func, "arg_attrs");
  stripList(func, "res_attrs");
}

bool dtSignatureFind(MlirOperation func, bool partitioned, char where[32]) {
  for (int k = 0; k < 2; ++k) {
    MlirAttribute list = dtGetAttr(func, k ? "res_attrs" : "arg_attrs");
    intptr_t n = !mlirAttributeIsNull(list) && mlirAttributeIsAArray(list)
                     ? mlirArrayAttrGetNumElements(list)
                     : 0;
    for (intptr_t i = 0; i < n; ++i) {
      MlirAttribute d = mlirArrayAttrGetElement(list, i);
      bool shape = !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(
          d, mlirStringRefCreateFromCString(DT_ATTR_GLOBAL_SHAPE)));
      bool layout = !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(
          d, mlirStringRefCreateFromCString(DT_ATTR_LAYOUT)));
      if (partitioned ? shape : layout && !shape) {
        snprintf(where, 32, "%s %ld", k ? "result" : "argument", (long)i);
        return true;
      }
    }
  }
  return false;
}

static MlirWalkResult collect(MlirOperation op, void *userData) {
  if (dtIsOp(op, "func.func")) {
    dtStripSignatureAttrs(op);
    return MlirWalkResultAdvance;
  }
  bool identity =
      dtIsOp(op, DT_OP_ANNOTATE) ||
      (dtIsOp(op, DT_OP_REDISTRIBUTE) &&
       mlirTypeEqual(mlirValueGetType(mlirOperationGetOperand(op, 0)),
                     mlirValueGetType(mlirOperationGetResult(op, 0))));
  return !identity || dtOpListPush(userData, op) ? MlirWalkResultAdvance
                                                 : MlirWalkResultInterrupt;
}

void dtensorStripToSingleDevice(MlirOperation module) {
  DtOpList found = {NULL, 0, 0};
  mlirOperationWalk(module, collect, &found, MlirWalkPreOrder);
  for (size_t k = 0; k < found.count; ++k) {
    MlirOperation op = found.ops[k];
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0),
                                  mlirOperationGetOperand(op, 0));
    mlirOperationDestroy(op);
  }
  free(found.ops);
}
