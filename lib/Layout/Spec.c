/* ShardingSpec: the textual syntax, checks, and the three views. */
#include "dtensor-c/Layout.h"

#include "Support/Support.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kReduceNames[DTENSOR_NUM_REDUCE_KINDS] = {
    "none", "sum", "max", "min", "avg", "prod"};

const char *dtensorReduceKindGetName(DtensorReduceKind kind) {
  if ((int)kind < 0 || (int)kind >= DTENSOR_NUM_REDUCE_KINDS)
    return "invalid";
  return kReduceNames[kind];
}

bool dtensorReduceKindParse(const char *name, size_t length,
                            DtensorReduceKind *outKind) {
  for (int k = 1; k < DTENSOR_NUM_REDUCE_KINDS; ++k)
    if (strlen(kReduceNames[k]) == length &&
        memcmp(kReduceNames[k], name, length) == 0) {
      *outKind = (DtensorReduceKind)k;
      return true;
    }
  return false;
}

void dtensorShardingSpecInitReplicated(int rank, DtensorShardingSpec *outSpec) {
  memset(outSpec, 0, sizeof(*outSpec));
  outSpec->rank = rank;
}

/*===----------------------------------------------------------------------===*
 * Parsing
 *===----------------------------------------------------------------------===*/

typedef struct Parser {
  const char *text;
  const char *p;
  const DtensorMesh *mesh;
  DtensorDiag *diag;
} Parser;

static void skipSpace(Parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n')
    ++ps->p;
}

static int column(const Parser *ps) { return (int)(ps->p - ps->text); }

static bool fail(Parser *ps, const char *message, const char *expected) {
  char got[24];
  if (*ps->p == '\0')
    snprintf(got, sizeof(got), "the end");
  else
    snprintf(got, sizeof(got), "'%c'", *ps->p);
  return dtDiag(ps->diag, column(ps), "%s: expected %s, got %s", message,
                expected, got);
}

/* Parses an identifier or a decimal number naming a mesh axis. */
static bool parseAxisRef(Parser *ps, const char *what, int *outAxis) {
  skipSpace(ps);
  const char *start = ps->p;
  if (isdigit((unsigned char)*ps->p)) {
    long v = strtol(ps->p, (char **)&ps->p, 10);
    if (v >= DTENSOR_MAX_MESH_RANK) {
      ps->p = start;
      return dtDiag(ps->diag, column(ps),
                    "%s: mesh axis %ld is out of range (a mesh has at most %d "
                    "axes)",
                    what, v, DTENSOR_MAX_MESH_RANK);
    }
    *outAxis = (int)v;
    return true;
  }
  if (isalpha((unsigned char)*ps->p) || *ps->p == '_') {
    while (isalnum((unsigned char)*ps->p) || *ps->p == '_')
      ++ps->p;
    size_t len = (size_t)(ps->p - start);
    if (!ps->mesh) {
      ps->p = start;
      return dtDiag(ps->diag, column(ps),
                    "%s: mesh axis name '%.*s' needs a mesh to resolve; use "
                    "an axis index",
                    what, (int)len, start);
    }
    int axis = dtensorMeshFindAxis(ps->mesh, start, len);
    if (axis < 0) {
      char names[256];
      DtBuf buf = dtBufInit(names, sizeof(names));
      for (int a = 0; a < dtensorMeshGetRank(ps->mesh); ++a)
        dtBufPrintf(&buf, "%s'%s'", a ? ", " : "",
                    dtensorMeshGetAxisName(ps->mesh, a));
      ps->p = start;
      return dtDiag(ps->diag, column(ps),
                    "%s: unknown mesh axis '%.*s' (the mesh has %s)", what,
                    (int)len, start, names);
    }
    *outAxis = axis;
    return true;
  }
  return fail(ps, what, "a mesh axis index or name");
}

static bool parseDim(Parser *ps, int dim, DtensorShardingSpec *spec) {
  char what[48];
  snprintf(what, sizeof(what), "in tensor dim %d", dim);
  skipSpace(ps);
  if (*ps->p == 'R') {
    ++ps->p;
    if (isalnum((unsigned char)*ps->p))
      return fail(ps, what, "',' or ']' after 'R'");
    return true;
  }
  if (*ps->p != 'S')
    return fail(ps, what,
                "'R' (replicated) or 'S<axes>' (sharded, e.g. S0, "
                "S01, S(dp,tp))");
  ++ps->p;
  int n = 0;
  if (*ps->p == '(') {
    ++ps->p;
    for (;;) {
      int axis;
      if (n == DTENSOR_MAX_MESH_RANK)
        return dtDiag(ps->diag, column(ps),
                      "%s: at most %d mesh axes may shard one dim", what,
                      DTENSOR_MAX_MESH_RANK);
      if (!parseAxisRef(ps, what, &axis))
        return false;
      spec->axes[dim][n++] = axis;
      skipSpace(ps);
      if (*ps->p == ',') {
        ++ps->p;
        continue;
      }
      if (*ps->p == ')') {
        ++ps->p;
        break;
      }
      return fail(ps, what, "',' or ')' in the axis list");
    }
  } else {
    if (!isdigit((unsigned char)*ps->p))
      return fail(ps, what, "mesh axis digits or '(' after 'S'");
    while (isdigit((unsigned char)*ps->p)) {
      int axis = *ps->p - '0';
      if (axis >= DTENSOR_MAX_MESH_RANK)
        return dtDiag(ps->diag, column(ps),
                      "%s: mesh axis %d is out of range (a mesh has at most %d "
                      "axes)",
                      what, axis, DTENSOR_MAX_MESH_RANK);
      if (n == DTENSOR_MAX_MESH_RANK)
        return dtDiag(ps->diag, column(ps),
                      "%s: at most %d mesh axes may shard one dim", what,
                      DTENSOR_MAX_MESH_RANK);
      spec->axes[dim][n++] = axis;
      ++ps->p;
    }
  }
  spec->numAxes[dim] = n;
  if (*ps->p == 'i') {
    ++ps->p;
    const char *start = ps->p;
    if (!isdigit((unsigned char)*ps->p))
      return fail(ps, what, "the number of interleaved groups after 'i'");
    long v = strtol(ps->p, (char **)&ps->p, 10);
    if (v < 2 || v > 1L << 30) {
      ps->p = start;
      return dtDiag(ps->diag, column(ps),
                    "%s: an interleaved shard needs at least 2 groups, got "
                    "%ld",
                    what, v);
    }
    spec->interleave[dim] = v;
  }
  if (isalnum((unsigned char)*ps->p))
    return fail(ps, what, "',' or ']' after the dim's sharding");
  return true;
}

static bool parsePartial(Parser *ps, DtensorShardingSpec *spec) {
  const char *what = "in the Partial list";
  if (*ps->p != 'P')
    return fail(ps, "after the dims", "'P<kind>(<axes>)' or the end");
  ++ps->p;
  const char *start = ps->p;
  while (isalpha((unsigned char)*ps->p))
    ++ps->p;
  DtensorReduceKind kind;
  if (!dtensorReduceKindParse(start, (size_t)(ps->p - start), &kind)) {
    ps->p = start;
    return dtDiag(ps->diag, column(ps),
                  "%s: unknown reduce kind '%.*s' (valid: sum, max, min, avg, "
                  "prod)",
                  what, (int)strcspn(start, "( "), start);
  }
  skipSpace(ps);
  if (*ps->p != '(')
    return fail(ps, what, "'(' and the Partial mesh axes");
  ++ps->p;
  for (;;) {
    int axis;
    const char *axisStart = ps->p;
    if (!parseAxisRef(ps, what, &axis))
      return false;
    if (spec->partial[axis] != DTENSOR_REDUCE_NONE) {
      ps->p = axisStart;
      skipSpace(ps);
      return dtDiag(ps->diag, column(ps), "%s: mesh axis %d is Partial twice",
                    what, axis);
    }
    spec->partial[axis] = kind;
    skipSpace(ps);
    if (*ps->p == ',') {
      ++ps->p;
      continue;
    }
    if (*ps->p == ')') {
      ++ps->p;
      return true;
    }
    return fail(ps, what, "',' or ')'");
  }
}

