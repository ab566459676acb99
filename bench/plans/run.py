#!/usr/bin/env python3
"""Plan quality on a corpus (issue 20): for each program, the collectives
dtensor-spmd inserts and their modelled cost, with and without --cse first,
next to the collectives a person would write for it (its hand-written plan).
Prints one line per program and a summary: how many programs get the
hand-written collectives, and how many are unchanged by --cse.

    python3 bench/plans/run.py

Not measured yet: the exhaustive optimum of each program (needs the
whole-program choice of issue 20 item 3, which enumerates strategies).
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
    print("exhaustive optimum per program: not computed yet (issue 20 "
          "item 3)")


if __name__ == "__main__":
    main()
