"""The package's classes and functions over the C APIs (see _capi)."""

import ctypes
import math
import os
import subprocess
import tempfile
from ctypes import (byref, c_char_p, c_int, c_int64, c_void_p,
                    create_string_buffer, pointer)

import numpy as np

from . import _capi as C


class DtensorError(Exception):
    """A failure reported by the library, with its message."""


class CompileError(DtensorError):
    """A program that does not compile: the diagnostics, each with its
    location (`file:line:col: error: ...`), in `diagnostics`."""

    def __init__(self, message, diagnostics=()):
        super().__init__(message)
        self.diagnostics = list(diagnostics)


def _bytes(s, what):
    """The text argument `what` for C: str, bytes or a path. Anything else
    (None would reach C as a null pointer) is a TypeError, and a NUL (where
    C would stop reading) a ValueError, each naming the argument."""
    if isinstance(s, os.PathLike):
        s = os.fspath(s)
    if isinstance(s, str):
        s = s.encode()
    if not isinstance(s, bytes):
        raise TypeError(f"{what}: expected a string, not {type(s).__name__}")
    if b"\0" in s:
        raise ValueError(f"{what}: {s!r} contains a NUL character")
    return s


def _check_int(value, what, low=None):
    """`value` as an int (not a bool), at least `low`, else TypeError or
    ValueError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if low is not None and value < low:
        raise ValueError(f"{what} is {value}; at least {low}")
    return int(value)


def _diag_text(diag):
    return diag.message.decode(errors="replace")


# ---- meshes and layouts ------------------------------------------------------


class Mesh:
    """A device mesh, written as dtensor-plan takes it: "4", "2x4",
    "dp=2,tp=4". Owns its C object: close() (or a with block) frees it now,
    else it is freed with the Python object."""

    _ptr = None  # for __del__ when __init__ did not get to set it

    def __init__(self, text):
        diag = C.Diag()
        self._ptr = C.meshParse(_bytes(text, "mesh"), byref(diag))
        if not self._ptr:
            raise DtensorError(f"mesh '{text}': {_diag_text(diag)}")

    @property
    def ptr(self):
        if not self._ptr:
            raise DtensorError("the mesh is closed")
        return self._ptr

    def close(self):
        if self._ptr:
            C.meshDestroy(self._ptr)
            self._ptr = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def shape(self):
        return tuple(C.meshGetAxisSize(self.ptr, a)
                     for a in range(C.meshGetRank(self.ptr)))

    @property
    def axis_names(self):
        return tuple(C.meshGetAxisName(self.ptr, a).decode()
                     for a in range(C.meshGetRank(self.ptr)))

    @property
    def num_devices(self):
        return C.meshGetNumDevices(self.ptr)

    def __str__(self):
        buf = create_string_buffer(512)
        C.meshPrint(self.ptr, buf, len(buf))
        return buf.value.decode()

    def __repr__(self):
        return f"Mesh('{self}')"


def _parse_spec(text, mesh):
    spec = C.ShardingSpec()
    diag = C.Diag()
    if not C.specParse(_bytes(text, "spec"), mesh.ptr, byref(spec),
                       byref(diag)):
        raise DtensorError(f"spec '{text}', column {diag.column + 1}: "
                           f"{_diag_text(diag)}")
    return spec


def _spec_text(spec):
    buf = create_string_buffer(512)
    C.specPrint(byref(spec), buf, len(buf))
    return buf.value.decode()


class Layout:
    """A tensor of global `shape` and `dtype` laid out on `mesh` by `spec`
    ("[S0, R]", "[S(dp), S(tp)] Psum(1)"): local shapes, index ranges,
    owners and a picture of the device grid, under the ceil-div convention
    of uneven shards. Keeps its mesh alive."""

    def __init__(self, mesh, spec, shape, dtype="f32"):
        self.mesh = mesh if isinstance(mesh, Mesh) else Mesh(mesh)
        self._spec = _parse_spec(spec, self.mesh)
        et = c_int()
        if not C.elementTypeParse(_bytes(dtype, "dtype"), byref(et)):
            raise DtensorError(f"element type '{dtype}' is not one of f32, "
                               "f64, f16, bf16, f8E4M3FN, f8E5M2, i1, i8, "
                               "i16, i32, i64, ui8")
        if not isinstance(shape, (tuple, list)):
            raise TypeError(f"shape must be a tuple of ints, not "
                            f"{type(shape).__name__}")
        shape = tuple(_check_int(d, f"shape[{i}]") for i, d in enumerate(shape))
        # ctypes would wrap a dim past int64 silently (2**64 + 8 became 8).
        for d in shape:
            if not 0 <= d < 2 ** 63:
                raise DtensorError(f"dim {d} of shape {shape} is not a size "
                                   "from 0 to 2**63 - 1")
        if len(shape) > C.MAX_TENSOR_RANK:
            raise DtensorError(f"a tensor of {len(shape)} dims (at most "
                               f"{C.MAX_TENSOR_RANK})")
        dims = (c_int64 * max(1, len(shape)))(*shape)
        self._layout = C.Layout()
        diag = C.Diag()
        if not C.layoutInit(self.mesh.ptr, byref(self._spec), len(shape),
                            dims, et.value, byref(self._layout),
                            byref(diag)):
            raise DtensorError(f"layout {spec} of {shape} on mesh "
                               f"{self.mesh}: {_diag_text(diag)}")
        self.shape = shape
        self.dtype = dtype

    @property
    def spec(self):
        return _spec_text(self._spec)

    def _ref(self):
        """The C layout, after checking that its mesh is still open."""
        self.mesh.ptr  # raises if the mesh was closed
        return byref(self._layout)

    def _device(self, device):
        device = _check_int(device, "device")
        if not 0 <= device < self.mesh.num_devices:
            raise DtensorError(f"device {device} is not in the mesh of "
                               f"{self.mesh.num_devices} devices")
        return device

    def local_shape(self, device):
        out = (c_int64 * C.MAX_TENSOR_RANK)()
        C.layoutGetLocalShape(self._ref(), self._device(device), out)
        return tuple(out[:len(self.shape)])

    @property
    def padded_shape(self):
        out = (c_int64 * C.MAX_TENSOR_RANK)()
        C.layoutGetMaxLocalShape(self._ref(), out)
        return tuple(out[:len(self.shape)])

    @property
    def is_even(self):
        return bool(C.layoutIsEven(self._ref()))

    def index_ranges(self, device):
        """Per dim, the list of global [begin, end) ranges `device` holds."""
        self._device(device)
        result = []
        for d, size in enumerate(self.shape):
            rs = (C.Range * max(1, self._spec.interleave[d]))()
            n = C.layoutGetLocalRanges(self._ref(), device, d, rs)
            result.append([(rs[i].begin, rs[i].end) for i in range(n)])
        return result

    def owners(self, index):
        """The devices holding the element at global `index`."""
        if len(index) != len(self.shape) or any(
                not 0 <= i < s for i, s in zip(index, self.shape)):
            raise DtensorError(f"index {tuple(index)} is outside the shape "
                               f"{self.shape}")
        idx = (c_int64 * C.MAX_TENSOR_RANK)(*index)
        cap = self.mesh.num_devices
        out = (c_int64 * cap)()
        n = C.layoutGetOwners(self._ref(), idx, out, cap)
        return tuple(out[:n])

    def picture(self):
        """The device grid and every device's block, as text."""
        n = C.layoutDescribe(self._ref(), None, 0)
        buf = create_string_buffer(n + 1)
        C.layoutDescribe(self._ref(), buf, n + 1)
        return buf.value.decode()

    def __repr__(self):
        return (f"Layout(Mesh('{self.mesh}'), '{self.spec}', {self.shape}, "
                f"'{self.dtype}')")


