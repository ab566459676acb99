#!/usr/bin/env bash
# The full test suite: set-up, build, then every test; then the sanitizer
# run (scripts/sanitize.sh: ASan + UBSan build, the tests labelled
# `sanitize`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure
bash scripts/sanitize.sh
