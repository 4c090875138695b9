"""pt2rt's recurrent operators: ``pt2rt::lstm`` and ``pt2rt::lstm_backward``, an nn.LSTM kept as
ONE node of a graph, so that its sequence length can be dynamic; ``pt2rt::gru``,
``pt2rt::rnn_tanh``, ``pt2rt::rnn_relu`` and their ``*_backward`` do the same for nn.GRU and
nn.RNN (one hidden state: ``hx`` a Tensor; ``single_state``), on any symbolic size.

Why: ATen's ``lstm`` is CompositeImplicitAutograd — it loops over the time steps in C++, and
both captures (torch 2's ``aot_export_joint_with_descriptors``, torch 1.13's ``make_fx``) record
the unrolled cells, which specialises the sequence length. When a dynamic-shape capture reaches
``torch.lstm`` (``_VF.lstm``, what ``nn.LSTM.forward`` calls) with a *symbolic* time dim,
``sequence_ops()`` runs it as ``pt2rt::lstm`` instead, differentiated by
``pt2rt::lstm_backward``: on torch 2 through an ``autograd.Function``; on torch 1.13, whose
``autograd.Function`` cannot return symbolic sizes, as a *cut* that the joint capture
differentiates with ``autograd_cuts.grad`` (see ``lstm``). A static-shape call becomes the one
node too (``SequenceOps(static=True)``, on both torch versions), unless it has dropout between
layers in training mode or projections: the runtime then runs it as one fused kernel — cuDNN's
on CUDA, as eager nn.LSTM does (runtime/kernels/cudnn_rnn.h) — instead of T unrolled cells. A
call with dropout between layers in training mode is first split into one call per layer with
``torch.dropout`` between them (``rnn_layers.py``; torch 2's own decomposition loses that
dropout), each layer then one node.

Schemas (identical in the C++ runtime, runtime/kernels/native_ops.cpp)::

    pt2rt::lstm(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers,
                float dropout, bool train, bool bidirectional, bool batch_first)
        -> (Tensor, Tensor, Tensor)
    pt2rt::lstm_backward(Tensor? grad_output, Tensor? grad_h_n, Tensor? grad_c_n,
                         Tensor input, Tensor[] hx, Tensor[] params, bool has_biases,
                         int num_layers, float dropout, bool train, bool bidirectional,
                         bool batch_first) -> Tensor[]

``pt2rt::lstm`` is ``aten::lstm.input`` (https://pytorch.org/docs/stable/generated/torch.nn.LSTM.html):
input ``[T, B, I]`` (``[B, T, I]`` if batch_first), hx ``[h_0, c_0]`` each
``[num_layers * D, B, H]``, params ``nn.LSTM._flat_weights`` (w_ih, w_hh[, b_ih, b_hh] per layer
and direction); returns (output ``[T, B, D * H]`` or ``[B, T, D * H]``, h_n, c_n), contiguous.
``pt2rt::lstm_backward`` returns ``[grad_input, grad_h_0, grad_c_0, *grad_params]``: it
RECOMPUTES the forward with ATen's own ``lstm`` under autograd and differentiates it
(activation checkpointing: Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost";
``torch.utils.checkpoint``), so the same ATen kernels run in the same order as in eager. An
undefined (None) incoming gradient counts as zeros.

Refused (``ExportError`` naming the construct), because the op does not express it:
``proj_size`` (LSTM with projections) with a dynamic sequence length, packed sequences.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Sequence

import torch

from ..errors import ExportError
from ..ir.symbols import is_symint
from . import autograd_cuts
from .op_library import Fragment, defined
from .rnn_layers import has_layer_dropout, layer_by_layer

LSTM_SCHEMA = ("lstm(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, "
               "int num_layers, float dropout, bool train, bool bidirectional, "
               "bool batch_first) -> (Tensor, Tensor, Tensor)")
LSTM_BACKWARD_SCHEMA = ("lstm_backward(Tensor? grad_output, Tensor? grad_h_n, Tensor? grad_c_n, "
                        "Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, "
                        "int num_layers, float dropout, bool train, bool bidirectional, "
                        "bool batch_first) -> Tensor[]")
TORCH2 = int(torch.__version__.split(".")[0]) >= 2

# nn.GRU and nn.RNN (tanh / relu): one hidden state (hx a Tensor, not a list), ``gates``
# weight blocks per layer (w_ih [gates*H, I_l], w_hh [gates*H, H]); ATen's torch.gru /
# torch.rnn_tanh / torch.rnn_relu (``.input`` overloads) return (output, h_n).
SINGLE_STATE = {"gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def single_state_schema(kind: str) -> str:
    return (f"{kind}(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, "
            "float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)")


def single_state_backward_schema(kind: str) -> str:
    return (f"{kind}_backward(Tensor? grad_output, Tensor? grad_h_n, Tensor input, Tensor hx, "
            "Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
            "bool bidirectional, bool batch_first) -> Tensor[]")


def _check(input: torch.Tensor, hx: Sequence[torch.Tensor], params: Sequence[torch.Tensor],
           has_biases: bool, num_layers: int, dropout: float, train: bool,
           bidirectional: bool, name: str = "lstm") -> None:
    """What pt2rt::lstm (pt2rt::gru, ...) accepts (static facts only: symbolic sizes are not
    compared)."""
    dirs = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    if input.dim() != 3:
        raise RuntimeError(f"pt2rt::{name}: input must have 3 dims, got {input.dim()}")
    if len(hx) != 2:
        raise RuntimeError(f"pt2rt::lstm: hx must be [h_0, c_0], got {len(hx)} tensors")
    if num_layers < 1 or len(params) != num_layers * dirs * per:
        raise RuntimeError(f"pt2rt::{name}: expected {num_layers * dirs * per} params for "
                           f"{num_layers} layers x {dirs} directions, got {len(params)} "
                           "(an LSTM with proj_size is not supported)")
    if train and dropout > 0 and num_layers > 1:
        raise RuntimeError(f"pt2rt::{name}: dropout between layers in training mode is not "
                           f"supported ({name}_backward's recomputation would draw new masks)")


def _lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
          batch_first):
    _check(input, hx, params, has_biases, num_layers, dropout, train, bidirectional)
    out, h, c = torch.lstm(input, list(hx), list(params), has_biases, num_layers, dropout, train,
                           bidirectional, batch_first)
    return out.contiguous(), h.contiguous(), c.contiguous()


@contextlib.contextmanager
def autograd_dispatch() -> Iterator[None]:
    """Autograd on for a backward kernel's recomputation, wherever the kernel runs: a torch
    1.13 ``make_fx`` trace on real tensors calls a custom op's kernel below autograd (its
    dispatch mode excludes the autograd keys from the thread's dispatch set), where
    ``torch.enable_grad()`` alone records nothing. The keys' exclusion is restored after."""
    keys = [torch._C.DispatchKey.AutogradFunctionality, torch._C.DispatchKey.ADInplaceOrView,
            torch._C.DispatchKey.AutogradOther]
    was = [torch._C._dispatch_tls_is_dispatch_key_excluded(k) for k in keys]
    for k in keys:
        torch._C._dispatch_tls_set_dispatch_key_excluded(k, False)
    try:
        with torch.enable_grad():
            yield
    finally:
        for k, excluded in zip(keys, was):
            torch._C._dispatch_tls_set_dispatch_key_excluded(k, excluded)


