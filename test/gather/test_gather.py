"""Lookups by computed index (dtensor.gather, docs/gather.md) against numpy:
embeddings written as tensor.extract in a linalg body, tensor.gather and
tosa.gather, with the table split over the vocabulary (each rank looks up
its block, the sum over ranks is PyTorch's MaskPartial), over the hidden
dim, and the ids split by batch; their gradients (a scatter_add into the
table's layout); and cross-entropy over vocabulary-split logits (loss
parallel), whose collectives are all [rows]-sized. The runner also checks
every rank against the single-device run."""

import os
import re
import subprocess

import numpy as np
import pytest

import dtensor

RNG = np.random.default_rng(5)
BIN = os.environ.get("DTENSOR_BIN_DIR", "build/bin")
OPT = os.path.join(BIN, "dtensor-opt")


def mesh(shape, names):
    dims = ", ".join(str(d) for d in shape)
    axes = ", ".join(f'"{n}"' for n in names)
    return (f'"dtensor.mesh"() {{sym_name = "m", shape = array<i64: {dims}>, '
            f'axis_names = [{axes}]}} : () -> ()\n')


def layout(spec):
    return f'{{dtensor.layout = #dtensor.layout<@m, "{spec}">}}'


def embedding(v, d, b, t, w_spec, ids_spec, out_spec="[R, R, R]",
              elem="f32", body_op=None):
    """@f(w: VxD, ids: BxT i64) -> BxTxD, the lookup in a linalg body."""
    op = (f"  %y = {body_op} %v : {elem}\n    linalg.yield %y : {elem}\n"
          if body_op else f"  linalg.yield %v : {elem}\n")
    return (f"func.func @f(%w: tensor<{v}x{d}x{elem}> {layout(w_spec)},\n"
            f"  %ids: tensor<{b}x{t}xi64> {layout(ids_spec)})\n"
            f"  -> (tensor<{b}x{t}x{d}x{elem}> {layout(out_spec)}) {{\n"
            f"  %e = tensor.empty() : tensor<{b}x{t}x{d}x{elem}>\n"
            "  %r = linalg.generic {indexing_maps = [affine_map<(b, t, d) -> "
            "(b, t)>, affine_map<(b, t, d) -> (b, t, d)>], iterator_types = "
            '["parallel", "parallel", "parallel"]}\n'
            f"    ins(%ids : tensor<{b}x{t}xi64>) outs(%e : "
            f"tensor<{b}x{t}x{d}x{elem}>) {{\n"
            f"  ^bb0(%id: i64, %o: {elem}):\n"
            "    %i = arith.index_cast %id : i64 to index\n"
            "    %k = linalg.index 2 : index\n"
            f"    %v = tensor.extract %w[%i, %k] : tensor<{v}x{d}x{elem}>\n"
            f"  {op}"
            f"  }} -> tensor<{b}x{t}x{d}x{elem}>\n"
            f"  return %r : tensor<{b}x{t}x{d}x{elem}>\n}}\n")


