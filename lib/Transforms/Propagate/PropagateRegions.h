/* Ops with regions or callees (PropagateRegions.c): func.call, scf.for,
 * scf.if and scf.while, whose regions or callees are propagated as part of
 * deciding them. */
#ifndef DTENSOR_LIB_TRANSFORMS_PROPAGATE_REGIONS_H
#define DTENSOR_LIB_TRANSFORMS_PROPAGATE_REGIONS_H

#include "PropagateState.h"

/* ---- PropagateRegions.c -------------------------------------------------- */

/// The `dtensor.layout` of argument or result `i` of `func`, if it has one.
bool dtPropFuncLayout(Prop *p, MlirOperation func, bool result, intptr_t i,
                      DtensorShardingSpec *out);

/// Decide func.call (propagating the callee first), scf.for (a fixed point
/// over its body) and scf.if (both branches).
void dtPropDecideCall(Prop *p, MlirOperation op, const DtRule *r,
                      Info **operands, Info **results);
void dtPropDecideFor(Prop *p, MlirOperation op, DtRule *r, Info **operands,
                     Info **results);
void dtPropDecideIf(Prop *p, MlirOperation op, DtRule *r, Info **operands,
                    Info **results);
void dtPropDecideWhile(Prop *p, MlirOperation op, DtRule *r, Info **operands,
                       Info **results);

#endif
