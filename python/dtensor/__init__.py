"""dtensor: the dtensor-mlir compiler and runtime from Python.

    import dtensor
    mesh = dtensor.Mesh("dp=2,tp=2")
    layout = dtensor.Layout(mesh, "[S(dp), S(tp)]", (10, 8))
    layout.local_shape(3)            # (5, 4)
    print(layout.picture())          # the device grid
    dtensor.plan(layout, "[S(tp), R]")
    ir = dtensor.compile(text)       # dtensor-spmd by default
    y, = dtensor.run("prog.mlir", 4, [x, w1, w2])
    dtensor.save_checkpoint("ck", {"w": (w, "4", "[S0, R]")})

ctypes over libdtensor.so and libdtensor_rt.so (DTENSOR_LIB_DIR, else the
build tree beside this package); docs/python.md.
"""

from ._core import (CompileError, DtensorError, Layout, Mesh, Plan,
                    checkpoint_info, compile, convert_checkpoint,
                    load_checkpoint, plan, run, save_checkpoint,
                    verify_checkpoint)

__all__ = ["CompileError", "DtensorError", "Layout", "Mesh", "Plan",
           "checkpoint_info", "compile", "convert_checkpoint",
           "load_checkpoint", "plan", "run", "save_checkpoint",
           "verify_checkpoint"]
