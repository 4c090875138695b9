"""Gradient sketches: compact gradient references for bundled examples (schema 1.2).

A full gradient reference costs as much as the weights; a sketch is a few float64 numbers per
gradient, from which ``verify`` can still tell a wrong gradient from a right one. The exact
definition (schema/README.md "Gradient sketches"; C++: ``include/pt2rt/grad_sketch.h``, which
must agree bit for bit on the signs):

* ``g``: the gradient converted to float64, flattened in row-major order; ``n = numel``
  (< 2**32: larger gradients are not sketched).
* ``norm = sqrt(sum g[j]^2)``, ``sum = sum g[j]``, ``abs_sum = sum |g[j]|``,
  ``max_abs = max |g[j]|`` (0 for n = 0).
* ``projections[k] = sum_j sign_k(j) * g[j]`` for ``k < K`` (K = ``DEFAULT_PROJECTIONS``),
  Rademacher signs from the 32-bit hash ``lowbias32`` (C. Wellons, "Prospecting for Hash
  Functions", 2018: ``x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b;
  x ^= x >> 16``, all mod 2**32): ``key_k = lowbias32((seed + (k + 1) * 0x9E3779B9) mod 2**32)``,
  ``sign_k(j) = +1 if lowbias32(j XOR key_k) < 2**31 else -1``.

Tolerance rule (``check``), with ``(rtol, atol)`` = ``torch.testing.assert_close``'s defaults for
the gradient's dtype, R the reference and A the actual sketch, ``r = n * 2**-52 * R.abs_sum``
(float64 summation rounding):

* ``|A.norm - R.norm| <= atol*sqrt(n) + rtol*R.norm + r``
* ``|A.sum - R.sum| <= atol*n + rtol*R.abs_sum + r`` and the same for ``abs_sum``
* ``|A.max_abs - R.max_abs| <= atol + rtol*R.max_abs + r``
* ``|A.projections[k] - R.projections[k]| <= 6 * (atol*sqrt(n) + rtol*R.norm) + r``

The first three are implied by the element-wise rule ``|a - e| <= atol + rtol*|e|`` (triangle
and Minkowski inequalities), so a gradient ``assert_close`` accepts always passes them. The
projection bound holds for such a gradient with probability >= 1 - 2*exp(-18) (Hoeffding:
the error vector e has ``||e||_2 <= atol*sqrt(n) + rtol*R.norm`` and the signs are independent
of it). A wrong gradient fails when its error is large in L2 terms: a change of the norm or sum
beyond the bounds, or an error vector e with ``|<sign_k, e>|`` above the bound for some k (for a
random-like e, ``|<sign_k, e>| ~ ||e||_2 * |N(0, 1)|``). An error confined to one small element
can pass a sketch where a full reference would catch it: export with ``full_references=True``
when that matters.
"""
from __future__ import annotations

import functools
import math
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch

from . import constants, dtypes
from .program_ir import GradSketch

DEFAULT_SEED = constants.GRAD_SKETCH_SEED
DEFAULT_PROJECTIONS = constants.GRAD_SKETCH_PROJECTIONS
PROJECTION_SIGMAS = 6.0
_MASK32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B9
_EPS64 = 2.0 ** -52


def _lowbias32_u32(x: np.ndarray) -> np.ndarray:
    """Wellons' lowbias32 hash, elementwise on a uint32 array (NumPy's uint32 products wrap
    modulo 2**32, which is the hash's arithmetic)."""
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def lowbias32(x: torch.Tensor) -> torch.Tensor:
    """Wellons' lowbias32 hash, elementwise on int64 tensors holding uint32 values."""
    h = _lowbias32_u32(x.detach().cpu().numpy().astype(np.uint32))
    return torch.from_numpy(h.astype(np.int64))


def _lowbias32_int(x: int) -> int:
    return int(_lowbias32_u32(np.array([x & _MASK32], dtype=np.uint32))[0])


def _negative(seed: int, k: int, n: int) -> np.ndarray:
    """1 where sign_k(j) = -1, else 0, for j < n (uint8; the hash's top bit)."""
    key = np.uint32(_lowbias32_int((seed + (k + 1) * _GOLDEN) & _MASK32))
    h = _lowbias32_u32(np.arange(n, dtype=np.uint32) ^ key)
    return (h >> np.uint32(31)).astype(np.uint8)


def signs(seed: int, k: int, n: int) -> torch.Tensor:
    """sign_k(j) for j < n as float64 (+1 / -1), hashed in NumPy uint32 arithmetic (NumPy's
    uint32 products wrap modulo 2**32, as the hash's do)."""
    return torch.from_numpy(1.0 - 2.0 * _negative(seed, k, n).astype(np.float64))


_GROUP = 8  # projections per sign code (a uint8)
_CODES = {}  # (seed, first projection, count) -> uint8 codes for j < len: a prefix serves less


def _codes(seed: int, first: int, count: int, n: int) -> torch.Tensor:
    """Bit i of ``codes[j]`` is 1 where sign_{first+i}(j) = -1 (count <= 8), for j < n.
    Cached per (seed, first, count); resnet18's largest gradient (2.4 M elements) costs
    2.4 MB and ~0.2 s of hashing once per process."""
    cached = _CODES.get((seed, first, count))
    if cached is None or cached.numel() < n:
        codes = np.zeros(n, dtype=np.uint8)
        for i in range(count):
            codes |= _negative(seed, first + i, n) << np.uint8(i)
        cached = _CODES[(seed, first, count)] = torch.from_numpy(codes)
    return cached[:n]


