#!/usr/bin/env bash
# A job over two "nodes" on this host: two dtensor-run launchers, torchrun's
# flags, 2 ranks each, rendezvous over loopback, running a 4-rank compiled
# program (ranks 0-1 from node 0, 2-3 from node 1); then the refusals.
# usage: multinode.sh DTENSOR_RUN PROGRAM
set -euo pipefail
run=$1
program=$2
export DTENSOR_JOB="j$$-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
export DTENSOR_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
port=$((30000 + ($$ * 7) % 20000))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for node in 0 1; do
  "$run" --nnodes 2 --node-rank $node --nproc-per-node 2 --master-addr 127.0.0.1 \
    --master-port $port --timeout 60 "$program" > "$out/node$node" 2>&1 &
  eval "pid$node=\$!"
done
status=0
wait "$pid0" || status=1
wait "$pid1" || status=1
sed 's/^/node 0: /' "$out/node0"
sed 's/^/node 1: /' "$out/node1"
[ $status = 0 ] || { echo "multinode: a launcher failed" >&2; exit 1; }
for r in 0 1; do grep -q "^rank $r: 0 of" "$out/node0" || { echo "multinode: node 0 lacks rank $r" >&2; exit 1; }; done
for r in 2 3; do grep -q "^rank $r: 0 of" "$out/node1" || { echo "multinode: node 1 lacks rank $r" >&2; exit 1; }; done
# Refusals: a node rank out of range; no job token.
if "$run" --nnodes 2 --node-rank 2 --master-addr 127.0.0.1 --master-port $port -n 2 true 2> "$out/err"; then exit 1; fi
grep -q "node-rank 2 is not below --nnodes 2" "$out/err"
if env -u DTENSOR_JOB "$run" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port $port -n 2 true 2> "$out/err"; then exit 1; fi
grep -q "needs DTENSOR_JOB and DTENSOR_SECRET exported" "$out/err"
echo "multinode: 2 nodes x 2 ranks ran, refusals said why"
