"""Small FX graph rewrites shared by the capture backends (they keep what the graph computes).

``drop_unused_batch_norm_stats``: ``aten.native_batch_norm_backward`` with ``train=True`` reads
``save_mean`` / ``save_invstd`` and never ``running_mean`` / ``running_var`` (ATen's CPU and
CUDA kernels alike: ``batch_norm_backward_cpu_template`` uses the running stats only when
``train`` is false). After functionalization those arguments point at the *updated* running
stats, which a partitioner would then keep as saved activations for nothing: pass None.
"""
from __future__ import annotations

import torch
import torch.fx as fx

_BN_BACKWARD = torch.ops.aten.native_batch_norm_backward.default


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
