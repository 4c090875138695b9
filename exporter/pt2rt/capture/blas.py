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
"""
from __future__ import annotations

import functools
import re
from typing import Optional

_REFERENCE = re.compile(r"/blas/libblas\.so\.3[.\d]*$")


@functools.lru_cache(maxsize=1)
def reference_blas() -> Optional[str]:
    """The path of the netlib reference ``libblas.so.3`` mapped into this process (after
    ``import torch``), or None: another BLAS (OpenBLAS, MKL, BLIS, Accelerate), or no
    ``/proc/self/maps`` to read (not Linux)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rstrip("\n").split(" ")[-1]
                if _REFERENCE.search(path):
                    return path
    except OSError:
        return None
    return None


REMEDY = ("install an optimized BLAS (Debian/Ubuntu: apt install libopenblas0-openmp; it "
          "becomes libblas.so.3 through update-alternatives)")
