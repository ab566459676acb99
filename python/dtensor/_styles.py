"""PyTorch's parallel styles as plan files: ColwiseParallel,
RowwiseParallel, VocabParallel, SequenceParallel and FSDP map argument-name
globs to the styles
of dtensor-apply-plan (docs/plans.md); parallelize_module annotates a
program with them."""

import json
import os
import tempfile

from ._core import CompileError
from ._core import compile as _compile
from ._distributed import DeviceMesh


class ParallelStyle:
    """How a matched argument is laid out on a 1-D (sub-)mesh."""

    style = None

    def _rule(self):
        return {"style": self.style}

    def __eq__(self, other):
        return type(other) is type(self) and other._rule() == self._rule()

    def __repr__(self):
        return f"{type(self).__name__}()"


_STORAGES = ("out_in", "in_out")


def _check_storage(storage):
    if storage not in _STORAGES:
        raise ValueError(f"storage must be 'out_in' (nn.Linear's [out, in], "
                         f"the default) or 'in_out' ([in, out], x @ W), not "
                         f"{storage!r}")
    return storage


class ColwiseParallel(ParallelStyle):
    """A linear layer's weight split by output features, as PyTorch's
    ColwiseParallel: dim 0 of a weight stored as nn.Linear stores it
    ([out, in], the default), the last dim of one stored [in, out]
    (`storage="in_out"`, x @ W); a bias split likewise. `interleave=3`
    splits a fused q, k, v weight as 3 interleaved groups (veScale's
    InterleavedShard), so each device keeps whole heads of q, k and v."""

    style = "colwise"

    def __init__(self, *, storage="out_in", interleave=None):
        self.storage = _check_storage(storage)
        if interleave is not None and (isinstance(interleave, bool) or
                                       not isinstance(interleave, int) or
                                       not 2 <= interleave <= 64):
            raise ValueError(f"interleave must be an int from 2 to 64 (fused "
                             f"q, k, v: 3), not {interleave!r}")
        self.interleave = interleave

    def _rule(self):
        rule = {"style": self.style, "storage": self.storage}
        if self.interleave:
            rule["interleave"] = self.interleave
        return rule

    def __repr__(self):
        args = []
        if self.storage != "out_in":
            args.append(f"storage={self.storage!r}")
        if self.interleave:
            args.append(f"interleave={self.interleave}")
        return f"ColwiseParallel({', '.join(args)})"


class RowwiseParallel(ParallelStyle):
    """A linear layer's weight split by input features, as PyTorch's
    RowwiseParallel: dim 1 of an nn.Linear weight ([out, in], the default),
    the dim before the last of one stored [in, out] (`storage="in_out"`);
    a bias stays whole. After a ColwiseParallel layer, one all_reduce."""

    style = "rowwise"

    def __init__(self, *, storage="out_in"):
        self.storage = _check_storage(storage)

    def _rule(self):
        return {"style": self.style, "storage": self.storage}

    def __repr__(self):
        return ("RowwiseParallel()" if self.storage == "out_in" else
                f"RowwiseParallel(storage={self.storage!r})")


class VocabParallel(ParallelStyle):
    """An embedding table [vocab, dim] split by vocabulary (what PyTorch's
    RowwiseParallel does to an nn.Embedding): each device looks up the ids
    in its block and one all_reduce sums the lookups (docs/gather.md). A
    head tied to it makes the logits, and so the cross-entropy, split by
    vocabulary too (loss parallel)."""

    style = "vocab_parallel"


class SequenceParallel(ParallelStyle):
    """An activation split along its sequence dim (`sequence_dim`, default
    1: [batch, seq, hidden]), as around norms and dropout."""

    style = "sequence"

    def __init__(self, *, sequence_dim=1):
        if isinstance(sequence_dim, bool) or not isinstance(sequence_dim, int) \
                or sequence_dim < 0:
            raise TypeError(f"sequence_dim must be an int >= 0, not "
                            f"{sequence_dim!r}")
        self.sequence_dim = sequence_dim

    def _rule(self):
        return {"style": self.style, "dim": self.sequence_dim}

    def __repr__(self):
        return f"SequenceParallel(sequence_dim={self.sequence_dim})"


class FSDP(ParallelStyle):
    """A parameter (and so its gradient and optimizer state) sharded along
    its first dim over a data parallel mesh (PyTorch's fully_shard): it is
    gathered before use and its gradient reduce-scattered. With a tensor
    parallel style, pass fsdp_mesh= to make_plan instead."""

    style = "fsdp"


