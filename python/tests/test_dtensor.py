"""Tests of the dtensor Python package (pytest, Debian's numpy), run by the
README's test command through ctest (python-tests)."""

import ctypes
import os
import shutil

import numpy as np
import pytest

import dtensor

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
MEGATRON = os.path.join(ROOT, "examples", "megatron.mlir")


# ---- meshes and layouts -------------------------------------------------------

def test_mesh_properties():
    m = dtensor.Mesh("dp=2,tp=4")
    assert m.shape == (2, 4)
    assert m.axis_names == ("dp", "tp")
    assert m.num_devices == 8
    assert str(m) == "dp=2,tp=4"
    assert dtensor.Mesh("2x3").axis_names == ("a0", "a1")


def test_bad_mesh_raises_with_the_message():
    with pytest.raises(dtensor.DtensorError, match="mesh '2xx'"):
        dtensor.Mesh("2xx")


def test_closed_mesh_is_refused():
    with dtensor.Mesh("4") as m:
        assert m.num_devices == 4
    with pytest.raises(dtensor.DtensorError, match="closed"):
        m.num_devices


def test_layout_of_a_closed_mesh_is_refused():
    m = dtensor.Mesh("4")
    layout = dtensor.Layout(m, "[S0]", (8,))
    m.close()
    with pytest.raises(dtensor.DtensorError, match="closed"):
        layout.local_shape(0)


def test_uneven_layout():
    # 10 rows over 4 devices: ceil-div chunks 3, 3, 3, 1.
    layout = dtensor.Layout("4", "[S0, R]", (10, 8))
    assert [layout.local_shape(d) for d in range(4)] == [
        (3, 8), (3, 8), (3, 8), (1, 8)]
    assert layout.padded_shape == (3, 8)
    assert not layout.is_even
    assert layout.index_ranges(3) == [[(9, 10)], [(0, 8)]]
    assert layout.owners((9, 0)) == (3,)


def test_layout_on_a_2d_mesh_with_names():
    layout = dtensor.Layout(dtensor.Mesh("dp=2,tp=4"), "[S(tp), S(dp)]",
                            (10, 8))
    assert layout.spec == "[S1, S0]"
    assert layout.local_shape(7) == (1, 4)
    assert layout.owners((9, 7)) == (7,)
    # Replicated along tp: every device of a dp row holds it.
    rep = dtensor.Layout("dp=2,tp=4", "[S(dp), R]", (4, 4))
    assert rep.owners((0, 0)) == (0, 1, 2, 3)


def test_picture_draws_the_grid():
    picture = dtensor.Layout("2x2", "[S0, S1]", (4, 6)).picture()
    assert "spec [S0, S1]" in picture
    assert "+--------------+--------------+" in picture
    assert "device  coords" in picture


def test_bad_spec_and_device_raise():
    with pytest.raises(dtensor.DtensorError, match="column"):
        dtensor.Layout("4", "[S0, X]", (8, 8))
    with pytest.raises(dtensor.DtensorError, match="out of range|axis"):
        dtensor.Layout("4", "[S3]", (8,))
    layout = dtensor.Layout("4", "[S0]", (8,))
    with pytest.raises(dtensor.DtensorError, match="device 4"):
        layout.local_shape(4)
    with pytest.raises(dtensor.DtensorError, match="element type"):
        dtensor.Layout("4", "[S0]", (8,), dtype="f128")


def test_text_arguments_are_checked_before_c_sees_them():
    # None used to reach C as a null pointer (a segmentation fault), and a
    # NUL cut the text short.
    with pytest.raises(TypeError, match="expected a string, not NoneType"):
        dtensor.Layout("4", None, (8,))
    with pytest.raises(TypeError, match="expected a string"):
        dtensor.Mesh(None)
    with pytest.raises(TypeError, match="expected a string"):
        dtensor.compile(None)
    with pytest.raises(ValueError, match="NUL"):
        dtensor.Layout("4", "[S0]\0, R", (8,))


# ---- the LayoutConverter ---------------------------------------------------------

