#!/usr/bin/env python3
"""Differential test of the linearity analysis on random linalg bodies.

Each program makes one or two Partial sums the natural way (a matmul whose
contraction dim is split over a mesh axis, so every device holds a real,
non-zero share) and feeds them, with a replicated or sharded tensor, to a
random linalg.generic: elementwise, or reducing rows, columns or
everything, with a random scalar body (sums, differences, products with
constants on either side, squares, divisions by constants or by positive
expressions, exp, log, tanh, selects on comparisons, linalg.index) and a
random accumulation (sum, difference, scaled sum, product, max). Half of
the programs feed the result to a second random body. The partitioned
program may keep a Partial through a body only where the body is linear in
it; `dtensor-run -n N` checks every rank's result against the single-device
run, so a body wrongly judged linear is a mismatch. Meshes: 2, 4 and 2x2;
elements f64 (three in four) and f32.

usage: bodies.py --dtensor-run PATH [--dtensor-opt PATH] [--cases 2000]
                 [--seed 1] [--jobs 2] [--out DIR] [--show N]

With --dtensor-opt, it also counts the programs whose partitioned form
computes a body on Partial shares (no collective before the first
linalg.generic): those are the ones where the analysis said "linear".
A failing case is kept in DIR with dtensor-run's output; exit status 1 if
any case fails.
"""
import argparse
import concurrent.futures
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import finish, mesh_summary, run_program, show_failures  # noqa: E402

MESHES = [((2,), ["x"]), ((4,), ["x"]), ((2, 2), ["dp", "tp"])]
DIMS = [2, 3, 4, 5, 6, 8]
CONSTANTS = ["0.0", "1.0", "-1.0", "0.5", "2.0", "-1.5", "3.0"]


