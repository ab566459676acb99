"""dtensor-autodiff against finite differences, in f64: for each op family
a program f(args) -> tensor<f64>, its @f_grad from the pass, run on one
rank, and the directional derivative <grad, v> compared with central
differences (f(x + eps v) - f(x - eps v)) / 2 eps along two random
directions. Then gradients of sharded programs on 2 and 4 ranks (the
runner checks every rank against the single-device run) and the errors."""

import os
import subprocess

import numpy as np
import pytest

import dtensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
RNG = np.random.default_rng(11)
ID2 = "affine_map<(i, j) -> (i, j)>"


def ttype(shape):
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f64>"


def program(args, body, result, mesh=1, layouts=None, functions=""):
    """@f over `args` [(name, shape)] with `body` lines ending in the value
    `result` (any shape: the loss is the sum of its squares / 2, so every
    element of it matters)."""
    layouts = layouts or {}
    params = []
    for name, shape in args:
        attr = (f' {{dtensor.layout = #dtensor.layout<@m, "{layouts[name]}">}}'
                if name in layouts else "")
        params.append(f"%{name}: {ttype(shape)}{attr}")
    value, shape = result
    rank = len(shape)
    dims = ", ".join(f"d{k}" for k in range(rank))
    reductions = ", ".join(['"reduction"'] * rank)
    loss = [
        "%lz = arith.constant 0.0 : f64",
        "%le = tensor.empty() : tensor<f64>",
        "%li = linalg.fill ins(%lz : f64) outs(%le : tensor<f64>) -> tensor<f64>",
        f"%loss = linalg.generic {{indexing_maps = [affine_map<({dims}) -> ({dims})>, "
        f"affine_map<({dims}) -> ()>], iterator_types = [{reductions}]}} "
        f"ins({value} : {ttype(shape)}) outs(%li : tensor<f64>) {{",
        "^bb0(%lv: f64, %lacc: f64):",
        "  %lh = arith.constant 0.5 : f64",
        "  %lq = arith.mulf %lv, %lv : f64",
        "  %lr = arith.mulf %lq, %lh : f64",
        "  %ls = arith.addf %lacc, %lr : f64",
        "  linalg.yield %ls : f64",
        "} -> tensor<f64>",
    ]
    return ('"dtensor.mesh"() {sym_name = "m", shape = array<i64: '
            f'{mesh}>, axis_names = ["x"]}} : () -> ()\n' + functions +
            f"func.func @f({', '.join(params)}) -> tensor<f64> {{\n"
            + "".join(f"  {line}\n" for line in body + loss) +
            "  return %loss : tensor<f64>\n}\n")


def fill(name, shape, value="0.0"):
    return [f"%{name}_c = arith.constant {value} : f64",
            f"%{name}_e = tensor.empty() : {ttype(shape)}",
            f"%{name} = linalg.fill ins(%{name}_c : f64) outs(%{name}_e : "
            f"{ttype(shape)}) -> {ttype(shape)}"]


def unary(op, shape=(3, 4)):
    return ([("x", shape)], [f"%y = {op} %x : {ttype(shape)}"], ("%y", shape))


def binary(op, shape=(3, 4)):
    return ([("x", shape), ("w", shape)],
            [f"%y = {op} %x, %w : {ttype(shape)}"], ("%y", shape))


def generic(args, maps, iters, ins, out_shape, body, init="0.0"):
    """A linalg.generic over `ins` into a fill of `init`, body lines on
    %a0.. and %acc, yielding %r."""
    types = ", ".join(ttype(s) for _, s in args if f"%{_}" in ins)
    lines = fill("o", out_shape, init)
    kinds = ", ".join(f'"{t}"' for t in iters)
    lines.append(
        f"%y = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
        f"iterator_types = [{kinds}]}} "
        f"ins({', '.join(ins)} : {types}) outs(%o : {ttype(out_shape)}) {{")
    blocks = ", ".join(f"%a{k}: f64" for k in range(len(ins)))
    lines.append(f"^bb0({blocks}, %acc: f64):")
    lines += [f"  {b}" for b in body]
    lines.append("  linalg.yield %r : f64")
    lines.append(f"}} -> {ttype(out_shape)}")
    return lines


MM = ["affine_map<(m, n, k) -> (m, k)>", "affine_map<(m, n, k) -> (k, n)>",
      "affine_map<(m, n, k) -> (m, n)>"]

