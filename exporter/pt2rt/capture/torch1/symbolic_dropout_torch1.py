"""Dropout on symbolic sizes for a torch 1.13 dynamic-shape capture: ATen's ``_dropout_impl``
(aten/src/ATen/native/Dropout.cpp) in Python, whose C++ reads ``numel()``. Entered as
``F.dropout`` (``symbolic_rules_torch1.SymbolicFunctions``) and as the CompositeImplicitAutograd
kernels of ``aten.dropout``, ``feature_dropout``, ``alpha_dropout`` and
``feature_alpha_dropout`` (``symbolic_dispatch_torch1``). Each draws the same RNG numbers as
eager (one ``bernoulli_`` over a mask of the same shape) and computes the same values."""
from __future__ import annotations

import math

import torch


def aten_dropout(input, p=0.5, training=True, inplace=False):
    if not training or p == 0:
        return input
    if p == 1:
        return input.mul_(0) if inplace else input * 0
    mask = torch.empty_like(input).bernoulli_(1 - p) / (1 - p)  # div_ in ATen: same values
    return input.mul_(mask) if inplace else input * mask


def aten_feature_dropout(input, p, train, *, feature=True, alpha=False):
    """ATen's ``_dropout_impl`` (aten/src/ATen/native/Dropout.cpp) for ``feature_dropout``
    (``F.dropout1d/2d/3d``), ``alpha_dropout`` and ``feature_alpha_dropout``: the noise is
    ``[N, C, 1, ...]`` (``make_feature_noise``) or ``input``'s shape, drawn by ``bernoulli_(1 -
    p)``; then divided by ``1 - p``, or, for alpha dropout, ``b = (noise - 1) * alpha * a +
    alpha * a * p`` and ``noise * a`` (SELU's alpha, ``a = 1 / sqrt((alpha² p + 1)(1 - p))``);
    the result ``input * noise (+ b)``: the same RNG draws and values as eager."""
    if p == 0 or not train:
        return input
    if p == 1:
        return input * input.new_zeros(())
    if feature:
        noise = input.new_empty([input.shape[0], input.shape[1]] + [1] * (input.dim() - 2))
    else:
        noise = torch.empty_like(input)
    noise.bernoulli_(1 - p)
    # out of place where ATen works in place (noise.div_, mul_, add_): the same values, and
    # functionalization of the in-place ops reads numel() on 1.13
    if not alpha:
        return input * (noise / (1 - p))
    selu_alpha = 1.7580993408473766
    a = 1. / math.sqrt((selu_alpha * selu_alpha * p + 1) * (1 - p))
    b = (noise - 1) * (selu_alpha * a) + selu_alpha * a * p
    return input * (noise * a) + b