class Body:
    """The scalar ops of one linalg body, as text lines."""

    # Op weights: any mix, or near-linear bodies (the ones an analysis
    # may wrongly call linear: one square or exp among sums and scalings).
    KINDS = ["add", "sub", "mul", "square", "neg", "div", "exp", "log",
             "tanh", "select"]
    ANY = [3, 2, 4, 2, 1, 2, 1, 1, 1, 2]
    NEAR_LINEAR = [4, 3, 4, 0.7, 2, 3, 0.3, 0.3, 0.3, 2]

    def __init__(self, rng, dt, args, acc):
        self.rng, self.dt, self.args, self.acc = rng, dt, args, acc
        self.weights = self.ANY if rng.random() < 0.5 else self.NEAR_LINEAR
        self.constant_factor = 0.5 if self.weights is self.ANY else 0.85
        self.lines = []
        self.count = 0

    def fresh(self):
        self.count += 1
        return "%%s%d" % self.count

    def emit(self, text):
        name = self.fresh()
        self.lines.append("    %s = %s" % (name, text))
        return name

    def const(self, value=None):
        value = value or self.rng.choice(CONSTANTS)
        return self.emit("arith.constant %s : %s" % (value, self.dt))

    def index(self):
        d = self.rng.randint(0, 1)
        i = self.emit("linalg.index %d : index" % d)
        n = self.emit("arith.index_cast %s : index to i64" % i)
        return self.emit("arith.sitofp %s : i64 to %s" % (n, self.dt))

    def leaf(self):
        r = self.rng.random()
        if r < 0.6:
            return self.rng.choice(self.args)
        return self.const() if r < 0.9 else self.index()

    def positive(self, depth):
        """e * e + 1: a value > 0 whatever e is."""
        e = self.expr(depth)
        sq = self.emit("arith.mulf %s, %s : %s" % (e, e, self.dt))
        return self.emit("arith.addf %s, %s : %s"
                         % (sq, self.const("1.0"), self.dt))

    def expr(self, depth):
        """A random expression of the block arguments, `depth` ops deep at
        most; exp's argument is at most one op deep, so values stay far
        from overflow."""
        if depth <= 0 or self.rng.random() < 0.2:
            return self.leaf()
        kind = self.rng.choices(self.KINDS, self.weights)[0]
        t = self.dt
        if kind in ("add", "sub", "mul"):
            a, b = self.expr(depth - 1), self.expr(depth - 1)
            if kind == "mul" and self.rng.random() < self.constant_factor:
                # a constant factor on a random side
                c = self.const()
                a, b = (c, a) if self.rng.random() < 0.5 else (a, c)
            return self.emit("arith.%sf %s, %s : %s" % (kind, a, b, t))
        if kind == "square":
            a = self.expr(depth - 1)
            return self.emit("arith.mulf %s, %s : %s" % (a, a, t))
        if kind == "neg":
            return self.emit("arith.negf %s : %s" % (self.expr(depth - 1), t))
        if kind == "div":
            a = self.expr(depth - 1)
            r = self.rng.random()
            if r < self.constant_factor:
                den = self.const(self.rng.choice(["2.0", "-4.0", "0.25"]))
            else:
                den = self.positive(depth - 1)
            return self.emit("arith.divf %s, %s : %s" % (a, den, t))
        if kind == "exp":
            return self.emit("math.exp %s : %s" % (self.expr(min(depth - 1, 1)), t))
        if kind == "log":
            arg = self.positive(depth - 1) if self.rng.random() < 0.6 else \
                self.emit("math.exp %s : %s" % (self.expr(min(depth - 1, 1)), t))
            return self.emit("math.log %s : %s" % (arg, t))
        if kind == "tanh":
            return self.emit("math.tanh %s : %s" % (self.expr(depth - 1), t))
        a, b = self.expr(depth - 1), self.expr(depth - 1)
        pred = self.rng.choice(["ogt", "olt", "oge"])
        lhs = self.expr(depth - 1)
        rhs = self.const() if self.rng.random() < 0.5 else self.expr(depth - 1)
        cond = self.emit("arith.cmpf %s, %s, %s : %s" % (pred, lhs, rhs, t))
        return self.emit("arith.select %s, %s, %s : %s" % (cond, a, b, t))

    def accumulate(self, e):
        """acc (+) e for a reduction."""
        t = self.dt
        kind = self.rng.choices(["add", "sub", "scaled", "mul", "max"],
                                [6, 1, 1, 1, 1])[0]
        if kind == "add":
            a, b = (self.acc, e) if self.rng.random() < 0.5 else (e, self.acc)
            return self.emit("arith.addf %s, %s : %s" % (a, b, t))
        if kind == "sub":
            return self.emit("arith.subf %s, %s : %s" % (self.acc, e, t))
        if kind == "scaled":
            s = self.emit("arith.mulf %s, %s : %s"
                          % (self.acc, self.const("0.5"), t))
            return self.emit("arith.addf %s, %s : %s" % (s, e, t))
        if kind == "mul":
            return self.emit("arith.mulf %s, %s : %s" % (self.acc, e, t))
        return self.emit("arith.maximumf %s, %s : %s" % (self.acc, e, t))