bool dtensorShardingSpecParse(const char *text, const DtensorMesh *mesh,
                              DtensorShardingSpec *outSpec,
                              DtensorDiag *outDiag) {
  Parser ps = {text, text, mesh, outDiag};
  DtensorShardingSpec spec;
  dtensorShardingSpecInitReplicated(0, &spec);
  skipSpace(&ps);
  if (*ps.p != '[')
    return fail(&ps, "a sharding spec starts with '['", "'[' as in '[S0, R]'");
  ++ps.p;
  skipSpace(&ps);
  if (*ps.p == ']') {
    ++ps.p;
  } else {
    for (;;) {
      if (spec.rank == DTENSOR_MAX_TENSOR_RANK)
        return dtDiag(outDiag, column(&ps),
                      "a sharding spec has at most %d dims",
                      DTENSOR_MAX_TENSOR_RANK);
      if (!parseDim(&ps, spec.rank, &spec))
        return false;
      ++spec.rank;
      skipSpace(&ps);
      if (*ps.p == ',') {
        ++ps.p;
        continue;
      }
      if (*ps.p == ']') {
        ++ps.p;
        break;
      }
      return fail(&ps, "after a dim", "',' or ']'");
    }
  }
  for (;;) {
    skipSpace(&ps);
    if (*ps.p == '\0')
      break;
    if (!parsePartial(&ps, &spec))
      return false;
  }
  *outSpec = spec;
  return true;
}

/*===----------------------------------------------------------------------===*
 * Printing, equality, checks
 *===----------------------------------------------------------------------===*/

size_t dtensorShardingSpecPrint(const DtensorShardingSpec *spec, char *buffer,
                                size_t capacity) {
  DtBuf buf = dtBufInit(buffer, capacity);
  dtBufPrintf(&buf, "[");
  for (int d = 0; d < spec->rank; ++d) {
    if (d)
      dtBufPrintf(&buf, ", ");
    if (spec->numAxes[d] == 0) {
      dtBufPrintf(&buf, "R");
      continue;
    }
    dtBufPrintf(&buf, "S");
    for (int i = 0; i < spec->numAxes[d]; ++i)
      dtBufPrintf(&buf, "%d", spec->axes[d][i]);
    if (spec->interleave[d] > 1)
      dtBufPrintf(&buf, "i%lld", (long long)spec->interleave[d]);
  }
  dtBufPrintf(&buf, "]");
  for (int k = 1; k < DTENSOR_NUM_REDUCE_KINDS; ++k) {
    bool first = true;
    for (int a = 0; a < DTENSOR_MAX_MESH_RANK; ++a) {
      if (spec->partial[a] != (DtensorReduceKind)k)
        continue;
      if (first)
        dtBufPrintf(&buf, " P%s(%d", kReduceNames[k], a);
      else
        dtBufPrintf(&buf, ", %d", a);
      first = false;
    }
    if (!first)
      dtBufPrintf(&buf, ")");
  }
  return buf.length;
}

static int64_t effectiveInterleave(int64_t k) { return k > 1 ? k : 1; }

bool dtensorShardingSpecEqual(const DtensorShardingSpec *a,
                              const DtensorShardingSpec *b) {
  if (a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; ++d) {
    if (a->numAxes[d] != b->numAxes[d])
      return false;
    for (int i = 0; i < a->numAxes[d]; ++i)
      if (a->axes[d][i] != b->axes[d][i])
        return false;
    if (a->numAxes[d] && effectiveInterleave(a->interleave[d]) !=
                             effectiveInterleave(b->interleave[d]))
      return false;
  }
  for (int m = 0; m < DTENSOR_MAX_MESH_RANK; ++m)
    if (a->partial[m] != b->partial[m])
      return false;
  return true;
}

bool dtensorShardingSpecIsPartial(const DtensorShardingSpec *spec) {
  for (int m = 0; m < DTENSOR_MAX_MESH_RANK; ++m)
    if (spec->partial[m] != DTENSOR_REDUCE_NONE)
      return true;
  return false;
}

