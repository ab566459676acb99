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


def causal_softmax_lines(pre, q4, k4, Q4, SC, hd, et="f32"):
    """%<pre>pr: the causal softmax of the scaled scores of heads %q4 and
    %k4 ([b, s, heads, hd] of type Q4) as [b, heads, s, s] f32 (SC), with
    %<pre>se its empty tensor; %zero must be defined."""
    return f"""  %{pre}se = tensor.empty() : {SC}
  %{pre}sz = linalg.fill ins(%zero : f32) outs(%{pre}se : {SC}) -> {SC}
  %{pre}sc = linalg.generic {{indexing_maps = [affine_map<(b, n, i, j, d) -> (b, i, n, d)>, affine_map<(b, n, i, j, d) -> (b, j, n, d)>, affine_map<(b, n, i, j, d) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}} ins(%{q4}, %{k4} : {Q4}, {Q4}) outs(%{pre}sz : {SC}) {{
{_product_body(et, "f32")}
  }} -> {SC}
  %{pre}masked = linalg.generic {{indexing_maps = [affine_map<(b, n, i, j) -> (b, n, i, j)>, affine_map<(b, n, i, j) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}} ins(%{pre}sc : {SC}) outs(%{pre}se : {SC}) {{
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
  %{pre}pr = linalg.softmax dimension(3) ins(%{pre}masked : {SC}) outs(%{pre}se : {SC}) -> {SC}
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
    text += causal_softmax_lines("", "qp4", "kp4", Q4, SC, hd, et)
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


def gpt_train_program(cfg, mesh=(1,), axes=("dp",), layouts=None):
    """A small GPT as nanoGPT writes it, in f32, as @loss(params..., tokens,
    targets) -> the mean cross-entropy: token embeddings looked up by id
    (tensor.extract in a linalg body: a gather), learned positions,
    cfg["layers"] pre-norm blocks (layer norm with weight and bias, causal
    attention of cfg["heads"] heads with separate q, k, v, tanh-gelu MLP of
    4 x width, no biases in the linears), a final layer norm, the head tied
    to the token embedding, and cross-entropy the usual way (row max,
    log-sum-exp, the target's logit by index, the mean). Weights are stored
    [in, out]; every argument is named as PyTorch's nanoGPT names its
    parameter (docs/training.md). `layouts` maps names to specs on `mesh`
    (axis names `axes`)."""
    B, T, C, V = cfg["batch"], cfg["block"], cfg["width"], cfg["vocab"]
    L, NH = cfg["layers"], cfg["heads"]
    HD, F, N = C // NH, 4 * C, B * T
    layouts = layouts or {}
    shape = ", ".join(str(d) for d in mesh)
    names = ", ".join(f'"{a}"' for a in axes)
    text = (f'"dtensor.mesh"() {{sym_name = "m", shape = array<i64: {shape}>, '
            f"axis_names = [{names}]}} : () -> ()\n")
    params = gpt_parameters(cfg)

    def arg(name, ty, var):
        attrs = [f'dtensor.name = "{name}"']
        if name in layouts:
            attrs.append(f'dtensor.layout = #dtensor.layout<@m, '
                         f'"{layouts[name]}">')
        return f"%{var}: {ty} {{{', '.join(attrs)}}}"

    def var(name):
        return "p_" + name.replace(".", "_")

    def ty(s, et="f32"):
        return "tensor<" + "".join(f"{d}x" for d in s) + et + ">"

    sig = [arg(n, ty(s), var(n)) for n, s in params]
    sig.append(arg("tokens", ty((B, T), "i64"), "tokens"))
    sig.append(arg("targets", ty((B, T), "i64"), "targets"))
    X, R = ty((N, C)), ty((N,))
    text += f"func.func @loss({', '.join(sig)}) -> tensor<f32> {{\n"
    text += "  %zero = arith.constant 0.0 : f32\n"
    E3 = ty((B, T, C))
    wte, wpe = var("transformer.wte.weight"), var("transformer.wpe.weight")
    text += f"""  %emb_e = tensor.empty() : {E3}
  %emb = linalg.generic {{indexing_maps = [affine_map<(b, t, c) -> (b, t)>, affine_map<(b, t, c) -> (t, c)>, affine_map<(b, t, c) -> (b, t, c)>], iterator_types = ["parallel", "parallel", "parallel"]}} ins(%tokens, %{wpe} : {ty((B, T), "i64")}, {ty((T, C))}) outs(%emb_e : {E3}) {{
  ^bb0(%id: i64, %pos: f32, %o: f32):
    %i = arith.index_cast %id : i64 to index
    %c = linalg.index 2 : index
    %tok = tensor.extract %{wte}[%i, %c] : {ty((V, C))}
    %s = arith.addf %tok, %pos : f32
    linalg.yield %s : f32
  }} -> {E3}
  %xemb = tensor.collapse_shape %emb [[0, 1], [2]] : {E3} into {X}
"""
    Q4 = ty((B, T, NH, HD))
    SC = ty((B, NH, T, T))
    x = "xemb"
    for i in range(L):
        p = f"transformer.h.{i}."
        v = lambda n: var(p + n)
        pre = f"b{i}_"
        text += layernorm_lines(x, pre + "h1", N, C, pre + "ln1",
                                affine=(v("ln_1.weight"), v("ln_1.bias")))
        for q, w in (("q", "attn.q.weight"), ("k", "attn.k.weight"),
                     ("v", "attn.v.weight")):
            text += matmul_lines(pre + q, pre + "h1", v(w), N, C, C)
            text += (f"  %{pre}{q}4 = tensor.expand_shape %{pre}{q} [[0, 1], "
                     f"[2, 3]] output_shape [{B}, {T}, {NH}, {HD}] : {X} into "
                     f"{Q4}\n")
        text += causal_softmax_lines(pre, pre + "q4", pre + "k4", Q4, SC, HD)
        text += f"""  %{pre}ce = tensor.empty() : {Q4}
  %{pre}cz = linalg.fill ins(%zero : f32) outs(%{pre}ce : {Q4}) -> {Q4}
  %{pre}ctx4 = linalg.generic {{indexing_maps = [affine_map<(b, n, i, d, j) -> (b, n, i, j)>, affine_map<(b, n, i, d, j) -> (b, j, n, d)>, affine_map<(b, n, i, d, j) -> (b, i, n, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}} ins(%{pre}pr, %{pre}v4 : {SC}, {Q4}) outs(%{pre}cz : {Q4}) {{
{_product_body("f32", "f32")}
  }} -> {Q4}
  %{pre}ctx = tensor.collapse_shape %{pre}ctx4 [[0, 1], [2, 3]] : {Q4} into {X}
"""
        text += matmul_lines(pre + "att", pre + "ctx", v("attn.c_proj.weight"),
                             N, C, C)
        text += f"  %{pre}x1 = arith.addf %{x}, %{pre}att : {X}\n"
        text += layernorm_lines(pre + "x1", pre + "h2", N, C, pre + "ln2",
                                affine=(v("ln_2.weight"), v("ln_2.bias")))
        text += matmul_lines(pre + "u", pre + "h2", v("mlp.c_fc.weight"), N, C,
                             F)
        text += f"  %{pre}ge = tensor.empty() : {ty((N, F))}\n"
        text += gelu_lines(pre + "g", pre + "u", pre + "ge", ty((N, F)))
        text += matmul_lines(pre + "dn", pre + "g", v("mlp.c_proj.weight"), N,
                             F, C)
        text += f"  %{pre}y = arith.addf %{pre}x1, %{pre}dn : {X}\n"
        x = pre + "y"
    text += layernorm_lines(x, "hf", N, C, "lnf",
                            affine=(var("transformer.ln_f.weight"),
                                    var("transformer.ln_f.bias")))
    LG = ty((N, V))
    text += f"""  %lg_e = tensor.empty() : {LG}
  %lg_z = linalg.fill ins(%zero : f32) outs(%lg_e : {LG}) -> {LG}
  %logits = linalg.generic {{indexing_maps = [affine_map<(n, v, c) -> (n, c)>, affine_map<(n, v, c) -> (v, c)>, affine_map<(n, v, c) -> (n, v)>], iterator_types = ["parallel", "parallel", "reduction"]}} ins(%hf, %{wte} : {X}, {ty((V, C))}) outs(%lg_z : {LG}) {{
{_product_body("f32", "f32")}
  }} -> {LG}
  %tg = tensor.collapse_shape %targets [[0, 1]] : {ty((B, T), "i64")} into {ty((N,), "i64")}
  %ninf = arith.constant 0xFF800000 : f32
  %ce_e = tensor.empty() : {R}
  %mi = linalg.fill ins(%ninf : f32) outs(%ce_e : {R}) -> {R}
  %mx = linalg.generic {{indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n)>], iterator_types = ["parallel", "reduction"]}} ins(%logits : {LG}) outs(%mi : {R}) {{
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    linalg.yield %r : f32
  }} -> {R}
  %si = linalg.fill ins(%zero : f32) outs(%ce_e : {R}) -> {R}
  %se = linalg.generic {{indexing_maps = [affine_map<(n, v) -> (n, v)>, affine_map<(n, v) -> (n)>, affine_map<(n, v) -> (n)>], iterator_types = ["parallel", "reduction"]}} ins(%logits, %mx : {LG}, {R}) outs(%si : {R}) {{
  ^bb0(%a: f32, %m: f32, %acc: f32):
    %d = arith.subf %a, %m : f32
    %e = math.exp %d : f32
    %r = arith.addf %acc, %e : f32
    linalg.yield %r : f32
  }} -> {R}
  %nll = linalg.generic {{indexing_maps = [affine_map<(n) -> (n)>, affine_map<(n) -> (n)>, affine_map<(n) -> (n)>, affine_map<(n) -> (n)>], iterator_types = ["parallel"]}} ins(%se, %mx, %tg : {R}, {R}, {ty((N,), "i64")}) outs(%ce_e : {R}) {{
  ^bb0(%s: f32, %m: f32, %t: i64, %o: f32):
    %lg = math.log %s : f32
    %lse = arith.addf %lg, %m : f32
    %n = linalg.index 0 : index
    %k = arith.index_cast %t : i64 to index
    %pick = tensor.extract %logits[%n, %k] : {LG}
    %r = arith.subf %lse, %pick : f32
    linalg.yield %r : f32
  }} -> {R}
  %l_e = tensor.empty() : tensor<f32>
  %l_z = linalg.fill ins(%zero : f32) outs(%l_e : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {{indexing_maps = [affine_map<(n) -> (n)>, affine_map<(n) -> ()>], iterator_types = ["reduction"]}} ins(%nll : {R}) outs(%l_z : tensor<f32>) {{
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  }} -> tensor<f32>
  %mean_e = tensor.empty() : tensor<f32>
  %mean = linalg.generic {{indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}} ins(%loss : tensor<f32>) outs(%mean_e : tensor<f32>) {{
  ^bb0(%a: f32, %o: f32):
    %n = arith.constant {float(N)!r} : f32
    %r = arith.divf %a, %n : f32
    linalg.yield %r : f32
  }} -> tensor<f32>
  return %mean : tensor<f32>
}}
"""
    return text


def gpt_parameters(cfg):
    """(name, shape) of gpt_train_program's parameters, in argument order:
    PyTorch nanoGPT's names, weights [in, out]."""
    T, C, V, F = cfg["block"], cfg["width"], cfg["vocab"], 4 * cfg["width"]
    out = [("transformer.wte.weight", (V, C)),
           ("transformer.wpe.weight", (T, C))]
    for i in range(cfg["layers"]):
        p = f"transformer.h.{i}."
        out += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
                (p + "attn.q.weight", (C, C)), (p + "attn.k.weight", (C, C)),
                (p + "attn.v.weight", (C, C)),
                (p + "attn.c_proj.weight", (C, C)),
                (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
                (p + "mlp.c_fc.weight", (C, F)),
                (p + "mlp.c_proj.weight", (F, C))]
    out += [("transformer.ln_f.weight", (C,)), ("transformer.ln_f.bias", (C,))]
    return out
