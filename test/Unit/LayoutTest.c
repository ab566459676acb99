/* Unit and property tests of the layout algebra. */
#include "dtensor-c/Layout.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "Check.h"

static void roundTrip(const char *text, const char *canonical) {
  DtensorShardingSpec spec, again;
  DtensorDiag diag;
  CHECK(dtensorShardingSpecParse(text, NULL, &spec, &diag));
  char buf[256];
  dtensorShardingSpecPrint(&spec, buf, sizeof(buf));
  if (strcmp(buf, canonical) != 0)
    fprintf(stderr, "print of '%s' is '%s', want '%s'\n", text, buf, canonical);
  CHECK(strcmp(buf, canonical) == 0);
  CHECK(dtensorShardingSpecParse(buf, NULL, &again, &diag));
  CHECK(dtensorShardingSpecEqual(&spec, &again));
}

static void parseError(const char *text, const char *needle) {
  DtensorShardingSpec spec;
  DtensorDiag diag = {-1, ""};
  CHECK(!dtensorShardingSpecParse(text, NULL, &spec, &diag));
  if (!strstr(diag.message, needle))
    fprintf(stderr, "error for '%s' is '%s', want '%s'\n", text, diag.message,
            needle);
  CHECK(strstr(diag.message, needle) != NULL);
}

static void checkError(const DtensorMesh *mesh, const char *text, int rank,
                       const int64_t *shape, const char *needle) {
  DtensorShardingSpec spec;
  DtensorDiag diag = {-1, ""};
  CHECK(dtensorShardingSpecParse(text, mesh, &spec, &diag));
  CHECK(!dtensorShardingSpecCheck(&spec, mesh, rank, shape, &diag));
  if (!strstr(diag.message, needle))
    fprintf(stderr, "check of '%s' says '%s', want '%s'\n", text, diag.message,
            needle);
  CHECK(strstr(diag.message, needle) != NULL);
}

/* Every element owned by exactly one device per replica group and the views
 * round-trip, for every spec of a mesh over a shape. */
static void enumerateSpecs(const DtensorMesh *mesh, int rank,
                           const int64_t *shape) {
  int meshRank = dtensorMeshGetRank(mesh);
  /* Each mesh axis: replicate, partial(sum), or shard dim d; orders follow
   * the enumeration order of axes, plus the reversed order variant. */
  int choices = rank + 2;
  int total = 1;
  for (int a = 0; a < meshRank; ++a)
    total *= choices;
  for (int code = 0; code < total; ++code) {
    for (int reversed = 0; reversed < 2; ++reversed) {
      DtensorShardingSpec spec;
      dtensorShardingSpecInitReplicated(rank, &spec);
      int c = code;
      for (int a = 0; a < meshRank; ++a) {
        int ch = c % choices;
        c /= choices;
        if (ch == 1)
          spec.partial[a] = DTENSOR_REDUCE_SUM;
        else if (ch >= 2) {
          int d = ch - 2;
          spec.axes[d][spec.numAxes[d]++] = a;
        }
      }
      if (reversed)
        for (int d = 0; d < rank; ++d)
          for (int i = 0; i < spec.numAxes[d] / 2; ++i) {
            int t = spec.axes[d][i];
            spec.axes[d][i] = spec.axes[d][spec.numAxes[d] - 1 - i];
            spec.axes[d][spec.numAxes[d] - 1 - i] = t;
          }
      DtensorLayout layout;
      DtensorDiag diag;
      CHECK(dtensorLayoutInit(mesh, &spec, rank, shape, DTENSOR_F32, &layout,
                              &diag));
      /* parse(print(spec)) == spec */
      char text[256];
      dtensorShardingSpecPrint(&spec, text, sizeof(text));
      DtensorShardingSpec parsed;
      CHECK(dtensorShardingSpecParse(text, mesh, &parsed, &diag));
      CHECK(dtensorShardingSpecEqual(&spec, &parsed));
      /* the three views round-trip */
      DtensorDimDict dict;
      DtensorPlacements pl;
      DtensorShardingSpec back;
      dtensorShardingSpecToDimDict(&spec, &dict);
      CHECK(dtensorShardingSpecFromDimDict(&dict, &back, &diag));
      CHECK(dtensorShardingSpecEqual(&spec, &back));
      dtensorShardingSpecToPlacements(&spec, meshRank, &pl);
      CHECK(dtensorShardingSpecFromPlacements(&pl, &back, &diag));
      CHECK(dtensorShardingSpecEqual(&spec, &back));
      /* ownership: each element is held by exactly one device of each
       * replica group, at the local index GlobalToLocal gives */
      int64_t n = dtensorMeshGetNumDevices(mesh);
      int64_t numElems = 1;
      for (int d = 0; d < rank; ++d)
        numElems *= shape[d];
      int64_t groups = dtensorLayoutGetNumReplicaGroups(&layout);
      int64_t replicas = n / groups;
      for (int64_t e = 0; e < numElems; ++e) {
        int64_t idx[DTENSOR_MAX_TENSOR_RANK], r = e;
        for (int d = rank - 1; d >= 0; --d) {
          idx[d] = r % shape[d];
          r /= shape[d];
        }
        int64_t owners[512];
        int64_t count = dtensorLayoutGetOwners(&layout, idx, owners, 512);
        int64_t holders = 0;
        for (int64_t dev = 0; dev < n; ++dev) {
          int64_t local[DTENSOR_MAX_TENSOR_RANK], g[DTENSOR_MAX_TENSOR_RANK];
          if (!dtensorLayoutGlobalToLocal(&layout, dev, idx, local))
            continue;
          ++holders;
          int64_t ls[DTENSOR_MAX_TENSOR_RANK];
          dtensorLayoutGetLocalShape(&layout, dev, ls);
          for (int d = 0; d < rank; ++d)
            CHECK(local[d] >= 0 && local[d] < ls[d]);
          dtensorLayoutLocalToGlobal(&layout, dev, local, g);
          for (int d = 0; d < rank; ++d)
            CHECK(g[d] == idx[d]);
        }
        CHECK(holders == count);
        /* one holder per replica group member set: holders = replicas times
         * the number of Partial contributions */
        int64_t partialDevices = 1;
        for (int a = 0; a < meshRank; ++a)
          if (spec.partial[a])
            partialDevices *= dtensorMeshGetAxisSize(mesh, a);
        CHECK(count == replicas * partialDevices);
      }
      /* local block sizes add up to the tensor once per replica */
      int64_t sum = 0;
      for (int64_t dev = 0; dev < n; ++dev)
        sum += dtensorLayoutGetLocalBytes(&layout, dev);
      int64_t partialDevices = 1;
      for (int a = 0; a < meshRank; ++a)
        if (spec.partial[a])
          partialDevices *= dtensorMeshGetAxisSize(mesh, a);
      CHECK(sum == numElems * 4 * replicas * partialDevices);
    }
  }
}

