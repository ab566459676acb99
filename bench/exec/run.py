#!/usr/bin/env python3
"""Speed of compiled programs (issue 17), not a test: the per-device code
dtensor-compile/dtensor-run produce against the library a user would call
instead, measured in the same run.

GEMM (f32): the compiled program (`dtensor-run -n 1 --threads 1 --repeat R`,
its fastest step) against a direct cblas_sgemm call (bench/exec/sgemm-bench.c,
fastest of R) and numpy's matmul, both on one OpenBLAS thread.

Layer norm + gelu over 4096x1024 f32 (row sums, centered square sums, the
normalization and the tanh gelu, as a transformer block writes them): the
compiled program against numpy on one thread and against the memory
bound -- the bytes it must read and write (x once, the result once) at the
copy bandwidth numpy's copyto reaches in the same run.

Megatron MLP (x 512x1024, W1 1024x4096, gelu, W2 4096x1024; W1 split by
columns, W2 by rows, one all_reduce) and a GPT block (batch 4, sequence
512, hidden 1024, 16 heads, causal attention, gelu MLP 4096; heads and the
MLP split as Megatron does): step time of the compiled program on 1 rank
and on 2 ranks (shm, one thread each) against PyTorch (Debian's
python3-torch, bench/exec/torch_models.py: the same models by hand, gloo
all_reduce, one thread per process) on 1 and 2 processes (and numpy on one
thread for the MLP), and the strong scaling 1 -> 2 ranks.

usage: bench/exec/run.py [--reps R] [--quick]
"""
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")
REPS = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 10
QUICK = "--quick" in sys.argv
TMP = tempfile.mkdtemp(prefix="dtensor-exec-bench-")
ONE_THREAD = dict(os.environ, OPENBLAS_NUM_THREADS="1")
# Debian's numpy (python3-numpy) is under the system interpreter.
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

MESH = '"dtensor.mesh"() {{sym_name = "m", shape = array<i64: {n}>, axis_names = ["tp"]}} : () -> ()\n'


def gemm_program(m, n, k):
    return MESH.format(n=1) + f"""func.func @gemm(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%c : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}
"""


def gelu_lines(out, x, init, ty):
    """%out = the tanh gelu of %x, elementwise into %init, as a generic."""
    idm = "affine_map<(i, j) -> (i, j)>"
    return f"""  %{out} = linalg.generic {{indexing_maps = [{idm}, {idm}], iterator_types = ["parallel", "parallel"]}} ins(%{x} : {ty}) outs(%{init} : {ty}) {{
  ^bb0(%v: f32, %o: f32):
    %c0 = arith.constant 0.5 : f32
    %c1 = arith.constant 1.0 : f32
    %c2 = arith.constant 0.7978845608 : f32
    %c3 = arith.constant 0.044715 : f32
    %v3 = arith.mulf %v, %v : f32
    %v4 = arith.mulf %v3, %v : f32
    %v5 = arith.mulf %v4, %c3 : f32
    %v6 = arith.addf %v, %v5 : f32
    %v7 = arith.mulf %v6, %c2 : f32
    %v8 = math.tanh %v7 : f32
    %v9 = arith.addf %v8, %c1 : f32
    %va = arith.mulf %v, %c0 : f32
    %vb = arith.mulf %va, %v9 : f32
    linalg.yield %vb : f32
  }} -> {ty}
"""


