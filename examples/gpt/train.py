#!/usr/bin/env python3
"""Trains a small GPT (bench/exec/programs.py's gpt_train_program: token and
position embeddings looked up by id, pre-norm blocks, the head tied to the
token embedding, cross-entropy) with Adam from Python, compiled once by
dtensor.compile and run on 1, 2 or 4 ranks; with --torch, the same model
in PyTorch from the same initial weights, and every step's loss compared.

    python3 examples/gpt/train.py --config tp2 --steps 10 --torch

Configs: single (1 rank), dp2 (data parallel), fsdp2 (parameters and Adam
state sharded over dp), tp2 and tp4 (Megatron tensor parallel with a
vocabulary-parallel embedding and loss), sp2 (tensor parallel with the
sequence split). docs/training.md walks through it."""

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "exec"))
from programs import gpt_parameters, gpt_train_program  # noqa: E402

CFG = dict(batch=4, block=16, width=32, vocab=64, layers=2, heads=4)
LR = 1e-3


def megatron(cfg, axis):
    """Megatron's layouts: q, k, v and the MLP's up projection split by
    columns (heads), the projections back by rows, the (tied) token
    embedding by vocabulary: the logits and the loss are vocab-parallel."""
    out = {"transformer.wte.weight": f"[S({axis}), R]"}
    for i in range(cfg["layers"]):
        p = f"transformer.h.{i}."
        for n in ("attn.q.weight", "attn.k.weight", "attn.v.weight",
                  "mlp.c_fc.weight"):
            out[p + n] = f"[R, S({axis})]"
        for n in ("attn.c_proj.weight", "mlp.c_proj.weight"):
            out[p + n] = f"[S({axis}), R]"
    return out


def config(name, cfg):
    """(mesh shape, axis names, layouts) of a named configuration."""
    if name == "single":
        return (1,), ("dp",), {}
    if name == "dp2":
        return (2,), ("dp",), {"tokens": "[S(dp), R]", "targets": "[S(dp), R]"}
    if name == "fsdp2":
        lay = {"tokens": "[S(dp), R]", "targets": "[S(dp), R]"}
        for n, s in gpt_parameters(cfg):
            lay[n] = "[S(dp)" + ", R" * (len(s) - 1) + "]"
        return (2,), ("dp",), lay
    if name in ("tp2", "tp4"):
        return (int(name[2]),), ("tp",), megatron(cfg, "tp")
    if name == "sp2":
        lay = megatron(cfg, "tp")
        lay.update({"tokens": "[R, S(tp)]", "targets": "[R, S(tp)]"})
        return (2,), ("tp",), lay
    raise SystemExit(f"unknown config {name!r} (single, dp2, fsdp2, tp2, "
                     "tp4, sp2)")


def initial(cfg, seed=0):
    """nanoGPT's initialization: normal(0, 0.02) weights, layer norms 1 and
    0; float32."""
    rng = np.random.default_rng(seed)
    out = {}
    for n, s in gpt_parameters(cfg):
        if ".ln_" in n:
            out[n] = (np.ones(s) if n.endswith("weight")
                      else np.zeros(s)).astype(np.float32)
        else:
            out[n] = (0.02 * rng.standard_normal(s)).astype(np.float32)
    return out


def batches(cfg, steps, seed=1):
    rng = np.random.default_rng(seed)
    shape = (cfg["batch"], cfg["block"])
    return [(rng.integers(0, cfg["vocab"], shape),
             rng.integers(0, cfg["vocab"], shape)) for _ in range(steps)]


def train(name, cfg, steps, check_first=True):
    """The losses of `steps` Adam steps, the seconds of each call, and the
    seconds of each step inside it (the slowest rank's time in the
    program)."""
    import dtensor  # here: the PyTorch half needs no dtensor
    mesh, axes, layouts = config(name, cfg)
    text = gpt_train_program(cfg, mesh, axes, layouts)
    params = gpt_parameters(cfg)
    wrt = ",".join(str(i) for i in range(len(params)))
    ir = dtensor.compile(text, f"dtensor-autodiff{{function=loss wrt={wrt} "
                               f"optimizer=adam lr={LR}}}")
    state = initial(cfg)
    for n, _ in params:
        state[n + ".exp_avg"] = np.zeros_like(state[n])
        state[n + ".exp_avg_sq"] = np.zeros_like(state[n])
    losses, seconds, inside = [], [], []
    with dtensor.compile(ir, entry="loss_step", check=check_first) as step:
        for t, (x, y) in enumerate(batches(cfg, steps), start=1):
            start = time.perf_counter()
            out = step({"tokens": x, "targets": y,
                        "adam.step": np.array(t, np.float32)},
                       state=state if t == 1 else None)
            seconds.append(time.perf_counter() - start)
            inside.append(step.seconds)
            losses.append(float(out["result0"]))
            step.check = False  # the first step is checked rank by rank
    return losses, seconds, inside


