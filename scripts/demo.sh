#!/usr/bin/env bash
# The README demo: set-up and build, then the annotated MLP example through
# dtensor-opt (verified, compiled to the program each device runs: one
# all_reduce over tp), the Megatron MLP run on 4 ranks on shared memory and
# checked against the single-device run, and a layout drawn on a 2x4 mesh.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== set-up and build (Debian packages if missing, then CMake + Ninja; about"
echo "   a minute on 2 cores the first time)"
# Every 25th build step, and whatever says what is installed or failed.
bash scripts/setup.sh 2>&1 |
  awk '/^\[[0-9]+\/[0-9]+\]/ { n++; if (n % 25 == 1) print "   " $1 " " $NF; next }
       /^installing|error|FAILED|no work to do/ { print "   " $0 }'
[ "${PIPESTATUS[0]}" = 0 ] || { echo "demo: the set-up failed (bash scripts/setup.sh shows why)"; exit 1; }
echo
echo "== examples/mlp.mlir verified and printed by dtensor-opt"
build/bin/dtensor-opt examples/mlp.mlir --dtensor-verify
echo
echo "== compiled for each device: dtensor-opt --dtensor-spmd"
build/bin/dtensor-opt examples/mlp.mlir --dtensor-spmd
echo
echo "== examples/megatron.mlir compiled with dtensor-spmd and run on 4 ranks"
build/bin/dtensor-run -n 4 examples/megatron.mlir
echo
echo "== a 10x8 tensor on [S(tp), S(dp)] over dp=2, tp=4 (uneven rows)"
build/bin/dtensor-plan show --mesh dp=2,tp=4 --shape 10x8 --spec "[S(tp), S(dp)]"
echo
echo "== next: docs/tutorial.md takes one program from a single device to a"
echo "   4-rank run step by step; docs/where.md maps each concept to its file."
