/* CommSpec: names, text form, applying a step to a spec, and its cost. */
#include "PlannerInternal.h"

#include "Support/Support.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const kPatternNames[] = {
    "identity",   "all_gather",     "all_to_all",    "local_split",
    "all_reduce", "reduce_scatter", "local_partial",
};
enum { kNumPatterns = sizeof(kPatternNames) / sizeof(kPatternNames[0]) };

const char *dtensorCommPatternGetName(DtensorCommPattern p) {
  return (unsigned)p < kNumPatterns ? kPatternNames[p] : "invalid";
}

static bool usesGatherDim(DtensorCommPattern p) {
  return p == DTENSOR_COMM_ALL_GATHER || p == DTENSOR_COMM_ALL_TO_ALL;
}
static bool usesShardDim(DtensorCommPattern p) {
  return p == DTENSOR_COMM_ALL_TO_ALL || p == DTENSOR_COMM_LOCAL_SPLIT ||
         p == DTENSOR_COMM_REDUCE_SCATTER;
}
static bool usesReduce(DtensorCommPattern p) {
  return p == DTENSOR_COMM_ALL_REDUCE || p == DTENSOR_COMM_REDUCE_SCATTER ||
         p == DTENSOR_COMM_LOCAL_PARTIAL;
}

size_t dtensorCommSpecPrint(const DtensorCommSpec *comm, char *buffer,
                            size_t capacity) {
  DtBuf b = dtBufInit(buffer, capacity);
  dtBufPrintf(&b, "%s", dtensorCommPatternGetName(comm->pattern));
  if (comm->pattern != DTENSOR_COMM_IDENTITY) {
    dtBufPrintf(&b, "(axes=[");
    for (int i = 0; i < comm->numAxes; ++i)
      dtBufPrintf(&b, "%s%d", i ? ", " : "", comm->axes[i]);
    dtBufPrintf(&b, "]");
    if (usesGatherDim(comm->pattern))
      dtBufPrintf(&b, ", gather_dim=%d", comm->gatherDim);
    if (usesShardDim(comm->pattern))
      dtBufPrintf(&b, ", shard_dim=%d", comm->shardDim);
    if (usesReduce(comm->pattern))
      dtBufPrintf(&b, ", reduce=%s", dtensorReduceKindGetName(comm->reduce));
    dtBufPrintf(&b, ")");
  }
  return b.length;
}

/* ---- parsing ------------------------------------------------------------ */

typedef struct Cursor {
  const char *text;
  size_t pos;
} Cursor;

static void skipSpace(Cursor *c) {
  while (isspace((unsigned char)c->text[c->pos]))
    ++c->pos;
}

static bool accept(Cursor *c, char ch) {
  skipSpace(c);
  if (c->text[c->pos] != ch)
    return false;
  ++c->pos;
  return true;
}

static size_t wordLength(const Cursor *c) {
  size_t n = 0;
  while (isalnum((unsigned char)c->text[c->pos + n]) ||
         c->text[c->pos + n] == '_')
    ++n;
  return n;
}

static bool parseInt(Cursor *c, int *out, DtensorDiag *diag) {
  skipSpace(c);
  const char *start = c->text + c->pos;
  char *end;
  long v = strtol(start, &end, 10);
  if (end == start || v < -1 || v > 1000)
    return dtDiag(diag, (int)c->pos, "expected a small integer");
  c->pos += (size_t)(end - start);
  *out = (int)v;
  return true;
}

static bool matchWord(const char *text, size_t n, const char *word) {
  return strlen(word) == n && memcmp(text, word, n) == 0;
}

