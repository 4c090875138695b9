"""Issue 2, section 4: for every model the running torch's capture exports (models.lane_models:
the common set, plus the torch-2-only constructs on torch 2) and both partitioners, the archive
layout, the descriptors, and the reference executor's parity with eager PyTorch."""
from __future__ import annotations

import functools
import zipfile

import pytest
import torch
import torch.utils._pytree as pytree

import models
import pt2rt
from pt2rt.ir import constants
from pt2rt.format.archive import ArchiveReader
from pt2rt.ir.descriptors import InputKind, OutputKind
from pt2rt.ir.graph_ir import GraphRole

NAMES = list(models.lane_models())
PARTITIONERS = ["default", "min_cut"]
CASES = [(n, p) for n in NAMES for p in PARTITIONERS]


def _ids(case):
    return f"{case[0]}-{case[1]}"


@pytest.fixture(params=CASES, ids=_ids)
def case(request, exports):
    return exports.get(*request.param)


# ---------------------------------------------------------------------------- eager side

@functools.lru_cache(maxsize=None)
def eager_eval(name):
    model, args = models.build(name)
    model.eval()
    with torch.no_grad():
        return pytree.tree_flatten(model(*args))[0]


@functools.lru_cache(maxsize=None)
def eager_train(name):
    """One training forward + backward with ones as cotangents, on a fresh model."""
    model, args = models.build(name)
    model.train()
    outs = pytree.tree_flatten(model(*args))[0]
    diff = [o for o in outs if o.requires_grad]
    torch.autograd.backward(diff, [torch.ones_like(o) for o in diff])
    grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    return [o.detach() for o in outs], grads, buffers


@functools.lru_cache(maxsize=None)
def mutated_in_eager(name, train):
    """FQNs of the parameters and buffers one forward (training or eval mode) changes."""
    model, args = models.build(name)
    model.train(train)
    before = {n: t.detach().clone() for n, t in model.state_dict(keep_vars=True).items()}
    with torch.set_grad_enabled(train):
        model(*args)
    after = model.state_dict(keep_vars=True)
    return sorted(n for n, t in before.items() if not torch.equal(t, after[n].detach()))


@functools.lru_cache(maxsize=None)
def differentiable_outputs(name):
    """Indices of the flat training outputs that require grad (outputs aliasing an input or
    computed without parameters get no tangent)."""
    model, args = models.build(name)
    outs = pytree.tree_flatten(model.train()(*args))[0]
    return [i for i, o in enumerate(outs) if o.requires_grad and o.is_floating_point()]


# ---------------------------------------------------------------------------- layout

def test_entries_stored_and_aligned(case):
    with zipfile.ZipFile(case.path) as zf:
        infos = zf.infolist()
    names = [i.filename for i in infos]
    assert len(names) == len(set(names))
    assert names[:3] == [constants.ARCHIVE_FORMAT_ENTRY, constants.ARCHIVE_VERSION_ENTRY,
                         constants.PROGRAM_ENTRY]
    weights = [n for n in names if n.startswith(constants.WEIGHTS_PREFIX)]
    assert len(weights) == len(case.loaded.program.weights)
    with ArchiveReader(case.path) as ar:
        for info in infos:
            assert info.compress_type == zipfile.ZIP_STORED, info.filename
            assert ar.data_offset(info.filename) % constants.DATA_ALIGNMENT == 0, info.filename
        assert ar.read(constants.ARCHIVE_FORMAT_ENTRY) == b"pt2rt"
        assert ar.read(constants.ARCHIVE_VERSION_ENTRY) == b"1"


def test_weights_table_order_and_bytes(case):
    prog = case.loaded.program
    params = list(case.model.named_parameters())
    buffers = list(case.model.named_buffers())
    expected = [n for n, _ in params] + [n for n, _ in buffers]
    fqns = [w.fqn for w in prog.weights]
    assert fqns[:len(expected)] == expected
    assert all(w.kind is pt2rt.ir.graph_ir.WeightKind.Constant for w in prog.weights[len(expected):])
    for w, (n, p) in zip(prog.weights, params):
        assert w.requires_grad == p.requires_grad, n
        torch.testing.assert_close(case.loaded.weights[n], p.detach(), rtol=0, atol=0)
    for n, b in buffers:
        torch.testing.assert_close(case.loaded.weights[n], b, rtol=0, atol=0)


# ---------------------------------------------------------------------------- descriptors

def test_each_parameter_once_as_param_input(case):
    fqns = sorted(n for n, _ in case.model.named_parameters())
    for role in (GraphRole.Inference, GraphRole.Forward):
        g = case.loaded.graph(role)
        params = sorted(gi.descriptor.fqn for gi in g.inputs
                        if gi.descriptor.kind is InputKind.Param)
        assert params == fqns, role
        descs = [gi.descriptor for gi in g.inputs]
        assert len(descs) == len(set(descs)), role