def make_plan(device_mesh, parallelize_plan, mesh_name="mesh",
              fsdp_mesh=None):
    """The plan file (a dict, as JSON) for `parallelize_plan`: {glob: a
    ParallelStyle, or a layout spec on the whole mesh such as "[S(tp), R]"}.
    Styles need a mesh of one dim (mesh["tp"] of a larger one): its axis is
    theirs. `fsdp_mesh` (mesh["dp"]) also shards each styled parameter over
    that axis along a dim the style leaves whole (FSDP x TP). The file
    declares the whole (root) mesh as @`mesh_name`."""
    if not isinstance(device_mesh, DeviceMesh):
        raise TypeError(f"device_mesh must be a DeviceMesh, not "
                        f"{type(device_mesh).__name__}")
    if not isinstance(parallelize_plan, dict) or not parallelize_plan:
        raise TypeError("parallelize_plan must be a non-empty dict of "
                        "argument-name globs to styles or layout specs")
    if not isinstance(mesh_name, str) or not mesh_name.isidentifier():
        raise ValueError(f"mesh_name {mesh_name!r} is not an identifier")
    fsdp_axis = None
    if fsdp_mesh is not None:
        if not isinstance(fsdp_mesh, DeviceMesh) or fsdp_mesh.ndim != 1 or \
                fsdp_mesh.root_mesh != device_mesh.root_mesh:
            raise ValueError("fsdp_mesh must be a one-dim sub-mesh of "
                             "device_mesh's mesh (mesh['dp'])")
        fsdp_axis = fsdp_mesh._dims[0]
    root = device_mesh.root_mesh
    mesh = {"name": mesh_name, "shape": list(root.shape)}
    if root.mesh_dim_names:
        mesh["axes"] = list(root.mesh_dim_names)
    rules = []
    for glob, value in parallelize_plan.items():
        what = f"parallelize_plan[{glob!r}]"
        if not isinstance(glob, str) or not glob:
            raise TypeError(f"parallelize_plan: the key {glob!r} is not an "
                            "argument-name glob")
        if isinstance(value, ParallelStyle):
            if device_mesh.ndim != 1:
                raise ValueError(
                    f"{what}: {value!r} needs a mesh of one dim, and "
                    f"device_mesh has {device_mesh.ndim} (pass mesh['tp'], "
                    "or a layout spec)")
            rule = {"match": glob, **value._rule(),
                    "axis": (fsdp_axis if isinstance(value, FSDP) and
                             fsdp_axis is not None else device_mesh._dims[0])}
            if fsdp_axis is not None and not isinstance(value, FSDP):
                if fsdp_axis == rule["axis"]:
                    raise ValueError(f"{what}: fsdp_mesh is the style's own "
                                     "axis")
                rule["fsdp"] = fsdp_axis
            rules.append(rule)
        elif isinstance(value, str):
            rules.append({"match": glob, "layout": value})
        else:
            raise TypeError(f"{what} is {value!r}, not a ParallelStyle or a "
                            "layout spec")
    return {"mesh": mesh, "rules": rules}


def save_plan(path, device_mesh, parallelize_plan, mesh_name="mesh",
              fsdp_mesh=None):
    """Writes make_plan's file to `path` (for dtensor-apply-plan{plan=...})."""
    plan = make_plan(device_mesh, parallelize_plan, mesh_name, fsdp_mesh)
    with open(path, "w") as f:
        json.dump(plan, f, indent=2)
        f.write("\n")
    return plan


def parallelize_module(module, device_mesh, parallelize_plan,
                       mesh_name="mesh", fsdp_mesh=None):
    """The program `module` (IR text, or a path to a .mlir file) with its
    arguments annotated by `parallelize_plan` (dtensor-apply-plan): ready
    for dtensor.compile or dtensor.run. Raises CompileError with the pass's
    located message when a glob matches no argument or a layout does not
    fit."""
    if isinstance(module, os.PathLike) or (
            isinstance(module, str) and "\n" not in module and
            os.path.exists(module)):
        with open(module) as f:
            text, name = f.read(), os.fspath(module)
    elif isinstance(module, str):
        text, name = module, "<string>"
    else:
        raise TypeError(f"module must be IR text or a path, not "
                        f"{type(module).__name__}")
    with tempfile.TemporaryDirectory(prefix="dtensor-plan-") as tmp:
        path = os.path.join(tmp, "plan.json")
        save_plan(path, device_mesh, parallelize_plan, mesh_name, fsdp_mesh)
        try:
            return _compile(text, f"dtensor-apply-plan{{plan={path}}}",
                            name=name)
        except CompileError as e:
            # The file is gone when the caller reads this: name the dict.
            diags = [d.replace(f"plan '{path}'", "parallelize_plan")
                     for d in e.diagnostics]
            raise CompileError("\n".join(diags), diags) from None
