"""The PyTorch peers of the compiled models of bench/exec/run.py, written
by hand and tensor parallel as Megatron does it, on torch.distributed
(gloo), one thread per process:

- mlp: x 512x1024, gelu(x W1) W2 with W1 1024x4096; each of R processes
  holds a column block of W1 and the matching row block of W2 and
  all_reduces its partial output;
- gpt: one pre-norm GPT block (batch 4, sequence 512, hidden 1024, 16
  heads, causal attention, tanh-gelu MLP of 4096, no biases): q, k, v and
  W1 split by columns (heads), Wo and W2 by rows, two all_reduces;
- layernorm-gelu: layer norm (with weight and bias) and the tanh gelu over
  4096x1024, as PyTorch's own kernels do them (F.layer_norm,
  F.gelu(approximate="tanh")), one process.

Prints the fastest step (ms) of rank 0, each step starting after a
barrier, as dtensor-run --repeat does.

usage: torch_models.py mlp|gpt|layernorm-gelu RANKS REPEATS   (starts the ranks itself)
"""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def gelu(h):
    return 0.5 * h * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))


def layernorm(x):
    m = x.mean(-1, keepdim=True)
    c = x - m
    return c / torch.sqrt((c * c).mean(-1, keepdim=True) + 1e-5)


def columns(w, rank, ranks):
    n = w.shape[1] // ranks
    return w[:, rank * n:(rank + 1) * n].contiguous()


def rows(w, rank, ranks):
    n = w.shape[0] // ranks
    return w[rank * n:(rank + 1) * n].contiguous()


def all_reduce(y, ranks):
    if ranks > 1:
        dist.all_reduce(y)
    return y


def mlp_step(rank, ranks, g):
    x = torch.randn(512, 1024, generator=g)
    w1 = columns(torch.randn(1024, 4096, generator=g) * 0.03, rank, ranks)
    w2 = rows(torch.randn(4096, 1024, generator=g) * 0.03, rank, ranks)
    return lambda: all_reduce(gelu(x @ w1) @ w2, ranks)


def gpt_step(rank, ranks, g, b=4, s=512, h=1024, nh=16, f=4096):
    hd, nl = h // nh, nh // ranks
    x = torch.randn(b * s, h, generator=g)
    wq, wk, wv = (columns(torch.randn(h, h, generator=g) * 0.03, rank, ranks)
                  for _ in range(3))
    wo = rows(torch.randn(h, h, generator=g) * 0.03, rank, ranks)
    w1 = columns(torch.randn(h, f, generator=g) * 0.03, rank, ranks)
    w2 = rows(torch.randn(f, h, generator=g) * 0.03, rank, ranks)
    future = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)

    def step():
        a = layernorm(x)
        q, k, v = ((a @ w).view(b, s, nl, hd).transpose(1, 2)
                   for w in (wq, wk, wv))
        sc = (q @ k.transpose(-1, -2)) * (1.0 / hd ** 0.5)
        p = torch.softmax(sc.masked_fill(future, float("-inf")), -1)
        ctx = (p @ v).transpose(1, 2).reshape(b * s, nl * hd)
        x1 = x + all_reduce(ctx @ wo, ranks)
        return x1 + all_reduce(gelu(layernorm(x1) @ w1) @ w2, ranks)
    return step


def layernorm_gelu_step(rank, ranks, g, t=4096, d=1024):
    x = torch.randn(t, d, generator=g)
    w, b = torch.randn(d, generator=g), torch.randn(d, generator=g)
    F = torch.nn.functional
    return lambda: F.gelu(F.layer_norm(x, (d,), w, b, 1e-5),
                          approximate="tanh")


def fastest_step(step, ranks, reps):
    """The fastest of `reps` steps (ms, after one warm-up), each starting
    after a barrier, as dtensor-run --repeat times them."""
    times = []
    for _ in range(reps + 1):
        if ranks > 1:
            dist.barrier()
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return 1e3 * min(times[1:])


def spawn(rank_main, ranks, *args):
    """Runs rank_main(rank, ranks, port, out, *args) in `ranks` processes
    (gloo on a free loopback port) and returns what rank 0 put in `out`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, ranks, port, out) + args)
             for r in range(ranks)]
    for p in procs:
        p.start()
    result = out.get()
    for p in procs:
        p.join()
    return result


def init(rank, ranks, port):
    # one thread per process unless the caller asks for more
    torch.set_num_threads(int(os.environ.get("BENCH_TORCH_THREADS", "1")))
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if ranks > 1:
        dist.init_process_group("gloo", rank=rank, world_size=ranks)


def timed_rank(rank, ranks, port, out, make_step, reps, grad, args):
    """One process of time_step: its step from make_step(rank, ranks,
    generator, *args), timed; rank 0 puts the fastest step in `out`."""
    init(rank, ranks, port)
    g = torch.Generator().manual_seed(0)
    step = make_step(rank, ranks, g, *args)
    with torch.set_grad_enabled(grad):
        ms = fastest_step(step, ranks, reps)
    if rank == 0:
        out.put(ms)
    if ranks > 1:
        dist.destroy_process_group()


def time_step(make_step, ranks, reps, *args, grad=False):
    """The fastest of `reps` steps (ms) of make_step's step on `ranks`
    processes (autograd on when `grad`)."""
    return spawn(timed_rank, ranks, make_step, reps, grad, args)


def main():
    model, ranks, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    make_step = {"mlp": mlp_step, "layernorm-gelu": layernorm_gelu_step}.get(
        model, gpt_step)
    print(f"{time_step(make_step, ranks, reps):.4f}")


if __name__ == "__main__":
    main()
