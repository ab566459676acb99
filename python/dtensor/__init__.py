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

Shaped like PyTorch's DTensor (docs/python.md):

    mesh = dtensor.DeviceMesh((2, 2), ("dp", "tp"))
    d = dtensor.distribute_tensor(x, mesh, [dtensor.Shard(0), dtensor.Replicate()])
    d.redistribute(placements=[dtensor.Replicate(), dtensor.Shard(1)]).to_local(rank=3)
    dtensor.parallelize_module(text, mesh["tp"], {"w1": dtensor.ColwiseParallel()})

ctypes over libdtensor.so and libdtensor_rt.so (DTENSOR_LIB_DIR, else the
build tree beside this package); docs/python.md.
"""

from ._core import (CompileError, DtensorError, Layout, Mesh, Plan,
                    checkpoint_info, compile, convert_checkpoint,
                    load_checkpoint, plan, run, save_checkpoint,
                    verify_checkpoint)
from ._step import Step
from ._distributed import (DeviceMesh, DTensor, Partial, Placement, Replicate,
                           Shard, distribute_tensor, init_device_mesh,
                           is_distributed, visualize_sharding)
from ._styles import (FSDP, ColwiseParallel, ParallelStyle, RowwiseParallel,
                      SequenceParallel, VocabParallel, make_plan,
                      parallelize_module, save_plan)

__all__ = ["CompileError", "DtensorError", "Layout", "Mesh", "Plan", "Step",
           "checkpoint_info", "compile", "convert_checkpoint",
           "load_checkpoint", "plan", "run", "save_checkpoint",
           "verify_checkpoint", "DeviceMesh", "DTensor", "Partial",
           "Placement", "Replicate", "Shard", "distribute_tensor",
           "init_device_mesh", "is_distributed", "visualize_sharding",
           "ColwiseParallel", "FSDP", "ParallelStyle", "RowwiseParallel",
           "SequenceParallel", "VocabParallel", "make_plan",
           "parallelize_module", "save_plan"]
