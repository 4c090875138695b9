"""A CTC loss computed in forward (exporter/pt2rt/ops/ctc_ops.py): ``F.ctc_loss`` /
``nn.CTCLoss`` captured as ``pt2rt::ctc_loss`` + ``pt2rt::ctc_loss_backward`` on both lanes, so
one archive runs batches whose longest target differs from the example's (ATen's
``_ctc_loss`` sizes its saved ``log_alpha`` by it). Each variant — every reduction,
``zero_infinity``, lengths as lists, concatenated targets, ``nn.CTCLoss`` — exported once and
run by the Python reader at target lengths with another maximum: eval output and a training
step's gradients equal eager's bit for bit (the same ATen kernels; the backward recomputes the
forward); with a dynamic batch and length too. The C++ runtime's side:
tests/cpp/runtime/test_ctc_ops.cpp, tests/cli/test_train_models.py."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import pt2rt
from dynamic_parity import check_parity_at

T, N, S, FEATURES, LABELS = 12, 3, 5, 4, 6


class Acoustic(nn.Module):
    """A 1-D conv + linear acoustic model whose forward returns its CTC loss: targets padded
    [N, S] or concatenated [sum(target_lengths)], lengths tensors [N] (``lists``: constant
    lists of ints instead)."""

    def __init__(self, reduction="mean", zero_infinity=False, lists=False, module=False):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv1d(FEATURES, 8, 3, padding=1)
        self.out = nn.Linear(8, LABELS)
        self.reduction, self.zero_infinity = reduction, zero_infinity
        self.lists = lists
        self.ctc = nn.CTCLoss(reduction=reduction, zero_infinity=zero_infinity) if module else None

    def forward(self, feats, targets, input_lengths, target_lengths):
        h = self.conv(feats.transpose(1, 2)).relu().transpose(1, 2)
        log_probs = self.out(h).log_softmax(-1).transpose(0, 1)
        if self.lists:
            input_lengths, target_lengths = [T] * N, [2, 4, 4]
        if self.ctc is not None:
            return self.ctc(log_probs, targets, input_lengths, target_lengths)
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths,
                          reduction=self.reduction, zero_infinity=self.zero_infinity)


VARIANTS = {"mean": {}, "sum": {"reduction": "sum"},
            "none_zero_infinity": {"reduction": "none", "zero_infinity": True},
            "lists": {"lists": True}, "concatenated": {}, "module": {"module": True}}


def _batch(seed, target_lengths, input_lengths=(T, T, T), concatenated=False):
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(1, LABELS, (N, S), generator=g)
    targets[0, :3] = torch.tensor([1, 1, 2])   # a repeat: needs a blank between, 4 steps
    if concatenated:   # sample after sample: [sum(target_lengths)]
        targets = torch.cat([targets[i, :n] for i, n in enumerate(target_lengths)])
    return (torch.randn(N, T, FEATURES, generator=g), targets, torch.tensor(input_lengths),
            torch.tensor(target_lengths))


def _ops(exported):
    return {o.qualified() for o in exported.program.operators}


def _equal(got, want, what):
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True,
                               msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_ctc_loss_in_forward_matches_eager_for_other_target_lengths(tmp_path, name):
    model, flat = Acoustic(**VARIANTS[name]), name == "concatenated"
    exported = pt2rt.export(model, _batch(0, [2, 4, 4], concatenated=flat),
                            bundle_examples=False)
    assert {"pt2rt::ctc_loss", "pt2rt::ctc_loss_backward"} <= _ops(exported)
    assert not any("_ctc_loss" in op for op in _ops(exported))
    path = str(tmp_path / "ctc.pt2")
    exported.save(path)
    loaded = pt2rt.load(path)
    # a longer maximum than the example's 4 and the same one (the same total of 10:
    # concatenated targets keep their size); the last batch's first sample cannot be aligned
    # in its 3 steps: an infinite loss (zero_infinity: 0)
    for seed, lengths, inputs in ((1, [5, 3, 2], (T, T, T)), (2, [4, 3, 3], (T, 9, T)),
                                  (3, [3, 3, 4], (3, T, T))):
        args = _batch(seed, lengths, inputs, concatenated=flat)
        with torch.no_grad():
            want = model.eval()(*args)
        _equal(loaded.run_inference(*args)[0], want, f"eval at {lengths}")
        eager = copy.deepcopy(model).train()
        out = eager(*args)
        grad = torch.rand_like(out)
        out.backward(grad)
        step = loaded.train_step(*args, grad_outputs=[grad])
        _equal(step.outputs[0], out.detach(), f"train output at {lengths}")
        for n, p in eager.named_parameters():
            _equal(step.grads[n], p.grad, f"grad {n} at {lengths}")


def test_a_ctc_loss_with_a_dynamic_batch_and_length_matches_eager(tmp_path):
    """Dynamic batch and time (the CTC op on symbolic sizes; on torch 1.13 differentiated
    through an autograd_cuts cut): eval and a training step at both ends of the ranges, to
    float32 rounding (1.13's dynamic capture of the conv/linear layers is not bit for bit)."""
    batch, time = pt2rt.Dim("batch", min=2, max=8), pt2rt.Dim("time", min=4, max=32)

    def inputs(n, t, seed):
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(n, t, FEATURES, generator=g),
                torch.randint(1, LABELS, (n, S), generator=g),
                torch.full((n,), t, dtype=torch.long), torch.randint(1, 3, (n,), generator=g))
    check_parity_at(tmp_path, Acoustic(), inputs(3, T, 0),
                    ({0: batch, 1: time}, {0: batch}, {0: batch}, {0: batch}),
                    [inputs(2, 4, 1), inputs(8, 32, 2)])


def test_the_ops_equal_aten_ctc_loss_and_its_backward():
    torch.manual_seed(1)
    log_probs = torch.randn(T, N, LABELS, dtype=torch.float64).log_softmax(-1)
    targets = torch.randint(1, LABELS, (N, S))
    input_lengths, target_lengths = torch.tensor([T, T - 2, 7]), torch.tensor([5, 0, 3])
    from pt2rt.ops import ctc_ops
    ctc_ops.register()
    for zero_infinity in (False, True):
        nll, log_alpha = torch.ops.aten._ctc_loss.Tensor(log_probs, targets, input_lengths,
                                                         target_lengths, 2, zero_infinity)
        got = torch.ops.pt2rt.ctc_loss.default(log_probs, targets, input_lengths,
                                               target_lengths, 2, zero_infinity)
        assert torch.equal(got, nll)
        grad = torch.randn(N, dtype=torch.float64)
        want = torch.ops.aten._ctc_loss_backward.Tensor(grad, log_probs, targets, input_lengths,
                                                        target_lengths, nll, log_alpha, 2,
                                                        zero_infinity)
        assert torch.equal(torch.ops.pt2rt.ctc_loss_backward.default(
            grad, log_probs, targets, input_lengths, target_lengths, 2, zero_infinity), want)
