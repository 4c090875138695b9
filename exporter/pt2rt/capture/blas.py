"""Which BLAS the running torch multiplies matrices with, where that decides export time.

Debian's (and Ubuntu's) ``python3-torch`` links ``libblas.so.3`` through the alternatives
system; with no optimized BLAS installed, that is the netlib reference implementation
(package ``libblas3``, ``/usr/lib/<triplet>/blas/libblas.so.3*``): every ``mm`` / ``addmm``
and every convolution ATen runs as im2col + GEMM is then about ten times slower than with
OpenBLAS (an ``nn.TransformerEncoder``'s training step: 54 s against 7 s here). An export runs
the model several times on real tensors (the eager references, and torch 1.13's real-tensor
trace), so the export slows down by the same factor. ``reference_blas()`` finds that case from
the libraries mapped into this process (Linux ``/proc/self/maps``); ``pt2rt.export`` names it
in a one-time warning on logger ``pt2rt.export``.

OpenBLAS itself picks its kernels by CPU model at load (``DYNAMIC_ARCH`` builds, as Debian's);
one too old to know the CPU — Debian bookworm's 0.3.21 on a virtual machine whose CPUID says
only "Intel(R) Xeon(R) Processor" — falls back to its SSE3 ``Prescott`` kernels: matrix
products about 4x slower than its ``Haswell`` ones on the same AVX2 CPU (sgemm 16 against
64 GFLOP/s on one core here; a TransformerEncoder export 34 s against 23 s).
``openblas_fallback()`` finds that case (``openblas_get_corename()`` through ctypes, the CPU's
flags from ``/proc/cpuinfo``); the remedy is OpenBLAS's own ``OPENBLAS_CORETYPE`` variable.
``python -m pt2rt.capture.blas`` prints the core to set (nothing when none is needed), for
scripts: the test scripts source ``scripts/openblas-env.sh``, which uses it.
"""
from __future__ import annotations

import ctypes
import functools
import os
import re
import sys
from typing import Iterator, Optional, Tuple

_REFERENCE = re.compile(r"/blas/libblas\.so\.3[.\d]*$")


@functools.lru_cache(maxsize=1)
def reference_blas() -> Optional[str]:
    """The path of the netlib reference ``libblas.so.3`` mapped into this process (after
    ``import torch``), or None: another BLAS (OpenBLAS, MKL, BLIS, Accelerate), or no
    ``/proc/self/maps`` to read (not Linux)."""
    return next((p for p in _mapped_paths() if _REFERENCE.search(p)), None)


def _mapped_paths() -> Iterator[str]:
    """The file paths in ``/proc/self/maps`` (nothing where it cannot be read: not Linux)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                yield line.rstrip("\n").split(" ")[-1]
    except OSError:
        return


REMEDY = ("install an optimized BLAS (Debian/Ubuntu: apt install libopenblas0-openmp; it "
          "becomes libblas.so.3 through update-alternatives)")


# OpenBLAS's x86 cores without AVX2 kernels, which it falls back to for a CPU it does not know.
_PRE_AVX2_CORES = frozenset({"Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom",
                             "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge",
                             "Barcelona", "Opteron", "Opteron_SSE3", "Unknown"})


def _mapped(pattern: str) -> Optional[str]:
    """The first library path in ``/proc/self/maps`` whose file name contains ``pattern``."""
    return next((p for p in _mapped_paths() if pattern in os.path.basename(p)), None)


def _cpu_flags() -> frozenset:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@functools.lru_cache(maxsize=1)
def openblas_fallback() -> Optional[Tuple[str, str]]:
    """(library path, core name) when the OpenBLAS mapped into this process (after ``import
    torch``) runs kernels without AVX2 on a CPU that has AVX2 and FMA (the module docstring),
    and ``OPENBLAS_CORETYPE`` is not set; else None (another BLAS, a core it knows, not
    Linux)."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return None
    path = _mapped("libopenblas")
    if path is None or not {"avx2", "fma"} <= _cpu_flags():
        return None
    try:
        corename = ctypes.CDLL(path).openblas_get_corename
        corename.restype = ctypes.c_char_p
        core = (corename() or b"").decode(errors="replace")
    except (OSError, AttributeError):
        return None
    return (path, core) if core in _PRE_AVX2_CORES else None


CORETYPE_REMEDY = ("set OPENBLAS_CORETYPE=Haswell in the environment before Python starts "
                   "(OpenBLAS reads it when it loads; its Haswell kernels need AVX2 and FMA, "
                   "which this CPU has)")


def main() -> int:
    """Prints the ``OPENBLAS_CORETYPE`` this process should have had (``Haswell``), or
    nothing; exit status 0 either way."""
    import torch  # noqa: F401  (maps torch's BLAS into the process)
    if openblas_fallback() is not None:
        print("Haswell")
    return 0


if __name__ == "__main__":
    sys.exit(main())