def _lstm_backward(grad_output, grad_h_n, grad_c_n, input, hx, params, has_biases, num_layers,
                   dropout, train, bidirectional, batch_first):
    _check(input, hx, params, has_biases, num_layers, dropout, train, bidirectional)
    with autograd_dispatch():
        leaves = [t.detach().requires_grad_() for t in [input, *hx, *params]]
        outs = torch.lstm(leaves[0], leaves[1:3], leaves[3:], has_biases, num_layers, dropout,
                          train, bidirectional, batch_first)
        pairs = [(o, g) for o, g in zip(outs, (grad_output, grad_h_n, grad_c_n))
                 if g is not None]
        grads: Sequence[Optional[torch.Tensor]] = [None] * len(leaves)
        if pairs:
            grads = torch.autograd.grad([o for o, _ in pairs], leaves, [g for _, g in pairs],
                                        allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads)]


def _lstm_meta(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
               batch_first):
    _check(input, hx, params, has_biases, num_layers, dropout, train, bidirectional)
    dirs = 2 if bidirectional else 1
    hidden = hx[0].shape[2]
    out = input.new_empty((input.shape[0], input.shape[1], dirs * hidden))
    return out, hx[0].new_empty(hx[0].shape), hx[1].new_empty(hx[1].shape)


def _lstm_backward_meta(grad_output, grad_h_n, grad_c_n, input, hx, params, has_biases,
                        num_layers, dropout, train, bidirectional, batch_first):
    _check(input, hx, params, has_biases, num_layers, dropout, train, bidirectional)
    return [t.new_empty(t.shape) for t in [input, *hx, *params]]


def _aten(kind: str):
    return getattr(torch, kind)


