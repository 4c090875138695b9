"""The symbolic-shape capture of torch 1.13, put together: ``symbolic_rules()`` enters, for the
duration of a dynamic-shape trace, pt2rt's meta rules (``symbolic_meta_torch1.meta_rules``,
added to ``torch._meta_registrations.meta_table`` without overriding torch's own), the dispatcher
patches (``symbolic_dispatch_torch1.dispatch_patches``) and ``SymbolicFunctions``, which runs
the torch functions whose C++ implementation reads concrete sizes as the symbolic-friendly
Python of ``symbolic_meta_torch1`` and ``symbolic_rnn_torch1`` (see their docstrings).

It is the only module that imports all three, so they do not import each other in a circle.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from .symbolic_autograd_torch1 import amax_amin, cat as recorded_cat, logsumexp, squeeze
from .symbolic_picks_torch1 import (cummax_cummin, gather, index_select, max_min_dim, sort,
                                    take_along_dim, topk)
from .symbolic_dispatch_torch1 import dispatch_patches
from .symbolic_losses_torch1 import bce_with_logits, loss_meta_rules
from .symbolic_dropout_torch1 import aten_dropout
from .symbolic_meta_torch1 import (aten_linear, basic_getitem, basic_setitem,
                                   chunk_as_split, einsum_as_bmm, mean_all, meta_rules,
                                   narrow_as_slice,
                                   static_int, unbind_function)
from .symbolic_rnn_torch1 import lstm
from ...ops.ctc_ops import ctc_loss, functional_ctc_loss
from ...ops.traceable_ops import affine_grid as traceable_affine_grid


_MAX_MIN = (torch.max, torch.Tensor.max, torch.min, torch.Tensor.min)
_AMAX_AMIN = (torch.amax, torch.Tensor.amax, torch.amin, torch.Tensor.amin)


class SymbolicFunctions(torch.overrides.TorchFunctionMode):
    """Runs ``F.dropout``, ``F.linear``, basic ``Tensor.__getitem__`` / ``__setitem__``,
    ``mean()`` over all dims, ``F.binary_cross_entropy_with_logits``, ``chunk``, ``narrow``,
    ``unbind``, ``torch.lstm``, ``torch.einsum``, ``F.affine_grid`` (``traceable_ops``), ``F.ctc_loss`` (``pt2rt::ctc_loss``,
    ``ops/ctc_ops.py``), and, recorded by autograd, ``torch.cat``, ``squeeze(dim)``,
    ``logsumexp``, ``amax`` / ``amin`` (``symbolic_autograd_torch1``), ``max`` / ``min`` over a dim, ``gather``,
    ``topk``, ``sort``, ``cummax`` / ``cummin``, ``index_select``, ``take_along_dim``
    (``symbolic_picks_torch1``)
    as symbolic-friendly Python (see the module docstring); constant SymInt arguments as ints;
    ``torch.arange`` over SymInts typed int64, as eager types integer bounds."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if any(isinstance(a, torch.SymIntNode) or isinstance(a, (list, tuple)) and
               any(isinstance(b, torch.SymIntNode) for b in a) for a in args):
            # a size that went through symbolic arithmetic but is a constant (a static dim),
            # where a Python function's C++ binding takes ints (F.max_pool1d(h, h.shape[2]))
            args = tuple(tuple(static_int(b) for b in a) if isinstance(a, (list, tuple))
                         else static_int(a) for a in args)
        if func is torch.arange and "dtype" not in kwargs and args and \
                all(isinstance(a, (int, torch.SymIntNode)) for a in args):
            # 1.13 types an arange over a SymInt float32 while tracing (the graph's kernel then
            # makes int64, as eager): the dtype eager infers from integer bounds, given
            kwargs = {**kwargs, "dtype": torch.int64}
        if func is torch.nn.functional.dropout:
            return aten_dropout(*args, **kwargs)
        if func is torch.nn.functional.linear and args and args[0].dim() >= 3:
            return aten_linear(*args, **kwargs)
        out = NotImplemented
        if func is torch.Tensor.__getitem__ and len(args) == 2 and not kwargs:
            out = basic_getitem(*args)
        elif func is torch.Tensor.__setitem__ and len(args) == 3 and not kwargs:
            out = basic_setitem(*args)
            if out is None:
                return None
        elif func in (torch.Tensor.mean, torch.mean) and len(args) == 1 \
                and set(kwargs) <= {"dtype"}:
            out = mean_all(*args, **kwargs)
        elif func in (torch.Tensor.squeeze, torch.squeeze) and len(args) == 2 and not kwargs:
            out = squeeze(*args)
        elif func in (torch.Tensor.gather, torch.gather) and \
                len(args) + len(set(kwargs) & {"dim", "index"}) == 3 and \
                set(kwargs) <= {"dim", "index", "sparse_grad"}:
            named = dict(zip(("input", "dim", "index"), args), **kwargs)
            out = gather(named.pop("input"), named.pop("dim"), named.pop("index"), **named)
        elif func in (torch.Tensor.topk, torch.topk) and \
                set(kwargs) <= {"k", "dim", "largest", "sorted"}:
            named = dict(zip(("input", "k", "dim", "largest", "sorted"), args), **kwargs)
            if "k" in named:
                out = topk(named.pop("input"), named.pop("k"), **named)
        elif func in _AMAX_AMIN and set(kwargs) <= {"dim", "keepdim"}:
            out = amax_amin(func in _AMAX_AMIN[:2], *args, **kwargs)
        elif func in (torch.Tensor.sort, torch.sort) and \
                set(kwargs) <= {"dim", "descending", "stable"}:
            out = sort(*args, **kwargs)
        elif func in (torch.Tensor.cummax, torch.cummax, torch.Tensor.cummin, torch.cummin) \
                and len(args) + len(kwargs) == 2 and set(kwargs) <= {"dim"}:
            out = cummax_cummin(func, *args, **kwargs)
        elif func in (torch.take_along_dim, torch.Tensor.take_along_dim) and \
                set(kwargs) <= {"dim"} and len(args) + len(kwargs) == 3:
            out = take_along_dim(*args, **kwargs)
        elif func in (torch.Tensor.index_select, torch.index_select) and not kwargs \
                and len(args) == 3:
            out = index_select(*args)
        elif func in (torch.Tensor.logsumexp, torch.logsumexp) and \
                set(kwargs) <= {"dim", "keepdim"}:
            named = dict(zip(("input", "dim", "keepdim"), args), **kwargs)
            if "dim" in named:
                out = logsumexp(named["input"], named["dim"], named.get("keepdim", False))
        elif func in _MAX_MIN:
            out = max_min_dim(func, args, kwargs)
        elif func is torch.nn.functional.affine_grid:
            out = traceable_affine_grid(*args, **kwargs)
        elif func is torch.nn.functional.ctc_loss:
            out = functional_ctc_loss(*args, **kwargs)
        elif func is torch.ctc_loss:
            out = ctc_loss(*args, **kwargs)
        elif func is torch.nn.functional.binary_cross_entropy_with_logits:
            out = bce_with_logits(*args, **kwargs)
        elif func in (torch.Tensor.chunk, torch.chunk):
            out = chunk_as_split(*args, **kwargs)
        elif func in (torch.Tensor.narrow, torch.narrow) and len(args) == 4 and not kwargs:
            out = narrow_as_slice(*args)
        elif func in (torch.Tensor.unbind, torch.unbind):
            out = unbind_function(*args, **kwargs)
        elif func is torch.lstm:
            out = lstm(*args, **kwargs)
        elif func is torch.einsum and not kwargs:
            out = einsum_as_bmm(*args)
        elif func is torch.cat and args and isinstance(args[0], (list, tuple)) \
                and "out" not in kwargs and all(isinstance(t, torch.Tensor) for t in args[0]):
            out = recorded_cat(list(args[0]), *args[1:], **kwargs)
        return func(*args, **kwargs) if out is NotImplemented else out


@contextlib.contextmanager
def symbolic_rules() -> Iterator[None]:
    """Adds pt2rt's rules to ``torch._meta_registrations.meta_table`` (not overriding torch's
    own), ``symbolic_dispatch_torch1.dispatch_patches`` and ``SymbolicFunctions`` for the
    duration of the ``with`` block."""
    from torch._meta_registrations import meta_table
    added = {op: fn for op, fn in {**meta_rules(), **loss_meta_rules()}.items()
             if op not in meta_table}
    meta_table.update(added)
    try:
        with dispatch_patches(), SymbolicFunctions():
            yield
    finally:
        for op in added:
            if meta_table.get(op) is added[op]:
                del meta_table[op]
