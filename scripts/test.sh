#!/usr/bin/env bash
# The README's test command: builds and tests pt2rt on both lanes, then checks that archives
# cross between them.
#
#   scripts/test.sh [--lane 1.13|2|all] [build-dir]
#
#   lane 1.13  this machine (Debian bookworm: torch/LibTorch 1.13, g++ 12, Catch2 v2):
#              installs missing packages (scripts/install-deps.sh), builds into <build-dir>
#              (default build/), runs ctest (Catch2 suites, pytest, CLI end to end), then a
#              short fuzzing campaign (tests/fuzz/run.sh --short: clang, ASan + UBSan, 40 s per
#              target, into <build-dir>-fuzz) that fails on any finding
#   lane 2     the torch-2 root (Debian sid: torch/LibTorch 2.14, g++ 16, Catch2 v3), made by
#              scripts/torch2-root.sh on first use; builds into <build-dir>-torch2, runs ctest
#   all        (default) both lanes, then the cross-version stage (tests/cross/run.sh): the
#              archives each lane exported run on the other lane's runtime
#
# With --lane all the torch-2 root is created in the background while lane 1.13 builds.
# Stage times are printed at the end. Exit status: non-zero when any stage fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lane=all
build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --lane) lane=${2:?--lane needs 1.13, 2 or all}; shift 2 ;;
    --lane=*) lane=${1#--lane=}; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) build=$1; shift ;;
  esac
done
case "$lane" in 1.13|2|all) ;; *) echo "scripts/test.sh: --lane must be 1.13, 2 or all" >&2; exit 2 ;; esac
case "$build" in "") build=$root/build ;; /*) ;; *) build=$PWD/$build ;; esac
export CCACHE_BASEDIR=$root   # relative paths in ccache keys: clones share cached objects

times=()
stage() {  # stage NAME CMD...: runs CMD, records its wall time
  local name=$1 t0=$SECONDS; shift
  echo "=== $name"
  if "$@"; then times+=("$(printf '%-28s %5ds  ok' "$name" $((SECONDS - t0)))")
  else local rc=$?; times+=("$(printf '%-28s %5ds  FAILED' "$name" $((SECONDS - t0)))"); summary; exit $rc; fi
}
summary() { echo "=== stage times"; printf '%s\n' "${times[@]}"; }

root_pid=""
if [ "$lane" = all ]; then
  mkdir -p "$build"
  "$root/scripts/torch2-root.sh" setup > "$build/torch2-root-setup.log" 2>&1 &
  root_pid=$!
fi

if [ "$lane" != 2 ]; then
  stage "lane 1.13: packages" "$root/scripts/install-deps.sh"
  stage "lane 1.13: build+test" "$root/scripts/test-lane.sh" "$build"
  stage "lane 1.13: fuzz (short)" "$root/tests/fuzz/run.sh" --short --build "$build-fuzz" \
    --archives "$build/fixtures/runtime"
fi
if [ "$lane" != 1.13 ]; then
  if [ -n "$root_pid" ]; then
    wait_root() { local rc=0; wait "$root_pid" || rc=$?; cat "$build/torch2-root-setup.log"; return $rc; }
    stage "lane 2: root (background)" wait_root
  else
    stage "lane 2: root" "$root/scripts/torch2-root.sh" setup
  fi
  stage "lane 2: build+test" "$root/scripts/torch2-root.sh" run "$root/scripts/test-lane.sh" "$build-torch2"
fi
if [ "$lane" = all ] && [ -x "$root/tests/cross/run.sh" ]; then
  stage "cross-version" "$root/tests/cross/run.sh" "$build" "$build-torch2"
fi
summary