def _single_kernels(kind: str):
    """(forward, backward, forward meta, backward meta) of ``pt2rt::<kind>``."""
    def check(input, hx, params, has_biases, num_layers, dropout, train, bidirectional):
        _check(input, [hx, hx], params, has_biases, num_layers, dropout, train, bidirectional,
               name=kind)

    def forward(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                batch_first):
        check(input, hx, params, has_biases, num_layers, dropout, train, bidirectional)
        out, h = _aten(kind)(input, hx, list(params), has_biases, num_layers, dropout, train,
                             bidirectional, batch_first)
        return out.contiguous(), h.contiguous()

    def backward(grad_output, grad_h_n, input, hx, params, has_biases, num_layers, dropout,
                 train, bidirectional, batch_first):
        check(input, hx, params, has_biases, num_layers, dropout, train, bidirectional)
        with autograd_dispatch():
            leaves = [t.detach().requires_grad_() for t in [input, hx, *params]]
            outs = _aten(kind)(leaves[0], leaves[1], leaves[2:], has_biases, num_layers,
                               dropout, train, bidirectional, batch_first)
            pairs = [(o, g) for o, g in zip(outs, (grad_output, grad_h_n)) if g is not None]
            grads: Sequence[Optional[torch.Tensor]] = [None] * len(leaves)
            if pairs:
                grads = torch.autograd.grad([o for o, _ in pairs], leaves,
                                            [g for _, g in pairs], allow_unused=True)
        return [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads)]

    def forward_meta(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                     batch_first):
        check(input, hx, params, has_biases, num_layers, dropout, train, bidirectional)
        dirs = 2 if bidirectional else 1
        out = input.new_empty((input.shape[0], input.shape[1], dirs * hx.shape[2]))
        return out, hx.new_empty(hx.shape)

    def backward_meta(grad_output, grad_h_n, input, hx, params, has_biases, num_layers,
                      dropout, train, bidirectional, batch_first):
        check(input, hx, params, has_biases, num_layers, dropout, train, bidirectional)
        return [t.new_empty(t.shape) for t in [input, hx, *params]]

    return forward, backward, forward_meta, backward_meta


_LIBRARY: Any = None  # keeps the registrations alive


def register() -> None:
    """Defines ``pt2rt::lstm`` and ``pt2rt::lstm_backward`` (and the GRU / RNN ops) with
    CPU/CUDA kernels and a symbolic-shape rule, once per process (``op_library.Fragment``: other
    pt2rt ops may be defined elsewhere; an op already defined, e.g. by a second copy of this
    module, is left alone)."""
    global _LIBRARY
    if _LIBRARY is not None or defined("lstm") or defined("gru"):
        return
    fragment = Fragment()
    kernels = {"lstm": (_lstm, _lstm_backward, _lstm_meta, _lstm_backward_meta)}
    fragment.define(LSTM_SCHEMA)
    fragment.define(LSTM_BACKWARD_SCHEMA)
    for kind in SINGLE_STATE:
        fragment.define(single_state_schema(kind))
        fragment.define(single_state_backward_schema(kind))
        kernels[kind] = _single_kernels(kind)
    for kind, (forward, backward, forward_meta, backward_meta) in kernels.items():
        for key in ("CPU", "CUDA"):
            fragment.impl(kind, forward, key)
            fragment.impl(kind + "_backward", backward, key)
        fragment.shape_rule(kind, forward_meta)
        fragment.shape_rule(kind + "_backward", backward_meta)
    _LIBRARY = fragment


class _LSTMFunction(torch.autograd.Function):
    """``pt2rt::lstm`` forward, ``pt2rt::lstm_backward`` backward."""

    @staticmethod
    def forward(ctx, flags, input, h0, c0, *params):
        ctx.flags = flags
        ctx.save_for_backward(input, h0, c0, *params)
        return torch.ops.pt2rt.lstm.default(input, [h0, c0], list(params), *flags)

    @staticmethod
    def backward(ctx, grad_output, grad_h_n, grad_c_n):
        input, h0, c0, *params = ctx.saved_tensors
        grads = torch.ops.pt2rt.lstm_backward.default(grad_output, grad_h_n, grad_c_n, input,
                                                      [h0, c0], params, *ctx.flags)
        return (None,) + tuple(grads[i] for i in range(3 + len(params)))