# ---- the LayoutConverter -------------------------------------------------------


class Plan:
    """A redistribution plan: `steps` (each the CommSpec text, the spec it
    produces, its modelled forward time in µs and bytes per device), the
    totals, and `text`, as dtensor-plan prints it."""

    def __init__(self, steps, forward_us, backward_us, text):
        self.steps = steps
        self.forward_us = forward_us
        self.backward_us = backward_us
        self.text = text

    def __repr__(self):
        return f"Plan({[s['comm'] for s in self.steps]}, {self.forward_us:.2f} us)"


def _compute_plan(layout, target, strategy="optimal"):
    """The planner's C plan from `layout` to spec text `target`."""
    if strategy not in ("optimal", "greedy"):
        raise DtensorError(f"strategy '{strategy}' (valid: optimal, greedy)")
    spec = _parse_spec(target, layout.mesh)
    opts = C.PlanOptions()
    C.planOptionsInit(byref(opts))
    opts.strategy = 0 if strategy == "optimal" else 1
    out = C.Plan()
    diag = C.Diag()
    if not C.planCompute(layout._ref(), byref(spec), byref(opts),
                         byref(out), byref(diag)):
        raise DtensorError(f"{layout.spec} -> {target}: {_diag_text(diag)}")
    return out


def plan(layout, target, strategy="optimal"):
    """The cheapest sequence of collectives from `layout` to spec `target`
    on the same mesh (the LayoutConverter); `strategy` "greedy" is the
    seed's walk, for comparison."""
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a Layout, not "
                        f"{type(layout).__name__}")
    out = _compute_plan(layout, target, strategy)
    steps = []
    for i in range(out.numSteps):
        st = out.steps[i]
        buf = create_string_buffer(256)
        C.commSpecPrint(byref(st.comm), buf, len(buf))
        steps.append({"comm": buf.value.decode(), "after": _spec_text(st.after),
                      "forward_us": st.cost.forwardUs,
                      "bytes_per_device": st.cost.bytesPerDevice,
                      # (dim, groups): the step runs on the tensor with that
                      # dim cut into its groups (interleaved shards)
                      "view": (st.viewDim, st.viewGroups) if st.viewGroups > 1 else None})
    n = C.planPrint(byref(out), layout.mesh.ptr, None, 0)
    buf = create_string_buffer(n + 1)
    C.planPrint(byref(out), layout.mesh.ptr, buf, n + 1)
    return Plan(steps, out.forwardUs, out.backwardUs, buf.value.decode())


