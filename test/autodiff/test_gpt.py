"""dtensor-autodiff on a whole GPT block (bench/exec/programs.py's, in f64:
pre-norm layer norms, causal attention with softmax and head reshapes,
tanh-gelu MLP, residuals) with a sum-of-squares loss: its gradients against
finite differences, and its Adam step tensor parallel (2), data parallel
(2, 4), FSDP (2) and FSDP x TP (2x2), every rank equal to the
single-device step (the runner compares)."""

import os
import re
import sys

import numpy as np
import pytest

import dtensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "exec"))
from programs import gpt_program  # noqa: E402

B, S, H, NH, F = 1, 4, 8, 2, 16
T = B * S
NAMES = ["x", "wq", "wk", "wv", "wo", "w1", "w2"]
SHAPES = [(T, H), (H, H), (H, H), (H, H), (H, H), (H, F), (F, H)]


def gpt_loss(mesh_shape=(2,), axes=("tp",), layouts=None):
    """The block (tensor parallel on a 1-d mesh as generated, or with
    `layouts` {argument: spec} on `mesh_shape`) returning
    sum(block(x)^2)."""
    t = gpt_program(2, b=B, s=S, h=H, nh=NH, f=F, et="f32")
    t = t.replace("f32", "f64").replace("0xFF800000", "0xFFF0000000000000")
    head, rest = t.split('">}) -> (', 1)
    t = head + '">}) -> tensor<f64> {' + rest.split("}) {", 1)[1]
    X = f"tensor<{T}x{H}xf64>"
    t = t.replace(f"  return %y : {X}\n}}\n", f"""  %le = tensor.empty() : tensor<f64>
  %li = linalg.fill ins(%zero : f64) outs(%le : tensor<f64>) -> tensor<f64>
  %loss = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]}} ins(%y : {X}) outs(%li : tensor<f64>) {{
  ^bb0(%v: f64, %a: f64):
    %q = arith.mulf %v, %v : f64
    %r = arith.addf %a, %q : f64
    linalg.yield %r : f64
  }} -> tensor<f64>
  return %loss : tensor<f64>
}}
""")
    mesh = (f'"dtensor.mesh"() {{sym_name = "m", shape = array<i64: '
            f'{", ".join(map(str, mesh_shape))}>, axis_names = '
            f'[{", ".join(repr(a).replace(chr(39), chr(34)) for a in axes)}]}}'
            " : () -> ()")
    t = mesh + t[t.index("\n"):]
    for name, spec in (layouts or {}).items():
        t, n = re.subn(rf'(%{name}: tensor<[^>]*>) {{dtensor.layout = '
                       r'#dtensor.layout<@m, "[^"]*">}',
                       rf'\1 {{dtensor.layout = #dtensor.layout<@m, "{spec}">}}',
                       t)
        assert n == 1, name
    return t


def values(seed=3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) * 0.5 for s in SHAPES]


def test_gpt_block_gradients_match_finite_differences():
    """Gradients by every argument, computed tensor parallel on 2 ranks,
    along two random directions."""
    ir = dtensor.compile(gpt_loss(), "dtensor-autodiff{function=gpt}")
    args = values()
    grads = dtensor.run(ir, 2, args, entry="gpt_grad")[1:]
    rng = np.random.default_rng(4)
    for _ in range(2):
        v = [rng.standard_normal(s) for s in SHAPES]
        eps = 1e-6
        fp, = dtensor.run(ir, 2, [a + eps * d for a, d in zip(args, v)],
                          entry="gpt")
        fm, = dtensor.run(ir, 2, [a - eps * d for a, d in zip(args, v)],
                          entry="gpt")
        fd = (float(fp) - float(fm)) / (2 * eps)
        an = sum(float((g * d).sum()) for g, d in zip(grads, v))
        assert abs(fd - an) <= 1e-6 * max(1.0, abs(an)), (fd, an)


REPLICATED = {n: "[R, R]" for n in NAMES[1:]}


@pytest.mark.parametrize("name, mesh, axes, layouts", [
    ("tp-2", (2,), ("tp",), None),
    ("dp-2", (2,), ("dp",), {"x": "[S0, R]", **REPLICATED}),
    ("dp-4", (4,), ("dp",), {"x": "[S0, R]", **REPLICATED}),
    ("fsdp-2", (2,), ("dp",), {"x": "[S0, R]",
                               **{n: "[S0, R]" for n in NAMES[1:]}}),
    ("fsdp-x-tp-2x2", (2, 2), ("dp", "tp"), {
        "x": "[S0, R]", "wq": "[S0, S1]", "wk": "[S0, S1]", "wv": "[S0, S1]",
        "wo": "[S1, S0]", "w1": "[S0, S1]", "w2": "[S1, S0]"}),
])
def test_gpt_block_adam_step_equals_single_device(name, mesh, axes, layouts):
    text = gpt_loss(mesh, axes, layouts)
    ir = dtensor.compile(text, "dtensor-autodiff{function=gpt wrt=1,2,3,4,5,6 "
                               "optimizer=adam lr=0.01}")
    args = values()
    params = args[1:]
    state = ([np.full_like(p, 0.01) for p in params] +
             [np.full_like(p, 0.001) for p in params] + [np.array(3.0)])
    n = int(np.prod(mesh))
    out = dtensor.run(ir, n, args + state, entry="gpt_step")
    assert len(out) == 1 + 3 * len(params)
    # And against the one-device program's step, compiled on its own.
    one = dtensor.compile(gpt_loss((1,), axes[:1], {k: "[R, R]" for k in NAMES}),
                          "dtensor-autodiff{function=gpt wrt=1,2,3,4,5,6 "
                          "optimizer=adam lr=0.01}")
    want = dtensor.run(one, 1, args + state, entry="gpt_step")
    for got, w in zip(out, want):
        assert np.allclose(got, w, rtol=1e-10, atol=1e-12)
