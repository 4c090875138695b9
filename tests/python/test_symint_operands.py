"""A size in tensor arithmetic under a dynamic dim: ``h * x.shape[0]`` traces to
``aten.mul.Tensor(h, sym_size)``, a SymInt where the schema wants a Tensor. The capture writes it
as ``aten.scalar_tensor`` (``graph_passes.symint_operands_as_tensors``); the lowering refuses any
such argument left over at export, naming the node, instead of writing an archive the loader
refuses. Run at other sizes: ``tests/cli/test_dynamic_models.py`` (``size_arithmetic``)."""
from __future__ import annotations

import pytest
import torch

import pt2rt
from pt2rt.capture import capture as capture_module
from pt2rt.ir.graph_ir import GraphRole


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        return h * x.shape[0] + h / x.shape[1]


def _export():
    torch.manual_seed(0)
    dims = {0: pt2rt.Dim("batch", min=1, max=8), 1: pt2rt.Dim("seq", min=2, max=12)}
    return pt2rt.export(Scaled(), (torch.randn(3, 5, 8),), dynamic_shapes={"x": dims},
                        bundle_examples=False)


def test_sizes_in_tensor_arguments_become_scalar_tensors():
    archive = _export()
    for role in (GraphRole.Inference, GraphRole.Forward):
        targets = [n.target for n in archive.graph(role).module.graph.nodes
                   if n.op == "call_function"]
        assert targets.count(torch.ops.aten.scalar_tensor.default) == 2, targets


def test_a_symint_left_in_a_tensor_argument_is_refused_at_export(monkeypatch):
    monkeypatch.setattr(capture_module, "symint_operands_as_tensors", lambda graph: 0)
    with pytest.raises(pt2rt.ExportError, match=r"argument 'other' is .*, a SymInt, where the "
                                                r"schema of aten.mul.Tensor wants a Tensor"):
        _export()