# ---- the compiler ----------------------------------------------------------------

_upstream_registered = False


class _Program:
    """An MLIR context with the dtensor dialect, its diagnostics collected,
    and `text` parsed in it (`module`, owned until a callee takes it).
    Raises CompileError with the diagnostics if the text does not parse."""

    def __init__(self, text, name):
        global _upstream_registered
        if not _upstream_registered:
            C.registerUpstreamPasses()
            _upstream_registered = True
        self.ctx = C.contextCreate()
        if not self.ctx.ptr:
            raise DtensorError("the dtensor dialect did not load")
        self.diagnostics = []

        def on_diagnostic(diag_ptr, _user):
            buf = create_string_buffer(4096)
            C.diagnosticFormat(C.Handle(diag_ptr), buf, len(buf))
            self.diagnostics.append(buf.value.decode(errors="replace"))
            return 1  # handled

        self._handler = C.DiagnosticHandler(on_diagnostic)
        C.attachDiagnosticHandler(self.ctx, self._handler, None, None)
        src, nm = _bytes(text, "text"), _bytes(name, "name")
        self.module = C.sourceParse(self.ctx, C.StringRef(src, len(src)),
                                    C.StringRef(nm, len(nm)))
        if not self.module.ptr:
            C.contextDestroy(self.ctx)
            raise CompileError("\n".join(self.diagnostics) or "parse failed",
                               self.diagnostics)

    def auto_shard(self, auto, n=None):
        """dtensor-auto-shard on the module when `auto` asks for it (see
        _auto_options); a program without a mesh gets one of `n` devices."""
        options = _auto_options(auto)
        if options is None:
            return
        opts = _bytes(options, "auto")
        diag = C.Diag()
        devices = 0 if n is None else _check_int(n, "n", 1)
        if not C.autoShard(self.module, C.StringRef(opts, len(opts)), devices,
                           byref(diag)):
            raise self.error(f"automatic sharding: {_diag_text(diag)}")

    def error(self, fallback):
        return CompileError("\n".join(self.diagnostics) or fallback,
                            self.diagnostics)

    def take_module(self):
        module, self.module = self.module, C.Handle()
        return module

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.module.ptr:
            C.operationDestroy(self.module)
        C.contextDestroy(self.ctx)


