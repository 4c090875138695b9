"""Decompositions applied while tracing on torch 1.13 (``make_fx(decomposition_table=...)``).

torch 1.13's ``aten::native_batch_norm`` updates ``running_mean`` / ``running_var`` inside the
kernel although its schema carries no alias annotation on them, so functionalization never sees
the mutation and the running-stat update would be lost from the captured graph. The entry below
re-expresses the training-mode call with explicit, visible in-place copies:

    out, save_mean, save_invstd = native_batch_norm(x, w, b, None, None, True, momentum, eps)
    running_mean.copy_(momentum * save_mean + (1 - momentum) * running_mean)
    running_var.copy_(momentum * var(x, dims, unbiased=True) + (1 - momentum) * running_var)

which is what the CPU/CUDA kernels compute (batch_norm_cpu_update_stats_template: the running
variance takes the unbiased batch variance). Functionalization then turns the copies into
``InputMutation`` outputs. Decompositions run below autograd, so autograd still records the
original ``native_batch_norm`` and the backward stays ``native_batch_norm_backward``.
"""
from __future__ import annotations

from typing import Callable, Dict

import torch

aten = torch.ops.aten


def _native_batch_norm_visible_stats(input, weight, bias, running_mean, running_var, training,
                                     momentum, eps):
    if not training or running_mean is None or running_var is None:
        return NotImplemented  # no hidden mutation: trace the op itself
    out, save_mean, save_invstd = aten.native_batch_norm.default(
        input, weight, bias, None, None, True, momentum, eps)
    dims = [0] + list(range(2, input.dim()))
    unbiased_var = aten.var.correction(input, dims, correction=1)
    new_mean = aten.add.Tensor(aten.mul.Tensor(save_mean, momentum),
                               aten.mul.Tensor(running_mean, 1.0 - momentum))
    new_var = aten.add.Tensor(aten.mul.Tensor(unbiased_var, momentum),
                              aten.mul.Tensor(running_var, 1.0 - momentum))
    aten.copy_.default(running_mean, new_mean)
    aten.copy_.default(running_var, new_var)
    return out, save_mean, save_invstd


def training_decompositions() -> Dict[torch._ops.OpOverload, Callable]:
    """The decomposition table for the joint (training) trace."""
    return {aten.native_batch_norm.default: _native_batch_norm_visible_stats}
