#!/usr/bin/env bash
# Checks that every tracked C source and header is clang-formatted (LLVM
# style, .clang-format; clang-format 22, which scripts/setup.sh installs).
# Prints the files that are not, and how to fix them.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=clang-format-22
command -v "$fmt" >/dev/null || { echo "check-format: $fmt is not installed (bash scripts/setup.sh)"; exit 1; }
bad=()
while IFS= read -r f; do
  "$fmt" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.c' '*.h')
if ((${#bad[@]})); then
  printf 'not clang-formatted: %s\n' "${bad[@]}"
  echo "fix: $fmt -i ${bad[*]}"
  exit 1
fi
echo "check-format: every C file is clang-formatted"
