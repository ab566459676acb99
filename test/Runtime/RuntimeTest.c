/* Runtime tests, run as real processes by dtensor-run: every collective x
 * element type x a few counts (one larger than the exchange slot, so it
 * takes several rounds) on the world, and on the sub-groups of a 2x2 mesh
 * when there are 4 ranks. Every rank checks its own results exactly (the
 * values are small integers, exact in every type) and prints one line. */
#include "dtensor-rt/Runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "RankCheck.h"

/* Small integers as f16 (exact for |v| <= 2048) and bf16 (|v| <= 256). */
static uint16_t toHalf(double v) {
  if (v == 0)
    return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  double a = fabs(v);
  int e = 0;
  while (a >= 2.0) {
    a /= 2.0;
    ++e;
  }
  return sign | (uint16_t)((e + 15) << 10) | (uint16_t)lround((a - 1.0) * 1024);
}

static double fromHalf(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
  return (h & 0x8000) ? -v : v;
}

static void set(void *buf, DtrtDtype t, size_t k, double v) {
  float f = (float)v;
  uint32_t u;
  switch (t) {
  case DTRT_F32:
    ((float *)buf)[k] = f;
    break;
  case DTRT_F64:
    ((double *)buf)[k] = v;
    break;
  case DTRT_I32:
    ((int32_t *)buf)[k] = (int32_t)v;
    break;
  case DTRT_I64:
    ((int64_t *)buf)[k] = (int64_t)v;
    break;
  case DTRT_I8:
    ((int8_t *)buf)[k] = (int8_t)v;
    break;
  case DTRT_I16:
    ((int16_t *)buf)[k] = (int16_t)v;
    break;
  case DTRT_UI8:
  case DTRT_I1:
    ((uint8_t *)buf)[k] = (uint8_t)v;
    break;
  case DTRT_F16:
    ((uint16_t *)buf)[k] = toHalf(v);
    break;
  case DTRT_BF16:
    memcpy(&u, &f, 4);
    ((uint16_t *)buf)[k] = (uint16_t)(u >> 16);
    break;
  case DTRT_F8E4M3FN: /* the conversions are dtype-test's */
  case DTRT_F8E5M2:
    dtrtConvert(&f, DTRT_F32, (uint8_t *)buf + k, t, 1);
    break;
  }
}

static double get(const void *buf, DtrtDtype t, size_t k) {
  uint32_t u;
  float f;
  switch (t) {
  case DTRT_F32:
    return ((const float *)buf)[k];
  case DTRT_F64:
    return ((const double *)buf)[k];
  case DTRT_I32:
    return ((const int32_t *)buf)[k];
  case DTRT_I64:
    return (double)((const int64_t *)buf)[k];
  case DTRT_I8:
    return ((const int8_t *)buf)[k];
  case DTRT_I16:
    return ((const int16_t *)buf)[k];
  case DTRT_UI8:
  case DTRT_I1:
    return ((const uint8_t *)buf)[k];
  case DTRT_F16:
    return fromHalf(((const uint16_t *)buf)[k]);
  case DTRT_BF16:
    u = (uint32_t)((const uint16_t *)buf)[k] << 16;
    memcpy(&f, &u, 4);
    return f;
  case DTRT_F8E4M3FN:
  case DTRT_F8E5M2:
    dtrtConvert((const uint8_t *)buf + k, t, &f, DTRT_F32, 1);
    return f;
  }
  return NAN;
}

/* `v` as type `t` holds it. */
static double rounded(DtrtDtype t, double v) {
  char cell[8];
  set(cell, t, 0, v);
  return get(cell, t, 0);
}

/* f8 types (2 or 3 mantissa bits) get values of 1 and 2, whose sums and
 * products over up to 4 members are exact in every order. */
static bool gEightBit;

/* The value global rank `r` contributes at index `k`. */
static double value(int r, size_t k, DtrtReduce op) {
  if (gEightBit)
    return 1.0 + (double)((r + (int)k) % 2);
  if (op == DTRT_PROD)
    return 1.0 + (double)((r + k) % 2);
  return (r + 1) * 10.0 + (double)(k % 7);
}

