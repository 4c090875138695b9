"""Pooling and padding on symbolic sizes for a torch 1.13 dynamic-shape capture: the
CompositeImplicitAutograd kernels of ``max_pool1d``, ``avg_pool1d``, ``adaptive_avg_pool1d`` and
``adaptive_avg_pool2d`` (``pooling_kernels``, entered as Python kernels by
``symbolic_dispatch_torch1``), whose 1.13 C++ reads concrete sizes or squeezes through
``SqueezeBackward1`` (concrete sizes), and ``F.pad(mode="circular")`` (``pad_circular``: ATen's
``_pad_circular`` allocates the padded tensor by concrete sizes). Each is the ops ATen's
implementation runs (Pooling.cpp, AdaptiveAveragePooling.cpp, PadNd.cpp), the squeezes through
``symbolic_autograd_torch1.squeeze``: the same values."""
from __future__ import annotations

from typing import Any, List, Tuple

import torch

from . import symbolic_autograd_torch1 as autograd_ops

aten = torch.ops.aten


def _squeezed(out: torch.Tensor, dim: int) -> torch.Tensor:
    squeezed = autograd_ops.squeeze(out, dim)
    return out.squeeze(dim) if squeezed is NotImplemented else squeezed


def max_pool1d_kernel(self: torch.Tensor, kernel_size: Any, stride: Any = (),
                       padding: Any = (0,), dilation: Any = (1,),
                       ceil_mode: bool = False) -> torch.Tensor:
    """``aten.max_pool1d``'s CompositeImplicitAutograd kernel while a capture traces: ATen's
    path when autograd records always (MaxPooling.cpp: the values of
    ``max_pool1d_with_indices``, Pooling.cpp: ``max_pool2d_with_indices`` over
    ``self.unsqueeze(-2)`` with a 1-high window, squeezed), for its CPU inference path reads
    concrete sizes; the squeeze through ``symbolic_autograd_torch1.squeeze`` (whose autograd
    node takes symbolic sizes). The same values."""
    stride = list(stride) or list(kernel_size)
    out, _ = aten.max_pool2d_with_indices.default(
        self.unsqueeze(-2), [1, kernel_size[0]], [1, stride[0]], [0, padding[0]],
        [1, dilation[0]], ceil_mode)
    return _squeezed(out, -2)


def avg_pool1d_kernel(self: torch.Tensor, kernel_size: Any, stride: Any = (),
                      padding: Any = (0,), ceil_mode: bool = False,
                      count_include_pad: bool = True) -> torch.Tensor:
    """``aten.avg_pool1d`` (Pooling.cpp): ``avg_pool2d`` over ``self.unsqueeze(-2)`` with a
    1-high window, squeezed."""
    stride = list(stride) or list(kernel_size)
    out = aten.avg_pool2d.default(self.unsqueeze(-2), [1, kernel_size[0]], [1, stride[0]],
                                  [0, padding[0]], ceil_mode, count_include_pad)
    return _squeezed(out, -2)


def adaptive_avg_pool1d_kernel(self: torch.Tensor, output_size: Any) -> torch.Tensor:
    """``aten.adaptive_avg_pool1d`` (AdaptiveAveragePooling.cpp): ``adaptive_avg_pool2d`` over
    ``self.unsqueeze(-2)`` to ``[1, output_size]``, squeezed."""
    out = adaptive_avg_pool2d_kernel(self.unsqueeze(-2), [1, list(output_size)[0]])
    return _squeezed(out, -2)


def adaptive_avg_pool2d_kernel(input: torch.Tensor, output_size: Any) -> torch.Tensor:
    """``aten.adaptive_avg_pool2d``'s CompositeImplicitAutograd kernel while a capture traces
    (ATen's ``adaptive_avg_pool2d``, AdaptiveAveragePooling.cpp: the mean over the last two dims
    for a 1x1 output, else ``_adaptive_avg_pool2d``; the channels-last restriding it applies to
    a 1x1 result changes no element)."""
    if list(output_size) == [1, 1]:
        return input.mean([-1, -2], keepdim=True)
    return aten._adaptive_avg_pool2d.default(input, output_size)


def pooling_kernels() -> List[Tuple[Any, Any]]:
    """(op, CompositeImplicitAutograd Python kernel) pairs."""
    return [(aten.max_pool1d.default, max_pool1d_kernel),
            (aten.avg_pool1d.default, avg_pool1d_kernel),
            (aten.adaptive_avg_pool1d.default, adaptive_avg_pool1d_kernel),
            (aten.adaptive_avg_pool2d.default, adaptive_avg_pool2d_kernel)]


def pad_circular(x: torch.Tensor, pad: Any) -> Any:
    """``F.pad(x, pad, mode="circular")`` over static dims: per padded dim, last first, the
    kept part (a negative pad crops) with its last ``left`` elements before it and its first
    ``right`` after it — ATen's ``_pad_circular`` (PadNd.cpp) copies the same elements, corners
    included (each dim pads the already padded result). The pieces joined by
    ``symbolic_autograd_torch1.cat``; a gradient element that several copies feed is their
    sum, equal to eager's to rounding. NotImplemented over a symbolic dim or a pad ATen
    refuses (its own op then raises)."""
    if len(pad) % 2 or len(pad) // 2 > x.dim() - 2:
        return NotImplemented
    out = x
    for i in range(len(pad) // 2):
        dim = x.dim() - 1 - i
        left, right = pad[2 * i], pad[2 * i + 1]
        size = out.shape[dim]
        if not all(isinstance(v, int) for v in (size, left, right)) or left > size \
                or right > size:
            return NotImplemented
        core = aten.slice.Tensor(out, dim, max(-left, 0), size - max(-right, 0), 1)
        kept = core.shape[dim]
        pieces = ([aten.slice.Tensor(core, dim, kept - left, kept, 1)] if left > 0 else []) \
            + [core] + ([aten.slice.Tensor(core, dim, 0, right, 1)] if right > 0 else [])
        out = autograd_ops.cat(pieces, dim) if len(pieces) > 1 else core
    return out
