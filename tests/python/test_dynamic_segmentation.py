"""torchvision's segmentation heads with a dynamic batch on both lanes (issue 24 item 6):
lraspp_mobilenet_v3_large and deeplabv3_mobilenet_v3_large (F.interpolate's
upsample_bilinear2d.vec, the ASPP concatenation) export with Dim("batch", 1, 4) and match eager
at both ends of the range (eval outputs) and in a training step (outputs and gradients)."""
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


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_dynamic_batch_matches_eager_at_both_ends(name, tmp_path):
    torch.manual_seed(0)
    model = BUILDERS[name]()
    for m in model.modules():  # the training step is compared exactly: no dropout draws
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    path = tmp_path / f"{name}.pt2"
    pt2rt.export(model, (torch.randn(2, 3, 64, 64),),
                 dynamic_shapes=({0: pt2rt.Dim("batch", min=1, max=4)},)).save(str(path))
    loaded = pt2rt.load(str(path))
    for batch in (1, 4):
        x = torch.randn(batch, 3, 64, 64)
        with torch.no_grad():
            want = copy.deepcopy(model).eval()(x)["out"]
        assert_close(loaded.run_inference(x)[0], want, rtol=1e-4, atol=1e-4)
    x = torch.randn(4, 3, 64, 64)
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
