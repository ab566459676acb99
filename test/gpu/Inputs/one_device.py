#!/usr/bin/env python3
"""Prints an MLIR file with every mesh shrunk to one device per axis (the
per-device program then has no collectives: each is over axes of size 1)."""
import re
import sys


def one(m):
    n = len([x for x in m.group(1).split(",") if x.strip()])
    return "shape = array<i64: %s>" % ", ".join(["1"] * n)


sys.stdout.write(re.sub(r"shape = array<i64: ([0-9, ]+)>", one, open(sys.argv[1]).read()))
