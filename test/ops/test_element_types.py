"""Element types i1, i8, i16 and ui8 end to end (test/ops): inputs and
results through dtensor.run (numpy bool, int8, int16, uint8), checkpoints,
and the collectives a sharded program needs (all_gather, a sum, a max, a
min of i1), against numpy on 2 ranks."""

import numpy as np
import pytest

import dtensor

RNG = np.random.default_rng(21)
MESH = ('"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, '
        'axis_names = ["x"]} : () -> ()\n')


def lay(spec):
    return f' {{dtensor.layout = #dtensor.layout<@m, "{spec}">}}'


def reduce_program(et, combine, init, rows=6, cols=8):
    """r[i] = combine over j of x[i, j], with x's columns split over 2
    ranks (a Partial result resolved by an all_reduce of `et`), and x
    itself gathered back."""
    X, R = f"tensor<{rows}x{cols}x{et}>", f"tensor<{rows}x{et}>"
    return MESH + f"""func.func @f(%x: {X}{lay("[R, S0]")}) -> ({R}{lay("[R]")}, {X}{lay("[R, R]")}) {{
  %c = arith.constant {init} : {et}
  %e = tensor.empty() : {R}
  %i = linalg.fill ins(%c : {et}) outs(%e : {R}) -> {R}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}} ins(%x : {X}) outs(%i : {R}) {{
  ^bb0(%a: {et}, %acc: {et}):
    %s = {combine} %acc, %a : {et}
    linalg.yield %s : {et}
  }} -> {R}
  %p = "dtensor.annotate"(%r) {{layout = #dtensor.layout<@m, "[R] P{'sum' if 'add' in combine else 'max' if 'max' in combine else 'min'}(0)">}} : ({R}) -> {R}
  return %p, %x : {R}, {X}
}}
"""


@pytest.mark.parametrize("et,np_type,combine,init,ref", [
    ("i8", np.int8, "arith.addi", "0", lambda x: x.sum(1, dtype=np.int8)),
    ("i16", np.int16, "arith.addi", "0", lambda x: x.sum(1, dtype=np.int16)),
    ("i16", np.int16, "arith.maxsi", "-32768", lambda x: x.max(1)),
    ("i8", np.int8, "arith.minsi", "127", lambda x: x.min(1)),
])
def test_integer_reductions_over_ranks(et, np_type, combine, init, ref):
    info = np.iinfo(np_type)
    x = RNG.integers(max(info.min, -8), min(info.max, 8) + 1,
                     (6, 8)).astype(np_type)
    r, back = dtensor.run(reduce_program(et, combine, init), 2, [x])
    assert r.dtype == np_type and back.dtype == np_type
    np.testing.assert_array_equal(r, ref(x))
    np.testing.assert_array_equal(back, x)


def test_integer_collectives_on_mpi():
    """The same i8 sum and i16 max through MPI's collectives."""
    for et, np_type, combine, init, ref in (
            ("i8", np.int8, "arith.addi", "0",
             lambda x: x.sum(1, dtype=np.int8)),
            ("i16", np.int16, "arith.maxsi", "-32768", lambda x: x.max(1))):
        x = RNG.integers(-8, 9, (6, 8)).astype(np_type)
        r, _ = dtensor.run(reduce_program(et, combine, init), 2, [x],
                           backend="mpi")
        np.testing.assert_array_equal(r, ref(x))


def test_booleans_reduce_by_or_and_travel_as_bytes():
    """i1 in and out (numpy bool): a row's any (maxui over i1: or) with the
    columns split, and a comparison's mask gathered."""
    X, R = "tensor<4x6xi1>", "tensor<4xi1>"
    text = MESH + f"""func.func @f(%x: {X}{lay("[R, S0]")}, %a: tensor<4x6xi32>{lay("[R, S0]")}) -> ({R}{lay("[R]")}, {X}{lay("[R, R]")}) {{
  %c = arith.constant false
  %e = tensor.empty() : {R}
  %i = linalg.fill ins(%c : i1) outs(%e : {R}) -> {R}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}} ins(%x : {X}) outs(%i : {R}) {{
  ^bb0(%v: i1, %acc: i1):
    %s = arith.ori %acc, %v : i1
    linalg.yield %s : i1
  }} -> {R}
  %p = "dtensor.annotate"(%r) {{layout = #dtensor.layout<@m, "[R] Pmax(0)">}} : ({R}) -> {R}
  %z = arith.constant dense<0> : tensor<4x6xi32>
  %m = arith.cmpi sgt, %a, %z : tensor<4x6xi32>
  return %p, %m : {R}, {X}
}}
"""
    x = RNG.random((4, 6)) < 0.2
    x[0] = False
    a = RNG.integers(-5, 5, (4, 6)).astype(np.int32)
    any_, mask = dtensor.run(text, 2, [x, a])
    assert any_.dtype == np.bool_ and mask.dtype == np.bool_
    np.testing.assert_array_equal(any_, x.any(1))
    np.testing.assert_array_equal(mask, a > 0)


