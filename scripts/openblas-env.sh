# Sourced by the test scripts (scripts/test-lane.sh, tests/cross/run.sh) with $root set to the
# repository: an OpenBLAS too old to know this CPU runs its pre-AVX2 kernels, about 4x slower
# (exporter/pt2rt/capture/blas.py); export OPENBLAS_CORETYPE with the core it should have
# picked. Every process that computes or checks a reference must see the same kernels (the
# parity tests compare bit-close), so each entry point of a lane-1.13 run sources this. The
# torch-2 root does not inherit it (scripts/torch2-root.sh passes only PT2RT_*, CCACHE_*,
# CTEST_* and CI), and its OpenBLAS knows the CPU.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  _pt2rt_core=$(PYTHONPATH="$root/exporter" /usr/bin/python3 -m pt2rt.capture.blas 2>/dev/null || true)
  if [ -n "$_pt2rt_core" ]; then
    export OPENBLAS_CORETYPE=$_pt2rt_core
    echo "OpenBLAS does not recognise this CPU: OPENBLAS_CORETYPE=$_pt2rt_core"
  fi
  unset _pt2rt_core
fi
