"""Issue 9: no parameter or buffer becomes a constant (aliases swapped, the guard otherwise),
gradient-path sanity (no_grad forward refused, parameters without a gradient path listed), and
references from the plain eager module. The zoo itself (zoo_models.py) runs through
test_models.py and the C++ parity/training tests."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn

import pt2rt
from pt2rt.ir.graph_ir import WeightKind


class ListAlias(nn.Module):
    """Reads its weights through a plain list attribute (like nn.RNNBase._flat_weights)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)
        self.chain = [self.a.weight, self.b.weight]

    def forward(self, x):
        return torch.tanh(x @ self.chain[0].t() + self.a.bias) @ self.chain[1].t() + self.b.bias


class ViewAlias(nn.Module):
    """Keeps a transposed view of a parameter: cannot be substituted, must be refused."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        with torch.no_grad():
            self.w_t = self.fc.weight.t()

    def forward(self, x):
        return x @ self.w_t + self.fc.bias


class NoGradForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    @torch.no_grad()
    def forward(self, x):
        return self.fc(x)


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(4, 3)
        self.spare = nn.Linear(4, 3)

    def forward(self, x):
        return self.used(x)


class OnlyInputGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.spare = nn.Linear(4, 3)

    def forward(self, x):
        return x * 2


def _eager_grads(model, x):
    model(x).sum().backward()
    return {n: p.grad for n, p in model.named_parameters()}


def _loaded(exported, tmp_path):
    path = str(tmp_path / "m.pt2")
    exported.save(path)
    return pt2rt.load(path)


def test_list_alias_is_substituted_and_trains(tmp_path):
    torch.manual_seed(0)
    model, x = ListAlias(), torch.randn(3, 4)
    exported = pt2rt.export(model, (x,))
    assert not [w for w in exported.captured.weights if w.kind is WeightKind.Constant]
    assert model.chain[0] is model.a.weight  # the user's attribute is restored
    grads = _loaded(exported, tmp_path).train_step(x).grads
    expected = _eager_grads(model, x)
    assert sorted(grads) == sorted(expected)
    for n, g in expected.items():
        torch.testing.assert_close(grads[n], g, msg=lambda m: f"{n}: {m}")


def test_constant_aliasing_a_parameter_is_refused():
    torch.manual_seed(0)
    with pytest.raises(pt2rt.CaptureError,
                       match=r"parameter 'fc.weight' of Linear 'fc' was captured as a constant"):
        pt2rt.export(ViewAlias(), (torch.randn(2, 4),))


def test_no_grad_forward_is_refused_for_training():
    torch.manual_seed(0)
    model, x = NoGradForward(), torch.randn(2, 4)
    with pytest.raises(pt2rt.CaptureError, match=r"no output of NoGradForward.forward\(\) "
                                                 r"requires grad.*@torch.no_grad\(\)"):
        pt2rt.export(model, (x,))
    pt2rt.export(model, (x,), train=False)  # inference only is fine


def test_parameters_without_gradient_path_warn_and_are_recorded(tmp_path):
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match=r"without a gradient path.*spare.weight, spare.bias"):
        exported = pt2rt.export(Unused(), (torch.randn(2, 4),))
    path = str(tmp_path / "m.pt2")
    exported.save(path)
    assert pt2rt.load(path).program.metadata["params_without_grad"] == "spare.weight,spare.bias"


def test_no_parameter_with_gradient_path_is_refused():
    x = torch.randn(2, 4, requires_grad=True)
    with pytest.raises(pt2rt.CaptureError, match=r"no trainable parameter of OnlyInputGrad has "
                                                 r"a gradient path.*spare.weight"):
        pt2rt.export(OnlyInputGrad(), (x,))


def test_no_warning_when_every_parameter_trains():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exported = pt2rt.export(ListAlias(), (torch.randn(3, 4),))
    assert "params_without_grad" not in exported.captured.metadata


def test_references_come_from_the_plain_eager_module(monkeypatch, tmp_path):
    """The bundled references never go through the capture's substitution: with it disabled
    after capture, export still produces them (and they equal eager's)."""
    from pt2rt.capture import capture as capture_mod
    from pt2rt.capture import model_call

    torch.manual_seed(0)
    model, x = ListAlias(), torch.randn(3, 4)
    real_capture = capture_mod.capture

    def capture_then_forbid(*a, **kw):
        program = real_capture(*a, **kw)

        def forbidden(*_a, **_kw):
            raise AssertionError("references computed through model_call.substituted")
        monkeypatch.setattr(model_call, "substituted", forbidden)
        monkeypatch.setattr(model_call, "call_model", forbidden)
        return program
    monkeypatch.setattr(capture_mod, "capture", capture_then_forbid)
    exported = pt2rt.export(model, (x,))
    ex = _loaded(exported, tmp_path).examples()[0]
    expected = _eager_grads(model, x)
    assert sorted(ex.grad_sketches) == sorted(expected)
    assert ex.check_grads(expected) == {}


class _Unrepeatable(torch.autograd.Function):
    """Identity whose backward scales by how often it has run: eager's gradient changes from
    one training step to the next, as a backward kernel reading uninitialised memory's does
    (torch 1.13's CPU GroupNorm in torchaudio's wav2vec2)."""
    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        _Unrepeatable.calls += 1
        return grad * _Unrepeatable.calls


def test_a_gradient_eager_does_not_reproduce_is_named_as_eager_s():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x):
            return _Unrepeatable.apply(self.lin(x))

    with pytest.raises(pt2rt.CaptureError, match=r"eager PyTorch does not reproduce its own "
                       r"gradient of parameter 'lin\.(weight|bias)' of Linear 'lin': two "
                       r"training steps .* differ"):
        pt2rt.export(M(), (torch.randn(4, 3),))
