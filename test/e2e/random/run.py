#!/usr/bin/env python3
"""Differential end-to-end test on random programs.

Generates random single-device programs (chains of matmuls, batch matmuls,
elementwise ops, reductions, transposes, reshapes, broadcasts, slices,
concatenations, pads, index-reading generics, loops and calls, on f32
tensors, every fourth seed on i32 tensors compared exactly) with random
layouts on their arguments, results and intermediate values (annotations
and explicit redistributes, Partial sources included), on meshes of 2, 3,
4, 2x2 and 2x3 devices, and runs each with `dtensor-run -n N`: the program
partitioned by dtensor-spmd on N ranks must equal the unpartitioned program
on one (rtol 1e-4; dtensor-run compares every rank's result block).

usage: run.py --dtensor-run PATH [--cases 200] [--seed 1] [--jobs 2]
              [--out DIR] [--show N] [--backend shm|mpi]
       run.py --census DTENSOR_OPT [--cases 200] [--seed 1]
       run.py --gpu DTENSOR_OPT [--cases 60] [--seed 1] [--jobs 2]
       run.py --gpu-bundles DTENSOR_COMPILE --out DIR [--cases 60]

--gpu-bundles: each program on a mesh of one device as a GPU bundle in
DIR/case-K, for scripts/gpu-check.sh (dtensor-check on a GPU).

--gpu: each program on its mesh and on a mesh of one device per axis
through dtensor-spmd and the GPU target (dtensor-to-nvvm) down to sm_90
cubins assembled by CUDA's ptxas; every one must compile (exit 77 when no
ptxas is installed).

A failing case is kept in DIR (default: a temporary directory, printed) with
dtensor-run's output; rerun it with `dtensor-run -n N DIR/case-K.mlir`.
Exit status 1 if any case fails.
"""
import argparse
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

MESHES = [((2,), ["x"]), ((4,), ["x"]), ((2, 2), ["dp", "tp"]), ((3,), ["x"]),
          ((2, 3), ["dp", "tp"])]
DIMS = [2, 3, 4, 5, 6, 8, 10, 12]


def random_spec(rng, rank, mesh_rank, partial_ok=False):
    """A random sharding spec: each dim R or sharded over unused axes."""
    free = list(range(mesh_rank))
    rng.shuffle(free)
    dims = []
    for _ in range(rank):
        if free and rng.random() < 0.55:
            k = 1 if len(free) == 1 or rng.random() < 0.7 else 2
            axes, free = free[:k], free[k:]
            dims.append("S" + "".join(str(a) for a in axes))
        else:
            dims.append("R")
    text = "[" + ", ".join(dims) + "]"
    if partial_ok and free and rng.random() < 0.5:
        text += " Psum(%d)" % free[0]
    return text


