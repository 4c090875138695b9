"""``select``, ``squeeze``, ``split``, ``unbind``, ``cat``, ``logsumexp`` and ``amax`` /
``amin`` for a dynamic-shape capture on torch 1.13, whose autograd nodes cannot be recorded on
symbolic sizes there (the ops whose values are picks of their input:
``symbolic_picks_torch1``).

torch 1.13's generated autograd nodes ``SelectBackward0``, ``SqueezeBackward1``,
``SplitBackward0``, ``UnsafeSplitBackward0`` (torch/csrc/autograd/generated/Functions.h) save
``self.sizes()`` as ``std::vector<int64_t>``, ``CatBackward0`` its inputs' sizes,
``UnbindBackward0`` reads its gradients' ``sizes()`` (``unbind_backward``,
torch/csrc/autograd/FunctionsManual.cpp), and a custom ``torch.autograd.Function``'s outputs
are described by ``VariableInfo`` (concrete sizes too): on a tensor with symbolic sizes they
raise "Cannot call sizes() on tensor with symbolic sizes/strides" (torch 2 saves
``sym_sizes``). ``SliceBackward0``, ``ViewBackward0`` and ``StackBackward0`` work. So:

* no autograd recording (inference, an input that does not require grad) or only static
  sizes: the ATen op itself (``select.int``, ``split.Tensor``, ``unsafe_split.Tensor``,
  ``unbind.int``, ``cat``), as eager;
* autograd recording on symbolic sizes: the same values from ops whose nodes take symbolic
  sizes — ``select(x, d, i)`` = ``slice(x, d, i, i + 1)`` (``i = -1``: to the end) viewed
  without ``d``; ``split(x, n, d)`` = ``slice(x, d, k * n, (k + 1) * n)`` per piece;
  ``unbind(x, d)`` = ``select(x, d, i)`` for each ``i``; ``cat`` of pieces of one shape =
  their ``stack`` viewed with the two dims merged. The forward values are the same elements;
  the gradients the same values, exactly (``slice_backward`` pads a piece's gradient with
  zeros where ``select_backward``, ``split_backward``'s ``cat`` or ``unbind_backward``'s
  ``stack`` place it; the pieces' padded gradients are summed: ``g + 0``). The capture then
  turns such sums back into ``cat`` (``graph_passes.slice_backward_sums_as_cat``).
"""
from __future__ import annotations

from typing import Any, List

import torch

aten = torch.ops.aten
INT64_MAX = 2 ** 63 - 1
def symbolic(x: Any) -> bool:
    """``x`` is a tensor with a symbolic size."""
    return isinstance(x, torch.Tensor) and not all(isinstance(n, int) for n in x.shape)


def records(x: torch.Tensor) -> bool:
    """Autograd records an op on ``x`` and ``x`` has a symbolic size."""
    return torch.is_grad_enabled() and x.requires_grad and symbolic(x)


def select(x: torch.Tensor, dim: int, index: int) -> torch.Tensor:
    """``x.select(dim, index)``; the index as given (a negative one counts from the end at run
    time: ATen's ``select`` and ``slice`` wrap it, so a dynamic dim is not fixed)."""
    if not records(x):
        return aten.select.int(x, dim, index)
    dim = dim % x.dim()
    end = INT64_MAX if index == -1 else index + 1
    piece = aten.slice.Tensor(x, dim, index, end, 1)
    return piece.view(list(x.shape[:dim]) + list(x.shape[dim + 1:]))


def split(x: torch.Tensor, split_size: int, dim: int = 0, unsafe: bool = False) -> List[Any]:
    """``aten.split.Tensor(x, split_size, dim)`` (``unsafe``: ``aten.unsafe_split.Tensor``) over a
    static dim."""
    if not records(x):
        op = aten.unsafe_split.Tensor if unsafe else aten.split.Tensor
        return list(op(x, split_size, dim))
    size = x.shape[dim]
    return [aten.slice.Tensor(x, dim, start, min(start + split_size, size), 1)
            for start in range(0, size, split_size)]


def squeeze(x: torch.Tensor, dim: Any) -> Any:
    """``x.squeeze(dim)`` while autograd records on symbolic sizes (``SqueezeBackward1`` saves
    ``self.sizes()``): a view without ``dim`` when its size is 1, a view of ``x``'s shape
    otherwise (``squeeze`` leaves such a dim); NotImplemented over a symbolic dim (whether it
    is 1 depends on the size) or without ``dim``."""
    if not isinstance(dim, int) or not records(x):
        return NotImplemented
    dim = dim % max(x.dim(), 1)
    size = x.shape[dim] if x.dim() else 1
    if not isinstance(size, int):
        return NotImplemented
    sizes = list(x.shape)
    if size == 1 and x.dim():
        del sizes[dim]
    return x.view(sizes)


def unbind(x: torch.Tensor, dim: int = 0) -> List[torch.Tensor]:
    """``x.unbind(dim)`` over a static dim (``UnbindBackward0`` reads the gradients' concrete
    sizes: when recording, one ``select`` per index)."""
    if not records(x):
        return list(aten.unbind.int(x, dim))
    return [select(x, dim, i) for i in range(x.shape[dim])]


def _size_key(n: Any) -> Any:
    return n if isinstance(n, int) else str(n.get_pyobj().expr)   # no guard recorded


