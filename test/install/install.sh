#!/usr/bin/env bash
# cmake --install of the build into a temporary prefix, then, against that
# prefix only: an out-of-tree CMake project (find_package(DTensorMLIR))
# that embeds the compiler and links a compiled program with the runtime,
# the same C program built with pkg-config, and the installed tools.
# usage: install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > /dev/null
# Nothing may come from the build tree: move it out of sight of RPATHs.
cmake -S "$src/test/install" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DDTENSOR_SRC="$src" > /dev/null
cmake --build "$work/consumer" > /dev/null
"$work/consumer/embed" "$src/examples/mlp.mlir"
"$prefix/bin/dtensor-run" -n 4 "$work/consumer/megatron"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc "$src/test/install/embed.c" $(pkg-config --cflags --libs dtensor) -o "$work/embed-pc"
"$work/embed-pc" "$src/examples/mlp.mlir" | sed 's/^embed:/embed (pkg-config):/'
# The libraries the installed programs load come from the prefix.
for f in "$prefix/bin/dtensor-opt" "$work/consumer/megatron" "$work/embed-pc"; do
  if ldd "$f" | grep -E 'libdtensor(_rt)?\.so' | grep -qv "$prefix"; then
    echo "install: $(basename "$f") loads a library from outside the prefix" >&2
    ldd "$f" | grep libdtensor >&2
    exit 1
  fi
done
"$prefix/bin/dtensor-opt" --version | head -1
# The Python package with pip (offline: no build isolation) into a virtual
# environment of Debian's python3 (its wheel and numpy); it finds the
# installed libraries by the loader's path.
"${PYTHON:-/usr/bin/python3}" -m venv --system-site-packages "$work/venv"
cp -r "$src/python" "$work/python-src" # pip builds in the directory it is given
rm -rf "$work/python-src/build" "$work/python-src"/*.egg-info
"$work/venv/bin/pip" install --quiet --no-build-isolation --no-deps "$work/python-src"
(cd "$work" && env -u DTENSOR_LIB_DIR -u DTENSOR_BIN_DIR \
  LD_LIBRARY_PATH="$prefix/lib" PATH="$prefix/bin:$PATH" "$work/venv/bin/python" - <<'PY'
import dtensor, numpy as np
assert "site-packages" in dtensor.__file__, dtensor.__file__
with dtensor.Mesh("2x2") as m:
    lay = dtensor.Layout(m, "[S0, S1]", (8, 8))
    print("pip: dtensor", dtensor.__file__.split("site-packages")[1], "layout", lay)
prog = """
"dtensor.mesh"() {sym_name = "m", shape = array<i64: 2>, axis_names = ["x"]} : () -> ()
func.func @f(%a: tensor<8x4xf32> {dtensor.layout = #dtensor.layout<@m, "[S0, R]">}) -> tensor<8x4xf32> {
  %c = arith.addf %a, %a : tensor<8x4xf32>
  return %c : tensor<8x4xf32>
}
"""
x = np.arange(32, dtype=np.float32).reshape(8, 4)
(y,) = dtensor.run(prog, 2, [x])
assert np.array_equal(y, 2 * x)
print("pip: dtensor.run on 2 ranks equals 2x")
PY
)
echo "install: every check passed"