def _auto_options(auto):
    """dtensor-auto-shard's option text for `auto`: None for False; True
    for its defaults; a string as the pass takes it ("memory=16GiB
    time-limit=10"); a dict {"memory": "16GiB", "time_limit": 10}."""
    if auto is None or auto is False:
        return None
    if auto is True:
        text = ""
    elif isinstance(auto, str):
        text = auto
    elif isinstance(auto, dict):
        parts = []
        for key, value in auto.items():
            if not isinstance(key, str):
                raise TypeError(f"auto's option names are strings, not "
                                f"{key!r}")
            if isinstance(value, bool):
                value = "true" if value else "false"
            parts.append(f"{key.replace('_', '-')}='{value}'")
        text = " ".join(parts)
    else:
        raise TypeError(f"auto must be True, False, an option string or a "
                        f"dict of options, not {type(auto).__name__}")
    return text


def compile(text, pipeline="dtensor-spmd", name="<string>", *, entry=None,
            n=None, check=False, timeout=None, rtol=None, atol=None,
            profile=False, auto=False):
    """Runs `pipeline` (dtensor and upstream passes, as dtensor-opt
    --pass-pipeline takes them without the anchor, e.g. "dtensor-propagate,
    dtensor-partition" or "dtensor-spmd, dtensor-to-llvm") on the program
    `text` and returns the resulting IR. Raises CompileError with the located
    diagnostics if the program does not parse, verify or compile.

    With `entry` or `n`: compiles the annotated program (`text`, or a path)
    once for its mesh and returns a dtensor.Step, a callable that runs
    `entry` once per call on the ranks (no recompile; the single-device
    check only with `check=True`), results by name (docs/python.md); with
    `profile=True` every op is timed on the ranks (Step.profile).

    `auto=True` (or dtensor-auto-shard's options, "memory=16GiB" or
    {"memory": "16GiB"}): the compiler chooses every layout the program
    does not state first (docs/autoshard.md); a program without a mesh gets
    one of `n` devices (or give "mesh": "2x4")."""
    if entry is not None or n is not None:
        from ._step import Step
        return Step(text, entry=entry, n=n, check=check, timeout=timeout,
                    rtol=rtol, atol=atol, profile=profile, auto=auto)
    with _Program(text, name) as prog:
        prog.auto_shard(auto)
        pm = C.passManagerCreate(prog.ctx)
        try:
            diag = C.Diag()
            pipe = _bytes(pipeline, "pipeline")
            if not C.passManagerAddPipeline(
                    C.passManagerGetAsOpPassManager(pm),
                    C.StringRef(pipe, len(pipe)), byref(diag)):
                raise CompileError(f"pipeline '{pipeline}', column "
                                   f"{diag.column + 1}: {_diag_text(diag)}")
            if not C.passManagerRunOnOp(pm, prog.module):
                raise prog.error("a pass failed")
            chunks = []

            def on_text(data, length, _user):
                chunks.append(ctypes.string_at(data, length))

            printer = C.StringCallback(on_text)
            C.operationPrint(prog.module, printer, None)
            return b"".join(chunks).decode()
        finally:
            C.passManagerDestroy(pm)


# ---- checkpoints -------------------------------------------------------------------

def _dtype_names():
    """The runtime's element types, code -> name, from its one list."""
    names, code = {}, 0
    while C.dtypeName(code) != b"?":
        names[code] = C.dtypeName(code).decode()
        code += 1
    return names


_NAMES = _dtype_names()
_CODES = {name: code for code, name in _NAMES.items()}
# numpy's types of the runtime's (bf16, f8E4M3FN and f8E5M2 have none: they
# travel as their bits, _BITS; i1 is numpy's bool, a byte of 0 or 1 as the
# runtime keeps it)
_BY_NAME = {name: np.dtype(bool) if name == "i1" else
            np.dtype(name.replace("f", "float").replace("i", "int"))
            for name in _NAMES.values()
            if name not in ("bf16", "f8E4M3FN", "f8E5M2")}
_DTYPES = {dt: _CODES[name] for name, dt in _BY_NAME.items()}


# The types numpy has no dtype of: their bits in unsigned integers of
# their size, converted by the runtime's own conversions (dtrtConvert).
_BITS = {"bf16": np.uint16, "f8E4M3FN": np.uint8, "f8E5M2": np.uint8}


def _to_bits(values, kind):
    """float values as `kind`'s bits (rounded to nearest even)."""
    a = np.ascontiguousarray(values, dtype=np.float32)
    out = np.empty(a.shape, dtype=_BITS[kind])
    C.convert(a.ctypes.data, _CODES["f32"], out.ctypes.data, _CODES[kind],
              a.size)
    return out


