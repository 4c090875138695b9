"""export(optimize_inference=True): BatchNorm folded into the convolution / linear before it
(exporter/pt2rt/passes/inference_passes.py) — what folds, what must not, and that the folded graph
still computes eager's eval outputs (within assert_close's tolerances) from the weights."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import models
import pt2rt
from pt2rt.passes import inference_passes
from pt2rt.ir.graph_ir import GraphRole

aten = torch.ops.aten


class Mixed(nn.Module):
    """Foldable: conv without bias + BN without affine; conv (groups=2) + BN; linear + BN1d.
    Not foldable: a conv whose output is also used elsewhere; a transposed conv + BN."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(4, affine=False)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1, groups=2)
        self.b2 = nn.BatchNorm2d(4)
        self.c3 = nn.Conv2d(4, 4, 1)
        self.b3 = nn.BatchNorm2d(4)
        self.ct = nn.ConvTranspose2d(4, 4, 2, stride=2)
        self.bt = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 6)
        self.bf = nn.BatchNorm1d(6)

    def forward(self, x):
        x = torch.relu(self.b1(self.c1(x)))
        x = torch.relu(self.b2(self.c2(x)))
        y = self.c3(x)
        x = self.b3(y) + y                   # the conv output has a second user: not folded
        x = self.bt(self.ct(x))              # transposed: not folded
        return self.bf(self.fc(x.mean(dim=(2, 3))))


def _randomized(model: nn.Module) -> nn.Module:
    """Non-trivial running statistics and affine parameters (fresh BN is the identity)."""
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.3)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                    m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.2)
    return model


def _batch_norms(exported) -> int:
    g = exported.graph(GraphRole.Inference).module.graph
    return sum(1 for n in g.nodes if n.op == "call_function"
               and n.target is aten.native_batch_norm.default)


def _eval_reference(model, args):
    m = copy.deepcopy(model).eval()
    with torch.no_grad():
        return m(*args)


@pytest.mark.parametrize("name", ["cnn_bn", "mixed"])
def test_folded_graph_matches_eager(name, tmp_path):
    if name == "mixed":
        torch.manual_seed(0)
        model, args = _randomized(Mixed()), (torch.randn(2, 3, 6, 6),)
    else:
        model, args = models.build(name)
        _randomized(model)
    exported = pt2rt.export(copy.deepcopy(model), args, train=False, optimize_inference=True)
    expected_folds = {"cnn_bn": 2, "mixed": 3}[name]
    assert exported.captured.metadata["inference_passes"] == f"fold_batch_norm:{expected_folds}"
    plain = pt2rt.export(copy.deepcopy(model), args, train=False)
    assert _batch_norms(exported) == _batch_norms(plain) - expected_folds
    path = tmp_path / "folded.pt2"
    exported.save(str(path))
    out = pt2rt.load(str(path)).run_inference(*args)
    out = out[0] if isinstance(out, (list, tuple)) else out
    torch.testing.assert_close(out, _eval_reference(model, args))


def test_training_graphs_untouched_and_default_off():
    model, args = models.build("cnn_bn")
    a = pt2rt.export(copy.deepcopy(model), args, optimize_inference=True)
    b = pt2rt.export(copy.deepcopy(model), args)
    assert "inference_passes" not in b.captured.metadata
    assert _batch_norms(b) == 2
    for role in (GraphRole.Forward, GraphRole.Backward):
        assert a.graph(role).count_nodes() == b.graph(role).count_nodes()


def test_unknown_pass_and_wrong_graph():
    model, args = models.build("cnn_bn")
    exported = pt2rt.export(model, args)
    with pytest.raises(pt2rt.ExportError, match="unknown inference pass 'fuse_all'"):
        inference_passes.optimize(exported.graph(GraphRole.Inference), ["fuse_all"])
    with pytest.raises(pt2rt.ExportError, match="runs on the inference graph"):
        inference_passes.fold_batch_norm(exported.graph(GraphRole.Forward))


def test_folded_graph_with_dynamic_batch(tmp_path):
    """optimize_inference with dynamic_shapes: the folded graph runs every batch in the range."""
    torch.manual_seed(0)
    model = _randomized(Mixed())
    exported = pt2rt.export(copy.deepcopy(model), (torch.randn(4, 3, 6, 6),), train=False,
                            optimize_inference=True,
                            dynamic_shapes={"x": {0: pt2rt.Dim("batch", min=1, max=64)}})
    assert exported.captured.metadata["inference_passes"] == "fold_batch_norm:3"
    fx_graph = exported.graph(GraphRole.Inference).module.graph
    conv = [n for n in fx_graph.nodes if n.target is aten.convolution.default][0]
    assert not isinstance(conv.meta["val"].shape[0], int)  # the batch stays a symbol
    exported.save(str(tmp_path / "folded.pt2"))
    loaded = pt2rt.load(str(tmp_path / "folded.pt2"))
    for batch in (1, 3, 64):
        x = torch.randn(batch, 3, 6, 6)
        out = loaded.run_inference(x)
        out = out[0] if isinstance(out, (list, tuple)) else out
        torch.testing.assert_close(out, _eval_reference(model, (x,)))