static const char *kTypes[] = {"f32", "f64", "f16",      "bf16",
                               "i32", "i64", "i8",       "i16",
                               "i1",  "ui8", "f8E4M3FN", "f8E5M2"};

static bool isInteger(int t) {
  return t == DTRT_I32 || t == DTRT_I64 || t == DTRT_I8 || t == DTRT_I16 ||
         t == DTRT_UI8;
}

static void testComm(DtrtContext *ctx, DtrtComm *comm, const int *members,
                     const char *label) {
  int n = dtrtCommSize(comm), me = dtrtCommRank(comm);
  /* 300 is larger than the small slot of some tests (several rounds);
   * 40000 takes the large-message all_reduce path with the default slot. */
  size_t counts[4] = {1, 7, 300, 40000};
  /* Every type but i1 (booleans, below); the values' sums over 4 members
   * stay under 127 (i8). */
  for (int t = 0; t <= DTRT_F8E5M2; ++t)
    for (int c = 0; c < 4 && t != DTRT_I1; ++c) {
      DtrtDtype dt = (DtrtDtype)t;
      gEightBit = dt == DTRT_F8E4M3FN || dt == DTRT_F8E5M2;
      size_t count = counts[c], es = dtrtDtypeSize(dt);
      char *send = malloc(es * count * (size_t)n);
      char *recv = malloc(es * count * (size_t)n);
      /* all_gather */
      for (size_t k = 0; k < count; ++k)
        set(send, dt, k, value(members[me], k, DTRT_SUM));
      CHECK(dtrtAllGather(comm, send, recv, count, dt) == DTRT_OK,
            "all_gather");
      for (int j = 0; j < n; ++j)
        for (size_t k = 0; k < count; ++k)
          CHECK(get(recv, dt, (size_t)j * count + k) ==
                    value(members[j], k, DTRT_SUM),
                "%s all_gather %s count %zu: member %d elem %zu", label,
                kTypes[t], count, j, k);
      /* all_reduce, every op */
      for (int op = DTRT_SUM; op <= DTRT_PROD; ++op) {
        for (size_t k = 0; k < count; ++k)
          set(send, dt, k, value(members[me], k, (DtrtReduce)op));
        CHECK(dtrtAllReduce(comm, send, recv, count, dt, (DtrtReduce)op) ==
                  DTRT_OK,
              "all_reduce");
        for (size_t k = 0; k < count; ++k) {
          double want = value(members[0], k, (DtrtReduce)op);
          for (int j = 1; j < n; ++j) {
            double v = value(members[j], k, (DtrtReduce)op);
            want = op == DTRT_MAX    ? fmax(want, v)
                   : op == DTRT_MIN  ? fmin(want, v)
                   : op == DTRT_PROD ? want * v
                                     : want + v;
          }
          if (op == DTRT_AVG)
            want = isInteger(t) ? floor(want / n) : rounded(dt, want / n);
          CHECK(get(recv, dt, k) == want,
                "%s all_reduce op %d %s count %zu "
                "elem %zu: %g, want %g",
                label, op, kTypes[t], count, k, get(recv, dt, k), want);
        }
      }
      /* reduce_scatter (sum): member j's block of everyone's input */
      for (size_t k = 0; k < count * (size_t)n; ++k)
        set(send, dt, k, value(members[me], k, DTRT_SUM));
      CHECK(dtrtReduceScatter(comm, send, recv, count, dt, DTRT_SUM) == DTRT_OK,
            "reduce_scatter");
      for (size_t k = 0; k < count; ++k) {
        double want = 0;
        for (int j = 0; j < n; ++j)
          want += value(members[j], (size_t)me * count + k, DTRT_SUM);
        CHECK(get(recv, dt, k) == want,
              "%s reduce_scatter %s count %zu "
              "elem %zu",
              label, kTypes[t], count, k);
      }
      /* all_to_all: block j of member i goes to member j */
      CHECK(dtrtAllToAll(comm, send, recv, count, dt) == DTRT_OK, "all_to_all");
      for (int j = 0; j < n; ++j)
        for (size_t k = 0; k < count; ++k)
          CHECK(get(recv, dt, (size_t)j * count + k) ==
                    value(members[j], (size_t)me * count + k, DTRT_SUM),
                "%s all_to_all %s count %zu", label, kTypes[t], count);
      /* broadcast from the last member */
      for (size_t k = 0; k < count; ++k)
        set(send, dt, k, value(members[me], k, DTRT_SUM));
      CHECK(dtrtBroadcast(comm, send, count, dt, n - 1) == DTRT_OK,
            "broadcast");
      for (size_t k = 0; k < count; ++k)
        CHECK(get(send, dt, k) == value(members[n - 1], k, DTRT_SUM),
              "%s broadcast %s", label, kTypes[t]);
      /* permute: a ring shift by one, then a chain (the last member sends
       * to none, member 0 receives zeros) */
      for (size_t k = 0; k < count; ++k)
        set(send, dt, k, value(members[me], k, DTRT_SUM));
      CHECK(dtrtPermute(comm, send, recv, count, dt, (me + 1) % n,
                        (me + n - 1) % n) == DTRT_OK,
            "permute");
      for (size_t k = 0; k < count; ++k)
        CHECK(get(recv, dt, k) == value(members[(me + n - 1) % n], k, DTRT_SUM),
              "%s permute ring %s count %zu", label, kTypes[t], count);
      CHECK(dtrtPermute(comm, send, recv, count, dt, me + 1 < n ? me + 1 : -1,
                        me - 1) == DTRT_OK,
            "permute chain");
      for (size_t k = 0; k < count; ++k)
        CHECK(get(recv, dt, k) ==
                  (me ? value(members[me - 1], k, DTRT_SUM) : 0.0),
              "%s permute chain %s count %zu", label, kTypes[t], count);
      free(send);
      free(recv);
    }
  gEightBit = false;
  /* i1: booleans reduce by max (or), min and prod (and); a sum or an
   * average of them is refused with a message, on every member. */
  uint8_t bits[3] = {(uint8_t)(me == 0), 1, 0}, out[3];
  CHECK(dtrtAllReduce(comm, bits, out, 3, DTRT_I1, DTRT_MAX) == DTRT_OK &&
            out[0] == 1 && out[1] == 1 && out[2] == 0,
        "%s i1 max", label);
  CHECK(dtrtAllReduce(comm, bits, out, 3, DTRT_I1, DTRT_MIN) == DTRT_OK &&
            out[0] == (n == 1) && out[1] == 1 && out[2] == 0,
        "%s i1 min", label);
  CHECK(dtrtAllReduce(comm, bits, out, 3, DTRT_I1, DTRT_SUM) ==
                DTRT_ERR_INVALID &&
            strstr(dtrtLastError(ctx), "a sum of i1"),
        "%s i1 sum refused", label);
  CHECK(dtrtBarrier(comm) == DTRT_OK, "barrier");
}

