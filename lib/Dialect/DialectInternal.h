/* Private helpers shared by the dialect and the passes. */
#ifndef DTENSOR_LIB_DIALECT_INTERNAL_H
#define DTENSOR_LIB_DIALECT_INTERNAL_H

#include "Support/Support.h"
#include "dtensor-c/Dialect.h"

#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

/// The dialect's discardable attribute names, one spelling for every file:
/// a value's layout, a partitioned argument's or result's global shape,
/// an argument's name, and what an argument of a training step is
/// ("parameter", "optimizer_state" or "input": dtensor-autodiff sets it,
/// dtensor-report sums memory by it).
#define DT_ATTR_LAYOUT "dtensor.layout"
#define DT_ATTR_GLOBAL_SHAPE "dtensor.global_shape"
#define DT_ATTR_NAME "dtensor.name"
#define DT_ATTR_ROLE "dtensor.role"

/// The dialect's op names, one spelling for every file (macros, so dtIsOp
/// sees literals).
#define DT_OP_ANNOTATE "dtensor.annotate"
#define DT_OP_REDISTRIBUTE "dtensor.redistribute"
#define DT_OP_MESH "dtensor.mesh"
#define DT_OP_MESH_INDEX "dtensor.mesh_index"
#define DT_OP_PERMUTE "dtensor.permute"
#define DT_OP_BROADCAST "dtensor.broadcast"
#define DT_OP_ALL_GATHER "dtensor.all_gather"
#define DT_OP_ALL_REDUCE "dtensor.all_reduce"
#define DT_OP_REDUCE_SCATTER "dtensor.reduce_scatter"
#define DT_OP_ALL_TO_ALL "dtensor.all_to_all"
#define DT_OP_LOCAL_SPLIT "dtensor.local_split"
#define DT_OP_GATHER "dtensor.gather"
#define DT_OP_SCATTER_ADD "dtensor.scatter_add"

/// The attributes the passes write: propagation's explanation and operand
/// layouts and loop axes, a user's rule, dtensor-report's figures,
/// lower-redistribute's plan cost.
#define DT_ATTR_WHY "dtensor.why"
#define DT_ATTR_RULE "dtensor.rule"
#define DT_ATTR_REPORT "dtensor.report"
#define DT_ATTR_OPERAND_LAYOUTS "dtensor.operand_layouts"
#define DT_ATTR_COST "dtensor.cost"
#define DT_ATTR_PLAN_COST "dtensor.plan_cost"
/* The modelled peak bytes per device of an automatic plan, on its
 * function, for dtensor-auto-shard (which removes it). */
#define DT_ATTR_AUTO_PEAK "dtensor.auto_peak"
/* The bytes each device may hold, on a function dtensor-auto-shard
 * planned under memory=: dtensor-schedule-collectives keeps within it
 * when given no memory= of its own, so the annotated program compiled
 * later still fits. */
#define DT_ATTR_MEMORY "dtensor.memory"
#define DT_ATTR_LOOP_AXES "dtensor.loop_axes"

/// The dialect's collectives, one row each: the op, the attribute naming
/// the dim that grows (or NULL), the one naming the dim that shrinks (or
/// NULL), whether it takes a `reduce`, the planner's pattern (-1: none) and
/// dtrt_mlir_collective's kind (-1: lowered otherwise). The verifier, the
/// report, dtensor-lower-to-runtime and propagation read this one table;
/// collective-table-test checks it against the planner's pattern names and
/// the runtime's DTRT_MLIR_COLLECTIVE_LIST (Collectives.c).
typedef struct DtCollectiveInfo {
  const char *name;
  const char *gatherDim, *shardDim;
  bool reduces;
  int pattern;         /* DtensorCommPattern */
  int64_t runtimeKind; /* DTRT_MLIR_* */
} DtCollectiveInfo;

/// The row of `op`, or NULL when `op` is not a collective.
const DtCollectiveInfo *dtCollectiveOf(MlirOperation op);

/// The row of the planner's pattern `pattern` (DtensorCommPattern), or NULL
/// (identity).
const DtCollectiveInfo *dtCollectiveOfPattern(int pattern);

