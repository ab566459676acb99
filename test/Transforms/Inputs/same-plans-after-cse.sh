#!/bin/bash
# For each program given: the collectives dtensor-spmd inserts (the report's
# list, in program order) must be the same with --cse run first. Prints one
# line per program; exits 1 if any differs.
status=0
for f in "$@"; do
  plain=$(dtensor-opt "$f" --dtensor-spmd --dtensor-report -o /dev/null 2>&1 |
    awk '/^    dtensor\./ {print $1}' | tr '\n' ' ') || status=1
  cse=$(dtensor-opt "$f" --cse --dtensor-spmd --dtensor-report -o /dev/null 2>&1 |
    awk '/^    dtensor\./ {print $1}' | tr '\n' ' ') || status=1
  if [ "$plain" == "$cse" ]; then
    echo "same: $(basename "$f"): ${plain:-none}"
  else
    echo "DIFFERENT: $(basename "$f"): [$plain] vs --cse [$cse]"
    status=1
  fi
done
exit $status