bool dtensorShardingSpecCheck(const DtensorShardingSpec *spec,
                              const DtensorMesh *mesh, int rank,
                              const int64_t *shape, DtensorDiag *outDiag) {
  int meshRank = dtensorMeshGetRank(mesh);
  if (shape && spec->rank != rank)
    return dtDiag(outDiag, -1,
                  "the sharding spec has %d dims but the tensor has rank %d; "
                  "give one entry (R or S<axes>) per tensor dim",
                  spec->rank, rank);
  int usedBy[DTENSOR_MAX_MESH_RANK];
  for (int m = 0; m < DTENSOR_MAX_MESH_RANK; ++m)
    usedBy[m] = -1;
  for (int d = 0; d < spec->rank; ++d) {
    for (int i = 0; i < spec->numAxes[d]; ++i) {
      int a = spec->axes[d][i];
      if (a < 0 || a >= meshRank)
        return dtDiag(outDiag, -1,
                      "mesh axis %d (sharding dim %d) is out of range: the "
                      "mesh has %d axes (valid: 0..%d)",
                      a, d, meshRank, meshRank - 1);
      if (usedBy[a] == d)
        return dtDiag(outDiag, -1,
                      "mesh axis %d (%s) shards dim %d twice; each mesh axis "
                      "may shard one dim once",
                      a, dtensorMeshGetAxisName(mesh, a), d);
      if (usedBy[a] >= 0)
        return dtDiag(outDiag, -1,
                      "mesh axis %d (%s) shards both dim %d and dim %d; each "
                      "mesh axis may shard one dim once",
                      a, dtensorMeshGetAxisName(mesh, a), usedBy[a], d);
      usedBy[a] = d;
    }
    if (spec->interleave[d] > 1 && spec->numAxes[d] == 0)
      return dtDiag(outDiag, -1,
                    "dim %d is replicated but has %lld interleaved groups; "
                    "interleaving applies to sharded dims only",
                    d, (long long)spec->interleave[d]);
    if (spec->interleave[d] < 0 || spec->interleave[d] > ((int64_t)1 << 30))
      return dtDiag(outDiag, -1,
                    "dim %d has an invalid interleave factor %lld (valid: 0 "
                    "for none, or >= 2)",
                    d, (long long)spec->interleave[d]);
  }
  for (int m = 0; m < DTENSOR_MAX_MESH_RANK; ++m) {
    DtensorReduceKind k = spec->partial[m];
    if (k == DTENSOR_REDUCE_NONE)
      continue;
    if ((int)k < 0 || (int)k >= DTENSOR_NUM_REDUCE_KINDS)
      return dtDiag(outDiag, -1, "mesh axis %d has an invalid reduce kind %d",
                    m, (int)k);
    if (m >= meshRank)
      return dtDiag(outDiag, -1,
                    "Partial mesh axis %d is out of range: the mesh has %d "
                    "axes (valid: 0..%d)",
                    m, meshRank, meshRank - 1);
    if (usedBy[m] >= 0)
      return dtDiag(outDiag, -1,
                    "mesh axis %d (%s) both shards dim %d and is "
                    "Partial(%s); a mesh axis either shards a dim or holds a "
                    "pending reduction",
                    m, dtensorMeshGetAxisName(mesh, m), usedBy[m],
                    kReduceNames[k]);
  }
  if (!shape)
    return true;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] < 1)
      return dtDiag(outDiag, -1,
                    "dim %d has size %lld; sharded tensors need static dims "
                    "of size >= 1",
                    d, (long long)shape[d]);
    int64_t k = effectiveInterleave(spec->interleave[d]);
    if (shape[d] % k != 0)
      return dtDiag(outDiag, -1,
                    "dim %d of size %lld does not split into %lld interleaved "
                    "groups of equal size",
                    d, (long long)shape[d], (long long)k);
  }
  return true;
}

/*===----------------------------------------------------------------------===*
 * Dictionary view
 *===----------------------------------------------------------------------===*/

void dtensorShardingSpecToDimDict(const DtensorShardingSpec *spec,
                                  DtensorDimDict *outDict) {
  memset(outDict, 0, sizeof(*outDict));
  outDict->rank = spec->rank;
  for (int d = 0; d < spec->rank; ++d) {
    if (spec->numAxes[d] == 0)
      continue;
    DtensorDimAxes *e = &outDict->entries[outDict->numEntries++];
    e->dim = d;
    e->numAxes = spec->numAxes[d];
    memcpy(e->axes, spec->axes[d], sizeof(e->axes));
    e->interleave =
        effectiveInterleave(spec->interleave[d]) > 1 ? spec->interleave[d] : 0;
  }
  memcpy(outDict->partial, spec->partial, sizeof(outDict->partial));
}

