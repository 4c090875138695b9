"""The torch 2.x capture (capture_torch2): descriptors come from AOTAutograd's meta['desc'],
one to one, never from positions. Runs on torch >= 2.9 only (lane 2)."""
from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

import models
import pt2rt
from pt2rt.ir import aot_descriptors
from pt2rt.ir.descriptors import InputKind, OutputKind
from pt2rt.ir.graph_ir import GraphRole

pytestmark = pytest.mark.skipif(int(torch.__version__.split(".")[0]) < 2,
                                reason="aot_export_joint_with_descriptors needs torch >= 2.9")


def _aot_classes():
    from torch._functorch._aot_autograd import descriptors as D
    return {name: cls for name, cls in inspect.getmembers(D, inspect.isclass)
            if dataclasses.is_dataclass(cls) and cls.__module__ == D.__name__
            and dataclasses.fields(cls) or name.startswith("Philox")}


def _sample(cls, D):
    """An instance of AOTAutograd descriptor class ``cls`` with nested sample fields."""
    values = {"target": "fc.weight", "idx": 2, "attr": "inner",
              "grad_of": D.ParamAOTInput("fc.weight"),
              "mutated_input": D.BufferAOTInput("bn.running_mean"),
              "output": D.PlainAOTOutput(1), "base_of": None, "base": None}
    kwargs = {}
    for f in dataclasses.fields(cls):
        v = values[f.name]
        if f.name in ("base_of", "base"):
            v = D.PlainAOTOutput(0) if cls.__name__.endswith("Output") else D.PlainAOTInput(0)
        kwargs[f.name] = v
    return cls(**kwargs)


def test_every_aot_descriptor_class_maps_one_to_one():
    """Every AOTInput/AOTOutput class of the running torch has a pt2rt kind, and the mapped
    descriptor prints exactly as AOTAutograd's (same fields, same values)."""
    from torch._functorch._aot_autograd import descriptors as D
    seen_in, seen_out = set(), set()
    for name, cls in _aot_classes().items():
        if name in ("AOTInput", "AOTOutput", "DifferentiableAOTInput", "DifferentiableAOTOutput"):
            continue
        desc = _sample(cls, D)
        if issubclass(cls, D.AOTInput):
            ours = aot_descriptors.input_descriptor(desc)
            seen_in.add(ours.kind)
        else:
            ours = aot_descriptors.output_descriptor(desc)
            seen_out.add(ours.kind)
        assert str(ours) == repr(desc), name
    # every schema kind but pt2rt's own (Unknown; Saved/Constant inputs) comes from AOTAutograd
    assert set(InputKind) - seen_in == {InputKind.Unknown, InputKind.Saved, InputKind.Constant}
    assert set(OutputKind) - seen_out == {OutputKind.Unknown}


def test_unknown_descriptor_class_is_refused():
    @dataclasses.dataclass(frozen=True)
    class FutureAOTInput:
        idx: int
    with pytest.raises(pt2rt.CaptureError, match="FutureAOTInput.*no pt2rt equivalent"):
        aot_descriptors.input_descriptor(FutureAOTInput(0))


def _reverse_io(jd):
    """Reverses the order of the joint/inference graph's placeholders and outputs, keeping each
    one's meta['desc']: a capture that read descriptors by position would now mislabel them."""
    g = jd.graph_module.graph
    placeholders = [n for n in g.nodes if n.op == "placeholder"]
    first = next(iter(g.nodes))
    for p in placeholders:  # each moved to the front: reversed order
        first.prepend(p)
        first = p
    out = next(n for n in g.nodes if n.op == "output")
    out.args = (type(out.args[0])(reversed(out.args[0])),)
    out.meta["desc"] = list(reversed(out.meta["desc"]))
    jd.graph_module.recompile()
    return jd


def _descriptor_sets(exported):
    return {g.role: (sorted(map(str, g.inputs)), sorted(map(str, g.outputs)))
            for g in exported.graphs}


@pytest.mark.parametrize("name", ["cnn_bn", "two_io"])
def test_descriptors_follow_meta_desc_not_positions(name, monkeypatch, tmp_path):
    """The same model captured with AOTAutograd's graphs in reversed placeholder/output order
    gets the same descriptors and still trains like eager: every descriptor came from
    meta['desc']."""
    from torch._functorch import aot_autograd
    model, args = models.build(name)
    reference = pt2rt.export(model, args)

    original = aot_autograd.aot_export_joint_with_descriptors
    monkeypatch.setattr(aot_autograd, "aot_export_joint_with_descriptors",
                        lambda *a, **k: _reverse_io(original(*a, **k)))
    model, args = models.build(name)
    reversed_io = pt2rt.export(model, args)
    joint_inputs = [n.name for n in reversed_io.graph(GraphRole.Forward).placeholders()]
    assert joint_inputs != sorted(joint_inputs, key=lambda s: int(s.split("_")[-1])
                                  if s.split("_")[-1].isdigit() else 0)
    assert _descriptor_sets(reversed_io) == _descriptor_sets(reference)

    path = str(tmp_path / "reversed.pt2")
    reversed_io.save(path)
    step = pt2rt.load(path).train_step(*args)
    ref_path = str(tmp_path / "reference.pt2")
    reference.save(ref_path)
    ref_step = pt2rt.load(ref_path).train_step(*args)
    for a, b in zip(step.outputs, ref_step.outputs):
        torch.testing.assert_close(a, b)
    assert sorted(step.grads) == sorted(ref_step.grads)
    for n in ref_step.grads:
        torch.testing.assert_close(step.grads[n], ref_step.grads[n])
    for n in ref_step.buffers:
        torch.testing.assert_close(step.buffers[n], ref_step.buffers[n])


