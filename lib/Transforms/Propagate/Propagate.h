/* dtensor-propagate's walk (Propagate.c: seeding from annotations and
 * signatures, the walk over a function's blocks, the module's call order
 * and the pass) and the values that only initialize (PropagateInits.c),
 * as the other files call them. */
#ifndef DTENSOR_LIB_TRANSFORMS_PROPAGATE_WALK_H
#define DTENSOR_LIB_TRANSFORMS_PROPAGATE_WALK_H

#include "PropagateState.h"

/* ---- Propagate.c --------------------------------------------------------- */

/// Decides one op (and, backwards, the producers it adopts).
void dtPropDecide(Prop *p, MlirOperation op);

/// Decides the ops of a block.
void dtPropBlock(Prop *p, MlirBlock block);

/// Whether `f` is in `list`.
bool dtPropFuncListed(void *const *list, int count, MlirOperation f);

/// Whether `func` is a func.func with a body.
bool dtPropHasBody(MlirOperation func);

/// Propagates one function with the shared state of `base`; false after an
/// error. A function is propagated once.
bool dtPropFunction(const Prop *base, MlirOperation func);

/* PropagateInits.c */

/// Gives every use of a value that only initializes (tensor.empty, tensor
/// constants and splats, linalg ops on such values alone) after the first
/// its own copy of it, so each user's layout is its own; false when out of
/// memory.
bool dtPropSplitInits(MlirOperation func);

/// After partition and canonicalization: a value that only initializes
/// and holds a buffer (a fill, a generator on such values, a splat), used
/// by several ops of its block, is made again right before each of them,
/// so that none lives from its first user to its last; in every function
/// of module `root` (`all`) or in those with a memory budget
/// (DT_ATTR_MEMORY); false when out of memory.
bool dtInitsNearUses(MlirOperation root, bool all);

#endif
