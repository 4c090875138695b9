"""A multi-layer RNN with dropout between layers, called one layer at a time.

``torch.lstm`` / ``torch.gru`` / ``torch.rnn_tanh`` / ``torch.rnn_relu`` (``.input`` overloads,
what ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` call) with ``num_layers > 1``, ``dropout > 0`` and
``train`` apply ``dropout(layer_output, p, train=True)`` to every layer's output but the last
(ATen's ``_rnn_impl``, aten/src/ATen/native/RNN.cpp; the ``nn.LSTM`` docs' ``dropout``). Two
things go wrong when a capture records such a call as it is:

* torch 2's decomposition of these ops (``torch._decomp.decompositions._rnn_helper``, which
  ``aot_export_joint_with_descriptors`` traces) sets the dropout to 0 for every layer
  (``dropout if (train and num_layers < i - 1) else 0.0`` is never true): the graph trains
  without the dropout eager applies, silently (torch 2.14 on the CPU);
* a ``pt2rt::`` recurrent node cannot carry it: its backward recomputes the forward, which
  would draw new masks (``rnn_ops.py``).

``layer_by_layer`` makes the same computation out of single-layer calls (each free to become a
``pt2rt::`` node, dropout 0) and ``torch.dropout`` between them, on the time-major layer
outputs as ATen does, so the masks are drawn in eager's order and of eager's sizes.
"""
from __future__ import annotations

from typing import Any, Callable, List, Sequence

import torch


def has_layer_dropout(args: Sequence[Any]) -> bool:
    """Whether an ``.input``-overload call's arguments (``input, hx, params, has_biases,
    num_layers, dropout, train, bidirectional, batch_first``) draw dropout between layers."""
    num_layers, dropout, train = args[4], args[5], args[6]
    return bool(train) and dropout > 0 and num_layers > 1


def layer_by_layer(call: Callable[..., Any], args: Sequence[Any]) -> tuple:
    """``call(*args)`` (``torch.lstm`` when ``hx`` is a list ``[h_0, c_0]``, else a
    one-state op with ``hx`` a Tensor ``[num_layers * D, B, H]``) computed as one ``call`` per
    layer with ``num_layers=1, dropout=0`` on time-major tensors and ``torch.dropout(x, p,
    train=True)`` between layers. Returns ``(output, h_n)`` or ``(output, h_n, c_n)`` as
    ``call`` does."""
    input, hx, params, has_biases, num_layers, p, train, bidirectional, batch_first = args
    dirs = 2 if bidirectional else 1
    per_layer = len(params) // num_layers
    lstm = isinstance(hx, (list, tuple))
    states: List[torch.Tensor] = list(hx) if lstm else [hx]
    finals: List[List[torch.Tensor]] = [[] for _ in states]
    x = input.transpose(0, 1) if batch_first else input
    for layer in range(num_layers):
        h = [s[layer * dirs:(layer + 1) * dirs] for s in states]
        out = call(x, h if lstm else h[0], list(params[layer * per_layer:(layer + 1) * per_layer]),
                   has_biases, 1, 0.0, train, bidirectional, False)
        x = out[0]
        for got, state in zip(finals, out[1:]):
            got.append(state)
        if layer < num_layers - 1:
            x = torch.dropout(x, p, True)
    y = x.transpose(0, 1) if batch_first else x
    return (y, *[torch.cat(f, 0) for f in finals])