CASES = {
    # contractions
    "matmul": ([("a", (3, 5)), ("b", (5, 4))],
               fill("o", (3, 4)) + [
                   "%y = linalg.matmul ins(%a, %b : tensor<3x5xf64>, "
                   "tensor<5x4xf64>) outs(%o : tensor<3x4xf64>) -> tensor<3x4xf64>"],
               ("%y", (3, 4))),
    "batch_matmul": ([("a", (2, 3, 5)), ("b", (2, 5, 4))],
                     fill("o", (2, 3, 4)) + [
                         "%y = linalg.batch_matmul ins(%a, %b : tensor<2x3x5xf64>, "
                         "tensor<2x5x4xf64>) outs(%o : tensor<2x3x4xf64>) -> "
                         "tensor<2x3x4xf64>"], ("%y", (2, 3, 4))),
    "generic_transposed_contraction": (
        [("a", (5, 3)), ("b", (4, 5))],
        generic([("a", (5, 3)), ("b", (4, 5))],
                ["affine_map<(m, n, k) -> (k, m)>",
                 "affine_map<(m, n, k) -> (n, k)>", MM[2]],
                ["parallel", "parallel", "reduction"], ["%a", "%b"], (3, 4),
                ["%p = arith.mulf %a0, %a1 : f64",
                 "%r = arith.addf %acc, %p : f64"]), ("%y", (3, 4))),
    "matmul_accumulates_into_an_argument": (
        [("a", (3, 5)), ("b", (5, 4)), ("c", (3, 4))],
        ["%y = linalg.matmul ins(%a, %b : tensor<3x5xf64>, tensor<5x4xf64>) "
         "outs(%c : tensor<3x4xf64>) -> tensor<3x4xf64>"], ("%y", (3, 4))),
    # elementwise arith and math on tensors
    "addf": binary("arith.addf"), "subf": binary("arith.subf"),
    "mulf": binary("arith.mulf"), "divf": binary("arith.divf"),
    "maximumf": binary("arith.maximumf"), "minimumf": binary("arith.minimumf"),
    "negf": unary("arith.negf"), "exp": unary("math.exp"),
    "tanh": unary("math.tanh"), "erf": unary("math.erf"),
    "sin": unary("math.sin"), "cos": unary("math.cos"),
    "absf": unary("math.absf"),
    "x_times_x": ([("x", (3, 4))], ["%y = arith.mulf %x, %x : tensor<3x4xf64>"],
                  ("%y", (3, 4))),
    # positive inputs: log, sqrt, rsqrt, powf
    "log_sqrt_rsqrt_powf": (
        [("x", (3, 4)), ("w", (3, 4))],
        ["%p = math.absf %x : tensor<3x4xf64>",
         "%q = math.exp %w : tensor<3x4xf64>",
         "%l = math.log %q : tensor<3x4xf64>",
         "%s = math.sqrt %q : tensor<3x4xf64>",
         "%t = math.rsqrt %q : tensor<3x4xf64>",
         "%u = math.powf %q, %x : tensor<3x4xf64>",
         "%v = arith.addf %l, %s : tensor<3x4xf64>",
         "%v2 = arith.addf %v, %t : tensor<3x4xf64>",
         "%y = arith.addf %v2, %u : tensor<3x4xf64>"], ("%y", (3, 4))),
    "select_in_a_body": (
        [("x", (3, 4)), ("w", (3, 4))],
        generic([("x", (3, 4)), ("w", (3, 4))], [ID2, ID2, ID2],
                ["parallel", "parallel"], ["%x", "%w"], (3, 4),
                ["%c = arith.cmpf ogt, %a0, %a1 : f64",
                 "%m = arith.mulf %a0, %a1 : f64",
                 "%r = arith.select %c, %m, %a1 : f64"]), ("%y", (3, 4))),
    "gelu_tanh_in_a_body_with_constants": (
        [("x", (3, 4))],
        generic([("x", (3, 4))], [ID2, ID2], ["parallel", "parallel"], ["%x"],
                (3, 4),
                ["%h = arith.constant 0.5 : f64",
                 "%k = arith.constant 0.7978845608 : f64",
                 "%one = arith.constant 1.0 : f64",
                 "%x3 = arith.mulf %a0, %a0 : f64",
                 "%x4 = arith.mulf %x3, %a0 : f64",
                 "%c = arith.constant 0.044715 : f64",
                 "%x5 = arith.mulf %x4, %c : f64",
                 "%x6 = arith.addf %a0, %x5 : f64",
                 "%x7 = arith.mulf %x6, %k : f64",
                 "%t = math.tanh %x7 : f64",
                 "%x8 = arith.addf %t, %one : f64",
                 "%x9 = arith.mulf %x8, %h : f64",
                 "%r = arith.mulf %x9, %a0 : f64"]), ("%y", (3, 4))),
    # reductions and broadcasts
    "row_sum": ([("x", (3, 4))],
                generic([("x", (3, 4))], [ID2, "affine_map<(i, j) -> (i)>"],
                        ["parallel", "reduction"], ["%x"], (3,),
                        ["%r = arith.addf %acc, %a0 : f64"]), ("%y", (3,))),
    "row_max": ([("x", (3, 4))],
                generic([("x", (3, 4))], [ID2, "affine_map<(i, j) -> (i)>"],
                        ["parallel", "reduction"], ["%x"], (3,),
                        ["%r = arith.maximumf %acc, %a0 : f64"], init="-1.0e30"),
                ("%y", (3,))),
    "broadcast_bias": ([("x", (3, 4)), ("b", (4,))],
                       generic([("x", (3, 4)), ("b", (4,))],
                               [ID2, "affine_map<(i, j) -> (j)>", ID2],
                               ["parallel", "parallel"], ["%x", "%b"], (3, 4),
                               ["%r = arith.addf %a0, %a1 : f64"]), ("%y", (3, 4))),
    "linalg_broadcast_and_transpose": (
        [("b", (4,))],
        fill("o", (3, 4)) + fill("t", (4, 3)) + [
            "%bb = linalg.broadcast ins(%b : tensor<4xf64>) outs(%o : "
            "tensor<3x4xf64>) dimensions = [0]",
            "%y = linalg.transpose ins(%bb : tensor<3x4xf64>) outs(%t : "
            "tensor<4x3xf64>) permutation = [1, 0]"], ("%y", (4, 3))),
    "softmax": ([("x", (3, 5))],
                ["%e = tensor.empty() : tensor<3x5xf64>",
                 "%y = linalg.softmax dimension(1) ins(%x : tensor<3x5xf64>) "
                 "outs(%e : tensor<3x5xf64>) -> tensor<3x5xf64>"], ("%y", (3, 5))),
    # tensor ops
    "extract_slice": ([("x", (6, 4))],
                      ["%y = tensor.extract_slice %x[1, 0] [3, 2] [2, 1] : "
                       "tensor<6x4xf64> to tensor<3x2xf64>"], ("%y", (3, 2))),
    "insert_slice": ([("x", (2, 2)), ("d", (4, 4))],
                     ["%y = tensor.insert_slice %x into %d[1, 2] [2, 2] [1, 1] : "
                      "tensor<2x2xf64> into tensor<4x4xf64>"], ("%y", (4, 4))),
    "pad": ([("x", (2, 3))],
            ["%c = arith.constant 0.0 : f64",
             "%y = tensor.pad %x low[1, 0] high[0, 2] {",
             "^bb0(%i: index, %j: index):",
             "  tensor.yield %c : f64",
             "} : tensor<2x3xf64> to tensor<3x5xf64>"], ("%y", (3, 5))),
    "concat": ([("x", (2, 3)), ("w", (4, 3))],
               ["%y = tensor.concat dim(0) %x, %w : (tensor<2x3xf64>, "
                "tensor<4x3xf64>) -> tensor<6x3xf64>"], ("%y", (6, 3))),
    "reshapes": ([("x", (6, 4))],
                 ["%e = tensor.expand_shape %x [[0, 1], [2]] output_shape [2, 3, 4] "
                  ": tensor<6x4xf64> into tensor<2x3x4xf64>",
                  "%t = math.tanh %e : tensor<2x3x4xf64>",
                  "%y = tensor.collapse_shape %t [[0], [1, 2]] : "
                  "tensor<2x3x4xf64> into tensor<2x12xf64>"], ("%y", (2, 12))),
}


