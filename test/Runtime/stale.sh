#!/bin/sh
# A job killed with SIGKILL while a group is being set up leaves the
# group's segment in /dev/shm (its creator waits for a rank that never
# comes; nobody removes the name). The next launch removes such segments
# of this user whose creator is gone, and no others.
# usage: stale.sh DTENSOR_RUN RUNTIME_SHM_ISOLATION
run=$1 prog=$2
DTENSOR_TIMEOUT_S=60 "$run" -n 2 "$prog" slow >/dev/null 2>&1 &
pid=$!
for i in $(seq 50); do
  ls /dev/shm | grep -q "^dtensor-j$pid-" && break
  sleep 0.1
done
ls /dev/shm | grep -q "^dtensor-j$pid-" || { echo "FAIL: no segment while set up"; kill -9 $pid; exit 1; }
kill -9 $pid
sleep 1
left=$(ls /dev/shm | grep -c "^dtensor-j$pid-")
test "$left" -ge 1 || { echo "FAIL: the killed job left nothing to clean (the test is moot)"; exit 1; }
# A segment of a live creator (this shell) must stay.
live=/dev/shm/dtensor-live-test-$$
: > "$live"
"$run" -n 1 true
left=$(ls /dev/shm | grep -c "^dtensor-j$pid-")
test -e "$live" || { echo "FAIL: a segment that is not stale was removed"; exit 1; }
rm -f "$live"
test "$left" -eq 0 || { echo "FAIL: $left stale segments left after the next launch"; exit 1; }
echo "stale segments: removed by the next launch"
