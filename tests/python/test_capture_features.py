"""Capture beyond the model set: Tensor[] results (prim::getitem), lifted constants, tied
weights, grad-requiring user inputs, keyword inputs, dict outputs, AOTAutograd FX queries."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.utils._pytree as pytree

import models
import pt2rt
from pt2rt.capture import capture as capture_mod
from pt2rt.ir import graph_ir
from pt2rt.ir.descriptors import InputDescriptor, InputKind, OutputDescriptor, OutputKind
from pt2rt.ir.graph_ir import ConstantTable, GraphRole, WeightKind
from pt2rt.ir.program_ir import ArgKind, ValueKind


class Split(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 8)

    def forward(self, x):
        a, b, c = torch.split(self.fc(x), [3, 3, 2], dim=1)
        return torch.relu(a) * b + c.sum(dim=1, keepdim=True)


class WithConstant(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = torch.linspace(0.5, 2.0, 4)  # a plain attribute, not a buffer

    def forward(self, x):
        return self.fc(x) * self.scale


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(6, 6, bias=False)
        self.dec = nn.Linear(6, 6, bias=False)
        self.dec.weight = self.enc.weight  # shared parameter

    def forward(self, x):
        return self.dec(torch.tanh(self.enc(x)))


class DictOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, *, scale):
        y = self.fc(x)
        return {"y": y * scale, "z": y.sum()}


def _round_trip(model, args, tmp_path, kwargs=None, **kw):
    e = pt2rt.export(model, args, kwargs, **kw)
    path = str(tmp_path / "m.pt2")
    e.save(path)
    return e, pt2rt.load(path)


def _eager_step(model, args, kwargs=None):
    model.train()
    outs = pytree.tree_flatten(model(*args, **(kwargs or {})))[0]
    diff = [o for o in outs if o.requires_grad]
    torch.autograd.backward(diff, [torch.ones_like(o) for o in diff])
    return [o.detach() for o in outs]


def test_tensor_list_results_use_prim_getitem(tmp_path):
    torch.manual_seed(0)
    model, x = Split(), torch.randn(5, 6)
    e, loaded = _round_trip(model, (x,), tmp_path)
    fw = loaded.graph(GraphRole.Forward)
    ops = [loaded.program.operators[n.op].qualified() for n in fw.nodes]
    split = fw.nodes[ops.index("aten::split_with_sizes")]
    assert fw.values[split.outputs[0]].kind is ValueKind.TensorList
    getitems = [n for n, o in zip(fw.nodes, ops) if o == "prim::getitem"]
    assert len(getitems) == 3
    assert [(a.kind, a.value) for a in getitems[2].args] == \
        [(ArgKind.TensorListRef, split.outputs[0]), (ArgKind.IntArg, 2)]
    step = loaded.train_step(x)
    out = _eager_step(model, (x,))
    torch.testing.assert_close(step.outputs[0], out[0])
    for n, p in model.named_parameters():
        torch.testing.assert_close(step.grads[n], p.grad)
    torch.testing.assert_close(loaded.run_inference(x)[0], out[0])


def test_tensor_constants_are_lifted(tmp_path):
    torch.manual_seed(0)
    model, x = WithConstant(), torch.randn(2, 4)
    e, loaded = _round_trip(model, (x,), tmp_path)
    consts = [w for w in loaded.program.weights if w.kind is WeightKind.Constant]
    assert [w.fqn for w in consts] == ["_tensor_constant0"]
    torch.testing.assert_close(loaded.weights["_tensor_constant0"], model.scale)
    for role in (GraphRole.Inference, GraphRole.Forward):
        kinds = [gi.descriptor for gi in loaded.graph(role).inputs]
        assert InputDescriptor.constant("_tensor_constant0") in kinds
    step = loaded.train_step(x)
    out = _eager_step(model, (x,))
    torch.testing.assert_close(step.outputs[0], out[0])
    torch.testing.assert_close(step.grads["fc.weight"], model.fc.weight.grad)


def test_tied_weights_one_param_and_summed_grad(tmp_path):
    torch.manual_seed(0)
    model, x = Tied(), torch.randn(3, 6)
    e, loaded = _round_trip(model, (x,), tmp_path)
    params = [gi.descriptor.fqn for gi in loaded.graph(GraphRole.Forward).inputs
              if gi.descriptor.kind is InputKind.Param]
    assert params == ["enc.weight"]
    step = loaded.train_step(x)
    _eager_step(model, (x,))
    torch.testing.assert_close(step.grads["enc.weight"], model.enc.weight.grad)


def test_input_requiring_grad_gets_grad_output(tmp_path):
    model, (x,) = models.build("mlp")
    x = x.clone().requires_grad_(True)
    e, loaded = _round_trip(model, (x,), tmp_path)
    bw = loaded.graph(GraphRole.Backward)
    grads = [go.descriptor for go in bw.outputs]
    assert OutputDescriptor.grad(InputDescriptor.plain(0)) in grads
    step = loaded.train_step(x.detach())
    xe = x.detach().clone().requires_grad_(True)
    _eager_step(model, (xe,))
    torch.testing.assert_close(step.grads["input:0"], xe.grad)
    ex = loaded.examples()[0]
    assert "input:0" in ex.grad_sketches
    assert ex.check_grads({**step.grads, "input:0": xe.grad}) == {}
    assert ex.check_grads({**step.grads, "input:0": xe.grad * 1.01}).keys() == {"input:0"}


def test_keyword_inputs_and_dict_outputs(tmp_path):
    torch.manual_seed(0)
    model = DictOut()
    x, scale = torch.randn(2, 3), torch.tensor(3.0)
    e, loaded = _round_trip(model, (x,), tmp_path, kwargs={"scale": scale})
    assert loaded.input_names == ["x", "scale"]
    inf = loaded.graph(GraphRole.Inference)
    names = {gi.descriptor.idx: inf.values[gi.value].name for gi in inf.inputs
             if gi.descriptor.kind is InputKind.Plain}
    assert names == {0: "x", 1: "scale"}
    outs = loaded.run_inference(x, scale)
    model.eval()
    with torch.no_grad():
        ref = model(x, scale=scale)
    torch.testing.assert_close(outs[0], ref["y"])
    torch.testing.assert_close(outs[1], ref["z"])
    assert e.captured.signature.num_outputs == 2


def test_aot_fx_utilities_on_joint():
    model, args = models.build("frozen")
    weights = capture_mod.collect_weights(model)
    sig, flat = capture_mod.make_signature(model, args, {})
    joint = capture_mod.select_backend().capture_joint(model, weights, sig, flat,
                                                       ConstantTable())
    g = joint.graph
    pg = graph_ir.get_param_and_grad_nodes(g)
    for n, p in model.named_parameters():
        node, grad = pg[InputDescriptor.param(n)]
        assert node.op == "placeholder" and node.name.startswith("primals_")
        assert (grad is not None) == p.requires_grad, n
    assert sorted(graph_ir.get_named_buffer_nodes(g)) == sorted(n for n, _ in
                                                                model.named_buffers())
    ot = graph_ir.get_all_output_and_tangent_nodes(g)
    node, tangent = ot[OutputDescriptor.plain(0)]
    assert tangent is not None and tangent.name.startswith("tangents_")
    muts = [d for d in ot if d.kind is OutputKind.InputMutation]
    assert len(muts) == 3 and all(ot[d][1] is None for d in muts)
    assert joint.num_fwd_outputs == 4


def test_frozen_parameters_cause_no_backward_work(exports):
    c = exports.get("frozen")
    bw = c.loaded.graph(GraphRole.Backward)
    ops = [c.loaded.program.operators[n.op].qualified() for n in bw.nodes]
    # the backbone is frozen and its input needs no grad: nothing flows back into it
    assert "aten::convolution_backward" not in ops
    assert "aten::native_batch_norm_backward" not in ops


@pytest.mark.parametrize("dtype", [torch.float64])
def test_other_dtypes(tmp_path, dtype):
    model, (x,) = models.build("mlp")
    model = model.to(dtype)
    x = x.to(dtype)
    e, loaded = _round_trip(model, (x,), tmp_path)
    step = loaded.train_step(x)
    out = _eager_step(model, (x,))
    assert step.outputs[0].dtype == dtype
    torch.testing.assert_close(step.outputs[0], out[0])
    torch.testing.assert_close(step.grads["fc1.weight"], model.fc1.weight.grad)


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.unused = nn.Parameter(torch.ones(3))  # trainable, never used: its grad is None
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


class MutatesInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        x.mul_(2)
        return self.fc(x)


def test_unused_parameter_has_none_grad_output(tmp_path):
    torch.manual_seed(0)
    e, loaded = _round_trip(Unused(), (torch.randn(2, 4),), tmp_path)
    bw = loaded.graph(GraphRole.Backward)
    by_desc = {go.descriptor: go.value for go in bw.outputs}
    assert by_desc[OutputDescriptor.grad(InputDescriptor.param("unused"))] == -1
    assert by_desc[OutputDescriptor.grad(InputDescriptor.param("fc.weight"))] >= 0
    assert sorted(loaded.train_step(torch.randn(2, 4)).grads) == ["fc.bias", "fc.weight"]


def test_user_input_mutation_is_an_output_and_caller_tensor_untouched(tmp_path):
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    x0 = x.clone()
    e, loaded = _round_trip(MutatesInput(), (x,), tmp_path)
    assert torch.equal(x, x0)
    for role in (GraphRole.Inference, GraphRole.Forward):
        outs = loaded.run_graph(role, {InputDescriptor.plain(0): x})
        mutated = outs[OutputDescriptor.input_mutation(InputDescriptor.plain(0))]
        torch.testing.assert_close(mutated, x0 * 2)


def test_non_persistent_buffer_flag(tmp_path):
    model = nn.Sequential(nn.Linear(3, 3))
    model.register_buffer("offset", torch.full((3,), 0.5), persistent=False)
    model.register_buffer("count", torch.zeros((), dtype=torch.int64))
    e, loaded = _round_trip(model, (torch.randn(2, 3),), tmp_path)
    flags = {w.fqn: (w.kind, w.persistent) for w in loaded.program.weights}
    assert flags["offset"] == (WeightKind.Buffer, False)
    assert flags["count"] == (WeightKind.Buffer, True)
    assert flags["0.weight"] == (WeightKind.Parameter, True)
    assert loaded.program.metadata["output_spec"] == "*"


def test_a_model_deepcopy_refuses_exports_and_is_left_as_it_was(tmp_path):
    """torch.nn.utils.weight_norm keeps `weight` as a non-leaf tensor attribute, which
    copy.deepcopy refuses: the eager references run on the model itself with private copies
    of its state swapped in (model_call.private_state), and everything is put back."""
    import warnings
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # weight_norm's deprecation (torch 2.x)
        conv = torch.nn.utils.weight_norm(torch.nn.Conv1d(3, 4, 3))
    model = torch.nn.Sequential(conv, torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(24, 2))
    x = torch.randn(2, 3, 8)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    weight = conv.weight
    exported = pt2rt.export(model, (x,))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert conv.weight is weight and all(p.grad is None for p in model.parameters())
    exported.save(str(tmp_path / "wn.pt2"))
    loaded = pt2rt.load(str(tmp_path / "wn.pt2"))
    torch.testing.assert_close(loaded.run_inference(x)[0], model.eval()(x))
    model.train()
    out = model(x)
    out.backward(torch.ones_like(out))
    grads = loaded.train_step(x).grads
    for name, p in model.named_parameters():
        torch.testing.assert_close(grads[name], p.grad)
    assert not loaded.examples()[0].check_grads(grads)  # the bundled references agree


def test_reference_draws_says_whether_the_graph_replays_eager():
    """capture.reference_draws: 'replayed' when the forward graph, run from the reference
    seed, gives eager's training outputs; 'differ' when it draws otherwise; '' without draws."""
    import random_models
    from pt2rt.capture.capture import reference_draws
    from pt2rt.capture.eager_run import EagerTrainRun
    from pt2rt.ir.graph_ir import GraphRole
    model, args = random_models.build_dropout()
    exported = pt2rt.export(model, args)
    assert exported.program.metadata["reference_draws"] == "replayed"
    fwd = exported.captured.graph(GraphRole.Forward)
    eager = exported.captured.eager_train
    assert reference_draws(fwd, eager, list(eager.outputs), "cpu") == "replayed"
    shuffled = [o.flip(-1) for o in eager.outputs]
    assert reference_draws(fwd, eager, shuffled, "cpu") == "differ"
    assert reference_draws(fwd, eager, shuffled, "cuda") == ""
    plain = pt2rt.export(torch.nn.Linear(3, 2), (torch.randn(4, 3),))
    assert "reference_draws" not in plain.program.metadata
    assert reference_draws(plain.captured.graph(GraphRole.Forward),
                           EagerTrainRun(outputs=[torch.zeros(4, 2)], diff=[0]),
                           [torch.ones(4, 2)], "cpu") == ""
