"""Constructs torch 1.13's capture refuses and the torch 2.x capture exports
(models.TORCH2_MODELS; the table in exporter/README.md).

On torch 1.13 each export fails with a CaptureError naming the model and why; on torch 2.x it
exports, and one training step of the archive (Python reference executor) matches eager
PyTorch: outputs, parameter gradients, buffers. (tests/python/test_models.py runs the full
per-model checks on them too, via models.lane_models(); the C++ runtime's parity and training
tests run them on lane 2 and, from lane 2's archives, on LibTorch 1.13 in tests/cross.)
"""
from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree

import models
import pt2rt

TORCH2 = int(torch.__version__.split(".")[0]) >= 2

# Why torch 1.13's make_fx capture refuses each construct (a fragment of its message).
REFUSED_ON_113 = {
    "one_hot": "get value out of a tracing tensor",
    "bn_momentum_none": "data-dependent Python value: __float__()",
}


def test_every_torch2_construct_has_an_expectation():
    assert sorted(REFUSED_ON_113) == sorted(models.TORCH2_MODELS)


@pytest.mark.skipif(TORCH2, reason="the torch 1.13 capture's refusals")
@pytest.mark.parametrize("name", sorted(models.TORCH2_MODELS))
def test_refused_by_the_torch113_capture(name):
    model, args = models.build(name)
    with pytest.raises(pt2rt.CaptureError) as e:
        pt2rt.export(model, args)
    assert type(model).__name__ in str(e.value) or "batchnorm.py" in str(e.value)
    assert REFUSED_ON_113[name] in str(e.value)


@pytest.mark.skipif(not TORCH2, reason="the torch 2.x capture")
@pytest.mark.parametrize("name", sorted(models.TORCH2_MODELS))
def test_exported_by_the_torch2_capture(name, tmp_path):
    model, args = models.build(name)
    exported = pt2rt.export(model, args)
    assert exported.captured.capture.startswith("aot_export_joint_with_descriptors")
    path = str(tmp_path / f"{name}.pt2")
    exported.save(path)
    step = pt2rt.load(path).train_step(*args)

    model.train()
    outs = pytree.tree_flatten(model(*args))[0]
    diff = [o for o in outs if o.requires_grad]
    torch.autograd.backward(diff, [torch.ones_like(o) for o in diff])
    for got, want in zip(step.outputs, outs):
        torch.testing.assert_close(got, want.detach())
    grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    assert sorted(step.grads) == sorted(grads)
    for n, g in grads.items():
        torch.testing.assert_close(step.grads[n], g)
    for n, b in model.named_buffers():
        torch.testing.assert_close(step.buffers[n], b)


@pytest.mark.skipif(not TORCH2, reason="the torch 2.x capture")
def test_bn_momentum_none_factor_is_read_from_the_buffer_at_run_time(tmp_path):
    """momentum=None: the update factor is 1/num_batches_tracked of the call, not a constant
    baked in at export — two steps from different counts update as eager does."""
    model, (x,) = models.build("bn_momentum_none")
    path = str(tmp_path / "bn.pt2")
    pt2rt.export(model, (x,)).save(path)
    loaded = pt2rt.load(path)
    model.train()
    for count in (3, 9):
        model.bn.num_batches_tracked.fill_(count)
        loaded.weights["bn.num_batches_tracked"].fill_(count)
        step = loaded.train_step(x)
        model(x)
        torch.testing.assert_close(step.buffers["bn.running_mean"], model.bn.running_mean)
        torch.testing.assert_close(step.buffers["bn.running_var"], model.bn.running_var)
        loaded.weights["bn.running_mean"].copy_(model.bn.running_mean)
        loaded.weights["bn.running_var"].copy_(model.bn.running_var)
