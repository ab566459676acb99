"""PyTorch DTensor's shapes over the layout algebra and the planner:
DeviceMesh, the placements Shard / Replicate / Partial, distribute_tensor,
DTensor (to_local, full_tensor, redistribute, from_local) and
visualize_sharding.

Two modes. In one process (the default) a DTensor holds every device's
block (the global view), and redistribute runs the planner's plan on them
with dtensorPlanExecute. Under dtensor-run (on shm or mpi), each process
is one rank and holds its own block, and
redistribute runs the plan's collectives through the runtime, the
functions compiled programs call. Placements are PyTorch's: one per mesh
dim; uneven shards follow the layout algebra (ceil-div), not torch.chunk.
"""

import ctypes
import math
import os
from ctypes import byref, c_void_p

import numpy as np

from . import _capi as C
from ._core import (_CODES, DtensorError, Layout, Mesh, _compute_plan,
                    _diag_text, _spec_text)

# numpy element types a DTensor may hold, and the layout algebra's names
_TYPE_NAMES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
               np.dtype(np.float16): "f16", np.dtype(np.int32): "i32",
               np.dtype(np.int64): "i64"}


_job = None  # (rank, world size) once asked


def _in_job():
    """Whether this process was started as a rank of a job: by dtensor-run
    (DTENSOR_BACKEND; under mpirun the rank comes from MPI) or by another
    launcher with the job's token exported (DTENSOR_JOB and RANK)."""
    env = os.environ
    return "DTENSOR_BACKEND" in env or ("DTENSOR_JOB" in env and "RANK" in env)


def _rank():
    """This process's rank in its job (the runtime's context, set up from
    the environment at the first call), else None (one process)."""
    global _job
    if _job is None:
        if not _in_job():
            return None
        context = C.processContext()  # exits with the runtime's message
        _job = (C.rtRank(context), C.rtWorldSize(context))
    return _job[0]


def is_distributed():
    """Whether this process is one rank of a job started by dtensor-run
    (DTensors then hold this rank's block only)."""
    return _in_job()


# ---- meshes ------------------------------------------------------------------