/* Started collectives: two on each of two communicators, a blocking call
 * queued behind them, then tests and waits; results as if blocking. */
static void testAsync(DtrtComm *a, DtrtComm *b, const int *membersA,
                      const int *membersB) {
  enum { COUNT = 5000 };
  int na = dtrtCommSize(a), nb = dtrtCommSize(b);
  float *x = malloc(sizeof(float) * COUNT),
        *sum = malloc(sizeof(float) * COUNT);
  float *gathered = malloc(sizeof(float) * COUNT * (size_t)na);
  float *y = malloc(sizeof(float) * COUNT),
        *maxed = malloc(sizeof(float) * COUNT);
  for (int k = 0; k < COUNT; ++k)
    x[k] = y[k] = (float)value(membersA[dtrtCommRank(a)], (size_t)k, DTRT_SUM);
  DtrtRequest *r[3];
  DtrtCollective ops[3] = {
      {.kind = DTRT_COLL_ALL_REDUCE,
       .send = x,
       .recv = sum,
       .count = COUNT,
       .dtype = DTRT_F32,
       .reduce = DTRT_SUM},
      {.kind = DTRT_COLL_ALL_GATHER,
       .send = x,
       .recv = gathered,
       .count = COUNT,
       .dtype = DTRT_F32},
      {.kind = DTRT_COLL_ALL_REDUCE,
       .send = y,
       .recv = maxed,
       .count = COUNT,
       .dtype = DTRT_F32,
       .reduce = DTRT_MAX},
  };
  CHECK(dtrtStart(a, &ops[0], &r[0]) == DTRT_OK && r[0], "start 0");
  CHECK(dtrtStart(a, &ops[1], &r[1]) == DTRT_OK && r[1], "start 1");
  CHECK(dtrtStart(b, &ops[2], &r[2]) == DTRT_OK && r[2], "start 2");
  /* A blocking call on `a` runs after what was started on it. */
  float token = (float)dtrtCommRank(a);
  CHECK(dtrtBroadcast(a, &token, 1, DTRT_F32, 0) == DTRT_OK && token == 0.0f,
        "blocking broadcast after started collectives");
  /* Testing makes progress (MPI needs the calls) and ends with done. */
  int done = 0;
  DtrtStatus st = DTRT_OK;
  for (long i = 0; i < 100000000 && !done && st == DTRT_OK; ++i)
    st = dtrtTest(r[0], &done);
  CHECK(st == DTRT_OK && done, "test until done");
  for (int i = 2; i >= 0; --i)
    CHECK(dtrtWait(r[i]) == DTRT_OK, "wait %d: %s", i, "");
  for (int k = 0; k < COUNT; ++k) {
    double want = 0, most = -1;
    for (int j = 0; j < na; ++j)
      want += value(membersA[j], (size_t)k, DTRT_SUM);
    for (int j = 0; j < nb; ++j)
      most = fmax(most, value(membersB[j], (size_t)k, DTRT_SUM));
    CHECK(sum[k] == (float)want, "async all_reduce elem %d", k);
    CHECK(maxed[k] == (float)most, "async all_reduce max elem %d", k);
    for (int j = 0; j < na; ++j)
      CHECK(gathered[(size_t)j * COUNT + (size_t)k] ==
                (float)value(membersA[j], (size_t)k, DTRT_SUM),
            "async all_gather member %d elem %d", j, k);
  }
  /* A bad collective starts nothing. */
  DtrtCollective bad = {.kind = DTRT_COLL_BROADCAST,
                        .recv = x,
                        .count = 1,
                        .dtype = DTRT_F32,
                        .root = na};
  DtrtRequest *none = (DtrtRequest *)x;
  CHECK(dtrtStart(a, &bad, &none) == DTRT_ERR_INVALID && none == NULL,
        "bad start rejected");
  CHECK(dtrtWait(NULL) == DTRT_OK, "wait NULL");
  free(x);
  free(sum);
  free(gathered);
  free(y);
  free(maxed);
}

