#!/usr/bin/env bash
# One lane of the test command (scripts/test.sh): configure, build and ctest with whatever
# torch/LibTorch this environment has (the machine's own for lane 1.13; inside the torch-2
# root, via scripts/torch2-root.sh run, for lane 2).
#
#   scripts/test-lane.sh <build-dir> [ctest args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: scripts/test-lane.sh <build-dir> [ctest args...]}
shift
jobs=${PT2RT_JOBS:-$(nproc)}
echo "lane: $(/usr/bin/python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0])' 2>/dev/null), $(c++ --version | head -n 1)"
. "$root/scripts/openblas-env.sh"  # OPENBLAS_CORETYPE where OpenBLAS does not know the CPU
cmake -S "$root" -B "$build" -G Ninja >/dev/null
cmake --build "$build" -j"$jobs"
cd "$build"
ctest --output-on-failure -j"$jobs" "$@"
