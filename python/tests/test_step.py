"""dtensor.compile(..., entry=...) -> Step: compiled once, one step per
call, results by name, a training step's parameters and Adam state carried
to the next call by name; against numpy's Adam on the same MLP."""

import os
import sys

import numpy as np
import pytest

import dtensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "autodiff"))
from test_training import B, D, H, O, mlp  # noqa: E402

LR = 0.01


def numpy_adam_steps(x, w1, w2, steps):
    """The MLP's loss and Adam (PyTorch's defaults but lr) in numpy."""
    params = [w1.copy(), w2.copy()]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    losses = []
    for t in range(1, steps + 1):
        h = x @ params[0]
        a = np.tanh(h)
        y = a @ params[1]
        losses.append(0.5 * float((y * y).sum()))
        g2 = a.T @ y
        g1 = x.T @ ((y @ params[1].T) * (1 - a * a))
        for k, g in enumerate((g1, g2)):
            m[k] = 0.9 * m[k] + 0.1 * g
            v[k] = 0.999 * v[k] + 0.001 * g * g
            mh, vh = m[k] / (1 - 0.9 ** t), v[k] / (1 - 0.999 ** t)
            params[k] = params[k] - LR * mh / (np.sqrt(vh) + 1e-8)
    return losses, params


@pytest.mark.parametrize("mesh,layouts,check", [
    ("1", {}, False),
    ("2", {"x": "[S0, R]"}, True),          # data parallel, checked
    ("2", {"w1": "[R, S0]", "w2": "[S0, R]"}, False),  # tensor parallel
])
def test_training_loop_compiled_once(mesh, layouts, check):
    rng = np.random.default_rng(1)
    x, w1, w2 = (rng.standard_normal(s) for s in ((B, D), (D, H), (H, O)))
    ir = dtensor.compile(mlp(mesh, layouts),
                         f"dtensor-autodiff{{function=f wrt=1,2 "
                         f"optimizer=adam lr={LR}}}")
    with dtensor.compile(ir, entry="f_step", check=check) as step:
        assert step.arguments == ["arg0", "arg1", "arg2", "arg1.exp_avg",
                                  "arg2.exp_avg", "arg1.exp_avg_sq",
                                  "arg2.exp_avg_sq", "adam.step"]
        assert step.results[1:] == step.arguments[1:7]
        state = {"arg0": x, "arg1": w1, "arg2": w2}
        for k in ("arg1", "arg2"):
            state[k + ".exp_avg"] = np.zeros_like(state[k])
            state[k + ".exp_avg_sq"] = np.zeros_like(state[k])
        losses = []
        for t in range(1, 5):
            out = step({"adam.step": np.array(float(t))},
                       state=state if t == 1 else None)
            losses.append(float(out["result0"]))
        want, params = numpy_adam_steps(x, w1, w2, 4)
        np.testing.assert_allclose(losses, want, rtol=1e-10)
        np.testing.assert_allclose(step.state["arg1"], params[0], rtol=1e-9)
        np.testing.assert_allclose(step.state["arg2"], params[1], rtol=1e-9)


def test_step_errors_name_the_argument():
    ir = dtensor.compile(mlp("2", {"x": "[S0, R]"}),
                         "dtensor-autodiff{function=f wrt=1,2 optimizer=adam}")
    step = dtensor.compile(ir, entry="f_step", n=2)
    with pytest.raises(dtensor.DtensorError, match="no value for arguments"):
        step({"arg0": np.zeros((B, D))})
    with pytest.raises(dtensor.DtensorError,
                       match="'w9' not an argument of the entry"):
        step({"w9": np.zeros(3)})
    step.close()
    with pytest.raises(dtensor.DtensorError, match="closed"):
        step({})
    with pytest.raises(dtensor.DtensorError, match="compile it with n=2"):
        dtensor.compile(ir, entry="f_step", n=4)


def test_a_one_device_program_needs_no_mesh():
    """A program without dtensor.mesh runs on one device (the runner
    declares one), compiled once or through dtensor.run."""
    text = ("func.func @f(%a: tensor<4xf32> {dtensor.name = \"a\"}) -> "
            "tensor<4xf32> {\n"
            "  %b = arith.mulf %a, %a : tensor<4xf32>\n"
            "  return %b : tensor<4xf32>\n}\n")
    a = np.arange(4, dtype=np.float32)
    y, = dtensor.run(text, 1, {"a": a})
    np.testing.assert_array_equal(y, a * a)
    with dtensor.compile(text, entry="f") as step:
        assert step.n == 1
        out = step({"a": a + 1})
        np.testing.assert_array_equal(out["result0"], (a + 1) ** 2)
    with pytest.raises(dtensor.DtensorError, match="mesh has 1 devices"):
        dtensor.run(text, 2, {"a": a})


