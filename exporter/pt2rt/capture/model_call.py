"""Calling a module with substituted state: shared by the capture backends.

``substituted(model, names, state)`` runs a block with the given tensors in place of the
model's parameters and buffers (by FQN), through ``torch.nn.utils.stateless._reparametrize_module``
(what ``torch.func.functional_call`` / torch 1.13's ``torch.nn.utils.stateless.functional_call``
use), and leaves the module untouched afterwards, so tracing never mutates the user's model
(BatchNorm updates land in the substituted buffers).

Two things ``functional_call`` alone gets wrong, and this module fixes:

* **Aliases of parameters.** A module may keep its own references to its parameters outside
  ``_parameters``/``_buffers``: ``nn.RNNBase._flat_weights`` (nn.LSTM/GRU/RNN; a list built
  from the Parameters at construction, read by the ``_VF.lstm``/``gru``/``rnn_*`` kernels), or
  any user attribute holding a parameter/buffer or a list/tuple of them. torch 1.13's
  ``_reparametrize_module`` swaps only attribute lookup, so such a reference still points at
  the real Parameter, the tracer records it as a constant and its gradient is lost.
  ``substituted`` replaces every such reference (by identity) with the substituted tensor for
  the duration, and restores it afterwards.
* **Backward outside the substitution.** ``functional_call`` restores the real parameters
  when ``forward`` returns; anything autograd recomputes later (``torch.utils.checkpoint``)
  would then read them. The capture runs ``torch.autograd.grad`` inside ``substituted``.

``capture.check_no_aliased_constants`` is the guard behind both: a lifted constant sharing
storage with a parameter or buffer fails the export.
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.utils._pytree as pytree
from torch.nn.utils.stateless import _reparametrize_module  # torch 1.13 and 2.x

from ..errors import ExportError
from ..ir.graph_ir import ExportSignature, WeightSpec


@contextlib.contextmanager
def training_mode(model: torch.nn.Module, train: bool) -> Iterator[None]:
    """``model.train(train)`` for the duration; the previous mode is restored."""
    was = model.training
    model.train(train)
    try:
        yield
    finally:
        model.train(was)


def state_names(model: torch.nn.Module, weights: Sequence[WeightSpec]) -> List[List[str]]:
    """For each weight, every FQN it is reachable by (tied weights have several)."""
    index = {id(w.tensor): i for i, w in enumerate(weights)}
    names: List[List[str]] = [[] for _ in weights]
    for mod_fqn, mod in model.named_modules(remove_duplicate=False):
        for attrs in (mod._parameters, mod._buffers):
            for name, t in attrs.items():
                i = index.get(id(t)) if t is not None else None
                if i is not None:
                    fqn = f"{mod_fqn}.{name}" if mod_fqn else name
                    if fqn not in names[i]:
                        names[i].append(fqn)
    return names


def _swap_aliases(model: torch.nn.Module,
                  replacement: Dict[int, torch.Tensor]) -> List[Tuple[dict, str, Any]]:
    """Replaces, in every submodule's ``__dict__``, each tensor attribute (or list/tuple of
    tensors) that is one of the originals (``id`` in ``replacement``) by its replacement.
    Returns what to put back."""
    undo: List[Tuple[dict, str, Any]] = []
    for mod in model.modules():
        d = vars(mod)
        for key, value in list(d.items()):
            if isinstance(value, torch.Tensor):
                if id(value) in replacement:
                    undo.append((d, key, value))
                    d[key] = replacement[id(value)]
            elif isinstance(value, (list, tuple)) and any(
                    isinstance(v, torch.Tensor) and id(v) in replacement for v in value):
                undo.append((d, key, value))
                d[key] = type(value)(replacement.get(id(v), v) if isinstance(v, torch.Tensor)
                                     else v for v in value)
    return undo


def _originals(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """Every FQN (tied weights: each of them) -> the parameter/buffer tensor it names now."""
    out: Dict[str, torch.Tensor] = {}
    for mod_fqn, mod in model.named_modules(remove_duplicate=False):
        for attrs in (mod._parameters, mod._buffers):
            for name, t in attrs.items():
                if t is not None:
                    out[f"{mod_fqn}.{name}" if mod_fqn else name] = t
    return out


def _restore(undo: List[Tuple[dict, str, Any]]) -> None:
    for d, key, value in reversed(undo):
        d[key] = value
    undo.clear()


@contextlib.contextmanager
def aliases_follow_substitution(model: torch.nn.Module) -> Iterator[None]:
    """For a capture that substitutes the parameters itself (AOTAutograd's
    ``_reparametrize_module`` on the torch-2 lane): at every call of ``model``, the aliases of
    its parameters and buffers (see the module docstring) are pointed at whatever the FQNs
    resolve to at that moment (the substituted tensors); the originals are put back on exit."""
    originals = _originals(model)
    undo: List[Tuple[dict, str, Any]] = []

    def pre_hook(module, args):
        _restore(undo)
        current = _originals(model)
        replacement = {id(t): current[fqn] for fqn, t in originals.items()
                       if fqn in current and current[fqn] is not t}
        undo.extend(_swap_aliases(model, replacement))

    handle = model.register_forward_pre_hook(pre_hook)
    try:
        yield
    finally:
        handle.remove()
        _restore(undo)


@contextlib.contextmanager
def substituted(model: torch.nn.Module, names: List[List[str]],
                state: Sequence[torch.Tensor]) -> Iterator[None]:
    """Runs the block with ``state[i]`` standing in for weight i (reachable by the FQNs
    ``names[i]``), aliases included (see the module docstring); restores everything on exit."""
    mapping = {name: t for ns, t in zip(names, state) for name in ns}
    replacement = {id(t): mapping[fqn] for fqn, t in _originals(model).items() if fqn in mapping}
    try:
        with _reparametrize_module(model, mapping):
            undo = _swap_aliases(model, replacement)
            try:
                yield
            finally:
                _restore(undo)
    finally:
        # torch 1.13's _reparametrize_module swaps each module's class for a per-call
        # subclass whose closures hold ``mapping``: that class is cyclic garbage, which kept
        # every substituted tensor (a capture's copy of the weights) alive until the cycle
        # collector ran — resnet18's export held two extra copies of its weights during the
        # float64 references. Emptied here, the garbage holds no tensor.
        mapping.clear()


def call_model(model: torch.nn.Module, names: List[List[str]], state: Sequence[torch.Tensor],
               sig: ExportSignature, user_inputs: Sequence[torch.Tensor]) -> Any:
    """``model(*args, **kwargs)`` with ``state[i]`` standing in for weight i."""
    args, kwargs = sig.split(list(user_inputs))
    with substituted(model, names, state):
        return model(*args, **kwargs)


def fresh(t: torch.Tensor, requires_grad: bool = False) -> torch.Tensor:
    """A private copy (so callers' tensors are never mutated), optionally a grad leaf."""
    return t.detach().clone().requires_grad_(requires_grad)


def flat_outputs(out, what: str) -> Tuple[List[torch.Tensor], object]:
    """Flattens forward()'s return value (a pytree of tensors) into its leaves and spec.

    Raises:
        ExportError: a leaf is not a tensor, naming its position.
    """
    leaves, spec = pytree.tree_flatten(out)
    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, torch.Tensor):
            raise ExportError(f"pt2rt.export: {what} output {i} is a {type(leaf).__name__}, "
                              "not a torch.Tensor; forward() must return tensors "
                              "(possibly nested in tuples/lists/dicts)")
        if leaf.layout != torch.strided:
            raise ExportError(f"pt2rt.export: {what} output {i} has layout {leaf.layout}; only "
                              "strided (dense) tensors can be exported")
    return leaves, spec


