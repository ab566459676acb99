#!/usr/bin/env python3
"""Automatic sharding against hand-written plans (issue 37).

For each program and mesh: the modelled step time (dtensor-propagate's
cost, the model both sides share) of each hand-written plan, and of
dtensor-auto-shard's plan at three budgets per device: unbounded;
90 % of twice the replicated parameters and optimizer state (a step holds
its arguments and its new values at its end: some must be split); 2.2 x
that state over the devices (FSDP or tensor parallel fit, replication
does not). Per line: the plan's peak
from the same liveness model, the solve time, how the solver ended, and
the ratio auto / the cheapest hand plan that fits the budget (<= 1 is
the target). Then the solve time for 24 and 96 transformer blocks (the
forward) on meshes 4, 2x2 and 2x4 (4 only with --quick).

    python3 bench/autoshard/run.py            # Megatron MLP, GPT step, blocks
    python3 bench/autoshard/run.py --quick    # 1-D meshes only
    python3 bench/autoshard/run.py --measure  # also time plans on 2 and 4 ranks

Programs: the Megatron MLP (examples/megatron.mlir without its layouts)
and the small GPT's Adam step (bench/exec/programs.py's
gpt_train_program, 2 layers, dtensor-autodiff) on meshes 4, 2x2, 2x4 and
2. With --measure, every plan that runs on 2 or 4 ranks is timed there
(dtensor-run --repeat 20: each rank's median step, the slowest rank; each
distinct per-device program in turn, five rounds, the fastest kept), and auto is compared with
the fastest hand plan that fits the same budget.
Hand plans: data parallel (the batch split), FSDP (parameters split over
dp too), Megatron tensor parallel, and DP x TP on 2-d meshes.
"""
import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from math import prod

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "build", "bin")
OPT = os.path.join(BIN, "dtensor-opt")
RUN = os.path.join(BIN, "dtensor-run")
sys.path.insert(0, os.path.join(ROOT, "bench", "exec"))
from programs import gpt_parameters, gpt_train_program  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "examples", "gpt"))
from train import megatron  # noqa: E402  (the hand TP plan, one home)

# Parameter-heavy (as large models are): parameters and Adam's moments
# hold most of the memory, activations little.
CFG = dict(batch=4, block=16, width=128, vocab=256, layers=2, heads=4)
MESHES = [((4,), ("dp",)), ((2, 2), ("dp", "tp")), ((2, 4), ("dp", "tp")),
          ((2,), ("dp",))]


def opt(args, path, out=os.devnull):
    r = subprocess.run([OPT, path] + args + ["-o", out], capture_output=True,
                       text=True)
    return r.returncode, r.stderr


# --calibrate: mesh shape -> the file `dtensor-run --calibrate` wrote for
# it; both sides of every comparison are priced by it.
CALIBRATION = {}
ONLY = None  # --only: the programs whose name contains it


def calibration(mesh):
    """The calibration option for `mesh` (empty without --calibrate)."""
    path = CALIBRATION.get(tuple(mesh))
    return f" calibration={path}" if path else ""


def calibrate(meshes, tmp):
    """Measures this machine's collectives and contractions on each mesh of
    2 or 4 devices (`dtensor-run -n N --calibrate`)."""
    for mesh in meshes:
        n = prod(mesh)
        if n not in (2, 4) or tuple(mesh) in CALIBRATION:
            continue
        path = os.path.join(tmp, "cal-" + "x".join(map(str, mesh)) + ".txt")
        subprocess.run([RUN, "-n", str(n), "--calibrate", path, "--mesh",
                        "x".join(map(str, mesh))], check=True,
                       capture_output=True)
        CALIBRATION[tuple(mesh)] = path
        lines = [ln.strip() for ln in open(path)
                 if not ln.startswith(("#", "dtensor-calibration"))]
        print(f"# calibration {'x'.join(map(str, mesh))}: " + "; ".join(lines))


def modelled(path, entry, mesh=()):
    """The modelled cost of `entry` under its layouts, and its peak."""
    rc, err = opt(["--dtensor-propagate=cost=true" + calibration(mesh)], path)
    if rc:
        sys.exit(f"dtensor-propagate failed on {path}:\n{err}")
    m = re.search(r"@%s: modelled cost ([0-9.]+) us" % entry, err)
    return float(m.group(1))


