#!/usr/bin/env bash
# pt2rt on an NVIDIA GPU, in one command: builds pt2rt against the LibTorch inside this
# machine's CUDA torch wheel, then checks CUDA with real models and prints one table.
#
#   scripts/gpu-check.sh --fetch-deps   on a Debian machine with network access (this
#                                       repository's development machines): downloads the
#                                       .debs the GPU machine needs into .gpu-deps/ (ignored
#                                       by git; carry it to the GPU machine with the tree)
#   scripts/gpu-check.sh [--out DIR] [--work DIR] [--models a,b] [--skip-parity] [--skip-demo]
#                        [--skip-sweep] [--bench] [--bench-models a,b]
#                                       on any Linux machine with an NVIDIA GPU, a CUDA torch
#                                       wheel in python3 (or $PT2RT_PYTHON), CMake >= 3.18, g++
#                                       and ninja — no network needed
#
# What the run does (about 6 minutes on 16 cores and an H100/H200 from a bare machine):
#  1. unpacks .gpu-deps/debs (libzip, FlatBuffers + flatc, cxxopts, nlohmann-json, Catch2) and
#     the Gloo headers (the wheel's own if it has them, else .gpu-deps/debs-gloo: Debian sid's
#     libgloo-dev) into $WORK/deps;
#  2. configures pt2rt against the wheel (torch.utils.cmake_prefix_path; the CUDA libraries'
#     link paths are found by CMakeLists.txt, cmake/torch_wheel.cmake) and builds export-cli,
#     the digits demo's finetune and the runtime test suite, while the wheel's torch exports
#     the sweep's models (scripts/device_sweep.py export) and the runtime test fixtures;
#  3. runs the Catch2 parity suite with PT2RT_TEST_DEVICE=cuda (the test zoo: inference,
#     training outputs, gradients and BatchNorm buffers on CUDA against eager CPU);
#  4. the sweep on CUDA (scripts/device_sweep.py check): per model verify / run / train on
#     CUDA, and archives captured on CUDA verified on the CPU and on CUDA;
#  5. the digits demo with --device cuda (examples/digits/run_demo.sh: export with a dynamic
#     batch, verify, fine-tune, evaluate and run on the GPU; >= 0.95 test accuracy);
#  6. with --bench: the CUDA tests ([cuda]: pt2rt's recurrent ops on cuDNN against eager's, CUDA
#     graph replays of inference and training steps against plain calls; ProcessGroupNCCL with
#     one rank), the CLI's CUDA cases (train --cuda-graphs, data-parallel over Gloo and NCCL)
#     and the CUDA side-by-side benchmark (bench/cuda_side_by_side.cpp: pt2rt vs eager PyTorch
#     per training step and inference, peak CUDA memory; $OUT/bench.txt, $OUT/bench.json;
#     PT2RT_BENCH_ARGS adds options, e.g. "--profile --steps 20");
#  7. prints the table (also $OUT/table.txt; the logs are under $OUT). Exit 1 when any check
#     failed.
# TF32: the parity suite runs with NVIDIA_TF32_OVERRIDE=0 (its references are full float32);
# verify turns TF32 off itself.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps_src=${PT2RT_GPU_DEPS:-$root/.gpu-deps}
work=${PT2RT_GPU_WORK:-/tmp/pt2rt-gpu}
out=${OUT:-$work/out}
models=""
skip_parity=0
skip_demo=0
skip_sweep=0
bench=0
bench_models=""
die() { echo "gpu-check: error: $*" >&2; exit 2; }

DEBS=(libzip4 libzip-dev zipcmp zipmerge ziptool flatbuffers-compiler flatbuffers-compiler-dev
      libflatbuffers-dev libflatbuffers2 libcxxopts-dev nlohmann-json3-dev catch2)

fetch_deps() {
  command -v apt-get >/dev/null || die "--fetch-deps needs apt-get (a Debian machine)"
  mkdir -p "$deps_src/debs" "$deps_src/debs-gloo"
  (cd "$deps_src/debs" && apt-get download "${DEBS[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
  # c10d's ProcessGroupGloo.hpp of torch >= 2.9 needs Gloo newer than bookworm's: sid's, from
  # the torch-2 root (scripts/torch2-root.sh) that the test command makes anyway.
  "$root/scripts/torch2-root.sh" run bash -c \
    "cd '$deps_src/debs-gloo' && apt-get download libgloo-dev 2>&1 | grep -v '^W: Download is performed unsandboxed' || true"
  ls "$deps_src/debs"/*.deb "$deps_src/debs-gloo"/*.deb >/dev/null 2>&1 || die "no .debs were downloaded"
  echo "gpu-check: $(ls "$deps_src"/debs*/*.deb | wc -l) packages in $deps_src ($(du -sh "$deps_src" | cut -f1))"
}

