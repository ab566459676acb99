#!/bin/sh
# Checkpoint tests across world sizes and layouts (see CheckpointTest.c).
# usage: checkpoint.sh DTENSOR-RUN CHECKPOINT-TEST WORKDIR DTENSOR-CKPT
set -e
run=$1; prog=$2; work=$3; tool=$4
rm -rf "$work"; mkdir -p "$work"
ck=$work/ck
step() { echo "== $*"; }

# Save on N ranks, load on M ranks, for meshes 1, 2, 4 and 2x2 (odd seeds
# take 2x2 on 4 ranks).
for seed in 1 2 3 4 5 6; do
  for n in 4 2 1; do
    step "seed $seed: save on $n"
    "$run" -n $n "$prog" save "$ck" $seed
    for m in 1 2 4; do
      step "seed $seed: saved on $n, load on $m"
      "$run" -n $m "$prog" load "$ck" $seed
    done
  done
done

# A second save replaces the first atomically; a load with the old seed's
# tensors then fails on a type or shape, naming the metadata file.
"$run" -n 2 "$prog" save "$ck" 7
"$run" -n 2 "$prog" load "$ck" 7
step "loading tensors of another checkpoint"
"$run" -n 2 "$prog" load-fails "$ck" 8 "dtensor-checkpoint.json: 't"

# A rank killed during a save: the job fails, the previous checkpoint is
# still there and loads.
step "rank killed during save"
if "$run" -n 4 "$prog" save-killed "$ck" 9 2>"$work/killed.txt"; then
  echo "save-killed succeeded"; exit 1
fi
grep -q "rank 1 was killed by signal 9" "$work/killed.txt"
ls "$work" | grep -q 'ck.tmp-' || { echo "no staging directory: not killed mid-save?"; exit 1; }
"$run" -n 4 "$prog" load "$ck" 7
# The next save clears what the crashed one left.
"$run" -n 4 "$prog" save "$ck" 7

# Truncated and corrupted shards (the largest tensor's first shard, which a
# 1-rank load reads whole): errors naming the file; nothing overwritten.
shard=$(ls "$ck" | grep '^t0\.w\.' | head -n 1)
cp "$ck/$shard" "$work/shard.bak"
step "truncated $shard"
truncate -s -1 "$ck/$shard"
"$run" -n 1 "$prog" load-fails "$ck" 7 "$shard: truncated"
cp "$work/shard.bak" "$ck/$shard"
step "corrupted $shard"
printf 'X' | dd of="$ck/$shard" bs=1 seek=3 conv=notrunc 2>/dev/null
"$run" -n 1 "$prog" load-fails "$ck" 7 "$shard: corrupted (checksum"
cp "$work/shard.bak" "$ck/$shard"
"$run" -n 1 "$prog" load "$ck" 7

