#!/usr/bin/env python3
"""Runs docs/tutorial.md as written and checks the outputs it shows.

Every `$ ` command of the tutorial's indented blocks runs, in order, in one
bash session (so its `cd` and files carry over) with REPO set to the
checkout; a `$ ... python3` line followed by `>>> ` lines is a Python
session, whose statements run as the interactive interpreter would (an
expression's value printed). The lines shown after a command are its
expected output: each must appear, in order, among the lines it printed
(stdout and stderr), where `...` skips lines and a number with a decimal
point or an exponent matches any number. Exits 1 naming the first command
whose output differs, or that fails.

usage: test/tutorial/run.py REPO_ROOT
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARK = "@@tutorial-step@@"


def steps(text):
    """[(kind, body, expected lines)]: kind "sh" or "py"."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("    $ "):
            i += 1
            continue
        command = line[6:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        i += 1
        if "python3" in command and i < len(lines) and \
                lines[i].startswith("    >>> "):
            statements = []
            while i < len(lines) and lines[i].startswith("    "):
                if lines[i].startswith("    >>> "):
                    statements.append([lines[i][8:], []])
                else:
                    statements[-1][1].append(lines[i][4:])
                i += 1
            out.append(("py", (command, statements), []))
            continue
        expected = []
        while i < len(lines) and lines[i].startswith("    ") and \
                not lines[i].startswith("    $ "):
            expected.append(lines[i][4:])
            i += 1
        out.append(("sh", command, expected))
    return out


NUMBER = re.compile(r"[-+]?\d+\.\d+(?:e[-+]?\d+)?|[-+]?\d+e[-+]?\d+")


def pattern(line):
    parts, last = [], 0
    for m in NUMBER.finditer(line):
        parts.append(re.escape(line[last:m.start()]))
        parts.append(r"[-+0-9.e]+")
        last = m.end()
    parts.append(re.escape(line[last:]))
    return re.compile(r"\s*" + r"\s+".join("".join(parts).split(r"\ ")) + r"\s*")


def matches(expected, actual):
    """Whether the expected lines appear in order in `actual`."""
    at = 0
    for line in expected:
        if line.strip() == "...":
            continue
        p = pattern(line.strip())
        while at < len(actual) and not p.fullmatch(actual[at].strip()):
            at += 1
        if at == len(actual):
            return line
        at += 1
    return None


PY_DRIVER = r'''
import sys
ns = {}
for i, stmt in enumerate(STATEMENTS):
    print("%s py %d" % (MARK, i), flush=True)
    exec(compile(stmt, "<tutorial>", "single"), ns)
    sys.stdout.flush()
'''


def script(all_steps):
    text = ["set -e"]
    for k, (kind, body, _) in enumerate(all_steps):
        if kind == "sh":
            text.append("echo '%s sh %d'" % (MARK, k))
            text.append("{ %s\n} 2>&1" % body)
        else:
            interpreter, statements = body
            code = "MARK = %r\nSTATEMENTS = %r\n%s" % (
                MARK, [s for s, _ in statements], PY_DRIVER)
            text.append("echo '%s sh %d'" % (MARK, k))
            text.append("%s - 2>&1 <<'TUTORIAL_PY'\n%s\nTUTORIAL_PY"
                        % (interpreter, code))
    text.append("echo '%s-cwd' \"$PWD\"" % MARK)
    return "\n".join(text) + "\n"


def main():
    repo = os.path.abspath(sys.argv[1])
    with open(os.path.join(repo, "docs", "tutorial.md")) as f:
        all_steps = steps(f.read())
    env = dict(os.environ, REPO=repo)
    p = subprocess.run(["bash", "-c", script(all_steps)], capture_output=True,
                       text=True, env=env, cwd="/tmp", timeout=600)
    # The output of each step (and of each Python statement).
    chunks, current = {}, None
    for line in p.stdout.splitlines():
        if line.startswith(MARK + "-cwd"):
            continue
        if line.startswith(MARK):
            _, kind, k = line.split()
            current = (kind, int(k))
            chunks.setdefault(current, [])
            continue
        if current is not None:
            chunks[current].append(line)
    # The tutorial's scratch directory (made by its first command) goes.
    for line in p.stdout.splitlines():
        if line.startswith(MARK + "-cwd "):
            scratch = line.split(" ", 1)[1]
            tmp = tempfile.gettempdir()
            if scratch.startswith(tmp + os.sep) and scratch != tmp:
                shutil.rmtree(scratch, ignore_errors=True)
    checked = 0
    for k, (kind, body, expected) in enumerate(all_steps):
        if ("sh", k) not in chunks:
            print("tutorial: step %d did not run: %s\n%s" % (
                k + 1, body if kind == "sh" else "python3", p.stderr[-2000:]))
            return 1
        if kind == "sh":
            missing = matches(expected, chunks[("sh", k)])
            if missing is not None:
                print("tutorial: '$ %s' did not print\n  %s\nit printed:\n  %s"
                      % (body, missing, "\n  ".join(chunks[("sh", k)][-30:])))
                return 1
            checked += 1
            continue
        for i, (stmt, want) in enumerate(body[1]):
            got = chunks.get(("py", i), [])
            missing = matches(want, got)
            if missing is not None:
                print("tutorial: '>>> %s' did not print\n  %s\nit printed:\n  %s"
                      % (stmt, missing, "\n  ".join(got[-30:])))
                return 1
            checked += 1
    if p.returncode != 0:
        print("tutorial: the commands failed (exit %d):\n%s%s" % (
            p.returncode, p.stdout[-3000:], p.stderr[-2000:]))
        return 1
    print("tutorial: %d commands and statements ran as written, their "
          "outputs as shown" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
