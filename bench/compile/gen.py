#!/usr/bin/env python3
"""Generates an N-block Megatron MLP (optionally a transformer-like block
with a residual add and a row normalization) in two syntaxes: ours
(dtensor.annotate) and MLIR's shard dialect (shard.shard), the same program.

usage: gen.py N {dtensor|shard} [mlp|transformer] [MESH]   (MESH like 4 or 256x256)
"""
import sys

n = int(sys.argv[1])
syntax = sys.argv[2]
variant = sys.argv[3] if len(sys.argv) > 3 else "mlp"
mesh = sys.argv[4] if len(sys.argv) > 4 else "4"
shape = [int(s) for s in mesh.split("x")]
B, D, H = 16, 64, 256
out = []
w = out.append

if syntax == "dtensor":
    names = ", ".join('"a%d"' % i for i in range(len(shape)))
    w('"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: %s>, '
      'axis_names = [%s]} : () -> ()' % (", ".join(map(str, shape)), names))
    rep = "R, R"
    col = '#dtensor.layout<@mesh, "[R, S0]">'
    row = '#dtensor.layout<@mesh, "[S0, R]">'
    w('func.func @model(%%x: tensor<%dx%dxf32> {dtensor.layout = '
      '#dtensor.layout<@mesh, "[R, R]">}) -> tensor<%dx%dxf32> {' % (B, D, B, D))
else:
    w("shard.grid @grid(shape = %s)" % mesh)
    w("func.func @model(%%x: tensor<%dx%dxf32>) -> tensor<%dx%dxf32> {" % (B, D, B, D))
    w("  %scol = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding")
    w("  %srow = shard.sharding @grid split_axes = [[0], []] : !shard.sharding")

w("  %z = arith.constant 0.0 : f32")
prev = "%x"
for i in range(n):
    w1 = "%%w1_%d" % i
    w2 = "%%w2_%d" % i
    w("  %s = tensor.empty() : tensor<%dx%dxf32>" % (w1, D, H))
    w("  %s = tensor.empty() : tensor<%dx%dxf32>" % (w2, H, D))
    if syntax == "dtensor":
        w('  %%c1_%d = "dtensor.annotate"(%s) {layout = %s} : (tensor<%dx%dxf32>) -> tensor<%dx%dxf32>'
          % (i, w1, col, D, H, D, H))
        w('  %%c2_%d = "dtensor.annotate"(%s) {layout = %s} : (tensor<%dx%dxf32>) -> tensor<%dx%dxf32>'
          % (i, w2, row, H, D, H, D))
    else:
        w("  %%c1_%d = shard.shard %s to %%scol : tensor<%dx%dxf32>" % (i, w1, D, H))
        w("  %%c2_%d = shard.shard %s to %%srow : tensor<%dx%dxf32>" % (i, w2, H, D))
    w("  %%e1_%d = tensor.empty() : tensor<%dx%dxf32>" % (i, B, H))
    w("  %%i1_%d = linalg.fill ins(%%z : f32) outs(%%e1_%d : tensor<%dx%dxf32>) -> tensor<%dx%dxf32>"
      % (i, i, B, H, B, H))
    w("  %%h_%d = linalg.matmul ins(%s, %%c1_%d : tensor<%dx%dxf32>, tensor<%dx%dxf32>) "
      "outs(%%i1_%d : tensor<%dx%dxf32>) -> tensor<%dx%dxf32>" % (i, prev, i, B, D, D, H, i, B, H, B, H))
    w("  %%e2_%d = tensor.empty() : tensor<%dx%dxf32>" % (i, B, D))
    w("  %%i2_%d = linalg.fill ins(%%z : f32) outs(%%e2_%d : tensor<%dx%dxf32>) -> tensor<%dx%dxf32>"
      % (i, i, B, D, B, D))
    w("  %%y_%d = linalg.matmul ins(%%h_%d, %%c2_%d : tensor<%dx%dxf32>, tensor<%dx%dxf32>) "
      "outs(%%i2_%d : tensor<%dx%dxf32>) -> tensor<%dx%dxf32>" % (i, i, i, B, H, H, D, i, B, D, B, D))
    prev = "%%y_%d" % i
    if variant == "transformer":
        w("  %%r_%d = linalg.add ins(%s, %%y_%d : tensor<%dx%dxf32>, tensor<%dx%dxf32>) "
          "outs(%%e2_%d : tensor<%dx%dxf32>) -> tensor<%dx%dxf32>" % (i, prev, i, B, D, B, D, i, B, D, B, D))
        w("  %%n_%d = linalg.exp ins(%%r_%d : tensor<%dx%dxf32>) outs(%%e2_%d : tensor<%dx%dxf32>) -> tensor<%dx%dxf32>"
          % (i, i, B, D, i, B, D, B, D))
        prev = "%%n_%d" % i
w("  return %s : tensor<%dx%dxf32>" % (prev, B, D))
w("}")
print("\n".join(out))