# dtensor-ckpt: info, verify, export (values checked with Debian's numpy), convert
# to another mesh and layouts (then loaded on 4 ranks), import.
step "dtensor-ckpt"
"$tool" info "$ck" | grep -q '^t0.w '
"$tool" info "$ck" --layouts | grep -q 'device  coords'
"$tool" verify "$ck" | grep -q 'every shard is complete'
"$tool" export "$ck" t2.w "$work/t2.npy"
/usr/bin/python3 - "$work/t2.npy" <<'PY'
import sys, numpy as np
a = np.load(sys.argv[1])
lin = np.arange(a.size).reshape(a.shape)
want = (lin * 31 + 2 * 7) % 97 - 48
assert (a.astype(np.float64) == want).all(), "exported values differ"
PY
"$tool" convert "$ck" "$work/conv" --mesh 2 --spec 't0.w=[S0]'
"$tool" info "$work/conv" | grep -q '^t0.w .*\[S0\]'
"$run" -n 4 "$prog" load "$work/conv" 7
"$tool" convert "$work/conv" "$work/conv" --mesh 2x2
"$run" -n 2 "$prog" load "$work/conv" 7
"$tool" import "$work/imp" t2.w "$work/t2.npy" --mesh 4 --spec '[S0, R]'
"$tool" export "$work/imp" t2.w "$work/t2-again.npy"
cmp "$work/t2.npy" "$work/t2-again.npy"
# bf16 goes out as float32 (exactly) and back in with --dtype bf16.
"$tool" export "$ck" t0.w "$work/t0.npy"
"$tool" import "$work/imp" t0.w "$work/t0.npy" --mesh 4 --spec '[S0]' --dtype bf16
"$tool" export "$work/imp" t0.w "$work/t0-again.npy"
cmp "$work/t0.npy" "$work/t0-again.npy"
"$tool" info "$work/imp" | grep -q '^t0.w  *bf16'
# Replacing a tensor keeps the others.
"$tool" import "$work/conv" t2.w "$work/t2.npy" --mesh 2 --spec '[R, S0]'
"$tool" info "$work/conv" | grep -q '^t2.w .*a0=2 .*\[R, S0\]'
"$run" -n 4 "$prog" load "$work/conv" 7
if "$tool" import "$work/imp" bad "$work/t2.npy" --mesh 4 --spec '[S0]' 2>"$work/err.txt"; then exit 1; fi
grep -q "'bad': spec '\[S0\]' on mesh '4'" "$work/err.txt"
if "$tool" export "$ck" nothere "$work/x.npy" 2>"$work/err.txt"; then exit 1; fi
grep -q "no tensor 'nothere'" "$work/err.txt"

# Edited metadata: its checksum (meta_crc32) catches any edit; without
# one (older checkpoints), shards that are not its layout's (readers go by
# the shards' ranges: holes would load as zeros) are refused too.
step "edited metadata"
rm -rf "$work/edit"; cp -r "$work/conv" "$work/edit"
sed 's/"dtype": "f32"/"dtype": "i32"/' "$work/conv/dtensor-checkpoint.json" \
  > "$work/edit/dtensor-checkpoint.json"
if "$tool" verify "$work/edit" 2>"$work/err.txt"; then exit 1; fi
grep -q "does not match its checksum (meta_crc32): it is damaged or was edited" "$work/err.txt"
step "metadata that does not match the layout"
sed -e 's/"mesh": "a0=2"/"mesh": "a0=4"/' -e '/"meta_crc32"/d' \
  "$work/conv/dtensor-checkpoint.json" > "$work/edit/dtensor-checkpoint.json"
sed -i -e ':a;N;$!ba;s/,\n *}/\n }/g' "$work/edit/dtensor-checkpoint.json"
for cmd in info verify; do
  if "$tool" $cmd "$work/edit" 2>"$work/err.txt"; then exit 1; fi
  grep -q "lists 2 shards where its layout (\[R, S0\] on mesh a0=4) has 3: the metadata is damaged or was edited" "$work/err.txt"
done
"$run" -n 1 "$prog" load-fails "$work/edit" 7 "the metadata is damaged or was edited"
# Ranges whose element count overflows 64 bits (UBSan caught the product):
# refused by name.
step "metadata with ranges that overflow"
/usr/bin/python3 - "$work/conv/dtensor-checkpoint.json" "$work/edit/dtensor-checkpoint.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
t = m["tensors"][0]
t.pop("meta_crc32", None)
t["shape"] = [2 ** 58] + t["shape"][1:]
t["shards"][0]["ranges"][0] = [[0, 2 ** 58]] * 8
json.dump(m, open(sys.argv[2], "w"))
PY
if "$tool" info "$work/edit" 2>"$work/err.txt"; then exit 1; fi
grep -q "the ranges of dim 0 add up to more than its 288230376151711744 elements" "$work/err.txt"

# A tensor name that climbs out of the directory ('../../../EVIL' passed
# verify, and convert wrote <name>.<device>.bin outside its output): refused
# on read, by every command, before anything is written.
step "a tensor name with a path in it"
/usr/bin/python3 - "$work/conv/dtensor-checkpoint.json" "$work/edit/dtensor-checkpoint.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
t = m["tensors"][0]
t.pop("meta_crc32", None)
t["name"] = "../../../EVIL"
json.dump(m, open(sys.argv[2], "w"))
PY
for cmd in info verify; do
  if "$tool" $cmd "$work/edit" 2>"$work/err.txt"; then exit 1; fi
  grep -q "tensor name '../../../EVIL' is not valid" "$work/err.txt"