def spmd(text):
    out = subprocess.run([OPT, "--dtensor-spmd"], input=text,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("n,names,w_spec,ids_spec", [
    (2, ["x"], "[S0, R]", "[R, R]"),        # vocab parallel, uneven (15 / 2)
    (4, ["x"], "[S0, R]", "[R, R]"),        # 15 rows over 4
    (2, ["x"], "[R, S0]", "[R, R]"),        # the hidden dim split
    (2, ["x"], "[R, R]", "[S0, R]"),        # ids by batch
    ((2, 2), ["dp", "tp"], "[S(tp), R]", "[S(dp), R]"),
])
def test_embedding_forward(n, names, w_spec, ids_spec):
    shape = n if isinstance(n, tuple) else (n,)
    text = mesh(shape, names) + embedding(15, 8, 4, 3, w_spec, ids_spec)
    w = RNG.standard_normal((15, 8)).astype(np.float32)
    ids = RNG.integers(0, 15, (4, 3))
    ids[0, :] = [0, 7, 14]  # both ends of every block
    out, = dtensor.run(text, int(np.prod(shape)), [w, ids])
    np.testing.assert_array_equal(out, w[ids])


def test_vocab_parallel_is_a_masked_lookup_and_one_all_reduce():
    """A table too big to gather: each rank looks up its block (indices less
    its offset) and one all_reduce of the [B, T, D] result sums them."""
    ir = spmd(mesh((4,), ["x"]) + embedding(1000, 64, 4, 8, "[S0, R]", "[R, R]"))
    assert "all_gather" not in ir
    assert re.search(r'"dtensor.gather"\(%\w+, %\w+\) \{dims = "\w+,\w+->\w+"\}'
                     r" : \(tensor<250x64xf32>, tensor<4x8xi64>\)", ir), ir
    assert ir.count('"dtensor.all_reduce"') == 1


def gather_ops(src_shape, idx_shape, gather_dims, result_shape, spec):
    src = "x".join(map(str, src_shape)) + "xf32"
    idx = "x".join(map(str, idx_shape)) + "xi64"
    res = "x".join(map(str, result_shape)) + "xf32"
    dims = ", ".join(map(str, gather_dims))
    return (f"func.func @f(%w: tensor<{src}> {layout(spec)}, "
            f"%i: tensor<{idx}>) -> tensor<{res}> {{\n"
            f"  %g = tensor.gather %w[%i] gather_dims([{dims}]) : "
            f"(tensor<{src}>, tensor<{idx}>) -> tensor<{res}>\n"
            f"  return %g : tensor<{res}>\n}}\n")


@pytest.mark.parametrize("src,idx,dims,res,spec", [
    ((9, 5), (3, 1), [0], (3, 5), "[S0, R]"),
    ((9, 5), (3, 1), [0], (3, 1, 5), "[S0, R]"),
    ((9, 5), (2, 3, 1), [0], (2, 3, 5), "[R, S0]"),
    ((4, 9, 5), (3, 2), [0, 2], (3, 9), "[S0, R, R]"),
])
def test_tensor_gather(src, idx, dims, res, spec):
    w = RNG.standard_normal(src).astype(np.float32)
    i = np.stack([RNG.integers(0, src[d], idx[:-1]) for d in dims], axis=-1)
    text = mesh((2,), ["x"]) + gather_ops(src, idx, dims, res, spec)
    out, = dtensor.run(text, 2, [w, i.astype(np.int64)])
    index = [slice(None)] * len(src)
    want = np.empty(idx[:-1] + tuple(s for d, s in enumerate(src)
                                     if d not in dims), np.float32)
    for pos in np.ndindex(*idx[:-1]):
        index = tuple(int(i[pos][dims.index(d)]) if d in dims else slice(None)
                      for d in range(len(src)))
        want[pos] = w[index]
    np.testing.assert_array_equal(out.reshape(want.shape), want)


def test_tosa_gather():
    text = (mesh((2,), ["x"]) +
            f"func.func @f(%v: tensor<2x9x4xf32> {layout('[R, S0, R]')}, "
            "%i: tensor<2x5xi32>) -> tensor<2x5x4xf32> {\n"
            "  %g = tosa.gather %v, %i : (tensor<2x9x4xf32>, tensor<2x5xi32>)"
            " -> tensor<2x5x4xf32>\n"
            "  return %g : tensor<2x5x4xf32>\n}\n")
    v = RNG.standard_normal((2, 9, 4)).astype(np.float32)
    i = RNG.integers(0, 9, (2, 5)).astype(np.int32)
    out, = dtensor.run(text, 2, [v, i])
    np.testing.assert_array_equal(out, np.take_along_axis(
        v, i[:, :, None].astype(np.int64), axis=1))




def test_embedding_gradient_is_a_scatter_add_in_the_tables_layout():
    """d/dw of sum(sin(w[ids])) with ids that repeat: the table's gradient
    stays vocab-split (each rank adds the updates that fall in its block)
    and the data-parallel ids make it a Partial that one all_reduce sums."""
    b, t, v, d = 4, 6, 11, 5
    f = embedding(v, d, b, t, "[S(tp), R]", "[S(dp), R]",
                  out_spec="[S(dp), R, R]", elem="f64", body_op="math.sin")
    f = f.replace("-> (tensor<4x6x5xf64> " + layout("[S(dp), R, R]") + ")",
                  "-> tensor<f64>")
    f = f.replace(f"  return %r : tensor<{b}x{t}x{d}xf64>\n",
                  "  %z = arith.constant 0.0 : f64\n"
                  "  %e0 = tensor.empty() : tensor<f64>\n"
                  "  %l0 = linalg.fill ins(%z : f64) outs(%e0 : tensor<f64>)"
                  " -> tensor<f64>\n"
                  "  %l = linalg.generic {indexing_maps = [affine_map<(b, t, d)"
                  " -> (b, t, d)>, affine_map<(b, t, d) -> ()>], "
                  'iterator_types = ["reduction", "reduction", "reduction"]} '
                  f"ins(%r : tensor<{b}x{t}x{d}xf64>) outs(%l0 : tensor<f64>) {{\n"
                  "  ^bb0(%a: f64, %acc: f64):\n"
                  "    %s = arith.addf %acc, %a : f64\n"
                  "    linalg.yield %s : f64\n"
                  "  } -> tensor<f64>\n"
                  "  return %l : tensor<f64>\n")
    text = mesh((2, 2), ["dp", "tp"]) + f
    ir = dtensor.compile(text, "dtensor-autodiff{function=f wrt=0}")
    w = RNG.standard_normal((v, d))
    ids = RNG.integers(0, v, (b, t))
    ids[:, 0] = 3  # a row every rank's batch adds into
    loss, grad = dtensor.run(ir, 4, [w, ids], entry="f_grad")
    np.testing.assert_allclose(loss, np.sin(w[ids]).sum(), rtol=1e-12)
    want = np.zeros_like(w)
    np.add.at(want, ids, np.cos(w[ids]))
    np.testing.assert_allclose(grad, want, rtol=1e-12, atol=1e-12)
    spmd_ir = spmd(ir)
    grad_fn = spmd_ir[spmd_ir.index("@f_grad"):]
    assert '"dtensor.scatter_add"' in grad_fn
    assert "tensor<6x5xf64>" in grad_fn  # the local block of the table


CE = """
func.func @f(%x: tensor<{n}x{v}xf32> {lx}, %t: tensor<{n}xi64> {lt})
    -> tensor<f32> {{
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %en = tensor.empty() : tensor<{n}xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%en : tensor<{n}xf32>) -> tensor<{n}xf32>
  %m = linalg.generic {{indexing_maps = [affine_map<(n, v) -> (n, v)>,
      affine_map<(n, v) -> (n)>], iterator_types = ["parallel", "reduction"]}}
      ins(%x : tensor<{n}x{v}xf32>) outs(%mi : tensor<{n}xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    linalg.yield %r : f32
  }} -> tensor<{n}xf32>
  %si = linalg.fill ins(%zero : f32) outs(%en : tensor<{n}xf32>) -> tensor<{n}xf32>
  %s = linalg.generic {{indexing_maps = [affine_map<(n, v) -> (n, v)>,
      affine_map<(n, v) -> (n)>, affine_map<(n, v) -> (n)>],
      iterator_types = ["parallel", "reduction"]}}
      ins(%x, %m : tensor<{n}x{v}xf32>, tensor<{n}xf32>) outs(%si : tensor<{n}xf32>) {{
  ^bb0(%a: f32, %mx: f32, %acc: f32):
    %d = arith.subf %a, %mx : f32
    %e = math.exp %d : f32
    %r = arith.addf %acc, %e : f32
    linalg.yield %r : f32
  }} -> tensor<{n}xf32>
  %l = linalg.generic {{indexing_maps = [affine_map<(n) -> (n)>,
      affine_map<(n) -> (n)>, affine_map<(n) -> (n)>, affine_map<(n) -> (n)>],
      iterator_types = ["parallel"]}}
      ins(%s, %m, %t : tensor<{n}xf32>, tensor<{n}xf32>, tensor<{n}xi64>)
      outs(%en : tensor<{n}xf32>) {{
  ^bb0(%sv: f32, %mv: f32, %tv: i64, %o: f32):
    %lg = math.log %sv : f32
    %lse = arith.addf %lg, %mv : f32
    %i = linalg.index 0 : index
    %k = arith.index_cast %tv : i64 to index
    %p = tensor.extract %x[%i, %k] : tensor<{n}x{v}xf32>
    %r = arith.subf %lse, %p : f32
    linalg.yield %r : f32
  }} -> tensor<{n}xf32>
  %e0 = tensor.empty() : tensor<f32>
  %li = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %sum = linalg.generic {{indexing_maps = [affine_map<(n) -> (n)>,
      affine_map<(n) -> ()>], iterator_types = ["reduction"]}}
      ins(%l : tensor<{n}xf32>) outs(%li : tensor<f32>) {{
  ^bb0(%a: f32, %acc: f32):
    %c = arith.constant {inv} : f32
    %q = arith.mulf %a, %c : f32
    %r = arith.addf %acc, %q : f32
    linalg.yield %r : f32
  }} -> tensor<f32>
  return %sum : tensor<f32>
}}
"""


def cross_entropy(n, v, lx, lt):
    return CE.format(n=n, v=v, lx=layout(lx), lt=layout(lt), inv=f"{1.0 / n:.9e}")


@pytest.mark.parametrize("ranks", [2, 4])
def test_loss_parallel_cross_entropy(ranks):
    """Cross-entropy written the usual way (row max, log-sum-exp, the target's
    logit by index, mean) on logits split over the vocabulary: the loss and
    its gradient equal numpy's, and every collective of the step (forward
    and backward) carries [rows] elements: the logits are never gathered."""
    n, v = 256, 1001
    text = mesh((ranks,), ["tp"]) + cross_entropy(n, v, "[R, S0]", "[R]")
    ir = dtensor.compile(text, "dtensor-autodiff{function=f wrt=0}")
    x = (3 * RNG.standard_normal((n, v))).astype(np.float32)
    t = RNG.integers(0, v, n)
    t[:4] = [0, v - 1, v // ranks, v // ranks - 1]
    loss, grad = dtensor.run(ir, ranks, [x, t], entry="f_grad")
    x64 = x.astype(np.float64)
    m = x64.max(axis=1, keepdims=True)
    p = np.exp(x64 - m)
    p /= p.sum(axis=1, keepdims=True)
    want_loss = np.mean(np.log(np.exp(x64 - m).sum(axis=1)) + m[:, 0]
                        - x64[np.arange(n), t])
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    onehot = np.zeros_like(p)
    onehot[np.arange(n), t] = 1
    np.testing.assert_allclose(grad, (p - onehot) / n, rtol=1e-4, atol=1e-7)
    per_device = spmd(ir)
    for m_ in re.finditer(r'"dtensor\.(all_\w+|reduce_scatter)"\(.*?\) : '
                          r"\(tensor<([0-9x]+)x\w+>\)", per_device):
        dims = [int(s) for s in m_.group(2).split("x")]
        assert int(np.prod(dims)) <= 2 * n, m_.group(0)  # bucketed pairs


def test_gpt2_sized_embedding_never_makes_a_tokens_by_vocab_tensor():
    """GPT-2's table (50257 x 768) split over 4 ranks and [8, 1024] ids:
    forward and backward per-device programs hold no tensor of tokens x
    vocab (the one-hot workaround's 1.6 GB)."""
    f = embedding(50257, 768, 8, 1024, "[S0, R]", "[R, R]",
                  out_spec="[R, R, R]")
    f = f.replace("-> (tensor<8x1024x768xf32> " + layout("[R, R, R]") + ")",
                  "-> tensor<f32>")
    f = f.replace("  return %r : tensor<8x1024x768xf32>\n",
                  "  %z = arith.constant 0.0 : f32\n"
                  "  %e0 = tensor.empty() : tensor<f32>\n"
                  "  %l0 = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>)"
                  " -> tensor<f32>\n"
                  "  %l = linalg.generic {indexing_maps = [affine_map<(b, t, d)"
                  " -> (b, t, d)>, affine_map<(b, t, d) -> ()>], "
                  'iterator_types = ["reduction", "reduction", "reduction"]} '
                  "ins(%r : tensor<8x1024x768xf32>) outs(%l0 : tensor<f32>) {\n"
                  "  ^bb0(%a: f32, %acc: f32):\n"
                  "    %q = arith.mulf %a, %a : f32\n"
                  "    %s = arith.addf %acc, %q : f32\n"
                  "    linalg.yield %s : f32\n"
                  "  } -> tensor<f32>\n"
                  "  return %l : tensor<f32>\n")
    text = mesh((4,), ["x"]) + f
    grad = dtensor.compile(text, "dtensor-autodiff{function=f wrt=0}")
    per_device = spmd(grad)
    for shape in re.findall(r"tensor<([0-9x]+)x[fi]\d+>", per_device):
        dims = [int(s) for s in shape.split("x")]
        assert int(np.prod(dims)) <= 12565 * 768, shape
    assert "tensor<12565x768xf32>" in per_device


def np_scatter(dest, idx, upd, dims):
    """tensor.scatter's meaning (unique indices) in numpy."""
    out = dest.copy()
    for pos in np.ndindex(*idx.shape[:-1]):
        index = tuple(int(idx[pos][dims.index(d)]) if d in dims else slice(None)
                      for d in range(dest.ndim))
        out[index] = upd[pos].reshape(out[index].shape)
    return out


@pytest.mark.parametrize("dest,idx,dims,src,spec,ranks", [
    ((9, 5), (3, 1), [0], (3, 5), None, 1),
    ((9, 5), (3, 1), [0], (3, 1, 5), "[S0, R]", 2),   # the dest's rows split
    ((9, 5), (3, 1), [0], (3, 5), "[R, S0]", 2),
    ((4, 9, 5), (3, 2), [0, 2], (3, 9), "[S0, R, R]", 2),
])
def test_tensor_scatter(dest, idx, dims, src, spec, ranks):
    """An overwriting scatter is two scatter_adds (which elements are hit,
    zeroed, the updates added): it shards like them."""
    d = RNG.standard_normal(dest).astype(np.float32)
    count = int(np.prod(idx[:-1]))  # distinct positions: the indices are unique
    picks = RNG.permutation(np.prod([dest[k] for k in dims]))[:count]
    coords = np.stack(np.unravel_index(picks, [dest[k] for k in dims]),
                      axis=-1).reshape(idx).astype(np.int64)
    u = RNG.standard_normal(src).astype(np.float32)
    D, I, S = ("x".join(map(str, t)) for t in (dest, idx, src))
    layout_attr = layout(spec) if spec else ""
    text = (mesh((ranks,), ["x"]) +
            f"func.func @f(%d: tensor<{D}xf32>{(' ' + layout_attr) if spec else ''}, "
            f"%u: tensor<{S}xf32>, %i: tensor<{I}xi64>) -> tensor<{D}xf32> {{\n"
            f"  %r = tensor.scatter %u into %d[%i] scatter_dims({dims}) unique : "
            f"(tensor<{S}xf32>, tensor<{D}xf32>, tensor<{I}xi64>) -> tensor<{D}xf32>\n"
            f"  return %r : tensor<{D}xf32>\n}}\n")
    out, = dtensor.run(text, ranks, [d, u, coords])
    np.testing.assert_array_equal(out, np_scatter(d, coords, u, dims))


@pytest.mark.parametrize("ranks,spec", [(1, "[R, R, R]"), (2, "[R, S0, R]")])
def test_tosa_scatter_and_out_of_range_indices(ranks, spec):
    """tosa.scatter, and an index outside the table: dropped (it wrote
    outside the buffer before, killing the process)."""
    text = (mesh((ranks,), ["x"]) +
            f"func.func @f(%v: tensor<2x9x4xf32> {layout(spec)}, "
            "%i: tensor<2x3xi32>, %u: tensor<2x3x4xf32>) -> tensor<2x9x4xf32> {\n"
            "  %r = tosa.scatter %v, %i, %u : (tensor<2x9x4xf32>, tensor<2x3xi32>,"
            " tensor<2x3x4xf32>) -> tensor<2x9x4xf32>\n"
            "  return %r : tensor<2x9x4xf32>\n}\n")
    v = RNG.standard_normal((2, 9, 4)).astype(np.float32)
    u = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    i = np.array([[0, 8, 4], [7, -3, 100]], np.int32)
    out, = dtensor.run(text, ranks, [v, i, u])
    want = v.copy()
    for n in range(2):
        for w in range(3):
            if 0 <= i[n, w] < 9:
                want[n, i[n, w]] = u[n, w]
    np.testing.assert_array_equal(out, want)


def softmax_program(n, v):
    return (mesh((2,), ["tp"]) +
            f"func.func @f(%x: tensor<{n}x{v}xf32> {layout('[R, S0]')}) -> "
            f"(tensor<{n}x{v}xf32> {layout('[R, S0]')}) {{\n"
            f"  %e = tensor.empty() : tensor<{n}x{v}xf32>\n"
            f"  %s = linalg.softmax dimension(1) ins(%x : tensor<{n}x{v}xf32>) "
            f"outs(%e : tensor<{n}x{v}xf32>) -> tensor<{n}x{v}xf32>\n"
            f"  return %s : tensor<{n}x{v}xf32>\n}}\n")


def test_softmax_over_a_split_dim_reduces_rows_only():
    """linalg.softmax over logits split along the softmax dim: equal to
    numpy's; at GPT-2's vocabulary (2048 x 50257) the max and the sum are
    [rows] all_reduces and the logits are never gathered. (At 256 x 1001
    the cost model gathers them: it does not count elementwise work, so a
    gather of 0.5 MB looks cheaper than two reductions' latencies.)"""
    x = (3 * RNG.standard_normal((256, 1001))).astype(np.float32)
    y, = dtensor.run(softmax_program(256, 1001), 2, [x])
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-4,
                               atol=1e-7)
    per_device = spmd(softmax_program(2048, 50257))
    assert "all_gather" not in per_device
    assert per_device.count('"dtensor.all_reduce"') == 2
    assert "(tensor<2048xf32>) -> tensor<2048xf32>" in per_device