class DeviceMesh:
    """A mesh of devices: `shape` (an int or a tuple of positive ints) and
    optional axis `names`. mesh["tp"] or mesh["dp", "tp"] is the sub-mesh of
    those axes (in the mesh's order); a DTensor on a sub-mesh is replicated
    over the other axes."""

    def __init__(self, shape, names=None):
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
            shape = (int(shape),)
        if not isinstance(shape, (tuple, list)) or not shape or any(
                isinstance(s, bool) or not isinstance(s, (int, np.integer))
                for s in shape):
            raise TypeError(f"shape must be an int or a tuple of ints, not "
                            f"{shape!r}")
        shape = tuple(int(s) for s in shape)
        if any(s < 1 for s in shape):
            raise ValueError(f"shape {shape}: every axis needs at least one "
                             "device")
        if len(shape) > C.MAX_MESH_RANK:
            raise ValueError(f"shape {shape}: at most {C.MAX_MESH_RANK} axes")
        if math.prod(shape) > C.MAX_MESH_DEVICES:
            raise ValueError(f"shape {shape}: {math.prod(shape)} devices; at "
                             f"most {C.MAX_MESH_DEVICES} (2^20) are supported")
        if names is not None:
            if isinstance(names, str):
                names = (names,)
            if not isinstance(names, (tuple, list)) or not all(
                    isinstance(n, str) for n in names):
                raise TypeError(f"names must be a tuple of strings, not "
                                f"{names!r}")
            names = tuple(names)
            if len(names) != len(shape):
                raise ValueError(f"names {names} has {len(names)} entries "
                                 f"for a mesh of {len(shape)} axes")
            for n in names:
                if not n.isidentifier():
                    raise ValueError(f"names: {n!r} is not an identifier")
            if len(set(names)) != len(names):
                raise ValueError(f"names {names} has a name twice")
            text = ",".join(f"{n}={s}" for n, s in zip(names, shape))
        else:
            text = "x".join(str(s) for s in shape)
        self._root = self
        self._dims = tuple(range(len(shape)))
        self._root_shape = shape
        self._root_names = names
        self._c = Mesh(text)

    @classmethod
    def _sub(cls, root, dims):
        mesh = cls.__new__(cls)
        mesh._root, mesh._dims = root, dims
        mesh._root_shape, mesh._root_names = root._root_shape, root._root_names
        mesh._c = root._c
        return mesh

    @property
    def shape(self):
        return tuple(self._root_shape[d] for d in self._dims)

    @property
    def ndim(self):
        return len(self._dims)

    @property
    def mesh_dim_names(self):
        """The axis names (None for a mesh made without names)."""
        if self._root_names is None:
            return None
        return tuple(self._root_names[d] for d in self._dims)

    def size(self, mesh_dim=None):
        """Devices in the mesh, or along `mesh_dim` (an index or a name)."""
        if mesh_dim is None:
            return int(np.prod(self.shape))
        return self.shape[self._dim_index(mesh_dim, "mesh_dim")]

    def _dim_index(self, dim, what):
        if isinstance(dim, str):
            names = self.mesh_dim_names or ()
            if dim not in names:
                raise KeyError(f"{what}: the mesh has no axis {dim!r} (its "
                               f"axes: {', '.join(names) or 'unnamed'})")
            return names.index(dim)
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"{what} must be an int or an axis name, not "
                            f"{dim!r}")
        if not -self.ndim <= dim < self.ndim:
            raise IndexError(f"{what} {dim} is not an axis of a mesh of "
                             f"{self.ndim}")
        return int(dim) % self.ndim

    def __getitem__(self, names):
        if isinstance(names, str):
            names = (names,)
        if not isinstance(names, tuple) or not names or not all(
                isinstance(n, str) for n in names):
            raise TypeError(f"a sub-mesh is named by axis names, not "
                            f"{names!r}")
        dims = tuple(self._dims[self._dim_index(n, "mesh_dim_names")]
                     for n in names)
        if list(dims) != sorted(set(dims)):
            raise KeyError(f"mesh_dim_names {names}: name each axis once, in "
                           f"the mesh's order {self.mesh_dim_names}")
        return DeviceMesh._sub(self._root, dims)

    @property
    def root_mesh(self):
        """The whole mesh this one is a sub-mesh of (itself if none)."""
        return self._root

    def get_coordinate(self):
        """This rank's coordinates on the mesh's axes under dtensor-run;
        None in one process."""
        rank = _rank()
        if rank is None:
            return None
        coords = np.unravel_index(rank, self._root_shape)
        return [int(coords[d]) for d in self._dims]

    def get_local_rank(self, mesh_dim=None):
        """This rank's coordinate along `mesh_dim` (needed for a mesh of
        several axes) under dtensor-run."""
        coords = self.get_coordinate()
        if coords is None:
            raise RuntimeError("get_local_rank: this process is not a rank "
                               "of a job (run it under dtensor-run)")
        if mesh_dim is None:
            if self.ndim != 1:
                raise ValueError(f"mesh_dim: the mesh has {self.ndim} axes; "
                                 "say which")
            return coords[0]
        return coords[self._dim_index(mesh_dim, "mesh_dim")]

    def __eq__(self, other):
        return (isinstance(other, DeviceMesh) and self._dims == other._dims
                and self._root_shape == other._root_shape
                and self._root_names == other._root_names)

    def __hash__(self):
        return hash((self._dims, self._root_shape, self._root_names))

    def __repr__(self):
        own = (f"DeviceMesh({self.shape}"
               + (f", {self.mesh_dim_names}" if self._root_names else "")
               + ")")
        return own if self._root is self else f"{own} of {self._root!r}"


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None):
    """PyTorch's spelling: DeviceMesh(mesh_shape, mesh_dim_names). DTensors
    here live in host memory: `device_type` must be "cpu" (compiled
    programs run on GPUs: dtensor-run --backend nccl)."""
    if device_type != "cpu":
        raise ValueError(f"device_type {device_type!r}: DTensors of the Python "
                         "package live in host memory ('cpu'); compile a "
                         "program for GPUs with dtensor-compile --target cuda")
    return DeviceMesh(mesh_shape, mesh_dim_names)


# ---- placements --------------------------------------------------------------