@functools.lru_cache(maxsize=None)
def _code_signs(count: int) -> torch.Tensor:
    """(256, count) float64: entry [c, i] = sign of projection i under code c (+1 / -1)."""
    c = torch.arange(256).unsqueeze(1)
    bits = (c >> torch.arange(count)) & 1
    return (1 - 2 * bits).to(torch.float64)


def projections(g: torch.Tensor, seed: int, count: int) -> List[float]:
    """``projections[k]`` of the flat float64 CPU tensor ``g`` (module docstring). One
    ``torch.bincount`` per 8 projections sums ``g`` per sign code (float64); each projection
    is then a signed sum of the 256 bucket sums (the same sum in another order: the tolerance's
    ``r`` term covers float64 summation order)."""
    out: List[float] = []
    if g.numel() == 0:  # torch.bincount of nothing is int64 zeros, whatever the weights
        return [0.0] * count
    for first in range(0, count, _GROUP):
        m = min(_GROUP, count - first)
        buckets = torch.bincount(_codes(seed, first, m, g.numel()), weights=g, minlength=256)
        out += (buckets[:256] @ _code_signs(m)).tolist()
    return out


def sketchable(t: torch.Tensor) -> bool:
    """Whether a gradient can be sketched (real floating dtype, numel < 2**32)."""
    return t.is_floating_point() and t.numel() < constants.GRAD_SKETCH_MAX_NUMEL


def compute(name: str, grad: torch.Tensor, seed: int = DEFAULT_SEED,
            count: int = DEFAULT_PROJECTIONS) -> GradSketch:
    """The sketch of ``grad`` (any device, a real floating dtype)."""
    g = grad.detach().to("cpu", torch.float64).contiguous().view(-1)
    # |g| summed and maxed by vector_norm (orders 1 and inf): no temporary of g's size, as the
    # float64 references call this inside their backward, at that run's memory peak
    norm = torch.linalg.vector_norm
    return GradSketch(name, dtypes.scalar_type(grad.dtype), list(grad.shape),
                      float(norm(g)), float(g.sum()), float(norm(g, 1)),
                      float(norm(g, math.inf)) if g.numel() else 0.0,
                      projections(g, seed, count))


def compute_all(grads: Sequence[Tuple[str, torch.Tensor]], seed: int = DEFAULT_SEED,
                count: int = DEFAULT_PROJECTIONS) -> List[GradSketch]:
    """``compute`` of each (name, gradient), in order. The sign codes are hashed once for the
    largest gradient first (a prefix serves every smaller one) instead of again each time a
    larger gradient comes along."""
    largest = max((g.numel() for _, g in grads), default=0)
    for first in range(0, count, _GROUP):
        _codes(seed, first, min(_GROUP, count - first), largest)
    return [compute(name, g, seed, count) for name, g in grads]


def tolerance(dtype: torch.dtype):
    """assert_close's default (rtol, atol) for ``dtype`` (torch/testing/_comparison.py)."""
    return {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5),
            torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}.get(dtype, (1.3e-6, 1e-5))


def check(actual: GradSketch, ref: GradSketch, dtype: torch.dtype) -> Optional[str]:
    """None when ``actual`` is close to ``ref`` by the module docstring's rule, else a one-line
    reason naming the statistic. NaN anywhere fails."""
    if actual.sizes != ref.sizes:
        return f"sizes {actual.sizes}, reference {ref.sizes}"
    if len(actual.projections) != len(ref.projections):
        return f"{len(actual.projections)} projections, reference {len(ref.projections)}"
    rtol, atol = tolerance(dtype)
    n = math.prod(ref.sizes)
    r = n * _EPS64 * ref.abs_sum
    l2 = atol * math.sqrt(n) + rtol * ref.norm
    rows = [("norm", actual.norm, ref.norm, l2 + r),
            ("sum", actual.sum, ref.sum, atol * n + rtol * ref.abs_sum + r),
            ("abs_sum", actual.abs_sum, ref.abs_sum, atol * n + rtol * ref.abs_sum + r),
            ("max_abs", actual.max_abs, ref.max_abs, atol + rtol * ref.max_abs + r)]
    rows += [(f"projection {k}", a, e, PROJECTION_SIGMAS * l2 + r)
             for k, (a, e) in enumerate(zip(actual.projections, ref.projections))]
    for what, a, e, tol in rows:
        if not abs(a - e) <= tol:
            return f"{what} {a:.6e}, reference {e:.6e} (|diff| {abs(a - e):.3e} > tol {tol:.3e})"
    return None


def check_tensor(grad: torch.Tensor, ref: GradSketch, seed: int) -> Optional[str]:
    """``check`` of ``grad`` against ``ref`` (sketched with the same seed and count)."""
    if list(grad.shape) != list(ref.sizes):
        return f"sizes {list(grad.shape)}, reference {ref.sizes}"
    if dtypes.scalar_type(grad.dtype) != ref.dtype:
        return f"dtype {grad.dtype}, reference {dtypes.to_dtype(ref.dtype)}"
    return check(compute(ref.name, grad, seed, len(ref.projections)), ref, grad.dtype)
