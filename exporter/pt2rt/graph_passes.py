"""Small FX graph rewrites shared by the capture backends (they keep what the graph computes).

``drop_unused_batch_norm_stats``: ``aten.native_batch_norm_backward`` with ``train=True`` reads
``save_mean`` / ``save_invstd`` and never ``running_mean`` / ``running_var`` (ATen's CPU and
CUDA kernels alike: ``batch_norm_backward_cpu_template`` uses the running stats only when
``train`` is false). After functionalization those arguments point at the *updated* running
stats, which a partitioner would then keep as saved activations for nothing: pass None.

``bernoulli_out_of_place``: torch 1.13's CPU dropout (``at::native::dropout``'s
``_dropout_impl``) draws its mask with ``at::empty_like(input).bernoulli_(1 - p)``, and torch
1.13's functionalization has no functional variant of ``bernoulli_.float``, so the in-place op
stays in the graph (the runtime's operator policy refuses ops writing to an argument). On a
tensor nothing else reads, ``bernoulli_.float(t, p)`` is ``bernoulli.p(t, p)``: the same
kernel on a new tensor, the same numbers from the same generator.
"""
from __future__ import annotations

import torch
import torch.fx as fx

_BN_BACKWARD = torch.ops.aten.native_batch_norm_backward.default
_BERNOULLI_INPLACE = torch.ops.aten.bernoulli_.float


def drop_unused_batch_norm_stats(graph: fx.Graph) -> None:
    """Sets the running_mean / running_var arguments of training-mode
    ``native_batch_norm_backward`` nodes to None, in place."""
    for node in graph.nodes:
        if node.op == "call_function" and node.target is _BN_BACKWARD:
            args = list(node.args)
            if len(args) > 7 and args[7] is True:
                args[3] = None
                args[4] = None
                node.args = tuple(args)


def bernoulli_out_of_place(graph: fx.Graph) -> None:
    """Rewrites ``bernoulli_.float(t, p)`` on a value only that node reads (not a graph input)
    to ``bernoulli.p(t, p)``, in place. Other uses are left (and refused downstream)."""
    for node in graph.nodes:
        if node.op == "call_function" and node.target is _BERNOULLI_INPLACE \
                and isinstance(node.args[0], fx.Node) and node.args[0].op != "placeholder" \
                and len(node.args[0].users) == 1 and "generator" not in node.kwargs:
            p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.5)
            node.target = torch.ops.aten.bernoulli.p  # its p has no default: written out
            node.args, node.kwargs = (node.args[0], p), {}
