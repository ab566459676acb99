"""The DTensor-shaped API (docs/python.md): meshes and sub-meshes,
placements, distribute_tensor, redistribute in one process and under
dtensor-run, from_local, the parallel styles, and the errors of every entry
point."""

import itertools
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import dtensor as dt  # noqa: E402
from dtensor import _capi  # noqa: E402

R, S, P = dt.Replicate, dt.Shard, dt.Partial
CHOICES = [R(), S(0), S(1), P()]


def blocks_of(x, e):
    """x's blocks under e's layout, by the layout algebra's index ranges."""
    return [x[tuple(slice(r[0][0], r[0][1]) for r in e.layout.index_ranges(k))]
            for k in range(e.device_mesh.root_mesh.size())]


# ---- meshes -------------------------------------------------------------------

def test_device_mesh_and_sub_meshes():
    mesh = dt.DeviceMesh((2, 4), ("dp", "tp"))
    assert mesh.shape == (2, 4) and mesh.ndim == 2 and mesh.size() == 8
    assert mesh.size("tp") == 4 and mesh.size(0) == 2
    assert mesh.mesh_dim_names == ("dp", "tp")
    tp = mesh["tp"]
    assert tp.shape == (4,) and tp.mesh_dim_names == ("tp",)
    assert tp.root_mesh is mesh and mesh["dp", "tp"] == mesh
    assert repr(tp) == ("DeviceMesh((4,), ('tp',)) of "
                        "DeviceMesh((2, 4), ('dp', 'tp'))")
    assert dt.DeviceMesh(4).shape == (4,) and dt.DeviceMesh(4).mesh_dim_names is None
    assert dt.init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "b")) == \
        dt.DeviceMesh((2, 2), ("a", "b"))
    assert mesh.get_coordinate() is None  # one process


@pytest.mark.parametrize("args, error, text", [
    (("2x2",), TypeError, "shape must be an int or a tuple of ints"),
    (((2, 0),), ValueError, "every axis needs at least one device"),
    (((2, True),), TypeError, "shape must be"),
    (((2, 2), ("dp",)), ValueError, "names ('dp',) has 1 entries for a mesh of 2"),
    (((2, 2), ("dp", "dp")), ValueError, "has a name twice"),
    (((2, 2), ("dp", "t p")), ValueError, "'t p' is not an identifier"),
    (((2, 2), (1, 2)), TypeError, "names must be a tuple of strings"),
    (((1,) * 9,), ValueError, "at most 8 axes"),
])
def test_device_mesh_errors(args, error, text):
    with pytest.raises(error, match=None) as e:
        dt.DeviceMesh(*args)
    assert text in str(e.value)


def test_sub_mesh_errors():
    mesh = dt.DeviceMesh((2, 4), ("dp", "tp"))
    with pytest.raises(KeyError, match="no axis 'pp' .its axes: dp, tp"):
        mesh["pp"]
    with pytest.raises(KeyError, match="in the mesh's order"):
        mesh["tp", "dp"]
    with pytest.raises(TypeError, match="named by axis names"):
        mesh[0]
    with pytest.raises(KeyError, match="unnamed"):
        dt.DeviceMesh((2, 2))["dp"]
    with pytest.raises(ValueError, match="device_type 'cuda'"):
        dt.init_device_mesh("cuda", (2,))
    with pytest.raises(RuntimeError, match="under dtensor-run"):
        mesh.get_local_rank("tp")


# ---- placements ---------------------------------------------------------------

def test_placements():
    assert S(1) == S(1) and S(1) != S(0) and R() == R() and P() == P("sum")
    assert P("product") == P("prod") and P("max") != P()
    assert len({S(0), S(0), R(), P()}) == 3
    assert repr([S(0), R(), P("max")]) == "[Shard(dim=0), Replicate(), Partial(max)]"
    assert S(0).is_shard() and S(0).is_shard(0) and not S(0).is_shard(1)
    with pytest.raises(TypeError, match="dim must be an int"):
        S("0")
    with pytest.raises(ValueError, match="'xor' is not one of sum, max"):
        P("xor")


# ---- distribute_tensor ------------------------------------------------------------

