#!/bin/sh
# dtensor-run's job lifecycle, with runtime-fault's "hang" job (rank 1
# sleeps a minute outside any collective, the others wait for it):
#  1. SIGTERM to dtensor-run ends every rank within its 5 s grace period,
#     exit status 143, no segment left;
#  2. SIGKILL to dtensor-run: the ranks die with it;
#  3. with a 1 s timeout the waiting ranks give up naming rank 1, the hung
#     one.
# usage: signals.sh DTENSOR_RUN RUNTIME_FAULT
run=$1 prog=$2
name=$(basename "$prog")
out=$(mktemp)
ok=0
# Live ranks (zombies reparented to an init that does not reap are dead).
ranks() { ps -eo stat=,comm= | awk -v n="$name" '$1 !~ /^Z/ && $2 == n' | wc -l; }

"$run" -n 3 "$prog" hang >"$out" 2>&1 &
pid=$!
sleep 1
test "$(ranks)" -eq 3 || { echo "FAIL: $(ranks) ranks running, not 3"; ok=1; }
start=$(date +%s)
kill -TERM $pid
wait $pid
rc=$?
took=$(($(date +%s) - start))
cat "$out"
test $rc -eq 143 || { echo "FAIL: SIGTERM: exit status $rc, not 143"; ok=1; }
test $took -le 7 || { echo "FAIL: SIGTERM: took $took s"; ok=1; }
grep -q "Terminated; stopping the ranks" "$out" ||
  { echo "FAIL: SIGTERM: no message"; ok=1; }
test "$(ranks)" -eq 0 || { echo "FAIL: SIGTERM: $(ranks) ranks left"; ok=1; }
left=$(ls /dev/shm | grep -c "^dtensor-j$pid-")
test "$left" -eq 0 || { echo "FAIL: SIGTERM: $left segments left"; ok=1; }

"$run" -n 3 "$prog" hang >"$out" 2>&1 &
pid=$!
sleep 1
kill -KILL $pid
wait $pid
sleep 1
test "$(ranks)" -eq 0 || { echo "FAIL: SIGKILL: $(ranks) ranks left"; ok=1; }

DTENSOR_TIMEOUT_S=1 "$run" -n 3 "$prog" hang >"$out" 2>&1
rc=$?
cat "$out"
test $rc -ne 0 || { echo "FAIL: hang: the job succeeded"; ok=1; }
grep -q "waiting for rank 1 of a group of 3" "$out" ||
  { echo "FAIL: hang: rank 1 not named"; ok=1; }
test "$(ranks)" -eq 0 || { echo "FAIL: hang: $(ranks) ranks left"; ok=1; }
rm -f "$out"
exit $ok
