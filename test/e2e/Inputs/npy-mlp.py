"""Inputs and a check for checkpoint-run.mlir (Debian's numpy).

    npy-mlp.py make DIR    x.npy, w1.npy, w2.npy of random normals
    npy-mlp.py check DIR   y.npy equals x @ w1 @ w2 within 1e-5 of its scale
"""
import sys

import numpy as np

mode, d = sys.argv[1], sys.argv[2]
if mode == "make":
    rng = np.random.default_rng(0)
    for name, shape in (("x", (16, 64)), ("w1", (64, 256)), ("w2", (256, 64))):
        np.save(f"{d}/{name}.npy", rng.standard_normal(shape).astype(np.float32))
else:
    x, w1, w2, y = (np.load(f"{d}/{n}.npy") for n in ("x", "w1", "w2", "y"))
    ref = x.astype(np.float64) @ w1 @ w2
    err = np.abs(y - ref).max() / np.abs(ref).max()
    print(f"y = x @ w1 @ w2: relative error {err:.2e}")
    sys.exit(0 if err < 1e-5 else 1)
