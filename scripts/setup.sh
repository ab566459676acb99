#!/usr/bin/env bash
# Installs what the build and the tests need on Debian 12 (only what is
# missing), then configures and builds into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools cmake ninja-build
      gcc python3-pytest python3-numpy libopenmpi-dev openmpi-bin
      libjansson-dev libisal-dev libopenblas-dev clang-format-22 pkg-config
      python3-pip python3-setuptools python3-venv python3-torch
      libomp-22-dev libglpk-dev coinor-libcbc-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
cmake -S . -B build -G Ninja
ninja -C build
