"""The export-time value check (``fidelity.check_output_values``): a captured graph that does not
give eager PyTorch's values on the example inputs is refused, naming the graph, the output and
the likely construct (``eager_paths.py``), instead of exported to run wrong. And the two
nn.Transformer constructs behind it: the nested-tensor fast path (refused, with the remedy) and
the causal-mask detection (``module_rewrites.causal_hint_only``: exported, matching eager)."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.utils.checkpoint

import pt2rt
from pt2rt.capture.capture import AnnotatedRun, annotate_program
from pt2rt.capture.eager_run import EagerTrainRun
from pt2rt.capture.fidelity import check_gradient_values, check_output_values, value_difference
from pt2rt.errors import CaptureError


def test_rounding_and_a_few_flipped_elements_pass():
    torch.manual_seed(0)
    want = torch.randn(64, 32)
    assert value_difference(want * (1 + 1e-6), want) is None
    near_tie = want.clone()  # three elements of 2048 where a near-tie went the other way
    near_tie.view(-1)[:3] *= 1.1
    assert value_difference(near_tie, want) is None
    assert value_difference(torch.zeros(4), torch.full((4,), 1e-7)) is None  # near 0: atol


def test_a_different_computation_is_reported():
    torch.manual_seed(0)
    want = torch.randn(8, 16)
    got = want.clone()
    got[:, 12:] = 0  # padded positions zeroed: a quarter of the output
    assert "RMS difference" in value_difference(got, want)
    assert "elements differ" in value_difference(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]))
    assert "finite in one" in value_difference(torch.full((4,), float("nan")), torch.ones(4))
    assert value_difference(torch.ones(2, 3), torch.ones(3, 2)) == \
        "torch.float32 [3, 2] in eager PyTorch but torch.float32 [2, 3] in the captured graph"
    both_nan = torch.tensor([float("nan"), 1.0])
    assert value_difference(both_nan.clone(), both_nan) is None


def test_refusal_names_graph_output_and_cause():
    model = nn.Linear(2, 2)
    want = [torch.ones(3), torch.ones(2)]
    check_output_values(model, "inference graph", "eval-mode forward", [want[0], None], want)
    with pytest.raises(CaptureError, match=r"inference graph captured from Linear .* eval-mode "
                                           r"forward .* output 1 differs: .*a path the trace "
                                           r"did not"):
        check_output_values(model, "inference graph", "eval-mode forward",
                            [want[0], torch.zeros(2)], want)
    with pytest.raises(CaptureError, match="output 0 differs: .*; the hint"):
        check_output_values(model, "forward graph", "training-mode forward", [torch.zeros(3)],
                            want, ["the hint"])


CALLS = [0]  # outside the model: the capture cannot restore it as it restores attributes


class CallCounter(nn.Module):
    """Scales by how often forward ran in this process: Python state outside the model, which
    a graph freezes at its trace's value while eager's run saw another."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        CALLS[0] += 1
        return self.fc(x) * CALLS[0]


def test_a_forward_graph_that_differs_from_eager_is_refused():
    with pytest.raises(CaptureError, match="forward graph captured from CallCounter .* "
                                           "training-mode forward .* output 0"):
        pt2rt.export(CallCounter(), (torch.randn(2, 4),), inference=False)


def _encoder(nested: bool):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=nested)
    pad = torch.tensor([[False] * 5 + [True] * 2, [False] * 7])  # left-aligned
    return encoder, (torch.randn(2, 7, 16),), {"src_key_padding_mask": pad}


def test_nested_tensor_fast_path_is_refused_with_the_remedy():
    model, args, kwargs = _encoder(True)
    model.eval()
    with torch.no_grad():  # eager's eval mode zeroes the padded positions
        assert model(*args, **kwargs)[0, 5:].abs().max() == 0
    with pytest.raises(CaptureError, match="nn.TransformerEncoder .*nested tensor.*"
                                           "enable_nested_tensor=False"):
        pt2rt.export(model, args, kwargs)
    # with a dynamic batch the traces fail on the nested-tensor op itself: the same hint
    batch = pt2rt.Dim("batch", min=1, max=8)
    dims = {"src": {0: batch}, "src_key_padding_mask": {0: batch}}
    with pytest.raises((CaptureError, pt2rt.ExportError),
                       match="enable_nested_tensor=False"):
        pt2rt.export(model, args, kwargs, dynamic_shapes=dims)