def _same_shape(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dim() == b.dim() and all(_size_key(x) == _size_key(y)
                                      for x, y in zip(a.shape, b.shape))


def same_except(a: torch.Tensor, b: torch.Tensor, dim: int) -> bool:
    """``a`` and ``b`` have the same sizes but along ``dim``."""
    return a.dim() == b.dim() and all(_size_key(x) == _size_key(y) for d, (x, y) in
                                      enumerate(zip(a.shape, b.shape)) if d != dim)


def cat(tensors: List[torch.Tensor], dim: int = 0) -> torch.Tensor:
    """``torch.cat(tensors, dim)``. ``CatBackward0`` saves its inputs' concrete sizes: when
    recording and the pieces have one shape, ``stack(tensors, dim)`` with ``dim`` and the new
    dim merged by a view — the same elements in the same places (``StackBackward0`` saves only
    ``dim``); pieces that differ only in static sizes along ``dim`` (DenseNet's and Inception's
    channel concatenations, a ViT's class token before the patches): ``_placed``. Otherwise
    ``cat`` (a symbolic size then fails the export naming it)."""
    if not any(records(t) for t in tensors):
        return torch.cat(tensors, dim)
    first = tensors[0]
    dim = dim % first.dim()
    if all(_same_shape(first, t) for t in tensors[1:]):
        sizes = list(first.shape)
        sizes[dim] = sizes[dim] * len(tensors)
        return torch.stack(tensors, dim).view(sizes)
    placed = _placed(tensors, dim)
    return torch.cat(tensors, dim) if placed is None else placed


def _placed(tensors: List[torch.Tensor], dim: int) -> Any:
    """``cat`` of pieces of one dtype whose sizes along ``dim`` are static ints and whose
    other sizes agree: the sum of the pieces each padded with zeros into place by
    ``slice_backward`` (whose autograd node saves only the bounds; its gradient is the
    piece's slice of the gradient, as ``cat``'s backward). The capture turns that sum back
    into ``cat`` (``graph_passes.slice_backward_sums_as_cat``), so the graph holds eager's op.
    None otherwise."""
    first = tensors[0]
    lengths = [t.shape[dim] if t.dim() == first.dim() else None for t in tensors]
    if not all(isinstance(n, int) for n in lengths) or \
            any(t.dtype != first.dtype for t in tensors) or \
            not all(same_except(first, t, dim) for t in tensors[1:]):
        return None
    full = list(first.shape)
    full[dim] = sum(lengths)
    out, start = None, 0
    for t, n in zip(tensors, lengths):
        piece = aten.slice_backward.default(t, full, dim, start, start + n, 1)
        out = piece if out is None else out + piece
        start += n
    return out


def logsumexp(x: torch.Tensor, dim: Any, keepdim: bool = False) -> Any:
    """``torch.logsumexp(x, dim, keepdim)`` while autograd records on symbolic sizes
    (``LogsumexpBackward0`` reads ``self.sizes()``): torch 1.13's kernel (ReduceOps.cpp
    ``logsumexp_out_impl``) op for op — ``log(sum(exp(x - m))) + m`` with ``m`` the max over
    ``dim`` (kept dims), infinite maxima taken as 0 — the same forward values, with ``m``
    outside autograd as there; autograd differentiates these ops, so the gradient,
    ``exp(x - m) / sum(exp(x - m))``, equals eager's ``exp(x - result)`` to rounding."""
    if not records(x) or not x.is_floating_point():
        return NotImplemented
    dims = [dim] if isinstance(dim, int) else list(dim)
    with torch.no_grad():
        maxes = torch.amax(x, dims, keepdim=True)
    kept = maxes.masked_fill(maxes.abs() == float("inf"), 0)
    result = torch.sum(torch.exp(x - maxes), dims, keepdim=True).log() + kept
    return _reduced(result, x, dims, keepdim)


def _reduced(result: torch.Tensor, x: torch.Tensor, dims: List[int], keepdim: bool
             ) -> torch.Tensor:
    """``result`` (reduced over ``dims`` of ``x`` with the dims kept) without them unless
    ``keepdim``."""
    if keepdim:
        return result
    for d in sorted((d % x.dim() for d in dims), reverse=True):
        result = squeeze(result, d)
    return result


def amax_amin(largest: bool, x: torch.Tensor, dim: Any = (), keepdim: bool = False) -> Any:
    """``torch.amax`` / ``amin`` over ``dim`` while autograd records on symbolic sizes
    (``AmaxBackward0`` saves ``self.sizes()``). Eager's gradient spreads evenly over the ties:
    ``grad / count * mask`` with ``mask = (x == result)``, ``count`` its sum over ``dim``
    (``scale_grad_by_count``, FunctionsManual.cpp). Here ``m`` is ATen's ``amax`` of ``x``
    detached and two sums carry that gradient, ``x / count * mask`` summed over ``dim`` —
    ``z`` of ``x``'s finite elements (infinite ones as 0), ``zi`` of the maxima alone — and the
    result is ``m - (z.detach() - z)`` where ``m`` is finite (exactly ``m``: ``z`` is finite, ``z
    - z`` is 0) and ``zi`` (``±inf``: ``m``) where it is not. Values and gradients exactly
    eager's for a finite incoming gradient; a row whose extreme is NaN (no element equals it)
    is NaN as in eager, with gradient 0 where eager's is NaN, and so is an infinite incoming
    gradient at the elements eager's ``* mask`` turns into NaN. NotImplemented for an empty
    ``dim`` (every dim) or without recording."""
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not records(x) or not x.is_floating_point() or not dims:
        return NotImplemented
    with torch.no_grad():
        m = (torch.amax if largest else torch.amin)(x, dims, keepdim=True)
        mask = x == m
        count = mask.sum(dims, keepdim=True)
        weights = mask.to(x.dtype)
    zeros = torch.zeros_like(x)
    z = torch.sum(torch.where(torch.isfinite(x), x, zeros) / count * weights, dims, keepdim=True)
    zi = torch.sum(torch.where(mask, x, zeros) / count * weights, dims, keepdim=True)
    result = torch.where(torch.isfinite(m), m - (z.detach() - z), zi)
    return _reduced(result, x, dims, keepdim)