@contextlib.contextmanager
def private_state(model: torch.nn.Module,
                  dtype: Optional[torch.dtype] = None) -> Iterator[torch.nn.Module]:
    """``model`` itself with private copies of its state, for runs that must leave it as it
    was (the eager references of a model ``copy.deepcopy`` refuses): every parameter and buffer
    gets a clone of its data (floating ones cast to ``dtype`` when given) and no ``.grad``;
    every submodule's attributes (``__dict__``: plain tensor attributes such as
    ``weight_norm``'s ``weight``, counters) and training flag are saved. On exit the original
    data, gradients, attributes and flags are put back; what a run computed stays with the
    values it returned."""
    tensors = list({id(t): t for t in list(model.parameters()) + list(model.buffers())}.values())
    saved = [(t, t.data, t.grad if isinstance(t, torch.nn.Parameter) else None) for t in tensors]
    try:
        with restored_attributes(model):
            for t in tensors:
                cast = dtype is not None and t.data.is_floating_point()
                t.data = t.data.to(dtype, copy=True) if cast else t.data.clone()
                if isinstance(t, torch.nn.Parameter):
                    t.grad = None
            yield model
    finally:
        for t, data, grad in saved:
            t.data = data
            if isinstance(t, torch.nn.Parameter):
                t.grad = grad


@contextlib.contextmanager
def restored_attributes(model: torch.nn.Module) -> Iterator[None]:
    """Every submodule's attributes (``__dict__``, shallow: its parameter, buffer and module
    tables are the same objects) and training flag put back on exit. Forward pre-hooks that
    store a computed tensor as an attribute (``torch.nn.utils.weight_norm``'s ``weight``)
    would otherwise keep what a trace or a reference run left there — a fake tensor after a
    torch 2.x capture."""
    attributes = [(m, dict(m.__dict__), m.training) for m in model.modules()]
    try:
        yield
    finally:
        for m, attrs, training in attributes:
            m.__dict__.clear()
            m.__dict__.update(attrs)
            m.training = training
