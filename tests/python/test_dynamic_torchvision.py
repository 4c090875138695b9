"""torchvision's classification models with a dynamic batch, on both lanes (issue 24 item 6).

One model per architecture family of ``torchvision.models`` (the families' variants share their
ops; the segmentation heads are ``test_dynamic_segmentation.py``), exported for inference with
``Dim("batch", 1, 4)`` at batch 2 on small images, read back with ``pt2rt.load`` and compared
with eager PyTorch at both ends of the range. Three families are built narrow so the sweep fits
a CI run (the same classes and ops, fewer channels or layers): VGG and AlexNet with a small
classifier (theirs is 100M+ parameters of ``Linear``), the ViT with 2 layers of width 32, the
MaxViT with 2 blocks and windows of 2x2 (its 7x7 windows need 224^2 images). A family the
installed torchvision lacks is skipped by name."""
import copy

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import pt2rt

torchvision = pytest.importorskip("torchvision")
tvm = torchvision.models


def _small_classifier(model: nn.Module, features: int) -> nn.Module:
    model.classifier = nn.Sequential(nn.Dropout(), nn.Linear(features, 64), nn.ReLU(inplace=True),
                                     nn.Dropout(), nn.Linear(64, 10))
    return model


def _narrow_maxvit() -> nn.Module:
    # MaxViT partitions its feature maps into windows and grids of partition_size^2: 7 at 224^2
    from torchvision.models.maxvit import MaxVit
    return MaxVit(input_size=(64, 64), stem_channels=16, partition_size=2, block_channels=[16, 32],
                  block_layers=[1, 1], head_dim=8, stochastic_depth_prob=0.0, num_classes=10)


def _narrow_vit() -> nn.Module:
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                             hidden_dim=32, mlp_dim=64, num_classes=10)


# name -> (builder, image size)
FAMILIES = {
    "alexnet": (lambda: _small_classifier(tvm.alexnet(num_classes=10), 256 * 6 * 6), 64),
    "convnext_tiny": (lambda: tvm.convnext_tiny(num_classes=10), 32),
    "densenet121": (lambda: tvm.densenet121(num_classes=10), 32),
    "efficientnet_b0": (lambda: tvm.efficientnet_b0(num_classes=10), 32),
    "efficientnet_v2_s": (lambda: tvm.efficientnet_v2_s(num_classes=10), 32),
    "googlenet": (lambda: tvm.googlenet(num_classes=10, aux_logits=False, init_weights=True), 32),
    "inception_v3": (lambda: tvm.inception_v3(num_classes=10, aux_logits=False,
                                              init_weights=True), 75),
    "maxvit": (_narrow_maxvit, 64),
    "mnasnet0_5": (lambda: tvm.mnasnet0_5(num_classes=10), 32),
    "mobilenet_v2": (lambda: tvm.mobilenet_v2(num_classes=10), 32),
    "mobilenet_v3_small": (lambda: tvm.mobilenet_v3_small(num_classes=10), 32),
    "regnet_y_400mf": (lambda: tvm.regnet_y_400mf(num_classes=10), 32),
    "resnext50_32x4d": (lambda: tvm.resnext50_32x4d(num_classes=10), 32),
    "shufflenet_v2_x0_5": (lambda: tvm.shufflenet_v2_x0_5(num_classes=10), 32),
    "squeezenet1_1": (lambda: tvm.squeezenet1_1(num_classes=10), 32),
    "swin_t": (lambda: tvm.swin_t(num_classes=10), 32),
    "swin_v2_t": (lambda: tvm.swin_v2_t(num_classes=10), 32),
    "vgg11_bn": (lambda: _small_classifier(tvm.vgg11_bn(num_classes=10), 512 * 7 * 7), 32),
    "vit": (_narrow_vit, 32),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_dynamic_batch_matches_eager_at_both_ends(name, tmp_path):
    builder, size = FAMILIES[name]
    torch.manual_seed(0)
    try:
        model = builder().eval()
    except (AttributeError, ImportError) as e:  # missing from this torchvision
        pytest.skip(f"torchvision {torchvision.__version__} has no {name}: {e}")
    path = tmp_path / f"{name}.pt2"
    pt2rt.export(model, (torch.randn(2, 3, size, size),), train=False,
                 dynamic_shapes=({0: pt2rt.Dim("batch", min=1, max=4)},)).save(str(path))
    loaded = pt2rt.load(str(path))
    for batch in (1, 4):
        x = torch.randn(batch, 3, size, size)
        with torch.no_grad():
            want = copy.deepcopy(model)(x)
        assert_close(loaded.run_inference(x)[0], want, rtol=1e-4, atol=1e-4)