LAYER = """func.func private @layer(%x: tensor<4x6xf64>, %w: tensor<6x6xf64>) -> tensor<4x6xf64> {
  %z = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<4x6xf64>
  %i = linalg.fill ins(%z : f64) outs(%e : tensor<4x6xf64>) -> tensor<4x6xf64>
  %h = linalg.matmul ins(%x, %w : tensor<4x6xf64>, tensor<6x6xf64>) outs(%i : tensor<4x6xf64>) -> tensor<4x6xf64>
  %a = func.call @act(%h) : (tensor<4x6xf64>) -> tensor<4x6xf64>
  return %a : tensor<4x6xf64>
}
func.func private @act(%h: tensor<4x6xf64>) -> tensor<4x6xf64> {
  %a = math.tanh %h : tensor<4x6xf64>
  return %a : tensor<4x6xf64>
}
"""
TWO_LAYERS = ([("x", (4, 6)), ("w1", (6, 6)), ("w2", (6, 6))],
              ["%h1 = func.call @layer(%x, %w1) : (tensor<4x6xf64>, tensor<6x6xf64>) -> tensor<4x6xf64>",
               "%y = func.call @layer(%h1, %w2) : (tensor<4x6xf64>, tensor<6x6xf64>) -> tensor<4x6xf64>"],
              ("%y", (4, 6)))


