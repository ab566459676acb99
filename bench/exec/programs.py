"""The benchmark programs (annotated MLIR text) that bench/exec/run.py (CPU)
and bench/gpu/programs.py (GPU) compile: a GEMM, layer norm + gelu, the
Megatron MLP and a GPT block, tensor parallel on a 1-d mesh "tp".

`et` is the element type of the tensors ("f32" or "bf16"): with bf16 the
matmuls take and give bf16 (accumulating in f32), the elementwise bodies
widen to f32 and narrow back (arith.extf / truncf), layer norm's row sums
and the attention scores and softmax stay f32 -- what mixed-precision
training does. With f32 the text is the plain f32 program.
"""

MESH = '"dtensor.mesh"() {{sym_name = "m", shape = array<i64: {n}>, axis_names = ["tp"]}} : () -> ()\n'


def _widen(v, et, name):
    """Lines making %name the f32 value of %v (of type et), and the name."""
    if et == "f32":
        return "", v
    return f"    %{name} = arith.extf %{v} : {et} to f32\n", name


def _narrow(v, et, name):
    """Lines making %name the et value of the f32 %v, and the name."""
    if et == "f32":
        return "", v
    return f"    %{name} = arith.truncf %{v} : f32 to {et}\n", name


def zero_lines(et):
    """%zero (f32) and, for another element type, %zeroe of it."""
    text = "  %zero = arith.constant 0.0 : f32\n"
    if et != "f32":
        text += f"  %zeroe = arith.constant 0.0 : {et}\n"
    return text


def zero_of(et):
    return "zero" if et == "f32" else "zeroe"


def gemm_program(m, n, k, et="f32"):
    return MESH.format(n=1) + f"""func.func @gemm(%a: tensor<{m}x{k}x{et}>, %b: tensor<{k}x{n}x{et}>) -> tensor<{m}x{n}x{et}> {{
  %z = arith.constant 0.0 : {et}
  %e = tensor.empty() : tensor<{m}x{n}x{et}>
  %c = linalg.fill ins(%z : {et}) outs(%e : tensor<{m}x{n}x{et}>) -> tensor<{m}x{n}x{et}>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}x{et}>, tensor<{k}x{n}x{et}>) outs(%c : tensor<{m}x{n}x{et}>) -> tensor<{m}x{n}x{et}>
  return %r : tensor<{m}x{n}x{et}>
}}
"""


def gelu_lines(out, x, init, ty, et="f32"):
    """%out = the tanh gelu of %x, elementwise into %init, as a generic."""
    idm = "affine_map<(i, j) -> (i, j)>"
    wide, v = _widen("v", et, "vw")
    narrow, r = _narrow("vb", et, "vn")
    return f"""  %{out} = linalg.generic {{indexing_maps = [{idm}, {idm}], iterator_types = ["parallel", "parallel"]}} ins(%{x} : {ty}) outs(%{init} : {ty}) {{
  ^bb0(%v: {et}, %o: {et}):
{wide}    %c0 = arith.constant 0.5 : f32
    %c1 = arith.constant 1.0 : f32
    %c2 = arith.constant 0.7978845608 : f32
    %c3 = arith.constant 0.044715 : f32
    %v3 = arith.mulf %{v}, %{v} : f32
    %v4 = arith.mulf %v3, %{v} : f32
    %v5 = arith.mulf %v4, %c3 : f32
    %v6 = arith.addf %{v}, %v5 : f32
    %v7 = arith.mulf %v6, %c2 : f32
    %v8 = math.tanh %v7 : f32
    %v9 = arith.addf %v8, %c1 : f32
    %va = arith.mulf %{v}, %c0 : f32
    %vb = arith.mulf %va, %v9 : f32
{narrow}    linalg.yield %{r} : {et}
  }} -> {ty}
"""


