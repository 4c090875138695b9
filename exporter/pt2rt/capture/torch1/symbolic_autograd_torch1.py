"""``select``, ``squeeze``, ``split``, ``unbind``, ``cat``, ``max`` / ``min`` over a dim,
``gather`` of a few elements per row, ``topk`` and ``logsumexp`` for a dynamic-shape capture on torch 1.13,
whose autograd nodes cannot be recorded on symbolic sizes there.

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
# picks per row re-expressed by gather / topk: each is a masked sum over the whole row, so the
# graph grows by a few ops per pick; more picks than this go to torch's own op (refused by name)
MAX_PICKS = 64


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


def _same_except(a: torch.Tensor, b: torch.Tensor, dim: int) -> bool:
    """``a`` and ``b`` have the same sizes but along ``dim``."""
    return a.dim() == b.dim() and all(_size_key(x) == _size_key(y) for d, (x, y) in
                                      enumerate(zip(a.shape, b.shape)) if d != dim)


def _picked(x: torch.Tensor, dim: int, index: torch.Tensor, keepdim: bool) -> torch.Tensor:
    """The elements of ``x`` at ``index`` (one per row along ``dim``, ``index.size(dim) ==
    1``) as the sum over ``dim`` of ``where(one-hot of index, x, 0)``: the element itself (NaN
    and inf included; a -0.0 reads +0.0); its gradient, ``where(mask, grad, 0)``, is the
    gradient scattered at ``index`` into zeros, exactly — ``gather_backward`` and
    ``value_selecting_reduction_backward``."""
    mask = torch.zeros_like(x, dtype=torch.bool).scatter(dim, index, True)
    return torch.where(mask, x, torch.zeros_like(x)).sum(dim, keepdim=keepdim)


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
            not all(_same_except(first, t, dim) for t in tensors[1:]):
        return None
    full = list(first.shape)
    full[dim] = sum(lengths)
    out, start = None, 0
    for t, n in zip(tensors, lengths):
        piece = aten.slice_backward.default(t, full, dim, start, start + n, 1)
        out = piece if out is None else out + piece
        start += n
    return out


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
    if not isinstance(k, int) or not 1 <= k <= MAX_PICKS or not _same_except(index, x, dim):
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
    if keepdim:
        return result
    for d in sorted((d % x.dim() for d in dims), reverse=True):
        result = squeeze(result, d)
    return result
