"""pt2rt::lstm / pt2rt::lstm_backward (exporter/pt2rt/ops/rnn_ops.py): the kernels against eager
autograd, the capture of nn.LSTM on a dynamic sequence length as one node (and only then), the
reference executor's train step against eager, and the refusals."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.utils._pytree as pytree

import pt2rt
from pt2rt.ops import rnn_ops
from pt2rt.ir.graph_ir import GraphRole

SEQ = pt2rt.Dim("seq", min=2, max=12)
BATCH = pt2rt.Dim("batch", min=1, max=8)


def _lstm_and_args(bidirectional, num_layers, batch_first, bias=True, T=5, B=3):
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(6, 7, num_layers=num_layers, bidirectional=bidirectional,
                         batch_first=batch_first, bias=bias)
    x = torch.randn(B, T, 6) if batch_first else torch.randn(T, B, 6)
    dirs = 2 if bidirectional else 1
    hx = [torch.randn(num_layers * dirs, B, 7), torch.randn(num_layers * dirs, B, 7)]
    flags = (bias, num_layers, 0.0, True, bidirectional, batch_first)
    return lstm, x, hx, flags


@pytest.mark.parametrize("bidirectional,num_layers,batch_first,bias",
                         [(False, 1, True, True), (True, 2, False, True),
                          (False, 2, True, False)])
def test_kernels_match_eager_autograd(bidirectional, num_layers, batch_first, bias):
    rnn_ops.register()
    lstm, x, hx, flags = _lstm_and_args(bidirectional, num_layers, batch_first, bias)
    params = [p.detach() for p in lstm._flat_weights]
    out = torch.ops.pt2rt.lstm.default(x, hx, params, *flags)
    leaves = [t.clone().requires_grad_() for t in [x, *hx, *params]]
    want = torch.lstm(leaves[0], leaves[1:3], leaves[3:], *flags)
    for got, w in zip(out, want):
        assert torch.equal(got, w.detach()) and got.is_contiguous()
    g = [torch.randn_like(w) for w in want]
    # grad_c_n None: counts as zeros
    grads = torch.ops.pt2rt.lstm_backward.default(g[0], g[1], None, x, hx, params, *flags)
    ref = torch.autograd.grad(want[:2], leaves, g[:2])
    assert len(grads) == len(leaves)
    for got, w, leaf in zip(grads, ref, leaves):
        assert got.shape == leaf.shape
        assert torch.equal(got, w)
    none = torch.ops.pt2rt.lstm_backward.default(None, None, None, x, hx, params, *flags)
    assert all(torch.equal(t, torch.zeros_like(leaf)) for t, leaf in zip(none, leaves))


@pytest.mark.parametrize("kind,cell,kw", [
    ("gru", torch.nn.GRU, {}), ("rnn_tanh", torch.nn.RNN, {"num_layers": 2}),
    ("rnn_relu", torch.nn.RNN, {"nonlinearity": "relu", "bidirectional": True})])
def test_single_state_kernels_match_eager_autograd(kind, cell, kw):
    """pt2rt::gru / rnn_tanh / rnn_relu and their backwards: ATen's op and its gradients."""
    rnn_ops.register()
    torch.manual_seed(0)
    rnn = cell(input_size=5, hidden_size=6, batch_first=True, **kw)
    dirs, layers = (2 if rnn.bidirectional else 1), rnn.num_layers
    x, hx = torch.randn(3, 7, 5), torch.randn(layers * dirs, 3, 6)
    flags = (True, layers, 0.0, True, rnn.bidirectional, True)
    params = [p.detach() for p in rnn._flat_weights]
    out = getattr(torch.ops.pt2rt, kind).default(x, hx, params, *flags)
    leaves = [t.clone().requires_grad_() for t in [x, hx, *params]]
    want = getattr(torch, kind)(leaves[0], leaves[1], leaves[2:], *flags)
    # Close, not bit-equal: with grad ATen runs these cells on other GEMM shapes than without,
    # and an optimized BLAS (OpenBLAS) rounds a product differently by shape.
    for got, w in zip(out, want):
        torch.testing.assert_close(got, w.detach())
        assert got.is_contiguous()
    g = [torch.randn_like(w) for w in want]
    grads = getattr(torch.ops.pt2rt, kind + "_backward").default(g[0], None, x, hx, params,
                                                                  *flags)
    ref = torch.autograd.grad(want[:1], leaves, g[:1])
    assert len(grads) == len(leaves)
    for got, w in zip(grads, ref):
        torch.testing.assert_close(got, w)


def test_kernel_refuses_dropout_between_layers_in_training():
    rnn_ops.register()
    lstm, x, hx, flags = _lstm_and_args(False, 2, False)
    flags = (True, 2, 0.5, True, False, False)
    with pytest.raises(RuntimeError, match="dropout between layers in training mode"):
        torch.ops.pt2rt.lstm.default(x, hx, list(lstm._flat_weights), *flags)


