"""torch 1.13's traces (capture_torch1._first_trace and the functionalization replay,
_replay_functionalized): over fake tensors or on the real ones, the same program."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import pt2rt
import models

pytestmark = pytest.mark.skipif(int(torch.__version__.split(".")[0]) >= 2,
                                reason="the torch 1.13 capture")


def _program(monkeypatch, name: str, per_node: float) -> bytes:
    from pt2rt.capture.torch1 import capture_torch1
    monkeypatch.setattr(capture_torch1._FakeReplayCost, "per_node", per_node)
    monkeypatch.setattr(capture_torch1._FakeReplayCost, "record",
                        classmethod(lambda cls, nodes, seconds: None))  # keep the choice
    model, args = models.build(name)
    return pt2rt.export(model, args, bundle_examples=False).program_bytes


# one_hot: a factory op (eye), after which the fake trace records a detach the real one does
# not (dropped: _drop_detaches_of_factories); lstm: its zero initial states, likewise.
@pytest.mark.parametrize("name", ["cnn_bn", "in_place", "checkpointed", "lstm", "tied_lm",
                                  "one_hot"])
def test_fake_and_real_traces_give_the_same_program(monkeypatch, name):
    fake = _program(monkeypatch, name, 0.0)          # always cheaper: fake
    real = _program(monkeypatch, name, float("inf"))  # never cheaper: real
    assert fake == real


class _PlainAttribute(nn.Module):
    """A tensor attribute that is neither parameter nor buffer: a get_attr constant the fake
    mode of 1.13 refuses as a real input, so the replay falls back to the real tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = torch.linspace(0.5, 2.0, 4)

    def forward(self, x):
        return self.fc(x) * self.scale


def test_a_replay_that_fake_tensors_refuse_runs_on_the_real_tensors(monkeypatch, tmp_path):
    from pt2rt.capture.torch1 import capture_torch1
    monkeypatch.setattr(capture_torch1._FakeReplayCost, "per_node", 0.0)
    fell_back = []
    fake_replay = capture_torch1._fake_trace

    def watched(*args, **kwargs):
        gm = fake_replay(*args, **kwargs)
        fell_back.append(gm is None)
        return gm
    monkeypatch.setattr(capture_torch1, "_fake_trace", watched)
    torch.manual_seed(0)
    model, x = _PlainAttribute(), torch.randn(3, 4)
    exported = pt2rt.export(model, (x,))
    assert fell_back and all(fell_back)
    model.eval()
    with torch.no_grad():
        want = model(x)
    exported.save(tmp_path / "plain.pt2")
    torch.testing.assert_close(pt2rt.load(tmp_path / "plain.pt2").module()(x), want)


class _Bags(nn.Module):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(10, 3, mode=mode)

    def forward(self, idx, offsets):
        return self.bag(idx, offsets)


# _embedding_bag's offset2bag is empty on the CPU in mode sum/mean and full under fake tensors;
# ATen's backward branches on it, so a fake trace records a graph the CPU cannot run. Seen in CI
# when an earlier test had timed fake replays as cheap.
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_a_trace_through_a_device_dependent_shape_is_made_on_the_real_tensors(monkeypatch,
                                                                              tmp_path, mode):
    from pt2rt.capture.torch1 import capture_torch1
    monkeypatch.setattr(capture_torch1._FakeReplayCost, "per_node", 0.0)  # always try fake
    monkeypatch.setattr(capture_torch1._FakeReplayCost, "record",
                        classmethod(lambda cls, nodes, seconds: None))
    torch.manual_seed(0)
    model = _Bags(mode)
    idx, offsets = torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 2])
    exported = pt2rt.export(model, (idx, offsets))
    exported.save(tmp_path / "bags.pt2")
    loaded = pt2rt.load(tmp_path / "bags.pt2").module()
    other = (torch.tensor([7, 0, 0, 9, 2, 8]), torch.tensor([0, 5]))
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(*other), model(*other))
