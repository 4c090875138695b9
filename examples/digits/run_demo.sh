#!/usr/bin/env bash
# The README's first command: a CNN deployed knowing only digits 0-6 learns all ten in C++.
#
#   examples/digits/run_demo.sh [--device cpu|cuda]   (from the repository root, or anywhere)
#
# --device cuda (or PT2RT_DEMO_DEVICE=cuda): steps 5-8 verify, fine-tune, evaluate and run on
# the GPU (LibTorch with CUDA, e.g. the pip wheel's: docs/cuda.md "Building against the official
# LibTorch"); the export (step 4) is the same on either device.
#
# 1. installs missing Debian packages (scripts/install-deps.sh)
# 2. configures and builds export-cli and finetune (build dir: build/, as scripts/test.sh)
# 3. prepares the digits data (sklearn's load_digits, shipped by Debian)
# 4. pretrains the CNN in Python on digits 0-6 and exports it with pt2rt (digits.pt2)
# 5. export-cli verify: the archive against its bundled eager references, on this machine
# 6. export-cli train: fine-tunes on all ten digits in C++ (before/after test accuracy)
# 7. export-cli run: the tuned archive on all 450 test digits in one call, predicted vs true
# 8. finetune: the same job through the C++ API example (examples/digits/finetune.cpp)
#
# Environment: PT2RT_BUILD_DIR (default <repo>/build), PT2RT_BUILD_TYPE (default Release, for
# a fresh build dir), PT2RT_DEMO_DIR (default <build>/digits-demo), PT2RT_PYTHON (default
# /usr/bin/python3), PT2RT_DEMO_EPOCHS (default 5), PT2RT_DEMO_DEVICE (default cpu),
# PT2RT_SKIP_INSTALL=1 (step 1 skipped: a machine whose dependencies are not Debian packages,
# as scripts/gpu-check.sh sets up).
# Exits non-zero if any step fails or the fine-tuned test accuracy is below 0.95.
set -euo pipefail
device=${PT2RT_DEMO_DEVICE:-cpu}
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=${2:?--device needs cpu or cuda}; shift 2 ;;
    --device=*) device=${1#--device=}; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "run_demo.sh: unexpected argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PT2RT_BUILD_DIR:-$root/build}
work=${PT2RT_DEMO_DIR:-$build/digits-demo}
python=${PT2RT_PYTHON:-/usr/bin/python3}
epochs=${PT2RT_DEMO_EPOCHS:-5}
data=$work/data
cli=$build/cli/export-cli
start=$SECONDS
step() { printf '\n\033[1m== [%3ds] %s\033[0m\n' $((SECONDS - start)) "$*"; }

step "1/8 packages (scripts/install-deps.sh)"
if [ "${PT2RT_SKIP_INSTALL:-0}" = 1 ]; then echo "skipped (PT2RT_SKIP_INSTALL=1)"
else "$root/scripts/install-deps.sh"; fi

step "2/8 build export-cli and finetune ($build)"
# A fresh build dir gets Release (no -g: a third less compile time on 2 cores); an existing
# one keeps its build type, so the demo and scripts/test.sh do not rebuild each other's work.
config=(-G Ninja)
[ -f "$build/CMakeCache.txt" ] || config+=(-DCMAKE_BUILD_TYPE="${PT2RT_BUILD_TYPE:-Release}")
cmake -S "$root" -B "$build" "${config[@]}" >/dev/null
cmake --build "$build" --target export-cli finetune -j"$(nproc)"

step "3/8 digits data"
mkdir -p "$work"
"$python" "$root/examples/digits/prepare.py" "$data"

step "4/8 pretrain in Python on digits 0-6, export with pt2rt"
"$python" "$root/examples/digits/pretrain.py" "$data" "$work/digits.pt2" | tee "$work/pretrain.log"
"$cli" inspect "$work/digits.pt2"

step "5/8 export-cli verify digits.pt2 on $device (C++ vs the eager references bundled at export)"
"$cli" verify "$work/digits.pt2" --device "$device"

step "6/8 export-cli train on $device: fine-tune on all ten digits in C++"
"$cli" train "$work/digits.pt2" --data "$data/train.pt" --eval-data "$data/test.pt" \
  --epochs "$epochs" --batch-size 32 --optimizer adam --lr 0.001 --seed 0 --save "$work/tuned.pt2" \
  --device "$device" | tee "$work/train.log"

step "7/8 export-cli run tuned.pt2 on $device on the 450 test digits, in one call"
"$cli" run "$work/tuned.pt2" --inputs "$data/test_inputs.pt" --outputs "$work/pred.pt" \
  --device "$device"
"$python" "$root/examples/digits/show_predictions.py" "$work/pred.pt" "$data/test_labels.pt" \
  "$data/test_inputs.pt"

step "8/8 the C++ API example on $device: finetune digits.pt2 (examples/digits/finetune.cpp)"
"$build/examples/digits/finetune" "$work/digits.pt2" "$data/train.pt" "$data/test.pt" \
  "$work/tuned_api.pt2" "$epochs" "$device" | tee "$work/finetune.log"

before=$(sed -n 's/^test accuracy, all ten digits: //p' "$work/pretrain.log")
after=$(sed -n 's/^final: .*eval_accuracy \([0-9.]*\).*/\1/p' "$work/train.log")
api=$(tail -n 2 "$work/finetune.log" | sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p')
printf '\n\033[1m== done in %ds\033[0m\n' $((SECONDS - start))
echo "test accuracy on all ten digits (device $device; files in $work):"
printf '  %-52s %s\n' "before fine-tuning (pretrained on 0-6 in Python):" "$before" \
  "after export-cli train ($epochs epochs in C++):" "$after" \
  "after finetune.cpp ($epochs epochs, the C++ API):" "$api"
"$python" -c "import sys; sys.exit(0 if float('$after') >= 0.95 else 1)" || {
  echo "error: fine-tuned accuracy $after is below 0.95" >&2
  exit 1
}
