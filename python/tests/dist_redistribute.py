"""Run under dtensor-run -n N (test_distributed.py): every rank
redistributes tensors between placements with the runtime's collectives and
checks its own block against the layout algebra's slice of the whole
tensor, and full_tensor() against the whole. argv: the mesh shape, e.g.
2x3. Prints 'rank R: K redistributions ok'."""

import itertools
import sys

import numpy as np

import dtensor as dt

shape = tuple(int(s) for s in sys.argv[1].split("x"))
names = ("dp", "tp", "pp")[:len(shape)]
mesh = dt.DeviceMesh(shape, names)
assert dt.is_distributed()
rank = int(np.ravel_multi_index(mesh.get_coordinate(), shape))

# Every placement of a 2-D tensor on this mesh: Replicate, Shard(0),
# Shard(1) or Partial(sum) on each mesh dim.
choices = [dt.Replicate(), dt.Shard(0), dt.Shard(1), dt.Partial()]
all_placements = list(itertools.product(choices, repeat=len(shape)))
rng = np.random.default_rng(7)  # the same tensor on every rank
x = rng.integers(-50, 50, size=(7, 5)).astype(np.float32)

count = 0
for src in all_placements:
    d = dt.distribute_tensor(x, mesh, list(src))
    for dst in all_placements:
        e = d.redistribute(placements=list(dst))
        if not any(p.is_partial() for p in dst):
            want = x[tuple(slice(r[0][0], r[0][1])
                           for r in e.layout.index_ranges(rank))]
            if not np.array_equal(e.to_local(), want):
                sys.exit(f"rank {rank}: {src} -> {dst}: block\n"
                         f"{e.to_local()}\nexpected\n{want}")
        if not np.array_equal(e.full_tensor(), x):
            sys.exit(f"rank {rank}: {src} -> {dst}: full_tensor differs")
        count += 1

# from_local: each rank's own contribution of a Partial sum (rank + 1 times
# a ones block), reduced by the redistribution.
local = np.full((3, 4), rank + 1, np.int64)
p = dt.DTensor.from_local(local, mesh, [dt.Partial()] * len(shape))
total = sum(range(1, mesh.size() + 1))
if not np.array_equal(p.full_tensor(), np.full((3, 4), total)):
    sys.exit(f"rank {rank}: Partial from_local: {p.full_tensor()}")
s = dt.DTensor.from_local(np.full((2, 3), rank, np.float64), mesh,
                          [dt.Shard(0)] + [dt.Replicate()] * (len(shape) - 1))
if s.shape != (2 * shape[0], 3):
    sys.exit(f"rank {rank}: from_local inferred {s.shape}")
print(f"rank {rank}: {count} redistributions ok")
