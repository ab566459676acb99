#!/usr/bin/env bash
# The checks that need a GPU, as one script for a machine that has one
# (the nccl backend's tests on device buffers; ctest skips them
# elsewhere). Builds if needed, then runs them and says how many GPUs
# took part: runtime-nccl-N needs N GPUs (one rank per GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "no nvidia-smi"
[ -x build/bin/dtensor-run ] || bash scripts/setup.sh >/dev/null
cmake --build build --target runtime-nccl-test >/dev/null
ctest --test-dir build -R runtime-nccl --output-on-failure