def test_unsigned_bytes_move_between_layouts():
    """ui8 (which arith does not compute on) as an input split by rows and
    a result split by columns: its blocks move as bytes."""
    text = MESH + f"""func.func @f(%x: tensor<6x4xui8>{lay("[S0, R]")}) -> (tensor<6x4xui8>{lay("[R, S0]")}) {{
  return %x : tensor<6x4xui8>
}}
"""
    x = RNG.integers(0, 256, (6, 4)).astype(np.uint8)
    y, = dtensor.run(text, 2, [x])
    assert y.dtype == np.uint8
    np.testing.assert_array_equal(y, x)


def test_small_integer_checkpoints_round_trip(tmp_path):
    tensors = {"a": RNG.integers(-128, 128, (3, 5)).astype(np.int8),
               "b": RNG.integers(-30000, 30000, (7,)).astype(np.int16),
               "c": RNG.integers(0, 256, (2, 2)).astype(np.uint8),
               "d": RNG.random((4,)) < 0.5}
    dtensor.save_checkpoint(str(tmp_path / "ck"), tensors)
    back = dtensor.load_checkpoint(str(tmp_path / "ck"))
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype, k
        np.testing.assert_array_equal(back[k], v)


# ---- f8E4M3FN and f8E5M2 -------------------------------------------------------

F8 = {"f8E4M3FN": (3, 7, False), "f8E5M2": (2, 15, True)}


def f8_values(kind):
    """The value of each of the 256 codes, from the format's definition."""
    mant, bias, ieee = F8[kind]
    top, mmask = (1 << (7 - mant)) - 1, (1 << mant) - 1
    out = []
    for b in range(256):
        e, m = (b >> mant) & top, b & mmask
        if ieee and e == top:
            v = np.inf if m == 0 else np.nan
        elif not ieee and e == top and m == mmask:
            v = np.nan
        elif e == 0:
            v = m * 2.0 ** (1 - bias - mant)
        else:
            v = (1 + m / 2 ** mant) * 2.0 ** (e - bias)
        out.append(-v if b & 0x80 else v)
    return np.array(out)


def f8_round(x, kind):
    """x rounded to `kind` by search: the nearest finite value, a tie to the
    even code; past the largest finite value plus half a step NaN
    (f8E4M3FN) or infinity (f8E5M2), at exactly that a tie as well."""
    vals = f8_values(kind)
    codes = np.array([c for c in range(128) if np.isfinite(vals[c])])
    largest = vals[codes].max()
    step = largest - np.sort(vals[codes])[-2]
    out = np.empty(np.shape(x))
    for i, v in np.ndenumerate(np.asarray(x, dtype=np.float64)):
        a = abs(v)
        if np.isnan(v):
            out[i] = np.nan
            continue
        if a > largest + step / 2 or (a == largest + step / 2 and
                                      codes[-1] % 2 == 1):
            out[i] = np.copysign(np.nan if kind == "f8E4M3FN" else np.inf, v)
            continue
        d = np.abs(vals[codes] - a)
        best = codes[d == d.min()]
        c = best[best % 2 == 0][0] if len(best) > 1 else best[0]
        out[i] = np.copysign(vals[c], v)
    return out