bool dtensorCommSpecParse(const char *text, DtensorCommSpec *outComm,
                          DtensorDiag *outDiag) {
  DtensorCommSpec comm = {DTENSOR_COMM_IDENTITY, 0, {0}, -1, -1,
                          DTENSOR_REDUCE_NONE};
  Cursor c = {text, 0};
  skipSpace(&c);
  size_t n = wordLength(&c);
  int pattern = -1;
  for (int p = 0; p < kNumPatterns; ++p)
    if (matchWord(text + c.pos, n, kPatternNames[p]))
      pattern = p;
  if (pattern < 0)
    return dtDiag(outDiag, (int)c.pos,
                  "expected a pattern: identity, all_gather, all_to_all, "
                  "local_split, all_reduce or reduce_scatter");
  comm.pattern = (DtensorCommPattern)pattern;
  c.pos += n;
  bool seenAxes = false, seenGather = false, seenShard = false,
       seenReduce = false;
  if (accept(&c, '(') && !accept(&c, ')')) {
    do {
      skipSpace(&c);
      size_t keyPos = c.pos, k = wordLength(&c);
      const char *key = text + c.pos;
      c.pos += k;
      if (!accept(&c, '='))
        return dtDiag(outDiag, (int)c.pos, "expected '=' after a key");
      bool *seen;
      if (matchWord(key, k, "axes")) {
        seen = &seenAxes;
        if (!accept(&c, '['))
          return dtDiag(outDiag, (int)c.pos, "expected '[' to start the axes");
        if (!accept(&c, ']')) {
          do {
            if (comm.numAxes == DTENSOR_MAX_MESH_RANK)
              return dtDiag(outDiag, (int)c.pos, "more than %d axes",
                            DTENSOR_MAX_MESH_RANK);
            if (!parseInt(&c, &comm.axes[comm.numAxes++], outDiag))
              return false;
          } while (accept(&c, ','));
          if (!accept(&c, ']'))
            return dtDiag(outDiag, (int)c.pos, "expected ',' or ']'");
        }
      } else if (matchWord(key, k, "gather_dim")) {
        seen = &seenGather;
        if (!parseInt(&c, &comm.gatherDim, outDiag))
          return false;
      } else if (matchWord(key, k, "shard_dim")) {
        seen = &seenShard;
        if (!parseInt(&c, &comm.shardDim, outDiag))
          return false;
      } else if (matchWord(key, k, "reduce")) {
        seen = &seenReduce;
        skipSpace(&c);
        size_t r = wordLength(&c);
        if (!dtensorReduceKindParse(text + c.pos, r, &comm.reduce) ||
            comm.reduce == DTENSOR_REDUCE_NONE)
          return dtDiag(outDiag, (int)c.pos,
                        "expected a reduce kind: sum, max, min, avg or prod");
        c.pos += r;
      } else {
        return dtDiag(outDiag, (int)keyPos,
                      "unknown key '%.*s' (valid: axes, gather_dim, "
                      "shard_dim, reduce)",
                      (int)k, key);
      }
      if (*seen)
        return dtDiag(outDiag, (int)keyPos, "key '%.*s' given twice", (int)k,
                      key);
      *seen = true;
    } while (accept(&c, ','));
    if (!accept(&c, ')'))
      return dtDiag(outDiag, (int)c.pos, "expected ',' or ')'");
  }
  skipSpace(&c);
  if (text[c.pos])
    return dtDiag(outDiag, (int)c.pos, "unexpected text after the CommSpec");
  const char *name = kPatternNames[pattern];
  if (comm.pattern != DTENSOR_COMM_IDENTITY && !seenAxes)
    return dtDiag(outDiag, -1, "%s needs axes=[...]", name);
  if (usesGatherDim(comm.pattern) != seenGather)
    return dtDiag(outDiag, -1, "%s %s gather_dim", name,
                  seenGather ? "takes no" : "needs");
  if (usesShardDim(comm.pattern) != seenShard)
    return dtDiag(outDiag, -1, "%s %s shard_dim", name,
                  seenShard ? "takes no" : "needs");
  if (usesReduce(comm.pattern) != seenReduce)
    return dtDiag(outDiag, -1, "%s %s reduce", name,
                  seenReduce ? "takes no" : "needs");
  *outComm = comm;
  return true;
}

/* ---- chunks and shapes --------------------------------------------------- */

static int64_t minI64(int64_t a, int64_t b) { return a < b ? a : b; }

