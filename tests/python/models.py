"""The model set shared by the pytest suite and the C++ tests' fixture generators.

Each factory ``build_<name>() -> (model, example_args)`` seeds ``torch.manual_seed(0)`` first,
so repeated calls give identical weights and inputs. ``example_args`` is a tuple of tensors.
Models are returned in training mode; randomness that eager and an exported graph could not
share (Dropout) is disabled with ``p=0``.

``MODELS`` maps each name to its factory: the set both capture lanes export (torch 1.13 and
torch 2.x). ``TORCH2_MODELS``: constructs torch 1.13's capture refuses and the torch 2.x capture
exports (tests/python/test_torch2_constructs.py checks both); empty since the 1.13 capture
exports one_hot and bn_momentum_none too. ``lane_models()`` is what the
running torch exports; ``build(name)`` builds any of them.

Names: mlp, cnn_bn, resnet18, mobilenet_v2, frozen, two_io, attention, upsample,
autograd_function, one_hot, bn_momentum_none, and the
fidelity zoo (``zoo_models.ZOO``: recurrent nets, checkpointing, tied weights, ...).
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import torch
import torch.nn as nn

from zoo_models import ZOO

Factory = Callable[[], Tuple[nn.Module, Tuple[torch.Tensor, ...]]]


class MLP(nn.Module):
    """Linear-ReLU-Linear-ReLU-Linear; input float32[4, 16] -> float32[4, 10]."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class CnnBn(nn.Module):
    """Conv-BN-ReLU-MaxPool x2, Dropout(p=0), Linear; input float32[4, 1, 16, 16] -> [4, 10]."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
        self.dropout = nn.Dropout(p=0.0)
        self.classifier = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.classifier(self.dropout(torch.flatten(x, 1)))


class Frozen(nn.Module):
    """A frozen backbone (Conv-BN, requires_grad=False; BN still updates its running stats in
    training) with a trainable adapter and head; input float32[4, 3, 8, 8] -> [4, 5]."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                                      nn.ReLU())
        self.adapter = nn.Linear(8, 8)
        self.head = nn.Linear(8, 5)
        self.backbone.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.backbone(x).mean(dim=(2, 3))
        return self.head(f + self.adapter(f))


class TwoIO(nn.Module):
    """Two inputs, two outputs: float32 logits [4, 6] and their int64 argmax [4]."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 6)
        self.b = nn.Linear(3, 6)

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        logits = self.a(x) * torch.sigmoid(self.b(y))
        return logits, logits.argmax(dim=-1)


class Attention(nn.Module):
    """A transformer encoder layer (self-attention, feed-forward, LayerNorm; dropout 0) and a
    linear head; input float32[2, 5, 16] -> [2, 5, 4]. torch >= 2.5 captures its attention as
    one ``pt2rt::scaled_dot_product_attention`` node, torch 1.13 as bmm + softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


class Upsample(nn.Module):
    """Conv-ReLU, nearest 2x upsampling (F.interpolate), Conv; input float32[2, 3, 6, 6] ->
    [2, 2, 12, 12]. torch 2.x traces the upsampling to ``_unsafe_index`` (exported as the
    bounds-checked ``index.Tensor``), torch 1.13 to ``upsample_nearest2d``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv1(x))
        return self.conv2(nn.functional.interpolate(y, scale_factor=2, mode="nearest"))


class _ScaledReLU(torch.autograd.Function):
    """A user autograd.Function: 2 * relu(x) with a hand-written backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0) * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * (x > 0)


class AutogradFunction(nn.Module):
    """Linear, then a user torch.autograd.Function; input float32[4, 8] -> [4, 8]."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ScaledReLU.apply(self.fc(x))


class OneHot(nn.Module):
    """Features plus one-hot class embedding (F.one_hot(y, 5)): x float32[4, 6], y int64[4]
    -> [4, 3]."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6 + 5, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.cat([x, nn.functional.one_hot(y, 5).to(x.dtype)], dim=1))


