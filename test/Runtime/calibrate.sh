#!/bin/sh
# dtensor-run --calibrate on a 2x2 mesh of 4 shm ranks writes a cost file
# with a line per collective and group of axes and the contraction rate;
# dtensor-plan reads it and
# prices with it; bad meshes are refused before any rank starts.
# Usage: calibrate.sh DTENSOR_RUN DTENSOR_PLAN
set -e
run=$1
plan=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$run" -n 4 --calibrate "$work/cal.txt" --mesh 2x2 > "$work/out.txt"
grep -q "^dtensor-calibration 1$" "$work/cal.txt"
grep -q "^mesh 2x2$" "$work/cal.txt"
for c in all_gather all_reduce reduce_scatter all_to_all; do
  for axes in 0 1 0,1; do
    grep -Eq "^$c $axes [0-9.e+-]+ [0-9.e+-]+$" "$work/cal.txt" ||
      { echo "no $c on axes $axes:"; cat "$work/cal.txt"; exit 1; }
  done
done
# The contraction rate, every rank computing at once: a call's overhead
# and a rate of multiply-adds (a 2-core VM gives 20-60 G/s).
grep -Eq "^contract [0-9.e+-]+ [0-9.e+-]+$" "$work/cal.txt" ||
  { echo "no contract line:"; cat "$work/cal.txt"; exit 1; }
grep -q "wrote $work/cal.txt" "$work/out.txt"
"$plan" plan --mesh 2x2 --shape 16x32 --from "[S0, S1]" --to "[S1, S0]" \
  --calibration "$work/cal.txt" > "$work/plan.txt"
grep -q "^total: " "$work/plan.txt"
# A 1-d mesh by default; a mesh that is not the rank count; a program.
"$run" -n 2 --calibrate "$work/cal2.txt" > /dev/null
grep -q "^mesh 2$" "$work/cal2.txt"
if "$run" -n 4 --calibrate "$work/x.txt" --mesh 2x4 2> "$work/err.txt"; then
  echo "a 2x4 mesh on 4 ranks was accepted"; exit 1
fi
grep -q "has 8 devices; calibrate it with -n 8" "$work/err.txt"
if "$plan" plan --mesh 4 --shape 8 --from "[S0]" --to "[R]" \
    --calibration "$work/cal.txt" 2> "$work/err.txt"; then
  echo "a 2x2 calibration was used for a 4 mesh"; exit 1
fi
grep -q "measured on a mesh of shape 2x2, not 4" "$work/err.txt"
echo "calibrate: ok"