def _loaded(model, args, kwargs, path):
    pt2rt.export(model, args, kwargs).save(str(path))
    return pt2rt.load(str(path)).module()


def test_encoder_without_nested_tensors_matches_eager(tmp_path):
    model, args, kwargs = _encoder(False)
    loaded = _loaded(model, args, kwargs, tmp_path / "encoder.pt2")
    model.eval()
    with torch.no_grad():
        want = model(*args, **kwargs)
    got = loaded.eval()(*args, **kwargs)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


class Seq2Seq(nn.Module):
    """nn.Transformer with a causal target mask (no is_causal hint): torch >= 2.0's decoder
    compares the mask with a causal one, a data-dependent read."""

    def __init__(self):
        super().__init__()
        self.t = nn.Transformer(16, 2, 1, 1, 32, dropout=0.0, batch_first=True)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.t(src, tgt, tgt_mask=mask)


def test_transformer_with_causal_mask_exports_and_matches_eager(tmp_path):
    torch.manual_seed(0)
    model, args = Seq2Seq(), (torch.randn(2, 6, 16), torch.randn(2, 5, 16))
    loaded = _loaded(model, args, {}, tmp_path / "seq2seq.pt2")
    for train in (False, True):
        model.train(train)
        with torch.no_grad():
            want = model(*args)
        got = loaded.train(train)(*args).detach()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


class CheckpointedBatchNorm(nn.Module):
    """BatchNorm inside a checkpointed block: eager updates its running statistics again when
    the backward recomputes the block."""

    def __init__(self, reentrant=False):
        super().__init__()
        self.stem = nn.Conv2d(3, 3, 1)  # the checkpointed block's input requires grad
        self.block = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        self.head = nn.Linear(4, 2)
        self.reentrant = reentrant

    def forward(self, x):
        h = torch.utils.checkpoint.checkpoint(self.block, self.stem(x),
                                              use_reentrant=self.reentrant)
        return self.head(h.mean((2, 3)))


def test_buffers_eager_updates_twice_are_refused_where_the_graphs_update_once(tmp_path):
    model, args = CheckpointedBatchNorm(), (torch.randn(2, 3, 6, 6),)
    if int(torch.__version__.split(".")[0]) >= 2:  # AOTAutograd records the update once
        with pytest.raises(CaptureError, match=r"buffer 'block\.1\.running_mean' of "
                                               r"BatchNorm2d 'block\.1' .*"
                                               r"torch\.utils\.checkpoint"):
            pt2rt.export(model, args)
        return
    # torch 1.13's trace runs the recomputation too: the graphs update twice, as eager does
    pt2rt.export(model, args).save(str(tmp_path / "m.pt2"))
    loaded = pt2rt.load(str(tmp_path / "m.pt2")).module().train()
    loaded(*args)
    assert int(loaded.get_buffer("block.1.num_batches_tracked")) == 2


@pytest.mark.skipif(int(torch.__version__.split(".")[0]) >= 2, reason="torch 1.13's capture")
def test_reentrant_checkpoint_is_named_on_torch_1_13():
    with pytest.raises(CaptureError, match="use_reentrant=False"):
        pt2rt.export(CheckpointedBatchNorm(reentrant=True), (torch.randn(2, 3, 6, 6),))