bool dtensorShardingSpecFromDimDict(const DtensorDimDict *dict,
                                    DtensorShardingSpec *outSpec,
                                    DtensorDiag *outDiag) {
  if (dict->rank < 0 || dict->rank > DTENSOR_MAX_TENSOR_RANK)
    return dtDiag(outDiag, -1, "tensor rank %d is out of range (0..%d)",
                  dict->rank, DTENSOR_MAX_TENSOR_RANK);
  if (dict->numEntries < 0 || dict->numEntries > dict->rank)
    return dtDiag(outDiag, -1, "%d entries for a tensor of rank %d",
                  dict->numEntries, dict->rank);
  DtensorShardingSpec spec;
  dtensorShardingSpecInitReplicated(dict->rank, &spec);
  for (int i = 0; i < dict->numEntries; ++i) {
    const DtensorDimAxes *e = &dict->entries[i];
    if (e->dim < 0 || e->dim >= dict->rank)
      return dtDiag(outDiag, -1, "dim %d is out of range (valid: 0..%d)",
                    e->dim, dict->rank - 1);
    if (spec.numAxes[e->dim])
      return dtDiag(outDiag, -1, "dim %d is listed twice", e->dim);
    if (e->numAxes < 1 || e->numAxes > DTENSOR_MAX_MESH_RANK)
      return dtDiag(outDiag, -1, "dim %d lists %d mesh axes (valid: 1..%d)",
                    e->dim, e->numAxes, DTENSOR_MAX_MESH_RANK);
    spec.numAxes[e->dim] = e->numAxes;
    memcpy(spec.axes[e->dim], e->axes, sizeof(e->axes));
    spec.interleave[e->dim] = e->interleave;
  }
  memcpy(spec.partial, dict->partial, sizeof(spec.partial));
  *outSpec = spec;
  return true;
}

size_t dtensorDimDictPrint(const DtensorDimDict *dict, char *buffer,
                           size_t capacity) {
  DtBuf buf = dtBufInit(buffer, capacity);
  dtBufPrintf(&buf, "{");
  for (int i = 0; i < dict->numEntries; ++i) {
    const DtensorDimAxes *e = &dict->entries[i];
    dtBufPrintf(&buf, "%s%d: [", i ? ", " : "", e->dim);
    for (int j = 0; j < e->numAxes; ++j)
      dtBufPrintf(&buf, "%s%d", j ? ", " : "", e->axes[j]);
    dtBufPrintf(&buf, "]");
    if (e->interleave > 1)
      dtBufPrintf(&buf, " x%lld", (long long)e->interleave);
  }
  dtBufPrintf(&buf, "}");
  bool first = true;
  for (int m = 0; m < DTENSOR_MAX_MESH_RANK; ++m) {
    if (dict->partial[m] == DTENSOR_REDUCE_NONE)
      continue;
    dtBufPrintf(&buf, "%s%d: %s", first ? " partial {" : ", ", m,
                dtensorReduceKindGetName(dict->partial[m]));
    first = false;
  }
  if (!first)
    dtBufPrintf(&buf, "}");
  return buf.length;
}

/*===----------------------------------------------------------------------===*
 * Placements view
 *===----------------------------------------------------------------------===*/

void dtensorShardingSpecToPlacements(const DtensorShardingSpec *spec,
                                     int meshRank,
                                     DtensorPlacements *outPlacements) {
  memset(outPlacements, 0, sizeof(*outPlacements));
  outPlacements->meshRank = meshRank;
  outPlacements->tensorRank = spec->rank;
  for (int m = 0; m < meshRank && m < DTENSOR_MAX_MESH_RANK; ++m) {
    DtensorPlacement *p = &outPlacements->axes[m];
    if (spec->partial[m] != DTENSOR_REDUCE_NONE) {
      p->kind = DTENSOR_PLACEMENT_PARTIAL;
      p->reduce = spec->partial[m];
    }
  }
  for (int d = 0; d < spec->rank; ++d)
    for (int i = 0; i < spec->numAxes[d]; ++i) {
      int m = spec->axes[d][i];
      if (m < 0 || m >= meshRank)
        continue;
      DtensorPlacement *p = &outPlacements->axes[m];
      p->kind = DTENSOR_PLACEMENT_SHARD;
      p->dim = d;
      p->order = i;
      p->interleave = effectiveInterleave(spec->interleave[d]) > 1
                          ? spec->interleave[d]
                          : 0;
    }
}

