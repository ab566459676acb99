#!/usr/bin/env bash
# The README demo: set-up and build, then the annotated MLP example through
# dtensor-opt: verified, compiled to the program each device runs (one
# all_reduce over tp), and the layout of a tensor drawn on the 2x4 mesh.
# (Running it on several ranks comes with the runtime, issue 6.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
echo "== examples/mlp.mlir verified and printed by dtensor-opt"
build/bin/dtensor-opt examples/mlp.mlir --dtensor-verify
echo
echo "== compiled for each device: dtensor-opt --dtensor-spmd"
build/bin/dtensor-opt examples/mlp.mlir --dtensor-spmd
echo
echo "== a 10x8 tensor on [S(tp), S(dp)] over dp=2, tp=4 (uneven rows)"
build/bin/dtensor-plan show --mesh dp=2,tp=4 --shape 10x8 --spec "[S(tp), S(dp)]"
