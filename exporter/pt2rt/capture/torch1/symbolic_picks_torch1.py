"""Ops whose values are picks of their input — ``max`` / ``min`` over a dim, ``gather``,
``topk``, ``sort``, ``cummax`` / ``cummin``, ``index_select`` — for a dynamic-shape capture on
torch 1.13, while autograd records on symbolic sizes; and ``take_along_dim``, whose C++
broadcasting reads concrete sizes even without autograd.

torch 1.13's autograd nodes for them (``MaxBackward0``, ``GatherBackward0``, ``TopkBackward0``,
``SortBackward0``, ``CummaxBackward0``, ``IndexSelectBackward0``; torch/csrc/autograd/
generated/Functions.h) save or read ``self.sizes()``, which raises on a tensor with symbolic
sizes. Each op runs instead as: the indices from the ATen op itself on the input detached (the
same kernel, so the same choice among ties and NaNs), and the values picked at them one column
at a time by ``_picked`` — ``where(one-hot of the index, x, 0)`` summed over the dim, whose
autograd nodes take symbolic sizes. The values are exactly eager's (a -0.0 reads +0.0); so is
the gradient where a row's picks are distinct (``max``, ``topk``, ``sort``, a permutation),
and to rounding where an index repeats (``cummax``, a ``gather`` or ``index_select`` picking an
element twice: autograd sums the repeated picks' gradients in its own order, eager's
``scatter_add`` / ``index_add`` in index order). A dim is picked column by column, so only
up to ``MAX_PICKS`` picks per row over a static dim; other calls go to torch's own op, whose
backward is then refused by name. Without autograd recording (inference) every op is torch's
own.
"""
from __future__ import annotations

from typing import Any

import torch

from ...ops.traceable_ops import take_along_dim as traceable_take_along_dim
from .symbolic_autograd_torch1 import cat, records, same_except

aten = torch.ops.aten

# picks per row: each is a masked sum over the whole row, so the graph grows by a few ops per
# pick; more picks than this go to torch's own op (refused by name)
MAX_PICKS = 64


def _picked(x: torch.Tensor, dim: int, index: torch.Tensor, keepdim: bool) -> torch.Tensor:
    """The elements of ``x`` at ``index`` (one per row along ``dim``, ``index.size(dim) ==
    1``) as the sum over ``dim`` of ``where(one-hot of index, x, 0)``: the element itself (NaN
    and inf included; a -0.0 reads +0.0); its gradient, ``where(mask, grad, 0)``, is the
    gradient scattered at ``index`` into zeros, exactly — ``gather_backward`` and
    ``value_selecting_reduction_backward``."""
    mask = torch.zeros_like(x, dtype=torch.bool).scatter(dim, index, True)
    return torch.where(mask, x, torch.zeros_like(x)).sum(dim, keepdim=keepdim)


def max_min_dim(func: Any, args: Any, kwargs: Any) -> Any:
    """``torch.max(x, dim[, keepdim])`` / ``torch.min`` (and the Tensor methods) while autograd
    records on symbolic sizes (``MaxBackward0`` / ``MinBackward0`` save ``self.sizes()``): the
    indices from ``max.dim`` / ``min.dim`` on ``x`` detached, the values ``_picked`` at them,
    exactly eager's values and gradient. NotImplemented for every other call."""
    if len(args) < 2 and "dim" not in kwargs or set(kwargs) - {"dim", "keepdim"}:
        return NotImplemented
    x = args[0]
    dim = args[1] if len(args) > 1 else kwargs["dim"]
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    if not isinstance(x, torch.Tensor) or not isinstance(dim, int) or not records(x):
        return NotImplemented
    largest = func in (torch.max, torch.Tensor.max)
    op = aten.max.dim if largest else aten.min.dim
    _, indices = op(x.detach(), dim, keepdim)
    values = _picked(x, dim, indices if keepdim else indices.unsqueeze(dim), keepdim)
    kind = torch.return_types.max if largest else torch.return_types.min
    return kind((values, indices))


