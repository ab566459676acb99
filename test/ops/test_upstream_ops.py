"""Ops upstream lowers, run against numpy (test/ops): linalg.pack and
linalg.unpack (decomposed into pad, expand_shape and transpose, so they
also shard), tosa.mul with a shift and tosa.rescale (tosa.apply_scale),
tosa.cond_if and tosa.while_loop (tosa-to-scf), scf.while (run
replicated); on one device and sharded."""

import numpy as np
import pytest

import dtensor

RNG = np.random.default_rng(9)


def mesh(n):
    return (f'"dtensor.mesh"() {{sym_name = "m", shape = array<i64: {n}>, '
            f'axis_names = ["x"]}} : () -> ()\n')


def lay(spec):
    return f' {{dtensor.layout = #dtensor.layout<@m, "{spec}">}}' if spec else ""


def np_pack(a, pos, tiles, outer=None, pad=0.0):
    """linalg.pack's meaning in numpy."""
    n = a.ndim
    outer = list(range(n)) if outer is None else outer
    padded_shape = list(a.shape)
    for d, t in zip(pos, tiles):
        padded_shape[d] = -(-a.shape[d] // t) * t
    p = np.full(padded_shape, pad, a.dtype)
    p[tuple(slice(0, s) for s in a.shape)] = a
    shape, where = [], {}
    for d in range(n):
        where[d] = len(shape)
        if d in pos:
            t = tiles[pos.index(d)]
            shape += [padded_shape[d] // t, t]
        else:
            shape += [padded_shape[d]]
    x = p.reshape(shape)
    perm = [where[d] for d in outer] + [where[d] + 1 for d in pos]
    return x.transpose(perm)


@pytest.mark.parametrize("shape,pos,tiles,outer,ranks,spec", [
    ((8, 6), [0, 1], [2, 2], None, 1, None),
    ((7, 6), [1, 0], [3, 4], [1, 0], 1, None),   # padded, outer permuted
    ((8, 6), [1], [3], None, 2, "[S0, R]"),      # rows split over 2
    ((4, 10), [0, 1], [2, 4], [1, 0], 2, "[R, S0]"),
])
def test_pack_and_unpack(shape, pos, tiles, outer, ranks, spec):
    a = RNG.standard_normal(shape).astype(np.float32)
    want = np_pack(a, pos, tiles, outer, pad=0.5)
    P = "x".join(map(str, want.shape)) + "xf32"
    S = "x".join(map(str, shape)) + "xf32"
    perm = f" outer_dims_perm = {outer}" if outer else ""
    text = mesh(ranks) + f"""func.func @f(%a: tensor<{S}>{lay(spec)}) -> (tensor<{P}>, tensor<{S}>) {{
  %pv = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<{P}>
  %p = linalg.pack %a padding_value(%pv : f32){perm} inner_dims_pos = {pos} inner_tiles = {tiles} into %e : tensor<{S}> -> tensor<{P}>
  %e2 = tensor.empty() : tensor<{S}>
  %u = linalg.unpack %p{perm} inner_dims_pos = {pos} inner_tiles = {tiles} into %e2 : tensor<{P}> -> tensor<{S}>
  return %p, %u : tensor<{P}>, tensor<{S}>
}}
"""
    p, u = dtensor.run(text, ranks, [a])
    np.testing.assert_array_equal(p, want)
    np.testing.assert_array_equal(u, a)


def test_pack_without_padding_value_that_needs_one_is_an_error():
    text = """func.func @f(%a: tensor<7x6xf32>) -> tensor<4x6x2xf32> {
  %e = tensor.empty() : tensor<4x6x2xf32>
  %p = linalg.pack %a inner_dims_pos = [0] inner_tiles = [2] into %e : tensor<7x6xf32> -> tensor<4x6x2xf32>
  return %p : tensor<4x6x2xf32>
}
"""
    with pytest.raises(dtensor.CompileError,
                       match="'linalg.pack' op invalid tile factor or output "
                             "size provided. Only full tiles are supported "
                             "when padding_value is not set"):
        dtensor.run(text, 1, [np.zeros((7, 6), np.float32)])


def test_tosa_mul_with_shift():
    """tosa.mul of i32 with shift 3: (a * b + 4) >> 3, rounded as TOSA's
    apply_scale does (tosa-to-arith lowers it)."""
    text = """func.func @f(%a: tensor<16xi32>, %b: tensor<16xi32>) -> tensor<16xi32> {
  %shift = "tosa.const"() <{values = dense<3> : tensor<1xi8>}> : () -> tensor<1xi8>
  %r = tosa.mul %a, %b, %shift : (tensor<16xi32>, tensor<16xi32>, tensor<1xi8>) -> tensor<16xi32>
  return %r : tensor<16xi32>
}
"""
    a = RNG.integers(-1000, 1000, 16).astype(np.int32)
    b = RNG.integers(-1000, 1000, 16).astype(np.int32)
    r, = dtensor.run(text, 1, [a, b])
    prod = a.astype(np.int64) * b
    np.testing.assert_array_equal(r, ((prod + 4) >> 3).astype(np.int32))


def test_tosa_rescale():
    """tosa.rescale of i32 to i8 by 2^30 / 2^31 (a half, rounded up as
    apply_scale rounds, saturated to i8)."""
    text = """func.func @f(%a: tensor<16xi32>) -> tensor<16xi8> {
  %mult = "tosa.const"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>
  %shift = "tosa.const"() <{values = dense<31> : tensor<1xi8>}> : () -> tensor<1xi8>
  %izp = "tosa.const"() <{values = dense<0> : tensor<1xi32>}> : () -> tensor<1xi32>
  %ozp = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %r = tosa.rescale %a, %mult, %shift, %izp, %ozp {scale32 = true, rounding_mode = SINGLE_ROUND, per_channel = false, input_unsigned = false, output_unsigned = false} : (tensor<16xi32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<16xi8>
  return %r : tensor<16xi8>
}
"""
    a = RNG.integers(-300, 300, 16).astype(np.int32)
    r, = dtensor.run(text, 1, [a])
    want = ((a.astype(np.int64) * 2 ** 30 + 2 ** 30) >> 31).clip(-128, 127)
    np.testing.assert_array_equal(r, want.astype(np.int8))


COND = """func.func @f(%s: tensor<f32>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
  %c = tosa.greater %s, %z : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %r = tosa.cond_if %c (%x = %a, %y = %b) : tensor<i1> (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x1: tensor<4xf32>, %y1: tensor<4xf32>):
    %t = tosa.add %x1, %y1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    tosa.yield %t : tensor<4xf32>
  } else {
  ^bb0(%x1: tensor<4xf32>, %y1: tensor<4xf32>):
    %t = tosa.sub %x1, %y1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    tosa.yield %t : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
"""


@pytest.mark.parametrize("sign,ranks", [(1.0, 1), (-1.0, 1), (1.0, 2),
                                        (-1.0, 2)])
def test_tosa_cond_if(sign, ranks):
    """On 2 ranks with %a split: dtensor-spmd makes it an scf.if first
    (tosa-to-scf), whose branches propagation enters."""
    text = COND
    if ranks > 1:
        text = mesh(ranks) + COND.replace(
            "%a: tensor<4xf32>", "%a: tensor<4xf32>" + lay("[S0]"), 1)
    a, b = RNG.standard_normal((2, 4)).astype(np.float32)
    r, = dtensor.run(text, ranks, [np.array(sign, np.float32), a, b])
    np.testing.assert_array_equal(r, a + b if sign > 0 else a - b)


@pytest.mark.parametrize("ranks,spec", [(1, None), (2, "[S0]"), (4, "[S0]")])
def test_tosa_while_loop(ranks, spec):
    """Doubles x until its first element exceeds 100; sharded, the loop
    runs replicated (every device the same iterations) and the result is
    split again."""
    S = "4xf32" if ranks > 1 else "3xf32"
    text = (mesh(ranks) if spec else "") + """func.func @f(%x: tensor<3xf32>LAY) -> tensor<3xf32> {
  %r = tosa.while_loop (%v = %x) : (tensor<3xf32>) -> tensor<3xf32> {
    %lim = "tosa.const"() <{values = dense<100.0> : tensor<f32>}> : () -> tensor<f32>
    %st = tosa.const_shape {values = dense<[0]> : tensor<1xindex>} : () -> !tosa.shape<1>
    %sz = tosa.const_shape {values = dense<[1]> : tensor<1xindex>} : () -> !tosa.shape<1>
    %first = tosa.slice %v, %st, %sz : (tensor<3xf32>, !tosa.shape<1>, !tosa.shape<1>) -> tensor<1xf32>
    %s0 = tosa.const_shape {values = dense<> : tensor<0xindex>} : () -> !tosa.shape<0>
    %f0 = tosa.reshape %first, %s0 : (tensor<1xf32>, !tosa.shape<0>) -> tensor<f32>
    %c = tosa.greater %lim, %f0 : (tensor<f32>, tensor<f32>) -> tensor<i1>
    tosa.yield %c : tensor<i1>
  } do {
  ^bb0(%v1: tensor<3xf32>):
    %d = tosa.add %v1, %v1 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    tosa.yield %d : tensor<3xf32>
  }
  %o = tosa.add %r, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %o : tensor<3xf32>
}
""".replace("3xf32", S).replace("LAY", lay(spec))
    x = np.array([3.0, 1.0, -2.0, 5.0][:int(S[0])], np.float32)
    r, = dtensor.run(text, ranks, [x])
    want = x.copy()
    while want[0] <= 100:
        want = want * 2
    np.testing.assert_array_equal(r, want + x)


def test_scf_while_on_a_2x2_mesh():
    """A while loop whose body multiplies by a weight split over the mesh
    (a matmul with its collectives inside the loop) until the norm passes
    a bound: the carried value is replicated, the body's matmul runs on
    the split weight, and every device runs the same iterations."""
    text = """"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2, 2>, axis_names = ["a", "b"]} : () -> ()
func.func @f(%x: tensor<4x8xf32> {dtensor.layout = #dtensor.layout<@m, "[S(a), R]">},
             %w: tensor<8x8xf32> {dtensor.layout = #dtensor.layout<@m, "[R, S(b)]">}) -> tensor<4x8xf32> {
  %bound = arith.constant 1.0e4 : f32
  %zero = arith.constant 0.0 : f32
  %r = scf.while (%v = %x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
    %e = tensor.empty() : tensor<f32>
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
    %sq = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                          iterator_types = ["reduction", "reduction"]}
        ins(%v : tensor<4x8xf32>) outs(%z : tensor<f32>) {
    ^bb0(%a: f32, %acc: f32):
      %m = arith.mulf %a, %a : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    } -> tensor<f32>
    %n = tensor.extract %sq[] : tensor<f32>
    %c = arith.cmpf olt, %n, %bound : f32
    scf.condition(%c) %v : tensor<4x8xf32>
  } do {
  ^bb0(%v1: tensor<4x8xf32>):
    %e2 = tensor.empty() : tensor<4x8xf32>
    %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = linalg.matmul ins(%v1, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z2 : tensor<4x8xf32>) -> tensor<4x8xf32>
    scf.yield %y : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}
"""
    x = RNG.uniform(0.5, 1.0, (4, 8)).astype(np.float32)
    w = RNG.uniform(0.2, 0.4, (8, 8)).astype(np.float32)
    r, = dtensor.run(text, 4, [x, w])
    want = x.astype(np.float64)
    while (want * want).sum() < 1e4:
        want = want @ w.astype(np.float64)
    np.testing.assert_allclose(r, want, rtol=1e-4)
