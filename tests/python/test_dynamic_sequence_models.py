"""Dynamic shapes through sequence models at the exporter level (both lanes): nn.LSTM variants
with a dynamic batch, nn.TransformerEncoder / nn.MultiheadAttention with a dynamic batch and
sequence length, integer indexing on dynamic dims. Each archive is exported once and run by the
Python reader (``pt2rt.load``) at sizes including the range's ends: eval outputs, and a
training forward + backward vs eager. On torch 1.13 these go through pt2rt's symbolic-shape
rules (exporter/pt2rt/capture/torch1/symbolic_meta_torch1.py, symbolic_rnn_torch1.py,
symbolic_autograd_torch1.py): the graphs also keep eager's ATen ops (checked against the
static capture) and refuse what they cannot express, by name."""
import collections
import copy

import pytest
import torch
from torch.testing import assert_close

import pt2rt
from pt2rt.capture.capture import capture
from dynamic_parity import check_parity

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
only_1_13 = pytest.mark.skipif(TORCH2, reason="torch 1.13 symbolic-shape rules")
aten = torch.ops.aten

BATCH = pt2rt.Dim("batch", min=1, max=8)
SEQ = pt2rt.Dim("seq", min=2, max=12)


class Lstm(torch.nn.Module):
    """An LSTM and a head on the outputs; ``last``: only the last step (``out[:, -1]``)."""

    def __init__(self, last=False, **lstm):
        super().__init__()
        torch.manual_seed(0)
        self.lstm = torch.nn.LSTM(input_size=5, hidden_size=6, **lstm)
        self.head = torch.nn.Linear(6 * (2 if lstm.get("bidirectional") else 1), 3)
        self.last = last

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        y = self.head(out[:, -1] if self.last else out)
        return y, h + c


class Attention(torch.nn.Module):
    """Self-attention over [batch, seq, 8] (two heads), not batch_first inside."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.mha = torch.nn.MultiheadAttention(8, 2)

    def forward(self, x):
        x = x.transpose(0, 1)
        out, weights = self.mha(x, x, x)
        return out.transpose(0, 1), weights


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16,
                                                 dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=1,
                                                   enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


class Decoder(torch.nn.Module):
    """nn.TransformerDecoder with a causal tgt_mask over a memory computed from the input
    (its attention's ``baddbmm``: a symbolic-shape rule on torch 1.13)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        layer = torch.nn.TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16,
                                                 dropout=0.0, batch_first=True)
        self.decoder = torch.nn.TransformerDecoder(layer, num_layers=1)
        self.memory = torch.nn.Linear(8, 8)

    def forward(self, x):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.decoder(x, self.memory(x), tgt_mask=mask)


class Index(torch.nn.Module):
    """Integer indices on and next to dynamic dims: ``x[-1]``, ``x[0]`` (dim 0 dynamic),
    ``x[:, 1]`` and ``x[..., -2]`` (static dims of a tensor with a dynamic dim)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        return y[-1] * 2 + y[0], y[:, 1], y[..., -2]


LSTMS = {
    "batch_first_last_step": dict(last=True, batch_first=True),
    "two_layers_bidirectional": dict(num_layers=2, bidirectional=True),
    "no_bias_batch_first": dict(bias=False, batch_first=True),
    "two_layers_dropout": dict(num_layers=2, dropout=0.4, batch_first=True),
}


@pytest.mark.parametrize("name", sorted(LSTMS))
def test_lstm_dynamic_batch_parity(tmp_path, name):
    kw = LSTMS[name]
    batch_first = kw.get("batch_first", False)
    shape = (lambda b: (b, 4, 5)) if batch_first else (lambda b: (4, b, 5))
    dim = 0 if batch_first else 1
    check_parity(tmp_path, Lstm(**kw), torch.randn(*shape(3)), ({dim: BATCH},),
                 [shape(1), shape(5), shape(8)])


def test_multihead_attention_dynamic_batch_and_sequence_parity(tmp_path):
    check_parity(tmp_path, Attention(), torch.randn(3, 5, 8), ({0: BATCH, 1: SEQ},),
                 [(1, 2, 8), (4, 9, 8), (8, 12, 8)])


def test_transformer_encoder_dynamic_batch_and_sequence_parity(tmp_path):
    check_parity(tmp_path, Encoder(), torch.randn(3, 5, 8), ({0: BATCH, 1: SEQ},),
                 [(1, 2, 8), (2, 7, 8), (8, 12, 8)])


def test_transformer_decoder_dynamic_batch_parity(tmp_path):
    check_parity(tmp_path, Decoder(), torch.randn(3, 5, 8), ({0: BATCH},),
                 [(1, 5, 8), (4, 5, 8), (8, 5, 8)])


class Shuffle(torch.nn.Module):
    """pixel_shuffle / pixel_unshuffle around a convolution (torch 1.13 symbolic-shape rules)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(2, 8, 3, padding=1)
        self.head = torch.nn.Conv2d(8, 3, 1)

    def forward(self, x):
        up = torch.nn.functional.pixel_shuffle(self.conv(x), 2)
        return self.head(torch.nn.functional.pixel_unshuffle(up, 2))


