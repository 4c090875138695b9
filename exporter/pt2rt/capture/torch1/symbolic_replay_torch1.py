"""Rewrites of a torch 1.13 symbolic trace before its functionalization replay
(``capture_torch1._replay_functionalized``): ops whose replay 1.13 cannot make on symbolic sizes,
as equivalent ones it can. Each keeps the values exactly.

* ``aten.sym_numel(t)`` (ATen's ``reshape`` with a -1 records it) as the product of ``t``'s
  ``aten.sym_size`` nodes: replaying, 1.13's proxy tracer cannot track the SymInt
  ``sym_numel`` returns ("b is not tracked with proxy"), while each ``sym_size`` it tracks.
* ``aten.div_`` (``.Tensor``, ``.Scalar``; torchvision's ``stochastic_depth``: ``noise.div_(p)``)
  as the out-of-place ``div`` whose result the later uses read: 1.13's functionalization
  kernel of ``div_`` reads ``numel()``. Only where that is what functionalization would do
  itself — the mutated tensor is no graph input and no view of it (or of the tensors it
  aliases through earlier in-place ops) was taken, so nothing else sees the mutation.
"""
from __future__ import annotations

import operator
from typing import Set

import torch
import torch.fx as fx

aten = torch.ops.aten
_DIVISIONS = (aten.div_.Tensor, aten.div_.Scalar)


def prepare_symbolic_replay(g: fx.GraphModule) -> None:
    """Both rewrites of the module docstring, in place on ``g`` (recompiled if changed)."""
    changed = _sym_numel_as_size_product(g)
    changed = _division_out_of_place(g) or changed
    if changed:
        g.recompile()


def _sym_numel_as_size_product(g: fx.GraphModule) -> bool:
    changed = False
    for node in list(g.graph.nodes):
        if node.op != "call_function" or node.target not in (aten.sym_numel,
                                                             aten.sym_numel.default):
            continue
        tensor = node.args[0]
        meta = tensor.meta.get("val", tensor.meta.get("tensor_meta"))
        if meta is None or len(meta.shape) == 0:
            continue
        with g.graph.inserting_before(node):
            product = g.graph.call_function(aten.sym_size, (tensor, 0))
            for d in range(1, len(meta.shape)):
                size = g.graph.call_function(aten.sym_size, (tensor, d))
                product = g.graph.call_function(operator.mul, (product, size))
        node.replace_all_uses_with(product)
        g.graph.erase_node(node)
        changed = True
    return changed


def _aliases(value: fx.Node) -> Set[fx.Node]:
    """``value`` and what it aliases through the in-place ops that produced it (their
    ``self``, which each returns)."""
    chain = {value}
    while value.op == "call_function" and _mutates_self(value.target) and value.args:
        value = value.args[0]
        chain.add(value)
    return chain


def _mutates_self(target) -> bool:
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.arguments:
        return False
    alias = schema.arguments[0].alias_info
    return alias is not None and alias.is_write


def _is_view(target) -> bool:
    schema = getattr(target, "_schema", None)
    return schema is not None and any(r.alias_info is not None for r in schema.returns) \
        and not _mutates_self(target)


def _division_out_of_place(g: fx.GraphModule) -> bool:
    order = {n: i for i, n in enumerate(g.graph.nodes)}
    changed = False
    for node in list(g.graph.nodes):
        if node.op != "call_function" or node.target not in _DIVISIONS:
            continue
        chain = _aliases(node.args[0])
        if any(n.op != "call_function" for n in chain) or any(
                _is_view(u.target) for n in chain for u in n.users if u.op == "call_function"):
            continue
        functional = aten.div.Tensor if node.target is aten.div_.Tensor else aten.div.Scalar
        with g.graph.inserting_before(node):
            out = g.graph.call_function(functional, node.args, node.kwargs)
        out.meta = dict(node.meta)
        for alias in chain:   # later reads of the mutated tensor read the quotient
            for user in list(alias.users):
                if user is not node and order.get(user, -1) > order[node]:
                    user.replace_input_with(alias, out)
        node.replace_all_uses_with(out)
        g.graph.erase_node(node)
        changed = True
    return changed
