#!/usr/bin/env python3
"""Bad input must give a diagnostic, never a crash or a wrong module.

Takes the dtensor programs of the lit suite and the examples (each
`// -----` chunk that mentions dtensor), mutates each copy a few times
(numbers, layout specs, characters inside strings, element types,
tensor shapes, mesh arrays, op names, deleted and repeated lines), and runs `dtensor-opt` on it with a
random pass or pipeline of ours. Every run must end in one of two ways:

- exit 1 with an error that carries a source location
  (`file:line:col` or `loc(...)`) or names the tool;
- exit 0 with a module that parses again and passes `dtensor-verify`.

Anything else fails the test: a signal (crash), another exit status, a
timeout, an error without a location, or an output that does not verify.
A failing input is kept in DIR (default: a temporary directory, printed),
its first line the command's arguments.

usage: mutate.py --dtensor-opt PATH [--cases 200] [--seed 1] [--out DIR]
"""
import argparse
import glob
import os
import random
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PIPELINES = [
    ["--dtensor-verify"],
    ["--dtensor-propagate"],
    ["--dtensor-propagate=why=true", "--dtensor-partition",
     "--dtensor-lower-redistribute=strategy=greedy"],
    ["--dtensor-partition"],
    ["--dtensor-lower-redistribute"],
    ["--dtensor-spmd"],
    ["--dtensor-spmd=strict=true"],
    ["--dtensor-spmd", "--dtensor-report"],
    ["--dtensor-spmd", "--dtensor-lower-to-runtime"],
    ["--dtensor-import-shard"],
    ["--dtensor-import-gspmd"],
]

SPECS = ["R", "S0", "S1", "S01", "S10", "S2", "S00", "S", "S(x)", "S(dp)",
         "S(tp)", "S(nope)", "Psum(0)", "Pmax(1)", "S0 S1", "", "[", "]"]


def corpus():
    files = sorted(glob.glob(os.path.join(ROOT, "test", "**", "*.mlir"),
                             recursive=True) +
                   glob.glob(os.path.join(ROOT, "examples", "*.mlir")))
    chunks = []
    for path in files:
        with open(path) as f:
            text = f.read()
        for chunk in text.split("// -----"):
            if "dtensor" in chunk:
                # Drop RUN/CHECK/expected-* comments: only the IR matters.
                chunks.append(re.sub(r"^\s*//.*$", "", chunk, flags=re.M))
    return chunks


def replace(text, match, new):
    return text[:match.start()] + new + text[match.end():]


STRING_CHARS = "[](){},=<>:; 0123456789SRPdptmxsumaxvg-_.#@"


def mutate_string(rng, text):
    """A character deleted, inserted or replaced inside a string literal
    (layout specs, mhlo.sharding strings, axis names)."""
    found = list(re.finditer(r'"([^"\\\n]*)"', text))
    if not found:
        return text
    m = rng.choice(found)
    body = m.group(1)
    i = rng.randrange(len(body) + 1)
    op = rng.randrange(3)
    if op == 0 and body:
        i = min(i, len(body) - 1)
        body = body[:i] + body[i + 1:]
    elif op == 1:
        body = body[:i] + rng.choice(STRING_CHARS) + body[i:]
    elif body:
        i = min(i, len(body) - 1)
        body = body[:i] + rng.choice(STRING_CHARS) + body[i + 1:]
    return text[:m.start()] + '"' + body + '"' + text[m.end():]


