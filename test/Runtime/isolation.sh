#!/bin/sh
# A 2-rank job of runtime-shm-isolation in MODE: "unlinked" and "guess" must succeed;
# the others must fail with EXPECTED in the output. Either way no segment
# of the job may be left in /dev/shm.
# usage: isolation.sh DTENSOR_RUN RUNTIME_SHM_ISOLATION MODE EXPECTED
run=$1 prog=$2 mode=$3 expected=$4
out=$(mktemp)
DTENSOR_TIMEOUT_S=3 "$run" -n 2 "$prog" "$mode" >"$out" 2>&1 &
pid=$!
wait $pid
rc=$?
cat "$out"
ok=0
if [ "$mode" = unlinked ] || [ "$mode" = guess ]; then
  test $rc -eq 0 || { echo "FAIL: the job failed"; ok=1; }
else
  test $rc -ne 0 || { echo "FAIL: the job succeeded"; ok=1; }
fi
grep -q "$expected" "$out" || { echo "FAIL: no '$expected'"; ok=1; }
# The job's own segments are all gone; one another user made (the
# foreign case plants it) is not the job's to remove: the test removes it.
left=$(find /dev/shm -maxdepth 1 -name "dtensor-j$pid-*" -user "$(id -u)" | wc -l)
test "$left" -eq 0 || { echo "FAIL: $left segments left"; ok=1; }
find /dev/shm -maxdepth 1 -name "dtensor-j$pid-*" -exec rm -f {} +
rm -f "$out"
exit $ok
