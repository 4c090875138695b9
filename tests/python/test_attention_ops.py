"""pt2rt::scaled_dot_product_attention (exporter/pt2rt/ops/attention_ops.py): the kernels against
eager SDPA and its autograd gradients, the declared result layout, the capture of
F.scaled_dot_product_attention as one node (through nn.MultiheadAttention and called directly,
static and dynamic), no [L, S] attention probabilities among the saved activations, training
through the reference executor like eager, and the calls that keep the math path (dropout, a
mask that requires grad)."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import pt2rt
from pt2rt.ir.graph_ir import GraphRole
from pt2rt.ops import attention_ops

pytestmark = pytest.mark.skipif(not attention_ops.supported(),
                                reason="torch without F.scaled_dot_product_attention(enable_gqa)")

FWD = "pt2rt::scaled_dot_product_attention"
BWD = "pt2rt::scaled_dot_product_attention_backward"


def _ops(exported):
    return {o.qualified() for o in exported.program.operators}


def _qkv(gqa=False):
    torch.manual_seed(0)
    h = 2 if gqa else 4
    q = torch.randn(2, 5, 4, 8).transpose(1, 2)
    k = torch.randn(2, 6, h, 8).transpose(1, 2)
    v = torch.randn(2, 6, h, 8).transpose(1, 2)
    return q, k, v


@pytest.mark.parametrize("mask,is_causal,scale,gqa", [
    (None, False, None, False), (None, True, None, False), ("bool", False, 0.5, False),
    ("float", False, None, False), (None, False, None, True)])
def test_kernels_match_eager_sdpa(mask, is_causal, scale, gqa):
    attention_ops.register()
    q, k, v = _qkv(gqa)
    m = None
    if mask == "bool":
        m = torch.rand(5, 6) > 0.3
        m[:, 0] = True
    elif mask == "float":
        m = torch.randn(5, 6)
    flags = (is_causal, scale, gqa)
    out = torch.ops.pt2rt.scaled_dot_product_attention.default(q, k, v, m, *flags)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    want = F.scaled_dot_product_attention(*leaves, attn_mask=m, is_causal=is_causal, scale=scale,
                                          enable_gqa=gqa)
    assert torch.equal(out, want.detach())
    assert out.stride() == q.stride()  # laid out like query (output_layout)
    narrow_v = v[..., :3]
    assert attention_ops.output_layout(q, narrow_v).is_contiguous()
    g = torch.randn_like(want)
    grads = torch.ops.pt2rt.scaled_dot_product_attention_backward.default(g, q, k, v, m, *flags)
    ref = torch.autograd.grad([want], leaves, [g])
    for got, w, leaf in zip(grads, ref, leaves):
        assert got.shape == leaf.shape and got.is_contiguous()
        torch.testing.assert_close(got, w)


class DirectAttention(nn.Module):
    """Projections, then F.scaled_dot_product_attention called directly (causal, grouped-query:
    4 query heads over 2 key/value heads), and an output projection; x [B, T, 16]."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(16, 16)
        self.kv = nn.Linear(16, 16)
        self.out = nn.Linear(16, 16)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, 4, 4).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2, 8).transpose(1, 2).chunk(2, dim=-1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.out(o.transpose(1, 2).reshape(b, t, 16))


def _encoder(dropout=0.0):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=dropout, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def _train_like_eager(model, exported, x, tmp_path):
    path = str(tmp_path / "m.pt2")
    exported.save(path)
    archive = pt2rt.load(path)
    eager = copy.deepcopy(model).train()
    out = eager(x)
    g = torch.randn_like(out)
    out.backward(g)
    step = archive.train_step(x, grad_outputs=[g])
    torch.testing.assert_close(step.outputs[0], out.detach(), rtol=1e-5, atol=1e-6)
    for n, p in eager.named_parameters():
        torch.testing.assert_close(step.grads[n], p.grad, rtol=1e-4, atol=1e-6)
    with torch.no_grad():
        want = copy.deepcopy(model).eval()(x)
    torch.testing.assert_close(archive.run_inference(x)[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("build", [_encoder, DirectAttention])
def test_attention_is_one_node_and_trains_like_eager(build, tmp_path):
    model = build()
    x = torch.randn(3, 7, 16)
    exported = pt2rt.export(model, (x,), bundle_examples=False)
    assert {FWD, BWD} <= _ops(exported)
    assert not any("softmax" in o for o in _ops(exported)), _ops(exported)
    # No saved activation holds a [.., L, S] score matrix: the forward's saved values are the
    # layers' inputs and projections, never [.., 7, 7].
    fwd = exported.program.graph(GraphRole.Forward)
    shapes = [[d.value for d in fwd.values[o.value].meta.sizes] for o in fwd.outputs
              if o.value >= 0 and fwd.values[o.value].meta is not None]
    assert len(shapes) > 4
    assert not [s for s in shapes if s[-2:] == [7, 7]], shapes
    _train_like_eager(model, exported, x, tmp_path)


def test_dynamic_batch_and_sequence_are_one_node(tmp_path):
    model = _encoder()
    batch, seq = pt2rt.Dim("batch", min=1, max=6), pt2rt.Dim("seq", min=2, max=16)
    exported = pt2rt.export(model, (torch.randn(3, 7, 16),), dynamic_shapes=({0: batch, 1: seq},),
                            bundle_examples=False)
    assert {FWD, BWD} <= _ops(exported)
    for shape in [(1, 2, 16), (6, 16, 16)]:
        _train_like_eager(model, exported, torch.randn(*shape), tmp_path)


def test_dropout_a_trained_mask_and_broadcasting_keep_the_math_path(tmp_path):
    """A recomputed backward would draw a new dropout mask; a mask that requires grad needs its
    own gradient, which the op does not give; keys broadcast over the batch are outside the
    runtime kernel's layout: all stay ATen's math path."""
    x = torch.randn(3, 7, 16)
    assert FWD not in _ops(pt2rt.export(_encoder(dropout=0.1), (x,), bundle_examples=False,
                                        inference=False))

    class TrainedMask(nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = nn.Parameter(torch.zeros(7, 7))

        def forward(self, q):
            return F.scaled_dot_product_attention(q, q, q, attn_mask=self.bias)

    assert BWD not in _ops(pt2rt.export(TrainedMask(), (torch.randn(2, 7, 8),),
                                        bundle_examples=False))

    class BroadcastKeys(nn.Module):
        """One key/value set for the whole batch: broadcast leading dims."""

        def __init__(self):
            super().__init__()
            self.kv = nn.Parameter(torch.randn(1, 2, 5, 8))

        def forward(self, q):
            return F.scaled_dot_product_attention(q, self.kv, self.kv)

    model = BroadcastKeys()
    q = torch.randn(3, 2, 7, 8)
    exported = pt2rt.export(model, (q,), bundle_examples=False)
    assert FWD not in _ops(exported)
    exported.save(str(tmp_path / "b.pt2"))
    with torch.no_grad():
        want = model(q)
    torch.testing.assert_close(pt2rt.load(str(tmp_path / "b.pt2")).run_inference(q)[0], want)


def test_routed_function_keeps_the_originals_attributes():
    """While a capture routes F.scaled_dot_product_attention, user code reading its __doc__ or
    __name__ (a feature check such as `"scale" in F.scaled_dot_product_attention.__doc__`)
    sees the original's."""
    original = F.scaled_dot_product_attention
    with attention_ops.attention_ops():
        assert F.scaled_dot_product_attention is not original
        assert F.scaled_dot_product_attention.__doc__ == original.__doc__
        assert F.scaled_dot_product_attention.__name__ == original.__name__
    assert F.scaled_dot_product_attention is original
