"""Python scalars among the example inputs: specialized into the graphs, as torch.export does.

``torch.export.export`` treats an argument that is a Python ``int``, ``float``, ``bool``,
``str`` or ``None`` as a constant of the program (the graph has its value; the exported
program's ``module()`` checks a later call passes the same value). pt2rt does the same for
``forward()``'s parameters given such a value (``forward(x, scale=2.0)``,
``forward(x, mask=None)``, ``forward(x, mode="train")``): during an export
(``scalars_specialized``) the model's class is swapped for a subclass whose ``forward`` takes
the other parameters only (its ``__signature__`` says so, so ``make_signature`` names and
binds just those) and calls the original ``forward`` with the constants added by name. A
subclass, not an instance attribute, so that copies of the model made during the export (the
float64 references' ``deepcopy``) call their own ``forward``. The archive's inputs are the
tensor arguments only — what the C++ runtime, ``export-cli`` and ``pt2rt.load`` take — and
metadata ``specialized_inputs`` records the constants (a JSON list of ``{"name", "position"
(in forward()'s parameters, self excluded), "value" (its repr)}``); ``pt2rt.load(...).module()``
takes them back where the original forward had them and checks each is the exported value, as
torch.export's ``ExportedProgram.module()`` checks a specialized input. Not done (the
capture's own error stands) for a ``forward`` with ``*args``, ``**kwargs`` or positional-only
parameters, one set on the instance, or a TorchScript module; a scalar nested in a list or dict
input is refused by ``input_spec.flatten``, naming its path.
"""
from __future__ import annotations

import contextlib
import inspect
import json
from typing import Any, Dict, Iterator, Tuple

import torch

_SCALARS = (bool, int, float, str, type(None))


def _specializable(model: torch.nn.Module) -> bool:
    if not isinstance(model, torch.nn.Module) or "forward" in model.__dict__ or \
            isinstance(model, torch.jit.ScriptModule):
        return False
    try:
        params = list(inspect.signature(type(model).forward).parameters.values())[1:]
    except (TypeError, ValueError):  # no Python signature (a builtin or wrapped forward)
        return False
    return all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)


@contextlib.contextmanager
def scalars_specialized(model: Any, args: Any, kwargs: Any
                        ) -> Iterator[Tuple[Any, Any, Dict[str, str]]]:
    """Within the block, ``model``'s ``forward`` takes only its non-scalar parameters (see the
    module docstring). Yields ``(args, kwargs, metadata)``: the example inputs without the
    scalars, and ``{"specialized_inputs": ...}`` (empty when nothing was specialized). Bad
    arguments are passed through unchanged for the capture to report."""
    unchanged = (args, kwargs, {})
    if not _specializable(model) or not isinstance(args, (tuple, list)) or \
            not isinstance(kwargs, (dict, type(None))):
        yield unchanged
        return
    cls = type(model)
    full = inspect.signature(cls.forward)
    try:
        bound = full.bind(model, *args, **(kwargs or {}))
    except TypeError:
        yield unchanged
        return
    self_name = next(iter(full.parameters))
    constants = {n: v for n, v in bound.arguments.items()
                 if n != self_name and isinstance(v, _SCALARS)}
    if not constants:
        yield unchanged
        return
    names = list(full.parameters)[1:]
    positional = [names[i] for i in range(len(args))]
    new_args = tuple(a for n, a in zip(positional, args) if n not in constants)
    new_kwargs = {k: v for k, v in (kwargs or {}).items() if k not in constants}
    reduced = full.replace(parameters=[p for n, p in full.parameters.items()
                                       if n not in constants])
    reduced_call = reduced.replace(parameters=list(reduced.parameters.values())[1:])
    original = cls.forward

    def forward(self, *a, **kw):
        call = reduced_call.bind(*a, **kw)
        return original(self, **call.arguments, **constants)
    forward.__signature__ = reduced
    forward.__doc__ = original.__doc__
    sub = type(cls.__name__, (cls,), {"forward": forward, "__module__": cls.__module__,
                                      "__qualname__": cls.__qualname__})
    try:
        model.__class__ = sub
    except TypeError:  # a class that does not allow it (__slots__ layouts): the capture reports
        yield unchanged
        return
    try:
        yield new_args, new_kwargs, {"specialized_inputs": json.dumps(
            [{"name": n, "position": names.index(n), "value": repr(v)}
             for n, v in constants.items()])}
    finally:
        model.__class__ = cls
