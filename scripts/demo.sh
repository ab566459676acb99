#!/usr/bin/env bash
# The README demo: set-up and build, then the annotated MLP example through
# dtensor-opt and the layout of its hidden activation on the 2x4 mesh.
# (Compiling it to per-device code and running it on several ranks comes
# with the partitioner and the runtime, issues 5 and 6.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
echo "== examples/mlp.mlir verified and printed by dtensor-opt"
build/bin/dtensor-opt examples/mlp.mlir --dtensor-verify
echo
echo "== a 10x8 tensor on [S(tp), S(dp)] over dp=2, tp=4 (uneven rows)"
build/bin/dtensor-plan show --mesh dp=2,tp=4 --shape 10x8 --spec "[S(tp), S(dp)]"
