#!/bin/sh
# Bundles run their shared objects in this process (dtensor-check, maybe as
# root): a bundle directory or file another user owns or may write is
# refused (as ssh's StrictModes), on writing and on reading; a manifest that
# does not match its shared objects, or a damaged object, is a located
# error, never a crash (these ran into SIGSEGV and SIGBUS).
# usage: bundles.sh BIN_DIR SOURCE_DIR WORK_DIR
set -e
bin=$1; src=$2; work=$3
. "$(dirname "$0")/second-user.sh"
prog="$src/examples/megatron.mlir"
rm -rf "$work"; mkdir -p "$work"; chmod 755 "$work"
"$bin/dtensor-compile" "$prog" --bundle -o "$work/good"
"$bin/dtensor-check" -n 4 "$work/good" >/dev/null

step() { echo "== $*"; }
fails() { # fails TEXT BUNDLE: dtensor-check exits 1 (no signal) saying TEXT
  set +e; timeout 60 "$bin/dtensor-check" "$2" >"$work/out.txt" 2>&1; rc=$?; set -e
  if [ "$rc" != 1 ] || ! grep -q "$1" "$work/out.txt"; then
    echo "want exit 1 with '$1', got $rc:"; cat "$work/out.txt"; exit 1
  fi
}
edited() { # edited NAME COMMAND...: a copy of the good bundle, changed
  rm -rf "$work/$1"; cp -r "$work/good" "$work/$1"; name=$1; shift
  (cd "$work/$name" && sh -c "$*")
}

step "manifests that do not match the objects"
edited axis "sed -i 's/\[R, S0\]/[R, S3]/' manifest.txt"
fails "the layout '\[R, S3\]' of 'arg1' does not fit: mesh axis 3" "$work/axis"
edited fewer "sed -i '/argument arg2/d' manifest.txt"
fails "was not built with the manifest beside it" "$work/fewer"
edited more "echo 'result result1 f32 16x64 [R, R]' >> manifest.txt"
fails "was not built with the manifest beside it" "$work/more"
edited huge "sed -i 's/^argument arg0 f32 16x64/argument arg0 f32 99999999999x99999999999/' manifest.txt"
fails "does not fit in 64 bits" "$work/huge"
edited short "truncate -s 8000 spmd.so"
fails "spmd.so is not a whole shared object" "$work/short"
edited fifo "rm manifest.txt && mkfifo manifest.txt"
fails "manifest.txt: is a FIFO" "$work/fifo"
edited link "mv spmd.so x.so && ln -s x.so spmd.so"
fails "spmd.so: cannot read: it is a symbolic link" "$work/link"
edited open "chmod 666 spmd.so"
fails "spmd.so belongs to user .* with mode 0666: refusing to use it" "$work/open"

need_other_user
step "a directory another user made or may write"
mkdir -p "$work/hers"; chown "$other_uid" "$work/hers"; chmod 777 "$work/hers"
if "$bin/dtensor-compile" "$prog" --bundle -o "$work/hers" 2>"$work/err.txt"; then exit 1; fi
grep -q "hers belongs to user $other_uid with mode 0777: refusing to use it" "$work/err.txt"
test -z "$(ls "$work/hers")"
rm -rf "$work/theirs"; cp -r "$work/good" "$work/theirs"
chown -R "$other_uid" "$work/theirs"; chmod 755 "$work/theirs"
fails "theirs belongs to user $other_uid with mode 0755: refusing to use it" "$work/theirs"
echo "bundles: all passed"