@pytest.mark.parametrize("kind", ["f8E4M3FN", "f8E5M2"])
@pytest.mark.parametrize("ranks", [1, 2])
def test_f8_arithmetic_rounds_each_op(kind, ranks):
    """y = x * w + b on f8 values (x's rows split over the ranks): each op
    computed in f32 and rounded to the type, against a rounding found by
    search over all 256 codes; and a row sum accumulated in the type, on 2
    ranks as two partial sums and an all_reduce in the type (the runtime's
    f8 arithmetic)."""
    T, V = f"tensor<8x16x{kind}>", f"tensor<8x{kind}>"
    spec = '[S0, R]' if ranks > 1 else '[R, R]'
    text = MESH.replace("array<i64: 2>", f"array<i64: {ranks}>") + f"""func.func @f(%x: {T}{lay(spec)}, %w: {T}{lay(spec)}, %b: {T}{lay(spec)}, %s: tensor<8x16x{kind}>{lay("[R, S0]" if ranks > 1 else "[R, R]")}) -> ({T}{lay(spec)}, {V}{lay("[R]")}) {{
  %e = tensor.empty() : {T}
  %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x, %w, %b : {T}, {T}, {T}) outs(%e : {T}) {{
  ^bb0(%p: {kind}, %q: {kind}, %c: {kind}, %o: {kind}):
    %m = arith.mulf %p, %q : {kind}
    %a = arith.addf %m, %c : {kind}
    linalg.yield %a : {kind}
  }} -> {T}
  %zero = arith.constant 0.0 : {kind}
  %ev = tensor.empty() : {V}
  %z = linalg.fill ins(%zero : {kind}) outs(%ev : {V}) -> {V}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}} ins(%s : {T}) outs(%z : {V}) {{
  ^bb0(%p: {kind}, %acc: {kind}):
    %t = arith.addf %acc, %p : {kind}
    linalg.yield %t : {kind}
  }} -> {V}
  return %y, %r : {T}, {V}
}}
"""
    rng = np.random.default_rng(5)
    x, w, b = (f8_round(rng.uniform(-3, 3, (8, 16)), kind) for _ in range(3))
    # Row sums of ones and zeros: every partial sum is a small integer
    # (exact in both types), so the order the compiler adds in does not
    # matter, but row 0's last add (8 + 1) rounds (to 8 in f8E5M2).
    s = np.zeros((8, 16))
    for i in range(1, 8):
        s[i, rng.choice(16, size=rng.integers(0, 9), replace=False)] = 1
    s[0, :9] = 1
    y, r = dtensor.run(text, ranks, [x.astype(np.float32),
                                     w.astype(np.float32),
                                     b.astype(np.float32),
                                     s.astype(np.float32)])
    assert y.dtype == np.float32 and r.dtype == np.float32
    np.testing.assert_array_equal(y, f8_round(f8_round(x * w, kind) + b, kind))
    # (on 2 ranks: 8 on one, 1 on the other, added by the all_reduce in
    # the type)
    np.testing.assert_array_equal(r, f8_round(s.sum(axis=1), kind))
    assert r[0] == (8.0 if kind == "f8E5M2" else 9.0)


def test_f8_conversions_match_a_search_over_every_code():
    """f32 -> f8 -> f32 in a compiled program (arith.truncf, arith.extf) on
    values around every code, the halfway points (ties), the overflow
    bounds, zeros, and NaN."""
    for kind in F8:
        vals = f8_values(kind)
        finite = np.sort(vals[np.isfinite(vals)])
        mids = (finite[1:] + finite[:-1]) / 2
        x = np.concatenate([finite, mids, mids * (1 + 1e-6), mids * (1 - 1e-6),
                            [1e6, -1e6, 0.0, -0.0, np.nan, 464.0, 61440.0,
                             57344.0 + 1000]]).astype(np.float32)
        n = len(x)
        text = f"""func.func @f(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %e = tensor.empty() : tensor<{n}xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}} ins(%x : tensor<{n}xf32>) outs(%e : tensor<{n}xf32>) {{
  ^bb0(%p: f32, %o: f32):
    %t = arith.truncf %p : f32 to {kind}
    %u = arith.extf %t : {kind} to f32
    linalg.yield %u : f32
  }} -> tensor<{n}xf32>
  return %y : tensor<{n}xf32>
}}
"""
        y, = dtensor.run(text, 1, [x])
        want = f8_round(x.astype(np.float64), kind)
        np.testing.assert_array_equal(y, want.astype(np.float32),
                                      err_msg=kind)


def test_f8_checkpoints_through_dtensor_ckpt(tmp_path):
    """dtensor-ckpt import --dtype f8E4M3FN|f8E5M2 rounds a float32 .npy to
    the type (as arith.truncf); export and load_checkpoint give it back as
    float32, exactly."""
    import os
    import subprocess
    ckpt = os.path.join(os.environ.get("DTENSOR_BIN_DIR", "build/bin"),
                        "dtensor-ckpt")
    x = np.array([0.3, 448.0, 500.0, -1e-3, 3.0, 0.0], np.float32)
    np.save(tmp_path / "x.npy", x)
    for kind in F8:
        ck = str(tmp_path / kind)
        subprocess.run([ckpt, "import", ck, "x", str(tmp_path / "x.npy"),
                        "--mesh", "1", "--spec", "[R]", "--dtype", kind],
                       check=True)
        want = f8_round(x.astype(np.float64), kind).astype(np.float32)
        np.testing.assert_array_equal(dtensor.load_checkpoint(ck)["x"], want)
        subprocess.run([ckpt, "export", ck, "x", str(tmp_path / "y.npy")],
                       check=True)
        np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want)