done
rm -rf "$work/evil-out"; mkdir -p "$work/evil-out/a/b"
if "$tool" convert "$work/edit" "$work/evil-out/a/b/c" --mesh 2 2>"$work/err.txt"; then exit 1; fi
grep -q "tensor name '../../../EVIL' is not valid" "$work/err.txt"
test -z "$(find "$work" -name 'EVIL*')"

# Two jobs saving into one path: one wins, the other fails saying so, and
# the checkpoint there is never lost. First against a save held by hand
# (its lock taken, its staging directory live), which must stay untouched;
# once it is gone, its staging directory is stale and the next save clears
# it. Then saves that race.
step "a save while another one is under way"
mkdir "$ck.tmp-otherjob"
flock "$ck.lock" sleep 4 &
holder=$!
sleep 0.5
"$run" -n 2 "$prog" save-fails "$ck" 8 "another save into $ck is under way"
test -d "$ck.tmp-otherjob" || { echo "a live staging directory was removed"; exit 1; }
"$run" -n 2 "$prog" load "$ck" 7
wait $holder
step "racing saves"
for i in 1 2 3; do
  ra=0; rb=0
  "$run" -n 2 "$prog" save "$ck" 10 >"$work/a.txt" 2>&1 & a=$!
  "$run" -n 2 "$prog" save "$ck" 11 >"$work/b.txt" 2>&1 & b=$!
  wait $a || ra=$?
  wait $b || rb=$?
  test $ra -eq 0 || test $rb -eq 0 || { cat "$work/a.txt" "$work/b.txt"; echo "no save won"; exit 1; }
  test $ra -eq 0 || grep -q "is under way" "$work/a.txt" || { cat "$work/a.txt"; exit 1; }
  test $rb -eq 0 || grep -q "is under way" "$work/b.txt" || { cat "$work/b.txt"; exit 1; }
  "$run" -n 2 "$prog" load "$ck" 10 >/dev/null 2>&1 || "$run" -n 2 "$prog" load "$ck" 11
done
test ! -e "$ck.tmp-otherjob" || { echo "a stale staging directory was kept"; exit 1; }
# A lock file others may open (and so hold) is refused.
test "$(stat -c %a "$ck.lock")" = 600 || { echo "lock file mode $(stat -c %a "$ck.lock")"; exit 1; }
chmod 644 "$ck.lock"
"$run" -n 2 "$prog" save-fails "$ck" 7 "with mode 0644, not to this user"
chmod 600 "$ck.lock"
"$run" -n 2 "$prog" save "$ck" 7

# convert checks every shard before writing anything: a flipped bit does
# not pass into a new checkpoint under a fresh checksum.
step "convert of a corrupted checkpoint"
rm -rf "$work/damaged" "$work/conv2"; cp -r "$ck" "$work/damaged"
shard=$(ls "$work/damaged" | grep '^t2\.w\.' | head -n 1)
printf 'X' | dd of="$work/damaged/$shard" bs=1 seek=1 conv=notrunc 2>/dev/null
if "$tool" convert "$work/damaged" "$work/conv2" --mesh 4 --spec 't2.w=[R, S0]' 2>"$work/err.txt"; then exit 1; fi
grep -q "$shard: corrupted (checksum .*(nothing converted)" "$work/err.txt"
test ! -e "$work/conv2" || { echo "convert wrote a checkpoint"; exit 1; }
# A shard or metadata file that is a FIFO is refused, never waited on.
step "FIFOs"
rm "$work/damaged/$shard"; mkfifo "$work/damaged/$shard"
if timeout 20 "$tool" verify "$work/damaged" 2>"$work/err.txt"; then exit 1; fi
grep -q "$shard: is a FIFO: only a regular file is read" "$work/err.txt"
cp "$ck/$shard" "$work/damaged/$shard.x"; rm "$work/damaged/$shard"
mv "$work/damaged/$shard.x" "$work/damaged/$shard"
rm "$work/damaged/dtensor-checkpoint.json"; mkfifo "$work/damaged/dtensor-checkpoint.json"
timeout 20 "$run" -n 1 "$prog" load-fails "$work/damaged" 7 "dtensor-checkpoint.json: is a FIFO"