class Program:
    def __init__(self, rng, mesh, names, dt):
        self.rng, self.mesh, self.names, self.dt = rng, mesh, names, dt
        self.args = []  # (name, shape, spec)
        self.lines = []
        self.count = 0

    def fresh(self, stem):
        self.count += 1
        return "%%%s%d" % (stem, self.count)

    def ty(self, shape):
        return "tensor<%s%s>" % ("".join("%dx" % d for d in shape), self.dt)

    def layout(self, spec):
        return '#dtensor.layout<@m, "%s">' % spec

    def arg(self, shape, spec):
        name = "%%a%d" % len(self.args)
        self.args.append((name, shape, spec))
        return name

    def emit(self, line):
        self.lines.append("  " + line)

    def filled(self, shape, value):
        c, e, f = self.fresh("c"), self.fresh("e"), self.fresh("f")
        self.emit("%s = arith.constant %s : %s" % (c, value, self.dt))
        self.emit("%s = tensor.empty() : %s" % (e, self.ty(shape)))
        self.emit("%s = linalg.fill ins(%s : %s) outs(%s : %s) -> %s"
                  % (f, c, self.dt, e, self.ty(shape), self.ty(shape)))
        return f

    def other_spec(self, axis):
        """A spec for a non-Partial operand: R, or a dim split over the
        axis that is not pending (2x2) or over the pending one."""
        if self.rng.random() < 0.5:
            return "[R, R]"
        a = self.rng.randrange(len(self.mesh))
        return "[S%d, R]" % a if self.rng.random() < 0.5 else "[R, S%d]" % a

    def partial(self, m, n, axis):
        """x @ w with w's rows (the contraction) split over `axis`."""
        k = self.rng.choice([8, 12, 16, 32])
        x = self.arg([m, k], "[R, R]" if len(self.mesh) == 1 or
                     self.rng.random() < 0.5 else "[S%d, R]" % (1 - axis))
        w = self.arg([k, n], "[S%d, R]" % axis)
        r = self.fresh("p")
        self.emit("%s = linalg.matmul ins(%s, %s : %s, %s) outs(%s : %s) -> %s"
                  % (r, x, w, self.ty([m, k]), self.ty([k, n]),
                     self.filled([m, n], "0.0"), self.ty([m, n]),
                     self.ty([m, n])))
        if self.rng.random() < 0.2:
            return r
        # Pinned Partial: otherwise the cost model often gathers w instead,
        # and the body never sees a Partial.
        a = self.fresh("an")
        self.emit('%s = "dtensor.annotate"(%s) {layout = %s} : (%s) -> %s'
                  % (a, r, self.layout("[R, R] Psum(%d)" % axis),
                     self.ty([m, n]), self.ty([m, n])))
        return a

    def generic(self, inputs, shape):
        """A random generic over `inputs` (each of `shape`, 2-d): its
        result and the result's shape."""
        m, n = shape
        kind = self.rng.choice(["elementwise", "rows", "cols", "all"])
        out_shape, out_map, iters = {
            "elementwise": ([m, n], "(i, j)", ["parallel", "parallel"]),
            "rows": ([m], "(i)", ["parallel", "reduction"]),
            "cols": ([n], "(j)", ["reduction", "parallel"]),
            "all": ([], "()", ["reduction", "reduction"]),
        }[kind]
        reads_acc = kind != "elementwise" or self.rng.random() < 0.3
        if kind != "elementwise" and self.rng.random() < 0.2:
            init = self.arg(out_shape, "[%s]" % ", ".join(["R"] * len(out_shape)))
        elif reads_acc:
            init = self.filled(out_shape, self.rng.choice(["0.0", "0.0", "1.0", "-2.0"]))
        else:
            init = self.fresh("e")
            self.emit("%s = tensor.empty() : %s" % (init, self.ty(out_shape)))
        names = ["%%in%d" % i for i in range(len(inputs))]
        body = Body(self.rng, self.dt, names, "%acc")
        e = body.expr(self.rng.randint(1, 4))
        y = body.accumulate(e) if reads_acc else e
        maps = ", ".join(["affine_map<(i, j) -> (i, j)>"] * len(inputs) +
                         ["affine_map<(i, j) -> %s>" % out_map])
        r = self.fresh("g")
        self.emit("%s = linalg.generic {indexing_maps = [%s], iterator_types "
                  "= [%s]} ins(%s : %s) outs(%s : %s) {"
                  % (r, maps, ", ".join('"%s"' % it for it in iters),
                     ", ".join(inputs), ", ".join([self.ty(shape)] * len(inputs)),
                     init, self.ty(out_shape)))
        self.lines.append("  ^bb0(%s, %%acc: %s):" % (
            ", ".join("%s: %s" % (a, self.dt) for a in names), self.dt))
        self.lines += body.lines
        self.lines.append("    linalg.yield %s : %s" % (y, self.dt))
        self.emit("} -> %s" % self.ty(out_shape))
        return r, out_shape

    def build(self):
        m, n = self.rng.choice(DIMS), self.rng.choice(DIMS)
        axis = self.rng.randrange(len(self.mesh))
        inputs = [self.partial(m, n, axis)]
        if self.rng.random() < 0.4:
            inputs.append(self.partial(m, n, axis))
        if self.rng.random() < 0.5:
            inputs.append(self.arg([m, n], self.other_spec(axis)))
        self.rng.shuffle(inputs)
        v, shape = self.generic(inputs, [m, n])
        if len(shape) == 2 and self.rng.random() < 0.5:
            more = [v] + ([self.arg(shape, self.other_spec(axis))]
                          if self.rng.random() < 0.5 else [])
            v, shape = self.generic(more, shape)
        lines = ['"dtensor.mesh"() {sym_name = "m", shape = array<i64: %s>, '
                 'axis_names = [%s]} : () -> ()'
                 % (", ".join(map(str, self.mesh)),
                    ", ".join('"%s"' % x for x in self.names))]
        params = ",\n    ".join("%s: %s {dtensor.layout = %s}"
                                % (a, self.ty(s), self.layout(sp))
                                for a, s, sp in self.args)
        lines.append("func.func @main(%s) -> %s {" % (params, self.ty(shape)))
        lines += self.lines
        lines.append("  return %s : %s" % (v, self.ty(shape)))
        lines.append("}")
        return "\n".join(lines) + "\n"