/// The rows: `*outCount` of them.
const DtCollectiveInfo *dtCollectives(int *outCount);

/// An MlirStringCallback that appends to the DtBuf `buf` (Support.h): the
/// one sink for printing attributes, types, locations and pipelines into a
/// bounded buffer.
void dtBufSink(MlirStringRef text, void *buf);

/// Prints `attr` into `buffer` (NUL-terminated, truncated to `capacity`);
/// returns the full length it would need.
size_t dtAttributePrint(MlirAttribute attr, char *buffer, size_t capacity);

/// Prints `type` into `buffer` as dtAttributePrint does.
size_t dtTypePrint(MlirType type, char *buffer, size_t capacity);

/// Emits an error with a printf-formatted message at `loc`.
void dtEmitError(MlirLocation loc, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// Emits an error at `op` in MLIR's op form: "'<op name>' op <message>".
/// The one error helper of the dialect and the passes (their `opError`s
/// add only their failed flags).
void dtOpError(MlirOperation op, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// dtOpError with a va_list.
void dtOpErrorV(MlirOperation op, const char *format, va_list args)
    __attribute__((format(printf, 2, 0)));

/* ---- gathers (Gather.c) ------------------------------------------------- */

#define DT_MAX_GATHER_INDICES 8

/// What a dtensor.gather's or dtensor.scatter_add's `dims` says: per tensor
/// its dims' letters (NUL-terminated), and which table dim each index
/// tensor selects.
typedef struct DtGatherDims {
  bool scatter;
  int numIndices;
  char table[DTENSOR_MAX_TENSOR_RANK + 1]; /* scatter: the destination */
  char index[DT_MAX_GATHER_INDICES][DTENSOR_MAX_TENSOR_RANK + 1];
  char other[DTENSOR_MAX_TENSOR_RANK + 1]; /* the result; scatter: updates */
  int gathered[DT_MAX_GATHER_INDICES];     /* the table dim index k selects */
} DtGatherDims;

/// Reads `text` ("vd,bt->btd"; scatter: "vd,bt,btd->vd") into `out`; false
/// with `outDiag` saying what is wrong.
bool dtGatherDimsParse(const char *text, bool scatter, DtGatherDims *out,
                       DtensorDiag *outDiag);

/// Reads `op`'s `dims` and checks them against its operands and result
/// (counts, ranks, sizes, element types); false after a located error.
bool dtGatherDimsOf(MlirOperation op, DtGatherDims *out);

/// The operand of a gather or scatter_add that is index tensor `k`.
static inline intptr_t dtGatherIndexOperand(int k) { return 1 + k; }

/* ---- reading layouts (Attributes.c) -------------------------------------- */

/// The one way the passes read `#dtensor.layout`: per (attribute, type),
/// both uniqued, its spec checked against its mesh and the type, and its
/// mesh's name as an identifier (uniqued: compare with mlirIdentifierEqual),
/// each worked out once per pass run.
typedef struct DtLayoutCache {
  DtTable table;
} DtLayoutCache;

/// An empty cache.
DtLayoutCache dtLayoutCacheInit(void);

/// The spec of `attr` for a value of `type` used in `from`, and (if
/// `outMesh` is not NULL) the name of its mesh. False with `outDiag` filled
/// when the attribute is not a layout or does not fit (not cached).
bool dtLayoutCacheRead(DtLayoutCache *c, MlirOperation from, MlirAttribute attr,
                       MlirType type, DtensorShardingSpec *outSpec,
                       MlirIdentifier *outMesh, DtensorDiag *outDiag);

/// Frees the cache.
void dtLayoutCacheFree(DtLayoutCache *c);

/* ---- building ops (Builders.c) ------------------------------------------ */

/// A named attribute (the identifier made here; hot paths use DtIds).
MlirNamedAttribute dtNamedAttr(MlirContext ctx, const char *name,
                               MlirAttribute value);

/// Creates op `name` with the operands, results and attributes (sorted by
/// name, as MLIR keeps them, to spare it a sort), not in any block.
MlirOperation dtOpCreateDetached(MlirLocation loc, const char *name,
                                 int nOperands, const MlirValue *operands,
                                 int nResults, const MlirType *results,
                                 int nAttrs, const MlirNamedAttribute *attrs);

/// dtOpCreateDetached, inserted before `before` (not null).
MlirOperation dtOpCreate(MlirOperation before, MlirLocation loc,
                         const char *name, int nOperands,
                         const MlirValue *operands, int nResults,
                         const MlirType *results, int nAttrs,
                         const MlirNamedAttribute *attrs);

/// The identifiers of the dialect's op attributes, made once per pass run.
typedef struct DtIds {
  MlirIdentifier dst, gatherDim, globalShape, layout, mesh, meshAxes, reduce,
      shardDim, src;
} DtIds;

DtIds dtIdsGet(MlirContext ctx);

/// dtensor.redistribute of `value` (src -> dst, the global shape an
/// array<i64>) with type `result`, before `before`.
MlirOperation dtBuildRedistribute(const DtIds *ids, MlirOperation before,
                                  MlirLocation loc, MlirValue value,
                                  MlirType result, MlirAttribute src,
                                  MlirAttribute dst, MlirAttribute globalShape);

/// dtensor.annotate of `value` with `layout`, before `before`.
MlirOperation dtBuildAnnotate(const DtIds *ids, MlirOperation before,
                              MlirLocation loc, MlirValue value,
                              MlirAttribute layout);

/// The collective of one plan step `c` on `input` over the mesh `meshRef`,
/// with type `result`, before (and at the location of) `before`; a null op
/// for identity, which has no collective.
struct DtensorCommSpec;
MlirOperation dtBuildCollective(const DtIds *ids, MlirOperation before,
                                MlirAttribute meshRef,
                                const struct DtensorCommSpec *c,
                                MlirValue input, MlirType result);

/// An index constant, and an index op `name` (arith.addi, ...) of `a` and
/// `b`, before `before`.
MlirValue dtBuildIndexConst(MlirOperation before, int64_t v);
MlirValue dtBuildIndexBinary(MlirOperation before, const char *name,
                             MlirValue a, MlirValue b);

/// dtensor.mesh_index of `axes` of the mesh `meshRef` before `before`.
MlirOperation dtBuildMeshIndex(MlirOperation before, MlirAttribute meshRef,
                               int numAxes, const int *axes);

/// `x` (replicated over `axes`) made Partial(`kind`) over them: for sum
/// (prod) kept where this device's coordinates on the axes are all 0 and
/// 0 (1) elsewhere, the coordinates computed before `coordsAt` and the
/// select before `before`; `x` itself for max, min and avg.
MlirValue dtBuildKeepOnFirst(MlirOperation coordsAt, MlirOperation before,
                             MlirAttribute meshRef, int numAxes,
                             const int *axes, DtensorReduceKind kind,
                             MlirValue x);

/// The name of `op` ("linalg.matmul"), for comparing with several names
/// (dtNameIs) after fetching it once.
static inline MlirStringRef dtOpName(MlirOperation op) {
  return mlirIdentifierStr(mlirOperationGetName(op));
}

/// Whether an op name is `name`. Inline, so the length of a literal name is
/// known when compiling.
static inline bool dtNameIs(MlirStringRef opName, const char *name) {
  size_t n = strlen(name);
  return opName.length == n && !memcmp(opName.data, name, n);
}

/// Whether `op` is named `name` (passes ask this of every op, several
/// times).
static inline bool dtIsOp(MlirOperation op, const char *name) {
  return dtNameIs(dtOpName(op), name);
}

/// Whether `op`'s name starts with `prefix` (a dialect: "linalg.").
static inline bool dtIsOpIn(MlirOperation op, const char *prefix) {
  MlirStringRef name = dtOpName(op);
  size_t n = strlen(prefix);
  return name.length >= n && !memcmp(name.data, prefix, n);
}

/// Returns the nearest builtin.module enclosing or being `op` (null if none).
MlirOperation dtEnclosingModule(MlirOperation op);

/// Declares `mesh` as `dtensor.mesh` @`name` at the top of `module`, at
/// `loc`; returns the op.
MlirOperation dtMeshOpCreate(MlirOperation module, MlirLocation loc,
                             const char *name, const DtensorMesh *mesh);

#endif
