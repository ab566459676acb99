/* Util.h's helpers that are not inline: the op list. */
#include "Util.h"

#include "Support/Support.h"

bool dtOpListPush(DtOpList *list, MlirOperation op) {
  MlirOperation *slot = dtArrayPush((void **)&list->ops, &list->count,
                                    &list->capacity, sizeof(MlirOperation));
  if (slot)
    *slot = op;
  return slot != NULL;
}