def mlp_program(ranks, t=512, d=1024, f=4096):
    lay = lambda spec: f' {{dtensor.layout = #dtensor.layout<@m, "{spec}">}}'
    return MESH.format(n=ranks) + f"""func.func @mlp(%x: tensor<{t}x{d}xf32>{lay("[R, R]")},
                %w1: tensor<{d}x{f}xf32>{lay("[R, S0]")},
                %w2: tensor<{f}x{d}xf32>{lay("[S0, R]")}) -> (tensor<{t}x{d}xf32>{lay("[R, R]")}) {{
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<{t}x{f}xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<{t}x{f}xf32>) -> tensor<{t}x{f}xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<{t}x{d}xf32>, tensor<{d}x{f}xf32>) outs(%i1 : tensor<{t}x{f}xf32>) -> tensor<{t}x{f}xf32>
  %e2 = tensor.empty() : tensor<{t}x{f}xf32>
{gelu_lines("g", "h", "e2", f"tensor<{t}x{f}xf32>")}  %e3 = tensor.empty() : tensor<{t}x{d}xf32>
  %i3 = linalg.fill ins(%z : f32) outs(%e3 : tensor<{t}x{d}xf32>) -> tensor<{t}x{d}xf32>
  %y = linalg.matmul ins(%g, %w2 : tensor<{t}x{f}xf32>, tensor<{f}x{d}xf32>) outs(%i3 : tensor<{t}x{d}xf32>) -> tensor<{t}x{d}xf32>
  return %y : tensor<{t}x{d}xf32>
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


def layernorm_lines(x, out, t, d, tag, affine=None):
    """Layer norm of %x [t, d] into %out, as generics (row sums, centered
    square sums, the normalization), times gamma plus beta when `affine`
    names them; %zero must be defined."""
    ty, r = f"tensor<{t}x{d}xf32>", f"tensor<{t}xf32>"
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
    types = f", {v}, {v}" if affine else ""
    tail = "\n".join(tail)
    return f"""  %{tag}_e1 = tensor.empty() : {r}
  %{tag}_s0 = linalg.fill ins(%zero : f32) outs(%{tag}_e1 : {r}) -> {r}
  %{tag}_sum = linalg.generic {{indexing_maps = [{idm}, {row}], iterator_types = ["parallel", "reduction"]}} ins(%{x} : {ty}) outs(%{tag}_s0 : {r}) {{
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %a, %v : f32
    linalg.yield %s : f32
  }} -> {r}
  %{tag}_var = linalg.generic {{indexing_maps = [{idm}, {row}, {row}], iterator_types = ["parallel", "reduction"]}} ins(%{x}, %{tag}_sum : {ty}, {r}) outs(%{tag}_s0 : {r}) {{
  ^bb0(%v: f32, %s: f32, %a: f32):
    %n = arith.constant {float(d)} : f32
    %m = arith.divf %s, %n : f32
    %c = arith.subf %v, %m : f32
    %q = arith.mulf %c, %c : f32
    %o = arith.addf %a, %q : f32
    linalg.yield %o : f32
  }} -> {r}
  %{tag}_e2 = tensor.empty() : {ty}
  %{out} = linalg.generic {{indexing_maps = [{idm}, {row}, {row}{maps}, {idm}], iterator_types = ["parallel", "parallel"]}} ins(%{x}, %{tag}_sum, %{tag}_var{ins} : {ty}, {r}, {r}{types}) outs(%{tag}_e2 : {ty}) {{
  ^bb0(%v: f32, %s: f32, %q: f32{args}, %o: f32):
    %n = arith.constant {float(d)} : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %n : f32
    %w = arith.divf %q, %n : f32
    %we = arith.addf %w, %eps : f32
    %rs = math.rsqrt %we : f32
    %c = arith.subf %v, %m : f32
    %t1 = arith.mulf %c, %rs : f32
{tail}
  }} -> {ty}
