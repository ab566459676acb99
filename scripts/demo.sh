#!/usr/bin/env bash
# The README demo: set-up and build, then the annotated MLP example through
# dtensor-opt (verified, compiled to the program each device runs: one
# all_reduce over tp), the Megatron MLP run on 4 ranks on shared memory and
# checked against the single-device run, and a layout drawn on a 2x4 mesh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
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