def test_plan_transpose_on_2x4():
    layout = dtensor.Layout("2x4", "[S0, S1]", (64, 32))
    p = dtensor.plan(layout, "[S1, S0]")
    assert [s["after"] for s in p.steps][-1] == "[S1, S0]"
    assert any("all_to_all" in s["comm"] for s in p.steps)
    assert p.forward_us > 0
    assert "total:" in p.text
    greedy = dtensor.plan(layout, "[S1, S0]", strategy="greedy")
    assert greedy.forward_us >= p.forward_us


def test_plan_of_a_partial_is_an_all_reduce():
    p = dtensor.plan(dtensor.Layout("4", "[R] Psum(0)", (16,)), "[R]")
    assert len(p.steps) == 1 and p.steps[0]["comm"].startswith("all_reduce")


def test_plan_of_interleaved_shards_runs_in_a_view():
    p = dtensor.plan(dtensor.Layout("2", "[R, S0i3]", (8, 24)), "[R, R]")
    assert [s["view"] for s in p.steps] == [(1, 3)]
    assert p.steps[0]["comm"].startswith("all_gather") and p.steps[0]["after"] == "[R, R, R]"
    assert "view dim 1 as 3 groups" in p.text


def test_impossible_plan_raises():
    with pytest.raises(dtensor.DtensorError,
                       match="Partial\\(max\\) cannot become Partial\\(min\\)"):
        dtensor.plan(dtensor.Layout("4", "[R] Pmax(0)", (16,)), "[R] Pmin(0)")


def test_plan_creates_a_partial_locally():
    p = dtensor.plan(dtensor.Layout("4", "[S0]", (16,)), "[R] Psum(0)")
    assert [s["comm"].split("(")[0] for s in p.steps] == [
        "all_gather", "local_partial"]


# ---- the compiler ---------------------------------------------------------------

def test_compile_megatron_has_one_all_reduce():
    with open(MEGATRON) as f:
        ir = dtensor.compile(f.read())
    assert ir.count('"dtensor.all_reduce"') == 1
    assert '"dtensor.all_gather"' not in ir
    assert "tensor<64x64xf32>" in ir  # w1's local block


def test_compile_with_a_pipeline():
    with open(MEGATRON) as f:
        ir = dtensor.compile(f.read(), "dtensor-spmd, dtensor-to-llvm")
    assert "llvm.call @dtrt_mlir_collective_start_f32" in ir


def test_compile_error_has_the_location():
    bad = ("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
           "  return %b : tensor<4xf32>\n}\n")
    with pytest.raises(dtensor.CompileError) as e:
        dtensor.compile(bad, name="bad.mlir")
    assert "bad.mlir:2:" in str(e.value)
    assert e.value.diagnostics and "error:" in e.value.diagnostics[0]


def test_compile_error_of_a_layout():
    bad = ('"dtensor.mesh"() {sym_name = "m", shape = array<i64: 4>, '
           'axis_names = ["x"]} : () -> ()\n'
           'func.func @f(%a: tensor<8xf32> {dtensor.layout = '
           '#dtensor.layout<@m, "[S3]">}) -> tensor<8xf32> {\n'
           '  return %a : tensor<8xf32>\n}\n')
    with pytest.raises(dtensor.CompileError, match="prog.mlir:2:1: error:.*"
                       "mesh axis 3"):
        dtensor.compile(bad, name="prog.mlir")


def test_bad_pipeline_raises():
    with pytest.raises(dtensor.CompileError, match="pipeline"):
        dtensor.compile("module {}", "no-such-pass")


# ---- running ----------------------------------------------------------------------

def test_run_megatron_on_four_ranks():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    w1 = rng.standard_normal((64, 256)).astype(np.float32)
    w2 = rng.standard_normal((256, 64)).astype(np.float32)
    y, = dtensor.run(MEGATRON, 4, [x, w1, w2])
    ref = x.astype(np.float64) @ w1 @ w2
    assert y.shape == (16, 64)
    assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max()


