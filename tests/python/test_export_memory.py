"""What the export does to save time and memory without changing what it records:
``forward_modes.during_forward`` (the capture's torch-function modes watch only the model's
code), the float64 reference run's gradient sink (``eager_run.eager_train_run(grad_sink=)``,
``examples._Float64Grads``), and ``model_call.substituted`` leaving no tensor to the cycle
collector."""
from __future__ import annotations

import gc
import math
import weakref

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils.checkpoint import checkpoint

from pt2rt.capture import examples
from pt2rt.capture.capture import make_signature
from pt2rt.capture.eager_run import eager_train_run
from pt2rt.capture.forward_modes import during_forward
from pt2rt.capture.model_call import call_model, state_names
from pt2rt.capture.capture import collect_weights
from pt2rt.ir import grad_sketch


class _Recorder(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.b(checkpoint(self.a, x, use_reentrant=False)))


def test_modes_see_the_model_calls_only():
    net, rec = _Net(), _Recorder()
    x = torch.randn(2, 4)
    with during_forward(net, [rec]):
        y = torch.sigmoid(x)           # not the model's: unseen
        net(x).sum().backward()        # the backward recomputes self.a inside the mode
    recomputed = [c for c in rec.calls if c == "linear"]
    assert "sigmoid" not in rec.calls and "tanh" in rec.calls
    assert len(recomputed) == 3, rec.calls  # a, b, and a again in the backward
    assert all("forward" not in m.__dict__ for m in net.modules())  # wrappers removed
    rec.calls.clear()
    net(y)
    assert rec.calls == []


def test_modes_leave_with_the_exception():
    class Bad(nn.Module):
        def forward(self, x):
            raise ValueError("user error")

    net, rec = Bad(), _Recorder()
    with during_forward(net, [rec]):
        with pytest.raises(ValueError, match="user error"):
            net(torch.ones(1))
        torch.relu(torch.ones(1))
    assert rec.calls == [] and "forward" not in net.__dict__


class _Tied(nn.Module):
    """A parameter used twice (one gradient accumulated from two uses) and one unused."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.proj = nn.Linear(6, 6)
        self.unused = nn.Parameter(torch.ones(3))

    def forward(self, idx):
        h = torch.tanh(self.proj(self.emb(idx)))
        return h @ self.emb.weight.t()


def test_float64_grad_sink_keeps_what_the_whole_gradients_give():
    torch.manual_seed(0)
    model, idx = _Tied(), torch.randint(0, 10, (4, 5))
    sig, flat = make_signature(model, (idx,), {})
    run32 = eager_train_run(model, sig, flat)
    whole = eager_train_run(model, sig, flat, torch.float64)
    sketched = {"emb.weight"}
    sunk = eager_train_run(model, sig, flat, torch.float64,
                           grad_sink=examples._Float64Grads(run32, sketched))
    assert set(sunk.param_grads) == set(whole.param_grads)
    assert sunk.param_grads["unused"] is None and whole.param_grads["unused"] is None
    for fqn, g64 in whole.param_grads.items():
        if g64 is None:
            continue
        got = sunk.param_grads[fqn]
        diff = (run32.param_grads[fqn].double() - g64).pow(2).mean().sqrt().item()
        assert math.isclose(got.rmse, diff, rel_tol=1e-12, abs_tol=0)  # summation order
        assert got.rmse == examples._rmse(run32.param_grads[fqn], g64)
        if fqn in sketched:
            want = grad_sketch.compute(fqn, g64)
            assert (got.sketch.norm, got.sketch.projections) == (want.norm, want.projections)
        else:
            assert got.sketch is None
    assert all(p.grad is None for p in model.parameters())  # the user's model untouched


def test_substituted_weights_are_freed_without_the_cycle_collector():
    """torch 1.13's ``_reparametrize_module`` leaves a per-call class whose closures hold the
    substitution dict; the capture's weight copies must not live on in that garbage (they
    did, until a collection: two extra copies of resnet18's weights during the float64
    references)."""
    net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    weights = collect_weights(net)
    names = state_names(net, weights)
    sig, flat = make_signature(net, (torch.randn(3, 64),), {})
    state = [w.tensor.detach().clone() for w in weights]
    refs = [weakref.ref(t) for t in state]
    enabled = gc.isenabled()
    gc.disable()
    try:
        out = call_model(net, names, state, sig, flat)
        assert out.shape == (3, 8)
        del state, out
        alive = [r for r in refs if r() is not None]
        assert alive == [], f"{len(alive)} substituted tensors kept alive by cyclic garbage"
    finally:
        if enabled:
            gc.enable()
    assert all(p is w.tensor for p, w in zip(net.parameters(), weights))  # restored
