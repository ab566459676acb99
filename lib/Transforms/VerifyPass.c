/* dtensor-verify: the dialect verifier as a pass. */
#include "PassDef.h"

#include "dtensor-c/Dialect.h"

static bool runVerify(MlirOperation op, const DtPassOptions *options) {
  (void)options;
  return mlirLogicalResultIsSuccess(dtensorVerify(op));
}

const DtPassDef dtVerifyPass = {
    .info = {"dtensor-verify",
             "Check dtensor meshes, layouts and collectives beyond IRDL "
             "(mesh symbols, spec syntax, ranks, local shapes)",
             0, NULL},
    .verifyFirst = false,
    .run = runVerify,
};

MlirPass dtensorCreateVerifyPass(void) {
  return dtensorPassCreate(mlirStringRefCreateFromCString("dtensor-verify"),
                           mlirStringRefCreateFromCString(""), NULL);
}
