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
# An OpenBLAS too old to know this CPU runs its pre-AVX2 kernels, 4x slower
# (exporter/pt2rt/capture/blas.py): give it the core it should have picked.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  core=$(PYTHONPATH="$root/exporter" /usr/bin/python3 -m pt2rt.capture.blas 2>/dev/null || true)
  if [ -n "$core" ]; then
    export OPENBLAS_CORETYPE=$core
    echo "lane: OpenBLAS does not recognise this CPU: OPENBLAS_CORETYPE=$core"
  fi
fi
cmake -S "$root" -B "$build" -G Ninja >/dev/null
cmake --build "$build" -j"$jobs"
cd "$build"
ctest --output-on-failure -j"$jobs" "$@"