bool dtChunksNest(int64_t size, int64_t coarse, int64_t group) {
  if (group == 1 || size % (coarse * group) == 0)
    return true;
  int64_t chc = dtCeilDiv(size, coarse), chf = dtCeilDiv(size, coarse * group);
  if (dtCeilDiv(chc, group) != chf)
    return false;
  for (int64_t l = 0; l < coarse; ++l) {
    int64_t cb = minI64(l * chc, size), ce = minI64(cb + chc, size);
    int64_t fb = minI64(l * group * chf, size);
    int64_t fe =
        minI64(minI64((l * group + group - 1) * chf, size) + chf, size);
    if (cb != fb || ce != fe)
      return false;
    if (ce == size)
      break; /* the rest are empty on both levels */
  }
  return true;
}

int64_t dtGroupSize(const DtensorMesh *mesh, int numAxes, const int *axes) {
  int64_t n = 1;
  for (int i = 0; i < numAxes; ++i)
    n *= dtensorMeshGetAxisSize(mesh, axes[i]);
  return n;
}

int64_t dtSpecNumShards(const DtensorMesh *mesh,
                        const DtensorShardingSpec *spec, int dim) {
  return dtGroupSize(mesh, spec->numAxes[dim], spec->axes[dim]);
}

void dtSpecPaddedShape(const DtensorMesh *mesh, const DtensorShardingSpec *spec,
                       int rank, const int64_t *shape, int64_t *outShape) {
  for (int d = 0; d < rank; ++d)
    outShape[d] = dtCeilDiv(shape[d], dtSpecNumShards(mesh, spec, d));
}

/* ---- applying a step ----------------------------------------------------- */

/* Where mesh axis `a` is used by `spec`: the dim it shards, or -1. */
static int dimOfAxis(const DtensorShardingSpec *spec, int a) {
  for (int d = 0; d < spec->rank; ++d)
    for (int i = 0; i < spec->numAxes[d]; ++i)
      if (spec->axes[d][i] == a)
        return d;
  return -1;
}

static bool checkDim(int dim, int rank, const char *what, DtensorDiag *diag) {
  if (dim < 0 || dim >= rank)
    return dtDiag(diag, -1, "%s %d is out of range for a rank-%d tensor", what,
                  dim, rank);
  return true;
}

static bool checkNotInterleaved(const DtensorShardingSpec *spec, int dim,
                                DtensorDiag *diag) {
  if (spec->numAxes[dim] > 0 && spec->interleave[dim] > 1)
    return dtDiag(diag, -1,
                  "dim %d is interleaved (/%lld); the planner does not "
                  "redistribute interleaved shards yet",
                  dim, (long long)spec->interleave[dim]);
  return true;
}

/* Removes the axes of `comm` from the minor end of `dim`'s list. */
static bool removeSuffix(const DtensorCommSpec *comm, DtensorShardingSpec *spec,
                         int dim, DtensorDiag *diag) {
  int k = spec->numAxes[dim], n = comm->numAxes;
  bool ok = n <= k;
  for (int i = 0; ok && i < n; ++i)
    ok = spec->axes[dim][k - n + i] == comm->axes[i];
  if (!ok)
    return dtDiag(diag, -1,
                  "the axes of %s must be the minor-most axes that shard dim "
                  "%d, in order",
                  dtensorCommPatternGetName(comm->pattern), dim);
  spec->numAxes[dim] = k - n;
  return true;
}

static bool appendAxes(const DtensorCommSpec *comm, DtensorShardingSpec *spec,
                       int dim) {
  int k = spec->numAxes[dim];
  if (k + comm->numAxes > DTENSOR_MAX_MESH_RANK)
    return false;
  for (int i = 0; i < comm->numAxes; ++i)
    spec->axes[dim][k + i] = comm->axes[i];
  spec->numAxes[dim] = k + comm->numAxes;
  return true;
}

static bool checkNest(const DtensorLayout *in, const DtensorShardingSpec *fine,
                      int dim, int64_t group, DtensorDiag *diag) {
  int64_t n = dtSpecNumShards(in->mesh, fine, dim);
  if (dtChunksNest(in->shape[dim], n / group, group))
    return true;
  return dtDiag(diag, -1,
                "dim %d of size %lld: its %lld chunks do not nest in %lld "
                "chunks, so this step would not produce the layout's blocks "
                "(uneven shards)",
                dim, (long long)in->shape[dim], (long long)n,
                (long long)(n / group));
}