def test_grad_outputs_only_for_trainable(case):
    trainable = sorted(n for n, p in case.model.named_parameters() if p.requires_grad)
    frozen = {n for n, p in case.model.named_parameters() if not p.requires_grad}
    bw = case.loaded.graph(GraphRole.Backward)
    grads = [go.descriptor.of.fqn for go in bw.outputs
             if go.descriptor.kind is OutputKind.Grad and go.descriptor.of.kind is InputKind.Param]
    assert sorted(grads) == trainable
    assert not frozen & set(grads)
    assert all(go.descriptor.kind is OutputKind.Grad for go in bw.outputs)


def test_forward_backward_calling_convention(case):
    fw = case.loaded.graph(GraphRole.Forward)
    bw = case.loaded.graph(GraphRole.Backward)
    # Plain outputs, InputMutations and Saved(0..n-1), bound by descriptor: the order is the
    # capture's (torch 1.13: Plain first; AOTAutograd: InputMutation first), not a contract
    kinds = {go.descriptor.kind for go in fw.outputs}
    assert kinds <= {OutputKind.Plain, OutputKind.InputMutation, OutputKind.Saved}
    saved_out = sorted(go.descriptor.idx for go in fw.outputs if go.descriptor.is_saved())
    assert saved_out == list(range(len(saved_out)))
    saved_in = sorted(gi.descriptor.idx for gi in bw.inputs
                      if gi.descriptor.kind is InputKind.Saved)
    assert saved_in == saved_out
    # one Tangent per differentiable (floating, requiring grad in eager) user output
    fw_values = {go.descriptor: fw.values[go.value] for go in fw.outputs}
    tangents = [gi.descriptor.output for gi in bw.inputs if gi.descriptor.kind is InputKind.Tangent]
    for t in tangents:
        assert t.kind is OutputKind.Plain
        assert pt2rt.ir.dtypes.to_dtype(fw_values[t].meta.dtype).is_floating_point
    assert sorted(t.idx for t in tangents) == differentiable_outputs(case.name)
    # every parameter/buffer a training forward mutates in eager is an InputMutation
    mutated = sorted(go.descriptor.of.fqn for go in fw.outputs
                     if go.descriptor.kind is OutputKind.InputMutation)
    assert mutated == mutated_in_eager(case.name, True)
    inf = case.loaded.graph(GraphRole.Inference)
    mutated = sorted(go.descriptor.of.fqn for go in inf.outputs
                     if go.descriptor.kind is OutputKind.InputMutation)
    assert mutated == mutated_in_eager(case.name, False)
    assert all(go.descriptor.kind in (OutputKind.Plain, OutputKind.InputMutation)
               for go in inf.outputs)


def test_user_inputs_named_after_forward_parameters(case):
    import inspect
    names = list(inspect.signature(case.model.forward).parameters)[:len(case.args)]
    for role in (GraphRole.Inference, GraphRole.Forward):
        g = case.loaded.graph(role)
        plain = sorted((gi.descriptor.idx, g.values[gi.value].name) for gi in g.inputs
                       if gi.descriptor.kind is InputKind.Plain)
        assert [n for _, n in plain] == names


# ---------------------------------------------------------------------------- parity

def test_inference_matches_eager(case):
    out = case.loaded.run_inference(*case.args)
    ref = eager_eval(case.name)
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r)


def test_training_step_matches_eager(case):
    step = case.loaded.train_step(*case.args)
    outs, grads, buffers = eager_train(case.name)
    assert len(step.outputs) == len(outs)
    for o, r in zip(step.outputs, outs):
        torch.testing.assert_close(o, r)
    assert sorted(step.grads) == sorted(grads)
    for n, g in grads.items():
        torch.testing.assert_close(step.grads[n], g, msg=lambda m: f"grad of {n}: {m}")
    assert sorted(step.buffers) == sorted(buffers)
    for n, b in buffers.items():
        torch.testing.assert_close(step.buffers[n], b, msg=lambda m: f"buffer {n}: {m}")


def test_bundled_references_match_eager(case):
    ex = case.loaded.examples()[0]
    assert ex.has_references
    for x, a in zip(ex.inputs, case.args):
        torch.testing.assert_close(x, a, rtol=0, atol=0)
    for o, r in zip(ex.outputs, eager_eval(case.name)):
        torch.testing.assert_close(o, r)
    outs, grads, buffers = eager_train(case.name)
    for o, r in zip(ex.train_outputs, outs):
        torch.testing.assert_close(o, r)
    # gradients are bundled as sketches by default (grad_sketch.py), checked against eager's
    assert sorted([*ex.grads, *ex.grad_sketches]) == sorted(grads)
    assert ex.check_grads(grads) == {}
    assert sorted(ex.buffers) == sorted(buffers)
    for n, b in buffers.items():
        torch.testing.assert_close(ex.buffers[n], b)
    assert len(ex.grad_outputs) == len(differentiable_outputs(case.name))


def test_export_leaves_model_untouched(case):
    fresh, _ = models.build(case.name)
    assert case.model.training
    for (n, p), (_, q) in zip(case.model.named_parameters(), fresh.named_parameters()):
        assert torch.equal(p, q), n
        assert p.grad is None, n
    for (n, b), (_, c) in zip(case.model.named_buffers(), fresh.named_buffers()):
        assert torch.equal(b, c), n