def test_run_is_in_process_and_leaves_other_children_alone(monkeypatch):
    # On shm no tool is started: the ranks are forked from this process.
    monkeypatch.setenv("DTENSOR_BIN_DIR", "/nonexistent")
    import subprocess
    other = subprocess.Popen(["sh", "-c", "sleep 0.2; exit 7"])
    x = np.ones((16, 64), np.float32)
    w1 = np.full((64, 256), 0.5, np.float32)
    w2 = np.full((256, 64), 0.25, np.float32)
    y, = dtensor.run(MEGATRON, 4, [x, w1, w2])
    assert np.allclose(y, 64 * 0.5 * 256 * 0.25)
    # The launcher waited for its ranks only.
    assert other.wait() == 7


def test_run_with_the_wrong_rank_count_or_a_bad_program():
    x = np.ones((16, 64), np.float32)
    with pytest.raises(dtensor.DtensorError,
                       match="mesh has 4 devices; run it with n=4"):
        dtensor.run(MEGATRON, 2, [x, x, x])
    bad = ('"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, '
           'axis_names = ["d"]} '
           ': () -> ()\nfunc.func @f(%a: tensor<4xf32> {dtensor.layout = '
           '#dtensor.layout<@m, "[S(nope)]">}) -> tensor<4xf32> {\n'
           '  return %a : tensor<4xf32>\n}\n')
    with pytest.raises(dtensor.CompileError, match="nope"):
        dtensor.run(bad, 2, [])


def test_run_program_text_on_mpi():
    with open(MEGATRON) as f:
        text = f.read()
    x = np.ones((16, 64), np.float32)
    w1 = np.full((64, 256), 0.5, np.float32)
    w2 = np.full((256, 64), 0.25, np.float32)
    y, = dtensor.run(text, 4, [x, w1, w2], backend="mpi")
    assert np.allclose(y, 64 * 0.5 * 256 * 0.25)


AUTO_NOMESH = os.path.join(ROOT, "test", "Transforms", "Inputs",
                           "auto-nomesh.mlir")