"""


def matmul_lines(out, a, b, m, k, n):
    return f"""  %{out}_e = tensor.empty() : tensor<{m}x{n}xf32>
  %{out}_z = linalg.fill ins(%zero : f32) outs(%{out}_e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %{out} = linalg.matmul ins(%{a}, %{b} : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%{out}_z : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
"""


def gpt_program(ranks, b=4, s=512, h=1024, nh=16, f=4096):
    """One GPT block (pre-norm, causal attention, tanh-gelu MLP, no biases),
    tensor parallel on `ranks`: q, k, v and W1 split by columns (heads),
    Wo and W2 by rows, as Megatron does."""
    t, hd = b * s, h // nh
    lay = lambda spec: f' {{dtensor.layout = #dtensor.layout<@m, "{spec}">}}'
    X, W, Q4 = f"tensor<{t}x{h}xf32>", f"tensor<{h}x{h}xf32>", f"tensor<{b}x{s}x{nh}x{hd}xf32>"
    SC = f"tensor<{b}x{nh}x{s}x{s}xf32>"
    text = MESH.format(n=ranks) + f"""func.func @gpt(%x: {X}{lay("[R, R]")},
    %wq: {W}{lay("[R, S0]")}, %wk: {W}{lay("[R, S0]")}, %wv: {W}{lay("[R, S0]")},
    %wo: {W}{lay("[S0, R]")}, %w1: tensor<{h}x{f}xf32>{lay("[R, S0]")},
    %w2: tensor<{f}x{h}xf32>{lay("[S0, R]")}) -> ({X}{lay("[R, R]")}) {{
  %zero = arith.constant 0.0 : f32
"""
    text += layernorm_lines("x", "h1", t, h, "ln1")
    for name, w in (("qp", "wq"), ("kp", "wk"), ("vp", "wv")):
        text += matmul_lines(name, "h1", w, t, h, h)
        text += f"""  %{name}4 = tensor.expand_shape %{name} [[0, 1], [2, 3]] output_shape [{b}, {s}, {nh}, {hd}] : {X} into {Q4}
"""
    text += f"""  %se = tensor.empty() : {SC}
  %sz = linalg.fill ins(%zero : f32) outs(%se : {SC}) -> {SC}
  %sc = linalg.generic {{indexing_maps = [affine_map<(b, n, i, j, d) -> (b, i, n, d)>, affine_map<(b, n, i, j, d) -> (b, j, n, d)>, affine_map<(b, n, i, j, d) -> (b, n, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}} ins(%qp4, %kp4 : {Q4}, {Q4}) outs(%sz : {SC}) {{
  ^bb0(%x0: f32, %y0: f32, %o: f32):
    %p = arith.mulf %x0, %y0 : f32
    %a = arith.addf %o, %p : f32
    linalg.yield %a : f32
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
  %ce = tensor.empty() : {Q4}
  %cz = linalg.fill ins(%zero : f32) outs(%ce : {Q4}) -> {Q4}
  %ctx4 = linalg.generic {{indexing_maps = [affine_map<(b, n, i, d, j) -> (b, n, i, j)>, affine_map<(b, n, i, d, j) -> (b, j, n, d)>, affine_map<(b, n, i, d, j) -> (b, i, n, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}} ins(%pr, %vp4 : {SC}, {Q4}) outs(%cz : {Q4}) {{
  ^bb0(%x0: f32, %y0: f32, %o: f32):
    %p = arith.mulf %x0, %y0 : f32
    %a = arith.addf %o, %p : f32
    linalg.yield %a : f32
  }} -> {Q4}
  %ctx = tensor.collapse_shape %ctx4 [[0, 1], [2, 3]] : {Q4} into {X}
"""
    text += matmul_lines("att", "ctx", "wo", t, h, h)
    text += f"  %x1 = arith.addf %x, %att : {X}\n"
    text += layernorm_lines("x1", "h2", t, h, "ln2")
    text += matmul_lines("u", "h2", "w1", t, h, f)
    F = f"tensor<{t}x{f}xf32>"
    text += f"""  %ge = tensor.empty() : {F}
"""
    text += gelu_lines("g", "u", "ge", F)
    text += matmul_lines("dn", "g", "w2", t, f, h)
    text += f"  %y = arith.addf %x1, %dn : {X}\n  return %y : {X}\n}}\n"
    return text


def compiled_step(text, name, ranks, threads=1, reps=None):
    """Fastest and median step over the ranks' --repeat runs (ms)."""
    path = os.path.join(TMP, name + ".mlir")
    with open(path, "w") as f:
        f.write(text)
    out = subprocess.run([os.path.join(BIN, "dtensor-run"), "-n", str(ranks),
                          "--threads", str(threads), "--repeat",
                          str(reps or REPS),
                          path], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"dtensor-run failed on {name}:\n{out.stdout}{out.stderr}")
    steps = re.findall(r"step time min ([\d.]+) ms, median ([\d.]+) ms",
                       out.stdout)
    # A step ends when the slowest rank ends.
    return (max(float(a) for a, _ in steps), max(float(b) for _, b in steps))


def sgemm_ms(m, n, k):
    out = subprocess.run([os.path.join(BIN, "sgemm-bench"), str(m), str(n),
                          str(k), str(REPS)], capture_output=True, text=True,
                         env=ONE_THREAD, check=True)
    return float(out.stdout)


NUMPY = r"""
import sys, time, numpy as np
kind, reps = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
def best(fn):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return 1e3 * min(ts)
if kind == "copy":
    x = rng.standard_normal((4096, 1024), dtype=np.float32)
    y = np.empty_like(x)
    print(best(lambda: np.copyto(y, x)))
elif kind == "layernorm":
    x = rng.standard_normal((4096, 1024), dtype=np.float32)
    g = rng.standard_normal(1024, dtype=np.float32)
    b = rng.standard_normal(1024, dtype=np.float32)
    def ln():
        m = x.mean(-1, keepdims=True)
        c = x - m
        v = (c * c).mean(-1, keepdims=True)
        y = c / np.sqrt(v + np.float32(1e-5)) * g + b
        return np.float32(0.5) * y * (1 + np.tanh(np.float32(0.7978845608) * (y + np.float32(0.044715) * y ** 3)))
    print(best(ln))
elif kind == "gemm":
    m, n, k = map(int, sys.argv[3:6])
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    print(best(lambda: a @ b))
else:
    x = rng.standard_normal((512, 1024), dtype=np.float32)
    w1 = rng.standard_normal((1024, 4096), dtype=np.float32) * 0.03
    w2 = rng.standard_normal((4096, 1024), dtype=np.float32) * 0.03
    def mlp():
        h = x @ w1
        g = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
        return g @ w2
    print(best(mlp))
"""


def torch_ms(model, ranks, reps=None):
    out = subprocess.run([PYTHON, os.path.join(ROOT, "bench", "exec",
                                               "torch_models.py"),
                          model, str(ranks), str(reps or REPS)],
                         capture_output=True, text=True, env=ONE_THREAD)
    if out.returncode:
        return None  # python3-torch not installed
    return float(out.stdout)


def numpy_ms(*args):
    out = subprocess.run([PYTHON, "-c", NUMPY] + [str(a) for a in args],
                         capture_output=True, text=True, env=ONE_THREAD,
                         check=True)
    return float(out.stdout)


def main():
    print(f"bench/exec: {os.cpu_count()} cores, OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, {REPS} repeats; "
          "times are the fastest step (ms)\n")
    print("GEMM f32, one thread: compiled program vs cblas_sgemm vs numpy")
    print(f"{'M x N x K':>18} {'compiled':>10} {'cblas':>10} {'numpy':>10} "
          f"{'GFLOP/s':>8} {'vs cblas':>9} {'vs numpy':>9}")
    shapes = [(512, 512, 512)] if QUICK else [
        (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 512)]
    for m, n, k in shapes:
        ours, _ = compiled_step(gemm_program(m, n, k), f"gemm-{m}-{n}-{k}", 1)
        blas = sgemm_ms(m, n, k)
        npy = numpy_ms("gemm", REPS, m, n, k)
        print(f"{f'{m} x {n} x {k}':>18} {ours:10.3f} {blas:10.3f} {npy:10.3f} "
              f"{2e-6 * m * n * k / ours:8.1f} {blas / ours:8.2f}x "
              f"{npy / ours:8.2f}x")
    print("\nLayer norm + gelu f32 over 4096x1024, one thread")
    ours, _ = compiled_step(layernorm_gelu_program(), "layernorm-gelu", 1)
    npy = numpy_ms("layernorm", REPS)
    # reads 16 MiB and writes 16 MiB; the fastest of many (it varies most)
    copy = numpy_ms("copy", 10 * REPS)
    bound = copy  # the same traffic: x read once, the result written once
    print(f"  compiled {ours:.3f} ms, numpy {npy:.3f} ms, memory bound "
          f"{bound:.3f} ms (copy bandwidth {2 * 16 * 1.048576 / copy:.1f} GB/s)")
    print(f"  bound/compiled = {bound / ours:.2f}x (target 0.5), "
          f"numpy/compiled = {npy / ours:.2f}x (target 2)")
    print("\nMegatron MLP f32 (512x1024 @ 1024x4096, gelu, @ 4096x1024), one "
          "thread per rank")
    one, one_med = compiled_step(mlp_program(1), "mlp-1", 1)
    two, two_med = compiled_step(mlp_program(2), "mlp-2", 2)
    npy = numpy_ms("mlp", REPS)
    t1, t2 = torch_ms("mlp", 1), torch_ms("mlp", 2)
    print(f"  compiled, 1 rank : {one:9.2f} ms (median {one_med:.2f})")
    print(f"  compiled, 2 ranks: {two:9.2f} ms (median {two_med:.2f}), strong "
          f"scaling 1->2 = {one / (2 * two):.2f} (target 0.8)")
    print(f"  numpy, 1 thread  : {npy:9.2f} ms = {npy / one:.2f}x compiled 1 rank")
    if t1 is None:
        print("  PyTorch: not installed (apt-get install python3-torch)")
    else:
        print(f"  PyTorch, 1 proc  : {t1:9.2f} ms: compiled/PyTorch = "
              f"{one / t1:.2f}x")
        print(f"  PyTorch, 2 procs : {t2:9.2f} ms: compiled/PyTorch = "
              f"{two / t2:.2f}x (target <= 1.0)")
    if QUICK:
        return
    reps = min(REPS, 5)
    print(f"\nGPT block f32 (batch 4, seq 512, hidden 1024, 16 heads, causal, "
          f"gelu MLP 4096), one thread per rank, {reps} repeats")
    one, one_med = compiled_step(gpt_program(1), "gpt-1", 1, reps=reps)
    two, two_med = compiled_step(gpt_program(2), "gpt-2", 2, reps=reps)
    t1, t2 = torch_ms("gpt", 1, reps), torch_ms("gpt", 2, reps)
    print(f"  compiled, 1 rank : {one:9.2f} ms (median {one_med:.2f})")
    print(f"  compiled, 2 ranks: {two:9.2f} ms (median {two_med:.2f}), strong "
          f"scaling 1->2 = {one / (2 * two):.2f} (target 0.8)")
    if t1 is not None:
        print(f"  PyTorch, 1 proc  : {t1:9.2f} ms: compiled/PyTorch = "
              f"{one / t1:.2f}x")
        print(f"  PyTorch, 2 procs : {t2:9.2f} ms: compiled/PyTorch = "
              f"{two / t2:.2f}x (target <= 1.0)")


if __name__ == "__main__":
    main()
