/*===- dtensor-c/Support.h - shared definitions of the public API -*- C -*-===*
 *
 * Export macro and the diagnostic record that every fallible function of the
 * layout algebra fills.
 *
 *===----------------------------------------------------------------------===*/
#ifndef DTENSOR_C_SUPPORT_H
#define DTENSOR_C_SUPPORT_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DTENSOR_EXPORT __attribute__((visibility("default")))
#else
#define DTENSOR_EXPORT
#endif

/// Size of the message buffer of a DtensorDiag.
#define DTENSOR_DIAG_MESSAGE_SIZE 512

/// A diagnostic from the layout algebra: what was wrong and what is valid, and
/// the 0-based column in the parsed text it refers to (-1 when none).
typedef struct DtensorDiag {
  int column;
  char message[DTENSOR_DIAG_MESSAGE_SIZE];
} DtensorDiag;

#ifdef __cplusplus
}
#endif

#endif /* DTENSOR_C_SUPPORT_H */