def loop(trips=3, lower="%c0"):
    """Layers as an scf.for: layer i's weight sliced from a stack by the
    loop's index, a weight shared by every iteration read from outside."""
    return [
        "%c0 = arith.constant 0 : index", "%c1 = arith.constant 1 : index",
        f"%cn = arith.constant {trips} : index",
        "%z = arith.constant 0.0 : f64",
        f"%y = scf.for %i = {lower} to %cn step %c1 iter_args(%a = %x) -> (tensor<4x6xf64>) {{",
        "  %w = tensor.extract_slice %ws[%i, 0, 0] [1, 6, 6] [1, 1, 1] : "
        "tensor<3x6x6xf64> to tensor<6x6xf64>",
        "  %e = tensor.empty() : tensor<4x6xf64>",
        "  %i0 = linalg.fill ins(%z : f64) outs(%e : tensor<4x6xf64>) -> tensor<4x6xf64>",
        "  %m = linalg.matmul ins(%a, %w : tensor<4x6xf64>, tensor<6x6xf64>) "
        "outs(%i0 : tensor<4x6xf64>) -> tensor<4x6xf64>",
        "  %m2 = linalg.matmul ins(%m, %u : tensor<4x6xf64>, tensor<6x6xf64>) "
        "outs(%i0 : tensor<4x6xf64>) -> tensor<4x6xf64>",
        "  %t = math.tanh %m2 : tensor<4x6xf64>",
        "  scf.yield %t : tensor<4x6xf64>",
        "}"]


LOOP_ARGS = [("x", (4, 6)), ("ws", (3, 6, 6)), ("u", (6, 6))]
CASES["scf_for_layers"] = (LOOP_ARGS, loop(), ("%y", (4, 6)))


# Lookups by computed index (dtensor-gathers makes them dtensor.gather; the
# adjoint is a scatter_add): an embedding whose ids repeat (the adjoint must
# add), tensor.gather kept and rank-reduced, a target logit picked per row
# (cross-entropy's), a read at the loops' own indices, and a gather by two
# computed indices.
IDS = "%ids = arith.constant dense<[[1, 4], [0, 1]]> : tensor<2x2xi64>"
CASES["gather_embedding"] = (
    [("w", (5, 3))],
    [IDS, "%e = tensor.empty() : tensor<2x2x3xf64>",
     '%y = linalg.generic {indexing_maps = [affine_map<(b, t, d) -> (b, t)>, '
     'affine_map<(b, t, d) -> (b, t, d)>], iterator_types = ["parallel", '
     '"parallel", "parallel"]} ins(%ids : tensor<2x2xi64>) '
     'outs(%e : tensor<2x2x3xf64>) {',
     "^bb0(%id: i64, %o: f64):",
     "  %i = arith.index_cast %id : i64 to index",
     "  %d = linalg.index 2 : index",
     "  %v = tensor.extract %w[%i, %d] : tensor<5x3xf64>",
     "  %s = math.sin %v : f64",
     "  linalg.yield %s : f64",
     "} -> tensor<2x2x3xf64>"], ("%y", (2, 2, 3)))
CASES["tensor_gather"] = (
    [("w", (5, 3))],
    ["%idx = arith.constant dense<[[3], [1], [3]]> : tensor<3x1xindex>",
     "%g = tensor.gather %w[%idx] gather_dims([0]) : (tensor<5x3xf64>, "
     "tensor<3x1xindex>) -> tensor<3x1x3xf64>",
     "%y = math.tanh %g : tensor<3x1x3xf64>"], ("%y", (3, 1, 3)))
