#!/usr/bin/env python3
"""Speed of compiled programs (issue 17), not a test: the per-device code
dtensor-compile/dtensor-run produce against the library a user would call
instead, measured in the same run.

GEMM (f32): the compiled program (`dtensor-run -n 1 --threads 1 --repeat R`,
its fastest step) against a direct cblas_sgemm call (bench/exec/sgemm-bench.c,
fastest of R) and numpy's matmul, both on one OpenBLAS thread.

Layer norm + gelu over 4096x1024 f32 (row sums, centered square sums, the
normalization and the tanh gelu, as a transformer block writes them): the
compiled program against numpy on one thread, PyTorch's own kernels
(F.layer_norm, F.gelu(approximate="tanh")) and the memory bound -- the
bytes it must read and write (x once, the result once) at the copy
bandwidth numpy's copyto reaches in the same run; and its compute bound:
the same program on 128 rows (1 MiB, in cache) times 32, which says how
close to the memory bound its arithmetic lets it come.

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from programs import (gemm_program, gpt_program,  # noqa: E402
                      layernorm_gelu_program, mlp_program)


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
elif kind == "copy-threads":
    # the same copy by as many threads as cores, each its block of rows
    # (numpy lets go of the GIL while it copies)
    from concurrent.futures import ThreadPoolExecutor
    import os
    n = os.cpu_count()
    x = rng.standard_normal((4096, 1024), dtype=np.float32)
    y = np.empty_like(x)
    parts = [(y[r], x[r]) for r in np.array_split(np.arange(4096), n)]
    pool = ThreadPoolExecutor(n)
    print(best(lambda: list(pool.map(lambda p: np.copyto(*p), parts))))
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
    peer = torch_ms("layernorm-gelu", 1)
    if peer:
        print(f"  PyTorch's layer_norm + gelu kernels {peer:.3f} ms: "
              f"compiled/PyTorch = {ours / peer:.2f}x")
    # The arithmetic alone: 128 rows stay in cache, so their time is what
    # the loops cost without memory traffic.
    rows = 128
    small, _ = compiled_step(layernorm_gelu_program(t=rows),
                             f"layernorm-gelu-{rows}", 1, reps=20 * REPS)
    compute = small * 4096 / rows
    print(f"  compute bound {compute:.3f} ms (the same loops on {rows} rows, "
          f"in cache, x {4096 // rows}): the loops are compute bound; "
          f"bound/compiled can reach at most {bound / compute:.2f}x with "
          "this arithmetic")
    cores = os.cpu_count()
    if cores > 1:
        # One process on every core: generated loops in threads
        # (threads=true, OpenMP), against the copy by as many threads.
        many, _ = compiled_step(layernorm_gelu_program(), "layernorm-gelu",
                                1, threads=cores)
        bound_many = numpy_ms("copy-threads", 10 * REPS)
        print(f"  {cores} threads: compiled {many:.3f} ms ({ours / many:.2f}x "
              f"one thread's speed), memory bound {bound_many:.3f} ms "
              f"(copy by {cores} threads); bound/compiled = "
              f"{bound_many / many:.2f}x (issue 36 target 0.5)")
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
