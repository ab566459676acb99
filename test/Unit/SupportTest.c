/* lib/Support: the hash table against a plain array as the reference
 * (random inserts, finds and removals, with keys crowded into few home
 * slots so the backward shift of removal is exercised across wrap-around),
 * the growable array, dtCeilDiv near INT64_MAX, ravel/unravel, the string
 * builder, and the tools' allocator settings (dtTuneAllocator in a child,
 * which reports whether the heap grew by the reserve). */
#define _DEFAULT_SOURCE /* sbrk */
#include "Support/Support.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "Check.h"

typedef struct Entry {
  uint64_t key;
  int value;
} Entry;

static bool sameKey(const void *entry, const void *key) {
  return ((const Entry *)entry)->key == *(const uint64_t *)key;
}

/* Few distinct hashes: long probe runs, many of them wrapping around. */
static uint64_t crowdedHash(uint64_t key) { return (key % 7) * 9 + 60; }

static void countVisit(void *entry, void *user) {
  (void)entry;
  ++*(int *)user;
}

extern char **environ;

/* The process's own (anonymous) memory in MiB, -1 if unknown. */
static long rssAnonMiB(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "RssAnon: %ld kB", &kb) == 1)
      break;
  if (f)
    fclose(f);
  return kb < 0 ? -1 : kb >> 10;
}

/* What dtTuneAllocator does for a command line naming `file`, with
 * GLIBC_TUNABLES as `preset` (NULL: unset), in a child (it sets the
 * child's malloc), which writes back whether it set anything, by how
 * many MiB the heap's end moved and how many MiB of it were faulted in
 * within 5 s without the child touching them: "tuned 64 36" or
 * "left 0 0". */
static void tunedRun(const char *file, const char *preset, char *out,
                     size_t capacity) {
  int fds[2];
  out[0] = 0;
  if (pipe(fds) != 0)
    return;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (preset)
      setenv("GLIBC_TUNABLES", preset, 1);
    else
      unsetenv("GLIBC_TUNABLES");
    char *argv[] = {"support-test", (char *)file, NULL};
    char *before = sbrk(0);
    long rss = rssAnonMiB();
    bool tuned = dtTuneAllocator(2, argv, environ);
    long grown = (long)(((char *)sbrk(0) - before) >> 20);
    long faulted = 0;
    for (int i = 0; i < 100 && tuned && faulted < 34; ++i) {
      usleep(50000);
      faulted = rssAnonMiB() - rss;
    }
    char text[64];
    int n = snprintf(text, sizeof(text), "%s %ld %ld", tuned ? "tuned" : "left",
                     grown, faulted);
    (void)!write(fds[1], text, (size_t)n);
    _exit(0);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t got;
  while (n + 1 < capacity &&
         (got = read(fds[0], out + n, capacity - 1 - n)) > 0)
    n += (size_t)got;
  out[n] = 0;
  close(fds[0]);
  waitpid(pid, NULL, 0);
}

static void testTuneAllocator(void) {
  char small[] = "/tmp/support-test-small-XXXXXX";
  char big[] = "/tmp/support-test-big-XXXXXX";
  int fs = mkstemp(small), fb = mkstemp(big);
  CHECK(fs >= 0 && fb >= 0);
  if (fs < 0 || fb < 0)
    return;
  CHECK(write(fs, "x", 1) == 1 && ftruncate(fb, 3 << 20) == 0);
  close(fs);
  close(fb);
  char out[256];
  /* A 3 MiB input: the heap grows at once to hold its reserve (72 MiB,
   * less what its top had free), and with a second processor a thread
   * faults in its first 36 MiB (12 bytes per input byte), no more. */
  tunedRun(big, NULL, out, sizeof(out));
  long grown = -1, faulted = -1;
  if (DT_TUNES_ALLOCATOR) {
    CHECK(sscanf(out, "tuned %ld %ld", &grown, &faulted) == 2 && grown >= 64);
    if (dtCoresToRunOn() > 1)
      CHECK(faulted >= 34 && faulted <= 44);
    else
      CHECK(faulted < 8);
  } else {
    CHECK(!strcmp(out, "left 0 0"));
  }
  /* Small inputs are left as they are; so is a preset GLIBC_TUNABLES. */
  tunedRun(small, NULL, out, sizeof(out));
  CHECK(!strncmp(out, "left", 4));
  tunedRun(big, "", out, sizeof(out));
  CHECK(!strncmp(out, "left", 4));
  unlink(small);
  unlink(big);
}

/* `n` bytes as lowercase hex. */
static const char *hex(const uint8_t *p, size_t n) {
  static char text[2 * 64 + 1];
  for (size_t i = 0; i < n && i < 64; ++i)
    snprintf(text + 2 * i, 3, "%02x", p[i]);
  return text;
}