def _picks(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """The elements of ``x`` at ``index`` along ``dim`` (``index.size(dim)`` a static int, its
    other sizes ``x``'s): ``_picked`` for each of the ``index.size(dim)`` columns, placed side
    by side (``cat`` of one shape: ``stack``). Values exactly eager's ``gather``; the gradient
    exactly eager's where the picks of a row are distinct (``topk``), to rounding where an
    index repeats (autograd sums the repeated picks' gradients in its own order, eager's
    ``scatter_add`` in index order)."""
    pieces = [_picked(x, dim, aten.slice.Tensor(index, dim, j, j + 1, 1), keepdim=True)
              for j in range(index.shape[dim])]
    return pieces[0] if len(pieces) == 1 else cat(pieces, dim)


def gather(x: torch.Tensor, dim: int, index: torch.Tensor, *, sparse_grad: bool = False
           ) -> Any:
    """``x.gather(dim, index)`` picking up to ``MAX_PICKS`` elements per row (``index.size(dim)``
    static, the other dims ``x``'s: a class's log-probability, an action's value, the experts a
    router chose) while autograd records on symbolic sizes (``GatherBackward0`` reads
    ``self.sizes()``): ``_picks``. NotImplemented otherwise (torch's own, whose backward is
    then refused by name)."""
    if sparse_grad or not isinstance(dim, int) or not records(x) or index.dim() != x.dim():
        return NotImplemented
    dim = dim % x.dim()
    k = index.shape[dim]
    if not isinstance(k, int) or not 1 <= k <= MAX_PICKS or not same_except(index, x, dim):
        return NotImplemented
    return _picks(x, dim, index)


def topk(x: torch.Tensor, k: Any, dim: int = -1, largest: bool = True, sorted: bool = True
         ) -> Any:
    """``torch.topk`` with ``k <= MAX_PICKS`` while autograd records on symbolic sizes
    (``TopkBackward0`` saves ``self.sizes()``; mixture-of-experts routing weights): the indices
    from ``aten.topk`` on ``x`` detached (the same kernel, so the same choice among ties and
    NaNs), the values ``_picks`` at them — exactly eager's values and gradient
    (``value_selecting_reduction_backward``: the gradient scattered at the distinct indices).
    NotImplemented otherwise."""
    if not records(x) or not isinstance(k, int) or not isinstance(dim, int) \
            or not 1 <= k <= MAX_PICKS:
        return NotImplemented
    dim = dim % x.dim()
    _, indices = aten.topk.default(x.detach(), k, dim, largest, sorted)
    return torch.return_types.topk((_picks(x, dim, indices), indices))


def _pickable_dim(x: torch.Tensor, dim: Any) -> Any:
    """``dim`` wrapped, when autograd records on ``x`` and ``dim`` is static with at most
    ``MAX_PICKS`` elements (a whole row picked column by column); else None."""
    if not records(x) or not isinstance(dim, int) or x.dim() == 0:
        return None
    dim = dim % x.dim()
    n = x.shape[dim]
    return dim if isinstance(n, int) and 1 <= n <= MAX_PICKS else None


def sort(x: torch.Tensor, dim: int = -1, descending: bool = False, stable: Any = None) -> Any:
    """``torch.sort`` over a static dim of at most ``MAX_PICKS`` elements: the indices from
    ``aten.sort`` (``.stable`` when ``stable`` is given) on ``x`` detached, the values
    ``_picks`` at them."""
    dim = _pickable_dim(x, dim)
    if dim is None:
        return NotImplemented
    if stable is None:
        _, indices = aten.sort.default(x.detach(), dim, descending)
    else:
        _, indices = aten.sort.stable(x.detach(), stable=stable, dim=dim, descending=descending)
    return torch.return_types.sort((_picks(x, dim, indices), indices))


def cummax_cummin(func: Any, x: torch.Tensor, dim: int) -> Any:
    """``torch.cummax`` / ``cummin`` over a static dim of at most ``MAX_PICKS`` elements: the
    indices from the op on ``x`` detached, the values ``_picks`` at them (an index repeats
    along the dim wherever the running extreme holds: gradient to rounding)."""
    dim = _pickable_dim(x, dim)
    if dim is None:
        return NotImplemented
    op = aten.cummax.default if func in (torch.cummax, torch.Tensor.cummax) else \
        aten.cummin.default
    _, indices = op(x.detach(), dim)
    kind = torch.return_types.cummax if op is aten.cummax.default else torch.return_types.cummin
    return kind((_picks(x, dim, indices), indices))


def index_select(x: torch.Tensor, dim: int, index: torch.Tensor) -> Any:
    """``x.index_select(dim, index)`` with a 1-D (or 0-D) index of at most ``MAX_PICKS`` elements:
    the index broadcast along the other dims, ``_picks`` at it (ATen's ``index_select`` is
    that ``gather``)."""
    if not records(x) or not isinstance(dim, int) or index.dim() > 1:
        return NotImplemented
    dim = dim % max(x.dim(), 1)
    m = index.numel() if all(isinstance(s, int) for s in index.shape) else None
    if x.dim() == 0 or m is None or not 1 <= m <= MAX_PICKS:
        return NotImplemented
    shape = [1] * x.dim()
    shape[dim] = m
    sizes = list(x.shape)
    sizes[dim] = m
    return _picks(x, dim, index.reshape(shape).expand(sizes))


def take_along_dim(x: torch.Tensor, indices: torch.Tensor, dim: Any = None) -> Any:
    """``traceable_ops.take_along_dim`` (ATen's C++ broadcasting reads ``sizes()``) with
    ``gather`` above while autograd records."""
    def picks(x, dim, index):
        out = gather(x, dim, index)
        return torch.gather(x, dim, index) if out is NotImplemented else out
    out = traceable_take_along_dim(x, indices, dim, gather=picks)
    return NotImplemented if out is None else out