bool dtensorShardingSpecFromPlacements(const DtensorPlacements *placements,
                                       DtensorShardingSpec *outSpec,
                                       DtensorDiag *outDiag) {
  int meshRank = placements->meshRank, rank = placements->tensorRank;
  if (meshRank < 1 || meshRank > DTENSOR_MAX_MESH_RANK)
    return dtDiag(outDiag, -1, "mesh rank %d is out of range (1..%d)", meshRank,
                  DTENSOR_MAX_MESH_RANK);
  if (rank < 0 || rank > DTENSOR_MAX_TENSOR_RANK)
    return dtDiag(outDiag, -1, "tensor rank %d is out of range (0..%d)", rank,
                  DTENSOR_MAX_TENSOR_RANK);
  DtensorShardingSpec spec;
  dtensorShardingSpecInitReplicated(rank, &spec);
  int slot[DTENSOR_MAX_TENSOR_RANK][DTENSOR_MAX_MESH_RANK];
  memset(slot, -1, sizeof(slot));
  for (int m = 0; m < meshRank; ++m) {
    const DtensorPlacement *p = &placements->axes[m];
    switch (p->kind) {
    case DTENSOR_PLACEMENT_REPLICATE:
      break;
    case DTENSOR_PLACEMENT_PARTIAL:
      if (p->reduce <= DTENSOR_REDUCE_NONE ||
          (int)p->reduce >= DTENSOR_NUM_REDUCE_KINDS)
        return dtDiag(outDiag, -1,
                      "mesh axis %d is Partial without a valid reduce kind", m);
      spec.partial[m] = p->reduce;
      break;
    case DTENSOR_PLACEMENT_SHARD:
      if (p->dim < 0 || p->dim >= rank)
        return dtDiag(outDiag, -1,
                      "mesh axis %d shards dim %d, out of range (valid: "
                      "0..%d)",
                      m, p->dim, rank - 1);
      if (p->order < 0 || p->order >= meshRank)
        return dtDiag(outDiag, -1,
                      "mesh axis %d has shard order %d (valid: 0..%d)", m,
                      p->order, meshRank - 1);
      if (slot[p->dim][p->order] >= 0)
        return dtDiag(outDiag, -1,
                      "mesh axes %d and %d both have shard order %d on dim %d",
                      slot[p->dim][p->order], m, p->order, p->dim);
      slot[p->dim][p->order] = m;
      if (spec.numAxes[p->dim] &&
          effectiveInterleave(spec.interleave[p->dim]) !=
              effectiveInterleave(p->interleave))
        return dtDiag(outDiag, -1,
                      "the mesh axes sharding dim %d disagree on its "
                      "interleave factor",
                      p->dim);
      spec.interleave[p->dim] = p->interleave;
      ++spec.numAxes[p->dim];
      break;
    default:
      return dtDiag(outDiag, -1, "mesh axis %d has an invalid placement kind",
                    m);
    }
  }
  for (int d = 0; d < rank; ++d)
    for (int i = 0; i < spec.numAxes[d]; ++i) {
      if (slot[d][i] < 0)
        return dtDiag(outDiag, -1,
                      "dim %d is sharded by %d mesh axes but none has shard "
                      "order %d; orders must be 0..%d",
                      d, spec.numAxes[d], i, spec.numAxes[d] - 1);
      spec.axes[d][i] = slot[d][i];
    }
  *outSpec = spec;
  return true;
}

size_t dtensorPlacementsPrint(const DtensorPlacements *placements, char *buffer,
                              size_t capacity) {
  DtBuf buf = dtBufInit(buffer, capacity);
  dtBufPrintf(&buf, "(");
  for (int m = 0; m < placements->meshRank; ++m) {
    const DtensorPlacement *p = &placements->axes[m];
    if (m)
      dtBufPrintf(&buf, ", ");
    switch (p->kind) {
    case DTENSOR_PLACEMENT_REPLICATE:
      dtBufPrintf(&buf, "Replicate()");
      break;
    case DTENSOR_PLACEMENT_PARTIAL:
      dtBufPrintf(&buf, "Partial(%s)", dtensorReduceKindGetName(p->reduce));
      break;
    case DTENSOR_PLACEMENT_SHARD:
      if (p->interleave > 1)
        dtBufPrintf(&buf, "InterleavedShard(%d, %lld", p->dim,
                    (long long)p->interleave);
      else
        dtBufPrintf(&buf, "Shard(%d", p->dim);
      if (p->order)
        dtBufPrintf(&buf, ", order=%d", p->order);
      dtBufPrintf(&buf, ")");
      break;
    }
  }
  dtBufPrintf(&buf, ")");
  return buf.length;
}
