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
