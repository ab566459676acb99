#!/usr/bin/env bash
# The full test suite: set-up, build, then every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure
