"""The PyTorch peers of bench/train/run.py's training steps, on Debian's
python3-torch (CPU, gloo), one thread per process: the MLP
loss = sum((gelu(x W1) W2)^2) / 2 with x 512x1024, W1 1024x4096,
W2 4096x1024, and an SGD step (lr 1e-4), the batch split over the ranks.

- ddp: torch.nn.parallel.DistributedDataParallel (its gradient all_reduce
  bucketed and overlapped with the backward pass);
- fsdp: FSDP written by hand, as ZeRO-3 does it: each rank keeps a row
  block of each weight, all_gathers it before the forward, and after the
  backward keeps its block of the summed gradient (gloo has no
  reduce_scatter: an all_reduce, then the block);
- local: one process, the whole batch (the single-device step);
- gpt: the small GPT of examples/gpt/train.py (bench/train/run.py's size)
  and its Adam step, data parallel with DistributedDataParallel on RANKS
  > 1 (BATCH is its batch of sequences);
- gpt-fsdp: that step with the model in PyTorch's FullyShardedDataParallel
  (gloo, CPU) where it runs: Debian's python3-torch 1.13 on Python 3.11
  fails to import torch.distributed.fsdp (a dataclass with a mutable
  default), and then this kind exits with status 3 and the reason;
- gpt-profile: that step on one process under torch.profiler: prints one
  JSON object, the fastest step (ms) and each op's self time per step
  (what bench/train/run.py --profile sets beside our profile).

Prints the fastest step of rank 0 (ms); each step starts after a barrier,
as dtensor-run --repeat does.

usage: torch_train.py ddp|fsdp|local|gpt|gpt-fsdp|gpt-profile RANKS REPEATS
                      [BATCH]
"""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "exec"))
from torch_models import init, time_step  # noqa: E402

D, F, LR = 1024, 4096, 1e-4


def gelu(h):
    return 0.5 * h * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))


def data(g, batch, rank, ranks):
    x = torch.randn(batch, D, generator=g)
    w1 = torch.randn(D, F, generator=g) * 0.03
    w2 = torch.randn(F, D, generator=g) * 0.03
    n = batch // ranks
    return x[rank * n:(rank + 1) * n].contiguous(), w1, w2


def loss_of(x, w1, w2):
    y = gelu(x @ w1) @ w2
    return 0.5 * (y * y).sum()


def ddp_step(rank, ranks, g, batch):
    x, w1, w2 = data(g, batch, rank, ranks)

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = torch.nn.Parameter(w1)
            self.w2 = torch.nn.Parameter(w2)

        def forward(self, x):
            return loss_of(x, self.w1, self.w2)

    model = Mlp()
    if ranks > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    def step():
        opt.zero_grad()
        model(x).backward()
        opt.step()
    return step


def fsdp_step(rank, ranks, g, batch):
    x, w1, w2 = data(g, batch, rank, ranks)
    shards = [w.chunk(ranks)[rank].clone() for w in (w1, w2)]

    def step():
        full = []
        for s in shards:
            parts = [torch.empty_like(s) for _ in range(ranks)]
            dist.all_gather(parts, s)
            full.append(torch.cat(parts).requires_grad_())
        loss_of(x, *full).backward()
        for s, w in zip(shards, full):
            dist.all_reduce(w.grad)
            s -= LR * w.grad.chunk(ranks)[rank]
    return step


# The GPT's size (issue 36's small GPT): bench/train/run.py passes it too.
GPT = dict(layers=2, heads=4, width=128, vocab=512, block=64)


def gpt_step(rank, ranks, g, batch, wrap=None):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "examples", "gpt"))
    import train
    cfg = dict(GPT, batch=batch)
    init = train.initial(cfg)
    names = list(init)

    class Gpt(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.ParameterList(
                [torch.nn.Parameter(torch.tensor(init[n])) for n in names])

        def forward(self, x, y):
            return train.torch_loss(dict(zip(names, self.p)), x, y, cfg)

    model = Gpt()
    if wrap:
        model = wrap(model)
    elif ranks > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=train.LR)
    x, y = train.batches(cfg, 1)[0]
    n = batch // ranks
    x = torch.tensor(x[rank * n:(rank + 1) * n])
    y = torch.tensor(y[rank * n:(rank + 1) * n])

    def step():
        opt.zero_grad()
        model(x, y).backward()
        opt.step()
    return step


def gpt_profile(reps, batch):
    """The GPT step's ops under torch.profiler over `reps` steps (after 5
    unprofiled): {"step_ms": fastest unprofiled step, "ops": [[name, self
    ms per step, calls per step], ...]}, self times (an op's own time, not
    its children's), so that they add up to the step."""
    import json
    import time
    from torch.profiler import ProfilerActivity, profile
    init(0, 1, 0)
    step = gpt_step(0, 1, torch.Generator().manual_seed(0), batch)
    best = float("inf")
    for _ in range(5 + reps):
        t = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(reps):
            step()
    ops = [[e.key, e.self_cpu_time_total / 1e3 / reps, e.count // reps]
           for e in prof.key_averages() if e.self_cpu_time_total > 0]
    print(json.dumps({"step_ms": 1e3 * best, "ops": ops}))


def gpt_fsdp_step(rank, ranks, g, batch):
    from torch.distributed.fsdp import FullyShardedDataParallel
    return gpt_step(rank, ranks, g, batch, wrap=FullyShardedDataParallel)


def main():
    kind, ranks, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 512
    if kind == "gpt-profile":
        gpt_profile(reps, batch)
        return
    if kind == "gpt-fsdp":
        try:
            import torch.distributed.fsdp  # noqa: F401
        except Exception as e:  # what this PyTorch build says about itself
            print(f"torch.distributed.fsdp does not import here: "
                  f"{type(e).__name__}: {e}", file=sys.stderr)
            sys.exit(3)
        print(f"{time_step(gpt_fsdp_step, ranks, reps, batch, grad=True):.3f}")
        return
    make_step = {"fsdp": fsdp_step, "gpt": gpt_step}.get(kind, ddp_step)
    print(f"{time_step(make_step, ranks, reps, batch, grad=True):.3f}")


if __name__ == "__main__":
    main()
