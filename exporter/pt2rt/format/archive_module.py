"""``pt2rt.load(path).module()``: an archive back as a ``torch.nn.Module``, as torch.export's
``ExportedProgram.module()`` gives one — for checking an archive in Python, or using it where a
module is expected.

``ArchiveModule``:

* holds the archive's weights as its own parameters and buffers, at their original FQNs
  (submodules made along the dotted paths), so ``state_dict()`` has the exported model's keys
  and ``load_state_dict`` / optimizers work on it; constants are non-persistent buffers;
* ``forward(*args, **kwargs)`` takes the inputs like the original ``forward`` (positional
  and/or by keyword, checked against the signature: ``pt2rt.InputError``) and returns the
  outputs in the original structure, rebuilt from ``Program.output_names``: ``['key']`` a dict,
  ``[i]`` a tuple, ``.field`` a ``types.SimpleNamespace`` (the pytree node's own class is not
  stored), ``output`` the lone tensor; ``None`` where forward() returned it (metadata
  ``none_outputs``, ``capture/none_outputs.py``); arguments the export specialized (Python
  scalars, metadata ``specialized_inputs``, ``capture/specialized_inputs.py``) may be passed
  where forward() had them and must equal the exported value (``pt2rt.InputError``
  otherwise), as in ``ExportedProgram.module()``;
* ``eval()`` (the starting mode when the archive has an inference graph) runs the inference
  graph; ``train()`` runs the forward graph as one
  ``torch.autograd.Function`` whose backward is the archive's backward graph (what the C++
  runtime does, ``runtime/exec/autograd_function.h``), and copies the new BatchNorm statistics
  (``InputMutation`` outputs) into the buffers. Graphs run on the reference executor
  (``executor.py``): the CPU, meant for checks, not speed.
"""
from __future__ import annotations

import json
import re
import types
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ..errors import InputError
from ..ir.descriptors import InputKind, OutputKind
from ..ir.graph_ir import GraphRole, WeightKind

_TOKEN = re.compile(r"\[(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"|(-?\d+))\]|\.([A-Za-z_]\w*)")


def _path(name: str) -> List[Tuple[str, Any]]:
    """keystr spelling -> [("key", k) | ("idx", i) | ("attr", a)]; [] for "output"."""
    if name == "output":
        return []
    out, pos = [], 0
    for m in _TOKEN.finditer(name):
        if m.start() != pos:
            raise ValueError(f"pt2rt: output name {name!r} is not a pytree path")
        pos = m.end()
        key = m.group(1) if m.group(1) is not None else m.group(2)
        if key is not None:
            out.append(("key", key))
        elif m.group(3) is not None:
            out.append(("idx", int(m.group(3))))
        else:
            out.append(("attr", m.group(4)))
    if pos != len(name):
        raise ValueError(f"pt2rt: output name {name!r} is not a pytree path")
    return out


def unflatten(values: Sequence[Any], names: Sequence[str]) -> Any:
    """The outputs ``values`` in the structure their names (``Program.output_names``) spell."""
    paths = [_path(n) for n in names]
    if len(values) == 1 and not paths[0]:
        return values[0]

    def build(entries: List[Tuple[List[Tuple[str, Any]], Any]]) -> Any:
        if len(entries) == 1 and not entries[0][0]:
            return entries[0][1]
        kind = entries[0][0][0][0]
        groups: Dict[Any, List] = {}
        for path, v in entries:
            groups.setdefault(path[0][1], []).append((path[1:], v))
        children = {k: build(g) for k, g in groups.items()}
        if kind == "idx":
            return tuple(children[i] for i in sorted(children))
        if kind == "attr":
            return types.SimpleNamespace(**children)
        return children
    return build(list(zip(paths, values)))


def none_paths(metadata: Dict[str, str]) -> List[str]:
    """The paths of forward()'s ``None`` outputs (metadata ``none_outputs``, a JSON list of
    output-name spellings); empty when absent or not such a list (untrusted input)."""
    try:
        paths = json.loads(metadata.get("none_outputs", "[]"))
        if isinstance(paths, list) and all(isinstance(p, str) for p in paths):
            for p in paths:
                _path(p)
            return paths
    except ValueError:
        pass
    return []


def specialized_inputs(metadata: Dict[str, str]) -> List[Dict[str, Any]]:
    """The export's specialized arguments (metadata ``specialized_inputs``: a JSON list of
    ``{"name", "position", "value"}``), by position; empty when absent or malformed (untrusted
    input)."""
    try:
        entries = json.loads(metadata.get("specialized_inputs", "[]"))
    except ValueError:
        return []
    ok = isinstance(entries, list) and all(
        isinstance(e, dict) and isinstance(e.get("name"), str) and
        isinstance(e.get("value"), str) and isinstance(e.get("position"), int) and
        not isinstance(e.get("position"), bool) and e["position"] >= 0 for e in entries)
    return sorted(entries, key=lambda e: e["position"]) if ok else []


