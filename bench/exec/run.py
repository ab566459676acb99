#!/usr/bin/env python3
"""Speed of compiled programs (issue 17), not a test: the per-device code
dtensor-compile/dtensor-run produce against the library a user would call
instead, measured in the same run.

GEMM (f32): the compiled program (`dtensor-run -n 1 --threads 1 --repeat R`,
its fastest step) against a direct cblas_sgemm call (bench/exec/sgemm-bench.c,
fastest of R) and numpy's matmul, both on one OpenBLAS thread.

Megatron MLP (x 512x1024, W1 1024x4096, gelu, W2 4096x1024; W1 split by
columns, W2 by rows, one all_reduce): step time of the compiled program on
1 rank and on 2 ranks (shm, one thread each) against numpy on one thread
running the same model (two sgemm calls and the gelu), and the strong
scaling 1 -> 2 ranks.

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
  %g = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%h : tensor<{t}x{f}xf32>) outs(%e2 : tensor<{t}x{f}xf32>) {{
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
  }} -> tensor<{t}x{f}xf32>
  %e3 = tensor.empty() : tensor<{t}x{d}xf32>
  %i3 = linalg.fill ins(%z : f32) outs(%e3 : tensor<{t}x{d}xf32>) -> tensor<{t}x{d}xf32>
  %y = linalg.matmul ins(%g, %w2 : tensor<{t}x{f}xf32>, tensor<{f}x{d}xf32>) outs(%i3 : tensor<{t}x{d}xf32>) -> tensor<{t}x{d}xf32>
  return %y : tensor<{t}x{d}xf32>
}}
"""


def compiled_step(text, name, ranks, threads=1):
    """Fastest and median step over the ranks' --repeat runs (ms)."""
    path = os.path.join(TMP, name + ".mlir")
    with open(path, "w") as f:
        f.write(text)
    out = subprocess.run([os.path.join(BIN, "dtensor-run"), "-n", str(ranks),
                          "--threads", str(threads), "--repeat", str(REPS),
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
if kind == "gemm":
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
    print("\nMegatron MLP f32 (512x1024 @ 1024x4096, gelu, @ 4096x1024), one "
          "thread per rank")
    one, one_med = compiled_step(mlp_program(1), "mlp-1", 1)
    two, two_med = compiled_step(mlp_program(2), "mlp-2", 2)
    npy = numpy_ms("mlp", REPS)
    print(f"  compiled, 1 rank : {one:9.2f} ms (median {one_med:.2f})  "
          f"numpy/compiled = {npy / one:.2f}x")
    print(f"  compiled, 2 ranks: {two:9.2f} ms (median {two_med:.2f})  "
          f"numpy/compiled = {npy / two:.2f}x, strong scaling 1->2 = "
          f"{one / (2 * two):.2f}")
    print(f"  numpy, 1 thread  : {npy:9.2f} ms")


if __name__ == "__main__":
    main()