def auto(path, entry, memory, out, mesh=()):
    """(modelled us, peak bytes, summary) of dtensor-auto-shard, or None
    with the error."""
    opts = ("cost=true time-limit=60" + (f" memory={memory}" if memory else "")
            + calibration(mesh))
    t0 = time.perf_counter()
    rc, err = opt([f"--dtensor-auto-shard={opts}"], path, out)
    wall = time.perf_counter() - t0
    if rc:
        errors = [ln for ln in err.splitlines() if "error:" in ln]
        return None, (errors[-1] if errors else err.strip())[:200]
    # The last solve's line: a plan whose compiled program passed the
    # budget is solved again (docs/autoshard.md).
    found = list(re.finditer(
        r"@%s: modelled cost ([0-9.]+) us \((automatic: [^)]*\))"
        r"[^;]*; peak ([0-9]+) bytes" % entry, err))
    m = found[-1] if found else None
    solves = 1 + err.count("solving again")
    if not m:
        m2 = re.search(r"@%s: modelled cost ([0-9.]+) us \(automatic: (.*)" %
                       entry, err)
        return None, (m2.group(2) if m2 else err)[:160]
    how = m.group(2)
    solve = re.search(r"([0-9.]+) s(, gap [0-9.]+ %)?\)", how)
    status = ("optimal" if "optimal" in how else "best found" + (
        solve.group(2) or "")) + (f", {solves} solves" if solves > 1 else "")
    return (float(m.group(1)), int(m.group(3)), status,
            float(solve.group(1)) if solve and solves == 1 else wall), None


def peak_of(path, entry):
    """The peak per device of a plan as dtensor-report finds it in the
    compiled per-device program (collectives' results included): what a
    budget is checked against."""
    rc, err = opt(["--dtensor-spmd", "--dtensor-report"], path)
    m = re.search(r"dtensor report: @%s, per device\n.*\n  peak ([0-9]+) "
                  r"bytes" % entry, err)
    return int(m.group(1)) if m else None


def megatron_text(mesh, axes):
    src = open(os.path.join(ROOT, "examples", "megatron.mlir")).read()
    src = re.sub(r' \{dtensor\.layout = #dtensor\.layout<@tp, "[^"]*">\}', "",
                 src)
    shape = ", ".join(str(d) for d in mesh)
    names = ", ".join(f'"{a}"' for a in axes)
    return re.sub(r'"dtensor\.mesh"\(\) \{[^}]*\}',
                  f'"dtensor.mesh"() {{sym_name = "tp", shape = array<i64: '
                  f'{shape}>, axis_names = [{names}]}}', src)


def megatron_hand(text, axes):
    tp = axes[-1]
    dp = axes[0] if len(axes) > 1 else None

    def put(t, arg, spec):
        return re.sub(r"(%" + arg + r": tensor<[0-9x]+f32>)",
                      r'\1 {dtensor.layout = #dtensor.layout<@tp, "' + spec +
                      '">}', t, count=1)
    plans = {}
    x = f"[S({dp}), R]" if dp else "[R, R]"
    plans["TP" if not dp else "DPxTP"] = put(put(put(
        text, "x", x), "w1", f"[R, S({tp})]"), "w2", f"[S({tp}), R]")
    plans["DP"] = put(text, "x", f"[S({axes[0]}), R]")
    return plans


def gpt_step(mesh, axes, layouts, path):
    text = gpt_train_program(CFG, mesh, axes, layouts)
    src = path + ".loss.mlir"
    open(src, "w").write(text)
    wrt = ",".join(str(i) for i in range(len(gpt_parameters(CFG))))
    rc, err = opt([f"--dtensor-autodiff=function=loss wrt={wrt} "
                   "optimizer=adam lr=0.001"], src, path)
    if rc:
        sys.exit(f"dtensor-autodiff failed:\n{err}")
    # Only the step: auto-sharding the forward and gradient functions too
    # would time them as well.
    lines, out, keep, inside = open(path).read().split("\n"), [], True, False
    for line in lines:
        if line.startswith("  func.func"):
            inside, keep = True, "@loss_step(" in line
        if not inside or keep:
            out.append(line)
        if inside and line == "  }":
            inside = False
    open(path, "w").write("\n".join(out))