bool dtensorCommSpecApply(const DtensorCommSpec *comm, const DtensorLayout *in,
                          DtensorShardingSpec *outSpec, DtensorDiag *outDiag) {
  const DtensorShardingSpec *s = &in->spec;
  DtensorShardingSpec out = *s;
  int meshRank = dtensorMeshGetRank(in->mesh);
  if (comm->pattern == DTENSOR_COMM_IDENTITY) {
    *outSpec = out;
    return true;
  }
  if ((unsigned)comm->pattern >= kNumPatterns)
    return dtDiag(outDiag, -1, "invalid pattern %d", (int)comm->pattern);
  if (comm->numAxes < 1 || comm->numAxes > meshRank)
    return dtDiag(outDiag, -1, "a CommSpec needs 1 to %d mesh axes, not %d",
                  meshRank, comm->numAxes);
  bool seen[DTENSOR_MAX_MESH_RANK] = {false};
  for (int i = 0; i < comm->numAxes; ++i) {
    int a = comm->axes[i];
    if (a < 0 || a >= meshRank)
      return dtDiag(outDiag, -1, "mesh axis %d is out of range (0 to %d)", a,
                    meshRank - 1);
    if (seen[a])
      return dtDiag(outDiag, -1, "mesh axis %d is listed twice", a);
    seen[a] = true;
  }
  int64_t group = dtGroupSize(in->mesh, comm->numAxes, comm->axes);
  int rank = in->rank;
  if (usesGatherDim(comm->pattern) &&
      (!checkDim(comm->gatherDim, rank, "gather_dim", outDiag) ||
       !checkNotInterleaved(s, comm->gatherDim, outDiag)))
    return false;
  if (usesShardDim(comm->pattern) &&
      (!checkDim(comm->shardDim, rank, "shard_dim", outDiag) ||
       !checkNotInterleaved(s, comm->shardDim, outDiag)))
    return false;
  if (comm->pattern == DTENSOR_COMM_ALL_TO_ALL &&
      comm->gatherDim == comm->shardDim)
    return dtDiag(outDiag, -1, "all_to_all needs gather_dim != shard_dim");
  /* Axes that gain a dim must be free (neither sharding nor Partial);
   * axes that are reduced must be Partial of that kind. */
  for (int i = 0; i < comm->numAxes; ++i) {
    int a = comm->axes[i];
    if (comm->pattern == DTENSOR_COMM_LOCAL_SPLIT &&
        (dimOfAxis(s, a) >= 0 || s->partial[a] != DTENSOR_REDUCE_NONE))
      return dtDiag(outDiag, -1,
                    "local_split onto mesh axis %d, which already %s", a,
                    dimOfAxis(s, a) >= 0 ? "shards a dim" : "is Partial");
    if (comm->pattern == DTENSOR_COMM_LOCAL_PARTIAL &&
        (dimOfAxis(s, a) >= 0 || s->partial[a] != DTENSOR_REDUCE_NONE ||
         comm->reduce == DTENSOR_REDUCE_NONE))
      return dtDiag(outDiag, -1, "local_partial over mesh axis %d, which %s", a,
                    comm->reduce == DTENSOR_REDUCE_NONE ? "needs a reduce kind"
                    : dimOfAxis(s, a) >= 0              ? "shards a dim"
                                                        : "is already Partial");
    else if (usesReduce(comm->pattern) &&
             comm->pattern != DTENSOR_COMM_LOCAL_PARTIAL &&
             s->partial[a] != comm->reduce)
      return dtDiag(outDiag, -1, "%s(%s) over mesh axis %d, which is %s%s",
                    dtensorCommPatternGetName(comm->pattern),
                    dtensorReduceKindGetName(comm->reduce), a,
                    s->partial[a] == DTENSOR_REDUCE_NONE ? "not Partial"
                                                         : "Partial of ",
                    s->partial[a] == DTENSOR_REDUCE_NONE
                        ? ""
                        : dtensorReduceKindGetName(s->partial[a]));
  }
  switch (comm->pattern) {
  case DTENSOR_COMM_ALL_GATHER:
    if (!removeSuffix(comm, &out, comm->gatherDim, outDiag) ||
        !checkNest(in, s, comm->gatherDim, group, outDiag))
      return false;
    break;
  case DTENSOR_COMM_ALL_TO_ALL:
    if (!removeSuffix(comm, &out, comm->gatherDim, outDiag) ||
        !checkNest(in, s, comm->gatherDim, group, outDiag))
      return false;
    appendAxes(comm, &out, comm->shardDim);
    if (!checkNest(in, &out, comm->shardDim, group, outDiag))
      return false;
    break;
  case DTENSOR_COMM_LOCAL_SPLIT:
  case DTENSOR_COMM_REDUCE_SCATTER:
    if (!appendAxes(comm, &out, comm->shardDim))
      return dtDiag(outDiag, -1, "too many axes on dim %d", comm->shardDim);
    for (int i = 0; i < comm->numAxes; ++i)
      out.partial[comm->axes[i]] = DTENSOR_REDUCE_NONE;
    if (!checkNest(in, &out, comm->shardDim, group, outDiag))
      return false;
    break;
  case DTENSOR_COMM_ALL_REDUCE:
    for (int i = 0; i < comm->numAxes; ++i)
      out.partial[comm->axes[i]] = DTENSOR_REDUCE_NONE;
    break;
  case DTENSOR_COMM_LOCAL_PARTIAL:
    for (int i = 0; i < comm->numAxes; ++i)
      out.partial[comm->axes[i]] = comm->reduce;
    break;
  default:
    break;
  }
  *outSpec = out;
  return true;
}