def test_distribute_uneven_blocks():
    mesh = dt.DeviceMesh((2, 3), ("dp", "tp"))
    x = np.arange(7 * 5, dtype=np.float64).reshape(7, 5)
    d = dt.distribute_tensor(x, mesh, [S(0), S(1)])
    assert d.layout.spec == "[S0, S1]" and d.shape == (7, 5)
    assert [b.shape for b in d.local_tensors()] == \
        [(4, 2), (4, 2), (4, 1), (3, 2), (3, 2), (3, 1)]
    assert np.array_equal(d.to_local(rank=5), x[4:, 4:])
    # two mesh dims on one tensor dim: dp major (PyTorch's order)
    d = dt.distribute_tensor(x, mesh, [S(1), S(1)])
    assert d.layout.spec == "[R, S01]"
    assert np.array_equal(d.to_local(rank=3), x[:, 3:4])
    # a sub-mesh: replicated over the other axes
    d = dt.distribute_tensor(x, mesh["tp"], [S(-1)])
    assert d.placements == (S(1),) and d.layout.spec == "[R, S1]"
    assert np.array_equal(d.to_local(rank=4), d.to_local(rank=1))
    # a scalar
    d = dt.distribute_tensor(np.array(3.0), mesh, [R(), P()])
    assert [float(b) for b in d.local_tensors()] == [3, 0, 0, 3, 0, 0]
    assert float(d.full_tensor()) == 3.0


@pytest.mark.parametrize("op, dtype", [("sum", np.float32), ("max", np.int32),
                                       ("min", np.float64), ("avg", np.float64),
                                       ("prod", np.int64)])
def test_partial_kinds(op, dtype):
    mesh = dt.DeviceMesh((2, 2))
    x = np.arange(1, 13, dtype=dtype).reshape(3, 4)
    d = dt.distribute_tensor(x, mesh, [P(op), S(1)])
    assert d.full_tensor().dtype == dtype
    assert np.array_equal(d.full_tensor(), x)
    # contributions: max over the blocks of a group is the value
    e = dt.DTensor.from_local([b * 0 + k for k, b in enumerate(d.local_tensors())],
                              mesh, [P(op), S(1)])
    want = {"sum": [2, 4], "max": [2, 3], "min": [0, 1], "avg": [1, 2],
            "prod": [0, 3]}[op]
    got = e.redistribute(placements=[R(), S(1)]).local_tensors()
    assert [int(got[k].flat[0]) for k in (0, 1)] == want


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 2, 2)])
def test_redistribute_every_pair(shape):
    """Every pair of placements of a 7x5 tensor: each block is the layout's
    slice (Partial targets: the blocks reduce to it), full_tensor the
    whole."""
    mesh = dt.DeviceMesh(shape)
    x = np.random.default_rng(1).integers(-9, 9, (7, 5)).astype(np.float32)
    pairs = 0
    for src in itertools.product(CHOICES, repeat=len(shape)):
        d = dt.distribute_tensor(x, mesh, list(src))
        for dst in itertools.product(CHOICES, repeat=len(shape)):
            e = d.redistribute(placements=list(dst))
            assert e.placements == dst
            if not any(p.is_partial() for p in dst):
                for got, want in zip(e.local_tensors(), blocks_of(x, e)):
                    assert np.array_equal(got, want), (src, dst)
            assert np.array_equal(e.full_tensor(), x), (src, dst)
            pairs += 1
    assert pairs == 4 ** (2 * len(shape))


def test_redistribute_runs_the_planners_plan():
    """The blocks move as the plan says: S0 -> S1 on 4 devices is one
    all_to_all, and the result matches dtensor.plan's target."""
    mesh = dt.DeviceMesh(4)
    d = dt.distribute_tensor(np.arange(64.0).reshape(8, 8), mesh, [S(0)])
    steps = dt.plan(d.layout, "[R, S0]").steps
    assert [s["comm"].split("(")[0] for s in steps] == ["all_to_all"]
    e = d.redistribute(placements=[S(1)])
    assert np.array_equal(e.to_local(rank=2), np.arange(64.0).reshape(8, 8)[:, 4:6])