def mutate(rng, text):
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(10)
        if kind == 0:
            found = list(re.finditer(r"\b\d+\b", text))
            if found:
                text = replace(text, rng.choice(found), str(rng.choice(
                    [0, 1, 2, 3, 5, 7, 8, 16, -1, 1 << 40])))
        elif kind == 1:
            found = list(re.finditer(
                r"\b(R|S\d+|S\([a-z0-9_]+\)|P[a-z]+\(\d*\))", text))
            if found:
                text = replace(text, rng.choice(found), rng.choice(SPECS))
        elif kind == 2:
            lines = text.split("\n")
            if len(lines) > 2:
                del lines[rng.randrange(len(lines))]
                text = "\n".join(lines)
        elif kind == 3:
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif kind == 4:
            text = text.replace(rng.choice(["f32", "f64", "i32", "index"]),
                                rng.choice(["f16", "i64", "bf16", "f32",
                                            "index", "i1"]), 1)
        elif kind == 5:
            found = list(re.finditer(r"tensor<([0-9?x]+)x(\w+)>", text))
            if found:
                m = rng.choice(found)
                dims = m.group(1).split("x")
                rng.shuffle(dims)
                if rng.random() < 0.3:
                    dims.append("4")
                if rng.random() < 0.2:
                    dims = ["?" if rng.random() < 0.5 else d for d in dims]
                text = replace(text, m, "tensor<%sx%s>" % ("x".join(dims),
                                                            m.group(2)))
        elif kind == 6:
            found = list(re.finditer(r"array<i64:[^>]*>", text))
            if found:
                vals = [str(rng.choice([0, 1, 2, 3, 4, -1]))
                        for _ in range(rng.randint(0, 3))]
                text = replace(text, rng.choice(found), "array<i64%s>" % (
                    ": " + ", ".join(vals) if vals else ""))
        elif kind >= 8:
            text = mutate_string(rng, text)
        else:
            found = list(re.finditer(
                r"\b(linalg\.\w+|arith\.\w+|tensor\.\w+|dtensor\.\w+)", text))
            if len(found) >= 2:
                a, b = rng.sample(found, 2)
                text = replace(text, a, b.group(0))
    return text


def check(opt, work, text, pipeline):
    """The problem with one run, or None."""
    src, out = os.path.join(work, "in.mlir"), os.path.join(work, "out.mlir")
    with open(src, "w") as f:
        f.write(text)
    try:
        p = subprocess.run([opt, src] + pipeline + ["-o", out],
                           capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "no answer within 120 s"
    if p.returncode < 0 or p.returncode >= 128:
        return "killed by a signal (exit %d): %s" % (p.returncode, p.stderr[-600:])
    if p.returncode == 1:
        if "error" not in p.stderr:
            return "exit 1 without an error: " + p.stderr[-600:]
        if not re.search(r"(in\.mlir:\d+:\d+|loc\(|dtensor-opt:)", p.stderr):
            return "an error without a location: " + p.stderr[-600:]
        return None
    if p.returncode != 0:
        return "exit %d: %s" % (p.returncode, p.stderr[-600:])
    q = subprocess.run([opt, out, "--dtensor-verify", "-o", os.devnull],
                       capture_output=True, text=True, timeout=120)
    if q.returncode != 0:
        return "exit 0, but the output does not verify: " + q.stderr[-600:]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtensor-opt", required=True)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    seeds = corpus()
    if not seeds:
        sys.exit("no dtensor programs found under %s" % ROOT)
    work = tempfile.mkdtemp(prefix="dtensor-fuzz-")
    out = args.out or work
    os.makedirs(out, exist_ok=True)
    failed = accepted = 0
    for i in range(args.cases):
        text = mutate(rng, rng.choice(seeds))
        pipeline = rng.choice(PIPELINES)
        problem = check(args.dtensor_opt, work, text, pipeline)
        if problem is None:
            accepted += os.path.exists(os.path.join(work, "out.mlir"))
        else:
            failed += 1
            case = os.path.join(out, "case-%d.mlir" % i)
            with open(case, "w") as f:
                f.write("// " + " ".join(pipeline) + "\n" + text)
            print("case %d (%s): %s" % (i, case, problem))
        try:
            os.remove(os.path.join(work, "out.mlir"))
        except FileNotFoundError:
            pass
    print("%d mutated programs, %d compiled, %d rejected with a diagnostic, "
          "%d failed" % (args.cases, accepted, args.cases - accepted - failed,
                         failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
