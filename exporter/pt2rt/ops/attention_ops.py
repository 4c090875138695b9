"""pt2rt's attention operator: ``F.scaled_dot_product_attention`` (without dropout) kept as ONE
node of a graph, ``pt2rt::scaled_dot_product_attention``, differentiated by
``pt2rt::scaled_dot_product_attention_backward``.

Why: ATen's ``scaled_dot_product_attention`` is CompositeImplicitAutograd — it picks a fused
kernel (FlashAttention, memory-efficient attention, cuDNN; ``_scaled_dot_product_flash_attention_for_cpu``
on the CPU) from the device, dtype and sizes at call time. A capture records the kernel of the
device it traced on, which is not portable, so ``portability.portable_kernels`` makes the trace
take the math path (``matmul``, ``softmax``, ``matmul``): portable, but it keeps the [..., L, S]
attention probabilities as a saved activation, which eager's fused kernels never materialise
(a transformer encoder's training step then peaks at about 1.5x eager's CUDA memory). As one
node, the runtime calls ATen's dispatching ``scaled_dot_product_attention`` on the device it
runs on — the very kernel eager PyTorch picks there — and its backward differentiates that
call's own autograd graph (runtime/kernels/attention_ops.h).

``AttentionOps`` (a ``TorchFunctionMode``, torch >= 2.5: ``enable_gqa``) turns a call of
``F.scaled_dot_product_attention`` into the op when it can be one: ``dropout_p == 0`` (a
recomputation in the backward would draw a new mask; with dropout the call keeps the math path,
whose mask is a recorded value), no ``attn_mask`` that requires grad, and arguments the
runtime's kernel accepts (2 to 8 dims, equal leading dims — no broadcasting —, a boolean mask
or one of query's dtype); any other call keeps the math path.

Schemas (identical in the C++ runtime, runtime/kernels/attention_ops.cpp)::

    pt2rt::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value,
        Tensor? attn_mask, bool is_causal, float? scale, bool enable_gqa) -> Tensor
    pt2rt::scaled_dot_product_attention_backward(Tensor grad_out, Tensor query, Tensor key,
        Tensor value, Tensor? attn_mask, bool is_causal, float? scale, bool enable_gqa)
        -> Tensor[]

The forward is ``F.scaled_dot_product_attention(query, key, value, attn_mask, 0.0, is_causal,
scale=scale, enable_gqa=enable_gqa)`` (https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html):
query ``[N, ..., Hq, L, E]``, key ``[N, ..., H, S, E]``, value ``[N, ..., H, S, Ev]``, attn_mask
boolean (True = attend) or of query's dtype, broadcastable to ``[N, ..., Hq, L, S]``; returns
``[N, ..., Hq, L, Ev]``. Its layout is part of the op (``output_layout``): like query's when
``Ev == E`` — what FlashAttention's kernels (CUDA, and ``_scaled_dot_product_flash_attention_for_cpu``)
return, and what lets ``nn.MultiheadAttention``'s ``permute(...).contiguous()`` after it copy
nothing, as in eager — else contiguous; a kernel's result in another layout (memory-efficient
attention's ``[N, L, Hq, Ev]``) is copied into it, as eager's ``contiguous()`` copies it.
The backward returns ``[grad_query, grad_key, grad_value]``, each of its forward input's shape,
contiguous.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Iterator, List, Optional, Sequence

import torch

from .op_library import Fragment, defined
from .rnn_ops import autograd_dispatch

SCHEMA = ("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, "
          "Tensor? attn_mask, bool is_causal, float? scale, bool enable_gqa) -> Tensor")
BACKWARD_SCHEMA = ("scaled_dot_product_attention_backward(Tensor grad_out, Tensor query, "
                   "Tensor key, Tensor value, Tensor? attn_mask, bool is_causal, float? scale, "
                   "bool enable_gqa) -> Tensor[]")


def supported() -> bool:
    """Whether the running torch has ``F.scaled_dot_product_attention`` with ``enable_gqa``
    (torch >= 2.5) and ``torch.library.register_fake`` — the op's requirements."""
    fn = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    return fn is not None and hasattr(torch.library, "register_fake") and \
        "enable_gqa" in str(torch.ops.aten.scaled_dot_product_attention.default._schema)


