"""Calling a module with substituted state: shared by capture backends and the eager references.

``torch.func.functional_call`` (torch 1.13: ``torch.nn.utils.stateless.functional_call``) runs ``model`` with the given tensors in place of
its parameters and buffers (by FQN) and leaves the module untouched, so tracing and reference
runs never mutate the user's model (BatchNorm updates land in the substituted buffers).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Sequence, Tuple

import torch
import torch.utils._pytree as pytree
try:  # torch >= 2.0; torch.nn.utils.stateless's is deprecated there
    from torch.func import functional_call
except ImportError:  # torch 1.13
    from torch.nn.utils.stateless import functional_call

from .errors import ExportError
from .graph_ir import ExportSignature, WeightSpec


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


def call_model(model: torch.nn.Module, names: List[List[str]], state: Sequence[torch.Tensor],
               sig: ExportSignature, user_inputs: Sequence[torch.Tensor]) -> Any:
    """``model(*args, **kwargs)`` with ``state[i]`` standing in for weight i."""
    mapping = {name: t for ns, t in zip(names, state) for name in ns}
    args, kwargs = sig.split(list(user_inputs))
    return functional_call(model, mapping, args, kwargs)


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