def gpt_hands(mesh, axes):
    dp = axes[0]
    tp = axes[-1] if len(axes) > 1 else None
    data = {"tokens": f"[S({dp}), R]", "targets": f"[S({dp}), R]"}
    plans = {"DP": dict(data)}
    fsdp = dict(data)
    for n, s in gpt_parameters(CFG):
        fsdp[n] = f"[S({dp})" + ", R" * (len(s) - 1) + "]"
    plans["FSDP"] = fsdp
    mega = megatron(CFG, tp or dp)
    if tp:
        mega.update(data)
        plans["DPxTP"] = mega
    else:
        plans["TP"] = mega
    return plans


def measure(path, entry, n):
    """The step time (ms) of `path` on n ranks: dtensor-run --repeat 20,
    each rank's median step, the slowest rank; None if it failed. (The
    fastest of 20 steps varied more from run to run than the median.)"""
    r = subprocess.run([RUN, "-n", str(n), "--entry", entry, "--repeat", "20",
                        "--atol", "2e-3", path], capture_output=True,
                       text=True)
    m = re.findall(r"step time min [0-9.]+ ms, median ([0-9.]+) ms",
                   r.stdout + r.stderr)
    return max(float(x) for x in m) if m else None


# {path: [ms of each round]} of the last measure_all: the spread of one
# program's rounds is the noise a ratio is read against.
ROUNDS = {}
REP = {}  # a plan's path -> the path timed for its per-device program


def measure_all(paths, entry, n, rounds=3):
    """{name: ms} for every path in `paths`, timed in turn `rounds` times
    and the fastest round kept: on a loaded 2-core machine one run of the
    same plan varies by 20 %, which interleaving and the minimum remove."""
    best = {}
    for _ in range(rounds):
        for name, path in paths.items():
            t = measure(path, entry, n)
            if t is not None:
                best[name] = min(best.get(name, t), t)
                ROUNDS.setdefault(name, []).append(t)
    return best


def spread(path):
    """The slowest round of `path` over its fastest, as text."""
    r = ROUNDS.get(path)
    return f"{max(r) / min(r):.2f}" if r else "?"


def report(name, mesh, hands, auto_path_fn, entry, tmp, do_measure, state):
    """Prints the lines of one program on one mesh; `state` is the bytes of
    what the budgets are defined on (parameters and optimizer state, or
    every argument), replicated."""
    if ONLY and ONLY not in name:
        return
    costs = {}
    peaks = {}
    for plan, path in hands.items():
        costs[plan] = modelled(path, entry, mesh)
        peaks[plan] = peak_of(path, entry)
    src = auto_path_fn
    unbounded = os.path.join(tmp, "unbounded.mlir")
    r0, err = auto(src, entry, None, unbounded, mesh)
    if r0:
        r0 = (r0[0], peak_of(unbounded, entry) or r0[1]) + r0[2:]
    if not r0:
        print(f"{name:10} {mesh!s:7} auto failed: {err}")
        return
    mesh_n = 1
    for d in mesh:
        mesh_n *= d
    # A step holds its arguments and its results (the new parameters and
    # moments) at its end: twice the state. Below that replicated (some
    # must be split); 2.2 x the state over the devices (FSDP or tensor
    # parallel fit, replication does not).
    budgets = [None, int(0.9 * 2 * state), int(2.2 * state / mesh_n)]
    hand_text = ", ".join(f"{p} {costs[p]:.1f} us/{peaks[p]} B"
                          for p in costs)
    print(f"{name:10} {'x'.join(map(str, mesh)):5} hand (us / report's "
          f"peak): {hand_text}")
    rows = []
    for b in budgets:
        out = os.path.join(tmp, f"auto-{name}-{len(mesh)}-{b}.mlir")
        r, err = auto(src, entry, b, out, mesh)
        rows.append((b, out, r, err))
    times, same = {}, {}
    if do_measure and mesh_n in (2, 4):
        times, same = measure_plans(
            hands, [out for _, out, r, _ in rows if r], entry, mesh_n)
    for b, out, r, err in rows:
        fits = [costs[p] for p in costs
                if b is None or (peaks[p] is not None and peaks[p] <= b)]
        measured_peak = peak_of(out, entry) if r else None
        best = min(fits) if fits else None
        label = "unbounded" if b is None else f"{b} B"
        if not r:
            print(f"  {label:>12}: auto: {err}")
            continue
        ratio = f"{r[0] / best:.3f}" if best else "no hand plan fits"
        over = "" if b is None or (measured_peak or 0) <= b else " OVER"
        line = (f"  {label:>12}: auto {r[0]:.1f} us, peak {r[1]} B "
                f"(report {measured_peak} B{over}), {r[2]}, solve "
                f"{r[3]:.2f} s; auto/best fitting hand {ratio}")
        fitting = {p: times[hands[p]] for p in costs
                   if hands[p] in times and
                   (b is None or (peaks[p] or 0) <= b)}
        if out in times and fitting:
            hb = min(fitting, key=fitting.get)
            line += (f"; measured {times[out]:.3f} ms vs {hb} "
                     f"{fitting[hb]:.3f} ms = {times[out] / fitting[hb]:.2f}x"
                     f" (rounds' spread {spread(REP.get(out, out))} / "
                     f"{spread(REP.get(hands[hb], hands[hb]))})"
                     + (f" (the same program as {same[out]})"
                        if out in same else ""))
        print(line)