CASES["pick_target_logit"] = (
    [("x", (3, 4))],
    ["%t = arith.constant dense<[1, 3, 0]> : tensor<3xi32>",
     "%e = tensor.empty() : tensor<3xf64>",
     '%y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, '
     'affine_map<(i) -> (i)>], iterator_types = ["parallel"]} '
     'ins(%t : tensor<3xi32>) outs(%e : tensor<3xf64>) {',
     "^bb0(%tv: i32, %o: f64):",
     "  %i = linalg.index 0 : index",
     "  %k = arith.index_cast %tv : i32 to index",
     "  %v = tensor.extract %x[%i, %k] : tensor<3x4xf64>",
     "  %q = arith.mulf %v, %v : f64",
     "  linalg.yield %q : f64",
     "} -> tensor<3xf64>"], ("%y", (3,)))
CASES["tensor_scatter"] = (
    [("d", (5, 3)), ("u", (2, 3))],
    ["%idx = arith.constant dense<[[3], [0]]> : tensor<2x1xi64>",
     "%s = tensor.scatter %u into %d[%idx] scatter_dims([0]) unique : "
     "(tensor<2x3xf64>, tensor<5x3xf64>, tensor<2x1xi64>) -> tensor<5x3xf64>",
     "%y = math.sin %s : tensor<5x3xf64>"], ("%y", (5, 3)))
CASES["read_at_own_loops"] = (
    [("x", (3, 4))],
    ["%e = tensor.empty() : tensor<3x4xf64>",
     '%y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], '
     'iterator_types = ["parallel", "parallel"]} outs(%e : tensor<3x4xf64>) {',
     "^bb0(%o: f64):",
     "  %i = linalg.index 0 : index",
     "  %j = linalg.index 1 : index",
     "  %v = tensor.extract %x[%i, %j] : tensor<3x4xf64>",
     "  %c = math.cos %v : f64",
     "  linalg.yield %c : f64",
     "} -> tensor<3x4xf64>"], ("%y", (3, 4)))
CASES["gather_two_indices"] = (
    [("x", (3, 4))],
    ["%e = tensor.empty() : tensor<4xf64>",
     '%y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], '
     'iterator_types = ["parallel"]} outs(%e : tensor<4xf64>) {',
     "^bb0(%o: f64):",
     "  %i = linalg.index 0 : index",
     "  %c3 = arith.constant 3 : index",
     "  %r = arith.remui %i, %c3 : index",
     "  %k = arith.subi %c3, %i : index",
     "  %v = tensor.extract %x[%r, %k] : tensor<3x4xf64>",
     "  %q = arith.mulf %v, %v : f64",
     "  linalg.yield %q : f64",
     "} -> tensor<4xf64>"], ("%y", (4,)))


def run_grad(text, args, n=1):
    ir = dtensor.compile(text, "dtensor-autodiff{function=f}")
    outs = dtensor.run(ir, n, args, entry="f_grad")
    return ir, outs[0], outs[1:]


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradient_matches_finite_differences(case):
    args, body, result = CASES[case]
    text = program(args, body, result)
    values = [RNG.standard_normal(s) for _, s in args]
    ir, loss, grads = run_grad(text, values)
    assert len(grads) == len(args)
    for _ in range(2):
        v = [RNG.standard_normal(s) for _, s in args]
        eps = 1e-6
        fp, = dtensor.run(ir, 1, [a + eps * d for a, d in zip(values, v)], entry="f")
        fm, = dtensor.run(ir, 1, [a - eps * d for a, d in zip(values, v)], entry="f")
        fd = (float(fp) - float(fm)) / (2 * eps)
        an = sum(float((g * d).sum()) for g, d in zip(grads, v))
        assert abs(fd - an) <= 1e-6 * max(1.0, abs(an)), (case, fd, an)


