/* The dialect's collectives, one row each (DialectInternal.h): the
 * verifier, the report, dtensor-lower-to-runtime and propagation read this
 * table; collective-table-test checks it against the planner's pattern
 * names and the runtime's DTRT_MLIR_COLLECTIVE_LIST. */
#include "DialectInternal.h"

#include "dtensor-c/Planner.h"
#include "dtensor-rt/Runtime.h"

static const DtCollectiveInfo kCollectives[] = {
    {DT_OP_ALL_GATHER, "gather_dim", NULL, false, DTENSOR_COMM_ALL_GATHER,
     DTRT_MLIR_ALL_GATHER},
    {DT_OP_ALL_REDUCE, NULL, NULL, true, DTENSOR_COMM_ALL_REDUCE,
     DTRT_MLIR_ALL_REDUCE},
    {DT_OP_REDUCE_SCATTER, NULL, "shard_dim", true, DTENSOR_COMM_REDUCE_SCATTER,
     DTRT_MLIR_REDUCE_SCATTER},
    {DT_OP_ALL_TO_ALL, "gather_dim", "shard_dim", false,
     DTENSOR_COMM_ALL_TO_ALL, DTRT_MLIR_ALL_TO_ALL},
    {DT_OP_LOCAL_SPLIT, NULL, "shard_dim", false, DTENSOR_COMM_LOCAL_SPLIT,
     DTRT_MLIR_LOCAL_SPLIT},
    {DT_OP_BROADCAST, NULL, NULL, false, -1, DTRT_MLIR_BROADCAST},
    {DT_OP_PERMUTE, NULL, NULL, false, -1, -1},
};

const DtCollectiveInfo *dtCollectives(int *outCount) {
  *outCount = (int)(sizeof(kCollectives) / sizeof(kCollectives[0]));
  return kCollectives;
}

const DtCollectiveInfo *dtCollectiveOf(MlirOperation op) {
  /* Asked of every op by several passes: the name is fetched once, and
   * only the dialect's own ops are compared with the rows. */
  MlirStringRef name = dtOpName(op);
  if (name.length < 8 || memcmp(name.data, "dtensor.", 8))
    return NULL;
  for (size_t k = 0; k < sizeof(kCollectives) / sizeof(kCollectives[0]); ++k)
    if (dtNameIs(name, kCollectives[k].name))
      return &kCollectives[k];
  return NULL;
}

const DtCollectiveInfo *dtCollectiveOfPattern(int pattern) {
  for (size_t k = 0; k < sizeof(kCollectives) / sizeof(kCollectives[0]); ++k)
    if (kCollectives[k].pattern == pattern)
      return &kCollectives[k];
  return NULL;
}
