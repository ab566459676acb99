"""Compiled programs against numpy: each program is compiled by the whole
pipeline (dtensor-spmd, dtensor-to-llvm), run by dtensor-run on its mesh's
ranks, and its results compared with what numpy computes from the same
inputs -- an independent reference, where dtensor-run's own check compares
with our single-device compile, which shares the code generation. Each
case also says which runtime call its contraction must become (or that it
must stay generated loops), read from the lowered module, so a case that
silently fell back to loops fails too."""

import math
import os
import re
import subprocess

import numpy as np
import pytest

import dtensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-9, 10, size=shape).astype(dtype)
    return (RNG.standard_normal(shape)).astype(dtype)


def bf16(x):
    """x rounded to bfloat16 (nearest even), as float32."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32)


def f16(x):
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def ttype(shape, elem):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


MAPS = {
    "mk,kn->mn": "[affine_map<(m,n,k)->(m,k)>, affine_map<(m,n,k)->(k,n)>, affine_map<(m,n,k)->(m,n)>]",
    "mk,nk->mn": "[affine_map<(m,n,k)->(m,k)>, affine_map<(m,n,k)->(n,k)>, affine_map<(m,n,k)->(m,n)>]",
    "km,kn->mn": "[affine_map<(m,n,k)->(k,m)>, affine_map<(m,n,k)->(k,n)>, affine_map<(m,n,k)->(m,n)>]",
    "km,nk->mn": "[affine_map<(m,n,k)->(k,m)>, affine_map<(m,n,k)->(n,k)>, affine_map<(m,n,k)->(m,n)>]",
}


def program(args, results, body, mesh=1, layouts=None):
    """An entry @f over `args` [(name, shape, elem)] returning `results`
    [(ssa, shape, elem)], with `body` lines, on a 1-D mesh of `mesh`."""
    layouts = layouts or {}
    params = []
    for name, shape, elem in args:
        attr = ""
        if name in layouts:
            attr = (' {dtensor.layout = #dtensor.layout<@m, "' +
                    layouts[name] + '">}')
        params.append(f"%{name}: {ttype(shape, elem)}{attr}")
    rtypes = ", ".join(ttype(s, e) for _, s, e in results)
    rvals = ", ".join(v for v, _, _ in results)
    return ('"dtensor.mesh"() {sym_name = "m", shape = array<i64: ' +
            str(mesh) + ">, axis_names = [\"x\"]} : () -> ()\n"
            f"func.func @f({', '.join(params)}) -> ({rtypes}) {{\n"
            + "".join(f"  {line}\n" for line in body) +
            f"  return {rvals} : {rtypes}\n}}\n")


def zeros(name, shape, elem="f32"):
    zero = "0" if elem.startswith("i") else "0.0"
    return [f"%{name}_z = arith.constant {zero} : {elem}",
            f"%{name}_e = tensor.empty() : {ttype(shape, elem)}",
            f"%{name} = linalg.fill ins(%{name}_z : {elem}) outs(%{name}_e : "
            f"{ttype(shape, elem)}) -> {ttype(shape, elem)}"]


def cast(name, src, shape, src_elem, elem, op):
    t_in, t_out = ttype(shape, src_elem), ttype(shape, elem)
    ids = ", ".join(f"d{i}" for i in range(len(shape)))
    idmap = f"affine_map<({ids})->({ids})>"
    par = ", ".join('"parallel"' for _ in shape)
    return [f"%{name}_e = tensor.empty() : {t_out}",
            f"%{name} = linalg.generic {{indexing_maps = [{idmap}, {idmap}], "
            f"iterator_types = [{par}]}} ins(%{src} : {t_in}) outs(%{name}_e : "
            f"{t_out}) {{",
            f"^bb0(%x: {src_elem}, %y: {elem}):",
            f"  %v = arith.{op} %x : {src_elem} to {elem}",
            f"  linalg.yield %v : {elem}",
            f"}} -> {t_out}"]


def matmul_case(spec, m, n, k, elem="f32", npdt=np.float32):
    a_shape = (m, k) if spec[0] == "m" else (k, m)
    b_shape = (k, n) if spec[3] == "k" else (n, k)
    body = zeros("c", (m, n), elem) + [
        f"%r = linalg.matmul indexing_maps = {MAPS[spec]} ins(%a, %b : "
        f"{ttype(a_shape, elem)}, {ttype(b_shape, elem)}) outs(%c : "
        f"{ttype((m, n), elem)}) -> {ttype((m, n), elem)}"]
    a, b = rand(*a_shape, dtype=npdt), rand(*b_shape, dtype=npdt)
    want = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    return (program([("a", a_shape, elem), ("b", b_shape, elem)],
                    [("%r", (m, n), elem)], body), [a, b], [want])


def generic_case(maps, iters, shapes, out_shape, einsum):
    """A linalg.generic contraction with the given maps and iterators."""
    body = zeros("c", out_shape) + [
        f"%r = linalg.generic {{indexing_maps = [{maps}], iterator_types = "
        f"[{iters}]}} ins(%a, %b : {ttype(shapes[0], 'f32')}, "
        f"{ttype(shapes[1], 'f32')}) outs(%c : {ttype(out_shape, 'f32')}) {{",
        "^bb0(%x: f32, %y: f32, %o: f32):",
        "  %p = arith.mulf %x, %y : f32",
        "  %s = arith.addf %o, %p : f32",
        "  linalg.yield %s : f32",
        f"}} -> {ttype(out_shape, 'f32')}"]
    a, b = rand(*shapes[0]), rand(*shapes[1])
    want = np.einsum(einsum, a.astype(np.float64), b.astype(np.float64))
    want = np.broadcast_to(want, out_shape)
    return (program([("a", shapes[0], "f32"), ("b", shapes[1], "f32")],
                    [("%r", out_shape, "f32")], body), [a, b], [want])


def named_case(op, a_shape, b_shape, c_shape, einsum):
    body = zeros("c", c_shape) + [
        f"%r = linalg.{op} ins(%a, %b : {ttype(a_shape, 'f32')}, "
        f"{ttype(b_shape, 'f32')}) outs(%c : {ttype(c_shape, 'f32')}) -> "
        f"{ttype(c_shape, 'f32')}"]
    a, b = rand(*a_shape), rand(*b_shape)
    want = np.einsum(einsum, a.astype(np.float64), b.astype(np.float64))
    return (program([("a", a_shape, "f32"), ("b", b_shape, "f32")],
                    [("%r", c_shape, "f32")], body), [a, b], [want])


def low_precision_case(low, out, m=33, n=17, k=45):
    """f32 arguments rounded to `low` (bf16 or f16), a matmul of the low
    precision tensors into an `out` result, back to f32."""
    a, b = rand(m, k), rand(k, n)
    rnd = bf16 if low == "bf16" else f16
    body = (cast("al", "a", (m, k), "f32", low, "truncf") +
            cast("bl", "b", (k, n), "f32", low, "truncf") +
            zeros("c", (m, n), out) + [
                f"%p = linalg.matmul ins(%al, %bl : {ttype((m, k), low)}, "
                f"{ttype((k, n), low)}) outs(%c : {ttype((m, n), out)}) -> "
                f"{ttype((m, n), out)}"])
    if out != "f32":
        body += cast("r", "p", (m, n), out, "f32", "extf")
    else:
        body += ["%r = arith.addf %p, %p : " + ttype((m, n), "f32")]
    exact = rnd(a).astype(np.float64) @ rnd(b).astype(np.float64)
    want = 2 * exact if out == "f32" else rnd(exact.astype(np.float32))
    return (program([("a", (m, k), "f32"), ("b", (k, n), "f32")],
                    [("%r", (m, n), "f32")], body), [a, b], [want])


def strided_case():
    """Operands that are strided views: every other row of A (a leading
    dimension BLAS takes) and every third column of B (no unit stride:
    packed)."""
    m, n, k = 20, 14, 11
    a, b = rand(2 * m, k), rand(k, 3 * n)
    body = [
        f"%as = tensor.extract_slice %a[0, 0] [{m}, {k}] [2, 1] : "
        f"{ttype((2 * m, k), 'f32')} to {ttype((m, k), 'f32')}",
        f"%bs = tensor.extract_slice %b[0, 1] [{k}, {n}] [1, 3] : "
        f"{ttype((k, 3 * n), 'f32')} to {ttype((k, n), 'f32')}",
    ] + zeros("c", (m, n)) + [
        f"%r = linalg.matmul ins(%as, %bs : {ttype((m, k), 'f32')}, "
        f"{ttype((k, n), 'f32')}) outs(%c : {ttype((m, n), 'f32')}) -> "
        f"{ttype((m, n), 'f32')}"]
    want = a[::2].astype(np.float64) @ b[:, 1::3].astype(np.float64)
    return (program([("a", (2 * m, k), "f32"), ("b", (k, 3 * n), "f32")],
                    [("%r", (m, n), "f32")], body), [a, b], [want])


def megatron_case():
    """Tensor parallel on 2 ranks with a transposed second weight: the
    partitioned blocks go to BLAS, then one all_reduce."""
    x, w1, w2 = rand(24, 32), rand(32, 64), rand(32, 64)
    body = zeros("h0", (24, 64)) + [
        "%h = linalg.matmul ins(%x, %w1 : tensor<24x32xf32>, "
        "tensor<32x64xf32>) outs(%h0 : tensor<24x64xf32>) -> tensor<24x64xf32>",
    ] + zeros("y0", (24, 32)) + [
        f"%y = linalg.matmul indexing_maps = {MAPS['mk,nk->mn']} ins(%h, %w2 "
        ": tensor<24x64xf32>, tensor<32x64xf32>) outs(%y0 : tensor<24x32xf32>)"
        " -> tensor<24x32xf32>"]
    want = (x.astype(np.float64) @ w1) @ w2.T
    text = program([("x", (24, 32), "f32"), ("w1", (32, 64), "f32"),
                    ("w2", (32, 64), "f32")], [("%y", (24, 32), "f32")], body,
                   mesh=2, layouts={"x": "[R, R]", "w1": "[R, S0]",
                                    "w2": "[R, S0]"})
    return text, [x, w1, w2], [want]


def integer_case():
    a, b = rand(9, 7, dtype=np.int32), rand(7, 5, dtype=np.int32)
    body = zeros("c", (9, 5), "i32") + [
        "%r = linalg.matmul ins(%a, %b : tensor<9x7xi32>, tensor<7x5xi32>) "
        "outs(%c : tensor<9x5xi32>) -> tensor<9x5xi32>"]
    return (program([("a", (9, 7), "i32"), ("b", (7, 5), "i32")],
                    [("%r", (9, 5), "i32")], body), [a, b], [a.astype(np.int64) @ b])


def not_a_gemm_case():
    """exp(A)·B has a contraction's maps and a multiply-add, but not of the
    inputs themselves: it must stay generated loops (and be exact)."""
    a, b = rand(6, 5), rand(5, 4)
    body = zeros("c", (6, 4)) + [
        f"%r = linalg.generic {{indexing_maps = {MAPS['mk,kn->mn']}, "
        'iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : '
        "tensor<6x5xf32>, tensor<5x4xf32>) outs(%c : tensor<6x4xf32>) {",
        "^bb0(%x: f32, %y: f32, %o: f32):",
        "  %e = math.exp %x : f32",
        "  %p = arith.mulf %e, %y : f32",
        "  %s = arith.addf %o, %p : f32",
        "  linalg.yield %s : f32",
        "} -> tensor<6x4xf32>"]
    want = np.exp(a.astype(np.float64)) @ b
    return (program([("a", (6, 5), "f32"), ("b", (5, 4), "f32")],
                    [("%r", (6, 4), "f32")], body), [a, b], [want])


def math_case(op):
    """math.<op> on f32 (dtensor-approximate-math's polynomial code for
    exp and tanh) over the whole range of f32 results, the edges and
    specials included."""
    x = np.concatenate([
        np.linspace(-20, 20, 4001), np.linspace(-100, 100, 1001),
        [0.0, -0.0, 1e-30, -1e-30, 0.625, -0.625, 88.0, 88.37, 88.38, 88.8,
         -87.3, -87.4, -104.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    n = x.size
    body = [f"%e = tensor.empty() : tensor<{n}xf32>",
            "%r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, "
            'affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%x : '
            f"tensor<{n}xf32>) outs(%e : tensor<{n}xf32>) {{",
            "^bb0(%v: f32, %o: f32):",
            f"  %y = math.{op} %v : f32",
            "  linalg.yield %y : f32",
            f"}} -> tensor<{n}xf32>"]
    ref = np.vectorize(math.erf) if op == "erf" else getattr(np, op)
    with np.errstate(over="ignore"):  # exp(89) is inf in f32
        want = ref(x.astype(np.float64)).astype(np.float32)
    return (program([("x", (n,), "f32")], [("%r", (n,), "f32")], body), [x],
            [want])


ID2 = "affine_map<(i, j) -> (i, j)>"
ROW = "affine_map<(i, j) -> (i)>"
COL = "affine_map<(i, j) -> (j)>"
PP = '"parallel", "parallel"'
PR = '"parallel", "reduction"'


def generic(result, ins, out, maps, iters, args, lines, yielded):
    """A linalg.generic over `ins` [(ssa, type)] into `out` (ssa, type)."""
    return ([f"%{result} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
             f"iterator_types = [{iters}]}} ins("
             + ", ".join(f"%{v}" for v, _ in ins) + " : "
             + ", ".join(t for _, t in ins) + f") outs(%{out[0]} : {out[1]}) {{",
             "^bb0(" + ", ".join(f"%{a}: f32" for a in args) + "):"]
            + [f"  {line}" for line in lines]
            + [f"  linalg.yield %{yielded} : f32", f"}} -> {out[1]}"])


def layernorm_gelu_case(t=48, d=96):
    """Layer norm then the tanh gelu, as a transformer block writes them:
    row sums, the mean, the centered square sums, then one elementwise op
    each for the normalization and the gelu (fused into one loop)."""
    x, g, b = rand(t, d), rand(d), rand(d)
    X, V, R = ttype((t, d), "f32"), ttype((d,), "f32"), ttype((t,), "f32")
    body = zeros("s0", (t,)) + [f"%e2 = tensor.empty() : {X}",
                                 f"%n = arith.constant {float(d)} : f32"]
    body += generic("sum", [("x", X)], ("s0", R), [ID2, ROW], PR, ["v", "a"],
                    ["%r = arith.addf %a, %v : f32"], "r")
    body += generic("var", [("x", X), ("sum", R)], ("s0", R),
                    [ID2, ROW, ROW], PR, ["v", "s", "a"],
                    ["%m = arith.divf %s, %n : f32", "%c = arith.subf %v, %m : f32",
                     "%q = arith.mulf %c, %c : f32", "%r = arith.addf %a, %q : f32"],
                    "r")
    body += generic("y", [("x", X), ("sum", R), ("var", R), ("g", V), ("b", V)],
                    ("e2", X), [ID2, ROW, ROW, COL, COL, ID2], PP,
                    ["v", "s", "q", "gg", "bb", "o"],
                    ["%m = arith.divf %s, %n : f32", "%w = arith.divf %q, %n : f32",
                     "%eps = arith.constant 1.0e-5 : f32",
                     "%we = arith.addf %w, %eps : f32", "%rs = math.rsqrt %we : f32",
                     "%c = arith.subf %v, %m : f32", "%t = arith.mulf %c, %rs : f32",
                     "%t2 = arith.mulf %t, %gg : f32", "%t3 = arith.addf %t2, %bb : f32"],
                    "t3")
    body += generic("r", [("y", X)], ("e2", X), [ID2, ID2], PP, ["v", "o"],
                    ["%h = arith.constant 0.5 : f32", "%one = arith.constant 1.0 : f32",
                     "%k = arith.constant 0.7978845608 : f32",
                     "%k3 = arith.constant 0.044715 : f32",
                     "%v2 = arith.mulf %v, %v : f32", "%v3 = arith.mulf %v2, %v : f32",
                     "%a = arith.mulf %v3, %k3 : f32", "%a1 = arith.addf %v, %a : f32",
                     "%a2 = arith.mulf %a1, %k : f32", "%th = math.tanh %a2 : f32",
                     "%p = arith.addf %th, %one : f32", "%hv = arith.mulf %v, %h : f32",
                     "%o2 = arith.mulf %hv, %p : f32"], "o2")
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + 1e-5) * g + b
    want = 0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))
    return (program([("x", (t, d), "f32"), ("g", (d,), "f32"), ("b", (d,), "f32")],
                    [("%r", (t, d), "f32")], body), [x, g, b], [want])


def softmax_case(t=40, d=75):
    """Softmax over rows as attention writes it: row max, exp(x - max),
    row sums, a division."""
    x = rand(t, d) * 4
    X, R = ttype((t, d), "f32"), ttype((t,), "f32")
    body = [f"%e1 = tensor.empty() : {R}", f"%e2 = tensor.empty() : {X}",
            "%ninf = arith.constant 0xFF800000 : f32",
            f"%m0 = linalg.fill ins(%ninf : f32) outs(%e1 : {R}) -> {R}"]
    body += zeros("s0", (t,))
    body += generic("mx", [("x", X)], ("m0", R), [ID2, ROW], PR, ["v", "a"],
                    ["%r = arith.maximumf %a, %v : f32"], "r")
    body += generic("ex", [("x", X), ("mx", R)], ("e2", X), [ID2, ROW, ID2], PP,
                    ["v", "m", "o"], ["%c = arith.subf %v, %m : f32",
                                      "%e = math.exp %c : f32"], "e")
    body += generic("sm", [("ex", X)], ("s0", R), [ID2, ROW], PR, ["v", "a"],
                    ["%r = arith.addf %a, %v : f32"], "r")
    body += generic("r", [("ex", X), ("sm", R)], ("e2", X), [ID2, ROW, ID2], PP,
                    ["v", "s", "o"], ["%q = arith.divf %v, %s : f32"], "q")
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    return (program([("x", (t, d), "f32")], [("%r", (t, d), "f32")], body), [x],
            [want])


def init_read_then_broadcast_case(t=5, d=7):
    """An elementwise generic that adds into its (filled) init, then a
    broadcast of it: linalg-fuse-elementwise-ops alone made the fused loop
    add d once per column (dtensor-inits-to-inputs)."""
    v = rand(t)
    R, X = ttype((t,), "f32"), ttype((t, d), "f32")
    one = "affine_map<(i) -> (i)>"
    body = [f"%c1 = arith.constant 1.0 : f32", f"%e1 = tensor.empty() : {R}",
            f"%ones = linalg.fill ins(%c1 : f32) outs(%e1 : {R}) -> {R}",
            f"%e2 = tensor.empty() : {X}"]
    body += generic("p", [("v", R)], ("ones", R), [one, one], '"parallel"',
                    ["a", "o"], ["%s = arith.addf %o, %a : f32"], "s")
    body += generic("r", [("p", R)], ("e2", X), [ROW, ID2], PP, ["a", "o"],
                    [], "a")
    want = np.repeat((v.astype(np.float64) + 1)[:, None], d, axis=1)
    return (program([("v", (t,), "f32")], [("%r", (t, d), "f32")], body), [v],
            [want])


def linalg_softmax_case(shape, dim):
    """linalg.softmax itself (dtensor-decompose-softmax)."""
    x = rand(*shape) * 4
    T = ttype(shape, "f32")
    body = [f"%e = tensor.empty() : {T}",
            f"%r = linalg.softmax dimension({dim}) ins(%x : {T}) outs(%e : {T})"
            f" -> {T}"]
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(dim, keepdims=True))
    want = e / e.sum(dim, keepdims=True)
    return (program([("x", shape, "f32")], [("%r", shape, "f32")], body), [x],
            [want])


def scaled_generic_matmul_case(m=30, n=20, k=50):
    """A generic contraction whose input is an elementwise op used once
    (q * scale before q k^T): elementwise fusion must leave the product
    on BLAS, not fold the scale into its body."""
    q, kt = rand(m, k), rand(n, k)
    Q = ttype((m, k), "f32")
    body = [f"%e = tensor.empty() : {Q}"]
    body += generic("qs", [("q", Q)], ("e", Q), [ID2, ID2], PP, ["v", "o"],
                    ["%c = arith.constant 0.125 : f32",
                     "%s = arith.mulf %v, %c : f32"], "s")
    body += zeros("c", (m, n))
    body += generic("r", [("qs", Q), ("kt", ttype((n, k), "f32"))],
                    ("c", ttype((m, n), "f32")),
                    ["affine_map<(m, n, k) -> (m, k)>",
                     "affine_map<(m, n, k) -> (n, k)>",
                     "affine_map<(m, n, k) -> (m, n)>"], GEN3_ITERS,
                    ["x", "y", "o"], ["%p = arith.mulf %x, %y : f32",
                                      "%a = arith.addf %o, %p : f32"], "a")
    want = (q.astype(np.float64) * 0.125) @ kt.T
    return (program([("q", (m, k), "f32"), ("kt", (n, k), "f32")],
                    [("%r", (m, n), "f32")], body), [q, kt], [want])


GEN3_ITERS = '"parallel", "parallel", "reduction"'
GEN3 = '"parallel", "parallel", "reduction"'
CASES = {
    # name: (builder, the runtime call its contraction becomes, or None)
    "matmul": (lambda: matmul_case("mk,kn->mn", 37, 29, 53), "f32_f32_f32"),
    "matmul-f64": (lambda: matmul_case("mk,kn->mn", 19, 23, 31, "f64",
                                       np.float64), "f64_f64_f64"),
    "matmul-transpose-b": (lambda: matmul_case("mk,nk->mn", 33, 18, 40),
                           "f32_f32_f32"),
    "matmul-transpose-a": (lambda: matmul_case("km,kn->mn", 21, 35, 16),
                           "f32_f32_f32"),
    "matmul-transpose-ab": (lambda: matmul_case("km,nk->mn", 12, 27, 30),
                            "f32_f32_f32"),
    "batch-matmul": (lambda: named_case("batch_matmul", (3, 10, 12),
                                        (3, 12, 7), (3, 10, 7),
                                        "bmk,bkn->bmn"), "f32_f32_f32"),
    "matvec": (lambda: named_case("matvec", (40, 25), (25,), (40,),
                                  "mk,k->m"), "f32_f32_f32"),
    "vecmat": (lambda: named_case("vecmat", (25,), (25, 40), (40,),
                                  "k,kn->n"), "f32_f32_f32"),
    "dot": (lambda: named_case("dot", (57,), (57,), (), "k,k->"),
            "f32_f32_f32"),
    # C[n, b, m] = A[b, m, k] B[k, n]: batch dim, output transposed.
    "generic-batch-transposed-out": (lambda: generic_case(
        "affine_map<(b,m,n,k)->(b,m,k)>, affine_map<(b,m,n,k)->(k,n)>, "
        "affine_map<(b,m,n,k)->(n,b,m)>",
        '"parallel", "parallel", "parallel", "reduction"',
        [(4, 9, 13), (13, 6)], (6, 4, 9), "bmk,kn->nbm"), "f32_f32_f32"),
    # Two reduced dims, in different orders in A and B.
    "generic-two-reductions": (lambda: generic_case(
        "affine_map<(m,n,k,l)->(m,k,l)>, affine_map<(m,n,k,l)->(l,k,n)>, "
        "affine_map<(m,n,k,l)->(m,n)>",
        '"parallel", "parallel", "reduction", "reduction"',
        [(8, 5, 6), (6, 5, 11)], (8, 11), "mkl,lkn->mn"), "f32_f32_f32"),
    # A dim only the output has (a broadcast of the product).
    "generic-broadcast-out": (lambda: generic_case(
        "affine_map<(m,n,j,k)->(m,k)>, affine_map<(m,n,j,k)->(k,n)>, "
        "affine_map<(m,n,j,k)->(j,m,n)>",
        '"parallel", "parallel", "parallel", "reduction"',
        [(7, 10), (10, 8)], (3, 7, 8), "mk,kn->mn"), "f32_f32_f32"),
    "strided-views": (strided_case, "f32_f32_f32"),
    "bf16-f32-accumulate": (lambda: low_precision_case("bf16", "f32"),
                            "bf16_bf16_f32"),
    "bf16-result": (lambda: low_precision_case("bf16", "bf16"),
                    "bf16_bf16_bf16"),
    "f16-f32-accumulate": (lambda: low_precision_case("f16", "f32"),
                           "f16_f16_f32"),
    "f16-result": (lambda: low_precision_case("f16", "f16"), "f16_f16_f16"),
    "megatron-2-ranks": (megatron_case, "f32_f32_f32"),
    "integer-stays-loops": (integer_case, None),
    "not-a-gemm-stays-loops": (not_a_gemm_case, None),
    "layernorm-gelu": (layernorm_gelu_case, None),
    "softmax": (softmax_case, None),
    "init-read-then-broadcast": (init_read_then_broadcast_case, None),
    "linalg-softmax-rows": (lambda: linalg_softmax_case((33, 70), 1), None),
    "linalg-softmax-3d-middle": (lambda: linalg_softmax_case((3, 41, 6), 1),
                                 None),
    "scaled-generic-matmul": (scaled_generic_matmul_case, "f32_f32_f32"),
    "math-exp": (lambda: math_case("exp"), None),
    "math-tanh": (lambda: math_case("tanh"), None),
    # No approximation of its own: libm's erff (convert-math-to-libm).
    "math-erf": (lambda: math_case("erf"), None),
}


def lowered(text):
    tool = os.path.join(dtensor._capi.bin_dir(), "dtensor-opt")
    done = subprocess.run([tool, "-", "--dtensor-spmd", "--dtensor-to-llvm"],
                          input=text, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy(name):
    build, call = CASES[name]
    text, inputs, wants = build()
    calls = set(re.findall(r"llvm.call @dtrt_mlir_contract_(\w+)\(",
                           lowered(text)))
    assert calls == ({call} if call else set()), calls
    ranks = 2 if "2-ranks" in name else 1
    gots = dtensor.run(text, ranks, inputs)
    for got, want in zip(gots, wants):
        want = np.asarray(want)
        assert got.shape == want.shape
        if name.startswith("math-"):
            # exp within 2e-7 relative (measured 7.8e-8, 1 ulp), tanh within
            # 5e-7 (its rational form: measured 3.3e-7, 5 ulp), libm's erf
            # within 2e-7; or 1.2e-38 absolute (exp flushes what would be
            # subnormal to 0); infinities and NaN exactly.
            assert (np.isnan(got) == np.isnan(want)).all()
            fin = np.isfinite(want)
            assert (got[~fin & ~np.isnan(want)] ==
                    want[~fin & ~np.isnan(want)]).all()
            err = np.abs(got[fin].astype(np.float64) - want[fin])
            rel = 5e-7 if name == "math-tanh" else 2e-7
            tol = rel * np.abs(want[fin]) + 1.2e-38
            assert (err <= tol).all(), (err / np.maximum(np.abs(want[fin]),
                                                         1e-30)).max()
            continue
        if np.issubdtype(got.dtype, np.integer):
            assert np.array_equal(got, want)
            continue
        scale = max(1.0, float(np.abs(want).max()))
        rtol = 2e-2 if "bf16-result" in name or "f16-result" in name else (
            1e-12 if got.dtype == np.float64 else 1e-5)
        err = np.abs(got.astype(np.float64) - want)
        assert (err <= rtol * np.abs(want) + rtol * scale).all(), err.max()


@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_half_sums_accumulate_in_f32(elem):
    """A sum of 40 960 halves reduced into a half: accumulated in f32 and
    rounded once (dtensor-widen-reductions), so within an ulp of the exact
    sum; accumulated in halves it drifted by 4 ulp and more."""
    n = 40960
    x = RNG.random(n).astype(np.float32) * 0.25
    x = f16(x) if elem == "f16" else bf16(x)
    body = cast("hl", "h", (n,), "f32", elem, "truncf") + zeros("i", (), elem) + [
        f"%p = linalg.reduce ins(%hl : {ttype((n,), elem)}) outs(%i : "
        f"{ttype((), elem)}) dimensions = [0]",
        f"  (%in: {elem}, %acc: {elem}) {{",
        f"    %s = arith.addf %in, %acc : {elem}",
        f"    linalg.yield %s : {elem}",
        "  }"] + cast("r", "p", (), elem, "f32", "extf")
    text = program([("h", (n,), "f32")], [("%r", (), "f32")], body, mesh=2,
                   layouts={"h": "[S0]"})
    got, = dtensor.run(text, 2, [x])
    exact = float(np.sum(x.astype(np.float64)))
    ulp = 2.0 ** (math.floor(math.log2(exact)) - (10 if elem == "f16" else 7))
    # Two ranks: each half's sum is rounded to the type before the
    # all_reduce adds them, so one ulp more.
    assert abs(float(got) - exact) <= 2 * ulp, (float(got), exact, ulp)