class _SingleStateFunction(torch.autograd.Function):
    """``pt2rt::<kind>`` forward, ``pt2rt::<kind>_backward`` backward (GRU, RNN)."""

    @staticmethod
    def forward(ctx, kind, flags, input, h0, *params):
        ctx.kind, ctx.flags = kind, flags
        ctx.save_for_backward(input, h0, *params)
        return getattr(torch.ops.pt2rt, kind).default(input, h0, list(params), *flags)

    @staticmethod
    def backward(ctx, grad_output, grad_h_n):
        input, h0, *params = ctx.saved_tensors
        grads = getattr(torch.ops.pt2rt, ctx.kind + "_backward").default(
            grad_output, grad_h_n, input, h0, params, *ctx.flags)
        return (None, None) + tuple(grads[i] for i in range(2 + len(params)))


def single_state(kind, input, hx, params, has_biases, num_layers, dropout, train,
                 bidirectional, batch_first):
    """``torch.gru`` / ``torch.rnn_tanh`` / ``torch.rnn_relu`` (``.input``) as
    ``pt2rt::<kind>``, differentiable as ``lstm`` is (an ``autograd.Function`` on torch 2, a cut
    on torch 1.13).

    Raises:
        ExportError: dropout between layers in training mode, named.
    """
    register()
    module = {"gru": "nn.GRU", "rnn_tanh": "nn.RNN", "rnn_relu": "nn.RNN(nonlinearity='relu')"}
    if train and dropout > 0 and num_layers > 1 and torch.is_grad_enabled():
        raise ExportError(
            f"pt2rt.export: dynamic_shapes: {module[kind]}(num_layers={num_layers}, "
            f"dropout={dropout}) in training mode with a dynamic size is not supported: "
            f"pt2rt::{kind}'s backward recomputes the forward, which would draw new dropout "
            "masks; use dropout=0, static shapes, or train=False")
    flags = (bool(has_biases), int(num_layers), float(dropout), bool(train), bool(bidirectional),
             bool(batch_first))
    if TORCH2:
        return tuple(_SingleStateFunction.apply(kind, flags, input, hx, *params))
    with torch.no_grad():
        outs = getattr(torch.ops.pt2rt, kind).default(input, hx, list(params), *flags)

    def backward(go):
        return getattr(torch.ops.pt2rt, kind + "_backward").default(*go, input, hx,
                                                                    list(params), *flags)
    return autograd_cuts.record([input, hx, *params], outs, backward)


def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """``torch.lstm`` (the ``aten::lstm.input`` overload) as ``pt2rt::lstm``, differentiable:
    on torch 2 through ``_LSTMFunction``; on torch 1.13 (whose ``autograd.Function`` reads
    concrete output sizes, so it cannot return symbolic ones) as a *cut*: the outputs are
    fresh leaves, recorded in the active ``autograd_cuts.cuts()`` so that ``autograd_cuts.grad``
    differentiates through ``pt2rt::lstm_backward`` (outside ``cuts()`` they carry no gradient:
    shapes only).

    Raises:
        ExportError: dropout between layers in training mode, or an LSTM with projections
            (proj_size), named.
    """
    register()
    dirs = 2 if bidirectional else 1
    if train and dropout > 0 and num_layers > 1 and torch.is_grad_enabled():
        raise ExportError(
            f"pt2rt.export: dynamic_shapes: nn.LSTM(num_layers={num_layers}, dropout={dropout}) "
            "in training mode with a dynamic sequence length is not supported: pt2rt::lstm's "
            "backward recomputes the forward, which would draw new dropout masks; use "
            "dropout=0, a static sequence length, or train=False")
    if len(params) != num_layers * dirs * (4 if has_biases else 2):
        raise ExportError("pt2rt.export: dynamic_shapes: nn.LSTM with proj_size and a dynamic "
                          "sequence length is not supported (pt2rt::lstm has no projections); "
                          "use a static sequence length")
    flags = (bool(has_biases), int(num_layers), float(dropout), bool(train), bool(bidirectional),
             bool(batch_first))
    h0, c0 = hx
    if TORCH2:
        return tuple(_LSTMFunction.apply(flags, input, h0, c0, *params))
    with torch.no_grad():
        outs = torch.ops.pt2rt.lstm.default(input, [h0, c0], list(params), *flags)

    def backward(go):
        return torch.ops.pt2rt.lstm_backward.default(*go, input, [h0, c0], list(params), *flags)
    return autograd_cuts.record([input, h0, c0, *params], outs, backward)


def _time_dim_is_symbolic(input: Any, batch_first: Any) -> bool:
    if not isinstance(input, torch.Tensor) or input.dim() != 3:
        return False
    return is_symint(input.shape[1 if batch_first else 0])


