#!/usr/bin/env bash
# Installs the Debian packages pt2rt needs. Idempotent: quiet and fast when all are there.
# Usage: scripts/install-deps.sh   (as root, or with sudo available)
set -euo pipefail
PKGS=(cmake g++ ccache ninja-build libtorch-dev python3-torch python3-torchvision
      libflatbuffers-dev flatbuffers-compiler python3-flatbuffers libzip-dev zipcmp zipmerge
      ziptool catch2 libcxxopts-dev nlohmann-json3-dev python3-networkx python3-pytest python3-sklearn
      graphviz
      libpython3-dev clang-14 libclang-rt-14-dev  # clang + libFuzzer: tests/fuzz
      libgloo-dev  # <gloo/...> headers that c10d's ProcessGroupGloo.hpp includes (pt2rt_distributed)
      libopenblas0-openmp)  # Debian's torch links libblas.so.3: without this, the netlib reference
                            # BLAS (libblas3), ~10x slower matmuls in export, tests and runtime
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# scripts/torch2-root.sh may be installing debootstrap at the same moment (scripts/test.sh starts
# it in the background): wait for dpkg's lock instead of failing on it.
lock=(-o DPkg::Lock::Timeout=900)
$SUDO apt-get "${lock[@]}" update -qq
$SUDO apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