def compiled(path):
    """The per-device program dtensor-spmd makes of `path` (text)."""
    r = subprocess.run([OPT, path, "--dtensor-spmd"], capture_output=True,
                       text=True)
    if r.returncode:
        return path
    # A mesh axis by its index, as the layouts of either spelling mean it.
    names = re.search(r"axis_names = \[([^]]*)\]", r.stdout)
    text = r.stdout
    for i, a in enumerate(re.findall(r'"(\w+)"', names.group(1))
                          if names else []):
        text = text.replace(f"S({a})", f"S{i}")
    return text


def measure_plans(hands, autos, entry, n):
    """({path: ms}, {auto path: hand plan it equals}) for the hand plans
    and auto's: each distinct per-device program timed once per round,
    in turn, five rounds, the fastest kept (one run of one program varies
    by 10-20 % on the 2-core machine under 4 ranks); an auto plan whose
    program is a hand plan's takes that plan's time."""
    programs = {}  # compiled text -> the first path
    rep, same = {}, {}
    for name, path in list(hands.items()) + [(None, a) for a in autos]:
        text = compiled(path)
        if text in programs:
            rep[path] = programs[text]
            hand = [h for h, hp in hands.items() if hp == programs[text]]
            if name is None and hand:
                same[path] = hand[0]
        else:
            programs[text] = rep[path] = path
    REP.update(rep)
    timed = measure_all({p: p for p in set(rep.values())}, entry, n, 5)
    return {p: timed[rep[p]] for p in rep if rep[p] in timed}, same


def arguments_span(text):
    """Where the first function's argument list lies in `text`."""
    start = text.index("(", text.index("func.func"))
    depth = 0
    for end in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if depth == 0:
            return start, end
    return start, len(text)


def strip_layouts(text):
    """`text` without the layouts of its arguments and its annotations
    (their results renamed to their operands): what auto chooses. Result
    layouts stay: they are the function's contract with its caller."""
    lines, renames, inside = [], {}, False
    for line in text.split("\n"):
        m = re.match(r'\s*(%[\w.]+) = "dtensor\.annotate"\((%[\w.]+)\)', line)
        if m:
            renames[m.group(1)] = renames.get(m.group(2), m.group(2))
        if m or inside:  # an annotation, to its type's end
            inside = " -> " not in line
            continue
        lines.append(line)
    out = "\n".join(lines)
    for new, old in renames.items():
        out = re.sub(re.escape(new) + r"(?![\w.])", old, out)
    start, end = arguments_span(out)
    layout = r'dtensor\.layout = #dtensor\.layout<@\w+, "[^"]*">'
    sig = re.sub(r" \{" + layout + r"\}", "", out[start:end])
    sig = re.sub(layout + r", ", "", sig)
    sig = re.sub(r", " + layout, "", sig)
    return out[:start] + sig + out[end:]


