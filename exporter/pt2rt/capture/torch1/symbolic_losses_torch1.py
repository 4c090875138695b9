"""Loss functions on symbolic sizes for a torch 1.13 dynamic-shape capture (entered with the
other rules by ``symbolic_rules_torch1.symbolic_rules``; the user's torch is left as it was).

A model that computes its loss in ``forward`` (a training step exported whole) with a dynamic
batch stopped at the loss on torch 1.13: ``F.cross_entropy`` and ``F.nll_loss`` reach ATen's
C++ composites ``cross_entropy_loss`` and ``nll_loss_nd`` (aten/src/ATen/native/LossNLL.cpp),
which read concrete sizes; ``smooth_l1_loss`` and ``multi_margin_loss`` have no symbolic meta
function, ``mse_loss_backward`` and ``huber_loss_backward`` none either, and the decompositions of
``nll_loss_forward`` and ``nll_loss2d_forward`` take no SymInt.

* ``loss_meta_rules()``: output metadata for those ops and the NLL ones (added to
  ``torch._meta_registrations.meta_table``): ``reduction`` ``none`` (0) gives the broadcast
  shape of the operands (TensorIterator), ``mean`` (1) and ``sum`` (2) a 0-dim tensor; the
  backward ops a gradient of ``self``'s shape. The graph keeps the ATen op; the runtime runs
  ATen's kernel.
* ``loss_kernels()``: (op, CompositeImplicitAutograd Python kernel) pairs, run instead of the
  C++ composites while a capture traces (``OpOverload.py_kernels``, which the Python dispatcher
  calls): ``l1_loss`` and ``triplet_margin_loss`` as Loss.cpp's (their ``mean()`` reads sizes
  when autograd records);
  ``nll_loss_nd`` as LossNLL.cpp's ``nll_loss_nd`` for inputs of 1, 2 or 4 dims
  (``nll_loss`` / ``nll_loss2d``); ``cross_entropy_loss`` as torch 1.13's composite, op for op
  (class indices, class probabilities, ``label_smoothing``, ``weight``). The graph holds what
  eager's dispatch records below those composites (``_log_softmax``, ``nll_loss_forward``, the
  smoothing term's reductions), as the static capture's does; label smoothing with a class
  weight and ``mean`` sums the weights of the targets not ignored as 1.13's composite does for
  a tensor-subclass weight (``gather`` and ``masked_fill``; for a plain tensor it
  ``masked_select``s, a data-dependent size): the same sum. Whether the Python dispatcher runs
  these kernels or 1.13's C++ composites depends on the modes active (an inference trace runs
  the C++ ones, which then only reach ``nll_loss_nd``); either computes eager's values.
  Refused by name: a symbolic number of classes with probabilities or label smoothing,
  ``nll_loss`` over 3 or 5+ dims.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import torch

from .symbolic_autograd_torch1 import symbolic
from .symbolic_meta_torch1 import mean_all, static_int

aten = torch.ops.aten

_NONE, _SUM = 0, 2  # at::Reduction::None, Sum (Mean: 1)


def _reduced(reduction: int, *operands: Any) -> torch.Tensor:
    first = operands[0]
    if reduction != _NONE:
        return first.new_empty(())
    shapes = [t.shape for t in operands if isinstance(t, torch.Tensor)]
    return first.new_empty(torch.broadcast_shapes(*shapes))


def _smooth_l1_loss(self, target, reduction=1, beta=1.0):
    return _reduced(reduction, self, target)


def _gradient_of_self(grad_output, self, *args, **kwargs):
    return self.new_empty(self.shape)


def _nll_loss_forward(self, target, weight, reduction, ignore_index):
    """``nll_loss_forward`` / ``nll_loss2d_forward`` (LossNLL.cpp, LossNLL2d.cpp): the loss —
    the target's shape for ``none`` over a batch, else 0-dim — and the 0-dim total weight."""
    batched = self.dim() >= 2
    loss = self.new_empty(target.shape if reduction == _NONE and batched else ())
    return loss, self.new_empty(())