class AuxInTraining(nn.Module):
    """Returns auxiliary logits in training mode only, as torchvision's GoogLeNet does."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.aux = nn.Linear(4, 3)

    def forward(self, x):
        return (self.fc(x), self.aux(x)) if self.training else self.fc(x)


def test_other_output_structures_in_train_and_eval_are_refused_and_export_separately():
    args = (torch.randn(2, 4),)
    with pytest.raises(pt2rt.ExportError, match="returns a tuple of 2 tensors in training mode "
                                                "but a tensor in eval mode.*inference=False"):
        pt2rt.export(AuxInTraining(), args)
    assert len(pt2rt.export(AuxInTraining(), args, inference=False).captured.graphs) == 2
    assert len(pt2rt.export(AuxInTraining(), args, train=False).captured.graphs) == 1


def test_lazy_module_is_refused_until_called():
    model = nn.Sequential(nn.LazyLinear(3))
    with pytest.raises(pt2rt.ExportError, match=r"'0\.weight' of LazyLinear is uninitialized.*"
                                                r"call the model once"):
        pt2rt.export(model, (torch.randn(2, 5),))
    model(torch.randn(2, 5))
    pt2rt.export(model, (torch.randn(2, 5),))


class TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _grads(scale_b: float = 1.0, noise_on_bias: float = 0.0):
    torch.manual_seed(0)
    eager = EagerTrainRun(outputs=[], diff=[0], param_grads={
        "a.weight": torch.randn(4, 4) * 1e4, "a.bias": torch.randn(4) * 1e4,
        "b.weight": torch.randn(2, 4), "b.bias": torch.randn(2)},
        input_grads={0: torch.randn(3, 4)})
    got = {k: v.clone() for k, v in eager.param_grads.items()}
    got["b.weight"] = got["b.weight"] * scale_b
    got["b.bias"] = got["b.bias"] + noise_on_bias * torch.randn(2)
    return AnnotatedRun(param_grads=got, input_grads={0: eager.input_grads[0].clone()}), eager


def test_gradient_check_refuses_a_backward_that_is_not_eagers():
    """A gradient 2x eager's (a dropped hook, a custom Function's backward replaced by the
    forward's derivative) is refused, naming the parameter and its module."""
    run, eager = _grads(scale_b=2.0)
    with pytest.raises(CaptureError, match=r"backward graph captured from TwoLayers .* gradient "
                                           r"of parameter 'b.weight' of Linear 'b' .*RMS "
                                           r"difference"):
        check_gradient_values(TwoLayers(), run, eager)
    run, eager = _grads()
    run.input_grads[0] = -run.input_grads[0]
    with pytest.raises(CaptureError, match="gradient of user input 0"):
        check_gradient_values(TwoLayers(), run, eager)


def test_gradient_noise_far_below_the_models_gradients_passes():
    """A gradient that is float32 noise on both sides (0 analytically: a BatchNorm bias a later
    normalization cancels) differs completely between two roundings; below GRAD_NOISE_FLOOR of
    the model's gradient RMS (here 1e4) it is not a capture bug."""
    run, eager = _grads(noise_on_bias=0.1)
    check_gradient_values(TwoLayers(), run, eager)
    run, eager = _grads(noise_on_bias=10.0)  # 1e-3 of the RMS: over the floor
    with pytest.raises(CaptureError, match="'b.bias'"):
        check_gradient_values(TwoLayers(), run, eager)


class StraightThrough(torch.autograd.Function):
    """round() forward, identity backward: a custom backward eager runs and the capture must."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        return g


class Quantized(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 3)

    def forward(self, x):
        h = self.a(x)
        if h.requires_grad:  # not in the eval-mode forward, which runs without grad
            h.register_hook(lambda g: g * 10.0)  # a tensor hook: scales a's gradients
        return self.b(StraightThrough.apply(h * 3.0))


def test_custom_backward_and_tensor_hook_export_with_eagers_gradients():
    """The gradient check runs on every export; a straight-through estimator and a tensor hook
    in forward are captured with their gradients (the check would refuse otherwise)."""
    torch.manual_seed(0)
    model, x = Quantized(), torch.randn(4, 6)
    archive = pt2rt.export(model, (x,), bundle_examples=False)
    run = annotate_program(archive.captured, [x])
    model(x).sum().backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(run.param_grads[name], p.grad)
    assert run.param_grads["a.bias"].abs().sum() > 0  # the identity backward, not round's 0
