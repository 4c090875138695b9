"""Differentiating pt2rt's own ops on torch 1.13 with symbolic sizes: *cuts*.

torch 1.13's ``autograd.Function`` describes its outputs by concrete sizes (``VariableInfo``),
so on symbolic sizes a pt2rt op (``pt2rt::lstm``, ``pt2rt::gru``, ``pt2rt::ctc_loss``, ...)
cannot be an ``autograd.Function`` there. It runs without autograd instead, and its outputs are
fresh leaves that ``record`` notes, with the function that maps their gradients to the op's
inputs' (the op's ``*_backward``). The joint capture (``capture_torch1``) runs the forward inside
``cuts()`` and differentiates with ``grad``: autograd runs from the outputs to the inputs and to
every cut's outputs; then, last cut first, the cut's backward turns its accumulated output
gradients into gradients of its inputs, which autograd carries on upstream — the graph records
each op's ``*_backward`` where autograd would have called it. Outside ``cuts()`` the leaves
carry no gradient (a shape-only trace)."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, List, Optional, Sequence

import torch

# one list per active cuts(): (inputs, outputs, backward(output grads) -> input grads)
_CUTS: List[List[Any]] = []


def record(inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
           backward: Callable[[List[Optional[torch.Tensor]]], Sequence[Optional[torch.Tensor]]]
           ) -> Sequence[torch.Tensor]:
    """``outputs`` (computed from ``inputs`` without autograd) as fresh leaves, noted in the
    innermost ``cuts()`` with ``backward``: the output gradients (None: none reached it) ->
    one gradient or None per input. Outputs are returned as they are when autograd would
    record nothing (grad mode off, no input requires grad)."""
    if not (torch.is_grad_enabled() and any(t.requires_grad for t in inputs)):
        return tuple(outputs)
    outs = tuple(t.detach().requires_grad_() for t in outputs)
    if _CUTS:
        _CUTS[-1].append((list(inputs), outs, backward))
    return outs


@contextlib.contextmanager
def cuts() -> Iterator[List[Any]]:
    """Records the cuts of a forward, for ``grad``."""
    _CUTS.append([])
    try:
        yield _CUTS[-1]
    finally:
        _CUTS.pop()


def grad(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor],
         grad_outputs: Sequence[torch.Tensor], recorded: List[Any]
         ) -> List[Optional[torch.Tensor]]:
    """``torch.autograd.grad(outputs, inputs, grad_outputs, allow_unused=True)`` through the
    cuts ``recorded`` by ``cuts()`` (see the module docstring)."""
    if not recorded:
        return list(torch.autograd.grad(outputs, inputs, grad_outputs, allow_unused=True))
    inputs = list(inputs)
    leaves = inputs + [o for _, outs, _ in recorded for o in outs]
    acc: List[Optional[torch.Tensor]] = [None] * len(leaves)

    def backprop(roots, root_grads):
        pairs = [(r, g) for r, g in zip(roots, root_grads)
                 if g is not None and r.requires_grad]
        if not pairs:
            return
        got = torch.autograd.grad([r for r, _ in pairs], leaves, [g for _, g in pairs],
                                  allow_unused=True, retain_graph=True)
        for i, g in enumerate(got):
            if g is not None:
                acc[i] = g if acc[i] is None else acc[i] + g

    backprop(outputs, grad_outputs)
    end = len(leaves)
    for cut_inputs, outs, backward in reversed(recorded):
        start = end - len(outs)
        go = acc[start:end]
        end = start
        if all(g is None for g in go):
            continue
        backprop(cut_inputs, list(backward(go)))
    return acc[:len(inputs)]