/* ---- cost ---------------------------------------------------------------- */

static double copyCost(int64_t bytes, const DtensorPlanOptions *options) {
  return (double)bytes / (options->copyBandwidthGBps * 1e3);
}

DtensorCommCost dtCommCostOnGroup(DtensorCommPattern pattern, double n,
                                  double alpha, double beta, int64_t bytesIn,
                                  int64_t bytesOut,
                                  const DtensorPlanOptions *options) {
  /* `steps` latencies, then `factor` times the bytes over the bandwidth
   * (GB/s = 1e3 bytes per µs). A collective library picks its algorithm by
   * the size, so each collective is priced as the cheaper of a ring (n - 1
   * steps a pass, the fewest bytes) and recursive doubling or halving
   * (ceil(log2 n) steps; all_gather and reduce_scatter move the ring's
   * bytes, all_reduce the whole block at each step, all_to_all, as
   * Bruck's, half of it), as MPI and NCCL
   * choose for small blocks: a 4-byte all_reduce on 4 devices costs 2
   * latencies, not 6 (a ring's), and no longer loses to gathering a MiB. */
#define RING(steps, factor, bytes)                                             \
  ((steps) * alpha + (factor) * (double)(bytes) / (beta * 1e3))
  DtensorCommCost c = {0.0, 0.0, 0};
  double f = (n - 1.0) / n, logN = n > 1.0 ? ceil(log2(n)) : 0.0;
  double steps = fmin(n - 1.0, logN);
  switch (pattern) {
  case DTENSOR_COMM_ALL_GATHER:
    c.forwardUs = RING(steps, f, bytesOut);
    c.backwardUs = copyCost(bytesIn, options);
    c.bytesPerDevice = bytesOut;
    break;
  case DTENSOR_COMM_LOCAL_SPLIT:
    c.forwardUs = copyCost(bytesOut, options);
    c.backwardUs = RING(steps, f, bytesIn);
    break;
  case DTENSOR_COMM_ALL_TO_ALL:
    /* Or Bruck's: log2 n steps of half the block. */
    c.forwardUs =
        fmin(RING(n - 1.0, f, bytesIn), RING(logN, logN / 2, bytesIn));
    c.backwardUs =
        fmin(RING(n - 1.0, f, bytesOut), RING(logN, logN / 2, bytesOut));
    c.bytesPerDevice = bytesIn;
    break;
  case DTENSOR_COMM_ALL_REDUCE:
    c.forwardUs = fmin(RING(2.0 * (n - 1.0), 2.0 * f, bytesIn),
                       RING(logN, logN, bytesIn));
    c.bytesPerDevice = bytesIn;
    break;
  case DTENSOR_COMM_REDUCE_SCATTER:
    c.forwardUs = RING(steps, f, bytesIn);
    c.backwardUs = RING(steps, f, bytesIn);
    c.bytesPerDevice = bytesIn;
    break;
  case DTENSOR_COMM_LOCAL_PARTIAL:
    /* A select against the neutral element: a pass over the block. */
    c.forwardUs = copyCost(bytesIn, options);
    c.backwardUs = copyCost(bytesIn, options);
    break;
  default:
    break;
  }
#undef RING
  return c;
}

