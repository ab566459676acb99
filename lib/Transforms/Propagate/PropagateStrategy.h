/* An op's strategies (PropagateStrategy.c): the factor strategies of its
 * rule, their candidates and costs, and deciding an op that has a rule
 * (factors, replicated, free, annotate/redistribute); the whole function's
 * choice (PropagateRefine.c) weighs the same candidates. */
#ifndef DTENSOR_LIB_TRANSFORMS_PROPAGATE_STRATEGY_H
#define DTENSOR_LIB_TRANSFORMS_PROPAGATE_STRATEGY_H

#include "PropagateState.h"

typedef struct Strategy {
  int numAxes[DT_MAX_FACTORS];
  int axes[DT_MAX_FACTORS][DTENSOR_MAX_MESH_RANK];
  /* Interleaved groups of a factor that is a whole dim (S0i3); 0: none.
   * (A compound dim whose leading factors are whole and a later one
   * sharded is interleaved by the leading factors' size instead.) */
  int64_t interleave[DT_MAX_FACTORS];
  unsigned used; /* mesh axes taken by factors */
  int seed;      /* which known value it started from (-1: none) */
} Strategy;

typedef struct Known {
  bool isResult;
  int index;
  DtensorShardingSpec spec;
  const Info *info;
  Origin origin; /* text NULL for a demand: formatted if it wins */
  bool noSeed;   /* merged into candidates, but seeds none */
  /* An operand: layouts other users of the value need, whose conversion
   * is made anyway (the same redistribute serves every user). */
  const CSpec *shared;
  int numShared;
} Known;

typedef struct Choice {
  Strategy strategy;
  DtensorShardingSpec operands[DT_MAX_RULE_VALUES];
  DtensorShardingSpec results[DT_MAX_RULE_VALUES];
  double cost;    /* conversions + compute */
  double compute; /* of it, the per-device compute (dtPropComputeUs) */
} Choice;

/* ---- PropagateStrategy.c ------------------------------------------------- */

/// A value nobody has decided takes the layout `want` its user needs.
void dtPropAdopt(Prop *p, Info *in, const DtensorShardingSpec *want,
                 MlirOperation user);

/// Explains (into `why`) or, in strict mode, refuses the redistribution of
/// operand `i` to `want`.
void dtPropDescribeRedistribution(Prop *p, MlirOperation op, int i,
                                  const Info *in,
                                  const DtensorShardingSpec *want, DtBuf *why);

/// Writes the decision `c` of an op and sets its results.
void dtPropRecord(Prop *p, MlirOperation op, const DtRule *r, Info **operands,
                  Info **results, const Choice *c, Origin origin);

/// The op's operand and result specs under `st`, the Partial(sum) axes
/// `pass` flowing through operand `passOperand` (every input for
/// DT_FLOW_ALL_SUM; -1: none); false if they are not valid layouts.
bool dtPropSpecsWith(Prop *p, const DtRule *r, Info **operands, Info **results,
                     const Strategy *st, unsigned pass, int passOperand,
                     Choice *c);

/// The modelled time per device of a contraction's multiply-adds under
/// choice `c`: its loop points (the product of its factors' extents) over
/// the devices that share them (the sizes of the mesh axes on a dim of
/// each factor in `c`'s layouts), times DT_PROP_POINT_US, or priced by the
/// calibration's contraction rate (overhead + points / rate) where it has
/// one. 0 for every other op:
/// their work is a pass over memory that costs little next to moving the same
/// data, so communication alone decides them. Counting it keeps a data parallel
/// batch split (the gradients reduced) where gathering the batch would move
/// fewer bytes but repeat every device's matmuls.
double dtPropComputeUs(Prop *p, const DtRule *r, Info **operands,
                       Info **results, const Choice *c);

/// The modelled cost of one loop point of a contraction (a multiply-add):
/// 40 ps, 25 G per second per device (a CPU core's sustained FMA rate with
/// BLAS is 20-50 G/s).
#define DT_PROP_POINT_US 4e-5

/// The modelled cost of choice `c`: each known operand converted to what
/// `c` needs, each result converted to what each known use wants.
double dtPropChoiceCost(Prop *p, Info **operands, Info **results,
                        const Known *known, int numKnown, const Choice *c);

/// The cheapest candidate seeded by each known value (merged with the
/// others) and by none, using `choices` (3) as scratch: `*best` (NULL if no
/// candidate is valid) and, when `alt` is given, the cheapest other one.
/// Returns the winning seed (-1: none).
int dtPropBestChoice(Prop *p, const DtRule *r, Info **operands, Info **results,
                     const Known *known, int numKnown, Choice *choices,
                     Choice **best, Choice **alt);

/// Decide an op by its rule's kind: the cheapest factor strategy, all
/// replicated, a free op's demand, an annotate or a redistribute.
void dtPropDecideFactors(Prop *p, MlirOperation op, const DtRule *r,
                         Info **operands, Info **results);
void dtPropDecideReplicated(Prop *p, MlirOperation op, const DtRule *r,
                            Info **operands, Info **results);
void dtPropDecideFree(Prop *p, MlirOperation op, const DtRule *r,
                      Info **operands, Info **results);
void dtPropDecideExplicit(Prop *p, MlirOperation op, const DtRule *r,
                          Info **operands, Info **results);

#endif