/* dtensorLayoutForEachElement: an uneven [S(0), R] of 10x3 over 4 devices
 * (rows 3, 3, 3, 1): every global element is held by exactly one device,
 * at the local position the layout maps it to, and the rest is padding. */
typedef struct Seen {
  const DtensorLayout *layout;
  int64_t device;
  int held[30];
  int64_t padding, visits;
} Seen;

static void see(void *user, int64_t local, int64_t global) {
  Seen *s = user;
  ++s->visits;
  if (global < 0) {
    ++s->padding;
    return;
  }
  CHECK(global < 30);
  if (global >= 30)
    return;
  ++s->held[global];
  int64_t g[2] = {global / 3, global % 3}, l[2];
  CHECK(dtensorLayoutGlobalToLocal(s->layout, s->device, g, l));
  CHECK(l[0] * 3 + l[1] == local);
}

static void testForEachElement(void) {
  DtensorMesh *mesh = dtensorMeshParse("4", NULL);
  DtensorShardingSpec spec;
  DtensorLayout layout;
  int64_t shape[2] = {10, 3};
  CHECK(dtensorShardingSpecParse("[S0, R]", mesh, &spec, NULL));
  CHECK(dtensorLayoutInit(mesh, &spec, 2, shape, DTENSOR_F32, &layout, NULL));
  Seen s;
  memset(&s, 0, sizeof(s));
  s.layout = &layout;
  for (s.device = 0; s.device < 4; ++s.device)
    dtensorLayoutForEachElement(&layout, s.device, see, &s);
  CHECK(s.visits == 4 * 9);  /* four padded blocks of 3x3 */
  CHECK(s.padding == 2 * 3); /* the last device holds one row of three */
  for (int g = 0; g < 30; ++g)
    CHECK(s.held[g] == 1);
  dtensorMeshDestroy(mesh);
}