def _from_bits(bits, kind):
    """`kind`'s bits as float32 values (exact)."""
    b = np.ascontiguousarray(bits, dtype=_BITS[kind])
    out = np.empty(b.shape, dtype=np.float32)
    C.convert(b.ctypes.data, _CODES[kind], out.ctypes.data, _CODES["f32"],
              b.size)
    return out


def _err():
    return create_string_buffer(1024)


def _check(status, err):
    if status != 0:
        raise DtensorError(err.value.decode(errors="replace"))


def checkpoint_info(path):
    """The tensors of the checkpoint at `path`: a list of dicts with name,
    dtype, shape, mesh, spec, shards and bytes."""
    handle = c_void_p()
    err = _err()
    _check(C.ckptOpen(_bytes(path, "path"), byref(handle), err, len(err)), err)
    try:
        out = []
        for i in range(C.ckptNumTensors(handle)):
            t = C.RtTensor()
            shards = c_int()
            nbytes = c_int64()
            C.ckptGetTensor(handle, i, byref(t), byref(shards), byref(nbytes))
            out.append({"name": t.name.decode(), "dtype": _NAMES[t.dtype],
                        "shape": tuple(t.shape[d] for d in range(t.rank)),
                        "mesh": t.mesh.decode(), "spec": t.spec.decode(),
                        "shards": shards.value, "bytes": nbytes.value})
        return out
    finally:
        C.ckptClose(handle)


def verify_checkpoint(path):
    """Checks every data file's size and CRC-32; raises DtensorError naming
    the first bad file."""
    err = _err()
    _check(C.ckptVerify(_bytes(path, "path"), err, len(err)), err)


def load_checkpoint(path, names=None):
    """Reads tensors whole: {name: numpy array} for `names` (default all).
    bf16, f8E4M3FN and f8E5M2 tensors come back as float32 (exactly)."""
    info = {t["name"]: t for t in checkpoint_info(path)}
    wanted = list(info) if names is None else list(names)
    out = {}
    for name in wanted:
        if name not in info:
            raise DtensorError(f"{path}: no tensor '{name}' (it has "
                               f"{', '.join(info) or 'none'})")
        t = info[name]
        narrow = t["dtype"] in _BITS
        dtype = _BITS[t["dtype"]] if narrow else _BY_NAME[t["dtype"]]
        array = np.empty(t["shape"], dtype=dtype)
        err = _err()
        _check(C.ckptReadTensor(_bytes(path, "path"), _bytes(name, "names"),
                                array.ctypes.data_as(c_void_p), array.nbytes,
                                err, len(err)), err)
        out[name] = _from_bits(array, t["dtype"]) if narrow else array
    return out


def save_checkpoint(path, tensors):
    """Writes tensors into the checkpoint at `path` (created if needed,
    others kept): {name: array} (replicated on one device) or {name: (array,
    mesh, spec)} to store each under a layout. Arrays of float32, float64,
    float16, int32 or int64. All of them are written in one step: a save
    stopped midway leaves the previous checkpoint whole."""
    if not isinstance(tensors, dict):
        raise TypeError(f"tensors must be a dict of name to array, not "
                        f"{type(tensors).__name__}")
    if not tensors:
        return
    keep, items = [], (C.RtTensor * len(tensors))()
    for k, (name, value) in enumerate(tensors.items()):
        array, mesh, spec = (value if isinstance(value, tuple)
                             else (value, None, None))
        if not isinstance(array, np.ndarray) and not hasattr(array, "__array__"):
            raise TypeError(f"tensors[{name!r}] must be a numpy array, not "
                            f"{type(array).__name__}")
        array = np.asarray(array, order="C")  # (0-d stays 0-d)
        if array.dtype not in _DTYPES:
            raise DtensorError(f"'{name}': element type {array.dtype} (valid: "
                               "float32, float64, float16, int32, int64)")
        if mesh is None:
            mesh = "1"
            spec = "[" + ", ".join("R" for _ in array.shape) + "]"
        shape = (c_int64 * max(1, array.ndim))(*array.shape)
        keep += [array, shape]  # alive until the write returns
        items[k] = C.RtTensor(_bytes(name, "tensors key"), _DTYPES[array.dtype],
                              array.ndim, shape,
                              _bytes(mesh, f"tensors[{name!r}] mesh"),
                              _bytes(spec, f"tensors[{name!r}] spec"),
                              array.ctypes.data_as(c_void_p))
    err = _err()
    _check(C.ckptWriteTensors(_bytes(path, "path"), len(tensors), items, err,
                              len(err)), err)