def output_layout(query: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """An uninitialised result of the op for these arguments: shape ``[*query.shape[:-1],
    value.shape[-1]]``, laid out like ``query`` (``torch.empty_like``, as FlashAttention's
    kernels on CUDA and the CPU allocate theirs) when the head dims agree, else contiguous.
    Works on symbolic sizes."""
    if value.shape[-1] == query.shape[-1]:
        return torch.empty_like(query)
    return query.new_empty((*query.shape[:-1], value.shape[-1]))


def _attention(query, key, value, attn_mask, is_causal, scale, enable_gqa):
    out = torch._C._nn.scaled_dot_product_attention(query, key, value, attn_mask, 0.0,
                                                    is_causal, scale=scale, enable_gqa=enable_gqa)
    want = output_layout(query, value)
    if want.stride() == out.stride():
        return out
    return want.copy_(out)


def _attention_backward(grad_out, query, key, value, attn_mask, is_causal, scale, enable_gqa):
    with autograd_dispatch():
        leaves = [t.detach().requires_grad_() for t in (query, key, value)]
        out = torch._C._nn.scaled_dot_product_attention(*leaves, attn_mask, 0.0, is_causal,
                                                        scale=scale, enable_gqa=enable_gqa)
        grads = torch.autograd.grad([out], leaves, [grad_out], allow_unused=True)
    return [torch.zeros_like(x) if g is None else g.contiguous() for x, g in zip(leaves, grads)]


def _attention_fake(query, key, value, attn_mask, is_causal, scale, enable_gqa):
    return output_layout(query, value)


def _attention_backward_fake(grad_out, query, key, value, attn_mask, is_causal, scale,
                             enable_gqa):
    return [t.new_empty(t.shape) for t in (query, key, value)]


_LIBRARY: Any = None  # keeps the registrations alive


def register() -> None:
    """Defines the two ops with CPU/CUDA kernels and a symbolic-shape rule, once per process
    (``op_library.Fragment``; a no-op where ``supported()`` is false or the ops are already
    defined)."""
    global _LIBRARY
    if _LIBRARY is not None or not supported() or defined("scaled_dot_product_attention"):
        return
    fragment = Fragment()
    fragment.define(SCHEMA)
    fragment.define(BACKWARD_SCHEMA)
    for key in ("CPU", "CUDA"):
        fragment.impl("scaled_dot_product_attention", _attention, key)
        fragment.impl("scaled_dot_product_attention_backward", _attention_backward, key)
    fragment.shape_rule("scaled_dot_product_attention", _attention_fake)
    fragment.shape_rule("scaled_dot_product_attention_backward", _attention_backward_fake)
    _LIBRARY = fragment


class _AttentionFunction(torch.autograd.Function):
    """The op forward, its ``_backward`` op backward; saves query, key, value (the attention
    probabilities are never a saved activation)."""

    @staticmethod
    def forward(ctx, flags, query, key, value, attn_mask):
        ctx.flags = flags
        ctx.save_for_backward(query, key, value, attn_mask)
        return torch.ops.pt2rt.scaled_dot_product_attention.default(query, key, value,
                                                                     attn_mask, *flags)

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, attn_mask = ctx.saved_tensors
        grads = torch.ops.pt2rt.scaled_dot_product_attention_backward.default(
            grad_out, query, key, value, attn_mask, *ctx.flags)
        return None, grads[0], grads[1], grads[2], None


def _one_op_args(args: Sequence[Any], kwargs: dict) -> Optional[List[Any]]:
    """(query, key, value, attn_mask, is_causal, scale, enable_gqa) of an
    ``F.scaled_dot_product_attention`` call that can be the one op, else None."""
    names = ["query", "key", "value", "attn_mask", "dropout_p", "is_causal"]
    if len(args) > len(names) or any(k not in names + ["scale", "enable_gqa"] for k in kwargs):
        return None
    bound = dict(zip(names, args))
    if any(k in bound for k in kwargs):
        return None
    bound.update(kwargs)
    query, key, value = (bound.get(n) for n in names[:3])
    mask = bound.get("attn_mask")
    if not all(isinstance(t, torch.Tensor) for t in (query, key, value)):
        return None
    if mask is not None and (not isinstance(mask, torch.Tensor) or mask.requires_grad):
        return None
    if bound.get("dropout_p", 0.0) != 0.0:
        return None
    if not all(t.dtype.is_floating_point and t.dtype == query.dtype for t in (key, value)):
        return None
    if mask is not None and mask.dtype not in (torch.bool, query.dtype):
        return None
    gqa = bool(bound.get("enable_gqa", False))
    if not 2 <= query.dim() <= 8 or key.dim() != query.dim() or value.dim() != query.dim():
        return None
    lead = query.dim() - (3 if gqa else 2)  # broadcast leading dims: the math path handles them
    if lead < 0 or not all(tuple(t.shape[:lead]) == tuple(query.shape[:lead]) for t in (key, value)):
        return None
    scale = bound.get("scale")
    return [query, key, value, mask, bool(bound.get("is_causal", False)),
            None if scale is None else float(scale), gqa]


def _attention_call(original, args, kwargs):
    """An ``F.scaled_dot_product_attention(*args, **kwargs)`` call during a trace: the op when
    ``_one_op_args`` allows, differentiable through ``_AttentionFunction``; else ``original``."""
    bound = _one_op_args(args, kwargs)
    if bound is None:
        return original(*args, **kwargs)
    query, key, value, mask, *flags = bound
    if torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        return _AttentionFunction.apply(tuple(flags), query, key, value, mask)
    return torch.ops.pt2rt.scaled_dot_product_attention.default(query, key, value, mask, *flags)


class AttentionOps(torch.overrides.TorchFunctionMode):
    """Direct calls of the builtin ``torch._C._nn.scaled_dot_product_attention`` (also what
    ``from torch.nn.functional import scaled_dot_product_attention`` binds) through
    ``_attention_call``. A mode does not see calls nested in a torch function it handles itself
    (``F.multi_head_attention_forward``): ``attention_ops`` also replaces the attribute those
    look up."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch._C._nn.scaled_dot_product_attention:
            return _attention_call(func, args, kwargs)
        return func(*args, **kwargs)


@contextlib.contextmanager
def attention_ops() -> Iterator[List[torch.overrides.TorchFunctionMode]]:
    """For the duration of a trace: ``torch.nn.functional.scaled_dot_product_attention`` (looked
    up at each call by ``F.multi_head_attention_forward`` and by user code calling
    ``F.scaled_...``) routed through ``_attention_call``. Yields the modes that catch the other
    calls, ``[AttentionOps()]``, for the caller to enter while the model's own code runs
    (``capture/forward_modes.during_forward``): entered around a whole
    ``aot_export_joint_with_descriptors`` a mode also sees every tensor call of AOTAutograd's
    own Python (~16,000 in a resnet18 export). Yields ``[]`` and changes nothing where the
    running torch lacks what the op needs (``supported()``; torch 1.13 has no SDPA at all)."""
    if not supported():
        yield []
        return
    register()
    functional = torch.nn.functional
    original = functional.scaled_dot_product_attention

    @functools.wraps(original)  # user code may read its __doc__, __name__ or signature
    def routed(*args, **kwargs):
        return _attention_call(original, args, kwargs)

    functional.scaled_dot_product_attention = routed
    try:
        yield [AttentionOps()]
    finally:
        functional.scaled_dot_product_attention = original