int main(void) {
  testForEachElement();
  roundTrip("[S0, R]", "[S0, R]");
  roundTrip("[ S01 ,S10,R ]", "[S01, S10, R]");
  roundTrip("[]", "[]");
  roundTrip("[S0i3, R] Pmax(2) Psum(1)", "[S0i3, R] Psum(1) Pmax(2)");
  roundTrip("[R] Psum(1, 2)", "[R] Psum(1, 2)");
  parseError("S0", "starts with '['");
  parseError("[S]", "mesh axis digits");
  parseError("[X0]", "'R' (replicated)");
  parseError("[S0 R]", "',' or ']'");
  parseError("[S0] Pfoo(1)", "unknown reduce kind 'foo'");
  parseError("[S(tp)]", "needs a mesh");
  parseError("[S9]", "out of range");
  parseError("[R] Psum(1, 1)", "Partial twice");

  DtensorDiag diag;
  DtensorMesh *mesh = dtensorMeshParse("dp=2,tp=4", &diag);
  CHECK(mesh != NULL);
  CHECK(dtensorMeshGetNumDevices(mesh) == 8);
  CHECK(dtensorMeshFindAxis(mesh, "tp", 2) == 1);
  DtensorShardingSpec named;
  CHECK(dtensorShardingSpecParse("[S(tp,dp), R]", mesh, &named, &diag));
  CHECK(named.numAxes[0] == 2 && named.axes[0][0] == 1 &&
        named.axes[0][1] == 0);
  CHECK(!dtensorShardingSpecParse("[S(pp)]", mesh, &named, &diag));
  CHECK(strstr(diag.message, "unknown mesh axis 'pp'") != NULL);
  int64_t s2[2] = {10, 8};
  checkError(mesh, "[S0]", 2, s2, "has 1 dims but the tensor has rank 2");
  checkError(mesh, "[S2, R]", 2, s2, "out of range");
  checkError(mesh, "[S0, S0]", 2, s2, "shards both dim 0 and dim 1");
  checkError(mesh, "[S00, R]", 2, s2, "shards dim 0 twice");
  checkError(mesh, "[S0, R] Psum(0)", 2, s2,
             "both shards dim 0 and is Partial");
  int64_t zero[2] = {0, 8};
  checkError(mesh, "[S0, R]", 2, zero, "has size 0");
  checkError(mesh, "[S0i3, R]", 2, s2, "interleaved groups");

  /* uneven 10 over 4 (S1): chunks 3,3,3,1; 10x8 on [S0,S1] */
  DtensorShardingSpec spec;
  CHECK(dtensorShardingSpecParse("[S1, S0]", mesh, &spec, &diag));
  DtensorLayout layout;
  CHECK(dtensorLayoutInit(mesh, &spec, 2, s2, DTENSOR_F32, &layout, &diag));
  int64_t ls[2];
  dtensorLayoutGetLocalShape(&layout, 3, ls); /* coords (0,3) */
  CHECK(ls[0] == 1 && ls[1] == 4);
  dtensorLayoutGetMaxLocalShape(&layout, ls);
  CHECK(ls[0] == 3 && ls[1] == 4);
  CHECK(!dtensorLayoutIsEven(&layout));
  DtensorRange r[4];
  CHECK(dtensorLayoutGetLocalRanges(&layout, 6, 0, r) == 1); /* (1,2) */
  CHECK(r[0].begin == 6 && r[0].end == 9);

  /* interleaved: 12 = 3 groups of 4, over 4 devices (tp) */
  DtensorShardingSpec qkv;
  int64_t s1[1] = {12};
  CHECK(dtensorShardingSpecParse("[S1i3]", mesh, &qkv, &diag));
  CHECK(dtensorLayoutInit(mesh, &qkv, 1, s1, DTENSOR_F32, &layout, &diag));
  CHECK(dtensorLayoutGetLocalRanges(&layout, 1, 0, r) == 3);
  CHECK(r[0].begin == 1 && r[1].begin == 5 && r[2].begin == 9);

  /* sizes whose byte count does not fit in 64 bits are refused; the
   * largest that fits is accepted */
  int64_t huge[2] = {3037000500, 3037000500}, edge[2] = {INT64_MAX / 8, 2};
  CHECK(dtensorShardingSpecParse("[S1, R]", mesh, &qkv, &diag));
  CHECK(!dtensorLayoutInit(mesh, &qkv, 2, huge, DTENSOR_F32, &layout, &diag));
  CHECK(strstr(diag.message, "3037000500x3037000500 is too large") != NULL);
  CHECK(dtensorLayoutInit(mesh, &qkv, 2, edge, DTENSOR_F32, &layout, &diag));
  edge[1] = 3;
  CHECK(!dtensorLayoutInit(mesh, &qkv, 2, edge, DTENSOR_F32, &layout, &diag));

  /* sub-mesh */
  int axes[1] = {1};
  DtensorMesh *sub = dtensorMeshCreateSubmesh(mesh, 1, axes, 5, &diag);
  CHECK(sub && dtensorMeshGetNumDevices(sub) == 4);
  CHECK(dtensorMeshGetDeviceId(sub, 0) == 4 &&
        dtensorMeshGetDeviceId(sub, 3) == 7);
  dtensorMeshDestroy(sub);
  dtensorMeshDestroy(NULL);

  /* exhaustive property checks on meshes up to 3-D, uneven shapes */
  const char *meshes[] = {"4", "3", "2x2", "2x3", "2x2x2"};
  const int64_t shapes[][3] = {{7, 5, 0}, {6, 4, 0}, {5, 3, 2}};
  const int ranks[] = {2, 2, 3};
  for (size_t m = 0; m < sizeof(meshes) / sizeof(meshes[0]); ++m) {
    DtensorMesh *mm = dtensorMeshParse(meshes[m], &diag);
    CHECK(mm != NULL);
    for (size_t s = 0; s < 3; ++s)
      enumerateSpecs(mm, ranks[s], shapes[s]);
    dtensorMeshDestroy(mm);
  }
  dtensorMeshDestroy(mesh);
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