def torch_loss(p, x, y, cfg):
    """The model's mean cross-entropy in PyTorch: `p` maps the parameter
    names to tensors, `x` and `y` are [B, T] ids (any B)."""
    import torch
    import torch.nn.functional as F
    T, C, NH = cfg["block"], cfg["width"], cfg["heads"]
    B, HD = x.shape[0], C // NH
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    h = (p["transformer.wte.weight"][x] +
         p["transformer.wpe.weight"]).reshape(B * T, C)
    for i in range(cfg["layers"]):
        q = f"transformer.h.{i}."
        a = F.layer_norm(h, (C,), p[q + "ln_1.weight"], p[q + "ln_1.bias"])
        heads = [(a @ p[q + f"attn.{k}.weight"]).view(B, T, NH, HD)
                 .transpose(1, 2) for k in ("q", "k", "v")]
        s = (heads[0] @ heads[1].transpose(-2, -1)) / HD ** 0.5
        s = s.masked_fill(mask, float("-inf")).softmax(-1)
        ctx = (s @ heads[2]).transpose(1, 2).reshape(B * T, C)
        h = h + ctx @ p[q + "attn.c_proj.weight"]
        m = F.layer_norm(h, (C,), p[q + "ln_2.weight"], p[q + "ln_2.bias"])
        u = m @ p[q + "mlp.c_fc.weight"]
        g = 0.5 * u * (1 + torch.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))
        h = h + g @ p[q + "mlp.c_proj.weight"]
    hf = F.layer_norm(h, (C,), p["transformer.ln_f.weight"],
                      p["transformer.ln_f.bias"])
    return F.cross_entropy(hf @ p["transformer.wte.weight"].T, y.reshape(-1))


def torch_losses(cfg, steps):
    """The same model, weights, batches and Adam in PyTorch (f32)."""
    import torch
    torch.set_num_threads(1)
    p = {n: torch.tensor(v, requires_grad=True)
         for n, v in initial(cfg).items()}
    opt = torch.optim.Adam(p.values(), lr=LR, betas=(0.9, 0.999), eps=1e-8)
    out = []
    for x, y in batches(cfg, steps):
        loss = torch_loss(p, torch.tensor(x), torch.tensor(y), cfg)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(float(loss))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="single")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--torch", action="store_true",
                    help="compare every step's loss with PyTorch's")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--check", action="store_true",
                    help="compare the first step rank by rank with the "
                    "single-device run")
    a = ap.parse_args()
    losses, seconds, inside = train(a.config, CFG, a.steps,
                                    check_first=a.check)
    ref = torch_losses(CFG, a.steps) if a.torch else None
    worst = 0.0
    for t, loss in enumerate(losses):
        line = f"step {t + 1}: loss {loss:.6f}"
        if ref:
            rel = abs(loss - ref[t]) / abs(ref[t])
            worst = max(worst, rel)
            line += f"  pytorch {ref[t]:.6f}  rel {rel:.1e}"
        print(line)
    # The first call starts the ranks (and, with --check, runs the
    # single-device program): the loop's cost is that of the calls after.
    loop, steps_only = sum(seconds[1:]), sum(inside[1:])
    print(f"{a.config}: {a.steps} steps, median {1e3 * np.median(seconds):.2f}"
          f" ms per call, {1e3 * np.median(inside):.2f} ms of it the step; "
          f"calls 2-{a.steps}: {100 * (loop - steps_only) / max(loop, 1e-12):.1f}"
          f" % of the time outside the steps (first call {seconds[0]:.2f} s)")
    if ref:
        print(f"largest relative difference from PyTorch: {worst:.1e} "
              f"(rtol {a.rtol:g})")
        if worst > a.rtol:
            sys.exit(1)


if __name__ == "__main__":
    main()