# Links: a write never follows a link it did not make, and never writes
# or removes outside its target.
step "saving into a link (latest -> step-1)"
rm -rf "$work/step-1" "$work/latest" "$work/victim"
cp -r "$ck" "$work/step-1"; ln -s step-1 "$work/latest"
"$run" -n 2 "$prog" save "$work/latest" 8
test -L "$work/latest" && test -f "$work/step-1/dtensor-checkpoint.json"
"$run" -n 4 "$prog" load "$work/step-1" 8
"$tool" import "$work/latest" t2.w "$work/t2.npy" --mesh 4 --spec '[S0, R]'
test -L "$work/latest" && "$tool" verify "$work/step-1" >/dev/null
"$tool" info "$work/step-1" | grep -q '^t2.w '
step "links planted at staging names and at the target"
mkdir -p "$work/victim"; echo keep > "$work/victim/a.bin"; echo keep > "$work/victim/b.txt"
ln -s victim "$work/step-1.tmp-planted"
ln -s victim "$work/step-1.tmp-offline-1"
"$run" -n 2 "$prog" save "$work/step-1" 9
"$tool" import "$work/step-1" t2.w "$work/t2.npy" --mesh 4 --spec '[S0, R]'
"$tool" convert "$work/step-1" "$work/step-1" --mesh 2
test -f "$work/victim/a.bin" && test -f "$work/victim/b.txt"
test -L "$work/step-1.tmp-planted"
rm "$work/step-1.tmp-planted" "$work/step-1.tmp-offline-1"
step "staging left by a killed convert is removed by the next writer"
mkdir "$work/step-1.tmp-killed1"; head -c 1048576 /dev/zero > "$work/step-1.tmp-killed1/t0.w.0.bin"
"$tool" convert "$work/step-1" "$work/step-1" --mesh 2
test ! -e "$work/step-1.tmp-killed1"
ln -s victim "$work/notckpt"
"$run" -n 2 "$prog" save-fails "$work/notckpt" 9 "exists and is not a checkpoint"
if "$tool" import "$work/notckpt" t2.w "$work/t2.npy" --mesh 4 --spec '[S0, R]' 2>"$work/err.txt"; then exit 1; fi
grep -q "exists and is not a checkpoint" "$work/err.txt"
test -f "$work/victim/a.bin" && test -f "$work/victim/b.txt" && test -L "$work/notckpt"
rm "$work/notckpt"
ls "$work" | grep -q 'step-1.tmp-' && { echo "staging left:"; ls "$work"; exit 1; }

# Not a checkpoint, a bad metadata file, a directory that is not ours.
step "errors"
"$run" -n 1 "$prog" load-fails "$work/none" 7 "is '$work/none' a checkpoint?"
mkdir -p "$work/bad"; echo '{"format": "dtensor-checkpoint", "version": 9, "tensors": []}' > "$work/bad/dtensor-checkpoint.json"
"$run" -n 1 "$prog" load-fails "$work/bad" 7 "format version 9; this runtime reads 1 to 1"
echo '{"format": ' > "$work/bad/dtensor-checkpoint.json"
"$run" -n 1 "$prog" load-fails "$work/bad" 7 "dtensor-checkpoint.json:2:"
mkdir -p "$work/mine"; echo keep > "$work/mine/notes.txt"
"$run" -n 2 "$prog" save-fails "$work/mine" 7 "exists and is not a checkpoint"
test -f "$work/mine/notes.txt"
ls "$work" | grep -q 'tmp-' && { echo "staging directories left:"; ls "$work"; exit 1; }
echo "checkpoint tests: all passed"