def mlp_program(ranks, t=512, d=1024, f=4096, et="f32"):
    lay = lambda spec: f' {{dtensor.layout = #dtensor.layout<@m, "{spec}">}}'
    z = "%z" if et == "f32" else "%ze"
    zeros = (f"  %z = arith.constant 0.0 : f32\n" if et == "f32" else
             f"  %ze = arith.constant 0.0 : {et}\n")
    return MESH.format(n=ranks) + f"""func.func @mlp(%x: tensor<{t}x{d}x{et}>{lay("[R, R]")},
                %w1: tensor<{d}x{f}x{et}>{lay("[R, S0]")},
                %w2: tensor<{f}x{d}x{et}>{lay("[S0, R]")}) -> (tensor<{t}x{d}x{et}>{lay("[R, R]")}) {{
{zeros}  %e1 = tensor.empty() : tensor<{t}x{f}x{et}>
  %i1 = linalg.fill ins({z} : {et}) outs(%e1 : tensor<{t}x{f}x{et}>) -> tensor<{t}x{f}x{et}>
  %h = linalg.matmul ins(%x, %w1 : tensor<{t}x{d}x{et}>, tensor<{d}x{f}x{et}>) outs(%i1 : tensor<{t}x{f}x{et}>) -> tensor<{t}x{f}x{et}>
  %e2 = tensor.empty() : tensor<{t}x{f}x{et}>
{gelu_lines("g", "h", "e2", f"tensor<{t}x{f}x{et}>", et)}  %e3 = tensor.empty() : tensor<{t}x{d}x{et}>
  %i3 = linalg.fill ins({z} : {et}) outs(%e3 : tensor<{t}x{d}x{et}>) -> tensor<{t}x{d}x{et}>
  %y = linalg.matmul ins(%g, %w2 : tensor<{t}x{f}x{et}>, tensor<{f}x{d}x{et}>) outs(%i3 : tensor<{t}x{d}x{et}>) -> tensor<{t}x{d}x{et}>
  return %y : tensor<{t}x{d}x{et}>
}}
"""


def layernorm_gelu_program(t=4096, d=1024):
    ty, v = f"tensor<{t}x{d}xf32>", f"tensor<{d}xf32>"
    return (MESH.format(n=1) +
            f"func.func @ln_gelu(%x: {ty}, %g: {v}, %b: {v}) -> {ty} {{\n"
            "  %zero = arith.constant 0.0 : f32\n" +
            layernorm_lines("x", "y", t, d, "ln", affine=("g", "b")) +
            gelu_lines("out", "y", "ln_e2", ty) +
            f"  return %out : {ty}\n}}\n")


def layernorm_lines(x, out, t, d, tag, affine=None, et="f32"):
    """Layer norm of %x [t, d] into %out, as generics (row sums, centered
    square sums, the normalization), times gamma plus beta when `affine`
    names them; %zero must be defined. Row sums are f32 whatever `et`."""
    ty, r = f"tensor<{t}x{d}x{et}>", f"tensor<{t}xf32>"
    idm, row = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>"
    col, v = "affine_map<(i, j) -> (j)>", f"tensor<{d}xf32>"
    ins, maps, args, tail = "", "", "", ["    linalg.yield %t1 : f32"]
    if affine:
        g, b = affine
        ins, maps = f", %{g}, %{b}", f", {col}, {col}"
        args = ", %gg: f32, %bb: f32"
        tail = ["    %t2 = arith.mulf %t1, %gg : f32",
                "    %t3 = arith.addf %t2, %bb : f32",
                "    linalg.yield %t3 : f32"]
    if et != "f32":
        last = tail[-1].split("%")[1].split(" ")[0]
        tail[-1] = f"    %tn = arith.truncf %{last} : f32 to {et}"
        tail.append(f"    linalg.yield %tn : {et}")
    types = f", {v}, {v}" if affine else ""
    tail = "\n".join(tail)
    wide, vv = _widen("v", et, "vw")
    return f"""  %{tag}_e1 = tensor.empty() : {r}
  %{tag}_s0 = linalg.fill ins(%zero : f32) outs(%{tag}_e1 : {r}) -> {r}
  %{tag}_sum = linalg.generic {{indexing_maps = [{idm}, {row}], iterator_types = ["parallel", "reduction"]}} ins(%{x} : {ty}) outs(%{tag}_s0 : {r}) {{
  ^bb0(%v: {et}, %a: f32):
{wide}    %s = arith.addf %a, %{vv} : f32
    linalg.yield %s : f32
  }} -> {r}
  %{tag}_var = linalg.generic {{indexing_maps = [{idm}, {row}, {row}], iterator_types = ["parallel", "reduction"]}} ins(%{x}, %{tag}_sum : {ty}, {r}) outs(%{tag}_s0 : {r}) {{
  ^bb0(%v: {et}, %s: f32, %a: f32):
{wide}    %n = arith.constant {float(d)} : f32
    %m = arith.divf %s, %n : f32
    %c = arith.subf %{vv}, %m : f32
    %q = arith.mulf %c, %c : f32
    %o = arith.addf %a, %q : f32
    linalg.yield %o : f32
  }} -> {r}
  %{tag}_e2 = tensor.empty() : {ty}
  %{out} = linalg.generic {{indexing_maps = [{idm}, {row}, {row}{maps}, {idm}], iterator_types = ["parallel", "parallel"]}} ins(%{x}, %{tag}_sum, %{tag}_var{ins} : {ty}, {r}, {r}{types}) outs(%{tag}_e2 : {ty}) {{
  ^bb0(%v: {et}, %s: f32, %q: f32{args}, %o: {et}):
{wide}    %n = arith.constant {float(d)} : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %n : f32
    %w = arith.divf %q, %n : f32
    %we = arith.addf %w, %eps : f32
    %rs = math.rsqrt %we : f32
    %c = arith.subf %{vv}, %m : f32
    %t1 = arith.mulf %c, %rs : f32
{tail}
  }} -> {ty}
"""