def convert_checkpoint(path, out, mesh, specs=None, default=None):
    """Rewrites the checkpoint for `mesh`, each tensor under specs[name] or
    `default` (None: replicated); block by block."""
    specs = specs or {}
    names = (c_char_p * max(1, len(specs)))(
        *[_bytes(k, "specs key") for k in specs])
    values = (c_char_p * max(1, len(specs)))(*[_bytes(v, f"specs[{k!r}]") for k, v in specs.items()])
    err = _err()
    _check(C.ckptConvert(_bytes(path, "path"), _bytes(out, "out"),
                         _bytes(mesh, "mesh"), len(specs), names, values,
                         _bytes(default, "default") if default else None,
                         err, len(err)), err)


# ---- running --------------------------------------------------------------------


def _program_text(program):
    """(text, name) of `program`: a path to a .mlir file, or IR text."""
    if "\n" not in program and os.path.exists(program):
        with open(program) as f:
            return f.read(), program
    return program, "<string>"


def _named_inputs(inputs):
    if not isinstance(inputs, (dict, list, tuple)):
        raise TypeError(f"inputs must be a list of arrays or a dict of name "
                        f"to array, not {type(inputs).__name__}")
    named = inputs if isinstance(inputs, dict) else {
        f"arg{i}": a for i, a in enumerate(inputs)}
    for k, a in named.items():
        if not isinstance(a, np.ndarray) and not hasattr(a, "__array__"):
            key = k if isinstance(inputs, dict) else int(k[3:])
            raise TypeError(f"inputs[{key!r}] must be a numpy array, not "
                            f"{type(a).__name__}")
    return named


MAX_TIMEOUT_S = 1e7  # the runtime's DTRT_MAX_TIMEOUT_S