def _multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=1):
    # LossMultiMargin.cpp: [N] for `none` over a batch, else 0-dim
    return self.new_empty(self.shape[:1] if reduction == _NONE and self.dim() == 2 else ())


def loss_meta_rules() -> Dict[Any, Callable]:
    return {
        aten.multi_margin_loss.default: _multi_margin_loss,
        aten.multi_margin_loss_backward.default: _gradient_of_self,
        aten.nll_loss_forward.default: _nll_loss_forward,
        aten.nll_loss_backward.default: _gradient_of_self,
        aten.nll_loss2d_forward.default: _nll_loss_forward,
        aten.nll_loss2d_backward.default: _gradient_of_self,
        aten.smooth_l1_loss.default: _smooth_l1_loss,
        aten.smooth_l1_loss_backward.default: _gradient_of_self,
        aten.mse_loss_backward.default: _gradient_of_self,
        aten.huber_loss_backward.default: _gradient_of_self,
    }


def _refused(what: str) -> RuntimeError:
    # the marker symbolic_meta_torch1.no_symbolic_rule recognises: refused by name
    return RuntimeError(f"Cannot call sizes() on tensor with symbolic sizes/strides: {what}")


def _nll_loss_nd(self, target, weight=None, reduction=1, ignore_index=-100):
    """LossNLL.cpp ``nll_loss_nd``: ``nll_loss`` for 1 or 2 dims, ``nll_loss2d`` for 4."""
    if self.dim() in (1, 2):
        return aten.nll_loss.default(self, target, weight, reduction, ignore_index)
    if self.dim() == 4:
        return aten.nll_loss2d.default(self, target, weight, reduction, ignore_index)
    raise _refused(f"nll_loss over an input of {self.dim()} dims (ATen reshapes it to 2 or 4)")


