"""Module forwards (and functions) that the captures run in place of torch.nn's, where torch.nn's
cannot be captured but an equivalent computation on tensors can.

``BatchNorm*`` with ``momentum=None`` (cumulative moving average) computes its update factor as
a Python float, ``1.0 / float(self.num_batches_tracked)`` (torch/nn/modules/batchnorm.py), and
passes it to ``aten::batch_norm``'s ``float momentum``: a data-dependent value that no
static-shape tracer can keep (torch 1.13's make_fx, AOTAutograd and ``torch.export`` all refuse
it). ``cumulative_batch_norm_forward`` computes the same update with tensor ops — the factor
``1 / num_batches_tracked`` read from the buffer at run time:

    num_batches_tracked += 1;  f = 1 / num_batches_tracked
    out = batch_norm(x, None, None, weight, bias, training=True, eps)      # batch statistics
    running_mean <- (1 - f) * running_mean + f * mean(x)
    running_var  <- (1 - f) * running_var  + f * var(x, unbiased)

as ATen's ``batch_norm_cpu_update_stats_template`` does with ``momentum = f`` (running variance
from the unbiased batch variance). Eval mode and modules without running stats keep torch.nn's
forward (momentum is not used there). ``capturable(model)`` installs these forwards on the
model's own instances for the duration of a capture and restores them afterwards.

``nn.TransformerDecoder`` / ``nn.TransformerEncoder`` (torch >= 2.0) given a mask but no
``is_causal`` hint call ``torch.nn.modules.transformer._detect_is_causal_mask``, which compares
the mask with a causal one (``bool((mask == causal).all())``): a data-dependent read. Its
answer only chooses between two computations of the same attention — with it True the layers
pass ``is_causal=True`` and ``multi_head_attention_forward`` may drop the mask for SDPA's causal
flag, which masks the same positions (the answer is True only when the mask *is* that causal
mask). During a capture ``capturable`` makes it answer what eager answers without looking at
the mask: the explicit hint (``is_causal is True``), so the layers apply the mask as given.
An ``nn.Transformer`` with ``generate_square_subsequent_mask`` as ``tgt_mask`` then exports.

``F.one_hot`` (torch 1.13 capture only; torch 2.x decomposes it with ``_assert_async`` checks):
ATen's ``one_hot`` validates its indices with ``min().item()`` / ``max().item()`` — data-dependent
reads make_fx cannot trace. ``one_hot_traceable`` gives the same int64 result as a row
gather from the identity, ``eye(num_classes).index_select(0, indices)``: ``index_select``
raises for an index outside ``[0, num_classes)`` at run time as ``one_hot`` does (a graph
never turns a bad class index into a silent zero row).
"""
from __future__ import annotations

import contextlib
import types
from typing import Iterator, Optional

import torch
import torch.nn.functional as F


def cumulative_batch_norm_forward(self: torch.nn.modules.batchnorm._BatchNorm,
                                  input: torch.Tensor) -> torch.Tensor:
    """``_BatchNorm.forward`` for ``momentum=None`` in training mode, with tensor ops only."""
    if not (self.training and self.track_running_stats and self.num_batches_tracked is not None):
        return type(self).forward(self, input)
    self._check_input_dim(input)
    self.num_batches_tracked.add_(1)
    factor = torch.reciprocal(self.num_batches_tracked.to(self.running_mean.dtype))
    out = F.batch_norm(input, None, None, self.weight, self.bias, True, 0.0, self.eps)
    with torch.no_grad():
        dims = [0] + list(range(2, input.dim()))
        x = input.detach()
        mean = x.mean(dims)
        var = x.var(dims, unbiased=True)
        self.running_mean.mul_(1 - factor).add_(factor * mean)
        self.running_var.mul_(1 - factor).add_(factor * var)
    return out


def one_hot_traceable(tensor: torch.Tensor, num_classes: int = -1) -> torch.Tensor:
    """``F.one_hot(tensor, num_classes)`` (int64 ``[*tensor.shape, num_classes]``) without
    data-dependent reads; see the module docstring.

    Raises:
        ExportError: ``num_classes`` not given (-1): the output size would be
            ``tensor.max() + 1``, a value of the data.
    """
    from ..errors import ExportError
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 0:
        raise ExportError(f"pt2rt.export: F.one_hot(..., num_classes={num_classes!r}): without "
                          "an explicit num_classes the output size is max(tensor) + 1, a value "
                          "of the data the graph cannot fix; pass num_classes")
    if tensor.dtype != torch.int64:  # ATen: "one_hot is only applicable to index tensor"
        return F.one_hot(tensor, num_classes)
    eye = torch.eye(num_classes, dtype=torch.int64, device=tensor.device)
    rows = eye.index_select(0, tensor.reshape(-1))
    return rows.reshape(*tensor.shape, num_classes)


def _needs_rewrite(m: torch.nn.Module) -> bool:
    return isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.momentum is None \
        and m.track_running_stats


def causal_hint_only(mask: Optional[torch.Tensor], is_causal: Optional[bool] = None,
                     size: Optional[int] = None) -> bool:
    """``_detect_is_causal_mask`` without reading the mask (module docstring): the caller's
    hint, else False (the mask is applied as given)."""
    return is_causal is True


@contextlib.contextmanager
def capturable(model: torch.nn.Module) -> Iterator[None]:
    """Runs the model's ``momentum=None`` BatchNorm modules with
    ``cumulative_batch_norm_forward`` and torch.nn's causal-mask detection with
    ``causal_hint_only`` (see the module docstring) until exit."""
    from torch.nn.modules import transformer
    patched = [m for m in model.modules() if _needs_rewrite(m) and "forward" not in vars(m)]
    detect = getattr(transformer, "_detect_is_causal_mask", None)  # torch >= 2.0
    for m in patched:
        m.forward = types.MethodType(cumulative_batch_norm_forward, m)
    if detect is not None:
        transformer._detect_is_causal_mask = causal_hint_only
    try:
        yield
    finally:
        for m in patched:
            del m.forward
        if detect is not None:
            transformer._detect_is_causal_mask = detect
