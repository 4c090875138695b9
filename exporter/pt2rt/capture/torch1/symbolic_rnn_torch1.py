"""``torch.lstm`` as Python for a dynamic-shape capture on torch 1.13.

ATen's ``lstm`` (aten/src/ATen/native/RNN.cpp, torch 1.13) is C++ reading concrete sizes, so a
trace over symbolic sizes cannot run it. On CPU it is CompositeImplicitAutograd: its kernel is
made of ATen ops, which a static capture records. ``lstm`` below runs the same ATen ops in the
same order, so the graph (and, through autograd, its backward) is the static capture's with
symbolic sizes, and the runtime runs ATen's kernels for each op:

* ``lstm``: ``batch_first`` -> ``input.transpose(0, 1)``; ``hx.unbind(0)``, ``cx.unbind(0)``
  (one hidden state per layer and direction, ``_lstm_impl``); ``apply_layer_stack`` over the
  layers, ``dropout(p, train=True)`` between layers when ``dropout_p != 0 and train``; the
  output transposed back; ``(output, stack(h_n), stack(c_n))``.
* ``FullLayer`` (CPU path): ``linear(input, w_ih, b_ih)`` over the whole sequence
  (pre-computed input projection), ``unbind(0)`` over time, one cell per step,
  ``stack(outputs, 0)``. ``FullBidirectionalLayer``: the same forward, then the reverse
  direction over the reversed steps (its own input projection), its outputs reversed and
  stacked, ``cat([fw, rev], dim() - 1)``.
* ``LSTMCell``: ``gates = linear(h, w_hh, b_hh).add_(input_projection)``,
  ``gates.unsafe_chunk(4, 1)`` (-> ``unsafe_split.Tensor``), ``sigmoid_, sigmoid_, tanh_,
  sigmoid_`` (in, forget, cell, out), ``cy = forget.mul(cx).add_(in.mul(cell))``,
  ``hy = out.mul(cy.tanh())``. The in-place ops run out of place here: functionalization makes
  ATen's in-place ops the same out-of-place ops, and their derivatives are the same.

``linear`` is ATen's (``symbolic_meta_torch1.aten_linear`` for 3-D inputs; ``addmm`` with a
bias, ``mm`` without for 2-D). The inference graph thus has the static capture's ops
(tests/python/test_dynamic_sequence_models.py compares them). When autograd records (the joint
graph), ``unbind``, ``unsafe_split`` and ``cat`` are ``symbolic_autograd_torch1``'s (torch 1.13's
autograd nodes of those read concrete sizes): the same values, with slices in place of the
splits (their gradients placed by ``cat`` again: ``graph_passes.slice_backward_sums_as_cat``).

Not covered (``NotImplemented``: torch's own runs, and a symbolic size fails the export naming
``torch.lstm``): packed sequences (the ``batch_sizes`` overload) and projections
(``proj_size > 0``). A dynamic *sequence length* stops at ``aten.unbind.int`` (the
steps are unrolled).
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import torch

from .symbolic_autograd_torch1 import cat, split, unbind
from .symbolic_dropout_torch1 import aten_dropout
from .symbolic_meta_torch1 import aten_linear

aten = torch.ops.aten


def _linear_2d(x: torch.Tensor, w: torch.Tensor, b: Any) -> torch.Tensor:
    # aten/src/ATen/native/Linear.cpp: 2-D input with bias -> addmm; without -> matmul (mm)
    return x.mm(w.t()) if b is None else torch.addmm(b, x, w.t())


def _cell(igates: torch.Tensor, hidden: Tuple[torch.Tensor, torch.Tensor],
          p: Sequence[Any]) -> Tuple[torch.Tensor, torch.Tensor]:
    """``LSTMCell::operator()`` with ``pre_compute_input`` (RNN.cpp)."""
    hx, cx = hidden
    gates = _linear_2d(hx, p[1], p[3]) + igates
    chunks = split(gates, (gates.shape[1] + 3) // 4, 1, unsafe=True)
    ingate, forgetgate = chunks[0].sigmoid(), chunks[1].sigmoid()
    cellgate, outgate = chunks[2].tanh(), chunks[3].sigmoid()
    cy = forgetgate.mul(cx) + ingate.mul(cellgate)
    hy = outgate.mul(cy.tanh())
    return hy, cy


def _steps(step_inputs: Sequence[torch.Tensor], hidden, p) -> Tuple[List[torch.Tensor], Any]:
    """``FullLayer::operator()(step_inputs, ...)``: one cell per step."""
    outputs = []
    for x in step_inputs:
        hidden = _cell(x, hidden, p)
        outputs.append(hidden[0])
    return outputs, hidden


def _layer(x: torch.Tensor, hidden, p) -> Tuple[torch.Tensor, Any]:
    """``FullLayer::operator()(inputs, ...)`` on CPU."""
    outputs, final = _steps(unbind(aten_linear(x, p[0], p[2]), 0), hidden, p)
    return torch.stack(outputs, 0), final


def _bidirectional_layer(x: torch.Tensor, hidden, p) -> Tuple[torch.Tensor, List[Any]]:
    """``FullBidirectionalLayer::operator()`` on CPU."""
    fw_outputs, fw_final = _steps(unbind(aten_linear(x, p[0][0], p[0][2]), 0), hidden[0], p[0])
    fw_output = torch.stack(fw_outputs, 0)
    rev_steps = list(reversed(unbind(aten_linear(x, p[1][0], p[1][2]), 0)))
    rev_outputs, rev_final = _steps(rev_steps, hidden[1], p[1])
    rev_output = torch.stack(list(reversed(rev_outputs)), 0)
    return cat([fw_output, rev_output], fw_output.dim() - 1), [fw_final, rev_final]


def lstm(*args: Any, **kwargs: Any) -> Any:
    """``torch.lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first)`` as ATen computes it on CPU, or NotImplemented (see the module docstring)."""
    if kwargs or len(args) != 9 or not isinstance(args[1], (list, tuple)):
        return NotImplemented   # the packed-sequence overload
    x, hx, params, has_biases, num_layers, dropout_p, train, bidirectional, batch_first = args
    if len(hx) != 2 or hx[0].shape[2] != hx[1].shape[2]:
        return NotImplemented   # projections
    per_cell = 4 if has_biases else 2
    cells = [list(params[i:i + per_cell]) + [None] * (4 - per_cell)
             for i in range(0, len(params), per_cell)]
    if batch_first:
        x = x.transpose(0, 1)
    hiddens = list(zip(unbind(hx[0], 0), unbind(hx[1], 0)))
    finals: List[Tuple[torch.Tensor, torch.Tensor]] = []
    for layer in range(num_layers):
        if bidirectional:
            x, final = _bidirectional_layer(x, hiddens[2 * layer:2 * layer + 2],
                                            cells[2 * layer:2 * layer + 2])
            finals.extend(final)
        else:
            x, last = _layer(x, hiddens[layer], cells[layer])
            finals.append(last)
        if dropout_p != 0 and train and layer < num_layers - 1:
            x = aten_dropout(x, dropout_p, True)
    out = x.transpose(0, 1) if batch_first else x
    return (out, torch.stack([h for h, _ in finals], 0), torch.stack([c for _, c in finals], 0))
