"""Optional, semantics-preserving passes over the inference graph (``export(...,
optimize_inference=True)``).

``fold_batch_norm``: an eval-mode BatchNorm whose input is a convolution (or a 2-D linear,
``addmm(bias, x, t(W))``) used by nothing else is folded into it, as frozen TorchScript does
(``torch.jit.freeze`` → FoldFrozenConvBatchnorm; the arithmetic of
``torch.nn.utils.fusion.fuse_conv_bn_weights``)::

    scale = gamma * rsqrt(running_var + eps)                  # [C_out]
    W'    = W * scale.view(C_out, 1, ...)                     # conv: [C_out, C_in/g, k...]
    b'    = (b - running_mean) * scale + beta                 # b = 0 when the conv has none
    y     = convolution(x, W', b', ...)                       # was: batch_norm(conv(x, W, b))

Unlike freezing, nothing becomes a constant: W' and b' are computed *in the graph* from the
model's current parameters and buffers, so the graph stays an exact function of the weights
(fine-tuning in C++ and then running eval mode sees the new weights). Those nodes read only
weights; in an inference_only load the C++ runtime computes them once and reuses them until a
weight changes (its version counter moves: runtime/plan/weight_cache.h), so per call only the
convolution remains; a load that may train recomputes them per call (torch::optim writes
parameters through Tensor::data(), which no version counter shows).
Numerics: the folded convolution rounds differently from conv + batch_norm (float32: relative
differences around 1e-6 per layer), as with frozen TorchScript.

Only what can be folded exactly is folded: the BatchNorm is ``native_batch_norm(...,
training=False, ...)`` with running statistics; weight, bias, running_mean, running_var and
the convolution's weight/bias are graph inputs bound to weights (Param/Buffer/Constant
descriptors); the convolution is not transposed; nothing but the BatchNorm reads its output,
and nothing but ``getitem(bn, 0)`` reads the BatchNorm's. Anything else is left alone.
"""
from __future__ import annotations

import operator
from typing import Dict, List, Optional, Sequence

import torch
import torch.fx as fx

from ..errors import ExportError
from ..ir.descriptors import InputKind
from ..ir.graph_ir import DescribedGraph, GraphRole

aten = torch.ops.aten

#: Names accepted by ``optimize(graph, passes)``; ``export(optimize_inference=True)`` runs all.
PASSES = ("fold_batch_norm",)

_WEIGHT_KINDS = (InputKind.Param, InputKind.Buffer, InputKind.Constant)


def _weight_inputs(g: DescribedGraph) -> Dict[fx.Node, object]:
    return {n: d for n, d in zip(g.placeholders(), g.inputs) if d.kind in _WEIGHT_KINDS}


def _is_weight(arg, weights: Dict[fx.Node, object]) -> bool:
    return arg is None or (isinstance(arg, fx.Node) and arg in weights)


def _only_user(node: fx.Node) -> Optional[fx.Node]:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _batch_norm_output(bn: fx.Node) -> Optional[fx.Node]:
    """The ``getitem(bn, 0)`` node when it is the BatchNorm's only user."""
    user = _only_user(bn)
    if user is not None and user.op == "call_function" and user.target is operator.getitem \
            and user.args[1] == 0:
        return user
    return None


def _producer(node) -> Optional[fx.Node]:
    return node if isinstance(node, fx.Node) and node.op == "call_function" else None


def fold_batch_norm(g: DescribedGraph) -> int:
    """Folds every foldable eval-mode BatchNorm of inference graph ``g`` into the convolution
    or linear before it (see the module docstring), in place. Returns how many were folded.

    Raises:
        ExportError: ``g`` is not an inference graph.
    """
    if g.role is not GraphRole.Inference:
        raise ExportError(f"pt2rt: fold_batch_norm runs on the inference graph, not {g.role.name}")
    graph = g.module.graph
    weights = _weight_inputs(g)
    folded = 0
    for bn in list(graph.nodes):
        if bn.op != "call_function" or bn.target is not aten.native_batch_norm.default:
            continue
        x, gamma, beta, mean, var, training, _momentum, eps = bn.args[:8]
        if training or mean is None or var is None:
            continue
        if not all(_is_weight(a, weights) for a in (gamma, beta, mean, var)):
            continue
        out = _batch_norm_output(bn)
        prod = _producer(x)
        if out is None or prod is None or _only_user(prod) is not bn:
            continue
        if prod.target is aten.convolution.default:
            folded += _fold_into_convolution(graph, prod, bn, out, weights)
        elif prod.target is aten.addmm.default:
            folded += _fold_into_addmm(graph, prod, bn, out, weights)
    if folded:
        graph.eliminate_dead_code()
        graph.lint()
        g.module.recompile()
    return folded