def test_from_local_infers_uneven_shapes():
    mesh = dt.DeviceMesh((2, 3), ("dp", "tp"))
    x = np.arange(7 * 5, dtype=np.int32).reshape(7, 5)
    d = dt.distribute_tensor(x, mesh, [S(0), S(1)])
    e = dt.DTensor.from_local(d.local_tensors(), mesh, [S(0), S(1)])
    assert e.shape == (7, 5) and e.dtype == np.int32
    assert np.array_equal(e.full_tensor(), x)
    # the shape comes from device 0's groups; device 4's block does not fit
    with pytest.raises(ValueError, match=r"local_tensor\[4\] has shape \(3, 3\), "
                       r"but device 4 holds \(3, 2\) of a tensor of shape \(7, 5\)"):
        blocks = d.local_tensors()
        blocks[4] = np.zeros((3, 3), np.int32)
        dt.DTensor.from_local(blocks, mesh, [S(0), S(1)])
    with pytest.raises(ValueError, match="has 2 blocks for a mesh of 6 devices"):
        dt.DTensor.from_local(blocks[:2], mesh, [S(0), S(1)])
    with pytest.raises(ValueError, match=r"local_tensor\[1\] is float64 of 2 dims"):
        dt.DTensor.from_local([blocks[0], blocks[1].astype(np.float64)] + blocks[2:],
                              mesh, [S(0), S(1)])
    with pytest.raises(TypeError, match="a list of every device's block"):
        dt.DTensor.from_local(blocks[0], mesh, [S(0), S(1)])


def test_to_local_needs_a_rank_in_one_process():
    d = dt.distribute_tensor(np.zeros(4, np.float32), dt.DeviceMesh(2), [S(0)])
    with pytest.raises(ValueError, match=r"^rank: in one process"):
        d.to_local()
    with pytest.raises(ValueError, match="rank 2 is not a device"):
        d.to_local(rank=2)


@pytest.mark.parametrize("call, error, text", [
    (lambda m: dt.distribute_tensor([1.0, 2.0], m, [R()]), TypeError,
     "tensor must be a numpy array"),
    (lambda m: dt.distribute_tensor(np.zeros(4, np.int8), m, [R()]), TypeError,
     "tensor: element type int8"),
    (lambda m: dt.distribute_tensor(np.zeros(4), "2", [R()]), TypeError,
     "device_mesh must be a DeviceMesh, not str"),
    (lambda m: dt.distribute_tensor(np.zeros(4), m, [R(), R()]), ValueError,
     "placements has 2 entries for a mesh of 1 dim"),
    (lambda m: dt.distribute_tensor(np.zeros(4), m, S(0)), TypeError,
     "placements must be a list of placements"),
    (lambda m: dt.distribute_tensor(np.zeros(4), m, ["S0"]), TypeError,
     "placements[0] is 'S0', not a Shard"),
    (lambda m: dt.distribute_tensor(np.zeros(4), m, [S(1)]), ValueError,
     "placements[0]: Shard(dim=1) of a tensor of 1 dim"),
    (lambda m: dt.distribute_tensor(np.zeros(4), m, [S(0)]).redistribute(
        dt.DeviceMesh(2, "tp"), [R()]), ValueError,
     "redistribute stays on the DTensor's mesh"),
    (lambda m: dt.distribute_tensor(np.zeros(4), m, [S(0)]).redistribute(
        placements=[S(0), R()]), ValueError, "placements has 2 entries"),
    (lambda m: dt.distribute_tensor(np.full(4, 2 ** 60), m, [S(0)]).redistribute(
        placements=[R()]), ValueError, "int64 values beyond 2**53"),
    (lambda m: dt.visualize_sharding(np.zeros(2)), TypeError,
     "dtensor must be a DTensor"),
])
def test_entry_points_name_the_argument(call, error, text):
    with pytest.raises(error) as e:
        call(dt.DeviceMesh(2))
    assert text in str(e.value)


def test_visualize_sharding(capsys):
    d = dt.distribute_tensor(np.zeros((4, 6)), dt.DeviceMesh((2, 2)), [S(0), P()])
    dt.visualize_sharding(d, header="activations")
    out = capsys.readouterr().out
    assert out.startswith("activations\nmesh a0=2,a1=2, tensor 4x6xf64, spec [S0, R] Psum(1)")
    assert "|0+1" in out  # devices holding parts of one sum joined by '+'


# ---- under dtensor-run ----------------------------------------------------------

def dtensor_run(n, *args, backend="shm"):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."))
    return subprocess.run([os.path.join(_capi.bin_dir(), "dtensor-run"), "-n",
                           str(n), "--backend", backend, "--timeout", "120",
                           "--", sys.executable, *args],
                          capture_output=True, text=True, env=env)