def test_archive_descriptors_are_aot_autograds(monkeypatch):
    """The forward graph's inputs and the joint's outputs print exactly as the meta['desc'] of
    the graph AOTAutograd returned."""
    from torch._functorch import aot_autograd
    seen = []
    original = aot_autograd.aot_export_joint_with_descriptors

    def record(*a, **k):
        jd = original(*a, **k)
        g = jd.graph_module.graph
        seen.append(([repr(n.meta["desc"]) for n in g.nodes if n.op == "placeholder"],
                     [repr(d) for d in next(n for n in g.nodes if n.op == "output").meta["desc"]
                      if d is not None]))
        return jd

    monkeypatch.setattr(aot_autograd, "aot_export_joint_with_descriptors", record)
    model, args = models.build("cnn_bn")
    exported = pt2rt.export(model, args)
    (inf_in, inf_out), (joint_in, joint_out) = seen
    inference = exported.graph(GraphRole.Inference)
    assert [str(d) for d in inference.inputs] == inf_in
    assert [str(d) for d in inference.outputs] == inf_out
    fwd, bwd = exported.graph(GraphRole.Forward), exported.graph(GraphRole.Backward)
    assert sorted(map(str, fwd.inputs)) == sorted(d for d in joint_in if "Tangent" not in d)
    joint_fwd = [d for d in joint_out if not d.startswith("GradAOTOutput")]
    assert [str(d) for d in fwd.outputs if not d.is_saved()] == joint_fwd
    assert [str(d) for d in bwd.outputs] == [d for d in joint_out
                                             if d.startswith("GradAOTOutput")]
    kinds = {d.kind for g in exported.graphs for d in g.inputs} | \
        {d.kind for g in exported.graphs for d in g.outputs}
    assert kinds == {InputKind.Param, InputKind.Buffer, InputKind.Plain, InputKind.Tangent,
                     InputKind.Saved, OutputKind.Plain, OutputKind.InputMutation,
                     OutputKind.Grad, OutputKind.Saved}


def test_decompositions_option_is_passed_to_the_capture():
    """decompositions=: aten.addmm replaced by what the function traces (mm + add)."""
    from torch._decomp import get_decompositions
    model, args = models.build("mlp")
    exported = pt2rt.export(model, args,
                            decompositions=get_decompositions([torch.ops.aten.addmm]))
    ops = {o.qualified() for o in exported.program.operators}
    assert "aten::addmm" not in ops and "aten::mm" in ops


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_tied_weights_merge_into_one_parameter(partitioner, tmp_path):
    """AOTAutograd lifts a tied parameter once per FQN; the archive has it once, with the two
    gradients summed (eager's accumulated .grad)."""
    from test_capture_features import Tied  # noqa: WPS433 - shared model
    torch.manual_seed(0)
    model, x = Tied(), torch.randn(3, 6)
    exported = pt2rt.export(model, (x,), partitioner=partitioner)
    params = [d.fqn for d in exported.graph(GraphRole.Forward).inputs
              if d.kind is InputKind.Param]
    grads = [d.of.fqn for d in exported.graph(GraphRole.Backward).outputs]
    assert params == ["enc.weight"] and grads == ["enc.weight"]
    path = str(tmp_path / "tied.pt2")
    exported.save(path)
    step = pt2rt.load(path).train_step(x)
    model(x).sum().backward()
    torch.testing.assert_close(step.grads["enc.weight"], model.enc.weight.grad)


def _lstm_2_11(monkeypatch):
    """torch 2.11's one_layer_lstm returned the final states as [1, batch, hidden] (hx.squeeze(1)
    of [1, batch, hidden]); this torch's is replaced by one that does the same. The LSTM is
    captured unrolled (ATen's decomposition), as one with dropout between layers in training
    mode is, rather than as one pt2rt::lstm node."""
    from torch._decomp import decompositions as decomp
    from pt2rt.ops import rnn_ops
    monkeypatch.setattr(rnn_ops, "_fits_one_op", lambda args: False)
    original = decomp.one_layer_lstm

    def as_in_2_11(*args, **kwargs):
        out, (hx, cx) = original(*args, **kwargs)
        widen = lambda t: t.unsqueeze(0) if t.dim() == 2 and t.shape[0] > 1 else t  # noqa: E731
        return out, (widen(hx), widen(cx))
    monkeypatch.setattr(decomp, "one_layer_lstm", as_in_2_11)


def test_lstm_final_states_keep_eagers_shape_under_torch_2_11s_decomposition(monkeypatch,
                                                                              tmp_path):
    import zoo_models
    _lstm_2_11(monkeypatch)
    model, args = zoo_models.lstm_state()
    exported = pt2rt.export(model, args)
    exported.save(str(tmp_path / "l.pt2"))
    loaded = pt2rt.load(str(tmp_path / "l.pt2"))
    got = loaded.run_inference(*args)
    with torch.no_grad():
        y, (h, c) = model.eval()(*args)
    assert [tuple(t.shape) for t in got] == [tuple(y.shape), tuple(h.shape), tuple(c.shape)]
    torch.testing.assert_close(got[1], h)


def test_a_decomposition_that_changes_an_output_shape_is_refused(monkeypatch):
    import contextlib
    import zoo_models
    from pt2rt.capture.torch2 import capture_torch2
    from pt2rt.errors import CaptureError
    _lstm_2_11(monkeypatch)
    monkeypatch.setattr(capture_torch2, "lstm_final_state_fix", contextlib.nullcontext)
    model, args = zoo_models.lstm_state()
    with pytest.raises(CaptureError, match=r"output 1 .* \[2, 2, 5\] in eager .* \[2, 1, 2, 5\]"):
        pt2rt.export(model, args)
