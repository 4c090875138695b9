"""Names of a program's user outputs (``Program.output_names``, schema 1.4).

Output ``Plain(i)`` is leaf i of ``forward()``'s return value flattened by
``torch.utils._pytree``; its name is that leaf's path written as ``torch.utils._pytree.keystr``
writes it (torch >= 2.2): ``['logits']`` for a dict key, ``[1]`` for a tuple/list position,
``.field`` for a namedtuple field, nested paths concatenated (``['feats'][0]``). A forward that
returns one bare tensor (empty path) names it ``output``. Archives before 1.4 carry no names;
readers then name the outputs positionally (``positional_names``: ``[0]``, ``[1]``, ...).
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

import torch.utils._pytree as pytree

SINGLE_OUTPUT = "output"


def positional_names(n: int) -> List[str]:
    """``["[0]", "[1]", ...]``: the names of an archive without ``output_names``."""
    return [f"[{i}]" for i in range(n)]


def output_names(out_spec: Any, num_outputs: int) -> List[str]:
    """One name per leaf of ``out_spec`` (a ``torch.utils._pytree.TreeSpec`` with
    ``num_outputs`` leaves), in leaf order; positional names when the spec is unknown or holds
    a container type whose paths this cannot spell (a custom pytree node on torch 1.13)."""
    if out_spec is None:
        return positional_names(num_outputs)
    structure = pytree.tree_unflatten(list(range(num_outputs)), out_spec)
    names: Dict[int, str] = {}
    for leaf, path in _leaf_paths(structure):
        if isinstance(leaf, int) and 0 <= leaf < num_outputs:
            names[leaf] = path or SINGLE_OUTPUT
    if sorted(names) != list(range(num_outputs)) or len(set(names.values())) != num_outputs:
        return positional_names(num_outputs)
    return [names[i] for i in range(num_outputs)]


def _leaf_paths(structure: Any) -> Iterator[Tuple[Any, str]]:
    """(leaf, keystr path) for every leaf: torch's own ``tree_flatten_with_path`` / ``keystr``
    where it exists (torch >= 2.2), else the same spelling for the containers torch 1.13's
    pytree knows (tuple, list, dict, OrderedDict, namedtuple)."""
    if hasattr(pytree, "tree_flatten_with_path") and hasattr(pytree, "keystr"):
        with_path, _ = pytree.tree_flatten_with_path(structure)
        for path, leaf in with_path:
            yield leaf, pytree.keystr(path)
        return
    yield from _walk(structure, "")


def _walk(x: Any, prefix: str) -> Iterator[Tuple[Any, str]]:
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _walk(v, f"{prefix}[{k!r}]")
    elif isinstance(x, tuple) and hasattr(x, "_fields"):
        for f, v in zip(x._fields, x):
            yield from _walk(v, f"{prefix}.{f}")
    elif isinstance(x, (tuple, list)):
        for i, v in enumerate(x):
            yield from _walk(v, f"{prefix}[{i!r}]")
    else:
        yield x, prefix
