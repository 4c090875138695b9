"""pt2rt.load(path).module() (exporter/pt2rt/format/archive_module.py): the archive back as an
nn.Module, as torch.export's ExportedProgram.module()."""
from __future__ import annotations

import copy
import types

import torch
from torch import nn

import pt2rt
from pt2rt.format.archive_module import unflatten


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU())
        self.cls = nn.Linear(8, 3)
        self.reg = nn.Linear(8, 2)

    def forward(self, x, scale):
        h = self.body(x) * scale
        return {"logits": self.cls(h), "boxes": (self.reg(h), h.sum(1))}


def _export(tmp_path):
    torch.manual_seed(0)
    model = Heads()
    args = (torch.randn(5, 6), torch.tensor(2.0))
    pt2rt.export(model, args).save(str(tmp_path / "h.pt2"))
    return model, args, pt2rt.load(str(tmp_path / "h.pt2")).module()


def test_eval_mode_matches_eager_with_the_original_structure_and_keywords(tmp_path):
    model, (x, scale), m = _export(tmp_path)
    assert not m.training  # an archive with an inference graph starts in eval mode
    want = copy.deepcopy(model).eval()(x, scale)
    got = m(x, scale=scale)
    assert set(got) == {"logits", "boxes"} and isinstance(got["boxes"], tuple)
    torch.testing.assert_close(got["logits"], want["logits"])
    torch.testing.assert_close(got["boxes"][1], want["boxes"][1])
    assert set(m.state_dict()) == set(model.state_dict())


def _losses(module, x, scale, steps=3):
    """SGD steps on the loss of both heads; the loss before each step."""
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        out = module(x, scale)
        loss = out["logits"].pow(2).mean() + out["boxes"][0].pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def test_train_mode_trains_like_eager(tmp_path):
    """train(): the forward graph with the backward graph as its autograd backward, BatchNorm
    statistics updated — the same losses, weights and buffers as eager after 3 SGD steps."""
    model, (x, scale), m = _export(tmp_path)
    eager = copy.deepcopy(model).train()
    want = _losses(eager, x, scale)
    got = _losses(m.train(), x, scale)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want))
    for name, t in eager.state_dict().items():
        torch.testing.assert_close(m.state_dict()[name], t)


def test_unflatten_spells_pytree_paths():
    a, b, c = torch.zeros(1), torch.ones(1), torch.full((1,), 2.0)
    assert unflatten([a], ["output"]) is a
    assert unflatten([a, b], ["[0]", "[1]"]) == (a, b)
    out = unflatten([a, b, c], ["['x']", "['y'][0]", "['y'][1]"])
    assert out["x"] is a and out["y"] == (b, c)
    ns = unflatten([a, b], [".mean", ".std"])
    assert isinstance(ns, types.SimpleNamespace) and ns.std is b