int main(void) {
  DtrtContext *ctx = NULL;
  DtrtStatus s = dtrtInit(&ctx);
  if (s != DTRT_OK) {
    fprintf(stderr, "init: %s: %s\n", dtrtStatusString(s), dtrtLastError(ctx));
    return 1;
  }
  rank = dtrtRank(ctx);
  int world = dtrtWorldSize(ctx);
  int *all = malloc(sizeof(int) * (size_t)world);
  for (int i = 0; i < world; ++i)
    all[i] = i;
  testComm(ctx, dtrtCommWorld(ctx), all, "world");
  testAsync(dtrtCommWorld(ctx), dtrtCommWorld(ctx), all, all);
  if (world == 4) {
    int64_t mesh[2] = {2, 2};
    int axesList[3][2] = {{0, -1}, {1, -1}, {1, 0}};
    int numAxes[3] = {1, 1, 2};
    for (int g = 0; g < 3; ++g) {
      DtrtComm *comm;
      CHECK(dtrtCommForMeshAxes(ctx, 2, mesh, numAxes[g], axesList[g], &comm) ==
                DTRT_OK,
            "comm for axes");
      /* The members, from the mesh coordinates: row-major over the axes. */
      int members[4], r0 = rank / 2, r1 = rank % 2;
      for (int j = 0; j < dtrtCommSize(comm); ++j) {
        int c0 = r0, c1 = r1;
        if (g == 0)
          c0 = j;
        else if (g == 1)
          c1 = j;
        else {
          c1 = j / 2;
          c0 = j % 2;
        }
        members[j] = c0 * 2 + c1;
      }
      char label[32];
      snprintf(label, sizeof(label), "2x2 group %d", g);
      testComm(ctx, comm, members, label);
    }
    /* Started collectives on two different groups overlap. */
    {
      DtrtComm *rows, *cols;
      int axis0 = 0, axis1 = 1;
      dtrtCommForMeshAxes(ctx, 2, mesh, 1, &axis1, &rows);
      dtrtCommForMeshAxes(ctx, 2, mesh, 1, &axis0, &cols);
      int rowMembers[2] = {rank / 2 * 2, rank / 2 * 2 + 1};
      int colMembers[2] = {rank % 2, rank % 2 + 2};
      testAsync(rows, cols, rowMembers, colMembers);
    }
    /* Asking again gives the cached communicator. */
    DtrtComm *a, *b;
    int axis = 1;
    dtrtCommForMeshAxes(ctx, 2, mesh, 1, &axis, &a);
    dtrtCommForMeshAxes(ctx, 2, mesh, 1, &axis, &b);
    CHECK(a == b, "cached communicator");
  }
  /* Bad arguments are reported, not crashed on. */
  int bad[2] = {0, 0};
  DtrtComm *none;
  CHECK(dtrtCommGet(ctx, 2, bad, &none) == DTRT_ERR_INVALID &&
            strstr(dtrtLastError(ctx), "listed twice"),
        "duplicate member rejected");
  CHECK(dtrtBroadcast(dtrtCommWorld(ctx), all, 1, DTRT_I32, world) ==
            DTRT_ERR_INVALID,
        "bad root rejected");
  CHECK(dtrtPermute(dtrtCommWorld(ctx), all, all + 1, 1, DTRT_I32, world, -1) ==
                DTRT_ERR_INVALID &&
            strstr(dtrtLastError(ctx), "member position"),
        "bad permute destination rejected");
  /* Mismatched pairs: shm names the mismatch (MPI would hang instead, so
   * only shm runs this). */
  if (world >= 2 && rank < 2 && !strcmp(dtrtBackendName(ctx), "shm")) {
    /* On a group of its own (members in another order than the world's):
     * the failure ends that group, not the world. */
    int pair[2] = {1, 0}, out = 0, in = 0;
    DtrtComm *two;
    CHECK(dtrtCommGet(ctx, 2, pair, &two) == DTRT_OK, "pair communicator");
    CHECK(two != dtrtCommWorld(ctx), "a group of its own");
    /* Position 1 (rank 0) receives from position 0, which sends to none. */
    s = dtrtPermute(two, &out, &in, 1, DTRT_I32, -1, rank == 0 ? 0 : -1);
    CHECK(rank == 0 ? s == DTRT_ERR_INVALID &&
                          strstr(dtrtLastError(ctx), "which sends to -1")
                    : s == DTRT_ERR_PEER,
          "mismatched permute: %s", dtrtLastError(ctx));
  } else {
    ++checks;
  }
  free(all);
  s = dtrtFinalize(ctx);
  CHECK(s == DTRT_OK, "finalize");
  printf("rank %d of %d: %d passed, %d failed\n", rank, world,
         checks - failures, failures);
  return failures ? 1 : 0;
}