def _check_real(value, what, lo, hi):
    """`value` as a float in [lo, hi], else ValueError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or not lo <= value <= hi:
        raise ValueError(f"{what} must be a finite number from {lo:g} to "
                         f"{hi:g}, not {value!r}")
    return float(value)


def run(program, n, inputs, backend="shm", entry=None, timeout=None,
        rtol=None, atol=None, auto=False):
    """Compiles the annotated `program` (a path, or IR text) with
    dtensor-spmd and runs it on `n` ranks on `inputs` (a list of numpy
    arrays for the entry's arguments in order, or {name: array} by their
    dtensor.name); returns the results as numpy arrays, in order. Every
    rank's result is checked against the single-device run: a difference or
    any failure raises DtensorError (CompileError when the program does not
    compile). A float element passes within atol + rtol * |reference| when
    `rtol` or `atol` is given (the other then 0), else within dtensor-run's
    default (rtol 1e-4 plus 1e-5 of the result's largest finite magnitude);
    NaN and infinities must match exactly. On shm the program is compiled
    in this process and the ranks are forked from it (libdtensor's
    runner); on mpi, mpirun starts dtensor-run once per rank. `auto`: as
    compile's (the layouts chosen once, before the ranks start)."""
    n = _check_int(n, "n", 1)
    _bytes(program, "program")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(
            timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT_S):
        raise ValueError(f"timeout must be a positive number of seconds, at "
                         f"most {MAX_TIMEOUT_S:g}, not {timeout!r}")
    tolerance = None
    if rtol is not None or atol is not None:
        tolerance = (0.0 if rtol is None else _check_real(rtol, "rtol", 0, 1e300),
                     0.0 if atol is None else _check_real(atol, "atol", 0, 1e300))
    auto_text = _auto_options(auto)
    if backend == "mpi":
        return _run_under_mpirun(program, n, inputs, entry, timeout, tolerance,
                                 auto_text)
    if backend != "shm":
        raise DtensorError(f"backend '{backend}': MLIR programs run on host "
                           "memory (valid: shm, mpi)")
    text, name = _program_text(program)
    named = _named_inputs(inputs)
    with _Program(text, name) as prog, \
            tempfile.TemporaryDirectory(prefix="dtensor-run-") as tmp:
        prog.auto_shard(auto, n)
        diag = C.Diag()
        runner = C.runnerCreate(prog.take_module(),
                                _bytes(entry, "entry") if entry else None,
                                byref(diag))
        if not runner:
            raise prog.error(f"{name}: {_diag_text(diag)}")
        try:
            return _run_ranks(runner, n, named, timeout, tolerance, tmp)
        finally:
            C.runnerDestroy(runner)


def _run_ranks(runner, n, named, timeout, tolerance, tmp):
    devices = C.meshGetNumDevices(C.runnerGetMesh(runner))
    if devices != n:
        raise DtensorError(f"the program's mesh has {devices} devices; "
                           f"run it with n={devices}")
    diag = C.Diag()
    ck_in, ck_out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    # An input the entry does not take is a mistake, not something to skip.
    names = [C.runnerGetArgument(runner, i).contents.name.decode()
             for i in range(C.runnerGetNumArguments(runner))]
    # (Positional inputs, arg<i>, are checked by the runner itself.)
    unused = [k for k in named if k not in names and
              not (k.startswith("arg") and k[3:].isdigit())]
    if unused:
        raise DtensorError(
            f"input{'s' if len(unused) > 1 else ''} "
            f"{', '.join(repr(k) for k in unused)} "
            f"{'are' if len(unused) > 1 else 'is'} not an argument of the "
            f"entry (its arguments: {', '.join(names) or 'none'})")
    if named:
        save_checkpoint(ck_in, named)
        if not C.runnerLoadArguments(runner, _bytes(ck_in, "inputs"),
                                     byref(diag)):
            raise DtensorError(_diag_text(diag))
    if not C.runnerComputeReference(runner, byref(diag)):
        raise DtensorError(_diag_text(diag))
    launch = C.LaunchOptions(n, b"shm", float(timeout or 0), None)
    tol = C.Tolerance(*tolerance) if tolerance else None
    options = C.RankOptions(None, _bytes(ck_out, "results"), 0,
                            pointer(tol) if tol else None)
    reports = (C.RankReport * n)()
    code = c_int()
    if not C.runnerLaunch(runner, byref(launch), byref(options), reports,
                          byref(code), byref(diag)):
        raise DtensorError(_diag_text(diag))
    different = [k for k in range(n) if reports[k].different]
    if different:
        worst = max(reports[k].maxAbsError for k in different)
        count = max(reports[k].different for k in different)
        raise DtensorError(
            f"rank(s) {', '.join(map(str, different))}: the result differs "
            f"from the single-device run in up to {count} element(s) per rank "
            f"(max abs "
            f"error {worst:.3g}; rtol=, atol= set the tolerance)")
    results = load_checkpoint(ck_out)
    return [results[C.runnerGetResult(runner, k).contents.name.decode()]
            for k in range(C.runnerGetNumResults(runner))]


def _run_under_mpirun(program, n, inputs, entry, timeout, tolerance,
                      auto_text=None):
    """run() on the mpi backend: dtensor-run under mpirun, results through a
    checkpoint."""
    tool = os.path.join(C.bin_dir(), "dtensor-run")
    with tempfile.TemporaryDirectory(prefix="dtensor-run-") as tmp:
        if "\n" not in program and os.path.exists(program):
            path = program
        else:
            path = os.path.join(tmp, "program.mlir")
            with open(path, "w") as f:
                f.write(program)
        named = _named_inputs(inputs)
        ck_in, ck_out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
        if named:
            save_checkpoint(ck_in, named)
        cmd = [tool, "-n", str(n), "--backend", "mpi"]
        if entry:
            cmd += ["--entry", entry]
        if timeout:
            cmd += ["--timeout", str(timeout)]
        if tolerance:
            cmd += ["--rtol", repr(tolerance[0]), "--atol", repr(tolerance[1])]
        if named:
            cmd += ["--load", ck_in]
        if auto_text is not None:
            cmd += ["--auto", "--auto-options", auto_text]
        cmd += ["--save", ck_out, path]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise DtensorError(f"dtensor-run failed ({done.returncode}):\n"
                               f"{done.stdout}{done.stderr}")
        results = load_checkpoint(ck_out)
        return [results[t["name"]] for t in checkpoint_info(ck_out)]