class Placement:
    """How one mesh dim lays out a tensor."""

    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False

    def is_partial(self):
        return False


class Shard(Placement):
    """The tensor's dim `dim` split over the mesh dim (ceil-div blocks)."""

    def __init__(self, dim):
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"Shard(dim): dim must be an int, not {dim!r}")
        self.dim = int(dim)

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    def __eq__(self, other):
        return isinstance(other, Shard) and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"


class Replicate(Placement):
    """A whole copy on every device of the mesh dim."""

    def is_replicate(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"


class Partial(Placement):
    """Each device of the mesh dim holds a contribution; the value is their
    reduction by `reduce_op`: sum, avg, max, min, prod ("product")."""

    def __init__(self, reduce_op="sum"):
        op = "prod" if reduce_op == "product" else reduce_op
        if op not in C.RT_REDUCE_KINDS:
            raise ValueError(f"Partial(reduce_op): {reduce_op!r} is not one "
                             f"of {', '.join(C.RT_REDUCE_KINDS)}")
        self.reduce_op = op

    def is_partial(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash(("Partial", self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"


def _check_mesh(mesh, what="device_mesh"):
    if not isinstance(mesh, DeviceMesh):
        raise TypeError(f"{what} must be a DeviceMesh, not "
                        f"{type(mesh).__name__}")
    if _rank() is not None:
        world = _job[1]
        devices = int(np.prod(mesh._root_shape))
        if devices != world:
            raise ValueError(f"{what}: the mesh has {devices} devices and the "
                             f"job {world} ranks")
    return mesh


def _normalize(placements, mesh, ndim, what="placements"):
    """`placements` checked against `mesh` and a tensor of `ndim` dims, Shard
    dims made non-negative; None is all Replicate."""
    if placements is None:
        return (Replicate(),) * mesh.ndim
    if not isinstance(placements, (list, tuple)):
        raise TypeError(f"{what} must be a list of placements (one per mesh "
                        f"dim), not {type(placements).__name__}")
    if len(placements) != mesh.ndim:
        raise ValueError(f"{what} has {len(placements)} entries for a mesh of "
                         f"{mesh.ndim} dim{'s' if mesh.ndim != 1 else ''}")
    out = []
    for i, p in enumerate(placements):
        if not isinstance(p, Placement):
            raise TypeError(f"{what}[{i}] is {p!r}, not a Shard, Replicate "
                            "or Partial")
        if p.is_shard():
            if not -ndim <= p.dim < ndim:
                raise ValueError(f"{what}[{i}]: {p!r} of a tensor of {ndim} "
                                 f"dim{'s' if ndim != 1 else ''}")
            p = Shard(p.dim % ndim)
        out.append(p)
    return tuple(out)


def _spec(mesh, placements, ndim):
    """The sharding spec text, on the root mesh, of `placements` on `mesh`
    (axes outside a sub-mesh replicate)."""
    dims = [[] for _ in range(ndim)]
    partial = {}
    for p, axis in zip(placements, mesh._dims):
        if p.is_shard():
            dims[p.dim].append(axis)
        elif p.is_partial():
            partial.setdefault(p.reduce_op, []).append(axis)
    text = "[" + ", ".join("S" + "".join(map(str, a)) if a else "R"
                           for a in dims) + "]"
    for op, axes in partial.items():
        text += f" P{op}({','.join(map(str, axes))})"
    return text


def _layout(mesh, placements, shape, dtype):
    return Layout(mesh._c, _spec(mesh, placements, len(shape)), shape,
                  _TYPE_NAMES[dtype])


def _array(tensor, what):
    """`tensor` as a numpy array of a type DTensors hold."""
    if not isinstance(tensor, np.ndarray):
        if not hasattr(tensor, "__array__") or isinstance(tensor, (list, tuple)):
            raise TypeError(f"{what} must be a numpy array (or have "
                            f"__array__), not {type(tensor).__name__}")
        tensor = np.asarray(tensor)
    if tensor.dtype not in _TYPE_NAMES:
        raise TypeError(f"{what}: element type {tensor.dtype} (valid: "
                        "float32, float64, float16, int32, int64)")
    return tensor


def _block(layout, device, array):
    """`device`'s block of the global `array` under `layout`."""
    ranges = layout.index_ranges(device)
    # (np.array, not ascontiguousarray: a 0-d block stays 0-d)
    return np.array(array[tuple(
        np.concatenate([np.arange(b, e) for b, e in r]) if len(r) != 1
        else slice(r[0][0], r[0][1]) for r in ranges)], order="C")


def _position(shape, device, axes):
    """`device`'s position in its group over mesh `axes` (row-major)."""
    coords = np.unravel_index(device, shape)
    pos = 0
    for a in axes:
        pos = pos * shape[a] + int(coords[a])
    return pos


def _contribution(mesh, placements, device, block):
    """The part of a whole value `device` holds under `placements`' Partial
    dims: sum (prod) keeps it at position 0 of each and 0 (1) elsewhere;
    avg, max and min keep it everywhere."""
    for p, axis in zip(placements, mesh._dims):
        if p.is_partial() and p.reduce_op in ("sum", "prod") and \
                _position(mesh._root_shape, device, [axis]) != 0:
            return np.full_like(block, 0 if p.reduce_op == "sum" else 1)
    return block


# ---- DTensor -----------------------------------------------------------------


class DTensor:
    """A tensor laid out on a DeviceMesh by placements: in one process every
    device's block (local_tensors()), under dtensor-run this rank's."""

    def __init__(self, mesh, placements, shape, dtype, blocks):
        self._mesh = mesh
        self._placements = placements
        self._shape = tuple(shape)
        self._dtype = np.dtype(dtype)
        self._layout = _layout(mesh, placements, self._shape, self._dtype)
        self._blocks = blocks  # per device; under dtensor-run, {rank: block}

    device_mesh = property(lambda self: self._mesh)
    placements = property(lambda self: self._placements)
    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    ndim = property(lambda self: len(self._shape))

    @property
    def layout(self):
        """The layout algebra's view (on the root mesh): local shapes,
        index ranges, owners, picture()."""
        return self._layout

    def to_local(self, rank=None):
        """This rank's block under dtensor-run; in one process, device
        `rank`'s (of the root mesh)."""
        own = _rank()
        if own is not None:
            if rank is not None and rank != own:
                raise ValueError(f"rank {rank}: this process is rank {own} "
                                 "and holds only its own block")
            return self._blocks[own]
        if rank is None:
            raise ValueError("rank: in one process a DTensor holds every "
                             "device's block; say which (to_local(rank=0)) "
                             "or take local_tensors()")
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) \
                or not 0 <= rank < len(self._blocks):
            raise ValueError(f"rank {rank!r} is not a device of the mesh of "
                             f"{len(self._blocks)}")
        return self._blocks[rank]

    def local_tensors(self):
        """Every device's block, in device order (one process only)."""
        if _rank() is not None:
            raise RuntimeError("local_tensors: under dtensor-run each rank "
                               "holds only its own block (to_local())")
        return list(self._blocks)

    def redistribute(self, device_mesh=None, placements=None):
        """The same tensor under `placements` on the same mesh: the
        planner's cheapest plan, run on the blocks in one process or as the
        runtime's collectives under dtensor-run."""
        mesh = self._mesh if device_mesh is None else _check_mesh(device_mesh)
        if mesh != self._mesh:
            raise ValueError(f"device_mesh {mesh!r}: redistribute stays on "
                             f"the DTensor's mesh {self._mesh!r}")
        placements = _normalize(placements, mesh, self.ndim)
        target = _layout(mesh, placements, self._shape, self._dtype)
        plan = _compute_plan(self._layout, target.spec)
        if _rank() is None:
            blocks = _execute(self._layout, plan, target, self._blocks,
                              self._dtype)
        else:
            blocks = {_rank(): _execute_rank(self._layout, plan, target,
                                             self._blocks[_rank()])}
        return DTensor(mesh, placements, self._shape, self._dtype, blocks)

    def full_tensor(self):
        """The whole tensor (its Partial sums reduced), as a numpy array."""
        whole = self.redistribute(placements=[Replicate()] * self._mesh.ndim)
        return whole._blocks[_rank() or 0]

    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *,
                   shape=None):
        """A DTensor of blocks already laid out by `placements`: in one
        process a list of every device's block (the global shape is
        inferred from them, uneven blocks included); under dtensor-run this
        rank's block (the shape is inferred for even shards; pass `shape`
        for uneven ones). Replicas are taken as they are."""
        mesh = _check_mesh(device_mesh)
        devices = int(np.prod(mesh._root_shape))
        own = _rank()
        if own is None:
            if not isinstance(local_tensor, (list, tuple)):
                raise TypeError("local_tensor: in one process, a list of every "
                                f"device's block ({devices}), not "
                                f"{type(local_tensor).__name__}")
            if len(local_tensor) != devices:
                raise ValueError(f"local_tensor has {len(local_tensor)} "
                                 f"blocks for a mesh of {devices} devices")
            blocks = [_array(b, f"local_tensor[{i}]")
                      for i, b in enumerate(local_tensor)]
        else:
            blocks = {own: _array(local_tensor, "local_tensor")}
        first = blocks[own or 0]
        for i, b in (enumerate(blocks) if own is None else ()):
            if b.dtype != first.dtype or b.ndim != first.ndim:
                raise ValueError(f"local_tensor[{i}] is {b.dtype} of {b.ndim} "
                                 f"dims; local_tensor[0] {first.dtype} of "
                                 f"{first.ndim}")
        placements = _normalize(placements, mesh, first.ndim)
        if shape is None:
            shape = _infer_shape(mesh, placements, blocks, own)
        elif not isinstance(shape, (tuple, list)) or len(shape) != first.ndim:
            raise ValueError(f"shape {shape!r}: a tuple of {first.ndim} sizes")
        result = DTensor(mesh, placements, tuple(int(s) for s in shape),
                         first.dtype, blocks)
        for dev in ([own] if own is not None else range(devices)):
            want = result._layout.local_shape(dev)
            if blocks[dev].shape != want:
                name = "local_tensor" if own is not None else \
                    f"local_tensor[{dev}]"
                raise ValueError(
                    f"{name} has shape {blocks[dev].shape}, but device {dev} "
                    f"holds {want} of a tensor of shape {result.shape} under "
                    f"{list(placements)}")
        return result

    def __repr__(self):
        return (f"DTensor(shape={self._shape}, dtype={self._dtype}, "
                f"placements={list(self._placements)}, "
                f"device_mesh={self._mesh!r})")


def _infer_shape(mesh, placements, blocks, own):
    """The global shape of `blocks`: each sharded dim's blocks along one
    group of its axes added up (one process), or times the group's size
    (under dtensor-run: even shards)."""
    shape = list(blocks[own or 0].shape)
    root = mesh._root_shape
    for d in range(len(shape)):
        axes = [a for p, a in zip(placements, mesh._dims) if p.is_shard(d)]
        if not axes:
            continue
        if own is not None:
            shape[d] *= int(np.prod([root[a] for a in axes]))
            continue
        total = 0
        for j in range(int(np.prod([root[a] for a in axes]))):
            coords = [0] * len(root)
            for a in reversed(axes):
                coords[a] = j % root[a]
                j //= root[a]
            total += blocks[int(np.ravel_multi_index(coords, root))].shape[d]
        shape[d] = total
    return tuple(shape)


def distribute_tensor(tensor, device_mesh, placements=None):
    """A DTensor of the whole `tensor` laid out on `device_mesh` by
    `placements` (default: replicated): each device gets its block under
    the layout algebra (uneven shards ceil-div); a Partial dim gives the
    value to position 0 and zeros to the others (sum; ones for prod; the
    value to all for avg, max, min). Under dtensor-run every rank passes the
    same tensor and keeps its own block."""
    tensor = _array(tensor, "tensor")
    mesh = _check_mesh(device_mesh)
    placements = _normalize(placements, mesh, tensor.ndim)
    layout = _layout(mesh, placements, tensor.shape, tensor.dtype)
    own = _rank()
    devices = range(mesh._c.num_devices) if own is None else [own]
    blocks = {dev: _contribution(mesh, placements, dev,
                                 _block(layout, dev, tensor))
              for dev in devices}
    if own is None:
        blocks = [blocks[d] for d in devices]
    return DTensor(mesh, placements, tensor.shape, tensor.dtype, blocks)


def visualize_sharding(dtensor, header=""):
    """Prints which device holds which block of `dtensor` (the layout's
    picture, as dtensor-plan show draws it)."""
    if not isinstance(dtensor, DTensor):
        raise TypeError(f"dtensor must be a DTensor, not "
                        f"{type(dtensor).__name__}")
    if not isinstance(header, str):
        raise TypeError(f"header must be a string, not {type(header).__name__}")
    if header:
        print(header)
    print(dtensor.layout.picture())


# ---- running a plan ------------------------------------------------------------


def _padded(block, shape, dtype):
    out = np.zeros(shape, dtype)
    out[tuple(slice(0, s) for s in block.shape)] = block
    return out


def _real(block, shape):
    return np.array(block[tuple(slice(0, s) for s in shape)], order="C")


def _execute(source, plan, target, blocks, dtype):
    """Every device's block after `plan`, in one process
    (dtensorPlanExecute, in float64)."""
    if dtype == np.int64 and any(
            b.size and np.abs(b).max() > 2 ** 53 for b in blocks):
        raise ValueError("tensor: int64 values beyond 2**53 cannot be "
                         "redistributed in one process (its plan runs in "
                         "float64); run under dtensor-run")
    # The executor writes the plan's last spec: it must be the target's.
    last = _spec_text(plan.steps[plan.numSteps - 1].after) \
        if plan.numSteps else source.spec
    if last != target.spec:
        raise DtensorError(f"{source.spec} -> {target.spec}: the plan ends at "
                           f"{last}")
    n = len(blocks)
    data = np.stack([_padded(b, source.padded_shape, np.float64)
                     for b in blocks])
    out = np.empty((n,) + target.padded_shape, np.float64)
    diag = C.Diag()
    if not C.planExecute(source._ref(), byref(plan),
                         data.ctypes.data_as(c_void_p),
                         out.ctypes.data_as(c_void_p), byref(diag)):
        raise DtensorError(f"{source.spec} -> {target.spec}: "
                           f"{_diag_text(diag)}")
    return [_real(out[d], target.local_shape(d)).astype(dtype)
            for d in range(n)]


def _execute_rank(source, plan, target, block):
    """This rank's block after `plan`: each step the runtime's collective
    over its group, as compiled programs call it (a failure there ends the
    process with the runtime's message, as it ends a compiled program)."""
    rank = _rank()
    mesh = source.mesh
    shape = np.array(mesh.shape, np.int64)
    cur = _padded(block, source.padded_shape, block.dtype)
    dtype = _CODES[_TYPE_NAMES[block.dtype]]
    for i in range(plan.numSteps):
        step = plan.steps[i]
        comm = step.comm
        axes = np.array(comm.axes[:comm.numAxes], np.int64)
        after = Layout(mesh, _spec_text(step.after), source.shape, source.dtype)
        if step.viewGroups > 1:
            raise DtensorError(f"{source.spec} -> {target.spec}: a plan on "
                               "interleaved shards does not run from Python")
        if int(np.prod(shape[axes])) == 1:
            continue
        pattern = C.COMM_PATTERNS[comm.pattern]
        reduce = C.REDUCE_KINDS[comm.reduce]
        if pattern == "local_partial":
            if reduce in ("sum", "prod") and \
                    _position(tuple(shape), rank, axes) != 0:
                cur = np.full_like(cur, 0 if reduce == "sum" else 1)
            continue
        out = np.zeros(after.padded_shape, cur.dtype)
        descs = [C.memref_descriptor(a) for a in (cur, out, shape, axes)]
        C.collective(C.MLIR_COLLECTIVES.index(pattern), dtype,
                     C.RT_REDUCE_KINDS.index(reduce) if reduce != "none"
                     else 0, comm.gatherDim, comm.shardDim, 0,
                     cur.ndim, ctypes.addressof(descs[0]),
                     out.ndim, ctypes.addressof(descs[1]),
                     1, ctypes.addressof(descs[2]),
                     1, ctypes.addressof(descs[3]))
        cur = out
    return _real(cur, target.local_shape(rank))
