"""Dispatcher-level patches pt2rt applies to torch 1.13 for the duration of a dynamic-shape
capture (``dispatch_patches``, entered by ``symbolic_rules_torch1.symbolic_rules``; everything is
restored afterwards, the user's torch is left as it was).

They act below the Python function level, so they also apply inside torch functions that run
their body with ``__torch_function__`` modes popped (``F.multi_head_attention_forward``):

* Python kernels (``OpOverload.py_kernels``, what ``enable_python_dispatcher`` calls):
  - Meta: ``select.int``, ``unbind.int``, ``split.Tensor`` — functionalization computes a view
    op's metadata by running it on meta copies of the tensors, with the op's Meta kernel;
    torch 1.13's read concrete sizes (``select``: C++; ``unbind``: ``torch._refs.unbind`` via
    ``tensor_split``; ``split``: its decomposition via ``narrow``); pt2rt's meta rules instead;
    ``_weight_norm_interface`` and its backward (``nn.utils.weight_norm``), which 1.13 has no
    Meta kernel for, so a fake tensor of a weight-normed parameter could not be run at all;
  - CompositeImplicitAutograd: ``chunk`` — ATen's ``chunk`` (TensorShape.cpp) is
    ``split(ceil(size / chunks), dim)``: ``symbolic_meta_torch1.chunk_as_split`` (refused over
    a symbolic dim); ``dropout`` (e.g. on the attention weights) — ATen's ``_dropout_impl``
    reads ``numel()``: ``symbolic_dropout_torch1.aten_dropout``; ``adaptive_avg_pool2d`` (ConvNeXt's head on a channels-last-strided input) — ATen's
    (AdaptiveAveragePooling.cpp) is ``mean([-1, -2], keepdim=True)`` for an output of 1x1 and
    ``_adaptive_avg_pool2d`` otherwise (whose shape is a meta rule); ``feature_dropout``,
    ``alpha_dropout``, ``feature_alpha_dropout`` (Dropout.cpp's read ``numel()``):
    ``symbolic_dropout_torch1.aten_feature_dropout``; ``nll_loss_nd`` and ``cross_entropy_loss``
    (LossNLL.cpp's read sizes): ``symbolic_losses_torch1.loss_kernels``; ``cosine_similarity``
    (Distance.cpp's broadcast reads sizes): the same ops in Python; ``max_pool1d`` (its CPU
    inference path reads sizes): ``max_pool2d_with_indices``, as ATen's autograd path;
    ``group_norm`` (nn.GroupNorm; group_norm.cpp reads sizes): ``native_group_norm`` with N, C
    and H·W as SymInts, as ATen calls it;
* ``PySymInt.__bool__``: ``bool(n)`` of a size as the guard ``n != 0`` — torch 1.13 evaluates
  ``n`` itself, recording the guard "n == its traced value" (``torch._refs``' reductions check
  ``all(a.shape[i] for i in dims)``, e.g. in softmax's ``amax``), which would fix the Dim;
* ``SymIntNode.__float__``: ``float(n)`` of a SymInt whose value is a constant (a static size
  that went through symbolic arithmetic, e.g. ``q.shape[2]`` after a view with a symbolic size
  in ``multi_head_attention_forward``'s ``math.sqrt(E)``) is that constant; a size depending on
  a Dim stays a TypeError (refused, never fixed to its traced value); ``n ** x`` and ``x ** n``
  likewise (swin_t's ``(C // num_heads) ** -0.5``);
* ``torch.nn.functional.pad``: torch 1.13's is the C++ binding ``torch._C._nn.pad``, whose
  argument parser takes ints only, before any mode sees the call; pads that are SymInts of a
  constant value (swin_t's ``(w - W % w) % w`` over a static ``W`` read from a tensor with a
  dynamic batch) are passed as those ints.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

import torch

from . import symbolic_autograd_torch1 as autograd_ops
from .symbolic_dropout_torch1 import aten_dropout, aten_feature_dropout
from .symbolic_losses_torch1 import loss_kernels
from .symbolic_meta_torch1 import (chunk_as_split, meta_select, meta_split, meta_unbind,
                                   static_int, weight_norm_interface,
                                   weight_norm_interface_backward)
from .symbolic_pooling_torch1 import pad_circular, pooling_kernels

aten = torch.ops.aten


def dispatch_patches() -> contextlib.ExitStack:
    """The patches of the module docstring, as one context."""
    stack = contextlib.ExitStack()
    stack.enter_context(_meta_kernels())
    stack.enter_context(_constant_size_arithmetic())
    stack.enter_context(_truthiness())
    stack.enter_context(_pad_with_constant_sizes())
    return stack


@contextlib.contextmanager
def _truthiness() -> Iterator[None]:
    """``PySymInt.__bool__`` of a size: the guard ``n != 0`` (module docstring)."""
    from torch.fx.experimental.symbolic_shapes import PySymInt
    import sympy
    old = PySymInt.__bool__

    def nonzero(self: Any) -> bool:
        expr = self.shape_env.replace(self.expr)
        if not isinstance(expr, (sympy.core.relational.Relational, sympy.logic.boolalg.BooleanAtom,
                                 sympy.logic.boolalg.BooleanFunction)):   # a size
            expr = sympy.Ne(expr, 0)
        return bool(self.shape_env.evaluate_expr(expr))

    PySymInt.__bool__ = nonzero
    try:
        yield
    finally:
        PySymInt.__bool__ = old


@contextlib.contextmanager
def _constant_size_arithmetic() -> Iterator[None]:
    """``SymIntNode.__float__``, ``__pow__``, ``__rpow__``: on a constant's value, else TypeError
    (module docstring)."""
    cls = torch.SymIntNode

    def constant_int(node: Any, what: str) -> int:
        value = static_int(node)
        if not isinstance(value, int):
            py = node.get_pyobj()
            raise TypeError(f"{what}, not a symbolic size ({py.shape_env.replace(py.expr)})")
        return value

    def constant_float(node: Any) -> float:
        return float(constant_int(node, "must be real number"))

    def constant_pow(node: Any, other: Any) -> Any:
        return constant_int(node, "unsupported operand type(s) for ** or pow()") ** other

    def constant_rpow(node: Any, other: Any) -> Any:
        return other ** constant_int(node, "unsupported operand type(s) for ** or pow()")

    saved = {name: vars(cls).get(name) for name in ("__float__", "__pow__", "__rpow__")}
    cls.__float__ = constant_float
    cls.__pow__ = constant_pow
    cls.__rpow__ = constant_rpow
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is not None:
                setattr(cls, name, value)
            else:
                delattr(cls, name)


def _meta_kernels() -> contextlib.ExitStack:
    """The Python kernels of the module docstring."""
    stack = contextlib.ExitStack()
    for op, fn in ((aten.select.int, meta_select), (aten.unbind.int, meta_unbind),
                   (aten.split.Tensor, meta_split),
                   (aten._weight_norm_interface.default, weight_norm_interface),
                   (aten._weight_norm_interface_backward.default,
                    weight_norm_interface_backward)):
        stack.enter_context(_py_kernel(op, torch._C.DispatchKey.Meta, fn))
    implicit = torch._C.DispatchKey.CompositeImplicitAutograd
    stack.enter_context(_py_kernel(aten.chunk.default, implicit, _chunk_kernel))
    stack.enter_context(_py_kernel(aten.dropout.default, implicit, _dropout_kernel))
    for op, fn in pooling_kernels():
        stack.enter_context(_py_kernel(op, implicit, fn))
    for op, fn in _FEATURE_DROPOUTS + loss_kernels():
        stack.enter_context(_py_kernel(op, implicit, fn))
    stack.enter_context(_py_kernel(aten.cosine_similarity.default, implicit,
                                   _cosine_similarity_kernel))
    stack.enter_context(_py_kernel(aten.group_norm.default, implicit, _group_norm_kernel))
    return stack


def _group_norm_kernel(input: torch.Tensor, num_groups: int, weight: Any = None,
                       bias: Any = None, eps: float = 1e-05,
                       cudnn_enabled: bool = True) -> torch.Tensor:
    """``aten.group_norm``'s CompositeImplicitAutograd kernel while a capture traces (ATen's,
    group_norm.cpp, reads ``sizes()`` for N, C and H·W): ``native_group_norm`` of the input made
    contiguous with those sizes as SymInts — the op ATen calls, so the same values and
    backward (``native_group_norm_backward``)."""
    n, c = input.shape[0], input.shape[1]
    hxw = 1
    for size in input.shape[2:]:
        hxw = hxw * size
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    weight = weight.contiguous() if weight is not None else None
    bias = bias.contiguous() if bias is not None else None
    return aten.native_group_norm.default(input.contiguous(), weight, bias, n, c, hxw,
                                          num_groups, eps)[0]


def _cosine_similarity_kernel(x1: torch.Tensor, x2: torch.Tensor, dim: int = 1,
                              eps: float = 1e-8) -> torch.Tensor:
    """``aten.cosine_similarity``'s CompositeImplicitAutograd kernel while a capture traces:
    torch 1.13's (Distance.cpp, whose broadcast reads concrete sizes) — each operand over its
    norm ``sqrt(max(sum(x²), eps²))``, then the sum of the products over ``dim``. ATen clamps
    in place under ``NoGradGuard``, so autograd sees no clamp; functionalizing an in-place op
    reads sizes on 1.13, so the clamp is ``s + (max(s, eps²) - s).detach()`` (the same
    gradient; the same value but where ``s < eps² / 2``, a vector of norm below ``eps / 1.4``,
    within an ulp of ``eps²``) and the root out of place."""
    if x1.dtype != x2.dtype:
        raise RuntimeError("Cannot call sizes() on tensor with symbolic sizes/strides: "
                           "cosine_similarity of two dtypes")
    common = torch.broadcast_shapes(x1.shape, x2.shape)
    x1, x2 = x1.expand(common), x2.expand(common)
    n1, n2 = [_clamped_sum_of_squares(x, dim, eps).sqrt() for x in (x1, x2)]
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def _clamped_sum_of_squares(x: torch.Tensor, dim: int, eps: float) -> torch.Tensor:
    squared = x.pow(2).sum(dim, keepdim=True)
    return squared + (squared.clamp_min(eps * eps) - squared).detach()


# Dropout.cpp's feature and alpha variants read numel(): ATen's _dropout_impl in Python
_FEATURE_DROPOUTS = [
    (aten.feature_dropout.default, aten_feature_dropout),
    (aten.alpha_dropout.default, functools.partial(aten_feature_dropout, feature=False,
                                                   alpha=True)),
    (aten.feature_alpha_dropout.default, functools.partial(aten_feature_dropout, alpha=True))]


@contextlib.contextmanager
def _py_kernel(op: Any, key: Any, fn: Callable) -> Iterator[None]:
    had, old = key in op.py_kernels, op.py_kernels.get(key)
    op.py_kernels[key] = fn
    _forget_dispatch_cache(op)
    try:
        yield
    finally:
        if had:
            op.py_kernels[key] = old
        else:
            op.py_kernels.pop(key, None)
        _forget_dispatch_cache(op)


def _forget_dispatch_cache(op: Any) -> None:
    # OpOverload.__getattr__ caches the Python dispatcher's kernel per dispatch key name
    for name in [n for n in vars(op) if n[:1].isupper()]:
        delattr(op, name)


def _chunk_kernel(x: torch.Tensor, chunks: int, dim: int = 0) -> Any:
    """``aten.chunk``'s CompositeImplicitAutograd kernel while a capture traces."""
    out = chunk_as_split(x, chunks, dim)
    if out is NotImplemented:
        raise RuntimeError("Cannot call sizes() on tensor with symbolic sizes/strides: chunk "
                           "over a symbolic dim (its number of pieces would depend on the size)")
    return out


def _dropout_kernel(input: torch.Tensor, p: float, train: bool) -> torch.Tensor:
    """``aten.dropout``'s CompositeImplicitAutograd kernel while a capture traces: ATen's
    ``_dropout_impl`` on CPU (``symbolic_dropout_torch1.aten_dropout``; the C++ one reads
    ``numel()``)."""
    return aten_dropout(input, p, train)


@contextlib.contextmanager
def _pad_with_constant_sizes() -> Iterator[None]:
    """``torch.nn.functional.pad`` with constant SymInt pads as ints (module docstring), and
    ``mode="circular"`` as ``symbolic_pooling_torch1.pad_circular``; callers that bound
    ``F.pad`` before the capture (``from torch.nn.functional import pad``) keep the binding and
    its TypeError."""
    import torch.nn.functional as F
    old = F.pad

    def pad(input: torch.Tensor, pad: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
        pad = tuple(static_int(p) for p in pad)
        mode = args[0] if args else kwargs.get("mode", "constant")
        if mode == "circular":
            out = pad_circular(input, pad)
            if out is not NotImplemented:
                return out
        return old(input, pad, *args, **kwargs)

    F.pad = pad
    try:
        yield
    finally:
        F.pad = old