void dtCommCostCalibrate(DtensorCommCost *c, DtensorCommPattern pattern,
                         int numAxes, const int *axes, int64_t bytesIn,
                         int64_t bytesOut, const DtensorPlanOptions *options) {
  double latency, bandwidth;
  if (options && dtensorCalibrationGet(options->calibration, pattern, numAxes,
                                       axes, &latency, &bandwidth)) {
    int64_t bytes = pattern == DTENSOR_COMM_ALL_GATHER ? bytesOut : bytesIn;
    c->forwardUs = latency + (double)bytes / (bandwidth * 1e3);
  }
}

void dtGroupLink(const DtensorMesh *mesh, int numAxes, const int *axes,
                 double *outAlpha, double *outBeta) {
  double alpha = 0.0, beta = 0.0;
  for (int i = 0; i < numAxes; ++i) {
    DtensorLink l = dtensorMeshGetLink(mesh, axes[i]);
    if (i == 0 || l.latencyUs > alpha)
      alpha = l.latencyUs;
    if (i == 0 || l.bandwidthGBps < beta)
      beta = l.bandwidthGBps;
  }
  *outAlpha = alpha;
  *outBeta = beta;
}

DtensorCommCost dtensorCommGetCostOnAxes(const DtensorMesh *mesh,
                                         DtensorCommPattern pattern,
                                         int numAxes, const int *axes,
                                         int64_t bytesIn, int64_t bytesOut,
                                         const DtensorPlanOptions *options) {
  if (pattern == DTENSOR_COMM_IDENTITY)
    return (DtensorCommCost){0.0, 0.0, 0};
  double alpha, beta;
  dtGroupLink(mesh, numAxes, axes, &alpha, &beta);
  DtensorCommCost c =
      dtCommCostOnGroup(pattern, (double)dtGroupSize(mesh, numAxes, axes),
                        alpha, beta, bytesIn, bytesOut, options);
  dtCommCostCalibrate(&c, pattern, numAxes, axes, bytesIn, bytesOut, options);
  return c;
}

DtensorCommCost dtensorPointToPointGetCost(const DtensorMesh *mesh, int numAxes,
                                           const int *axes, int64_t bytes) {
  double alpha, beta;
  dtGroupLink(mesh, numAxes, axes, &alpha, &beta);
  DtensorCommCost c = {alpha + (double)bytes / (beta * 1e3), 0.0, bytes};
  return c;
}

DtensorCommCost dtCommCost(const DtensorCommSpec *comm, const DtensorMesh *mesh,
                           int64_t bytesIn, int64_t bytesOut,
                           const DtensorPlanOptions *options) {
  return dtensorCommGetCostOnAxes(mesh, comm->pattern, comm->numAxes,
                                  comm->axes, bytesIn, bytesOut, options);
}

static int64_t paddedBytes(const DtensorLayout *in,
                           const DtensorShardingSpec *spec) {
  int64_t shape[DTENSOR_MAX_TENSOR_RANK];
  dtSpecPaddedShape(in->mesh, spec, in->rank, in->shape, shape);
  int64_t bytes = (int64_t)dtensorElementTypeGetSize(in->elementType);
  for (int d = 0; d < in->rank; ++d)
    bytes *= shape[d];
  return bytes;
}

DtensorCommCost dtensorCommSpecGetCost(const DtensorCommSpec *comm,
                                       const DtensorLayout *in,
                                       const DtensorPlanOptions *options) {
  DtensorShardingSpec out;
  if (!dtensorCommSpecApply(comm, in, &out, NULL))
    out = in->spec;
  return dtCommCost(comm, in->mesh, paddedBytes(in, &in->spec),
                    paddedBytes(in, &out), options);
}
