"""Value metadata for serialization: run a DescribedGraph once on example tensors and record,
per node, what each produced tensor looks like (``node.meta["pt2rt_val"]``).

torch 1.13's ``make_fx`` in real mode keeps only ``meta["tensor_meta"]`` (no device, no storage
offset), so capture runs each finished graph with ``torch.fx.Interpreter`` under
``torch.no_grad()``. ``requires_grad`` is not what no-grad execution reports but what autograd
would record: a floating value that depends on a differentiable input (trainable parameter or
grad-requiring user input) through anything but ``aten.detach``; backward and inference graph
values never require grad.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import torch
import torch.fx as fx

from ..ir.descriptors import InputDescriptor, OutputDescriptor
from ..ir.graph_ir import DescribedGraph

META_KEY = "pt2rt_val"
_NO_GRAD_OPS = {torch.ops.aten.detach.default}


@dataclass(frozen=True)
class TensorInfo:
    dtype: torch.dtype
    sizes: Tuple[int, ...]
    strides: Tuple[int, ...]
    storage_offset: int
    device: torch.device
    requires_grad: bool
    layout: torch.layout = torch.strided


def tensor_info(t: torch.Tensor, requires_grad: bool) -> TensorInfo:
    strided = t.layout == torch.strided
    return TensorInfo(t.dtype, tuple(t.shape), tuple(t.stride()) if strided else (),
                      t.storage_offset() if strided else 0, t.device,
                      requires_grad and (t.is_floating_point() or t.is_complex()), t.layout)


def _info(value: Any, rg: bool) -> Any:
    if isinstance(value, torch.Tensor):
        return tensor_info(value, rg)
    if isinstance(value, (list, tuple)):
        return type(value)(_info(v, rg) for v in value)
    return value


class _Annotator(fx.Interpreter):
    def __init__(self, gm: fx.GraphModule, differentiable: List[bool]):
        super().__init__(gm)
        self.differentiable_ = iter(differentiable)
        self.rg_: Dict[fx.Node, bool] = {}

    def run_node(self, n: fx.Node) -> Any:
        result = super().run_node(n)
        if n.op == "placeholder":
            rg = next(self.differentiable_)
        elif n.op == "call_function" and n.target not in _NO_GRAD_OPS:
            rg = any(self.rg_.get(a, False) for a in n.all_input_nodes)
        else:
            rg = False
        self.rg_[n] = rg
        if n.op != "output":
            n.meta[META_KEY] = _info(result, rg)
        return result


def annotate(dg: DescribedGraph, inputs: Mapping[InputDescriptor, torch.Tensor],
             differentiable: Callable[[InputDescriptor], bool] = lambda d: False
             ) -> Dict[OutputDescriptor, Optional[torch.Tensor]]:
    """Runs ``dg`` on ``inputs`` (one tensor per input descriptor), records
    ``meta["pt2rt_val"]`` (a TensorInfo, or a tuple/list of them) on every node, and returns the
    outputs by descriptor.

    Raises:
        KeyError: an input descriptor of ``dg`` is missing from ``inputs``.
    """
    args = [inputs[d] for d in dg.inputs]
    with torch.no_grad():
        outs = _Annotator(dg.module, [differentiable(d) for d in dg.inputs]).run(*args)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return dict(zip(dg.outputs, outs))
