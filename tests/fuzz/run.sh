#!/usr/bin/env bash
# tests/fuzz/run.sh — builds pt2rt's libFuzzer targets (clang-14, ASan + UBSan) and runs a
# campaign over seed corpora made at test time.
#
#   tests/fuzz/run.sh --short                 CI (scripts/test.sh): 40 s per target
#   tests/fuzz/run.sh --long                  the long campaign: 10 M executions of the program
#                                             target, 400 k of each archive target (about 1 h
#                                             on 2 cores)
#   tests/fuzz/run.sh --seconds S | --runs N  custom length per target
#   more options: --build DIR (default <repo>/build-fuzz), --work DIR (default <build>/campaign),
#                 --archives DIR (exported archives for seeds; default <repo>/build/fixtures/runtime,
#                 exported by ctest's runtime_fixtures), --jobs N (parallel targets, default 1)
#
# Targets: pt2rt_fuzz_program (program.fb -> decode + validate + the save path),
# pt2rt_fuzz_archive_load (archive -> Model::load), pt2rt_fuzz_archive_run (archive -> load ->
# run the bundled example, inference and a training step). Limits per input: -timeout=10 s,
# -rss_limit_mb=2048 (and malloc_limit), inputs up to 64 KiB (program) / 1.1 MB (archives).
# Findings (crash, sanitizer report, timeout, out-of-memory, an exception other than
# pt2rt::Error) are written to <work>/findings/ and make the script exit 1; corpora grow in
# <work>/corpus/<target> and are reused by the next run. The last lines are a summary table:
# executions, exec/s, coverage (edges) and features per target.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build-fuzz
archives=$root/build/fixtures/runtime
work=""
mode=short
seconds=40
runs=""
jobs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --short) mode=short; seconds=40; shift ;;
    --long) mode=long; shift ;;
    --seconds) mode=custom; seconds=$2; shift 2 ;;
    --runs) mode=custom; runs=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --archives) archives=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "tests/fuzz/run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
work=${work:-$build/campaign}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}

clangxx=$(command -v clang++-14 || command -v clang++ || true)
if [ -z "$clangxx" ]; then echo "tests/fuzz/run.sh: clang++-14 not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; fi
echo "=== building the fuzz targets in $build ($clangxx)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$clangxx" -DPT2RT_FUZZ=ON \
  -DPT2RT_BUILD_TESTS=OFF -DPT2RT_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
cmake --build "$build" -j"${PT2RT_JOBS:-$(nproc)}" --target pt2rt_fuzz

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=0:handle_abort=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$work/findings"
rm -rf "$work/seeds"
seed_archives=()
if [ -d "$archives" ]; then
  # The small exported models (the large ones exceed the 1.1 MB input limit).
  for f in "$archives"/*.pt2; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 1100000 ] && seed_archives+=("$f")
  done
fi
[ ${#seed_archives[@]} -gt 0 ] || echo "note: no exported archives in $archives (run ctest -R runtime_fixtures); seeding from the fixture builders only"
"$build/tests/fuzz/pt2rt_fuzz_seeds" "$work/seeds" "${seed_archives[@]}"

run_target() {  # run_target NAME SEED_DIR MAX_LEN LENGTH_ARGS...
  local name=$1 seeds=$2 max_len=$3; shift 3
  local corpus=$work/corpus/$name log=$work/$name.log
  mkdir -p "$corpus"
  local rc=0
  nice -n 19 "$build/tests/fuzz/pt2rt_fuzz_$name" -dict="$root/tests/fuzz/pt2rt.dict" \
    -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/findings/$name-" "$@" "$corpus" "$seeds" \
    > "$log" 2>&1 || rc=$?
  echo "$rc" > "$work/$name.rc"
}

length() {  # length TARGET -> libFuzzer length arguments for this mode
  case "$mode" in
    short) echo "-max_total_time=$seconds" ;;
    long) if [ "$1" = program ]; then echo "-runs=10000000"; else echo "-runs=400000"; fi ;;
    custom) if [ -n "$runs" ]; then echo "-runs=$runs"; else echo "-max_total_time=$seconds"; fi ;;
  esac
}

targets=(program archive_load archive_run)
pids=()
for t in "${targets[@]}"; do
  if [ "$t" = program ]; then seeds=$work/seeds/program; max_len=65536
  else seeds=$work/seeds/archive; max_len=1100000; fi
  echo "=== fuzzing $t ($(length "$t"))"
  run_target "$t" "$seeds" "$max_len" $(length "$t") &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p"; done

status=0
printf '\n%-14s %12s %8s %8s %9s %8s  %s\n' target executions exec/s cov features peak_MB result
for t in "${targets[@]}"; do
  log=$work/$t.log
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+' || echo 0)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+' || echo 0)
  rc=$(cat "$work/$t.rc")
  result=ok
  if [ "$rc" != 0 ] || grep -qE 'ERROR: (libFuzzer|AddressSanitizer|UndefinedBehaviorSanitizer)|runtime error:|SUMMARY:' "$log"; then
    result="FINDING (exit $rc): see $log and $work/findings/"
    status=1
  fi
  printf '%-14s %12s %8s %8s %9s %8s  %s\n' "$t" "$execs" "$eps" "$cov" "$ft" "$rss" "$result"
done
exit $status