def generate(seed):
    rng = random.Random(seed)
    mesh, names = MESHES[seed % len(MESHES)]
    dt = "f32" if seed % 4 == 3 else "f64"
    devices = 1
    for d in mesh:
        devices *= d
    text = Program(rng, mesh, names, dt).build()
    return devices, "// random body, seed %d, mesh %s, %s\n%s" % (
        seed, "x".join(map(str, mesh)), dt, text)


MATMUL_K = re.compile(r"linalg\.matmul ins\([^:]*: tensor<\d+x(\d+)x")


def kept_partial(opt, path, text):
    """Whether the partitioned program computes the first body on Partial
    shares: its first matmul contracts a split dim (fewer rows than in
    the source) and no all_reduce or reduce_scatter comes before the first
    linalg.generic."""
    p = subprocess.run([opt, path, "--dtensor-spmd"], capture_output=True,
                       text=True, timeout=300)
    if p.returncode != 0:
        return None
    out = p.stdout
    local, source = MATMUL_K.search(out), MATMUL_K.search(text)
    if not local or not source or int(local.group(1)) >= int(source.group(1)):
        return False
    g = out.find("linalg.generic")
    c = min([i for i in (out.find('"dtensor.all_reduce"'),
                         out.find('"dtensor.reduce_scatter"')) if i >= 0],
            default=len(out))
    return 0 <= g < c


def case(args, out, seed):
    devices, text = generate(seed)
    path = os.path.join(out, "body-%d.mlir" % seed)
    kept = None
    if args.dtensor_opt:
        with open(path, "w") as f:
            f.write(text)
        kept = kept_partial(args.dtensor_opt, path, text)
    ok, output, path = run_program(args.dtensor_run, path, devices, text)
    return seed, devices, ok, kept, output, path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtensor-run", required=True)
    ap.add_argument("--dtensor-opt")
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--show", type=int, default=5)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="dtensor-bodies-")
    os.makedirs(out, exist_ok=True)
    failed, per_mesh, kept = [], {}, [0, 0]
    seeds = range(args.seed, args.seed + args.cases)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for seed, devices, ok, k, output, path in pool.map(
                lambda s: case(args, out, s), seeds):
            mesh = "x".join(map(str, MESHES[seed % len(MESHES)][0]))
            per_mesh.setdefault(mesh, [0, 0])[0 if ok else 1] += 1
            if k is not None:
                kept[0 if k else 1] += 1
            if not ok:
                failed.append((seed, devices, output, path))
    show_failures(failed, args.show, 6)
    print("random bodies over Partial operands: %d programs, %d mismatches "
          "(%s)" % (args.cases, len(failed), mesh_summary(per_mesh)))
    if args.dtensor_opt:
        print("bodies computed on Partial shares (judged linear): %d; "
              "reduced before the body: %d" % (kept[0], kept[1]))
    return finish(failed, out, args.out)

if __name__ == "__main__":
    sys.exit(main())