def tensor_parallel_adam(seed):
    """The MLP's inputs, its Adam step on 2 ranks (tensor parallel) and the
    step's initial state."""
    rng = np.random.default_rng(seed)
    x, w1, w2 = (rng.standard_normal(s) for s in ((B, D), (D, H), (H, O)))
    ir = dtensor.compile(mlp("2", {"w1": "[R, S0]", "w2": "[S0, R]"}),
                         f"dtensor-autodiff{{function=f wrt=1,2 "
                         f"optimizer=adam lr={LR}}}")
    state = {"arg0": x, "arg1": w1, "arg2": w2}
    for k in ("arg1", "arg2"):
        state[k + ".exp_avg"] = np.zeros_like(state[k])
        state[k + ".exp_avg_sq"] = np.zeros_like(state[k])
    return x, w1, w2, ir, state


def test_ranks_stay_up_and_keep_the_state():
    """Unchecked, the ranks are started once and the carried state stays on
    them: a call returns only what is not carried (the loss), step.state
    fetches the rest from the ranks, and a checked call in between (check
    switched on and off) takes the state home and back."""
    x, w1, w2, ir, state = tensor_parallel_adam(2)
    with dtensor.compile(ir, entry="f_step") as step:
        assert step._session, "an unchecked CPU step keeps its ranks"
        losses = []
        for t in range(1, 7):
            step.check = t == 4  # one call checked rank by rank
            out = step({"adam.step": np.array(float(t))},
                       state=state if t == 1 else None)
            if t != 4:
                assert set(out) == {"result0"}, out.keys()
            losses.append(float(out["result0"]))
        want, params = numpy_adam_steps(x, w1, w2, 6)
        np.testing.assert_allclose(losses, want, rtol=1e-10)
        np.testing.assert_allclose(step.state["arg1"], params[0], rtol=1e-9)
        np.testing.assert_allclose(step.state["arg2"], params[1], rtol=1e-9)
        # A new value replaces the carried one on the ranks.
        step({"arg1": w1, "adam.step": np.array(7.0)})
        np.testing.assert_allclose(step.state["arg1"].shape, w1.shape)
        with pytest.raises(dtensor.DtensorError, match=r"'arg1': shape \(3,\)"):
            step({"arg1": np.zeros(3)})
        with pytest.raises(dtensor.DtensorError,
                           match="'arg0': element type complex64, where the "
                                 "argument's is f64"):
            step({"arg0": np.zeros((B, D), np.complex64)})


def test_profile_of_the_steps(tmp_path):
    """compile(..., profile=True): every op the ranks run is timed; the
    profile is a Chrome trace (a track per rank) and a table by op, one
    call per rank and step, the largest total first; the results are those
    of the unprofiled step."""
    import json
    x, w1, w2, ir, state = tensor_parallel_adam(3)
    losses = []
    with dtensor.compile(ir, entry="f_step", profile=True) as step:
        for t in range(1, 4):
            losses.append(float(step({"adam.step": np.array(float(t))},
                                     state=state if t == 1 else None)
                                ["result0"]))
        table = step.profile(str(tmp_path / "trace.json"))
        with dtensor.compile(ir, entry="f_step") as plain, \
                pytest.raises(dtensor.DtensorError, match="not compiled with"):
            plain.profile("x.json")
    want, _ = numpy_adam_steps(x, w1, w2, 3)
    np.testing.assert_allclose(losses, want, rtol=1e-10)
    assert table and all(r["calls"] == 2 * 3 for r in table), table[:3]
    totals = [r["total_ms"] for r in table]
    assert totals == sorted(totals, reverse=True)
    ops = " ".join(r["op"] for r in table)
    assert "dtrt_mlir_contract" in ops and "linalg.generic" in ops, ops
    assert "dtrt_mlir_collective_start" in ops, ops
    with open(tmp_path / "trace.json") as f:
        trace = json.load(f)["traceEvents"]
    assert {e["pid"] for e in trace if e["ph"] == "X"} == {0, 1}


def _children(pid):
    """The processes whose parent is `pid`."""
    out = []
    for p in os.listdir("/proc"):
        try:
            with open(f"/proc/{p}/stat") as f:
                if p.isdigit() and int(f.read().rsplit(") ", 1)[1]
                                       .split()[1]) == pid:
                    out.append(int(p))
        except (OSError, ValueError, IndexError):
            pass
    return out


def test_a_rank_that_dies_is_an_error_not_a_hang():
    """A rank of the ranks that stay up killed between calls: the next call
    fails at once naming it (the launcher stops the others), so does every
    later one, and close() leaves no process behind."""
    import signal
    _, _, _, ir, state = tensor_parallel_adam(4)
    before = set(_children(os.getpid()))  # other tests' steps not yet freed
    step = dtensor.compile(ir, entry="f_step")
    step({"adam.step": np.array(1.0)}, state=state)
    launcher, = set(_children(os.getpid())) - before
    ranks = _children(launcher)
    assert len(ranks) == 2
    os.kill(ranks[1], signal.SIGKILL)
    for t in (2.0, 3.0):
        with pytest.raises(dtensor.DtensorError,
                           match="rank 1 was killed by signal 9"):
            step({"adam.step": np.array(t)})
    step.close()
    assert launcher not in _children(os.getpid())
    assert not any(os.path.exists(f"/proc/{r}") and
                   open(f"/proc/{r}/stat").read().rsplit(") ", 1)[1][0] != "Z"
                   for r in ranks)