while [ $# -gt 0 ]; do
  case "$1" in
    --fetch-deps) fetch_deps; exit 0 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --work) work=${2:?--work needs a directory}; out=${OUT:-$work/out}; shift 2 ;;
    --models) models=${2:?--models needs a list}; shift 2 ;;
    --skip-parity) skip_parity=1; shift ;;
    --skip-demo) skip_demo=1; shift ;;
    --skip-sweep) skip_sweep=1; shift ;;
    --bench) bench=1; shift ;;
    --bench-models) bench=1; bench_models=${2:?--bench-models needs a list}; shift 2 ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) die "unexpected argument '$1' (see --help)" ;;
  esac
done

T0=$SECONDS
stamp() { echo "== [$((SECONDS - T0))s] $*"; }
mkdir -p "$work" "$out"
py=${PT2RT_PYTHON:-$(command -v python3 || true)}
[ -n "$py" ] || die "no python3 (set PT2RT_PYTHON to the interpreter with the CUDA torch wheel)"
"$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null ||
  die "$py has no CUDA torch or sees no GPU (torch.cuda.is_available() is False)"
for tool in cmake ninja g++; do command -v $tool >/dev/null || die "$tool is missing"; done
ls "$deps_src"/debs/*.deb >/dev/null 2>&1 ||
  die "no .debs in $deps_src/debs: run scripts/gpu-check.sh --fetch-deps on a Debian machine first"

stamp "machine"
nvidia-smi -L 2>/dev/null || true
"$py" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name(0))"
echo "$(nproc) cores, $(g++ --version | head -n 1), $(cmake --version | head -n 1)"

stamp "dependencies (.debs unpacked into $work/deps)"
deps=$work/deps
rm -rf "$deps" && mkdir -p "$deps/lib" "$deps/gloo"
for f in "$deps_src"/debs/*.deb; do dpkg-deb -x "$f" "$deps"; done
torch_dir=$("$py" -c "import torch, os; print(os.path.dirname(torch.__file__))")
if [ -f "$torch_dir/include/gloo/config.h" ]; then
  gloo=$torch_dir/include
else
  for f in "$deps_src"/debs-gloo/*.deb; do dpkg-deb -x "$f" "$deps/gloo"; done
  gloo=$deps/gloo/usr/include
fi
[ -f "$gloo/gloo/config.h" ] || die "no Gloo headers (the wheel has none and .gpu-deps/debs-gloo is empty)"
# Only the two shared libraries the build links (the system's others stay in charge).
cp -a "$deps"/usr/lib/x86_64-linux-gnu/libzip.so* "$deps"/usr/lib/x86_64-linux-gnu/libflatbuffers.so* "$deps/lib/"
export LD_LIBRARY_PATH=$deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$deps/usr/bin:$PATH

stamp "configure against $torch_dir"
build=$work/build
cuda_root=""
if command -v nvcc >/dev/null; then cuda_root=$(dirname "$(dirname "$(command -v nvcc)")"); fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)');$deps/usr" \
  -DPT2RT_PYTHON="$py" -DPT2RT_INSTALL=OFF -DPT2RT_GLOO_INCLUDE_DIR="$gloo" \
  ${cuda_root:+-DCUDAToolkit_ROOT=$cuda_root} > "$out/cmake.log" 2>&1 ||
  { tail -n 30 "$out/cmake.log"; die "cmake failed (log: $out/cmake.log)"; }

stamp "build (background) + exports with torch $("$py" -c 'import torch; print(torch.__version__)')"
jobs=$(nproc)
targets="export-cli finetune pt2rt_runtime_tests"
if [ $bench = 1 ]; then
  targets="$targets pt2rt_runtime_unit_tests pt2rt_distributed_tests"
  # pt2rt_bench_cuda embeds Python: built only where CMake found its development files.
  if ninja -C "$build" -t targets all 2>/dev/null | grep -q "^pt2rt_bench_cuda:"; then
    targets="$targets pt2rt_bench_cuda"
  else
    echo "gpu-check: warning: no pt2rt_bench_cuda target (no Python embedding files for $py)"
  fi
fi
( timeout 400 ninja -C "$build" -j"$((jobs > 4 ? jobs - 2 : jobs))" $targets \
    > "$out/build.log" 2>&1; echo "rc=$?" >> "$out/build.log" ) &
build_pid=$!
sweep=$work/sweep
rm -rf "$sweep"; mkdir -p "$sweep"
export PYTHONPATH=$root/exporter:$root/tests/python${PYTHONPATH:+:$PYTHONPATH}
(cd "$root/exporter" && "$py" -m pt2rt.format.fbs_gen) || die "cannot generate the exporter's FlatBuffers bindings"
fixtures=$build/fixtures/runtime
if [ $skip_parity = 0 ]; then
  ( OMP_NUM_THREADS=2 "$py" "$root/tests/fixtures/make_runtime_fixtures.py" "$fixtures" \
      > "$out/fixtures.log" 2>&1; echo "rc=$?" >> "$out/fixtures.log" ) &
  fixtures_pid=$!
fi
if [ $skip_sweep = 0 ]; then
  OMP_NUM_THREADS=2 "$py" "$root/scripts/device_sweep.py" export "$sweep" ${models:+--models "$models"} \
    --jobs "$(( jobs / 3 > 1 ? jobs / 3 : 1 ))" > "$out/export.log" 2>&1 || true
  tail -n 1 "$out/export.log"
fi
wait "$build_pid" || true
tail -n 1 "$out/build.log" | grep -q "rc=0" || { grep -E "error|FAILED" "$out/build.log" | head -n 20; die "build failed (log: $out/build.log)"; }
cli=$build/cli/export-cli
status=0

parity_rows=""
if [ $skip_parity = 0 ]; then
  wait "$fixtures_pid" || true
  stamp "Catch2 parity suite on CUDA (PT2RT_TEST_DEVICE=cuda)"
  if NVIDIA_TF32_OVERRIDE=0 PT2RT_TEST_DEVICE=cuda PT2RT_RUNTIME_FIXTURES=$fixtures \
       timeout 180 "$build/tests/pt2rt_runtime_tests" "[parity]" > "$out/parity.log" 2>&1; then
    parity_rows="parity (zoo)  catch2  cuda  ok  $(grep -c '|' "$out/parity.log" || true) table lines, $(tail -n 2 "$out/parity.log" | head -n 1)"
  else
    status=1
    parity_rows="parity (zoo)  catch2  cuda  FAIL  $(grep -m 3 -E 'FAILED|failed|error' "$out/parity.log" | tr '\n' ' ' | cut -c1-200)"
  fi
  grep -E "^\| |^model|parity" "$out/parity.log" | head -n 40 || true
  # The same archives on the CPU of this LibTorch: what the device adds, and what the torch
  # version that exported the fixtures does (PT2RT_GPU_CHECK_CPU_PARITY=0 skips it).
  echo "== parity on the CPU (PT2RT_TEST_DEVICE unset)" >> "$out/parity.log"
  if [ "${PT2RT_GPU_CHECK_CPU_PARITY:-1}" = 0 ]; then
    echo "skipped (PT2RT_GPU_CHECK_CPU_PARITY=0)" >> "$out/parity.log"
  elif PT2RT_RUNTIME_FIXTURES=$fixtures timeout 180 "$build/tests/pt2rt_runtime_tests" "[parity]" \
       >> "$out/parity.log" 2>&1; then
    parity_rows="$parity_rows
parity (zoo)  catch2  cpu  ok  the same fixtures on LibTorch's CPU kernels"
  else
    status=1
    parity_rows="$parity_rows
parity (zoo)  catch2  cpu  FAIL  see parity.log"
  fi
fi

if [ $skip_sweep = 0 ]; then
  stamp "sweep on CUDA (scripts/device_sweep.py check)"
  OMP_NUM_THREADS=2 timeout 300 "$py" "$root/scripts/device_sweep.py" check "$sweep" --cli "$cli" --device cuda \
    ${models:+--models "$models"} --jobs 4 > "$out/check.log" 2>&1 || status=1
fi

bench_rows=""
if [ $bench = 1 ]; then
  stamp "CUDA unit tests ([cuda]) and the CUDA side-by-side benchmark"
  if timeout 120 "$build/tests/pt2rt_runtime_unit_tests" "[cuda]" > "$out/cuda_unit.log" 2>&1 &&
     { [ $skip_parity = 1 ] || PT2RT_RUNTIME_FIXTURES=$fixtures timeout 180 \
         "$build/tests/pt2rt_runtime_tests" "[cuda]" >> "$out/cuda_unit.log" 2>&1; }; then
    bench_rows="cuda unit tests  catch2  cuda  ok  $(tail -n 2 "$out/cuda_unit.log" | head -n 1)"
  else
    status=1
    bench_rows="cuda unit tests  catch2  cuda  FAIL  $(grep -m 3 -E 'FAILED|failed|error' "$out/cuda_unit.log" | tr '\n' ' ' | cut -c1-200)"
  fi
  # Data-parallel on CUDA: ProcessGroupNCCL (one rank: NCCL refuses two on one GPU) and the
  # CLI's CUDA cases (CUDA graphs for training; Gloo ranks sharing the GPU; one NCCL rank).
  if "$py" "$root/tests/fixtures/make_distributed_fixtures.py" "$work/distributed" \
       > "$out/distributed.log" 2>&1 &&
     PT2RT_DISTRIBUTED_FIXTURES=$work/distributed timeout 120 \
       "$build/tests/pt2rt_distributed_tests" "[cuda]" >> "$out/distributed.log" 2>&1 &&
     PT2RT_CLI=$cli timeout 300 "$py" -m pytest -q -p no:cacheprovider \
       "$root/tests/cli/test_cuda_graphs.py" "$root/tests/cli/test_distributed.py" \
       -k "cuda or nccl" >> "$out/distributed.log" 2>&1; then
    bench_rows="$bench_rows
cuda cli + nccl  catch2/pytest  cuda  ok  $(tail -n 1 "$out/distributed.log")"
  else
    status=1
    bench_rows="$bench_rows
cuda cli + nccl  catch2/pytest  cuda  FAIL  $(grep -m 3 -E 'FAILED|failed|Error' "$out/distributed.log" | tr '\n' ' ' | cut -c1-200)"
  fi
  if timeout 400 "$build/bench/pt2rt_bench_cuda" --device cuda --work-dir "$work/bench" \
       --json "$out/bench.json" ${bench_models:+--models "$bench_models"} ${PT2RT_BENCH_ARGS:-} \
       > "$out/bench.txt" 2>&1; then
    bench_rows="$bench_rows
cuda benchmark  pt2rt vs eager  cuda  ok  see bench.txt"
  else
    status=1
    bench_rows="$bench_rows
cuda benchmark  pt2rt vs eager  cuda  FAIL  $(tail -n 3 "$out/bench.txt" | tr '\n' ' ' | cut -c1-200)"
  fi
  cat "$out/bench.txt"
fi

demo_row=""
if [ $skip_demo = 0 ]; then
  stamp "digits demo on CUDA (examples/digits/run_demo.sh --device cuda)"
  if PT2RT_SKIP_INSTALL=1 PT2RT_BUILD_DIR=$build PT2RT_PYTHON=$py PT2RT_DEMO_DIR=$work/digits \
       timeout 240 "$root/examples/digits/run_demo.sh" --device cuda > "$out/digits.log" 2>&1; then
    demo_row="digits demo  train+run  cuda  ok  $(grep -A3 '^test accuracy on all ten digits' "$out/digits.log" | tail -n 3 | sed 's/  */ /g' | tr '\n' ';')"
  else
    status=1
    demo_row="digits demo  train+run  cuda  FAIL  $(tail -n 3 "$out/digits.log" | tr '\n' ' ' | cut -c1-200)"
  fi
fi

stamp "done"
{
  echo "pt2rt gpu-check: $("$py" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"), $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
  [ -f "$out/export.log" ] && sed -n '/^archive  /,$p' "$out/export.log" | sed '$d'
  [ -f "$out/check.log" ] && sed -n '/^archive  /,$p' "$out/check.log"
  [ -n "$bench_rows" ] && echo "$bench_rows"
  [ -n "$parity_rows" ] && echo "$parity_rows"
  [ -n "$demo_row" ] && echo "$demo_row"
  true  # a skipped stage's empty row is not a failure (set -e, pipefail)
} | tee "$out/table.txt"
if grep -q "FAIL" "$out/table.txt"; then status=1; fi
exit $status
