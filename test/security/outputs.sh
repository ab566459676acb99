#!/bin/sh
# Every output a tool writes (-o, --calibrate, export, view-graph) goes
# through dtOutputOpen: a link another user planted at the path is refused,
# never followed (root writing through it would overwrite any file); a
# link of this user is followed; a failed run leaves the file as it was;
# devices are written directly.
# usage: outputs.sh BIN_DIR SOURCE_DIR
set -e
bin=$1; src=$2
. "$(dirname "$0")/second-user.sh"
need_other_user
# Under /tmp: the other user must reach the shared directory (a build tree
# may sit in a private one).
work=$(mktemp -d /tmp/dtensor-outputs-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/shared"; chmod 1777 "$work/shared"
chmod 755 "$work"
prog="$src/examples/megatron.mlir"
echo "precious" > "$work/victim"

step() { echo "== $*"; }
refused() { # refused OUT-PATH COMMAND...: the command must fail naming the link
  out=$1; shift
  if "$@" 2>"$work/err.txt"; then echo "not refused: $*"; exit 1; fi
  grep -q "'$out' is a symbolic link of user $other_uid: refusing to write through it" "$work/err.txt" ||
    { cat "$work/err.txt"; exit 1; }
  test "$(cat "$work/victim")" = precious
}

step "another user's link at -o, --calibrate, an export, a graph"
for name in out.mlir out.o cal.txt x.npy g.dot; do
  as_other ln -s "$work/victim" "$work/shared/$name"
done
refused "$work/shared/out.mlir" "$bin/dtensor-opt" "$prog" --dtensor-spmd -o "$work/shared/out.mlir"
refused "$work/shared/out.o" "$bin/dtensor-compile" "$prog" -o "$work/shared/out.o"
refused "$work/shared/cal.txt" "$bin/dtensor-run" -n 2 --calibrate "$work/shared/cal.txt"
/usr/bin/python3 -c "import numpy; numpy.save('$work/a.npy', numpy.ones(4, numpy.float32))"
"$bin/dtensor-ckpt" import "$work/ck" a "$work/a.npy" --mesh 1 --spec '[R]'
refused "$work/shared/x.npy" "$bin/dtensor-ckpt" export "$work/ck" a "$work/shared/x.npy"
refused "$work/shared/g.dot" "$bin/dtensor-opt" "$prog" "--dtensor-view-graph=output=$work/shared/g.dot" -o /dev/null

step "another user's link at a checkpoint's path, to one of ours"
as_other ln -s "$work/ck" "$work/shared/ckpt"
if "$bin/dtensor-ckpt" import "$work/shared/ckpt" b "$work/a.npy" --mesh 1 --spec '[R]' 2>"$work/err.txt"; then exit 1; fi
grep -q "ckpt' is a symbolic link of user $other_uid: refusing to write through it" "$work/err.txt"
"$bin/dtensor-ckpt" info "$work/ck" | grep -q '^a ' && ! "$bin/dtensor-ckpt" info "$work/ck" | grep -q '^b '

step "this user's link is followed; a failed run leaves the file as it was"
echo "mine" > "$work/target.mlir"; ln -s target.mlir "$work/mine.mlir"
"$bin/dtensor-opt" "$prog" --dtensor-spmd -o "$work/mine.mlir"
test -L "$work/mine.mlir" && grep -q "dtensor.all_reduce" "$work/target.mlir"
cp "$work/target.mlir" "$work/before.mlir"
if "$bin/dtensor-opt" "$prog" --dtensor-nope -o "$work/mine.mlir" 2>/dev/null; then exit 1; fi
cmp "$work/target.mlir" "$work/before.mlir"
ls "$work" | grep -q 'tmp-' && { echo "temporary files left:"; ls "$work"; exit 1; }

step "devices are written directly"
"$bin/dtensor-opt" "$prog" --dtensor-spmd -o /dev/null
"$bin/dtensor-compile" "$prog" -o "$work/ok.o" && test -s "$work/ok.o"
echo "outputs: all passed"
