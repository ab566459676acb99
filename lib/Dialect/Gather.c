/* dtensor.gather and dtensor.scatter_add: reading and checking `dims`.
 *
 * A gather's `dims` is "vd,bt->btd": the table's dims, each index tensor's
 * and the result's, one letter per dim. A table letter the result lacks is
 * gathered: the next index tensor's value selects it. Every other letter is
 * a loop over the result: the table's other dims and the index tensors'
 * dims are read at the result's position. A scatter_add's is
 * "vd,bt,btd->vd": destination, index tensors, updates, and the
 * destination again; a destination letter the updates lack is selected by
 * an index tensor, and update letters the destination lacks are summed. */
#include "DialectInternal.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

#include <stdio.h>
#include <string.h>

static bool has(const char *letters, char c) { return strchr(letters, c); }

bool dtGatherDimsParse(const char *text, bool scatter, DtGatherDims *out,
                       DtensorDiag *outDiag) {
  memset(out, 0, sizeof(*out));
  out->scatter = scatter;
  char tensors[2 * DT_MAX_GATHER_INDICES + 4][DTENSOR_MAX_TENSOR_RANK + 1];
  int count = 0, len = 0, arrow = -1;
  const char *p = text;
  for (;; ++p) {
    char c = *p;
    if (c >= 'a' && c <= 'z') {
      if (len == DTENSOR_MAX_TENSOR_RANK)
        return dtDiag(outDiag, (int)(p - text), "a tensor of more than %d dims",
                      DTENSOR_MAX_TENSOR_RANK);
      if (count < (int)(sizeof(tensors) / sizeof(tensors[0]))) {
        for (int k = 0; k < len; ++k)
          if (tensors[count][k] == c)
            return dtDiag(outDiag, (int)(p - text),
                          "letter '%c' twice in one tensor", c);
        tensors[count][len++] = c;
      }
      continue;
    }
    if (c == ' ')
      continue;
    if (c == ',' || c == '\0' || (c == '-' && p[1] == '>')) {
      if (count == (int)(sizeof(tensors) / sizeof(tensors[0])))
        return dtDiag(outDiag, (int)(p - text), "too many tensors");
      tensors[count++][len] = '\0';
      len = 0;
      if (c == '\0')
        break;
      if (c == '-') {
        if (arrow >= 0)
          return dtDiag(outDiag, (int)(p - text), "a second '->'");
        arrow = count;
        ++p;
      }
      continue;
    }
    return dtDiag(outDiag, (int)(p - text),
                  "unexpected '%c' (expected lower-case letters, ',' and "
                  "'->' as in \"%s\")",
                  c, scatter ? "vd,bt,btd->vd" : "vd,bt->btd");
  }
  int inputs = arrow;
  if (arrow < 0 || count - arrow != 1)
    return dtDiag(outDiag, -1, "expected one tensor after '->'");
  out->numIndices = inputs - (scatter ? 2 : 1);
  if (out->numIndices < 1 || out->numIndices > DT_MAX_GATHER_INDICES)
    return dtDiag(outDiag, -1,
                  "expected the %s, 1 to %d index tensors%s, then '->'",
                  scatter ? "destination" : "table", DT_MAX_GATHER_INDICES,
                  scatter ? " and the updates" : "");
  strcpy(out->table, tensors[0]);
  for (int k = 0; k < out->numIndices; ++k)
    strcpy(out->index[k], tensors[1 + k]);
  strcpy(out->other, tensors[scatter ? inputs - 1 : inputs]);
  const char *result = tensors[inputs];
  if (scatter && strcmp(result, out->table))
    return dtDiag(outDiag, -1,
                  "the result's letters '%s' must be the destination's '%s'",
                  result, out->table);
  /* The gathered letters: the table's that the result (updates) lack. */
  int found = 0;
  for (int d = 0; out->table[d]; ++d)
    if (!has(out->other, out->table[d])) {
      if (found == out->numIndices)
        return dtDiag(outDiag, -1,
                      "the %s's letters the %s lacks are selected by the "
                      "index tensors, one each: %d index tensors for more",
                      scatter ? "destination" : "table",
                      scatter ? "updates" : "result", out->numIndices);
      out->gathered[found++] = d;
    }
  if (found != out->numIndices)
    return dtDiag(outDiag, -1,
                  "%d index tensors but %d %s letters the %s lacks (each "
                  "index tensor selects one)",
                  out->numIndices, found, scatter ? "destination" : "table",
                  scatter ? "updates" : "result");
  const char *loops = out->other;
  for (int k = 0; k < out->numIndices; ++k)
    for (const char *c = out->index[k]; *c; ++c)
      if (!has(loops, *c))
        return dtDiag(outDiag, -1,
                      "index tensor %d's letter '%c' is not one of the %s's "
                      "'%s'",
                      k, *c, scatter ? "updates" : "result", loops);
  if (!scatter)
    for (const char *c = out->other; *c; ++c) {
      bool known = has(out->table, *c);
      for (int k = 0; k < out->numIndices && !known; ++k)
        known = has(out->index[k], *c);
      if (!known)
        return dtDiag(outDiag, -1,
                      "the result's letter '%c' is in no table or index "
                      "tensor",
                      *c);
    }
  return true;
}

