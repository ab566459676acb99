"""A program compiled once and run one step per call (docs/python.md)."""

import ctypes
import os
import shutil
import tempfile
import time
from ctypes import byref, c_bool, c_double, c_int, pointer

import numpy as np

from . import _capi as C
from ._core import (DtensorError, MAX_TIMEOUT_S, _BITS, _BY_NAME, _NAMES,
                    _bytes, _check_int, _check_real, _diag_text, _from_bits,
                    _named_inputs, _program_text, _Program, _to_bits,
                    load_checkpoint, save_checkpoint)


class _State(dict):
    """step.state: the values the next call starts from, by argument name;
    a value the ranks hold (a carried result) is fetched when read."""

    def __init__(self, step):
        super().__init__()
        self._step = step

    def __getitem__(self, name):
        value = super().__getitem__(name)
        return self._step._fetch(name) if value is _ON_RANKS else value

    def get(self, name, default=None):
        return self[name] if name in self else default

    def items(self):
        return [(k, self[k]) for k in self]

    def values(self):
        return [self[k] for k in self]


_ON_RANKS = object()


class Step:
    """`program` (a path or IR text) compiled once with dtensor-spmd for its
    mesh; each call runs `entry` once on the mesh's ranks (shm) and returns
    its results as {name: array}. A result whose name is one of the
    entry's arguments (a training step's new parameters and optimizer
    state, named by dtensor-autodiff) is that argument's value at the next
    call, so a loop passes only what changes (the batch, Adam's step):

        step = dtensor.compile(text, entry="f_step")
        for t in range(1, 101):
            out = step({"tokens": x, "targets": y,
                        "adam.step": np.array(t, np.float32)}, state=init if t == 1 else None)

    With `check=True` every call also runs the single-device program and
    compares every rank with it (as dtensor.run does); without, nothing is
    recomputed. `seconds` is the time of the last call's ranks (launch to
    the last rank's exit); `state` the values carried to the next call.
    `auto`: the layouts chosen by dtensor-auto-shard first (as
    dtensor.compile's)."""

    def __init__(self, program, entry=None, n=None, check=False,
                 timeout=None, rtol=None, atol=None, profile=False,
                 auto=False):
        text, name = _program_text(program)
        self.check = bool(check)
        self.timeout = timeout
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(
                timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT_S):
            raise ValueError(f"timeout must be a positive number of seconds, "
                             f"at most {MAX_TIMEOUT_S:g}, not {timeout!r}")
        self._tolerance = None
        if rtol is not None or atol is not None:
            self._tolerance = (
                0.0 if rtol is None else _check_real(rtol, "rtol", 0, 1e300),
                0.0 if atol is None else _check_real(atol, "atol", 0, 1e300))
        self._prog = _Program(text, name)
        self._runner = None
        try:
            self._prog.auto_shard(auto, n)
        except Exception:
            self._prog.__exit__(None, None, None)
            raise
        self._tmp = tempfile.mkdtemp(prefix="dtensor-step-")
        diag = C.Diag()
        self._profiled = bool(profile)
        runner = C.runnerCreateForTarget(
            self._prog.take_module(),
            _bytes(entry, "entry") if entry else None, b"cpu",
            b"threads=auto profile=true" if profile else b"threads=auto",
            byref(diag))
        if not runner:
            err = self._prog.error(f"{name}: {_diag_text(diag)}")
            self.close()
            raise err
        self._runner = runner
        self.n = int(C.meshGetNumDevices(C.runnerGetMesh(runner)))
        if n is not None and _check_int(n, "n", 1) != self.n:
            self.close()
            raise DtensorError(f"the program's mesh has {self.n} devices; "
                               f"compile it with n={self.n}")
        self.arguments = [C.runnerGetArgument(runner, i).contents.name.decode()
                          for i in range(C.runnerGetNumArguments(runner))]
        self.results = [C.runnerGetResult(runner, k).contents.name.decode()
                        for k in range(C.runnerGetNumResults(runner))]
        self.state = _State(self)
        self.seconds = None
        self._calls = 0
        self._tensors = [C.runnerGetArgument(runner, i).contents
                         for i in range(len(self.arguments))]
        self._result_tensors = [C.runnerGetResult(runner, k).contents
                                for k in range(len(self.results))]
        # Without check the ranks stay up between calls (a CPU program):
        # started now, or at the first unchecked call; the state stays on
        # them.
        self._session = None
        self._sessions = True
        self._carried = {}
        if not self.check:
            self._start_session()

    def _start_session(self):
        """Ranks that stay up, given the state so far; False where the
        program cannot have them (a GPU program: launched per call)."""
        diag = C.Diag()
        launch = C.LaunchOptions(self.n, b"shm", float(self.timeout or 0),
                                 None)
        self._session = C.runSessionStart(self._runner, byref(launch),
                                          float(self.timeout or 0),
                                          byref(diag))
        if not self._session:
            self._sessions = False
            return False
        self._carried = {}
        for k in range(len(self.results)):
            a = C.runSessionCarried(self._session, k)
            if a >= 0:
                self._carried[k] = a
        for name in list(self.state):
            self._give(self._index(name), self.state[name])
        return True

    def _end_session(self):
        """Back to a launch per call (check=True): the state comes home."""
        held = {k: self.state[k] for k in self.state}
        C.runSessionClose(self._session, None)
        self._session = None
        self.state = _State(self)
        self.state.update(held)

    def __call__(self, inputs=None, state=None):
        """Runs one step on `inputs` ({name: array}, or a list for the
        arguments in order) over the carried state (`state`, when given,
        replaces it); returns {result name: array}."""
        if self._runner is None:
            raise DtensorError("this step was closed")
        if self.check and self._session:
            self._end_session()
        if not self.check and (self._session or self._sessions and
                               self._start_session()):
            return self._session_call(inputs, state)
        if state is not None:
            self.state = _State(self)
            self.state.update(_named_inputs(state))
        named = {k: self.state[k] for k in self.state}
        if inputs is not None:
            given = _named_inputs(inputs)
            for k in given:
                if k.startswith("arg") and k[3:].isdigit() and \
                        int(k[3:]) < len(self.arguments):
                    named.pop(self.arguments[int(k[3:])], None)
            named.update(given)
        unknown = [k for k in named if k not in self.arguments and
                   not (k.startswith("arg") and k[3:].isdigit())]
        if unknown:
            raise DtensorError(
                f"input{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(repr(k) for k in unknown)} not an argument of "
                f"the entry (its arguments: {', '.join(self.arguments)})")
        missing = [a for i, a in enumerate(self.arguments)
                   if a not in named and f"arg{i}" not in named]
        if missing:
            raise DtensorError(f"no value for argument"
                               f"{'s' if len(missing) > 1 else ''} "
                               f"{', '.join(repr(m) for m in missing)}")
        self._calls += 1
        call_dir = os.path.join(self._tmp, str(self._calls))
        os.mkdir(call_dir, 0o700)
        ck_in, ck_out = os.path.join(call_dir, "in"), os.path.join(call_dir,
                                                                     "out")
        try:
            diag = C.Diag()
            save_checkpoint(ck_in, named)
            if not C.runnerLoadArguments(self._runner, _bytes(ck_in, "inputs"),
                                         byref(diag)):
                raise DtensorError(_diag_text(diag))
            if self.check and not C.runnerComputeReference(self._runner,
                                                           byref(diag)):
                raise DtensorError(_diag_text(diag))
            launch = C.LaunchOptions(self.n, b"shm", float(self.timeout or 0),
                                     None)
            tol = C.Tolerance(*self._tolerance) if self._tolerance else None
            options = C.RankOptions(None, _bytes(ck_out, "results"), 0,
                                    pointer(tol) if tol else None,
                                    not self.check)
            reports = (C.RankReport * self.n)()
            code = c_int()
            start = time.perf_counter()
            if not C.runnerLaunch(self._runner, byref(launch), byref(options),
                                  reports, byref(code), byref(diag)):
                raise DtensorError(_diag_text(diag))
            self.seconds = time.perf_counter() - start
            different = [k for k in range(self.n) if reports[k].different]
            if different:
                raise DtensorError(
                    f"rank(s) {', '.join(map(str, different))}: the result "
                    f"differs from the single-device run (max abs error "
                    f"{max(reports[k].maxAbsError for k in different):.3g})")
            loaded = load_checkpoint(ck_out)
        finally:
            shutil.rmtree(call_dir, ignore_errors=True)
        out = {k: loaded[k] for k in self.results}
        for k, v in out.items():
            if k in self.arguments:
                self.state[k] = v
        return out

    def _index(self, name):
        """The argument `name` gives (a name, or the positional arg<i>)."""
        if name in self.arguments:
            return self.arguments.index(name)
        if name.startswith("arg") and name[3:].isdigit() and \
                int(name[3:]) < len(self.arguments):
            return int(name[3:])
        raise DtensorError(
            f"input {name!r} not an argument of the entry (its arguments: "
            f"{', '.join(self.arguments)})")

    def _give(self, i, value):
        """Writes argument i's global value for the next step."""
        t, name = self._tensors[i], self.arguments[i]
        shape = tuple(t.shape[:t.rank])
        a = np.asarray(value)
        if a.shape != shape:
            raise DtensorError(f"'{name}': shape {a.shape}, where the "
                               f"argument's is {shape}")
        kind = _NAMES[t.dtype]
        if kind in _BITS:
            data = _to_bits(a, kind)
        else:
            want = _BY_NAME[kind]
            if a.dtype != want and not np.can_cast(a.dtype, want,
                                                   "same_kind"):
                raise DtensorError(f"'{name}': element type {a.dtype}, "
                                   f"where the argument's is {kind}")
            data = np.ascontiguousarray(a, dtype=want)
        ctypes.memmove(C.runSessionArgument(self._session, i),
                       data.ctypes.data, data.nbytes)
        dict.__setitem__(self.state, name, a)

    def _array(self, address, t):
        """A copy of the global value at `address` of tensor `t`."""
        shape = tuple(t.shape[:t.rank])
        kind = _NAMES[t.dtype]
        dtype = np.dtype(_BITS.get(kind, _BY_NAME.get(kind)))
        count = int(np.prod(shape, dtype=np.int64))
        raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(address)
        a = np.frombuffer(raw, dtype=dtype).copy().reshape(shape)
        return _from_bits(a, kind) if kind in _BITS else a

    def _fetch(self, name):
        """Argument `name`'s value as the ranks hold it."""
        i = self.arguments.index(name)
        diag = C.Diag()
        address = C.runSessionFetch(self._session, i, byref(diag))
        if not address:
            raise DtensorError(_diag_text(diag))
        return self._array(address, self._tensors[i])

    def _session_call(self, inputs, state):
        given = {}
        for values in (state, inputs):
            if values is not None:
                for k, v in _named_inputs(values).items():
                    given[self._index(k)] = v
        missing = [a for i, a in enumerate(self.arguments)
                   if i not in given and a not in self.state]
        if missing:
            raise DtensorError(f"no value for argument"
                               f"{'s' if len(missing) > 1 else ''} "
                               f"{', '.join(repr(m) for m in missing)}")
        for i, v in given.items():
            self._give(i, v)
        diag = C.Diag()
        seconds = c_double()
        self._calls += 1
        if not C.runSessionStep(self._session, None, byref(seconds),
                                byref(diag)):
            raise DtensorError(_diag_text(diag))
        self.seconds = seconds.value
        out = {}
        for k, name in enumerate(self.results):
            if k in self._carried:
                dict.__setitem__(self.state, self.arguments[self._carried[k]],
                                 _ON_RANKS)
            else:
                out[name] = self._array(C.runSessionResult(self._session, k),
                                        self._result_tensors[k])
        return out

    def profile(self, path):
        """With profile=True: the ops the ranks ran since the last call
        (or the start), as a Chrome trace written to `path` (a track per
        rank) and returned as a table: one dict per op (its kind, shapes
        and source line) with calls, total and mean time and share,
        summed over the ranks, the largest total first."""
        import json
        if not self._profiled:
            raise DtensorError("this step was not compiled with profile=True")
        if not self._session:
            raise DtensorError("the profile is kept by ranks that stay up "
                               "(check=False)")
        diag = C.Diag()
        if not C.runSessionProfile(self._session, _bytes(path, "path"), None,
                                   byref(diag)):
            raise DtensorError(_diag_text(diag))
        with open(path) as f:
            events = [e for e in json.load(f)["traceEvents"]
                      if e.get("ph") == "X"]
        totals = {}
        for e in events:
            t = totals.setdefault(e["args"]["op"], [0, 0.0])
            t[0] += 1
            t[1] += e["dur"] * 1e-3
        whole = sum(t[1] for t in totals.values()) or 1.0
        return [{"op": op, "calls": c, "total_ms": ms,
                 "mean_us": 1e3 * ms / c, "share": ms / whole}
                for op, (c, ms) in sorted(totals.items(),
                                          key=lambda kv: -kv[1][1])]

    def close(self):
        if getattr(self, "_session", None):
            C.runSessionClose(self._session, None)
            self._session = None
        if getattr(self, "_runner", None):
            C.runnerDestroy(self._runner)
            self._runner = None
        if getattr(self, "_prog", None) is not None:
            self._prog.__exit__(None, None, None)
            self._prog = None
        if getattr(self, "_tmp", None):
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