def _fits_one_op(args: Sequence[Any]) -> bool:
    """Whether a static-shape ``torch.lstm`` / ``gru`` / ``rnn_*`` call (``.input`` overload)
    can be one ``pt2rt::`` node: no projections (``proj_size``). (A call with dropout between
    layers in training mode never gets here: ``SequenceOps`` splits it per layer first.)"""
    has_biases, num_layers, bidirectional = args[3], args[4], args[7]
    per = 4 if has_biases else 2
    return len(args[2]) == num_layers * (2 if bidirectional else 1) * per


class SequenceOps(torch.overrides.TorchFunctionMode):
    """Runs ``torch.lstm`` on a symbolic sequence length as ``pt2rt::lstm``, and ``torch.gru``
    / ``torch.rnn_tanh`` / ``torch.rnn_relu`` on any symbolic size (batch or length) as
    ``pt2rt::gru`` / ``rnn_tanh`` / ``rnn_relu`` (see the module docstring); refuses a packed
    sequence (``.data`` overloads) in a dynamic-shape capture.

    With ``static=True`` (static captures) a call on static sizes becomes the one node too
    whenever it can (``_fits_one_op``), so that the runtime can run it as one fused kernel
    (cuDNN's on CUDA, as eager does); otherwise it stays ATen's unrolled graph."""

    def __init__(self, static: bool = False) -> None:
        super().__init__()
        self.static = static

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _input_overload(func, args, kwargs) and has_layer_dropout(args) \
                and (self.static or _any_symbolic(args[0])):
            # one layer at a time, dropout between (rnn_layers.py); each layer comes back here
            return layer_by_layer(lambda *a: self.__torch_function__(func, types, a), args)
        if func is torch.lstm and _input_overload(func, args, kwargs):
            if _time_dim_is_symbolic(args[0], args[8]):
                return lstm(*args)
            if self.static and not _any_symbolic(args[0]) and _fits_one_op(args):
                return lstm(*args)
        elif func is torch.lstm and len(args) >= 2 and isinstance(args[1], torch.Tensor):
            if _any_symbolic(args[0]):
                raise ExportError("pt2rt.export: dynamic_shapes: nn.LSTM on a PackedSequence is "
                                  "not supported; pass a padded tensor")
        kind = _SINGLE_STATE_FUNCTIONS.get(func)
        if kind is not None and not kwargs and len(args) == 9 \
                and isinstance(args[0], torch.Tensor):
            if _any_symbolic(args[0]):
                if isinstance(args[2], torch.Tensor):  # .data(data, batch_sizes, hx, params, ...)
                    raise ExportError(f"pt2rt.export: dynamic_shapes: torch.{kind} on a "
                                      "PackedSequence is not supported; pass a padded tensor")
                return single_state(kind, *args)
            if self.static and not isinstance(args[2], torch.Tensor) \
                    and _fits_one_op(args):
                return single_state(kind, *args)
        return func(*args, **kwargs)


def _input_overload(func: Any, args: Sequence[Any], kwargs: dict) -> bool:
    """Whether this is a ``torch.lstm`` / ``gru`` / ``rnn_*`` call of the ``.input`` overload
    (a padded tensor, not a packed sequence's ``.data``)."""
    if kwargs or len(args) != 9 or not isinstance(args[0], torch.Tensor):
        return False
    if func is torch.lstm:
        return isinstance(args[1], (list, tuple))
    return func in _SINGLE_STATE_FUNCTIONS and isinstance(args[2], (list, tuple))


def _any_symbolic(input: Any) -> bool:
    return isinstance(input, torch.Tensor) and any(is_symint(s) for s in input.shape)


_SINGLE_STATE_FUNCTIONS = {getattr(torch, kind): kind for kind in SINGLE_STATE}


def has_lstm(model: torch.nn.Module) -> bool:
    """Whether ``model`` holds an ``nn.LSTM``, ``nn.GRU`` or ``nn.RNN`` (torch 2's capture
    enters ``sequence_ops`` only then: a TorchFunctionMode makes ``has_torch_function`` true,
    which turns off fast paths such as ``nn.TransformerEncoderLayer``'s and would change other
    models' graphs)."""
    return any(isinstance(m, (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN))
               for m in model.modules())


@contextlib.contextmanager
def sequence_ops(static: bool = False) -> Iterator[None]:
    """``SequenceOps(static)`` for the duration of a trace."""
    with sequence_modes(static):
        yield


def sequence_modes(static: bool = False) -> SequenceOps:
    """A ``SequenceOps(static)`` mode for the caller to enter (the ops registered first), e.g.
    only while the model's own code runs (``capture/forward_modes.during_forward``)."""
    register()
    return SequenceOps(static)