@pytest.mark.parametrize("n, shape, backend", [
    (4, "2x2", "shm"), (6, "2x3", "shm"),
    pytest.param(4, "2x2", "mpi", marks=pytest.mark.skipif(
        not shutil.which("mpirun"), reason="no mpirun"))])
def test_redistribute_under_dtensor_run(n, shape, backend):
    pairs = 256
    done = dtensor_run(n, os.path.join(HERE, "dist_redistribute.py"), shape,
                       backend=backend)
    assert done.returncode == 0, done.stdout + done.stderr
    for k in range(n):
        assert f"rank {k}: {pairs} redistributions ok" in done.stdout


def test_mesh_must_match_the_job():
    done = dtensor_run(2, "-c", "import dtensor as dt, numpy as np\n"
                       "dt.distribute_tensor(np.zeros(4), dt.DeviceMesh(4), None)")
    assert done.returncode != 0
    assert "device_mesh: the mesh has 4 devices and the job 2 ranks" in done.stderr


# ---- parallel styles ----------------------------------------------------------------

MLP = os.path.join(HERE, "..", "..", "examples", "tutorial", "mlp.mlir")


def test_styles_make_plan_files(tmp_path):
    mesh = dt.DeviceMesh((2, 2), ("dp", "tp"))
    plan = dt.save_plan(tmp_path / "plan.json", mesh["tp"], {
        "x": "[S(dp), R]", "*.w_up": dt.ColwiseParallel(),
        "*.w_down": dt.RowwiseParallel(storage="in_out"),
        "*.qkv": dt.ColwiseParallel(interleave=3),
        "embed": dt.VocabParallel(),
        "h": dt.SequenceParallel(sequence_dim=0)})
    assert plan == {
        "mesh": {"name": "mesh", "shape": [2, 2], "axes": ["dp", "tp"]},
        "rules": [{"match": "x", "layout": "[S(dp), R]"},
                  {"match": "*.w_up", "style": "colwise", "storage": "out_in",
                   "axis": 1},
                  {"match": "*.w_down", "style": "rowwise",
                   "storage": "in_out", "axis": 1},
                  {"match": "*.qkv", "style": "colwise", "storage": "out_in",
                   "interleave": 3, "axis": 1},
                  {"match": "embed", "style": "vocab_parallel", "axis": 1},
                  {"match": "h", "style": "sequence", "dim": 0, "axis": 1}]}
    import json
    assert json.loads((tmp_path / "plan.json").read_text()) == plan


def test_fsdp_styles():
    mesh = dt.DeviceMesh((2, 2), ("dp", "tp"))
    # The tutorial's MLP stores its weights [in, out] (x @ W).
    col, row = (dt.ColwiseParallel(storage="in_out"),
                dt.RowwiseParallel(storage="in_out"))
    plan = dt.make_plan(mesh["tp"], {"*.w_up": col, "*.w_down": row},
                        fsdp_mesh=mesh["dp"])
    assert plan["rules"] == [
        {"match": "*.w_up", "style": "colwise", "storage": "in_out", "axis": 1,
         "fsdp": 0},
        {"match": "*.w_down", "style": "rowwise", "storage": "in_out",
         "axis": 1, "fsdp": 0}]
    ir = dt.parallelize_module(MLP, mesh["dp"], {"x": dt.FSDP(), "*.w_*": dt.FSDP()})
    assert ir.count('#dtensor.layout<@mesh, "[S0, R]">') == 3
    ir = dt.parallelize_module(MLP, mesh["tp"], {"*.w_up": col,
                                                 "*.w_down": row},
                               fsdp_mesh=mesh["dp"])
    assert '#dtensor.layout<@mesh, "[S0, S1]">, dtensor.name = "layer.w_up"' in ir
    assert '#dtensor.layout<@mesh, "[S1, S0]">, dtensor.name = "layer.w_down"' in ir
    with pytest.raises(ValueError, match="fsdp_mesh is the style's own axis"):
        dt.make_plan(mesh["tp"], {"w": dt.ColwiseParallel()}, fsdp_mesh=mesh["tp"])


