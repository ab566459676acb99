#!/usr/bin/env python3
"""The PyTorch peers of bench/gpu/programs.py, eager, on one GPU: the same
computations by hand (torch.matmul, the tanh gelu, layer norm without
affine, causal softmax attention), inputs already on the device, each step
timed between torch.cuda.synchronize() calls as dtensor-check times its
steps. Prints "NAME MEDIAN_MS MIN_MS" per model.

usage: bench/gpu/torch_gpu.py [REPEATS] [NAME ...]
"""
import sys
import time

import torch

SHAPE = dict(gemm=4096, b=8, s=1024, h=2048, nh=16, f=8192)


def gelu(h):
    return 0.5 * h * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))


def layernorm(x):
    xf = x.float()
    m = xf.mean(-1, keepdim=True)
    c = xf - m
    return (c / torch.sqrt((c * c).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)


def rand(*shape, dtype, scale=1.0):
    return (torch.rand(*shape, device="cuda", dtype=torch.float32) - 0.5) \
        .mul_(scale).to(dtype)


def gemm(dtype):
    n = SHAPE["gemm"]
    a, b = rand(n, n, dtype=dtype), rand(n, n, dtype=dtype)
    return lambda: a @ b


def mlp(dtype):
    t, d, f = SHAPE["b"] * SHAPE["s"], SHAPE["h"], SHAPE["f"]
    x, w1, w2 = rand(t, d, dtype=dtype), rand(d, f, dtype=dtype), \
        rand(f, d, dtype=dtype)
    return lambda: gelu(x @ w1) @ w2


def gpt(dtype):
    b, s, h, nh, f = (SHAPE[k] for k in ("b", "s", "h", "nh", "f"))
    hd = h // nh
    x = rand(b * s, h, dtype=dtype)
    wq, wk, wv, wo = (rand(h, h, dtype=dtype) for _ in range(4))
    w1, w2 = rand(h, f, dtype=dtype), rand(f, h, dtype=dtype)
    future = torch.triu(torch.ones(s, s, dtype=torch.bool, device="cuda"), 1)

    def step():
        a = layernorm(x)
        q, k, v = ((a @ w).view(b, s, nh, hd).transpose(1, 2)
                   for w in (wq, wk, wv))
        sc = (q @ k.transpose(-1, -2)).float() * (1.0 / hd ** 0.5)
        p = torch.softmax(sc.masked_fill(future, float("-inf")), -1)
        ctx = (p.to(dtype) @ v).transpose(1, 2).reshape(b * s, h)
        x1 = x + ctx @ wo
        return x1 + gelu(layernorm(x1) @ w1) @ w2
    return step


MODELS = {
    "gemm-bf16": (gemm, torch.bfloat16),
    "mlp-bf16": (mlp, torch.bfloat16), "mlp-f32": (mlp, torch.float32),
    "gpt-bf16": (gpt, torch.bfloat16), "gpt-f32": (gpt, torch.float32),
}


def main():
    args = sys.argv[1:]
    reps = int(args.pop(0)) if args and args[0].isdigit() else 20
    names = args or list(MODELS)
    # fp32 matmuls in full precision, as the compiled program's cuBLAS
    # calls (TF32 only with DTENSOR_TF32=1 there).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name in names:
        make, dtype = MODELS[name]
        step = make(dtype)
        with torch.no_grad():
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                step()
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
        times.sort()
        print(f"{name} {1e3 * times[len(times) // 2]:.3f} {1e3 * times[0]:.3f}",
              flush=True)
        del step
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