def test_auto_chooses_the_layouts_of_a_single_device_program():
    """auto= splits a program without a mesh over n devices: numbers
    against numpy's, on shm and mpi, a compiled Step, and the IR."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 64), dtype=np.float32)
    w1 = rng.standard_normal((64, 256), dtype=np.float32)
    w2 = rng.standard_normal((256, 64), dtype=np.float32)
    want = (x.astype(np.float64) @ w1) @ w2
    y, = dtensor.run(AUTO_NOMESH, 4, [x, w1, w2], auto=True)
    assert np.allclose(y, want, rtol=1e-4, atol=1e-3)
    y, = dtensor.run(AUTO_NOMESH, 2, [x, w1, w2], backend="mpi",
                     auto={"memory": 100000})
    assert np.allclose(y, want, rtol=1e-4, atol=1e-3)
    step = dtensor.compile(AUTO_NOMESH, n=4, auto="memory=60000")
    try:
        out = step({"arg0": x, "arg1": w1, "arg2": w2})
        assert np.allclose(list(out.values())[0], want, rtol=1e-4, atol=1e-3)
    finally:
        step.close()
    # Under 60000 bytes per device, Megatron's plan: one all_reduce.
    ir = dtensor.compile(open(AUTO_NOMESH).read(), "dtensor-spmd",
                         auto={"mesh": "4", "memory": 60000})
    assert ir.count('"dtensor.all_reduce"') == 1


def test_auto_mistakes_are_errors():
    with open(AUTO_NOMESH) as f:
        text = f.read()
    with pytest.raises(dtensor.CompileError,
                       match="declares no dtensor.mesh"):
        dtensor.compile(text, "dtensor-spmd", auto=True)
    with pytest.raises(dtensor.CompileError, match="no option 'bogus'"):
        dtensor.compile(text, "dtensor-spmd", auto={"bogus": 1})
    with pytest.raises(dtensor.CompileError, match="no layouts fit"):
        dtensor.run(text, 4, [], auto={"memory": 1})
    with pytest.raises(dtensor.CompileError, match="mesh is tp=4"):
        dtensor.run(MEGATRON, 2, [], auto=True)
    with pytest.raises(TypeError, match="auto must be"):
        dtensor.compile(text, "dtensor-spmd", auto=3)


def test_run_failure_raises_with_the_output():
    x = np.ones((8, 8), np.float32)  # the wrong shape for x
    with pytest.raises(dtensor.DtensorError,
                       match="'arg0' is f32 8x8, but argument 0 of the "
                             "entry is f32 16x64"):
        dtensor.run(MEGATRON, 4, [x, x, x])


# A sum whose order decides the value: 1e8 + 1 rounds to 1e8 in f32, so
# the two ranks' halves sum to 0 where one device's sum is 1.
ORDERED_SUM = """
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @s(%x: tensor<4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0]">})
    -> (tensor<f32> {dtensor.layout = #dtensor.layout<@m, "[] Psum(0)">}) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.reduce ins(%x : tensor<4xf32>) outs(%i : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %r : tensor<f32>
}
"""


@pytest.mark.parametrize("backend", ["shm", "mpi"])
def test_run_takes_a_tolerance(backend):
    x = np.array([1e8, 1, -1e8, 1], np.float32)
    with pytest.raises(dtensor.DtensorError,
                       match="(?i)differ.* from the single-device run"):
        dtensor.run(ORDERED_SUM, 2, [x], backend=backend)
    y, = dtensor.run(ORDERED_SUM, 2, [x], backend=backend, atol=2)
    assert y == 0
    with pytest.raises(dtensor.DtensorError, match="(?i)differ"):
        dtensor.run(ORDERED_SUM, 2, [x], backend=backend, rtol=0.5)


NAMED_ARGS = """
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @f(%a: tensor<4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0]">, dtensor.name = "w"},
             %b: tensor<4xf32> {dtensor.name = "b"}) -> tensor<4xf32> {
  %s = arith.subf %a, %b : tensor<4xf32>
  return %s : tensor<4xf32>
}
"""


@pytest.mark.parametrize("backend", ["shm", "mpi"])
def test_run_takes_a_list_for_named_arguments(backend):
    # A list of inputs failed once the entry's arguments had names.
    w, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    y, = dtensor.run(NAMED_ARGS, 2, [w, b], backend=backend)
    assert np.array_equal(y, w - b)
    y, = dtensor.run(NAMED_ARGS, 2, {"b": b, "w": w}, backend=backend)
    assert np.array_equal(y, w - b)


def test_run_refuses_an_argument_given_twice():
    w = np.ones(4, np.float32)
    with pytest.raises(dtensor.DtensorError,
                       match="argument 0 of the entry is given twice, as "
                             "'arg0' and as 'w'"):
        dtensor.run(NAMED_ARGS, 2, {"arg0": w, "w": w, "b": w})


def test_run_refuses_an_input_no_argument_takes():
    x = np.ones((16, 64), np.float32)
    w1 = np.ones((64, 256), np.float32)
    w2 = np.ones((256, 64), np.float32)
    with pytest.raises(dtensor.DtensorError,
                       match="'arg3' is given, but the entry takes 3 "
                             "arguments"):
        dtensor.run(MEGATRON, 4, [x, w1, w2, x])


def test_run_names_a_named_input_no_argument_takes():
    x = np.ones((16, 64), np.float32)
    with pytest.raises(dtensor.DtensorError,
                       match="input 'x' is not an argument of the entry "
                             r"\(its arguments: arg0, arg1, arg2\)"):
        dtensor.run(MEGATRON, 4, {"x": x})


def test_mesh_of_the_wrong_type_raises_without_finalizer_noise(capfd):
    with pytest.raises(TypeError):
        dtensor.Mesh("cuda", (4,))  # PyTorch's DeviceMesh signature
    with pytest.raises(TypeError, match="not int"):
        dtensor.Mesh(4)
    import gc
    gc.collect()
    assert "Exception ignored" not in capfd.readouterr().err


# ---- checkpoints ----------------------------------------------------------------

def test_checkpoint_round_trip(tmp_path):
    ck = str(tmp_path / "ck")
    a = np.arange(10 * 6, dtype=np.float32).reshape(10, 6)
    b = np.arange(7, dtype=np.int64) - 3
    c = np.linspace(-1, 1, 12).reshape(3, 4)
    dtensor.save_checkpoint(ck, {"a": (a, "4", "[S0, R]"), "b": b,
                                 "c": (c, "2x2", "[S1, S0]")})
    info = {t["name"]: t for t in dtensor.checkpoint_info(ck)}
    assert info["a"]["shards"] == 4 and info["a"]["spec"] == "[S0, R]"
    assert info["b"]["dtype"] == "i64" and info["b"]["shards"] == 1
    dtensor.verify_checkpoint(ck)
    got = dtensor.load_checkpoint(ck)
    assert np.array_equal(got["a"], a) and got["a"].dtype == np.float32
    assert np.array_equal(got["b"], b)
    assert np.array_equal(got["c"], c)


def test_checkpoint_save_is_one_step(tmp_path):
    # Each tensor was committed on its own: a save that failed (or was
    # killed) at its second tensor left the first one of the new step.
    ck = str(tmp_path / "ck")
    old = np.zeros((4, 2), np.float32)
    dtensor.save_checkpoint(ck, {"a": old, "b": old})
    new = np.ones((4, 2), np.float32)
    with pytest.raises(dtensor.DtensorError, match="'b'"):
        dtensor.save_checkpoint(ck, {"a": new, "b": (new, "2", "[S7, R]")})
    got = dtensor.load_checkpoint(ck)
    assert np.array_equal(got["a"], old) and np.array_equal(got["b"], old)
    dtensor.save_checkpoint(ck, {"a": new, "c": (new, "2", "[S0, R]")})
    got = dtensor.load_checkpoint(ck)
    assert np.array_equal(got["a"], new) and np.array_equal(got["b"], old)
    assert np.array_equal(got["c"], new)
    # Through a link, as a training loop's 'latest' is: the directory it
    # names is written, the link stays.
    os.symlink("ck", str(tmp_path / "latest"))
    dtensor.save_checkpoint(str(tmp_path / "latest"), {"d": new})
    assert os.path.islink(str(tmp_path / "latest"))
    assert set(dtensor.load_checkpoint(ck)) == {"a", "b", "c", "d"}


def test_checkpoint_convert_and_corruption(tmp_path):
    ck, out = str(tmp_path / "ck"), str(tmp_path / "out")
    a = np.arange(9 * 5, dtype=np.float64).reshape(9, 5)
    dtensor.save_checkpoint(ck, {"a": (a, "2", "[S0, R]")})
    dtensor.convert_checkpoint(ck, out, "2x2", {"a": "[S1, S0]"})
    assert dtensor.checkpoint_info(out)[0]["spec"] == "[S1, S0]"
    assert np.array_equal(dtensor.load_checkpoint(out)["a"], a)
    shard = sorted(f for f in os.listdir(out) if f.endswith(".bin"))[0]
    with open(os.path.join(out, shard), "r+b") as f:
        f.seek(2)
        f.write(b"\xff")
    with pytest.raises(dtensor.DtensorError, match=f"{shard}: corrupted"):
        dtensor.verify_checkpoint(out)
    with pytest.raises(dtensor.DtensorError, match="no tensor 'z'"):
        dtensor.load_checkpoint(ck, ["z"])


def test_checkpoint_errors(tmp_path):
    with pytest.raises(dtensor.DtensorError, match="a checkpoint"):
        dtensor.checkpoint_info(str(tmp_path / "none"))
    with pytest.raises(dtensor.DtensorError, match="element type"):
        dtensor.save_checkpoint(str(tmp_path / "ck"),
                                {"u": np.zeros(3, np.uint16)})
    with pytest.raises(dtensor.DtensorError, match="spec"):
        dtensor.save_checkpoint(str(tmp_path / "ck"),
                                {"a": (np.zeros(4, np.float32), "4", "[S7]")})


# ---- no C objects left behind --------------------------------------------------

class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
        "fsmblks", "uordblks", "fordblks", "keepcost")]


def _heap_in_use():
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    libc.mallinfo2.argtypes = []
    return libc.mallinfo2().uordblks


def test_no_leaks_of_c_objects():
    def churn():
        for _ in range(2000):
            with dtensor.Mesh("dp=2,tp=4") as m:
                dtensor.Layout(m, "[S(tp), S(dp)]", (10, 8)).local_shape(1)
        for _ in range(20):
            dtensor.compile("module {}", "canonicalize")
    churn()  # warm-up: caches, registrations
    before = _heap_in_use()
    churn()
    grown = _heap_in_use() - before
    assert grown < 256 * 1024, f"the C heap grew by {grown} bytes"


def test_meshes_past_the_device_bound_are_refused():
    # distribute_tensor on DeviceMesh((2**31,)) ran for hours.
    with pytest.raises(ValueError, match=r"2147483648 devices; at most "
                                         r"1048576 \(2\^20\)"):
        dtensor.DeviceMesh((2 ** 31,))
    with pytest.raises(dtensor.DtensorError, match="at most 1048576"):
        dtensor.Mesh("2048x1024")


def test_layout_refuses_dims_past_int64():
    # ctypes wrapped 2**64 + 8 to 8 without a word.
    with pytest.raises(dtensor.DtensorError, match="is not a size from 0 to"):
        dtensor.Layout("4", "[S0]", (2 ** 64 + 8,))
    with pytest.raises(dtensor.DtensorError, match="is not a size from 0 to"):
        dtensor.Layout("4", "[S0, R]", (8, -1))


@pytest.mark.parametrize("call, error, text", [
    (lambda: dtensor.Mesh(None), TypeError, "mesh: expected a string"),
    (lambda: dtensor.Layout("4", 0, (8,)), TypeError, "spec: expected a string"),
    (lambda: dtensor.Layout("4", "[S0]", (8,), dtype=32), TypeError,
     "dtype: expected a string"),
    (lambda: dtensor.Layout("4", "[S0]", 8), TypeError,
     "shape must be a tuple of ints, not int"),
    (lambda: dtensor.Layout("4", "[S0]", ("8",)), TypeError,
     "shape[0] must be an int, not str"),
    (lambda: dtensor.Layout("4", "[S0]", (8,)).local_shape("1"), TypeError,
     "device must be an int"),
    (lambda: dtensor.plan("[S0]", "[R]"), TypeError,
     "layout must be a Layout, not str"),
    (lambda: dtensor.compile("module {}", pipeline=None), TypeError,
     "pipeline: expected a string"),
    (lambda: dtensor.run(MEGATRON, "4", []), TypeError, "n must be an int"),
    (lambda: dtensor.run(MEGATRON, 0, []), ValueError, "n is 0; at least 1"),
    (lambda: dtensor.run(None, 4, []), TypeError, "program: expected a string"),
    (lambda: dtensor.run(MEGATRON, 4, [np.zeros(2), "x"]), TypeError,
     "inputs[1] must be a numpy array, not str"),
    (lambda: dtensor.run(MEGATRON, 4, {"x": [1.0]}), TypeError,
     "inputs['x'] must be a numpy array, not list"),
    (lambda: dtensor.run(MEGATRON, 4, np.zeros(2)), TypeError,
     "inputs must be a list of arrays or a dict"),
    (lambda: dtensor.run(MEGATRON, 4, [], timeout=-1), ValueError,
     "timeout must be a positive number"),
    (lambda: dtensor.run(MEGATRON, 4, [], timeout=float("inf")), ValueError,
     "at most 1e+07"),
    (lambda: dtensor.run(MEGATRON, 4, [], rtol=float("nan")), ValueError,
     "rtol must be a finite number from 0 to 1e+300, not nan"),
    (lambda: dtensor.run(MEGATRON, 4, [], atol=-1), ValueError,
     "atol must be a finite number"),
    (lambda: dtensor.save_checkpoint("/nonexistent/x", [np.zeros(2)]), TypeError,
     "tensors must be a dict"),
    (lambda: dtensor.save_checkpoint("/nonexistent/x", {"w": "abc"}), TypeError,
     "tensors['w'] must be a numpy array, not str"),
    (lambda: dtensor.checkpoint_info(3), TypeError, "path: expected a string"),
    (lambda: dtensor.convert_checkpoint("a", "b", "4", {"w": 1}), TypeError,
     "specs['w']: expected a string"),
])
def test_entry_points_name_the_bad_argument(call, error, text):
    with pytest.raises(error) as e:
        call()
    assert text in str(e.value)