static const char *sha(const char *msg) {
  DtSha256 s;
  uint8_t out[DT_SHA256_BYTES];
  dtSha256Init(&s);
  /* In two pieces: the buffering must not matter. */
  size_t n = strlen(msg), half = n / 3;
  dtSha256Update(&s, msg, half);
  dtSha256Update(&s, msg + half, n - half);
  dtSha256Final(&s, out);
  return hex(out, sizeof(out));
}

static const char *hmac(const void *key, size_t keyLen, const char *msg) {
  uint8_t out[DT_SHA256_BYTES];
  const void *parts[2] = {msg, msg + 3};
  size_t sizes[2] = {3, strlen(msg) - 3};
  dtHmacSha256(key, keyLen, parts, sizes, 2, out);
  return hex(out, sizeof(out));
}

/* FIPS 180-4's and RFC 4231's test vectors. */
static void testHashing(void) {
  CHECK(!strcmp(sha("abc"), "ba7816bf8f01cfea414140de5dae2223"
                            "b00361a396177a9cb410ff61f20015ad"));
  CHECK(!strcmp(sha(""), "e3b0c44298fc1c149afbf4c8996fb924"
                         "27ae41e4649b934ca495991b7852b855"));
  CHECK(!strcmp(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
                "248d6a61d20638b8e5c026930c3e6039"
                "a33ce45964ff2167f6ecedd419db06c1"));
  uint8_t k1[20];
  memset(k1, 0x0b, sizeof(k1));
  CHECK(!strcmp(hmac(k1, sizeof(k1), "Hi There"),
                "b0344c61d8db38535ca8afceaf0bf12b"
                "881dc200c9833da726e9376c2e32cff7"));
  CHECK(!strcmp(hmac("Jefe", 4, "what do ya want for nothing?"),
                "5bdcc146bf60754e6a042426089575c7"
                "5a003f089d2739839dec58b964ec3843"));
  uint8_t k6[131];
  memset(k6, 0xaa, sizeof(k6));
  CHECK(!strcmp(
      hmac(k6, sizeof(k6),
           "Test Using Larger Than Block-Size Key - Hash Key First"),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"));
  CHECK(dtSameBytes("abc", "abc", 3) && !dtSameBytes("abc", "abd", 3));
  uint8_t r1[16] = {0}, r2[16] = {0};
  CHECK(dtRandomBytes(r1, sizeof(r1)) && dtRandomBytes(r2, sizeof(r2)) &&
        memcmp(r1, r2, sizeof(r1)));
}

/* Byte counts as budgets are written: binary and decimal units, a
 * fraction only with a unit, nothing negative, too large or unknown. */
static void testByteCount(void) {
  CHECK(dtByteCount("1048576") == 1048576);
  CHECK(dtByteCount("16GiB") == 17179869184LL);
  CHECK(dtByteCount("512MB") == 512000000);
  CHECK(dtByteCount("1.5 GB") == 1500000000);
  CHECK(dtByteCount("2KiB") == 2048 && dtByteCount("3B") == 3);
  CHECK(dtByteCount("1.5") == -1 && dtByteCount("lots") == -1);
  CHECK(dtByteCount("-1") == -1 && dtByteCount("") == -1);
  CHECK(dtByteCount("16 PiB") == -1 && dtByteCount("9.3e6 TB") == -1);
  CHECK(dtByteCount("nan") == -1 && dtByteCount("1GiBs") == -1);
}

/* The scratch stack against the frames of a recursion: each frame's bytes
 * keep their pattern while deeper frames come and go (across chunk
 * boundaries and blocks larger than a chunk), blocks are 16-aligned, and a
 * frame given back is reused by the next. */
static bool scratchFrame(DtScratch *s, int depth, size_t bytes) {
  unsigned char *b = dtScratchTake(s, bytes);
  if (!b || ((uintptr_t)b & 15) != 0)
    return false;
  memset(b, depth & 0xff, bytes);
  bool ok = true;
  if (depth < 12) {
    ok = scratchFrame(s, depth + 1, bytes * 3 / 2 + 7) &&
         scratchFrame(s, depth + 1, 100);
  }
  for (size_t i = 0; i < bytes && ok; ++i)
    ok = b[i] == (depth & 0xff);
  dtScratchGive(s, b);
  return ok;
}

static void testScratch(void) {
  DtScratch s = {0};
  CHECK(scratchFrame(&s, 0, 1000));
  /* Everything given back: the next block is the first chunk's start. */
  void *first = dtScratchTake(&s, 64);
  CHECK(first == s.chunks[0].data);
  void *second = dtScratchTake(&s, 1 << 20); /* larger than a chunk */
  CHECK(second != NULL && s.current > 0);
  dtScratchGive(&s, second);
  CHECK(dtScratchTake(&s, 48) == second);
  dtScratchGive(&s, first);
  CHECK(s.current == 0 && s.used == 0);
  dtScratchFree(&s);
  CHECK(s.numChunks == 0 && dtScratchTake(&s, 8) != NULL);
  dtScratchFree(&s);
}

/* Libraries loaded when first used: a symbol found, a missing library and
 * a missing symbol each said so. */
static void testLoadSymbols(void) {
  const char *names[] = {"cos", "sin"};
  void *symbols[2] = {NULL, NULL};
  DtensorDiag diag;
  CHECK(dtLoadSymbols("libm.so.6", names, 2, symbols, &diag));
  CHECK(symbols[0] != NULL && symbols[1] != NULL);
  CHECK(!dtLoadSymbols("libdtensor-no-such-library.so.9", names, 2, symbols,
                       &diag));
  CHECK(strstr(diag.message, "cannot load libdtensor-no-such-library.so.9"));
  const char *missing[] = {"cos", "dtensor_no_such_symbol"};
  CHECK(!dtLoadSymbols("libm.so.6", missing, 2, symbols, &diag));
  CHECK(strstr(diag.message, "libm.so.6 has no dtensor_no_such_symbol"));
}

int main(void) {
  enum { KEYS = 3000 };
  static int reference[KEYS]; /* value + 1, 0 when absent */
  DtTable t = dtTableInit(sizeof(Entry));
  srand(7);
  for (int step = 0; step < 40000; ++step) {
    uint64_t key = (uint64_t)(rand() % KEYS);
    uint64_t h = key % 2 ? crowdedHash(key) : dtHashMix(1, key);
    Entry *e = dtTableFind(&t, h, sameKey, &key);
    CHECK((e != NULL) == (reference[key] != 0));
    if (e && reference[key])
      CHECK(e->value == reference[key] - 1);
    if (rand() % 3 == 0 && e) {
      dtTableRemove(&t, e);
      reference[key] = 0;
    } else if (!e) {
      e = dtTableInsert(&t, h);
      CHECK(e != NULL);
      if (!e)
        break;
      e->key = key;
      e->value = step;
      reference[key] = step + 1;
    }
  }
  int present = 0, visited = 0;
  for (int k = 0; k < KEYS; ++k) {
    uint64_t key = (uint64_t)k;
    uint64_t h = key % 2 ? crowdedHash(key) : dtHashMix(1, key);
    Entry *e = dtTableFind(&t, h, sameKey, &key);
    CHECK((e != NULL) == (reference[k] != 0));
    present += reference[k] != 0;
  }
  CHECK(t.count == (unsigned)present);
  dtTableForEach(&t, countVisit, &visited);
  CHECK(visited == present);
  dtTableFree(&t);
  CHECK(t.count == 0 && dtTableFind(&t, 1, sameKey, &(uint64_t){1}) == NULL);

  /* The growable array. */
  int *xs = NULL;
  size_t n = 0, cap = 0;
  for (int i = 0; i < 1000; ++i) {
    int *slot = dtArrayPush((void **)&xs, &n, &cap, sizeof(int));
    CHECK(slot && *slot == 0);
    if (slot)
      *slot = i;
  }
  CHECK(n == 1000 && cap >= 1000 && xs[999] == 999 && xs[0] == 0);
  free(xs);
  void *huge = NULL;
  size_t hn = 0, hcap = 0;
  CHECK(dtArrayPush(&huge, &hn, &hcap, SIZE_MAX / 2) == NULL && hn == 0);

  /* Index arithmetic and text. */
  CHECK(dtCeilDiv(INT64_MAX, 2) == INT64_MAX / 2 + 1);
  CHECK(dtCeilDiv(10, 5) == 2 && dtCeilDiv(0, 3) == 0 && dtCeilDiv(1, 3) == 1);
  /* Row-major ravel and unravel, inverse of each other over a 3-d shape. */
  const int64_t shape[3] = {2, 3, 4};
  for (int64_t l = 0; l < 24; ++l) {
    int64_t idx[3];
    dtUnravel(l, 3, shape, idx);
    CHECK(idx[2] == l % 4 && idx[1] == (l / 4) % 3 && idx[0] == l / 12);
    CHECK(dtRavel(3, shape, idx) == l);
  }
  char text[8];
  DtBuf b = dtBufInit(text, sizeof(text));
  dtBufPrintf(&b, "%s-%d", "abcdef", 42);
  CHECK(b.length == 9 && !strcmp(text, "abcdef-"));
  DtensorDiag diag;
  CHECK(!dtDiag(&diag, 3, "at %d", 3) && diag.column == 3 &&
        !strcmp(diag.message, "at 3"));
  testTuneAllocator();
  testHashing();
  testByteCount();
  testScratch();
  testLoadSymbols();
  printf("support-test: %d passed, %d failed\n", checks - failures, failures);
  return failures != 0;
}
