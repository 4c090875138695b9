"""``None`` among forward()'s outputs (``capture/none_outputs.py``): exported as torch.export
exports it — the archive's outputs are the tensor leaves, named by their paths in the original
structure; metadata ``none_outputs`` lists where the Nones were and ``.module()`` puts them
back; eval outputs and a training step match eager on both lanes."""
import copy
import json

import pytest
import torch
from torch.testing import assert_close

import pt2rt


class OptionalOutputs(torch.nn.Module):
    """Returns (logits, None, {"aux": ..., "loss": None}): an output it does not compute."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(4, 3)
        self.b = torch.nn.Linear(3, 2)

    def forward(self, x):
        h = torch.relu(self.a(x))
        return h, None, {"aux": self.b(h), "loss": None}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    path = tmp_path_factory.mktemp("none") / "opt.pt2"
    pt2rt.export(OptionalOutputs(), (torch.randn(5, 4),)).save(str(path))
    return pt2rt.load(str(path))


def test_tensor_leaves_keep_their_paths(loaded):
    assert loaded.program.output_names == ["[0]", "[2]['aux']"]
    assert json.loads(loaded.program.metadata["none_outputs"]) == ["[1]", "[2]['loss']"]


def test_eval_and_training_step_match_eager(loaded):
    model = OptionalOutputs()
    x = torch.randn(5, 4)
    with torch.no_grad():
        h, none, d = copy.deepcopy(model).eval()(x)
    got = loaded.run_inference(x)
    assert len(got) == 2
    assert_close(got[0], h)
    assert_close(got[1], d["aux"])
    h, _, d = model(x)
    g0, g1 = torch.randn_like(h), torch.randn_like(d["aux"])
    torch.autograd.backward([h, d["aux"]], [g0, g1])
    step = loaded.train_step(x, grad_outputs=[g0, g1])
    for name, p in model.named_parameters():
        assert_close(step.grads[name], p.grad)


def test_module_returns_none_where_eager_does(loaded):
    x = torch.randn(5, 4)
    out = loaded.module().eval()(x)
    assert out[1] is None and out[2]["loss"] is None
    assert_close(out[2]["aux"], OptionalOutputs().eval()(x)[2]["aux"])


def test_user_model_left_without_the_hook():
    """The export's hook is gone afterwards: the model returns its Nones again."""
    model = OptionalOutputs()
    pt2rt.export(model, (torch.randn(2, 4),), bundle_examples=False)
    assert model(torch.randn(2, 4))[1] is None
    assert not model._forward_hooks


def test_only_none_outputs_are_refused_by_name():
    class Nothing(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(2, 2)

        def forward(self, x):
            self.a(x)
            return None
    with pytest.raises(pt2rt.ExportError) as e:
        pt2rt.export(Nothing(), (torch.randn(2, 2),))
    assert "Nothing.forward() returns no tensor (its outputs are all None)" in str(e.value)
