"""torchvision's segmentation heads with dynamic shapes (issue 24 item 6):
lraspp_mobilenet_v3_large and deeplabv3_mobilenet_v3_large (F.interpolate's
upsample_bilinear2d.vec, the ASPP concatenation) export with Dim("batch", 1, 4) on both lanes,
and with a dynamic image height and width on torch 2 (``ops/upsample_ops.py``: the heads'
``F.interpolate(x, size=input.shape[-2:])`` as ATen's upsample kernels), and match eager at
both ends of the range (eval outputs) and in a training step (outputs and gradients)."""
import copy

import pytest
import torch
from torch.testing import assert_close

import pt2rt

torchvision = pytest.importorskip("torchvision")
seg = torchvision.models.segmentation

BUILDERS = {
    "lraspp": lambda: seg.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                    num_classes=3),
    "deeplabv3": lambda: seg.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                          num_classes=3, aux_loss=False),
}


TORCH2 = int(torch.__version__.split(".")[0]) >= 2
# name: (dynamic_shapes, shapes to run inference at, shape of the training step)
DIMS = {
    "batch": (({0: pt2rt.Dim("batch", min=1, max=4)},), [(1, 3, 64, 64), (4, 3, 64, 64)],
              (4, 3, 64, 64)),
    "image": (({2: pt2rt.Dim("height", min=32, max=96), 3: pt2rt.Dim("width", min=32,
                                                                      max=96)},),
              [(2, 3, 32, 48), (2, 3, 96, 80)], (2, 3, 96, 80)),
}


def _cases():
    for name in sorted(BUILDERS):
        for dims in sorted(DIMS):
            if dims == "batch" or TORCH2:
                yield pytest.param(name, dims, id=f"{name}-{dims}")


@pytest.mark.skipif(TORCH2, reason="torch 1.13's limit")
def test_dynamic_image_refused_by_name_on_torch_1_13():
    """torch 1.13's symbolic trace has no backend for the depthwise convolutions' backward
    over a symbolic height or width (it falls through to convolution_backward_overrideable):
    refused as a missing symbolic-shape rule, with the static export named as the way out."""
    dynamic = DIMS["image"][0]
    with pytest.raises(pt2rt.ExportError, match=r"dynamic_shapes: .* has no symbolic-shape "
                       r"rule on torch 1\.13.*convolution_backward_overrideable.*static shapes"):
        pt2rt.export(BUILDERS["lraspp"](), (torch.randn(2, 3, 64, 64),), dynamic_shapes=dynamic)


@pytest.mark.parametrize("name,dims", list(_cases()))
def test_dynamic_shapes_match_eager_at_both_ends(name, dims, tmp_path):
    dynamic, run_shapes, step_shape = DIMS[dims]
    torch.manual_seed(0)
    model = BUILDERS[name]()
    for m in model.modules():  # the training step is compared exactly: no dropout draws
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    path = tmp_path / f"{name}.pt2"
    pt2rt.export(model, (torch.randn(2, 3, 64, 64),), dynamic_shapes=dynamic).save(str(path))
    loaded = pt2rt.load(str(path))
    for shape in run_shapes:
        x = torch.randn(*shape)
        with torch.no_grad():
            want = copy.deepcopy(model).eval()(x)["out"]
        assert_close(loaded.run_inference(x)[0], want, rtol=1e-4, atol=1e-4)
    x = torch.randn(*step_shape)
    eager = copy.deepcopy(model).train()
    out = eager(x)["out"]
    g = torch.randn_like(out)
    out.backward(g)
    step = loaded.train_step(x, grad_outputs=[g])
    assert_close(step.outputs[0], out.detach(), rtol=1e-4, atol=1e-4)
    # Hold pt2rt to eager float32's own accuracy, measured against float64 where they differ:
    # training-mode BatchNorm over 2x2 maps in the last blocks is ill-conditioned (some
    # gradients are rounding noise around 0), and the capture's generic kernels (no oneDNN)
    # round differently from eager's.
    ref64 = None
    for n, p in eager.named_parameters():
        got = step.grads[n]
        if torch.allclose(got, p.grad, rtol=1e-3, atol=1e-4):
            continue
        if ref64 is None:
            e64 = copy.deepcopy(model).double().train()
            e64(x.double())["out"].backward(g.double())
            ref64 = {k: q.grad for k, q in e64.named_parameters()}
        ours = (got.double() - ref64[n]).abs().max()
        eagers = (p.grad.double() - ref64[n]).abs().max()
        assert ours <= 3 * eagers + 1e-6, (f"{n}: max error vs float64 {ours:.3g}, eager "
                                           f"float32's {eagers:.3g}")
