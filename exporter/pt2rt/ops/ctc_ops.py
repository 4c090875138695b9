"""pt2rt's CTC loss operator: ``F.ctc_loss`` (``nn.CTCLoss``) computed in a model's forward — a
speech or handwriting model fine-tuned with its loss — kept exportable and runnable for any
target lengths.

Why: ATen's ``_ctc_loss`` returns, besides the per-sample negative log-likelihood ``[N]``, the
forward variables ``log_alpha`` ``[N, T, 2 * max(target_lengths) + 1]`` that its backward
reads: a result whose size depends on the *values* of ``target_lengths``. torch 2 tags the op
``dynamic_output_shape``; a program cannot declare such a result, so the capture refused a CTC
loss in forward (torch 1.13 does not tag it: its graph declared the example's ``log_alpha``
size, and the runtime refused any batch whose longest target differed). As two pt2rt ops the
graph holds only results whose sizes follow from the input sizes:

    pt2rt::ctc_loss(Tensor log_probs, Tensor targets, Tensor input_lengths,
                    Tensor target_lengths, int blank, bool zero_infinity) -> Tensor
    pt2rt::ctc_loss_backward(Tensor grad, Tensor log_probs, Tensor targets,
                             Tensor input_lengths, Tensor target_lengths, int blank,
                             bool zero_infinity) -> Tensor

(identical in the C++ runtime, runtime/kernels/ctc_ops.cpp). ``ctc_loss`` is ``_ctc_loss``'s
negative log-likelihood: log_probs ``[T, N, C]`` (log-softmax over C, float or double),
targets ``[N, S]`` padded or ``[sum(target_lengths)]`` concatenated (int64), input_lengths and
target_lengths ``[N]`` (int64); returns ``[N]``. ``ctc_loss_backward`` returns the gradient of
log_probs, ``[T, N, C]``: it RECOMPUTES ``_ctc_loss`` (``log_alpha`` is never a saved
activation; activation checkpointing, as ``pt2rt::lstm_backward``) and calls ATen's
``_ctc_loss_backward`` with it — the same kernels, so the same values as eager's autograd,
which saved them. Graves et al. 2006, "Connectionist Temporal Classification";
https://pytorch.org/docs/stable/generated/torch.nn.CTCLoss.html.

``ctc_loss`` below is what a capture runs for ``F.ctc_loss`` / ``torch.ctc_loss``
(``traceable_ops.TraceableOps`` on both lanes): ATen's composite ``ctc_loss``
(aten/src/ATen/native/LossCTC.cpp) in Python around the op — unbatched ``[T, C]`` log_probs
unsqueezed, targets and lengths converted to int64 (the kernels move targets to log_probs'
device and read the lengths on the host, as ATen does), ``zero_infinity``'s
``where(loss == inf, 0, loss)``, then ``reduction``: ``mean`` divides each loss by its target
length clamped to >= 1 and averages, ``sum`` sums. On CUDA the runtime runs ATen's native CTC
kernels; eager PyTorch takes cuDNN's where its conditions hold (int32 targets on the CPU, blank
0, every input length T, ...), whose values agree to rounding.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.nn._reduction import get_enum

from ..ir.symbols import is_symint
from . import autograd_cuts
from .op_library import TORCH2, Fragment, defined

SCHEMA = ("ctc_loss(Tensor log_probs, Tensor targets, Tensor input_lengths, "
          "Tensor target_lengths, int blank, bool zero_infinity) -> Tensor")
BACKWARD_SCHEMA = ("ctc_loss_backward(Tensor grad, Tensor log_probs, Tensor targets, "
                   "Tensor input_lengths, Tensor target_lengths, int blank, bool zero_infinity) "
                   "-> Tensor")


def _aten_ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
    """ATen's ``_ctc_loss`` (the ``IntArrayRef`` overload, as eager's ``ctc_loss`` calls it on
    either overload) with targets moved to log_probs' device, as there: (nll, log_alpha,
    targets, input_lengths, target_lengths), the last three as passed to it."""
    targets = targets.to(device=log_probs.device, dtype=torch.long)
    il, tl = input_lengths.tolist(), target_lengths.tolist()
    nll, log_alpha = torch.ops.aten._ctc_loss.default(log_probs, targets, il, tl, blank,
                                                      zero_infinity)
    return nll, log_alpha, targets, il, tl


def _nll(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
    return _aten_ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                          zero_infinity)[0]


def _nll_backward(grad, log_probs, targets, input_lengths, target_lengths, blank,
                  zero_infinity):
    nll, log_alpha, targets, il, tl = _aten_ctc_loss(log_probs, targets, input_lengths,
                                                     target_lengths, blank, zero_infinity)
    return torch.ops.aten._ctc_loss_backward.default(grad, log_probs, targets, il, tl, nll,
                                                     log_alpha, blank, zero_infinity)


def _nll_shape(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
    return log_probs.new_empty((log_probs.shape[1],))


def _nll_backward_shape(grad, log_probs, *args):
    return log_probs.new_empty(log_probs.shape)


_FRAGMENT: Any = None  # keeps the registrations alive


def register() -> None:
    """Defines ``pt2rt::ctc_loss`` and ``pt2rt::ctc_loss_backward`` with CPU/CUDA kernels and a
    shape rule, once per process (left alone where already defined)."""
    global _FRAGMENT
    if _FRAGMENT is not None or defined("ctc_loss"):
        return
    fragment = Fragment()
    fragment.define(SCHEMA)
    fragment.define(BACKWARD_SCHEMA)
    for key in ("CPU", "CUDA"):
        fragment.impl("ctc_loss", _nll, key)
        fragment.impl("ctc_loss_backward", _nll_backward, key)
    fragment.shape_rule("ctc_loss", _nll_shape)
    fragment.shape_rule("ctc_loss_backward", _nll_backward_shape)
    _FRAGMENT = fragment


class _CTCFunction(torch.autograd.Function):
    """``pt2rt::ctc_loss`` forward, ``pt2rt::ctc_loss_backward`` backward (log_probs only, as
    ATen's derivative of ``_ctc_loss``)."""

    @staticmethod
    def forward(ctx, flags, log_probs, targets, input_lengths, target_lengths):
        ctx.flags = flags
        ctx.save_for_backward(log_probs, targets, input_lengths, target_lengths)
        return torch.ops.pt2rt.ctc_loss.default(log_probs, targets, input_lengths,
                                                target_lengths, *flags)

    @staticmethod
    def backward(ctx, grad):
        log_probs, targets, input_lengths, target_lengths = ctx.saved_tensors
        return None, torch.ops.pt2rt.ctc_loss_backward.default(
            grad, log_probs, targets, input_lengths, target_lengths, *ctx.flags), None, None, None


def _differentiable_nll(flags, log_probs, targets, input_lengths, target_lengths):
    """``pt2rt::ctc_loss`` differentiated by ``pt2rt::ctc_loss_backward``: an
    ``autograd.Function``, or on symbolic sizes under torch 1.13 (whose ``autograd.Function``
    cannot return them) an ``autograd_cuts`` cut."""
    if TORCH2 or not any(is_symint(s) for t in (log_probs, targets) for s in t.shape):
        return _CTCFunction.apply(flags, log_probs, targets, input_lengths, target_lengths)
    with torch.no_grad():
        nll = torch.ops.pt2rt.ctc_loss.default(log_probs, targets, input_lengths,
                                               target_lengths, *flags)

    def backward(go):
        return [torch.ops.pt2rt.ctc_loss_backward.default(
            go[0], log_probs, targets, input_lengths, target_lengths, *flags), None, None, None]
    return autograd_cuts.record([log_probs, targets, input_lengths, target_lengths], (nll,),
                                backward)[0]


def _lengths(lengths: Any) -> torch.Tensor:
    """Lengths as an int64 tensor [N] (a list of ints: a constant on the CPU; no device is
    written into the graph: the kernels read lengths on the host wherever they are)."""
    if isinstance(lengths, torch.Tensor):
        return lengths.to(dtype=torch.long).reshape(-1)
    return torch.tensor(list(lengths), dtype=torch.long)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1,
             zero_infinity=False):
    """``torch.ctc_loss`` (``reduction`` an int: 0 none, 1 mean, 2 sum) through the ops."""
    register()
    batched = log_probs.dim() == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    target_lengths = _lengths(target_lengths)
    loss = _differentiable_nll((int(blank), bool(zero_infinity)), lp,
                               targets.to(dtype=torch.long), _lengths(input_lengths),
                               target_lengths)
    if zero_infinity:
        loss = torch.where(loss == float("inf"), loss.new_zeros(()), loss)
    if reduction == 1:
        per_target = loss / target_lengths.clamp_min(1)
        if is_symint(per_target.shape[0]):   # 1.13's MeanBackward0 saves concrete sizes
            return per_target.mean(dim=[0])  # ATen's mean(): mean over every dim, the same
        return per_target.mean()
    if reduction == 2:
        return loss.sum()
    return loss if batched else loss.squeeze(0)


def functional_ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0,
                        reduction="mean", zero_infinity=False):
    """``F.ctc_loss``: its ``reduction`` string turned into the enum as there
    (``torch.nn._reduction.get_enum``, which raises for an unknown one)."""
    return ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                    get_enum(reduction), zero_infinity)
