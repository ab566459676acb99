"""Training steps from dtensor-autodiff{optimizer=...}: @f_step's SGD and
Adam updates against numpy (from @f_grad's gradients), and the step of an
MLP run data parallel, FSDP-style (parameters and Adam state sharded over
dp), tensor parallel and FSDP x TP on 2, 4 and 2x2 ranks, every rank's
result equal to the single-device step (the runner compares)."""

import numpy as np
import pytest

import dtensor

RNG = np.random.default_rng(5)
B, D, H, O = 16, 8, 12, 4


def mlp(mesh="1", layouts=None):
    """loss(x, w1, w2) = sum(tanh(x @ w1) @ w2)^2 / 2 on a mesh `mesh`
    ("2", "2x2"), with `layouts` {name: spec} on the arguments."""
    layouts = layouts or {}
    shape = ", ".join(mesh.split("x"))
    axes = ", ".join(f'"a{k}"' for k in range(len(mesh.split("x"))))

    def arg(name, t):
        spec = layouts.get(name)
        attr = (f' {{dtensor.layout = #dtensor.layout<@m, "{spec}">}}'
                if spec else "")
        return f"%{name}: {t}{attr}"

    X, W1, W2 = (f"tensor<{B}x{D}xf64>", f"tensor<{D}x{H}xf64>",
                 f"tensor<{H}x{O}xf64>")
    HT, YT = f"tensor<{B}x{H}xf64>", f"tensor<{B}x{O}xf64>"
    return f'''"dtensor.mesh"() {{sym_name = "m", shape = array<i64: {shape}>, axis_names = [{axes}]}} : () -> ()
func.func @f({arg("x", X)}, {arg("w1", W1)}, {arg("w2", W2)}) -> tensor<f64> {{
  %z = arith.constant 0.0 : f64
  %e1 = tensor.empty() : {HT}
  %i1 = linalg.fill ins(%z : f64) outs(%e1 : {HT}) -> {HT}
  %h = linalg.matmul ins(%x, %w1 : {X}, {W1}) outs(%i1 : {HT}) -> {HT}
  %a = math.tanh %h : {HT}
  %e2 = tensor.empty() : {YT}
  %i2 = linalg.fill ins(%z : f64) outs(%e2 : {YT}) -> {YT}
  %y = linalg.matmul ins(%a, %w2 : {HT}, {W2}) outs(%i2 : {YT}) -> {YT}
  %e3 = tensor.empty() : tensor<f64>
  %i3 = linalg.fill ins(%z : f64) outs(%e3 : tensor<f64>) -> tensor<f64>
  %l = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]}} ins(%y : {YT}) outs(%i3 : tensor<f64>) {{
  ^bb0(%v: f64, %acc: f64):
    %h2 = arith.constant 0.5 : f64
    %q = arith.mulf %v, %v : f64
    %r = arith.mulf %q, %h2 : f64
    %s = arith.addf %acc, %r : f64
    linalg.yield %s : f64
  }} -> tensor<f64>
  return %l : tensor<f64>
}}
'''


def inputs():
    return [RNG.standard_normal(s) for s in ((B, D), (D, H), (H, O))]


def test_sgd_step_against_numpy():
    ir = dtensor.compile(mlp(), "dtensor-autodiff{function=f wrt=1,2 "
                                "optimizer=sgd lr=0.05}")
    x, w1, w2 = inputs()
    loss, g1, g2 = dtensor.run(ir, 1, [x, w1, w2], entry="f_grad")
    out = dtensor.run(ir, 1, [x, w1, w2], entry="f_step")
    assert len(out) == 3 and float(out[0]) == float(loss)
    assert np.allclose(out[1], w1 - 0.05 * g1, rtol=0, atol=1e-12)
    assert np.allclose(out[2], w2 - 0.05 * g2, rtol=0, atol=1e-12)


