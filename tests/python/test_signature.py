"""The Python reader's signature (pt2rt/signature.py) and Program.output_names (schema 1.4):
output names as pytree paths, keyword inputs like the original forward, input checks with
clear errors (dtype, rank, static sizes, dynamic dims' ranges), and archives of schema 1.3."""
from collections import namedtuple

import pytest
import torch

import pt2rt
import signature_models as sm
from pt2rt.ir import constants
from pt2rt.ir.output_names import output_names


@pytest.fixture(scope="module")
def static(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sig") / "kwargs_dict.pt2")
    model = sm.export(path)
    return model, pt2rt.load(path)


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sig") / "kwargs_dict_dynamic.pt2")
    model = sm.export(path, dynamic=True)
    return model, pt2rt.load(path)


def test_output_names_are_pytree_paths(static):
    _, loaded = static
    assert loaded.program.output_names == sm.OUTPUT_NAMES
    assert (loaded.program.schema_major, loaded.program.schema_minor) == (
        constants.SCHEMA_MAJOR, constants.SCHEMA_MINOR) == (1, 6)
    sig = loaded.signature
    assert [s.name for s in sig.inputs] == ["x", "scale"]
    assert [s.name for s in sig.outputs] == sm.OUTPUT_NAMES
    assert [str(s) for s in sig.outputs] == ["float32[4, 4]", "float32[4, 8]", "float32[4]"]


Pair = namedtuple("Pair", "first second")


@pytest.mark.parametrize("structure,names", [
    (torch.zeros(1), ["output"]),
    ((torch.zeros(1), torch.zeros(1)), ["[0]", "[1]"]),
    ([torch.zeros(1), {"a": torch.zeros(1)}], ["[0]", "[1]['a']"]),
    (Pair(torch.zeros(1), (torch.zeros(1),)), [".first", ".second[0]"]),
])
def test_output_name_spelling(structure, names):
    """As torch.utils._pytree.keystr writes a path (torch 1.13 has no keystr: same spelling)."""
    import torch.utils._pytree as pytree
    leaves, spec = pytree.tree_flatten(structure)
    assert output_names(spec, len(leaves)) == names


def test_keyword_inputs_like_forward(static):
    model, loaded = static
    x, scale = sm.example(seed=3)
    expected = sm.flat_outputs(model, x, scale)
    for outs in (loaded.run_inference(x, scale=scale), loaded.run_inference(scale=scale, x=x),
                 loaded.run_inference(x, scale)):
        for got, want in zip(outs, expected):
            torch.testing.assert_close(got, want)
    named = loaded.named_outputs(loaded.run_inference(x, scale=scale))
    assert list(named) == sm.OUTPUT_NAMES
    torch.testing.assert_close(named["['logits']"], expected[0])
    step = loaded.train_step(x, scale=scale)
    assert sorted(step.grads) == ["enc.bias", "enc.weight", "head.bias", "head.weight"]


@pytest.mark.parametrize("args,kwargs,message", [
    ("x", {}, "missing input(s) 'scale'"),
    ("x", {"scale": "s", "x": "x"}, "'x' given both positionally and by name"),
    ("x", {"scale": "s", "bias": "s"}, "unknown input name(s) 'bias'; forward takes x, scale"),
    ("xss", {}, "forward takes 2 inputs (x, scale), got 3 positional"),
    ("D", {"scale": "s"}, "input 0 (x): expected float32[4, 8], got float64[4, 8]"),
    ("R", {"scale": "s"}, "input 0 (x): expected float32[4, 8], got float32[32]"),
    ("B", {"scale": "s"}, "input 0 (x): expected float32[4, 8], got float32[5, 8]"),
])
def test_bad_inputs_are_named(static, args, kwargs, message):
    _, loaded = static
    x, s = sm.example()
    values = {"x": x, "s": s, "D": x.double(), "R": x.flatten(), "B": torch.randn(5, 8)}
    with pytest.raises(pt2rt.InputError) as info:
        loaded.run_inference(*[values[a] for a in args],
                             **{k: values[v] for k, v in kwargs.items()})
    assert message in str(info.value)
    with pytest.raises(pt2rt.InputError):
        loaded.train_step(*[values[a] for a in args], **{k: values[v] for k, v in kwargs.items()})


def test_dynamic_dims_and_ranges(dynamic):
    model, loaded = dynamic
    sig = loaded.signature
    for spec in sig.inputs:
        batch = spec.sizes[0]
        assert (batch.expr, batch.size, batch.min, batch.max) == ("batch", 4, 1, sm.MAX_BATCH)
        assert str(spec) == "float32[batch, 8]"
    assert str(sig.outputs[2]) == "float32[batch]"
    x, scale = sm.example(7, seed=1)
    for got, want in zip(loaded.run_inference(x, scale=scale), sm.flat_outputs(model, x, scale)):
        torch.testing.assert_close(got, want)
    with pytest.raises(pt2rt.InputError, match=r"input 0 \(x\) dim 0: batch = 65 is outside "
                                               r"\[1, 64\]"):
        loaded.run_inference(torch.randn(65, 8), scale=torch.rand(65, 8))
    with pytest.raises(pt2rt.InputError, match=r"input 1 \(scale\) dim 0: batch = 6, but an "
                                               r"earlier input gave batch = 7"):
        loaded.run_inference(x, scale=torch.rand(6, 8))


def test_archive_of_schema_1_3_reads_and_runs(static, tmp_path):
    model, loaded = static
    old = sm.rewrite(loaded.path, str(tmp_path / "old.pt2"), sm.as_schema_1_3)
    old_loaded = pt2rt.load(old)
    assert old_loaded.program.schema_minor == 3 and old_loaded.program.output_names == []
    assert [s.name for s in old_loaded.signature.outputs] == ["[0]", "[1]", "[2]"]
    x, scale = sm.example(seed=5)
    for got, want in zip(old_loaded.run_inference(x, scale=scale),
                         sm.flat_outputs(model, x, scale)):
        torch.testing.assert_close(got, want)
