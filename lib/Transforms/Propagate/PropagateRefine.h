/* What the whole function's choice of strategies shares between its
 * refinement (PropagateRefine.c) and its exact search (PropagateExact.c):
 * the ops whose strategy may change (vars), the exact search's
 * candidates, and the state of one function's choice. */
#ifndef DTENSOR_LIB_TRANSFORMS_PROPAGATEREFINE_H
#define DTENSOR_LIB_TRANSFORMS_PROPAGATEREFINE_H

#include "PropagateStrategy.h"

/// Notes what `op` needs of its operands (`need[i]`; NULL entries for
/// non-tensor operands), whether its factor rule decided it, and, when a
/// need differs from the operand's layout, that the op is worth
/// revisiting.
void dtPropNoteNeeds(Prop *p, MlirOperation op, int count,
                     const DtensorShardingSpec *const *need, bool byRule);

/// The whole function's choice after the program-order one: revisits the
/// ops around each conversion until no single op's change lowers the
/// modelled cost, then, on functions of few ops, searches every
/// combination of strategies for the optimum (p->choice).
void dtPropRefine(Prop *p, MlirOperation func);

/// The modelled cost of every conversion the function's decisions need.
double dtPropModelledCost(Prop *p);

/* Functions with at most this many ops with a strategy get the exact
 * search; choice=enumerate refuses more. */
enum { kExactOps = 12 };

/* A compact candidate of the exact search. */
typedef struct Cand {
  bool isCurrent;
  CSpec need[DT_MAX_RULE_VALUES];
  CSpec res[DT_MAX_RULE_VALUES];
  Strategy strategy;
  unsigned pass;
  int passOperand;
  double fixedCost; /* the uses whose other end is fixed */
} Cand;

/* An operand of a var in the exact search: made by an earlier var
 * (`producer`, its place in the order) or fixed (-1); the needs of the
 * value's users that are not vars (`fixedNeeds`, in the search's shared
 * list), whose conversions are made anyway; the earlier vars that use the
 * value too (`sameValue`: links of earlier vars, as order * DT_MAX_RULE_VALUES
 * + link). */
typedef struct Link {
  int operand, producer, result;
  size_t fixedNeeds;
  int numFixedNeeds;
  int sameValue[DT_MAX_RULE_VALUES];
  int numSameValue;
} Link;

/* An op whose strategy may change. Large programs have many: its rule
 * (kilobytes) is read again when needed, except in the exact search. */
typedef struct Var {
  MlirOperation op; /* null for an argument's var */
  int arg;          /* the argument of an argument's var (automatic
                       sharding chooses its layout); -1 for an op's */
  int numOperands, numResults;
  Info *operands[DT_MAX_RULE_VALUES];
  Info *results[DT_MAX_RULE_VALUES];
  bool freeOperand[DT_MAX_RULE_VALUES];
  bool queued;
  Cand *choice; /* the new choice once it changed */
  /* the exact search */
  DtRule *rule;
  Cand *cands;
  size_t numCands, capCands;
  int current; /* the candidate that is its current choice */
  Link *links;
  int numLinks;
  double minFixed;
} Var;

typedef struct Refine {
  Prop *p;
  MlirBlock entry;
  DtTable index; /* VarSlot */
  Var *vars;
  size_t numVars, capVars;
  int *stack;
  size_t numStack, capStack;
  Known *known;
  size_t numKnown, capKnown;
  CSpec *shared; /* the other users' needs of known operands */
  size_t numShared, capShared;
  Choice *scratch;   /* 4: three for dtPropBestChoice, one for the current */
  DtRule *visitRule; /* visit's and finish's */
  /* Outcomes of visits (VisitMemo), their keys' bytes, the current key. */
  DtTable memo;
  unsigned char *memoBytes, *key;
  size_t numMemoBytes, capMemoBytes, numKey, capKey;
  bool failed;
  /* the exact search */
  int *order; /* the vars in program order */
  int count;
  int *pick, *bestPick;
  double *suffix; /* lower bound of the vars from k on */
  double best;
  long nodes;
  bool prune, aborted;
} Refine;

/// The var of `op` (an op of the function's body with a factor rule whose
/// layouts may change), made on first use; -1 for other ops.
int dtRefineVarOf(Refine *R, MlirOperation op);

/// The var of argument `index` of the function (`arg`), whose layout
/// automatic sharding chooses; made on first use (-1 when out of memory).
int dtRefineArgVar(Refine *R, MlirValue arg, int index);

/// The var of `v` when it is an argument with a var, else -1.
int dtRefineArgVarOf(Refine *R, MlirValue v);

/// Forgets what `op` needs of operand `i` (automatic sharding prices it
/// itself: a function result it chooses).
void dtRefineForgetNeed(Refine *R, MlirOperation op, int i);

/// Appends to R->shared the distinct needs of the users of `v` other than
/// operand `skipIndex` of `skipOp` (and, when `skipVars`, other than vars);
/// `*first` is where they start. False when out of memory.
bool dtRefineOtherNeeds(Refine *R, MlirValue v, MlirOperation skipOp,
                        intptr_t skipIndex, bool skipVars, size_t *first);

/// Whether `c` is among the `count` specs of `list`.
bool dtRefineHasCSpec(const CSpec *list, size_t count, CSpec c);

/// The current choice of `v`: what it needs and its results' layouts.
void dtRefineCurrentChoice(Refine *R, const Var *v, Choice *c);

/// `v` takes choice `c` (its results' layouts and needs; the decision is
/// written when the choice ends).
void dtRefineApply(Refine *R, Var *v, const Choice *c);

/// Whether cost `candidate` is lower than `current` beyond rounding.
bool dtRefineLower(double candidate, double current);

/// The exact search (PropagateExact.c) over the vars of R->order: applies
/// the optimum where it is cheaper than the current choices; returns how
/// the choice was made (for cost=true).
const char *dtRefineExact(Refine *R, bool enumerate);

/// The candidates, links and fixed costs of the vars of R->order (the
/// exact search's and automatic sharding's); false when out of memory.
bool dtRefinePrepare(Refine *R);

/// The cost of the vars' current choices, as the exact search counts it.
double dtRefineCurrentTotal(Refine *R);

/// Automatic sharding (PropagateAuto.c): the optimum over the vars of
/// R->order (arguments' vars first) by an integer program, under the
/// memory budget; applies it. Returns how it was chosen (for cost=true);
/// errors are reported at `func`.
const char *dtRefineAuto(Refine *R, MlirOperation func);

#endif