def _cross_entropy_loss(self, target, weight=None, reduction=1, ignore_index=-100,
                        label_smoothing=0.0):
    """torch 1.13's ``cross_entropy_loss`` (LossNLL.cpp) op for op, as its static trace records
    it: ``log_softmax`` over the class dim, then ``nll_loss_nd`` for class indices, plus, with
    ``label_smoothing``, the smoothing term with ignored targets zeroed
    (``cross_entropy_loss_label_smoothing``); for class probabilities
    (``cross_entropy_loss_prob_target``) the weighted sum of ``target * log_softmax``, the mean
    dividing by ``numel / n_classes``."""
    class_dim = 0 if self.dim() == 1 else 1
    logp = aten.log_softmax.int(self, class_dim, self.dtype)
    if not target.is_floating_point() and label_smoothing <= 0.0:
        return _nll_loss_nd(logp, target, weight, reduction, ignore_index)
    n_classes = static_int(self.shape[class_dim])
    if not isinstance(n_classes, int):
        raise _refused("cross_entropy with class probabilities or label_smoothing over a "
                       "symbolic number of classes")
    w = weight
    if weight is not None and logp.dim() > 1:  # broadcast along the class dim
        w = weight.view([n_classes if d == class_dim else 1 for d in range(logp.dim())])
    if target.is_floating_point():
        if label_smoothing > 0.0:
            target = aten.add.Scalar(aten.mul.Scalar(target, 1 - label_smoothing),
                                     label_smoothing / n_classes)
        terms = logp * target if w is None else logp * target * w
        if reduction == _NONE:
            return -terms.sum(class_dim)
        total = -terms.sum()
        if reduction == _SUM:
            return total
        count = 1
        for n in logp.shape:
            count = count * n
        return total / (count // n_classes)
    nll = _nll_loss_nd(logp, target, weight, reduction, ignore_index)
    smooth = -(logp if w is None else logp * w).sum(class_dim)
    ignored = target == ignore_index
    smooth = smooth.masked_fill(ignored, 0.0)
    if reduction == _NONE:
        ret = smooth
    elif reduction == _SUM:
        ret = smooth.sum()
    elif weight is None:
        ret = smooth.sum() / (~ignored).sum()
    else:
        # the sum of the weights of the targets not ignored, as 1.13 computes it for a weight
        # that is a tensor subclass (a fake one here: its plain-tensor path masked_selects)
        picked = weight.gather(0, target.masked_fill(ignored, 0).flatten())
        ret = smooth.sum() / picked.masked_fill(ignored.flatten(), 0).sum()
    return aten.add.Tensor(aten.mul.Scalar(nll, 1 - label_smoothing),
                           aten.mul.Scalar(ret, label_smoothing / n_classes))


def bce_with_logits(input, target, weight=None, size_average=None, reduce=None,
                    reduction="mean", pos_weight=None) -> Any:
    """``F.binary_cross_entropy_with_logits`` on symbolic sizes: torch 1.13's kernel (Loss.cpp
    ``binary_cross_entropy_with_logits``) op for op — the stable ``(1 - t) x + m + log(e^-m +
    e^(-x-m))`` with ``m = max(-x, 0)``, ``pos_weight`` weighting the log term, ``weight`` the
    loss, then the reduction — the same forward values. 1.13's fused op reads concrete sizes
    when functionalized and its backward formula ``numel()``, so autograd differentiates these
    ops instead: gradients equal eager's to rounding (``(sigmoid(x) - t) g``, reached through
    ``exp``/``log``). NotImplemented (torch's own) on static sizes and for the deprecated
    ``size_average`` / ``reduce``."""
    if size_average is not None or reduce is not None or \
            not (symbolic(input) or symbolic(target)):
        return NotImplemented
    max_val = (-input).clamp_min(0)
    log_term = ((-max_val).exp() + (-input - max_val).exp()).log()
    if pos_weight is None:
        loss = (1 - target) * input + max_val + log_term
    else:
        log_weight = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + log_weight * (log_term + max_val)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, {"none": _NONE, "sum": _SUM}.get(reduction, 1))


def _reduce(loss: torch.Tensor, reduction: int) -> torch.Tensor:
    """Loss.h ``apply_loss_reduction``: ``mean()`` (over every dim while autograd records:
    ``mean_all``), ``sum()`` or the loss itself."""
    if reduction == _NONE:
        return loss
    if reduction == _SUM:
        return loss.sum()
    mean = mean_all(loss)
    return loss.mean() if mean is NotImplemented else mean


def _l1_loss(self, target, reduction=1):
    """torch 1.13's ``l1_loss`` (Loss.cpp): ``|self - target|``, reduced."""
    return _reduce((self - target).abs(), reduction)


def _triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False,
                         reduction=1):
    """torch 1.13's ``triplet_margin_loss`` (Loss.cpp): ``max(margin + d(a, p) - d(a, n), 0)``
    with ``d`` = ``pairwise_distance`` (``d(a, n)`` the smaller of it and ``d(p, n)`` with
    ``swap``), reduced — its ``mean()`` reads sizes when autograd records."""
    dist_pos = aten.pairwise_distance.default(anchor, positive, p, eps)
    dist_neg = aten.pairwise_distance.default(anchor, negative, p, eps)
    if swap:
        dist_neg = torch.min(dist_neg, aten.pairwise_distance.default(positive, negative, p, eps))
    return _reduce(torch.clamp_min(margin + dist_pos - dist_neg, 0), reduction)


def loss_kernels() -> List[Tuple[Any, Callable]]:
    return [(aten.l1_loss.default, _l1_loss),
            (aten.triplet_margin_loss.default, _triplet_margin_loss),
            (aten.nll_loss_nd.default, _nll_loss_nd),
            (aten.cross_entropy_loss.default, _cross_entropy_loss)]