class Routing(torch.nn.Module):
    """Mixture-of-experts routing ops (torch 1.13 rules; their 1.13 autograd nodes read
    concrete sizes, so a dynamic training capture still stops there, by name): topk, argmax,
    scatter, gather, cummax."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.gate = torch.nn.Linear(6, 5)

    def forward(self, x):
        logits = self.gate(x)
        top, idx = logits.topk(2, -1)
        gates = torch.zeros_like(logits).scatter(-1, idx, top.softmax(-1))
        best = logits.argmax(-1, keepdim=True)
        peak, where = torch.cummax(gates, -1)
        return gates.gather(-1, best) + peak, where


def test_pixel_shuffle_dynamic_batch_parity(tmp_path):
    check_parity(tmp_path, Shuffle(), torch.randn(3, 2, 4, 4), ({0: BATCH},),
                 [(1, 2, 4, 4), (8, 2, 4, 4)])


def test_routing_ops_dynamic_batch_inference_parity(tmp_path):
    model, path = Routing(), str(tmp_path / "routing.pt2")
    pt2rt.export(model, (torch.randn(3, 6),), train=False, dynamic_shapes=({0: BATCH},),
                 bundle_examples=False).save(path)
    loaded = pt2rt.load(path)
    for n in (1, 8):
        x = torch.randn(n, 6)
        with torch.no_grad():
            want = model.eval()(x)
        for got, w in zip(loaded.run_inference(x), want):
            assert_close(got, w)


def test_integer_indices_on_dynamic_dims_parity(tmp_path):
    # x[-1] on the dynamic dim is the last row at every size, never the traced size's row
    check_parity(tmp_path, Index(), torch.randn(5, 3, 4), ({0: pt2rt.Dim("n", min=1, max=9)},),
                 [(1, 3, 4), (6, 3, 4), (9, 3, 4)])


def _ops(model, example, dynamic):
    p = capture(model, (example,), None, train=True, inference=True, partitioner="default",
                decompositions=None, optimize_inference=False, dynamic_shapes=dynamic)
    return [collections.Counter(str(n.target) for n in g.module.graph.nodes
                                if n.op == "call_function" and str(n.target).startswith("aten.")
                                and not str(n.target).startswith(("aten.sym_", "aten.detach")))
            for g in p.graphs]


@only_1_13
def test_lstm_inference_graph_has_the_static_captures_aten_ops(monkeypatch):
    # symbolic_rnn_torch1.lstm runs the ATen ops of RNN.cpp's CPU path, in its order: the
    # dynamic inference graph has the static capture's ops (size queries, and the no-ops
    # detach (of zeros of a symbolic size) and full slice (of x[:, -1]) aside). The static
    # capture compared is ATen's unrolled one (a static nn.LSTM is otherwise one pt2rt::lstm
    # node: capture_torch1._static_rnns).
    from pt2rt.ops import rnn_ops
    model, x = Lstm(last=True, batch_first=True, num_layers=2), torch.randn(3, 4, 5)
    with monkeypatch.context() as m:
        m.setattr(rnn_ops, "has_lstm", lambda module: False)
        static = _ops(model, x, None)[0]
    dynamic = _ops(model, x, ({0: BATCH},))[0]
    static.pop("aten.slice.Tensor")
    assert dynamic == static
    assert dynamic["aten.unsafe_split.Tensor"] == 8 and dynamic["aten.select.int"] == 1


@only_1_13
def test_negative_index_on_a_dynamic_dim_is_kept_as_given():
    p = capture(Index(), (torch.randn(5, 3, 4),), None, train=False, inference=True,
                partitioner="default", decompositions=None, optimize_inference=False,
                dynamic_shapes=({0: BATCH},))
    selects = [n.args[1:] for n in p.graphs[0].module.graph.nodes if n.target is aten.select.int]
    assert sorted(selects) == sorted([(0, -1), (0, 0), (1, 1), (2, -2)])


@only_1_13
def test_chunk_over_a_dynamic_dim_is_refused_by_name():
    class Halves(torch.nn.Module):
        def forward(self, x):
            a, b = x.chunk(2, dim=0)
            return a + b

    with pytest.raises(pt2rt.ExportError, match=r"chunk.*no symbolic-shape rule.*static shapes"):
        pt2rt.export(Halves(), (torch.randn(4, 3),), dynamic_shapes=({0: BATCH},),
                     bundle_examples=False)


@only_1_13
def test_capture_leaves_torch_as_it_was():
    # the rules are added for the duration of a capture only
    import torch.fx.experimental.symbolic_shapes as ss
    from torch._meta_registrations import meta_table
    before = (dict(aten.select.int.py_kernels), dict(aten.chunk.default.py_kernels),
              ss.PySymInt.__bool__, "__float__" in vars(torch.SymIntNode),
              aten.unsafe_split.Tensor in meta_table)
    pt2rt.export(Lstm(last=True, batch_first=True), (torch.randn(3, 4, 5),),
                 dynamic_shapes=({0: BATCH},), bundle_examples=False)
    after = (dict(aten.select.int.py_kernels), dict(aten.chunk.default.py_kernels),
             ss.PySymInt.__bool__, "__float__" in vars(torch.SymIntNode),
             aten.unsafe_split.Tensor in meta_table)
    assert after == before


def test_transformer_dropout_draws_match_eager(tmp_path):
    # F.dropout and the attention weights' dropout inside F.multi_head_attention_forward: the
    # same masks as eager from the same seed (ATen's _dropout_impl, in eager's order)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16,
                                             dropout=0.3, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
    path = str(tmp_path / "dropout.pt2")
    pt2rt.export(model, (torch.randn(3, 5, 8),), dynamic_shapes=({0: BATCH, 1: SEQ},),
                 bundle_examples=False).save(path)
    loaded = pt2rt.load(path)
    x = torch.randn(4, 7, 8)
    torch.manual_seed(123)
    want = copy.deepcopy(model).train()(x)
    torch.manual_seed(123)
    got = loaded.train_step(x).outputs[0]
    assert_close(got, want.detach(), rtol=1e-5, atol=1e-6)


def test_slice_backward_sums_tiling_a_dim_become_cat():
    from pt2rt.passes.graph_passes import slice_backward_sums_as_cat

    sb, add = aten.slice_backward.default, aten.add.Tensor

    def pieces_sum(a, b, c):   # autograd's accumulation of three pieces' gradients
        return add(add(sb(a, [2, 6], 1, 0, 2, 1), sb(b, [2, 6], 1, 2, 4, 1)),
                   sb(c, [2, 6], 1, -2, 2 ** 63 - 1, 1))

    def gap(a, b):   # [0, 2) and [3, 5) of 6: not a tiling, left alone
        return add(sb(a, [2, 6], 1, 0, 2, 1), sb(b, [2, 6], 1, 3, 5, 1))

    a, b, c = torch.randn(2, 2), torch.randn(2, 2), torch.randn(2, 2)
    gm = torch.fx.symbolic_trace(pieces_sum)
    want = gm(a, b, c)
    assert slice_backward_sums_as_cat(gm.graph) == 1
    gm.recompile()
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets == [aten.cat.default]
    assert torch.equal(gm(a, b, c), want)
    gm = torch.fx.symbolic_trace(gap)
    assert slice_backward_sums_as_cat(gm.graph) == 0


@only_1_13
def test_lstm_backward_places_gradient_pieces_with_cat():
    # the gates' split and the unbind over time ran as slices: their gradients are one cat
    # each (eager: cat / stack), not one zero-padded tensor of the full size per piece
    model, x = Lstm(last=True, batch_first=True), torch.randn(3, 4, 5)
    backward = _ops(model, x, ({0: BATCH},))[-1]
    assert backward["aten.cat.default"] == 4 + 1
    assert backward["aten.slice_backward.default"] == 1   # out[:, -1] (eager: select_backward)
