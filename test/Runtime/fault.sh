#!/bin/sh
# A job whose rank dies: it must fail, name the rank (`expected`), leave no
# rank process and none of its own shared-memory segments. Segments are
# named /dtensor-j<pid of dtensor-run>-..., so tests running alongside do
# not disturb the count.
# usage: fault.sh DTENSOR_RUN RUNTIME_FAULT MODE EXPECTED
run=$1 prog=$2 mode=$3 expected=$4
out=$(mktemp)
"$run" -n 3 "$prog" $mode >"$out" 2>&1 &
pid=$!
wait $pid
rc=$?
cat "$out"
left=$(ls /dev/shm | grep -c "^dtensor-j$pid-")
procs=$(pgrep -x "$(basename "$prog")" | wc -l)
ok=0
test $rc -ne 0 || { echo "FAIL: the job succeeded"; ok=1; }
grep -q "$expected" "$out" || { echo "FAIL: no '$expected'"; ok=1; }
test "$left" -eq 0 || { echo "FAIL: $left segments left"; ok=1; }
test "$procs" -eq 0 || { echo "FAIL: $procs rank processes left"; ok=1; }
rm -f "$out"
exit $ok
