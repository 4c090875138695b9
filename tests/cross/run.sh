#!/usr/bin/env bash
# Cross-version stage of the test command (scripts/test.sh): archives exported by one lane's
# torch run on the other lane's C++ runtime.
#
#   tests/cross/run.sh <lane-1.13-build-dir> <lane-2-build-dir>
#
# Both build dirs must have been built and tested (ctest exported their runtime fixtures into
# <build>/fixtures/runtime). Steps, each timed:
#   1. torch 2.x archives on LibTorch 1.13: the lane-1.13 runtime tests [parity] (outputs,
#      gradients, buffers vs eager torch 1.13: this lane's references), [training] (10 SGD
#      steps vs eager) and [cross] (every model loads, or fails with exactly the
#      OpResolutionError tests/cpp/runtime/cross_expectations.cpp expects; the two lanes'
#      archives of a model agree) on lane 2's archives;
#   2. torch 1.13 archives on LibTorch 2.x: the same, the other way round (inside the torch-2
#      root);
#   3. `python -m pt2rt save` of the digits CNN and of a model with dropout on each lane,
#      `export-cli verify` of the archives on both runtimes (the dropout archive's random
#      draws are replayed on its own lane and checked by dtype/shape/finiteness on the other).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
[ $# -eq 2 ] || { sed -n '2,18p' "$0" >&2; exit 2; }
lane1=$(abs "$1") lane2=$(abs "$2")
for b in "$lane1" "$lane2"; do
  for f in tests/pt2rt_runtime_tests cli/export-cli fixtures/runtime/models.txt; do
    [ -e "$b/$f" ] || { echo "tests/cross/run.sh: $b/$f is missing (build and test that lane first)" >&2; exit 2; }
  done
done
. "$root/scripts/openblas-env.sh"  # the same BLAS kernels as lane 1.13's ctest references
in_root() { "$root/scripts/torch2-root.sh" run "$@"; }
step() {  # step NAME CMD...
  local name=$1 t0=$SECONDS; shift
  echo "=== cross: $name"
  "$@"
  echo "=== cross: $name: ok ($((SECONDS - t0)) s)"
}
tags="[parity],[training],[cross]"

step "torch 2.x archives on LibTorch 1.13" \
  env PT2RT_RUNTIME_FIXTURES="$lane2/fixtures/runtime" PT2RT_REFERENCE_FIXTURES="$lane1/fixtures/runtime" \
  "$lane1/tests/pt2rt_runtime_tests" "$tags"
step "torch 1.13 archives on LibTorch 2.x" \
  in_root env PT2RT_RUNTIME_FIXTURES="$lane1/fixtures/runtime" PT2RT_REFERENCE_FIXTURES="$lane2/fixtures/runtime" \
  "$lane2/tests/pt2rt_runtime_tests" "$tags"

work="$lane1/cross"
digits_on_both_lanes() {
  mkdir -p "$work"
  local target="$root/examples/digits/model.py:build"
  local dropout="$root/tests/python/random_models.py:build_dropout"
  env PYTHONPATH="$root/exporter" /usr/bin/python3 -m pt2rt save "$target" "$work/digits_torch1.pt2" >/dev/null
  in_root env PYTHONPATH="$root/exporter" /usr/bin/python3 -m pt2rt save "$target" "$work/digits_torch2.pt2" >/dev/null
  env PYTHONPATH="$root/exporter" /usr/bin/python3 -m pt2rt save "$dropout" "$work/dropout_torch1.pt2" >/dev/null
  in_root env PYTHONPATH="$root/exporter" /usr/bin/python3 -m pt2rt save "$dropout" "$work/dropout_torch2.pt2" >/dev/null
  for archive in digits_torch1 digits_torch2 dropout_torch1 dropout_torch2; do
    echo "--- export-cli verify $archive.pt2 on LibTorch 1.13"
    "$lane1/cli/export-cli" verify "$work/$archive.pt2"
    echo "--- export-cli verify $archive.pt2 on LibTorch 2.x"
    in_root "$lane2/cli/export-cli" verify "$work/$archive.pt2"
  done
}
step "python -m pt2rt save on both lanes, export-cli verify on both runtimes" digits_on_both_lanes
