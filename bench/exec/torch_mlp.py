"""The PyTorch peer of the compiled Megatron MLP (bench/exec/run.py): the
same model written by hand, tensor parallel as Megatron does it -- each of
R processes holds a column block of W1 and the matching row block of W2,
computes its partial output and all_reduces it with torch.distributed
(gloo) -- one thread per process. Prints the fastest step (ms) of rank 0,
each step starting after a barrier, as dtensor-run --repeat does.

usage: torch_mlp.py RANKS REPEATS   (starts the ranks itself)
"""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

T, D, F = 512, 1024, 4096


def gelu(h):
    return 0.5 * h * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))


def rank_main(rank, ranks, reps, port, out):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if ranks > 1:
        dist.init_process_group("gloo", rank=rank, world_size=ranks)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(T, D, generator=g)
    w1 = torch.randn(D, F, generator=g) * 0.03
    w2 = torch.randn(F, D, generator=g) * 0.03
    cols = F // ranks
    w1 = w1[:, rank * cols:(rank + 1) * cols].contiguous()
    w2 = w2[rank * cols:(rank + 1) * cols].contiguous()
    times = []
    with torch.no_grad():
        for step in range(reps + 1):
            if ranks > 1:
                dist.barrier()
            t = time.perf_counter()
            y = gelu(x @ w1) @ w2
            if ranks > 1:
                dist.all_reduce(y)
            times.append(time.perf_counter() - t)
    if rank == 0:
        out.put(1e3 * min(times[1:]))
    if ranks > 1:
        dist.destroy_process_group()


def main():
    ranks, reps = int(sys.argv[1]), int(sys.argv[2])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, ranks, reps, port, out))
             for r in range(ranks)]
    for p in procs:
        p.start()
    result = out.get()
    for p in procs:
        p.join()
    print(f"{result:.4f}")


if __name__ == "__main__":
    main()
