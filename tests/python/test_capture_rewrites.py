"""Constructs whose torch.nn implementation no tracer can keep, captured through an equivalent
computation on tensors (``exporter/pt2rt/capture/module_rewrites.py``) on both lanes; the table in
exporter/README.md. test_models.py runs the full per-model checks on ``one_hot`` and
``bn_momentum_none`` (models.MODELS); these tests check what the rewrites must keep of eager's
behaviour beyond the example inputs.
"""
from __future__ import annotations

import pytest
import torch

import models
import pt2rt


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


@pytest.fixture(scope="module")
def one_hot_archive(tmp_path_factory):
    model, args = models.build("one_hot")
    path = str(tmp_path_factory.mktemp("one_hot") / "one_hot.pt2")
    pt2rt.export(model, args).save(path)
    return model, args, pt2rt.load(path)


@pytest.mark.parametrize("bad", [5, -1])
def test_one_hot_class_out_of_range_raises_like_eager(one_hot_archive, bad):
    """F.one_hot(y, 5) raises for a class outside [0, 5) in eager; the archive's graphs must
    too, never give a silent all-zero row (1.13: ``index_select`` from the identity; torch 2.x:
    ``_assert_async.msg`` checks)."""
    model, (x, y), loaded = one_hot_archive
    y_bad = y.clone()
    y_bad[1] = bad
    with pytest.raises(RuntimeError):
        model.eval()(x, y_bad)
    with pytest.raises(Exception, match="index out of range|Class values"):
        loaded.run_inference(x, y_bad)
    with pytest.raises(Exception, match="index out of range|Class values"):
        loaded.train_step(x, y_bad)


def test_one_hot_matches_eager_on_other_classes(one_hot_archive):
    model, (x, _), loaded = one_hot_archive
    y = torch.tensor([4, 0, 1, 3])
    torch.testing.assert_close(loaded.run_inference(x, y)[0], model.eval()(x, y).detach())


def test_one_hot_without_num_classes_is_refused():
    """The output size would be max(y) + 1: refused naming the call (1.13: the rewrite's
    message; torch 2.x: the data-dependent read at the user's line)."""
    class NoNumClasses(torch.nn.Module):
        def forward(self, y):
            return torch.nn.functional.one_hot(y).float()
    with pytest.raises(pt2rt.ExportError, match="one_hot"):
        pt2rt.export(NoNumClasses(), (torch.tensor([0, 2, 1]),), train=False)


def test_repeat_interleave_with_an_int_is_static_on_both_lanes(tmp_path):
    """``repeat_interleave`` with a Python int (grouped-query attention's key/value heads):
    torch 1.13 traced it through ``repeat_interleave.Tensor``, whose result size depends on
    data, and the export was refused; it is now expand + flatten there
    (``traceable_ops.repeat_interleave``), with eager's values and gradients."""
    class Repeats(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.l = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.l(x)
            return (y.repeat_interleave(3, 1), torch.repeat_interleave(y, 2, dim=-1),
                    y.repeat_interleave(2))
    model, x = Repeats(), torch.randn(2, 3, 4)
    path = str(tmp_path / "r.pt2")
    pt2rt.export(model, (x,)).save(path)
    loaded = pt2rt.load(path)
    want = model(x)
    for got, w in zip(loaded.run_inference(x), want):
        assert torch.equal(got, w.detach())
    cot = [torch.randn_like(w) for w in want]
    torch.autograd.backward(list(want), cot)
    step = loaded.train_step(x, grad_outputs=cot)
    for name, p in model.named_parameters():
        torch.testing.assert_close(step.grads[name], p.grad)


class SpatialTransformer(torch.nn.Module):
    """A spatial transformer network: theta from a localisation layer, F.affine_grid +
    F.grid_sample (2-D), or a 3-D affine grid."""

    def __init__(self, align_corners, volumetric=False):
        super().__init__()
        torch.manual_seed(0)
        self.volumetric, self.align_corners = volumetric, align_corners
        self.loc = torch.nn.Linear(3 * 4 * 5 * (3 if volumetric else 1), 12 if volumetric else 6)

    def forward(self, x):
        n = x.shape[0]
        eye = torch.eye(3 if self.volumetric else 2, 4 if self.volumetric else 3)
        theta = self.loc(x.flatten(1)).view(n, *eye.shape) * 0.1 + eye
        grid = torch.nn.functional.affine_grid(theta, list(x.shape),
                                               align_corners=self.align_corners)
        return torch.nn.functional.grid_sample(x, grid, align_corners=self.align_corners)


@pytest.mark.parametrize("volumetric", [False, True], ids=["2d", "3d"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_matches_eager_with_a_dynamic_batch(volumetric, align_corners, tmp_path):
    """F.affine_grid's ATen backward takes int[] sizes, so a dynamic batch could not be
    differentiated (torch 2), and torch 1.13's affine_grid_generator takes no SymInts: its
    traceable form (traceable_ops.affine_grid) gives eager's grid and gradients on both
    lanes."""
    model = SpatialTransformer(align_corners, volumetric)
    shape = (2, 3, 3, 4, 5) if volumetric else (2, 3, 4, 5)
    dynamic = ({0: pt2rt.Dim("batch", min=1, max=8)},)
    path = str(tmp_path / "stn.pt2")
    pt2rt.export(model, (torch.randn(*shape),), dynamic_shapes=dynamic).save(path)
    loaded = pt2rt.load(path)
    for batch in (1, 5):
        x = torch.randn(batch, *shape[1:])
        out = model(x)
        torch.testing.assert_close(loaded.run_inference(x)[0], out.detach())
        g = torch.randn_like(out)
        model.zero_grad()
        out.backward(g)
        step = loaded.train_step(x, grad_outputs=[g])
        for name, p in model.named_parameters():
            torch.testing.assert_close(step.grads[name], p.grad, rtol=1e-4, atol=1e-5)