def argument_bytes(text):
    """The bytes of the first function's arguments, replicated."""
    start, end = arguments_span(text)
    sig = text[start:end]
    size = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i32": 4, "i64": 8}
    total = 0
    for dims, et in re.findall(r"tensor<((?:[0-9]+x)*)(\w+)>", sig):
        total += prod(int(d) for d in dims.split("x") if d) * size.get(et, 4)
    return total


def corpus(tmp, do_measure):
    spec = importlib.util.spec_from_file_location(
        "plans_run", os.path.join(ROOT, "bench", "plans", "run.py"))
    plans = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plans)
    for path, _ in plans.CORPUS:
        path = path if os.path.isabs(path) else os.path.join(ROOT, path)
        text = open(path).read()
        entry = re.search(r"func\.func @(\w+)\(", text).group(1)
        mesh = re.search(r"shape = array<i64: ([0-9, ]+)>", text).group(1)
        mesh = tuple(int(d) for d in mesh.split(","))
        name = os.path.splitext(os.path.basename(path))[0]
        src = os.path.join(tmp, f"corpus-{name}.mlir")
        open(src, "w").write(strip_layouts(text))
        report(name[:10], mesh, {"hand": path}, src, entry, tmp, do_measure,
               argument_bytes(text))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--measure", action="store_true")
    ap.add_argument("--calibrate", action="store_true",
                    help="price both sides by this machine's measured "
                    "collectives and contractions (meshes of 2 and 4)")
    ap.add_argument("--only", default=None,
                    help="only the programs whose name contains this")
    args = ap.parse_args()
    global ONLY
    ONLY = args.only
    print("# modelled step time (us) and peak per device (bytes) by "
          "dtensor's cost and liveness model; 2-core VM"
          + (f", OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']}"
             if "OPENBLAS_CORETYPE" in os.environ else ""))
    tmp = tempfile.mkdtemp()
    meshes = [m for m in MESHES if len(m[0]) == 1] if args.quick else MESHES
    if args.calibrate:
        calibrate([m for m, _ in MESHES], tmp)
    for mesh, axes in meshes:
        text = megatron_text(mesh, axes)
        src = os.path.join(tmp, f"meg-{len(mesh)}.mlir")
        open(src, "w").write(text)
        hands = {}
        for plan, t in megatron_hand(text, axes).items():
            p = os.path.join(tmp, f"meg-{plan}-{len(mesh)}.mlir")
            open(p, "w").write(t)
            hands[plan] = p
        report("megatron", mesh, hands, src, "megatron", tmp, args.measure,
               2 * 64 * 256 * 4)  # the two weights, f32
    for mesh, axes in meshes:
        src = os.path.join(tmp, f"gpt-{len(mesh)}-{mesh[-1]}.mlir")
        gpt_step(mesh, axes, {}, src)
        hands = {}
        for plan, lay in gpt_hands(mesh, axes).items():
            p = os.path.join(tmp, f"gpt-{plan}-{len(mesh)}.mlir")
            gpt_step(mesh, axes, lay, p)
            hands[plan] = p
        # Parameters and Adam's two moments, f32.
        state = 3 * 4 * sum(prod(s) for _, s in gpt_parameters(CFG))
        report("gpt-step", mesh, hands, src, "loss_step", tmp, args.measure,
               state)
    # bench/plans' corpus (the GPT blocks among it): each program's own
    # hand-written layouts against auto on its own mesh.
    if not args.quick:
        corpus(tmp, args.measure)
    # Solve time against the number of blocks (the forward program), on
    # the 1-d mesh and (not --quick) the 2-d ones.
    solve_meshes = [((4,), ("dp",))] + ([] if args.quick else
                                        [((2, 2), ("dp", "tp")), ((2, 4), ("dp", "tp"))])
    for mesh, axes in solve_meshes if not ONLY else ():
        for layers in (24, 96):
            cfg = dict(CFG, layers=layers)
            name = "x".join(map(str, mesh))
            path = os.path.join(tmp, f"blocks-{layers}-{name}.mlir")
            open(path, "w").write(gpt_train_program(cfg, mesh, axes, {}))
            r, err = auto(path, "loss", None, os.devnull)
            print(f"{layers} blocks (GPT forward, mesh {name}): "
                  + (f"solve {r[3]:.2f} s, {r[2]}" if r else err))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