def test_parallelize_module_runs():
    mesh = dt.DeviceMesh((2, 2), ("dp", "tp"))
    ir = dt.parallelize_module(MLP, mesh["tp"], {
        "x": "[S(dp), R]", "*.w_up": dt.ColwiseParallel(storage="in_out"),
        "*.w_down": dt.RowwiseParallel(storage="in_out")})
    assert '#dtensor.layout<@mesh, "[R, S1]">, dtensor.name = "layer.w_up"' in ir
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 128), dtype=np.float32)
    w1 = rng.standard_normal((128, 512), dtype=np.float32)
    w2 = rng.standard_normal((512, 128), dtype=np.float32)
    y, = dt.run(ir, 4, {"x": x, "layer.w_up": w1, "layer.w_down": w2})
    assert np.allclose(y, (x @ w1) @ w2, rtol=1e-4, atol=1e-3)
    spmd = dt.compile(ir)
    assert spmd.count('"dtensor.all_reduce"') == 1


def test_styles_mean_pytorchs_for_nn_linear_weights():
    """ColwiseParallel() and RowwiseParallel() on weights stored as
    nn.Linear stores them ([out, in]): the output features (dim 0), the
    input features (dim 1); on the tutorial's [in, out] weights the same
    styles name the other dims (the Megatron MLP then needs more than its
    one all_reduce: the plan must say storage="in_out")."""
    mesh = dt.DeviceMesh((2, 2), ("dp", "tp"))
    ir = dt.parallelize_module(MLP, mesh["tp"], {
        "*.w_up": dt.ColwiseParallel(), "*.w_down": dt.RowwiseParallel()})
    assert '#dtensor.layout<@mesh, "[S1, R]">, dtensor.name = "layer.w_up"' in ir
    assert '#dtensor.layout<@mesh, "[R, S1]">, dtensor.name = "layer.w_down"' in ir
    with pytest.raises(ValueError, match="storage must be 'out_in'"):
        dt.ColwiseParallel(storage="rows")
    with pytest.raises(ValueError, match="interleave must be an int"):
        dt.ColwiseParallel(interleave=1)
    assert repr(dt.ColwiseParallel(storage="in_out", interleave=3)) == \
        "ColwiseParallel(storage='in_out', interleave=3)"


def test_sequence_parallel_on_a_3d_activation():
    text = ('func.func @f(%x: tensor<2x8x4xf32> {dtensor.name = "x"}) '
            '-> tensor<2x8x4xf32> {\n  return %x : tensor<2x8x4xf32>\n}\n')
    ir = dt.parallelize_module(text, dt.DeviceMesh(4, "tp"),
                               {"x": dt.SequenceParallel()})
    assert '#dtensor.layout<@mesh, "[R, S0, R]">' in ir


@pytest.mark.parametrize("call, error, text", [
    (lambda m: dt.make_plan(m, {"x": dt.ColwiseParallel()}), ValueError,
     "parallelize_plan['x']: ColwiseParallel() needs a mesh of one dim"),
    (lambda m: dt.make_plan(m["tp"], {"x": "colwise"} | {"y": 3}), TypeError,
     "parallelize_plan['y'] is 3, not a ParallelStyle or a layout spec"),
    (lambda m: dt.make_plan(m["tp"], {}), TypeError,
     "parallelize_plan must be a non-empty dict"),
    (lambda m: dt.make_plan("tp", {"x": dt.RowwiseParallel()}), TypeError,
     "device_mesh must be a DeviceMesh"),
    (lambda m: dt.SequenceParallel(sequence_dim=-1), TypeError,
     "sequence_dim must be an int >= 0"),
    (lambda m: dt.parallelize_module(3, m["tp"], {"x": dt.ColwiseParallel()}),
     TypeError, "module must be IR text or a path"),
    (lambda m: dt.parallelize_module(MLP, m["tp"], {"w*": dt.ColwiseParallel()}),
     dt.CompileError, "mlp.mlir:3:1: error: parallelize_plan: rule 1 ('w*') "
     "matches no argument"),
    (lambda m: dt.parallelize_module(MLP, m["tp"], {"x": dt.SequenceParallel(
        sequence_dim=2)}), dt.CompileError,
     "rule 1 ('x') splits dim 2, but argument 'x' of @mlp has 2 dims"),
])
def test_style_errors(call, error, text):
    with pytest.raises(error) as e:
        call(dt.DeviceMesh((2, 2), ("dp", "tp")))
    assert text in str(e.value)
