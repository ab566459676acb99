#!/usr/bin/env python3
"""Plan quality on a corpus (issue 20): for each program, the collectives
dtensor-spmd inserts and their modelled cost, with and without --cse first,
next to the collectives a person would write for it (its hand-written plan).
Prints one line per program and a summary: how many programs get the
hand-written collectives, and how many are unchanged by --cse.

    python3 bench/plans/run.py

Then the modelled cost of the default choice (the whole function's) next
to program order's (`choice=order`) and, where a function has at most 12
ops with a strategy, the exhaustive optimum (`choice=enumerate`: every
combination of every op's strategies), from dtensor-propagate's
`cost=true`; prints how many are optimal and the total cost ratios.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
OPT = os.path.join(ROOT, "build", "bin", "dtensor-opt")
INPUTS = os.path.join(ROOT, "test", "Transforms", "Inputs")
E2E = os.path.join(ROOT, "test", "e2e")

AR, AG, RS = "all_reduce", "all_gather", "reduce_scatter"

# (program, hand-written collectives in program order: what Megatron-style
# tensor, sequence and data parallelism need, and nothing for programs whose
# layouts line up)
CORPUS = [
    ("examples/megatron.mlir", [AR]),
    ("examples/mlp.mlir", [AR]),
    ("examples/attention.mlir", [AR]),
    ("examples/layernorm.mlir", []),
    (os.path.join(INPUTS, "gpt-block-tp.mlir"), [AR, AR]),
    (os.path.join(INPUTS, "gpt-block-dp-tp.mlir"), [AR, AR]),
    (os.path.join(INPUTS, "gpt-block-sp.mlir"), [AG, RS, AG, RS]),
    (os.path.join(E2E, "seq-parallel.mlir"), [RS]),
    (os.path.join(E2E, "bf16-megatron.mlir"), [AR]),
    (os.path.join(E2E, "reshape-norm.mlir"), []),
    ("bench/plans/program-order.mlir", [RS, RS]),
    (os.path.join(INPUTS, "mlp-7-blocks.mlir"), [AR] * 7),
]


def plan(path, cse):
    """(collective names in program order, modelled µs) from the report."""
    cmd = [OPT, path] + (["--cse"] if cse else []) + [
        "--dtensor-spmd", "--dtensor-report", "-o", os.devnull]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"dtensor-opt failed on {path}:\n{out.stderr}")
    names = re.findall(r"^    dtensor\.(\w+)\s", out.stderr, re.M)
    names = [n for n in names if n != "local_split"]
    us = sum(float(x) for x in
             re.findall(r"collectives, \d+ bytes moved, ([\d.]+) us",
                        out.stderr))
    return names, us


def modelled(path, choice):
    """dtensor-propagate's modelled cost of every function (µs), or None
    when the choice refuses the program (enumerate: too many ops)."""
    cmd = [OPT, path, "--dtensor-propagate=choice=%s cost=true" % choice,
           "-o", os.devnull]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        if choice == "enumerate":
            return None
        sys.exit(f"dtensor-opt failed on {path}:\n{out.stderr}")
    return sum(float(x) for x in
               re.findall(r"modelled cost ([\d.]+) us", out.stderr))


def main():
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    if not os.path.exists(OPT):
        sys.exit("build first: bash scripts/setup.sh")
    print(f"{'program':24} {'collectives (local splits aside)':44} "
          f"{'modelled us':>11}  hand-written  --cse")
    matched = stable = 0
    total = 0.0
    for rel, hand in CORPUS:
        path = rel if os.path.isabs(rel) else os.path.join(ROOT, rel)
        names, us = plan(path, False)
        cse_names, _ = plan(path, True)
        ok = names == hand
        same = names == cse_names
        matched += ok
        stable += same
        total += us
        shown = ", ".join(names) or "none"
        print(f"{os.path.basename(path):24} {shown[:44]:44} {us:11.3f}  "
              f"{'yes' if ok else 'NO (' + ', '.join(hand) + ')':12}  "
              f"{'same' if same else 'DIFFERENT: ' + ', '.join(cse_names)}")
    n = len(CORPUS)
    print(f"\n{matched} of {n} programs get the hand-written collectives; "
          f"{stable} of {n} the same with --cse; total modelled "
          f"{total:.3f} us (the meshes' link models)")
    print(f"\n{'program':24} {'whole us':>10} {'order us':>10} "
          f"{'optimum us':>11}  whole is")
    optimal = enumerable = 0
    sums = [0.0, 0.0, 0.0]
    for rel, _ in CORPUS:
        path = rel if os.path.isabs(rel) else os.path.join(ROOT, rel)
        whole = modelled(path, "whole")
        order = modelled(path, "order")
        best = modelled(path, "enumerate")
        verdict = "not enumerable (> 12 ops)"
        if best is not None:
            enumerable += 1
            ok = abs(whole - best) <= 1e-6 * max(1.0, best)
            optimal += ok
            verdict = "optimal" if ok else f"{whole / best:.3f} x optimum"
            sums[0] += whole
            sums[1] += order
            sums[2] += best
        shown = "-" if best is None else f"{best:.3f}"
        print(f"{os.path.basename(path):24} {whole:10.3f} {order:10.3f} "
              f"{shown:>11}  {verdict}")
    ratio = (lambda a, b: a / b if b else 1.0)
    print(f"\nthe whole-function choice is optimal on {optimal} of "
          f"{enumerable} enumerable programs; over them, total modelled "
          f"cost whole/optimum = {ratio(sums[0], sums[2]):.3f}, "
          f"program order/optimum = {ratio(sums[1], sums[2]):.3f}")
    # Random programs of at most 12 ops against their exhaustive optimum.
    out = subprocess.run(
        [sys.executable, os.path.join(INPUTS, "choice-exhaustive.py"),
         "--dtensor-opt", OPT, "--cases", "40", "--seed", "7"],
        capture_output=True, text=True)
    print("random programs: " + (out.stdout.strip() or out.stderr.strip()))


if __name__ == "__main__":
    main()
