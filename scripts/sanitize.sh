#!/usr/bin/env bash
# The sanitizer run: builds into ./build-san with AddressSanitizer and
# UndefinedBehaviorSanitizer (any report ends the process) and runs the
# tests labelled `sanitize` — unit, lit, fuzz, runtime and checkpoint tests
# (not MPI's, whose library is not clean under LeakSanitizer, nor those
# that load the libraries into Python). scripts/test.sh runs it last;
# scripts/setup.sh must have run.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-san -G Ninja -DDTENSOR_SANITIZE=ON >/dev/null
ninja -C build-san
# Leaks at exit are not checked: the tools leave freeing to the end of the
# process on their error paths, and MLIR keeps its own allocations.
# Huge allocations return NULL, as without ASan (the out-of-memory tests).
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=0:strict_string_checks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-san -L sanitize --output-on-failure
