"""A program compiled once and run one step per call (docs/python.md)."""

import os
import shutil
import tempfile
import time
from ctypes import byref, c_int, pointer

from . import _capi as C
from ._core import (DtensorError, MAX_TIMEOUT_S, _bytes, _check_int,
                    _check_real, _diag_text, _named_inputs, _program_text,
                    _Program, load_checkpoint, save_checkpoint)


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
    the last rank's exit); `state` the values carried to the next call."""

    def __init__(self, program, entry=None, n=None, check=False,
                 timeout=None, rtol=None, atol=None):
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
        self._tmp = tempfile.mkdtemp(prefix="dtensor-step-")
        diag = C.Diag()
        runner = C.runnerCreate(self._prog.take_module(),
                                _bytes(entry, "entry") if entry else None,
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
        self.state = {}
        self.seconds = None
        self._calls = 0

    def __call__(self, inputs=None, state=None):
        """Runs one step on `inputs` ({name: array}, or a list for the
        arguments in order) over the carried state (`state`, when given,
        replaces it); returns {result name: array}."""
        if self._runner is None:
            raise DtensorError("this step was closed")
        if state is not None:
            self.state = dict(_named_inputs(state))
        named = dict(self.state)
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

    def close(self):
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