def adam(p, g, m, v, t, lr=0.01, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mh, vh = m / (1 - b1 ** t), v / (1 - b2 ** t)
    return p - lr * mh / (np.sqrt(vh) + eps), m, v


def test_adam_steps_against_numpy():
    """Three steps, the state carried from one to the next."""
    ir = dtensor.compile(mlp(), "dtensor-autodiff{function=f wrt=1,2 "
                                "optimizer=adam lr=0.01}")
    x, w1, w2 = inputs()
    m1, m2, v1, v2 = (np.zeros_like(w1), np.zeros_like(w2),
                      np.zeros_like(w1), np.zeros_like(w2))
    for t in (1.0, 2.0, 3.0):
        _, g1, g2 = dtensor.run(ir, 1, [x, w1, w2], entry="f_grad")
        want1, wm1, wv1 = adam(w1, g1, m1, v1, t)
        want2, wm2, wv2 = adam(w2, g2, m2, v2, t)
        out = dtensor.run(ir, 1, [x, w1, w2, m1, m2, v1, v2, np.array(t)],
                          entry="f_step")
        _, w1, w2, m1, m2, v1, v2 = out
        for got, want in ((w1, want1), (w2, want2), (m1, wm1), (m2, wm2),
                          (v1, wv1), (v2, wv2)):
            assert np.allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name, mesh, layouts", [
    ("dp-2", "2", {"x": "[S0, R]", "w1": "[R, R]", "w2": "[R, R]"}),
    ("dp-4", "4", {"x": "[S0, R]", "w1": "[R, R]", "w2": "[R, R]"}),
    ("fsdp-2", "2", {"x": "[S0, R]", "w1": "[S0, R]", "w2": "[S0, R]"}),
    ("fsdp-4", "4", {"x": "[S0, R]", "w1": "[S0, R]", "w2": "[S0, R]"}),
    ("tp-4", "4", {"x": "[R, R]", "w1": "[R, S0]", "w2": "[S0, R]"}),
    ("fsdp-x-tp-2x2", "2x2", {"x": "[S0, R]", "w1": "[S0, S1]",
                              "w2": "[S1, S0]"}),
])
def test_sharded_adam_step_equals_single_device(name, mesh, layouts):
    ir = dtensor.compile(mlp(mesh, layouts), "dtensor-autodiff{function=f "
                         "wrt=1,2 optimizer=adam lr=0.01}")
    sig = next(line for line in ir.splitlines() if "@f_step" in line)
    # Each parameter's state is laid out as the parameter, in and out: six
    # places per parameter (x: one).
    spec = layouts["w1"]
    want = (layouts["x"] == spec) + 6 * sum(layouts[w] == spec
                                            for w in ("w1", "w2"))
    assert sig.count(f'#dtensor.layout<@m, "{spec}">') == want, sig
    x, w1, w2 = inputs()
    state = [np.full_like(w1, 0.01), np.full_like(w2, 0.02),
             np.full_like(w1, 0.001), np.full_like(w2, 0.002), np.array(2.0)]
    n = int(np.prod([int(k) for k in mesh.split("x")]))
    out = dtensor.run(ir, n, [x, w1, w2] + state, entry="f_step")
    ref = dtensor.compile(mlp(), "dtensor-autodiff{function=f wrt=1,2 "
                          "optimizer=adam lr=0.01}")
    want = dtensor.run(ref, 1, [x, w1, w2] + state, entry="f_step")
    for got, w in zip(out, want):
        assert np.allclose(got, w, rtol=1e-12, atol=1e-13)


def test_bad_optimizer_options():
    for options, message in [
            ("optimizer=sgd lr=0", "lr='0' is not a number in (0, inf)"),
            ("optimizer=adam beta1=1", "beta1='1' is not a number in [0, 1)"),
            ("optimizer=adam eps=x", "eps='x' is not a number in (0, inf)"),
            ("optimizer=rmsprop", "rmsprop")]:
        with pytest.raises(dtensor.CompileError) as e:
            dtensor.compile(mlp(), f"dtensor-autodiff{{function=f {options}}}")
        assert message in str(e.value), str(e.value)
