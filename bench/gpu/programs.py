#!/usr/bin/env python3
"""The GPU benchmark's programs (issue 21), written as annotated MLIR for
one device (bench/exec/programs.py makes the text):

- gemm-bf16: C = A B, 4096 x 4096 x 4096, bf16 in and out (f32
  accumulation), against torch.matmul;
- mlp-{bf16,f32}: the Megatron MLP, gelu(x W1) W2, x 8192 x 2048 (batch 8,
  sequence 1024, hidden 2048), W1 2048 x 8192;
- gpt-{bf16,f32}: a pre-norm GPT block, batch 8, sequence 1024, hidden
  2048, 16 heads, causal attention, gelu MLP of 8192, no biases.

scripts/gpu-pack.sh compiles each into a GPU bundle (dtensor-compile
--bundle --target cuda) that scripts/gpu-check.sh times with dtensor-check
against bench/gpu/torch_gpu.py on the same GPU.

usage: bench/gpu/programs.py OUT_DIR [--small]   (--small: shapes for a
quick check of the programs on the CPU)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "exec"))
from programs import gemm_program, gpt_program, mlp_program  # noqa: E402

# name -> (batch, sequence, hidden, heads, ffn) or GEMM size
FULL = dict(gemm=4096, b=8, s=1024, h=2048, nh=16, f=8192)
SMALL = dict(gemm=128, b=2, s=32, h=128, nh=4, f=256)


def programs(shape):
    b, s, h, nh, f = (shape[k] for k in ("b", "s", "h", "nh", "f"))
    n = shape["gemm"]
    yield "gemm-bf16", gemm_program(n, n, n, et="bf16")
    for et in ("bf16", "f32"):
        yield f"mlp-{et}", mlp_program(1, t=b * s, d=h, f=f, et=et)
        yield f"gpt-{et}", gpt_program(1, b=b, s=s, h=h, nh=nh, f=f, et=et)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    shape = SMALL if "--small" in sys.argv else FULL
    for name, text in programs(shape):
        with open(os.path.join(out, name + ".mlir"), "w") as f:
            f.write(text)
        print(name)


if __name__ == "__main__":
    main()