class Tagger(torch.nn.Module):
    def __init__(self, batch_first=True, proj_size=0, dropout=0.0):
        super().__init__()
        torch.manual_seed(0)
        self.lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=batch_first,
                                  proj_size=proj_size, dropout=dropout)
        self.head = torch.nn.Linear(proj_size or 16, 3)

    def forward(self, x):
        out, (h, _) = self.lstm(x)
        return self.head(out), h


def _ops(exported):
    return {o.qualified() for o in exported.program.operators}


def _train_step_matches_eager(archive, model, x, seed=None):
    """One ``train_step`` of ``archive`` (a loaded archive) on ``x`` against a training-mode
    forward + backward of a copy of ``model``, with the same random cotangents: outputs and
    parameter gradients close. ``seed``: both runs start from it (dropout draws). Returns
    (step, eager copy)."""
    eager = copy.deepcopy(model).train()
    if seed is not None:
        torch.manual_seed(seed)
    outs = pytree.tree_flatten(eager(x))[0]
    gs = [torch.randn_like(o) for o in outs]
    torch.autograd.backward(outs, gs)
    if seed is not None:
        torch.manual_seed(seed)
    step = archive.train_step(x, grad_outputs=gs)
    for got, want in zip(step.outputs, outs):
        torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6)
    for n, p in eager.named_parameters():
        torch.testing.assert_close(step.grads[n], p.grad, rtol=1e-5, atol=1e-6)
    return step, eager


def test_dynamic_length_is_one_node_and_trains_like_eager(tmp_path):
    model = Tagger()
    exported = pt2rt.export(model, (torch.randn(2, 6, 8),),
                            dynamic_shapes=({0: BATCH, 1: SEQ},), bundle_examples=False)
    ops = _ops(exported)
    assert {"pt2rt::lstm", "pt2rt::lstm_backward"} <= ops
    assert not any("cell" in o for o in ops), ops
    path = str(tmp_path / "tagger.pt2")
    exported.save(path)
    archive = pt2rt.load(path)
    for shape in [(1, 2, 8), (4, 9, 8), (8, 12, 8)]:
        x = torch.randn(*shape)
        step, eager = _train_step_matches_eager(archive, model, x)
        assert sorted(step.grads) == sorted(n for n, _ in eager.named_parameters())
        with torch.no_grad():
            want = copy.deepcopy(model).eval()(x)
        for got, w in zip(archive.run_inference(x), want):
            torch.testing.assert_close(got, w, rtol=1e-5, atol=1e-6)


def test_static_exports_are_one_node_on_both_lanes(tmp_path):
    """A static LSTM is one pt2rt::lstm node (the runtime runs it as one fused kernel, cuDNN's
    on CUDA) and trains like eager, on torch 2 and on torch 1.13 (whose real-tensor trace runs
    the backward kernel's recomputation below autograd: rnn_ops.autograd_dispatch)."""
    model = Tagger()
    x = torch.randn(2, 6, 8)
    static = pt2rt.export(model, (x,), bundle_examples=False)
    assert {"pt2rt::lstm", "pt2rt::lstm_backward"} <= _ops(static)
    path = str(tmp_path / "static.pt2")
    static.save(path)
    _train_step_matches_eager(pt2rt.load(path), model, x)


def test_dropout_between_layers_is_drawn_between_one_node_layers(tmp_path):
    """Dropout between layers in training mode (rnn_layers.py): one pt2rt::lstm node per layer
    and the dropout between them, drawing eager's masks — torch 2's own decomposition of
    torch.lstm loses that dropout (the graph trained without it before)."""
    model, x = Tagger(dropout=0.5), torch.randn(2, 6, 8)
    exported = pt2rt.export(model, (x,), bundle_examples=False)
    forward = exported.captured.graph(GraphRole.Forward).module.graph
    lstms = [n for n in forward.nodes if "pt2rt.lstm" in str(n.target)]
    drops = [n for n in forward.nodes if "dropout" in str(n.target) or "bernoulli" in str(n.target)]
    assert len(lstms) == 2 and drops
    path = str(tmp_path / "dropout.pt2")
    exported.save(path)
    _train_step_matches_eager(pt2rt.load(path), model, x, seed=3)


def test_projections_with_a_dynamic_length_are_refused_by_name():
    with pytest.raises(pt2rt.ExportError, match="proj_size"):
        pt2rt.export(Tagger(proj_size=4), (torch.randn(2, 6, 8),),
                     dynamic_shapes=({1: SEQ},), bundle_examples=False)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_dropout_between_layers_with_a_dynamic_length_trains_like_eager(tmp_path, kind):
    """Dynamic sequence length and dropout between layers in training: one node per layer
    (dropout 0, so the recomputing backward draws nothing) and the dropout between them."""
    torch.manual_seed(0)
    model = getattr(torch.nn, kind)(5, 6, num_layers=2, dropout=0.4, batch_first=True)
    path = str(tmp_path / "rnn.pt2")
    pt2rt.export(model, (torch.randn(2, 7, 5),), dynamic_shapes=({1: SEQ},)).save(path)
    loaded = pt2rt.load(path)
    for length in (3, 11):
        _train_step_matches_eager(loaded, model, torch.randn(2, length, 5), seed=5)