/* The size of letter `c` so far (-1: unknown) checked against `size`. */
static bool sameSize(int64_t sizes[26], char c, int64_t size) {
  if (size == mlirShapedTypeGetDynamicSize())
    return true;
  if (sizes[c - 'a'] >= 0 && sizes[c - 'a'] != size)
    return false;
  sizes[c - 'a'] = size;
  return true;
}

bool dtGatherDimsOf(MlirOperation op, DtGatherDims *out) {
  bool scatter = dtIsOp(op, DT_OP_SCATTER_ADD);
  MlirAttribute attr = mlirOperationGetAttributeByName(
      op, mlirStringRefCreateFromCString("dims"));
  if (mlirAttributeIsNull(attr) || !mlirAttributeIsAString(attr)) {
    dtOpError(op, "needs a string 'dims' such as \"%s\"",
              scatter ? "vd,bt,btd->vd" : "vd,bt->btd");
    return false;
  }
  char text[256];
  MlirStringRef s = mlirStringAttrGetValue(attr);
  snprintf(text, sizeof(text), "%.*s", (int)s.length, s.data);
  DtensorDiag diag;
  if (!dtGatherDimsParse(text, scatter, out, &diag)) {
    dtOpError(op, "'dims' \"%s\": %s", text, diag.message);
    return false;
  }
  intptr_t numTensors = 1 + out->numIndices + (scatter ? 1 : 0);
  if (mlirOperationGetNumOperands(op) != numTensors ||
      mlirOperationGetNumResults(op) != 1) {
    dtOpError(op,
              "expects %ld operands (%s, %d index tensors%s) and one "
              "result",
              (long)numTensors, scatter ? "destination" : "table",
              out->numIndices, scatter ? ", updates" : "");
    return false;
  }
  const char *letters[DT_MAX_GATHER_INDICES + 3];
  MlirType types[DT_MAX_GATHER_INDICES + 3];
  int n = 0;
  letters[n] = out->table;
  types[n++] = mlirValueGetType(mlirOperationGetOperand(op, 0));
  for (int k = 0; k < out->numIndices; ++k) {
    letters[n] = out->index[k];
    types[n++] =
        mlirValueGetType(mlirOperationGetOperand(op, dtGatherIndexOperand(k)));
  }
  letters[n] = out->other;
  types[n++] = mlirValueGetType(mlirOperationGetOperand(op, numTensors - 1));
  if (!scatter)
    types[n - 1] = mlirValueGetType(mlirOperationGetResult(op, 0));
  int64_t sizes[26];
  for (int c = 0; c < 26; ++c)
    sizes[c] = -1;
  for (int t = 0; t < n; ++t) {
    const char *what = t == 0 ? (scatter ? "destination" : "table")
                       : t <= out->numIndices ? "index tensor"
                       : scatter              ? "updates"
                                              : "result";
    if (!mlirTypeIsARankedTensor(types[t]) ||
        mlirShapedTypeGetRank(types[t]) != (int64_t)strlen(letters[t])) {
      dtOpError(op,
                "'dims' gives the %s %d dims, but it is not a tensor of "
                "that rank",
                what, (int)strlen(letters[t]));
      return false;
    }
    for (int d = 0; letters[t][d]; ++d) {
      char c = letters[t][d];
      bool gathered = false;
      for (int k = 0; k < out->numIndices; ++k)
        gathered |= t == 0 && out->gathered[k] == d;
      if (!gathered &&
          !sameSize(sizes, c, mlirShapedTypeGetDimSize(types[t], d))) {
        dtOpError(op,
                  "'dims' letter '%c' has size %lld in the %s but %lld "
                  "elsewhere",
                  c, (long long)mlirShapedTypeGetDimSize(types[t], d), what,
                  (long long)sizes[c - 'a']);
        return false;
      }
    }
    MlirType elem = mlirShapedTypeGetElementType(types[t]);
    bool isIndex = t >= 1 && t <= out->numIndices;
    if (isIndex &&
        !(mlirTypeIsAIndex(elem) ||
          (mlirTypeIsAInteger(elem) && mlirIntegerTypeIsSignless(elem) &&
           mlirIntegerTypeGetWidth(elem) > 1))) {
      dtOpError(op, "index tensor %d must hold signless integers or index",
                t - 1);
      return false;
    }
    if (!isIndex && t > 0 &&
        !mlirTypeEqual(elem, mlirShapedTypeGetElementType(types[0]))) {
      dtOpError(op, "the %s's element type differs from the %s's", what,
                scatter ? "destination" : "table");
      return false;
    }
  }
  if (scatter && !mlirTypeEqual(mlirValueGetType(mlirOperationGetResult(op, 0)),
                                types[0])) {
    dtOpError(op, "the result's type differs from the destination's");
    return false;
  }
  return true;
}
