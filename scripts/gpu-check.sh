#!/usr/bin/env bash
# The one prepared run on a machine with a GPU (issue 21), from the files
# scripts/gpu-pack.sh built where MLIR is (gpu-pack/, carried to the GPU
# machine; nothing here needs MLIR or a network). In under 5 minutes:
#
#  1. the runtime's CUDA calls on the device (runtime-cuda-test device);
#  2. the nccl backend's collectives on device buffers, one rank
#     (runtime-nccl-test; NCCL refuses two ranks on one GPU, so more ranks
#     need as many GPUs);
#  3. the examples and 60 random programs compiled for the GPU, each equal
#     to the single-device run on the CPU (dtensor-check on their bundles);
#  4. the benchmark: GEMM 4096^3 bf16, the Megatron MLP and a GPT block
#     (batch 8, seq 1024, hidden 2048) in bf16 and f32, the compiled step
#     (dtensor-check --repeat) against PyTorch eager on the same GPU
#     (bench/gpu/torch_gpu.py), as throughput ratios (targets: GEMM >= 0.9,
#     MLP and GPT >= 0.8).
#
# usage: scripts/gpu-check.sh [PACK]   (default: gpu-pack next to scripts/)
# Prints every figure; exits 1 if a check failed, 77 where no GPU is
# usable. Put the figures in bench/README.md.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
pack=${1:-$root/gpu-pack}
[ -x "$pack/bin/dtensor-check" ] || { echo "gpu-check: no $pack/bin/dtensor-check (run scripts/gpu-pack.sh where MLIR is)" >&2; exit 2; }
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
check=$pack/bin/dtensor-check
failed=0
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }

echo "== gpu-check: $(date -u +%FT%TZ), $(nproc) cores"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
  echo "(nvidia-smi not found)"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null ||
  echo "(no PyTorch)"

echo "== 1. runtime: CUDA calls on the device"
"$pack/bin/runtime-cuda-test" device
case $? in
  0) ;;
  77) echo "gpu-check: no usable GPU here; nothing else to check" >&2; exit 77 ;;
  *) failed=1 ;;
esac

echo "== 2. nccl backend: 1 rank, and 2 and 4 where there are as many GPUs"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
# N ranks of PROGRAM with the launcher's variables (dtensor-run's launcher
# is in an MLIR-linked tool; this is the same environment by hand).
ranks() { # N PROGRAM
  local n=$1 job pids=() k status=0
  job="j$$-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  for ((k = 0; k < n; ++k)); do
    env RANK=$k WORLD_SIZE=$n LOCAL_RANK=$k LOCAL_WORLD_SIZE=$n \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + $$ % 20000)) \
      DTENSOR_BACKEND=nccl DTENSOR_JOB=$job timeout 90 "$2" &
    pids+=($!)
  done
  for k in "${pids[@]}"; do wait "$k" || status=1; done
  return $status
}
if [ -x "$pack/bin/runtime-nccl-test" ]; then
  for n in 1 2 4; do
    if [ "$n" -le "${gpus:-1}" ] || [ "$n" = 1 ]; then
      echo "-- $n rank(s)"
      ranks "$n" "$pack/bin/runtime-nccl-test" || failed=1
    else
      echo "-- $n ranks: skipped, $gpus GPU(s) here (NCCL: one rank per GPU)"
    fi
  done
else
  echo "(runtime-nccl-test was not built: no NCCL where the pack was made)"
fi

echo "== 3. programs on the GPU against the CPU run"
for b in "$pack"/bundles/examples/*/; do
  printf '%s: ' "$(basename "$b")"
  timeout 120 "$check" "$b" | head -1 || failed=1
done
passed=0
total=0
for b in "$pack"/bundles/random/*/; do
  total=$((total + 1))
  if out=$(timeout 60 "$check" "$b" 2>&1) && echo "$out" | grep -q "equal to"; then
    passed=$((passed + 1))
  else
    failed=1
    echo "FAILED $(basename "$b"): $(echo "$out" | tail -2)"
  fi
done
echo "random programs: $passed of $total equal to the CPU run ($(elapsed) s so far)"

echo "== 4. benchmark (median step, ms; ratio = PyTorch time / compiled time)"
declare -A ours
for b in "$pack"/bundles/bench/*/; do
  name=$(basename "$b")
  out=$(timeout 180 "$check" --repeat 20 "$b" 2>&1)
  echo "$out" | head -1
  ours[$name]=$(echo "$out" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
  [ -n "${ours[$name]}" ] || { failed=1; echo "FAILED $name: $out"; }
done
torch_out=$(cd "$pack/bench" && timeout 180 python3 torch_gpu.py 20 2>&1) || {
  echo "PyTorch peers failed: $torch_out"
  failed=1
}
printf '%-10s %12s %12s %8s %8s\n' model compiled PyTorch ratio target
while read -r name med _; do
  [ -n "${ours[$name]:-}" ] || continue
  target=0.8
  [ "$name" = gemm-bf16 ] && target=0.9
  python3 -c "
o, t = float('${ours[$name]}'), float('$med')
print('%-10s %12.3f %12.3f %7.2fx %7.1fx' % ('$name', o, t, t / o, $target))"
done < <(echo "$torch_out" | grep -E '^(gemm|mlp|gpt)-')
echo "== gpu-check: $(elapsed) s, $([ $failed = 0 ] && echo 'every check passed' || echo 'SOME CHECKS FAILED')"
exit $failed
