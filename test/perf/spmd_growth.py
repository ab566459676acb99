#!/usr/bin/env python3
"""A guard against quadratic steps in dtensor-spmd (issue 39), without
asserting on absolute wall-clock time: each step's time on an N-block
Megatron MLP (bench/compile/gen.py) at 4N blocks must stay under 10 times
its time at N (linear is 4x, n log n about 4.7x, quadratic 16x), the
fastest of three runs each, with 30 ms of slack for steps too short to
time. bucket-collectives took 0.05 s at 2000 blocks and 0.9 s at 8000
before it was made linear.

usage: spmd_growth.py DTENSOR_OPT GEN_PY [N]
"""
import os
import re
import subprocess
import sys
import tempfile


def step_times(opt, path):
    best = {}
    for _ in range(3):
        done = subprocess.run(
            [opt, path, "--pass-pipeline=builtin.module(dtensor-spmd{timing=true})",
             "-o", os.devnull], capture_output=True, text=True, check=True)
        for name, secs in re.findall(r"dtensor-spmd: (\S+) ([0-9.]+) s",
                                     done.stderr):
            best[name] = min(best.get(name, float("inf")), float(secs))
    return best


def main():
    opt, gen = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        for blocks in (n, 4 * n):
            path = os.path.join(tmp, f"b{blocks}.mlir")
            with open(path, "w") as f:
                subprocess.run([sys.executable, gen, str(blocks), "dtensor"],
                               stdout=f, check=True)
            times[blocks] = step_times(opt, path)
    bad = []
    for step, small in sorted(times[n].items()):
        big = times[4 * n].get(step, 0.0)
        ok = big <= 10 * small + 0.03
        print(f"{step:22s} {n:6d} blocks {small:7.3f} s  {4 * n:6d} blocks "
              f"{big:7.3f} s  x{big / max(small, 1e-6):5.1f}"
              f"{'' if ok else '  GROWS FASTER THAN n log n'}")
        if not ok:
            bad.append(step)
    if not times[n]:
        print("no step times: did dtensor-spmd{timing=true} change its output?")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