class BnMomentumNone(nn.Module):
    """Linear then BatchNorm1d(momentum=None) (cumulative moving average of the batch
    statistics); input float32[4, 6] -> [4, 6]."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.bn = nn.BatchNorm1d(6, momentum=None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


def build_mlp():
    torch.manual_seed(0)
    return MLP(), (torch.randn(4, 16),)


def build_cnn_bn():
    torch.manual_seed(0)
    return CnnBn(), (torch.randn(4, 1, 16, 16),)


def build_resnet18():
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10), (torch.randn(2, 3, 32, 32),)


def build_mobilenet_v2():
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(num_classes=10)
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    # 64x64: the last feature maps are 2x2, so each BatchNorm of the last blocks normalises
    # over 8 values per channel; at 32x32 (1x1 maps, 2 values) the statistics are so ill
    # conditioned that CUDA's and the CPU's roundings of the same math differ past any
    # tolerance.
    return model, (torch.randn(2, 3, 64, 64),)


def build_convnext():
    """torchvision's ConvNeXt (convnext_tiny's blocks: 7×7 depthwise convolution, LayerNorm2d,
    permutes, layer scale) at three narrow stages: the depthwise backward's oneDNN weight
    reorder is what the runtime's allocation cap must foresee (issue 24)."""
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    torch.manual_seed(0)
    model = ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 1),
                      CNBlockConfig(64, None, 1)], stochastic_depth_prob=0.0, num_classes=10)
    # torchvision initialises with trunc_normal_, whose draws differ between torch 1.13 and 2.x;
    # both lanes must build the same weights (tests/cross compares their archives): normal
    # draws from the seed, scaled by fan-in; LayerNorm weights around 1.
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_scale" in name:
                p.copy_(0.1 * torch.randn(p.shape))
            elif p.dim() > 1:
                p.copy_(torch.randn(p.shape) / (p[0].numel() ** 0.5))
            elif name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape))
            else:
                p.copy_(0.1 * torch.randn(p.shape))
    return model, (torch.randn(2, 3, 32, 32),)


def build_frozen():
    torch.manual_seed(0)
    return Frozen(), (torch.randn(4, 3, 8, 8),)


def build_two_io():
    torch.manual_seed(0)
    return TwoIO(), (torch.randn(4, 8), torch.randn(4, 3))


def build_attention():
    torch.manual_seed(0)
    return Attention(), (torch.randn(2, 5, 16),)


def build_upsample():
    torch.manual_seed(0)
    return Upsample(), (torch.randn(2, 3, 6, 6),)


def build_autograd_function():
    torch.manual_seed(0)
    return AutogradFunction(), (torch.randn(4, 8),)


def build_one_hot():
    torch.manual_seed(0)
    return OneHot(), (torch.randn(4, 6), torch.tensor([0, 4, 2, 2]))


def build_bn_momentum_none():
    torch.manual_seed(0)
    model = BnMomentumNone()
    model.bn.num_batches_tracked.fill_(3)  # as after 3 steps: the factor is 1/4 next
    return model, (torch.randn(4, 6),)


MODELS: Dict[str, Factory] = {
    "mlp": build_mlp,
    "cnn_bn": build_cnn_bn,
    "resnet18": build_resnet18,
    "mobilenet_v2": build_mobilenet_v2,
    "convnext": build_convnext,
    "frozen": build_frozen,
    "two_io": build_two_io,
    "attention": build_attention,
    "upsample": build_upsample,
    "autograd_function": build_autograd_function,
    "one_hot": build_one_hot,
    "bn_momentum_none": build_bn_momentum_none,
    **ZOO,
}

TORCH2_MODELS: Dict[str, Factory] = {}


def lane_models() -> Dict[str, Factory]:
    """The models the running torch's capture exports: MODELS, plus TORCH2_MODELS on torch 2."""
    if int(torch.__version__.split(".")[0]) >= 2:
        return {**MODELS, **TORCH2_MODELS}
    return dict(MODELS)


def build(name: str):
    """``MODELS[name]()``; KeyError names the known models."""
    factories = {**MODELS, **TORCH2_MODELS}
    try:
        return factories[name]()
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(factories)}") from None
