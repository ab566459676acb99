#!/usr/bin/env bash
# Builds gpu-pack/ (ignored by git): everything scripts/gpu-check.sh runs on
# a machine with a GPU but without MLIR (a lent GPU machine receives at most
# 64 MiB): dtensor-check and the runtime's GPU tests, libdtensor_rt with
# the Debian libraries it links that a CUDA machine may lack, and GPU
# bundles (dtensor-compile --bundle --target cuda) of the examples and of 60
# random programs on one device, and of bench/gpu's benchmark programs.
#
# usage: scripts/gpu-pack.sh            (after the build: build/bin/...)
#        CHIP=sm_90 BUILD=build PACK=DIR scripts/gpu-pack.sh
# Exits 77 where CUDA's ptxas is missing (nothing to pack).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
chip=${CHIP:-sm_90}
pack=${PACK:-$root/gpu-pack}
export PATH=/usr/local/cuda/bin:$PATH # ptxas makes the cubins

for tool in dtensor-check dtensor-compile runtime-cuda-test; do
  [ -x "$build/bin/$tool" ] || { echo "gpu-pack: $build/bin/$tool is missing: build first" >&2; exit 1; }
done
command -v ptxas >/dev/null || { echo "gpu-pack: no ptxas (CUDA at /usr/local/cuda)" >&2; exit 77; }

rm -rf "$pack"
mkdir -p "$pack"/bin "$pack"/lib "$pack"/bundles/examples "$pack"/bundles/bench "$pack"/bench
echo "gpu-pack: tools and libraries"
cp "$build/bin/dtensor-check" "$build/bin/runtime-cuda-test" "$pack/bin/"
[ -x "$build/bin/runtime-nccl-test" ] && cp "$build/bin/runtime-nccl-test" "$pack/bin/"
cp -L "$build/lib/libdtensor_rt.so" "$pack/lib/"
# What a library links, but glibc's own libraries and the driver's and
# NCCL's (a CUDA machine has those; NCCL alone is 200 MiB).
copy_linked() { # LIB
  ldd "$1" | awk '/=> \// {print $3}' | while read -r lib; do
    case $(basename "$lib") in
      libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | \
        libgcc_s.so.* | libstdc++.so.* | ld-linux* | libnccl.so.* | libcuda.so.*) ;;
      *) cp -L "$lib" "$pack/lib/" ;;
    esac
  done
}
copy_linked "$build/lib/libdtensor_rt.so"
# OpenBLAS, which the runtime loads by its SONAME at the first contraction
# (not linked), and what it links.
blas=$(sed -n 's/^DTENSOR_OPENBLAS_LIB:FILEPATH=//p' "$build/CMakeCache.txt")
blas_soname=$(objdump -p "$blas" | awk '$1 == "SONAME" {print $2}')
[ -n "$blas_soname" ] || { echo "gpu-pack: no SONAME in '$blas'" >&2; exit 1; }
cp -L "$blas" "$pack/lib/$blas_soname"
copy_linked "$blas"

compile() { # SRC OUT
  "$build/bin/dtensor-compile" "$1" --bundle --target cuda \
    --gpu-options "chip=$chip" -o "$2"
}

echo "gpu-pack: the examples on one device"
for e in mlp megatron attention layernorm; do
  python3 "$root/test/gpu/Inputs/one_device.py" "$root/examples/$e.mlir" > "$pack/$e.mlir"
  compile "$pack/$e.mlir" "$pack/bundles/examples/$e"
  rm "$pack/$e.mlir"
done

echo "gpu-pack: 60 random programs on one device"
python3 "$root/test/e2e/random/run.py" --gpu-bundles "$build/bin/dtensor-compile" \
  --out "$pack/bundles/random" --cases 60 --seed 1
rm -f "$pack"/bundles/random/*.mlir

echo "gpu-pack: the benchmark"
python3 "$root/bench/gpu/programs.py" "$pack/bench/src" > /dev/null
for src in "$pack"/bench/src/*.mlir; do
  compile "$src" "$pack/bundles/bench/$(basename "$src" .mlir)"
done
rm -rf "$pack/bench/src"
cp "$root/bench/gpu/torch_gpu.py" "$pack/bench/"

size=$(du -sm "$pack" | cut -f1)
echo "gpu-pack: $pack holds $size MiB"
if [ "$size" -ge 64 ]; then
  echo "gpu-pack: more than a lent machine receives (64 MiB)" >&2
  exit 1
fi