@pytest.mark.parametrize("wrt", ["0,1,2", "1,2", "2"])
def test_gradients_through_calls(wrt):
    """Two calls of one layer, which calls its activation: each call's
    adjoint is a call of the callee's vjp function (one per callee and set
    of differentiated arguments), checked against finite differences."""
    args, body, result = TWO_LAYERS
    text = program(args, body, result, functions=LAYER)
    chosen = [int(k) for k in wrt.split(",")]
    ir = dtensor.compile(text, f"dtensor-autodiff{{function=f wrt={wrt}}}")
    assert "@layer_vjp0" in ir and "@act_vjp0" in ir
    values = [RNG.standard_normal(s) for _, s in args]
    grads = dtensor.run(ir, 1, values, entry="f_grad")[1:]
    assert len(grads) == len(chosen)
    v = [RNG.standard_normal(s) if i in chosen else np.zeros(s)
         for i, (_, s) in enumerate(args)]
    eps = 1e-6
    fp, = dtensor.run(ir, 1, [a + eps * d for a, d in zip(values, v)], entry="f")
    fm, = dtensor.run(ir, 1, [a - eps * d for a, d in zip(values, v)], entry="f")
    fd = (float(fp) - float(fm)) / (2 * eps)
    an = sum(float((g * v[i]).sum()) for g, i in zip(grads, chosen))
    assert abs(fd - an) <= 1e-6 * max(1.0, abs(an)), (fd, an)


def test_gradients_of_a_sharded_mlp():
    """The MLP's gradients with x split over data parallel ranks and the
    weights Megatron-style, on 2 and 4 ranks: each rank's gradient blocks
    equal the single-device run's (the runner compares), and each gradient
    comes back in its parameter's layout."""
    for n in (2, 4):
        args = [("x", (8, 6)), ("w1", (6, 8)), ("w2", (8, 4))]
        body = (fill("i1", (8, 8)) + [
            "%h = linalg.matmul ins(%x, %w1 : tensor<8x6xf64>, tensor<6x8xf64>) "
            "outs(%i1 : tensor<8x8xf64>) -> tensor<8x8xf64>",
            "%a = math.tanh %h : tensor<8x8xf64>"] + fill("i2", (8, 4)) + [
            "%y = linalg.matmul ins(%a, %w2 : tensor<8x8xf64>, tensor<8x4xf64>) "
            "outs(%i2 : tensor<8x4xf64>) -> tensor<8x4xf64>"])
        text = program(args, body, ("%y", (8, 4)), mesh=n,
                       layouts={"x": "[S0, R]", "w1": "[R, S0]", "w2": "[S0, R]"})
        values = [RNG.standard_normal(s) for _, s in args]
        ir, _, grads = run_grad(text, values, n)
        assert [g.shape for g in grads] == [(8, 6), (6, 8), (8, 4)]
        sig = next(line for line in ir.splitlines() if "@f_grad" in line)
        assert sig.count('#dtensor.layout<@m, "[R, S0]">') == 2  # w1 and its gradient
        _, _, single = run_grad(program(args, body, ("%y", (8, 4))), values)
        for g, s in zip(grads, single):
            assert np.allclose(g, s, rtol=1e-12, atol=1e-12)