def _scale_and_shift(graph: fx.Graph, bn: fx.Node, bias: Optional[fx.Node]):
    """(scale, new_bias) nodes: scale = gamma * rsqrt(var + eps), new_bias = (bias - mean) *
    scale + beta; inserted before the node the caller is at."""
    _x, gamma, beta, mean, var, _t, _m, eps = bn.args[:8]
    inv = graph.call_function(aten.rsqrt.default, (graph.call_function(
        aten.add.Tensor, (var, float(eps))),))
    scale = inv if gamma is None else graph.call_function(aten.mul.Tensor, (gamma, inv))
    centred = graph.call_function(aten.neg.default, (mean,)) if bias is None else \
        graph.call_function(aten.sub.Tensor, (bias, mean))
    shift = graph.call_function(aten.mul.Tensor, (centred, scale))
    if beta is not None:
        shift = graph.call_function(aten.add.Tensor, (shift, beta))
    return scale, shift


def _copy_meta(nodes: Sequence[fx.Node], src: fx.Node) -> None:
    for n in nodes:
        for key in ("stack_trace", "nn_module_stack", "pt2rt_module_fqn"):
            if key in src.meta:
                n.meta[key] = src.meta[key]


def _take_result_meta(new: fx.Node, out: fx.Node) -> None:
    """The folded op computes what the BatchNorm's output held: same dtype and sizes —
    ``tensor_meta`` and, for a dynamic-shape capture, ``val`` (the fake tensor whose symbolic
    sizes ``lower.py`` stores). The scale/shift nodes read only weights, whose sizes are
    static, so the example run of ``annotate.py`` describes them fully."""
    new.meta.update({k: v for k, v in out.meta.items() if k in ("tensor_meta", "val")})


def _fold_into_convolution(graph: fx.Graph, conv: fx.Node, bn: fx.Node, out: fx.Node,
                           weights) -> int:
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = conv.args[:9]
    if transposed or not _is_weight(w, weights) or not _is_weight(b, weights) \
            or not isinstance(w, fx.Node):
        return 0
    w_meta = w.meta.get("tensor_meta")
    if w_meta is None:
        return 0
    c_out = int(w_meta.shape[0])
    with graph.inserting_before(conv):
        before = set(graph.nodes)
        scale, shift = _scale_and_shift(graph, bn, b)
        view = graph.call_function(aten.view.default,
                                   (scale, [c_out] + [1] * (len(w_meta.shape) - 1)))
        new_w = graph.call_function(aten.mul.Tensor, (w, view))
        new_conv = graph.call_function(
            aten.convolution.default,
            (x, new_w, shift, stride, padding, dilation, transposed, output_padding, groups))
        _copy_meta([n for n in graph.nodes if n not in before], conv)
    _take_result_meta(new_conv, out)
    out.replace_all_uses_with(new_conv)
    return 1


def _fold_into_addmm(graph: fx.Graph, addmm: fx.Node, bn: fx.Node, out: fx.Node,
                     weights) -> int:
    b, x, wt = addmm.args[:3]
    if addmm.kwargs.get("beta", 1) != 1 or addmm.kwargs.get("alpha", 1) != 1:
        return 0
    t = _producer(wt)
    if t is None or t.target is not aten.t.default or not _is_weight(b, weights):
        return 0
    w = t.args[0]
    if not _is_weight(w, weights) or not isinstance(w, fx.Node):
        return 0
    with graph.inserting_before(addmm):
        before = set(graph.nodes)
        scale, shift = _scale_and_shift(graph, bn, b)
        view = graph.call_function(aten.view.default, (scale, [-1, 1]))
        new_wt = graph.call_function(aten.t.default, (graph.call_function(
            aten.mul.Tensor, (w, view)),))
        new_mm = graph.call_function(aten.addmm.default, (shift, x, new_wt))
        _copy_meta([n for n in graph.nodes if n not in before], addmm)
    _take_result_meta(new_mm, out)
    out.replace_all_uses_with(new_mm)
    return 1


def optimize(g: DescribedGraph, passes: Sequence[str] = PASSES) -> Dict[str, int]:
    """Runs ``passes`` (names from ``PASSES``) on inference graph ``g`` in place; returns how
    often each applied.

    Raises:
        ExportError: an unknown pass name, or ``g`` is not an inference graph.
    """
    done: Dict[str, int] = {}
    for name in passes:
        if name not in PASSES:
            raise ExportError(f"pt2rt: unknown inference pass {name!r}; known: {', '.join(PASSES)}")
        done[name] = {"fold_batch_norm": fold_batch_norm}[name](g)
    return done