def matmul_lines(out, a, b, m, k, n, et="f32"):
    z = zero_of(et)
    return f"""  %{out}_e = tensor.empty() : tensor<{m}x{n}x{et}>
  %{out}_z = linalg.fill ins(%{z} : {et}) outs(%{out}_e : tensor<{m}x{n}x{et}>) -> tensor<{m}x{n}x{et}>
  %{out} = linalg.matmul ins(%{a}, %{b} : tensor<{m}x{k}x{et}>, tensor<{k}x{n}x{et}>) outs(%{out}_z : tensor<{m}x{n}x{et}>) -> tensor<{m}x{n}x{et}>
"""


def _product_body(et, out_et):
    """The body of a contraction of two `et` values into `out_et`."""
    if et == out_et:
        return f"""  ^bb0(%x0: {et}, %y0: {et}, %o: {et}):
    %p = arith.mulf %x0, %y0 : {et}
    %a = arith.addf %o, %p : {et}
    linalg.yield %a : {et}"""
    return f"""  ^bb0(%x0: {et}, %y0: {et}, %o: {out_et}):
    %xw = arith.extf %x0 : {et} to {out_et}
    %yw = arith.extf %y0 : {et} to {out_et}
    %p = arith.mulf %xw, %yw : {out_et}
    %a = arith.addf %o, %p : {out_et}
    linalg.yield %a : {out_et}"""


