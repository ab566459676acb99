/* The check macro of the multi-process runtime tests: counts checks,
 * reports the first failures with the rank and location, and each rank
 * prints "N passed, N failed" at the end. `rank` is set by the test. */
#ifndef DTENSOR_TEST_RUNTIME_RANKCHECK_H
#define DTENSOR_TEST_RUNTIME_RANKCHECK_H

#include <stdio.h>

static int failures = 0, checks = 0, rank = 0;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    ++checks;                                                                  \
    if (!(cond) && ++failures < 20) {                                          \
      fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__);           \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
    }                                                                          \
  } while (0)

#endif
