#!/usr/bin/env bash
# A compiled program under the launchers a cluster already has, without
# dtensor-run: Slurm's variables (each rank started by hand, as srun starts
# them: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, with the rendezvous and
# the job's token exported as docs/runtime.md says), and mpirun -n 4 on
# the mpi backend where OpenMPI is installed.
# usage: launchers.sh PROGRAM (a 4-rank compiled program, aot-megatron)
set -euo pipefail
program=$1
token="j$$-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
port=$((30000 + $$ % 20000))
pids=()
for k in 0 1 2 3; do
  env -u RANK -u WORLD_SIZE -u LOCAL_RANK SLURM_PROCID=$k SLURM_NTASKS=4 \
    SLURM_LOCALID=$k MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    DTENSOR_JOB=$token DTENSOR_SECRET=$secret DTENSOR_TIMEOUT_S=60 \
    "$program" > "/tmp/launchers-$$-$k.out" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
cat /tmp/launchers-$$-*.out | sed 's/^/slurm: /'
rm -f /tmp/launchers-$$-*.out /dev/shm/dtensor-$token-* 2>/dev/null || true
[ $status = 0 ] || { echo "launchers: a rank failed under Slurm's variables" >&2; exit 1; }
if command -v mpirun > /dev/null; then
  root=()
  [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
  mpirun -n 4 "${root[@]}" --oversubscribe -x DTENSOR_BACKEND=mpi "$program" |
    sed 's/^/mpirun: /'
else
  echo "mpirun: not installed, skipped"
fi
echo "launchers: every rank ran"