def gpt_program(ranks, b=4, s=512, h=1024, nh=16, f=4096, et="f32"):
    """One GPT block (pre-norm, causal attention, tanh-gelu MLP, no biases),
    tensor parallel on `ranks`: q, k, v and W1 split by columns (heads),
    Wo and W2 by rows, as Megatron does. The scores and the softmax are f32
    whatever `et` (the probabilities narrowed to `et` for P V)."""
    t, hd = b * s, h // nh
    lay = lambda spec: f' {{dtensor.layout = #dtensor.layout<@m, "{spec}">}}'
    X, W = f"tensor<{t}x{h}x{et}>", f"tensor<{h}x{h}x{et}>"
    Q4 = f"tensor<{b}x{s}x{nh}x{hd}x{et}>"
    SC = f"tensor<{b}x{nh}x{s}x{s}xf32>"
    PE = f"tensor<{b}x{nh}x{s}x{s}x{et}>"
    text = MESH.format(n=ranks) + f"""func.func @gpt(%x: {X}{lay("[R, R]")},
    %wq: {W}{lay("[R, S0]")}, %wk: {W}{lay("[R, S0]")}, %wv: {W}{lay("[R, S0]")},
    %wo: {W}{lay("[S0, R]")}, %w1: tensor<{h}x{f}x{et}>{lay("[R, S0]")},
    %w2: tensor<{f}x{h}x{et}>{lay("[S0, R]")}) -> ({X}{lay("[R, R]")}) {{
""" + zero_lines(et)
    text += layernorm_lines("x", "h1", t, h, "ln1", et=et)
    for name, w in (("qp", "wq"), ("kp", "wk"), ("vp", "wv")):
        text += matmul_lines(name, "h1", w, t, h, h, et)
        text += f"""  %{name}4 = tensor.expand_shape %{name} [[0, 1], [2, 3]] output_shape [{b}, {s}, {nh}, {hd}] : {X} into {Q4}
"""
    text += f"""  %se = tensor.empty() : {SC}
  %sz = linalg.fill ins(%zero : f32) outs(%se : {SC}) -> {SC}
  %sc = linalg.generic {{indexing_maps = [affine_map<(b, n, i, j, d) -> (b, i, n, d)>, affine_map<(b, n, i, j, d) -> (b, j, n, d)>, affine_map<(b, n, i, j, d) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}} ins(%qp4, %kp4 : {Q4}, {Q4}) outs(%sz : {SC}) {{
{_product_body(et, "f32")}
  }} -> {SC}
  %masked = linalg.generic {{indexing_maps = [affine_map<(b, n, i, j) -> (b, n, i, j)>, affine_map<(b, n, i, j) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}} ins(%sc : {SC}) outs(%se : {SC}) {{
  ^bb0(%v: f32, %o: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %scale = arith.constant {1.0 / hd ** 0.5} : f32
    %ninf = arith.constant 0xFF800000 : f32
    %future = arith.cmpi ugt, %j, %i : index
    %sv = arith.mulf %v, %scale : f32
    %r = arith.select %future, %ninf, %sv : f32
    linalg.yield %r : f32
  }} -> {SC}
  %pr = linalg.softmax dimension(3) ins(%masked : {SC}) outs(%se : {SC}) -> {SC}
"""
    p = "pr"
    if et != "f32":
        p = "pn"
        text += f"""  %pe = tensor.empty() : {PE}
  %pn = linalg.generic {{indexing_maps = [affine_map<(b, n, i, j) -> (b, n, i, j)>, affine_map<(b, n, i, j) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}} ins(%pr : {SC}) outs(%pe : {PE}) {{
  ^bb0(%v: f32, %o: {et}):
    %r = arith.truncf %v : f32 to {et}
    linalg.yield %r : {et}
  }} -> {PE}
"""
    PT = SC if et == "f32" else PE
    text += f"""  %ce = tensor.empty() : {Q4}
  %cz = linalg.fill ins(%{zero_of(et)} : {et}) outs(%ce : {Q4}) -> {Q4}
  %ctx4 = linalg.generic {{indexing_maps = [affine_map<(b, n, i, d, j) -> (b, n, i, j)>, affine_map<(b, n, i, d, j) -> (b, j, n, d)>, affine_map<(b, n, i, d, j) -> (b, i, n, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}} ins(%{p}, %vp4 : {PT}, {Q4}) outs(%cz : {Q4}) {{
{_product_body(et, et)}
  }} -> {Q4}
  %ctx = tensor.collapse_shape %ctx4 [[0, 1], [2, 3]] : {Q4} into {X}
"""
    text += matmul_lines("att", "ctx", "wo", t, h, h, et)
    text += f"  %x1 = arith.addf %x, %att : {X}\n"
    text += layernorm_lines("x1", "h2", t, h, "ln2", et=et)
    text += matmul_lines("u", "h2", "w1", t, h, f, et)
    F = f"tensor<{t}x{f}x{et}>"
    text += f"""  %ge = tensor.empty() : {F}
"""
    text += gelu_lines("g", "u", "ge", F, et)
    text += matmul_lines("dn", "g", "w2", t, f, h, et)
    text += f"  %y = arith.addf %x1, %dn : {X}\n  return %y : {X}\n}}\n"
    return text
