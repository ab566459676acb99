/* A minimal check macro shared by the C unit tests: counts checks, reports
 * each failure with its location, and the test prints "N passed, N failed". */
#ifndef DTENSOR_TEST_UNIT_CHECK_H
#define DTENSOR_TEST_UNIT_CHECK_H

#include <stdio.h>

static int failures = 0, checks = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    ++checks;                                                                  \
    if (!(cond)) {                                                             \
      ++failures;                                                              \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

#endif
