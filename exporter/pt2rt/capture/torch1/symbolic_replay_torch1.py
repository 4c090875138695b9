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
* ``aten.copy_(dst, src)`` as ``dst.fill_(-0.0).add_(src)``: 1.13's functionalization kernel of
  ``copy_`` reads ``sizes()``. Autograd's ``CopySlices`` (an in-place op on a view of a tensor
  that requires grad: EfficientNet's ``Dropout(inplace=True)`` on the flattened features)
  records ``copy_`` into buffers its backward allocates. The same values bit for bit: ``-0.0 +
  x`` is ``x`` for every float ``x`` (``+0.0``, ``-0.0``, inf and NaN included; from ``+0.0`` a
  ``-0.0`` would turn into ``+0.0``) and for every integer. Only where that holds and nothing
  can differ — ``dst`` and ``src`` of one floating or (non-bool) integer dtype, ``dst``'s storage
  allocated by the graph (no input's) and ``src`` not a view of it (``add_`` would read what
  ``fill_`` overwrote). A ``copy_`` of a view onto the same view (Python's ``x[:, :2] *= 3``:
  ``__setitem__`` writes back the view ``__imul__`` changed in place) copies nothing and is
  dropped.
"""
from __future__ import annotations

import operator
from typing import Any, List

import torch
import torch.fx as fx

aten = torch.ops.aten
_DIVISIONS = (aten.div_.Tensor, aten.div_.Scalar)


def prepare_symbolic_replay(g: fx.GraphModule) -> None:
    """Both rewrites of the module docstring, in place on ``g`` (recompiled if changed)."""
    changed = _sym_numel_as_size_product(g)
    changed = _division_out_of_place(g) or changed
    changed = _copy_as_fill_and_add(g) or changed
    if changed:
        g.recompile()


def _sym_numel_as_size_product(g: fx.GraphModule) -> bool:
    changed = False
    for node in list(g.graph.nodes):
        if node.op != "call_function" or node.target not in (aten.sym_numel,
                                                             aten.sym_numel.default):
            continue
        tensor = node.args[0]
        meta = _meta(tensor)
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


def _in_place_chain(value: fx.Node) -> List[fx.Node]:
    """``value``, then what it aliases through the in-place ops that produced it (their
    ``self``, which each returns), the tensor they all mutate last."""
    chain = [value]
    while value.op == "call_function" and _mutates_self(value.target) and value.args:
        value = value.args[0]
        chain.append(value)
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


# ops that return a view although their schemas do not say so (matmul's folding in 1.13)
_UNANNOTATED_VIEWS = (aten._unsafe_view.default,)


def _storage_root(value: fx.Node) -> fx.Node:
    """The node that allocated ``value``'s storage, through views and in-place ops (their schemas
    say they return an alias of their first argument) and ``_unsafe_view``."""
    while value.op == "call_function" and value.args and isinstance(value.args[0], fx.Node) \
            and (_mutates_self(value.target) or _is_view(value.target)
                 or value.target in _UNANNOTATED_VIEWS):
        value = value.args[0]
    return value


def _same_view(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same elements of the same storage: one node (through in-place
    ops) or one view op with equal arguments of such a pair."""
    if not isinstance(a, fx.Node) or not isinstance(b, fx.Node):
        return False
    a, b = _in_place_chain(a)[-1], _in_place_chain(b)[-1]
    if a is b:
        return True
    return a.op == b.op == "call_function" and a.target == b.target and _is_view(a.target) \
        and len(a.args) == len(b.args) and a.kwargs == b.kwargs and a.args[1:] == b.args[1:] \
        and _same_view(a.args[0], b.args[0])


def _meta(value: Any) -> Any:
    """A node's traced tensor metadata (``val`` or ``tensor_meta``), or None."""
    if not isinstance(value, fx.Node):
        return None
    return value.meta.get("val", value.meta.get("tensor_meta"))


def _dtype(value: Any) -> Any:
    return getattr(_meta(value), "dtype", None)


def _copy_as_fill_and_add(g: fx.GraphModule) -> bool:
    changed = False
    for node in list(g.graph.nodes):
        if node.op != "call_function" or node.target is not aten.copy_.default:
            continue
        dst, src = node.args[0], node.args[1]
        if _same_view(dst, src):
            node.replace_all_uses_with(dst)
            g.graph.erase_node(node)
            changed = True
            continue
        dtype = _dtype(dst)
        if dtype is None or dtype != _dtype(src) or dtype is torch.bool or dtype.is_complex:
            continue
        root = _storage_root(dst)
        if root.op != "call_function" or _storage_root(src) is root:
            continue
        with g.graph.inserting_before(node):
            filled = g.graph.call_function(aten.fill_.Scalar, (dst, -0.0))
            out = g.graph.call_function(aten.add_.Tensor, (filled, src))
        filled.meta = dict(dst.meta)
        out.meta = dict(node.meta)
        node.replace_all_uses_with(out)
        g.graph.erase_node(node)
        changed = True
    return changed


def _division_out_of_place(g: fx.GraphModule) -> bool:
    order = {n: i for i, n in enumerate(g.graph.nodes)}
    changed = False
    for node in list(g.graph.nodes):
        if node.op != "call_function" or node.target not in _DIVISIONS:
            continue
        chain = _in_place_chain(node.args[0])
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