def drop_specialized(specialized: List[Dict[str, Any]], args: Sequence[Any],
                     kwargs: Dict[str, Any]) -> Tuple[List[Any], Dict[str, Any]]:
    """``args``/``kwargs`` as the original forward() takes them, without the specialized
    arguments (``specialized_inputs``' entries; by position, or by name).

    Raises:
        InputError: a specialized argument passed with another value than the exported one.
    """
    args, kwargs = list(args), dict(kwargs)
    for e in reversed(specialized):  # last position first: the earlier indices stay
        name, pos = e["name"], e["position"]
        if name in kwargs:
            given = kwargs.pop(name)
        elif pos < len(args):
            given = args.pop(pos)
        else:
            continue
        if repr(given) != e["value"]:
            raise InputError(f"pt2rt: input {name!r} was specialized to {e['value']} at export "
                             f"(a Python scalar is a constant of the graphs), got {given!r}; "
                             "export again with that value")
    return args, kwargs


class _TrainingCall(torch.autograd.Function):
    """The forward graph as one autograd node; its backward runs the backward graph."""

    @staticmethod
    def forward(ctx, module: "ArchiveModule", n_inputs: int, *tensors: torch.Tensor):
        archive = module.archive
        inputs = list(tensors[:n_inputs])
        fwd = archive.run_forward(*inputs)
        with torch.no_grad():
            for fqn, t in fwd.mutations.items():
                module.get_buffer(fqn).copy_(t)
        ctx.archive, ctx.n_inputs = archive, n_inputs
        ctx.saved_map, ctx.outputs = fwd.saved, fwd.outputs
        ctx.trainable = module.trainable_fqns()
        outs = tuple(o if o is not None else torch.empty(0) for o in fwd.outputs)
        ctx.mark_non_differentiable(*[o for o in outs if not o.is_floating_point()])
        return outs

    @staticmethod
    def backward(ctx, *grad_outputs: torch.Tensor):
        grads = ctx.archive.run_backward(ctx.saved_map, list(grad_outputs), ctx.outputs)
        return (None, None, *[grads.get(f"input:{i}") for i in range(ctx.n_inputs)],
                *[grads.get(fqn) for fqn in ctx.trainable])


class ArchiveModule(torch.nn.Module):
    """See the module docstring. ``archive``: a ``reader.LoadedArchive`` (this module then
    owns its weight tensors)."""

    def __init__(self, archive: Any):
        super().__init__()
        self.archive = archive
        for w in archive.program.weights:
            owner, _, name = w.fqn.rpartition(".")
            parent = self._submodule(owner)
            t = archive.weights[w.fqn]
            if w.kind is WeightKind.Parameter:
                p = torch.nn.Parameter(t.detach(), requires_grad=w.requires_grad)
                parent.register_parameter(name, p)
                archive.weights[w.fqn] = p
            else:
                parent.register_buffer(name, t.detach(),
                                       persistent=w.kind is WeightKind.Buffer and w.persistent)
                archive.weights[w.fqn] = parent.get_buffer(name)
        self.training = archive.graph(GraphRole.Inference) is None
        # the output names with forward()'s None leaves (padded with None at each call), and
        # the specialized arguments: read from the metadata once
        names = archive.program.output_names or [f"[{i}]" for i in
                                                 range(len(archive.signature.outputs))]
        nones = none_paths(archive.program.metadata)
        self.output_names_, self.none_count_ = names + nones, len(nones)
        self.specialized_ = specialized_inputs(archive.program.metadata)

    def _submodule(self, path: str) -> torch.nn.Module:
        mod: torch.nn.Module = self
        for part in path.split(".") if path else []:
            if not hasattr(mod, part):
                mod.add_module(part, torch.nn.Module())
            mod = getattr(mod, part)
        return mod

    def trainable_fqns(self) -> List[str]:
        return [w.fqn for w in self.archive.program.weights
                if w.kind is WeightKind.Parameter and w.requires_grad]

    def forward(self, *args: torch.Tensor, **kwargs: torch.Tensor) -> Any:
        archive = self.archive
        args, kwargs = drop_specialized(self.specialized_, args, kwargs)
        names, pad = self.output_names_, [None] * self.none_count_
        if not self.training:
            if archive.graph(GraphRole.Inference) is None:
                raise RuntimeError("pt2rt: this archive has no inference graph (exported with "
                                   "inference=False); call .train() to run its forward graph")
            return unflatten(list(archive.run_inference(*args, **kwargs)) + pad, names)
        if archive.graph(GraphRole.Forward) is None:
            raise RuntimeError("pt2rt: this archive has no training graphs (exported with "
                               "train=False); call .eval()")
        inputs = archive.user_inputs(args, kwargs)
        params = [self.get_parameter(fqn) for fqn in self.trainable_fqns()]
        outs = _TrainingCall.apply(self, len(inputs), *inputs, *params)
        return unflatten(list(outs) + pad, names)
