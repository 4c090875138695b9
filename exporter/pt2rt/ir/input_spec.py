"""The structure of forward()'s inputs: torch.export's ``in_spec`` for the containers pt2rt
carries (schema 1.6 ``InputParam`` / ``InputSpec``).

An example input may be a tensor or a tuple, list or str-keyed dict of them, nested (a
detection model's ``images: List[Tensor]``, a batch dict ``{"image": x, "mask": m}``). Its
tensors are the graphs' user inputs (``Plain(i)``) in ``torch.utils._pytree``'s flatten order
(tuple and list elements in order, dict values in insertion order), each named by its path as
``torch.utils._pytree.keystr`` writes it after the parameter's name (``images[0]``,
``batch['mask']``). ``InputSpec`` keeps the structure so that readers can take the same
structure back (``unflatten``; C++ ``Model::call``). Anything else in an input — a namedtuple,
a dataclass, a number, None — is refused with its path: it would be a constant of the trace
that the archive could not check at run time.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Iterator, List, Tuple

import torch

from ..errors import ExportTypeError, InputError
from .constants import MAX_INPUT_SPEC_DEPTH as MAX_DEPTH


class SpecKind(enum.IntEnum):
    """Schema ``InputSpecKind``."""
    Tensor = 0
    Tuple = 1
    List = 2
    Dict = 3


@dataclass(frozen=True)
class InputSpec:
    """One node of an input's structure: a tensor (a leaf), or a tuple / list / dict whose
    ``children`` are in order (``keys``: the dict's keys, one per child)."""
    kind: SpecKind = SpecKind.Tensor
    keys: Tuple[str, ...] = ()
    children: Tuple["InputSpec", ...] = field(default_factory=tuple)

    def num_leaves(self) -> int:
        return 1 if self.kind is SpecKind.Tensor else sum(c.num_leaves() for c in self.children)

    def leaf_names(self, name: str) -> Iterator[str]:
        """The leaves' paths below ``name``, in flatten order (``images[0]``, ``b['x']``)."""
        if self.kind is SpecKind.Tensor:
            yield name
            return
        for i, c in enumerate(self.children):
            key = f"[{self.keys[i]!r}]" if self.kind is SpecKind.Dict else f"[{i}]"
            yield from c.leaf_names(name + key)


TENSOR = InputSpec()


def flatten(value: Any, name: str, depth: int = 0) -> Tuple[InputSpec, List[torch.Tensor]]:
    """``value``'s structure and its tensors in flatten order.

    Raises:
        ExportTypeError: a part of ``value`` that is not a tensor, a plain tuple, a list or a
            dict with str keys (named by its path), or nesting deeper than MAX_DEPTH.
    """
    if isinstance(value, torch.Tensor):
        return TENSOR, [value]
    if depth >= MAX_DEPTH:
        raise ExportTypeError(f"pt2rt.export: input {name!r} nests containers more than "
                              f"{MAX_DEPTH} levels deep")
    if type(value) in (tuple, list):
        kind, keys, items = (SpecKind.Tuple if type(value) is tuple else SpecKind.List), (), \
            [(f"{name}[{i}]", v) for i, v in enumerate(value)]
    elif type(value) is dict and all(isinstance(k, str) for k in value):
        kind, keys, items = SpecKind.Dict, tuple(value), [(f"{name}[{k!r}]", v)
                                                          for k, v in value.items()]
    else:
        what = "a dict with non-str keys" if isinstance(value, dict) else \
            f"a {type(value).__name__}"
        raise ExportTypeError(f"pt2rt.export: input {name!r} is {what}; an example input must be "
                              "a torch.Tensor or a tuple, list or str-keyed dict of them "
                              "(nested)")
    children, leaves = [], []
    for path, v in items:
        spec, ts = flatten(v, path, depth + 1)
        children.append(spec)
        leaves += ts
    return InputSpec(kind, keys, tuple(children)), leaves


def unflatten(spec: InputSpec, leaves: Iterator[Any]) -> Any:
    """The structure ``spec`` describes, its leaves taken from ``leaves`` in order."""
    if spec.kind is SpecKind.Tensor:
        return next(leaves)
    items = [unflatten(c, leaves) for c in spec.children]
    if spec.kind is SpecKind.Dict:
        return dict(zip(spec.keys, items))
    return tuple(items) if spec.kind is SpecKind.Tuple else items


_KIND_NAMES = {SpecKind.Tuple: "tuple", SpecKind.List: "list", SpecKind.Dict: "dict"}


def leaves_of(spec: InputSpec, value: Any, name: str) -> List[Any]:
    """A call's ``value`` for an input of structure ``spec``, flattened (its leaves, which the
    signature then checks as tensors). A tuple is accepted where a list was exported and the
    reverse; a dict needs exactly the exported keys (in any order).

    Raises:
        InputError: naming the path where ``value``'s structure differs from ``spec``.
    """
    if spec.kind is SpecKind.Tensor:
        return [value]
    want = _KIND_NAMES[spec.kind]
    if spec.kind is SpecKind.Dict:
        if not isinstance(value, dict):
            raise InputError(f"pt2rt: input {name!r}: expected a dict with keys "
                             f"{list(spec.keys)}, got a {type(value).__name__}")
        if list(value) != list(spec.keys) and set(value) != set(spec.keys):
            raise InputError(f"pt2rt: input {name!r}: expected a dict with keys "
                             f"{list(spec.keys)}, got keys {list(value)}")
        items = [(f"{name}[{k!r}]", value[k]) for k in spec.keys]
    else:
        if not isinstance(value, (tuple, list)) or len(value) != len(spec.children):
            got = f"a {type(value).__name__} of {len(value)}" \
                if isinstance(value, (tuple, list)) else f"a {type(value).__name__}"
            raise InputError(f"pt2rt: input {name!r}: expected a {want} of "
                             f"{len(spec.children)}, got {got}")
        items = [(f"{name}[{i}]", v) for i, v in enumerate(value)]
    out: List[Any] = []
    for c, (path, v) in zip(spec.children, items):
        out += leaves_of(c, v, path)
    return out