class Program:
    def __init__(self, rng, mesh, names, dtype="f32"):
        self.rng = rng
        self.dt = dtype  # f32, or i32 (exact: wraparound is the same on every path)
        self.int = dtype == "i32"
        self.mesh = mesh
        self.names = names
        self.args = []  # (name, shape, spec)
        self.body = []
        self.helpers = []  # private functions main calls
        self.count = 0

    def fresh(self, stem):
        self.count += 1
        return "%%%s%d" % (stem, self.count)

    def layout(self, spec):
        return '#dtensor.layout<@m, "%s">' % spec

    def arg(self, shape):
        name = "%%a%d" % len(self.args)
        spec = random_spec(self.rng, len(shape), len(self.mesh))
        self.args.append((name, shape, spec))
        return name

    def ty(self, shape):
        return "tensor<%sx%s>" % ("x".join(str(d) for d in shape), self.dt)

    def op(self, name):
        """The arith op `name` (add, sub, mul, max) for the element type."""
        if self.int:
            return {"add": "arith.addi", "sub": "arith.subi",
                    "mul": "arith.muli", "max": "arith.maxsi"}[name]
        return {"add": "arith.addf", "sub": "arith.subf", "mul": "arith.mulf",
                "max": "arith.maximumf"}[name]

    def scalar(self, value):
        """A float literal as this type's literal (ints: truncated)."""
        if not self.int:
            return value
        if value == "lowest":
            return "-2147483648"
        return str(int(float(value)))

    def emit(self, line):
        self.body.append("  " + line)

    def empty(self, shape):
        e = self.fresh("e")
        self.emit("%s = tensor.empty() : %s" % (e, self.ty(shape)))
        return e

    def filled(self, shape, value):
        c = self.fresh("c")
        self.emit("%s = arith.constant %s : %s" % (c, self.scalar(value),
                                                   self.dt))
        f = self.fresh("f")
        self.emit("%s = linalg.fill ins(%s : %s) outs(%s : %s) -> %s"
                  % (f, c, self.dt, self.empty(shape), self.ty(shape),
                     self.ty(shape)))
        return f

    # ---- the steps: each takes (value, shape), returns the new pair ----

    def matmul(self, v, shape):
        m, k = shape
        n = self.rng.choice(DIMS)
        w = self.arg([k, n])
        if self.rng.random() < 0.25:
            init = self.arg([m, n])  # C + A B: a non-neutral init
        else:
            init = self.filled([m, n], "0.0")
        r = self.fresh("mm")
        self.emit("%s = linalg.matmul ins(%s, %s : %s, %s) outs(%s : %s) -> %s"
                  % (r, v, w, self.ty(shape), self.ty([k, n]), init,
                     self.ty([m, n]), self.ty([m, n])))
        return r, [m, n]

    def unary(self, v, shape):
        t = self.ty(shape)
        r = self.fresh("u")
        kind = self.rng.choice(["neg", "relu", "exp", "scale"])
        if self.int and kind in ("neg", "exp", "scale"):
            s = self.fresh("k")
            self.emit("%s = arith.constant dense<%d> : %s"
                      % (s, -1 if kind == "neg" else 3, t))
            self.emit("%s = arith.muli %s, %s : %s" % (r, v, s, t))
        elif kind == "neg":
            self.emit("%s = arith.negf %s : %s" % (r, v, t))
        elif kind == "exp":
            # exp of a scaled value, so chains stay in range.
            s = self.fresh("k")
            self.emit("%s = arith.constant dense<0.25> : %s" % (s, t))
            x = self.fresh("x")
            self.emit("%s = arith.mulf %s, %s : %s" % (x, v, s, t))
            self.emit("%s = math.exp %s : %s" % (r, x, t))
        elif kind == "relu":
            z = self.fresh("z")
            self.emit("%s = arith.constant dense<%s> : %s"
                      % (z, self.scalar("0.0"), t))
            self.emit("%s = %s %s, %s : %s" % (r, self.op("max"), v, z, t))
        else:
            s = self.fresh("k")
            self.emit("%s = arith.constant dense<0.5> : %s" % (s, t))
            self.emit("%s = arith.mulf %s, %s : %s" % (r, v, s, t))
        return r, shape

    def binary(self, v, shape):
        other = self.arg(list(shape)) if self.rng.random() < 0.7 else v
        op = self.rng.choice(["add", "sub", "mul"])
        r = self.fresh("b")
        t = self.ty(shape)
        self.emit("%s = linalg.%s ins(%s, %s : %s, %s) outs(%s : %s) -> %s"
                  % (r, op, v, other, t, t, self.empty(shape), t, t))
        return r, shape

    def transpose(self, v, shape):
        out = [shape[1], shape[0]]
        r = self.fresh("t")
        self.emit("%s = linalg.transpose ins(%s : %s) outs(%s : %s) "
                  "permutation = [1, 0]"
                  % (r, v, self.ty(shape), self.empty(out), self.ty(out)))
        return r, out

    def with_broadcast(self, v, red, shape, keep, d, op, stem):
        """linalg.<op>(v, broadcast of `red` (shape `keep`) along dim d)."""
        bc = self.fresh("bc")
        self.emit("%s = linalg.broadcast ins(%s : %s) outs(%s : %s) "
                  "dimensions = [%d]" % (bc, red, self.ty(keep),
                                         self.empty(shape), self.ty(shape), d))
        r = self.fresh(stem)
        t = self.ty(shape)
        self.emit("%s = linalg.%s ins(%s, %s : %s, %s) outs(%s : %s) -> %s"
                  % (r, op, v, bc, t, t, self.empty(shape), t, t))
        return r, shape

    def normalize(self, v, shape):
        """x - broadcast(reduce(x, d)), with sum or max."""
        d = self.rng.randrange(2)
        keep = [shape[1 - d]]
        kind = self.rng.choice(["sum", "max"])
        init = self.filled(keep, "0.0" if kind == "sum" else
                           ("lowest" if self.int else "0xFF800000"))
        red = self.fresh("r")
        comb = self.op("add" if kind == "sum" else "max")
        self.emit("%s = linalg.reduce ins(%s : %s) outs(%s : %s) "
                  "dimensions = [%d]" % (red, v, self.ty(shape), init,
                                         self.ty(keep), d))
        self.emit("  (%%in: %s, %%acc: %s) {" % (self.dt, self.dt))
        self.emit("    %%y = %s %%in, %%acc : %s" % (comb, self.dt))
        self.emit("    linalg.yield %%y : %s" % self.dt)
        self.emit("  }")
        return self.with_broadcast(v, red, shape, keep, d, "sub", "n")

    def reshape(self, v, shape):
        total = shape[0] * shape[1]
        rows = self.rng.choice([q for q in range(1, total + 1)
                                if total % q == 0 and q <= 16])
        out = [rows, total // rows]
        flat = self.fresh("flat")
        self.emit("%s = tensor.collapse_shape %s [[0, 1]] : %s into %s"
                  % (flat, v, self.ty(shape), self.ty([total])))
        r = self.fresh("rs")
        self.emit("%s = tensor.expand_shape %s [[0, 1]] output_shape [%d, %d] "
                  ": %s into %s" % (r, flat, out[0], out[1],
                                    self.ty([total]), self.ty(out)))
        return r, out

    def annotate(self, v, shape):
        spec = random_spec(self.rng, 2, len(self.mesh), partial_ok=True)
        r = self.fresh("an")
        t = self.ty(shape)
        self.emit('%s = "dtensor.annotate"(%s) {layout = %s} : (%s) -> %s'
                  % (r, v, self.layout(spec), t, t))
        return r, shape

    def slice(self, v, shape):
        """A static sub-block (tensor.extract_slice), at least 1x1."""
        sizes = [self.rng.randint(1, d) for d in shape]
        offsets = [self.rng.randint(0, d - s) for d, s in zip(shape, sizes)]
        r = self.fresh("sl")
        self.emit("%s = tensor.extract_slice %s[%d, %d] [%d, %d] [1, 1] : "
                  "%s to %s" % (r, v, offsets[0], offsets[1], sizes[0],
                                sizes[1], self.ty(shape), self.ty(sizes)))
        return r, sizes

    def concat(self, v, shape):
        """v and a new argument side by side along a random dim."""
        d = self.rng.randrange(2)
        other = list(shape)
        other[d] = self.rng.choice(DIMS)
        w = self.arg(other)
        out = list(shape)
        out[d] += other[d]
        r = self.fresh("cc")
        self.emit("%s = tensor.concat dim(%d) %s, %s : (%s, %s) -> %s"
                  % (r, d, v, w, self.ty(shape), self.ty(other),
                     self.ty(out)))
        return r, out

    def pad(self, v, shape):
        """Zeros around v (tensor.pad with static amounts)."""
        low = [self.rng.randint(0, 2) for _ in shape]
        high = [self.rng.randint(0, 2) for _ in shape]
        out = [d + lo + hi for d, lo, hi in zip(shape, low, high)]
        r = self.fresh("pd")
        self.emit("%s = tensor.pad %s low[%d, %d] high[%d, %d] {"
                  % (r, v, low[0], low[1], high[0], high[1]))
        self.emit("^bb0(%i: index, %j: index):")
        self.emit("  %%zero = arith.constant %s : %s"
                  % (self.scalar("0.0"), self.dt))
        self.emit("  tensor.yield %%zero : %s" % self.dt)
        self.emit("} : %s to %s" % (self.ty(shape), self.ty(out)))
        return r, out

    def from_index(self, value, out):
        """Body ops that turn index `value` into `out` of this type: ints
        directly, floats scaled by 1/64."""
        if self.int:
            self.emit("  %s = arith.index_cast %s : index to i32" % (out, value))
            return
        self.emit("  %%n = arith.index_cast %s : index to i64" % value)
        self.emit("  %fv = arith.sitofp %n : i64 to f32")
        self.emit("  %s64 = arith.constant 0.015625 : f32")
        self.emit("  %s = arith.mulf %%fv, %%s64 : f32" % out)

    def iota(self, v, shape):
        """v + (i * cols + j) / 64: a body that reads its global indices."""
        t = self.ty(shape)
        r = self.fresh("io")
        self.emit("%s = linalg.generic {indexing_maps = [affine_map<(i, j) -> "
                  "(i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = "
                  "[\"parallel\", \"parallel\"]} ins(%s : %s) outs(%s : %s) {"
                  % (r, v, t, self.empty(shape), t))
        self.emit("^bb0(%%in: %s, %%out: %s):" % (self.dt, self.dt))
        self.emit("  %i = linalg.index 0 : index")
        self.emit("  %j = linalg.index 1 : index")
        self.emit("  %%cols = arith.constant %d : index" % shape[1])
        self.emit("  %row = arith.muli %i, %cols : index")
        self.emit("  %lin = arith.addi %row, %j : index")
        self.from_index("%lin", "%g")
        self.emit("  %%y = %s %%in, %%g : %s" % (self.op("add"), self.dt))
        self.emit("  linalg.yield %%y : %s" % self.dt)
        self.emit("} -> %s" % t)
        return r, shape

    def weighted(self, v, shape):
        """x + broadcast(sum_k x[.., k] * (k + 1) / 64) along a random dim:
        a reduction whose body reads the global index it reduces over."""
        d = self.rng.randrange(2)
        keep = [shape[1 - d]]
        init = self.filled(keep, "0.0")
        red = self.fresh("w")
        out_map = "(i, j) -> (j)" if d == 0 else "(i, j) -> (i)"
        iters = '"reduction", "parallel"' if d == 0 else '"parallel", "reduction"'
        self.emit("%s = linalg.generic {indexing_maps = [affine_map<(i, j) -> "
                  "(i, j)>, affine_map<%s>], iterator_types = [%s]} ins(%s : "
                  "%s) outs(%s : %s) {" % (red, out_map, iters, v,
                                           self.ty(shape), init,
                                           self.ty(keep)))
        self.emit("^bb0(%%in: %s, %%acc: %s):" % (self.dt, self.dt))
        self.emit("  %%k = linalg.index %d : index" % d)
        self.emit("  %one = arith.constant 1 : index")
        self.emit("  %k1 = arith.addi %k, %one : index")
        self.from_index("%k1", "%g")
        self.emit("  %%p = %s %%in, %%g : %s" % (self.op("mul"), self.dt))
        self.emit("  %%y = %s %%p, %%acc : %s" % (self.op("add"), self.dt))
        self.emit("  linalg.yield %%y : %s" % self.dt)
        self.emit("} -> %s" % self.ty(keep))
        return self.with_broadcast(v, red, shape, keep, d, "add", "wa")

    def loop(self, v, shape):
        """scf.for of 2 or 3 steps carrying v: v = v * 0.5 + w."""
        t = self.ty(shape)
        w = self.arg(list(shape))
        lo, hi, st = self.fresh("lo"), self.fresh("hi"), self.fresh("st")
        self.emit("%s = arith.constant 0 : index" % lo)
        self.emit("%s = arith.constant %d : index" % (hi, self.rng.randint(2, 3)))
        self.emit("%s = arith.constant 1 : index" % st)
        half = self.fresh("h")
        self.emit("%s = arith.constant dense<%s> : %s"
                  % (half, "2" if self.int else "0.5", t))
        r = self.fresh("lp")
        self.emit("%s = scf.for %%it = %s to %s step %s iter_args(%%acc = %s) "
                  "-> (%s) {" % (r, lo, hi, st, v, t))
        self.emit("  %%m = %s %%acc, %s : %s" % (self.op("mul"), half, t))
        self.emit("  %%nx = %s %%m, %s : %s" % (self.op("add"), w, t))
        self.emit("  scf.yield %%nx : %s" % t)
        self.emit("}")
        return r, shape

    def call(self, v, shape):
        """A call of a private helper (x * x + x) defined beside main."""
        t = self.ty(shape)
        name = "@h%d" % len(self.helpers)
        self.helpers.append(
            "func.func private %s(%%x: %s) -> %s {\n"
            "  %%sq = %s %%x, %%x : %s\n"
            "  %%y = %s %%sq, %%x : %s\n"
            "  return %%y : %s\n}" % (name, t, t, self.op("mul"), t,
                                     self.op("add"), t, t))
        r = self.fresh("cl")
        self.emit("%s = func.call %s(%s) : (%s) -> %s" % (r, name, v, t, t))
        return r, shape

    def batched(self, v, shape):
        """[m, k] viewed as [b, m/b, k], a batch_matmul with a new [b, k, n]
        argument, and back to [m/b*b, n]."""
        m, k = shape
        bs = [b for b in (2, 3, 4) if m % b == 0]
        if not bs:
            return self.matmul(v, shape)
        b = self.rng.choice(bs)
        n = self.rng.choice(DIMS)
        x3 = [b, m // b, k]
        w = self.arg([b, k, n])
        e = self.fresh("x3")
        self.emit("%s = tensor.expand_shape %s [[0, 1], [2]] output_shape "
                  "[%d, %d, %d] : %s into %s" % (e, v, b, m // b, k,
                                                 self.ty(shape), self.ty(x3)))
        out3 = [b, m // b, n]
        init = self.filled(out3, "0.0")
        bm = self.fresh("bm")
        self.emit("%s = linalg.batch_matmul ins(%s, %s : %s, %s) outs(%s : %s) "
                  "-> %s" % (bm, e, w, self.ty(x3), self.ty([b, k, n]), init,
                             self.ty(out3), self.ty(out3)))
        r = self.fresh("bc2")
        self.emit("%s = tensor.collapse_shape %s [[0, 1], [2]] : %s into %s"
                  % (r, bm, self.ty(out3), self.ty([m, n])))
        return r, [m, n]

    def redistribute(self, v, shape):
        """An explicit redistribute, as written in a global program: the
        operand is taken in `src` (Partial too), the result is in `dst`."""
        src = random_spec(self.rng, 2, len(self.mesh), partial_ok=True)
        dst = random_spec(self.rng, 2, len(self.mesh))
        r = self.fresh("rd")
        t = self.ty(shape)
        self.emit('%s = "dtensor.redistribute"(%s) {src = %s, dst = %s} : '
                  '(%s) -> %s' % (r, v, self.layout(src), self.layout(dst),
                                  t, t))
        return r, shape

    def build(self, steps):
        shape = [self.rng.choice(DIMS), self.rng.choice(DIMS)]
        v = self.arg(shape)
        kinds = [self.matmul, self.unary, self.binary, self.transpose,
                 self.normalize, self.reshape, self.annotate,
                 self.redistribute, self.slice, self.concat, self.pad,
                 self.iota, self.weighted, self.loop, self.call,
                 self.batched]
        weights = [3, 2, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1]
        for _ in range(steps):
            step = self.rng.choices(kinds, weights)[0]
            v, shape = step(v, shape)
        result_spec = random_spec(self.rng, 2, len(self.mesh))
        lines = ['"dtensor.mesh"() {sym_name = "m", shape = array<i64: %s>, '
                 'axis_names = [%s]} : () -> ()'
                 % (", ".join(map(str, self.mesh)),
                    ", ".join('"%s"' % n for n in self.names))]
        params = ",\n    ".join("%s: %s {dtensor.layout = %s}"
                                % (n, self.ty(s), self.layout(sp))
                                for n, s, sp in self.args)
        lines.append("func.func @main(%s)\n    -> (%s {dtensor.layout = %s}) {"
                     % (params, self.ty(shape), self.layout(result_spec)))
        lines += self.body
        lines.append("  return %s : %s" % (v, self.ty(shape)))
        lines.append("}")
        lines += self.helpers
        return "\n".join(lines) + "\n"


def generate(seed):
    rng = random.Random(seed)
    mesh, names = MESHES[seed % len(MESHES)]
    p = Program(rng, mesh, names, "i32" if seed % 4 == 3 else "f32")
    text = p.build(rng.randint(2, 7))
    devices = 1
    for d in mesh:
        devices *= d
    return devices, "// random case, seed %d, mesh %s\n" % (
        seed, "x".join(map(str, mesh))) + text


def run_case(tool, out, seed, backend="shm"):
    devices, text = generate(seed)
    ok, output, path = run_program(tool, os.path.join(out, "case-%d.mlir" % seed),
                                   devices, text, backend)
    return seed, devices, ok, output, path


def run_program(tool, path, devices, text, backend="shm", extra=()):
    """Writes `text` to `path` and runs it with `dtensor-run -n devices`:
    (passed, output, path); a passing program's file is removed."""
    with open(path, "w") as f:
        f.write(text)
    try:
        p = subprocess.run([tool, "-n", str(devices), "--backend", backend,
                            *extra, path], capture_output=True, text=True,
                           timeout=300)
        output, ok = p.stdout + p.stderr, p.returncode == 0 and \
            "every rank's result equals the single-device run" in p.stdout
    except subprocess.TimeoutExpired:
        output, ok = "timed out after 300 s", False
    if ok:
        os.remove(path)
    return ok, output, path


SOURCE_CONSTRUCTS = [
    ("redistributes", '"dtensor.redistribute"'), ("annotations", '"dtensor.annotate"'),
    ("slices", "tensor.extract_slice"), ("concats", "tensor.concat"),
    ("pads", "tensor.pad"), ("index reads", "linalg.index"),
    ("loops", "scf.for"), ("calls", "func.call"),
    ("batch matmuls", "linalg.batch_matmul")]
OUTPUT_OPS = ["all_gather", "all_to_all", "all_reduce", "reduce_scatter",
              "local_split", "mesh_index"]


def census(tool, seeds):
    """What the programs hold, and how many partitioned programs contain
    each dtensor op (dtensor-opt --dtensor-spmd), without running them."""
    held = {name: 0 for name, _ in SOURCE_CONSTRUCTS}
    used = {op: 0 for op in OUTPUT_OPS}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "case.mlir")
        for seed in seeds:
            _, text = generate(seed)
            for name, pattern in SOURCE_CONSTRUCTS:
                held[name] += text.count(pattern)
            with open(path, "w") as f:
                f.write(text)
            out = subprocess.run([tool, path, "--dtensor-spmd"],
                                 capture_output=True, text=True, check=True)
            for op in OUTPUT_OPS:
                used[op] += '"dtensor.%s"' % op in out.stdout
    print("programs hold: " + ", ".join("%s %d" % kv for kv in held.items()))
    print("partitioned programs with: " +
          ", ".join("%s %d" % kv for kv in used.items()))


def one_device(text):
    """The program with every mesh shrunk to one device per axis."""
    def one(m):
        n = len([x for x in m.group(1).split(",") if x.strip()])
        return "shape = array<i64: %s>" % ", ".join(["1"] * n)
    return re.sub(r"shape = array<i64: ([0-9, ]+)>", one, text)


def gpu_case(tool, out, seed):
    """The program on its mesh (collectives on device buffers) and on one
    device, each down to cubins."""
    _, text = generate(seed)
    for suffix, program in (("", text), ("-one", one_device(text))):
        path = os.path.join(out, "gpu-case-%d%s.mlir" % (seed, suffix))
        with open(path, "w") as f:
            f.write(program)
        p = subprocess.run([tool, path, "--dtensor-spmd", "--dtensor-to-nvvm",
                            "-o", os.devnull], capture_output=True, text=True,
                           timeout=300)
        if p.returncode != 0:
            return seed, False, p.stderr, path
        os.remove(path)
    return seed, True, "", None


def gpu(tool, seeds, jobs, out):
    """Every program down to cubins; returns the exit status."""
    if not os.path.exists("/usr/local/cuda/bin/ptxas") and not shutil.which("ptxas"):
        print("random programs to cubins: skipped, no ptxas")
        return 77
    failed = []
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for seed, ok, err, path in pool.map(lambda s: gpu_case(tool, out, s), seeds):
            if not ok:
                failed.append((seed, err, path))
    for seed, err, path in failed[:5]:
        print("FAILED seed %d: %s\n  %s" % (seed, path, "\n  ".join(err.strip().splitlines()[:6])))
    print("random programs to cubins: %d of %d compiled" % (len(seeds) - len(failed), len(seeds)))
    return 1 if failed else 0


def bundles(compiler, seeds, jobs, out):
    """Each program on a mesh of one device as a GPU bundle in
    OUT/case-K (scripts/gpu-check.sh runs them with dtensor-check on a
    GPU); returns the exit status."""
    def one(seed):
        _, text = generate(seed)
        path = os.path.join(out, "case-%d.mlir" % seed)
        with open(path, "w") as f:
            f.write(one_device(text))
        p = subprocess.run([compiler, path, "--bundle", "--target", "cuda",
                            "-o", os.path.join(out, "case-%d" % seed)],
                           capture_output=True, text=True, timeout=300)
        return seed, p.returncode == 0, p.stderr
    failed = []
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for seed, ok, err in pool.map(one, seeds):
            if not ok:
                failed.append((seed, err))
    for seed, err in failed[:5]:
        print("FAILED seed %d:\n  %s" % (seed, "\n  ".join(err.strip().splitlines()[:6])))
    print("random programs as GPU bundles: %d of %d in %s"
          % (len(seeds) - len(failed), len(seeds), out))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtensor-run")
    ap.add_argument("--census", metavar="DTENSOR_OPT",
                    help="count what the programs hold and which collectives "
                         "their partitioned forms use, instead of running")
    ap.add_argument("--gpu", metavar="DTENSOR_OPT",
                    help="compile the programs for the GPU (one device) "
                         "down to cubins instead of running them")
    ap.add_argument("--gpu-bundles", metavar="DTENSOR_COMPILE",
                    help="write each program (one device) as a GPU bundle "
                         "into --out, for dtensor-check on a GPU")
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--backend", default="shm", choices=["shm", "mpi"])
    ap.add_argument("--show", type=int, default=5,
                    help="failures whose output is printed")
    args = ap.parse_args()
    if args.census:
        census(args.census, range(args.seed, args.seed + args.cases))
        return 0
    if args.gpu_bundles:
        if not args.out:
            ap.error("--gpu-bundles needs --out")
        os.makedirs(args.out, exist_ok=True)
        return bundles(args.gpu_bundles,
                       range(args.seed, args.seed + args.cases), args.jobs,
                       args.out)
    if not args.dtensor_run and not args.gpu:
        ap.error("--dtensor-run is required (or --census, --gpu, "
                 "--gpu-bundles)")
    out = args.out or tempfile.mkdtemp(prefix="dtensor-random-")
    os.makedirs(out, exist_ok=True)
    seeds = range(args.seed, args.seed + args.cases)
    if args.gpu:
        status = gpu(args.gpu, seeds, args.jobs, out)
        if status == 0 and not args.out:
            os.rmdir(out)
        elif status == 1:
            print("failing cases kept in %s" % out)
        return status
    failed = []
    per_mesh = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for seed, devices, ok, output, path in pool.map(
                lambda s: run_case(args.dtensor_run, out, s, args.backend),
                seeds):
            mesh = "x".join(map(str, MESHES[seed % len(MESHES)][0]))
            per_mesh.setdefault(mesh, [0, 0])[0 if ok else 1] += 1
            if not ok:
                failed.append((seed, devices, output, path))
    show_failures(failed, args.show, 12)
    print("random programs: %d cases (%s)" % (args.cases, mesh_summary(per_mesh)))
    return finish(failed, out, args.out)


def show_failures(failed, show, lines):
    """Prints the first `show` failures (seed, ranks, output, kept path)
    with the last `lines` lines of their output."""
    for seed, devices, output, path in failed[:show]:
        print("FAILED seed %d (%d ranks): %s" % (seed, devices, path))
        print("  " + "\n  ".join(output.strip().splitlines()[-lines:]))


def mesh_summary(per_mesh):
    """{mesh: [passed, failed]} as one line."""
    return ", ".join("mesh %s: %d passed, %d failed" % (d, c[0], c[1])
                     for d, c in sorted(per_mesh.items()))


def finish(failed, out, keep):
    """The exit status; a temporary `out` (not `keep`) is removed when
    nothing failed."""
    if failed:
        print("failing cases kept in %s" % out)
        return 1
    if not keep:
        os.rmdir(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
