"""Python scalars among the example inputs (``capture/specialized_inputs.py``): specialized
into the graphs as torch.export specializes them — the archive's inputs are the tensors, the
graphs compute with the example's values, metadata ``specialized_inputs`` records them; eval
and a training step match eager called with the same scalars, on both lanes."""
import json

import pytest
import torch
from torch.testing import assert_close

import pt2rt


class Scaled(torch.nn.Module):
    """forward(x, scale: float, mask=None, *, mode: str = "sum", y): scalars among tensors."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(4, 3)

    def forward(self, x, scale, mask=None, *, mode="sum", y):
        h = self.a(x) * scale
        if mask is not None:
            h = h.masked_fill(mask, 0.0)
        return h.sum(-1) + y if mode == "sum" else h.amax(-1) + y


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    path = tmp_path_factory.mktemp("scalars") / "scaled.pt2"
    model = Scaled()
    pt2rt.export(model, (torch.randn(5, 4), 2.5, None), {"mode": "max", "y": torch.randn(5)}
                 ).save(str(path))
    assert type(model) is Scaled and "forward" not in model.__dict__  # left as it was
    return pt2rt.load(str(path))


def test_only_the_tensors_are_inputs(loaded):
    assert loaded.input_names == ["x", "y"]
    assert json.loads(loaded.program.metadata["specialized_inputs"]) == [
        {"name": "scale", "position": 1, "value": "2.5"},
        {"name": "mask", "position": 2, "value": "None"},
        {"name": "mode", "position": 3, "value": "'max'"}]


def test_graphs_compute_with_the_example_scalars(loaded):
    model = Scaled()
    x, y = torch.randn(5, 4), torch.randn(5)
    with torch.no_grad():
        want = model.eval()(x, 2.5, None, mode="max", y=y)
    assert_close(loaded.run_inference(x, y=y)[0], want)
    out = model.train()(x, 2.5, mode="max", y=y)
    g = torch.randn_like(out)
    out.backward(g)
    step = loaded.train_step(x, y=y, grad_outputs=[g])
    assert_close(step.outputs[0], out.detach())
    for name, p in model.named_parameters():
        assert_close(step.grads[name], p.grad)


def test_module_takes_the_original_call_and_checks_the_constants(loaded):
    """As torch.export's ExportedProgram.module(): the original call, specialized arguments
    included (positionally or by name), each checked against the exported value."""
    module = loaded.module().eval()
    x, y = torch.randn(5, 4), torch.randn(5)
    with torch.no_grad():
        want = Scaled().eval()(x, 2.5, None, mode="max", y=y)
    assert_close(module(x, 2.5, None, mode="max", y=y), want)
    assert_close(module(x, scale=2.5, y=y), want)
    with pytest.raises(pt2rt.InputError, match=r"input 'scale' was specialized to 2\.5 at "
                       r"export .* got 3\.0; export again"):
        module(x, 3.0, y=y)


def test_an_int_specializes_size_arithmetic(tmp_path):
    class Repeat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.linspace(1, 2, 3))

        def forward(self, x, times):
            return (x * self.w).repeat(times, 1)
    path = str(tmp_path / "repeat.pt2")
    pt2rt.export(Repeat(), (torch.randn(2, 3), 4)).save(path)
    x = torch.randn(2, 3)
    got = pt2rt.load(path).run_inference(x)[0]
    assert got.shape == (8, 3)
    assert_close(got, Repeat()(x, 4).detach())


def test_forward_with_var_args_keeps_the_refusal():
    """``*args``: which parameter a scalar binds to is not a name; refused as before."""
    class VarArgs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(2, 2)

        def forward(self, x, *rest):
            return self.a(x) * rest[0]
    with pytest.raises(pt2rt.ExportTypeError, match=r"is a float"):
        pt2rt.export(VarArgs(), (torch.randn(2, 2), 2.0))