def opt(text, options):
    done = subprocess.run(
        [os.path.join(ROOT, "build", "bin", "dtensor-opt"), "-",
         f"--dtensor-autodiff={options}"], input=text, capture_output=True,
        text=True)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("body, result, options, message", [
    (["%y = math.tanh %x : tensor<3x4xf64>"], ("%y", (3, 4)), "",
     "dtensor-autodiff needs function=NAME"),
    (["%y = math.tanh %x : tensor<3x4xf64>"], ("%y", (3, 4)), "function=g",
     "the module has no function @g"),
    (["%y = math.tanh %x : tensor<3x4xf64>"], ("%y", (3, 4)), "function=f wrt=3",
     "wrt='3' is not a list of argument numbers from 0 to 0"),
    (["%y = math.tanh %x : tensor<3x4xf64>"], ("%y", (3, 4)), "function=f result=1",
     "result=1, but @f has 1 results"),
    (["%y = math.atan %x : tensor<3x4xf64>"], ("%y", (3, 4)), "function=f",
     "'math.atan' op has no derivative in dtensor-autodiff"),
    (generic([("x", (3, 4))], [ID2, ID2], ["parallel", "parallel"], ["%x"],
             (3, 4), ["%r = math.atan %a0 : f64"]), ("%y", (3, 4)), "function=f",
     "'linalg.generic' op has 'math.atan' in its body"),
    (generic([("x", (3, 4))], [ID2, "affine_map<(i, j) -> (i)>"],
             ["parallel", "reduction"], ["%x"], (3,),
             ["%r = arith.mulf %acc, %a0 : f64"]), ("%y", (3,)), "function=f",
     "combines its accumulator other than by add, max or min"),
    (generic([("x", (6, 4))], ["affine_map<(i, j) -> (i + j, j)>",
                               "affine_map<(i, j) -> (i)>"],
             ["parallel", "reduction"], ["%x"], (3,),
             ["%r = arith.addf %acc, %a0 : f64"]), ("%y", (3,)), "function=f",
     "reads operand 0 through an indexing map that is not a projection"),
    (["%i = arith.constant 1 : index",
      "%s = tensor.extract %x[%i, %i] : tensor<3x4xf64>",
      "%y = tensor.splat %s : tensor<3x4xf64>"], ("%y", (3, 4)), "function=f",
     "'tensor.splat' op is on the path of the gradient and has no derivative"),
    # A lookup whose index is read from the accumulator cannot be made a
    # gather: its gradient would be silently zero, so it is an error.
    (["%e = tensor.empty() : tensor<3x4xf64>",
      '%y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], '
      'iterator_types = ["parallel", "parallel"]} outs(%e : tensor<3x4xf64>) {',
      "^bb0(%o: f64):",
      "  %i = linalg.index 0 : index",
      "  %oi = arith.fptosi %o : f64 to i64",
      "  %j = arith.index_cast %oi : i64 to index",
      "  %v = tensor.extract %x[%i, %j] : tensor<3x4xf64>",
      "  linalg.yield %v : f64",
      "} -> tensor<3x4xf64>"], ("%y", (3, 4)), "function=f",
     "'linalg.generic' op reads a value on the gradient's path from inside "
     "its body ('tensor.extract' uses it"),
])
def test_errors_are_located(body, result, options, message):
    shape = (6, 4) if "(i + j, j)" in "".join(body) else (3, 4)
    rc, out = opt(program([("x", shape)], body, result), options)
    assert rc != 0 and message in out, out
    assert "Assertion" not in out and "Stack dump" not in out


def test_recursive_calls_are_refused():
    rec = ('func.func private @r(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {\n'
           '  %y = func.call @r(%x) : (tensor<3x4xf64>) -> tensor<3x4xf64>\n'
           '  return %y : tensor<3x4xf64>\n}\n')
    text = program([("x", (3, 4))], ["%y = func.call @r(%x) : (tensor<3x4xf64>) "
                                     "-> tensor<3x4xf64>"], ("%y", (3, 4)),
                   functions=rec)
    rc, out = opt(text, "function=f")
    assert rc != 0 and "calls @r recursively" in out, out


def test_loops_that_cannot_be_unrolled():
    text = program([("x", (4, 6)), ("ws", (3, 6, 6)), ("u", (6, 6)),
                    ("lo", (1,))], ["%c = arith.constant 0 : index",
                                    "%lo_i = tensor.dim %lo, %c : tensor<1xf64>"]
                   + loop(3, "%lo_i"), ("%y", (4, 6)))
    rc, out = opt(text.replace("%lo: tensor<1xf64>", "%lo: tensor<?xf64>")
                  .replace("tensor.dim %lo, %c : tensor<1xf64>",
                           "tensor.dim %lo, %c : tensor<?xf64>"), "function=f wrt=0")
    assert rc != 0 and "'scf.for' op is on the gradient's path with bounds that " \
        "are not constants" in out, out
    rc, out = opt(program(LOOP_ARGS, loop(1000), ("%y", (4, 6))), "function=f")
    assert rc != 0 and "'scf.for' op runs 1000 times; dtensor-autodiff unrolls " \
        "loops of at most 256 iterations" in out, out


def test_no_gradient_for_integers_or_non_scalars():
    text = ('func.func @f(%x: tensor<3xi32>, %y: tensor<f64>) -> tensor<f64> {\n'
            '  return %y : tensor<f64>\n}\n')
    rc, out = opt(text, "function=f wrt=0")
    assert rc != 0 and "argument 0 is tensor<3xi32>, which has no gradient" in out
    text = ('func.func @f(%x: tensor<3xi32>, %y: tensor<3xf64>) -> tensor<3xf64> {\n'
            '  return %y : tensor<3xf64>\n}\n')
    rc, out = opt(text, "function=f wrt=1")
    assert rc != 0 and "result 0 is tensor<3xf64>; the gradient is of a scalar" in out
