"""The model set shared by the pytest suite and the C++ tests' fixture generators.

Each factory ``build_<name>() -> (model, example_args)`` seeds ``torch.manual_seed(0)`` first,
so repeated calls give identical weights and inputs. ``example_args`` is a tuple of tensors.
Models are returned in training mode; randomness that eager and an exported graph could not
share (Dropout) is disabled with ``p=0``.

``MODELS`` maps each name to its factory; ``build(name)`` builds one.

Names: mlp, cnn_bn, resnet18, mobilenet_v2, frozen, two_io.
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import torch
import torch.nn as nn

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
    return model, (torch.randn(2, 3, 32, 32),)


def build_frozen():
    torch.manual_seed(0)
    return Frozen(), (torch.randn(4, 3, 8, 8),)


def build_two_io():
    torch.manual_seed(0)
    return TwoIO(), (torch.randn(4, 8), torch.randn(4, 3))


MODELS: Dict[str, Factory] = {
    "mlp": build_mlp,
    "cnn_bn": build_cnn_bn,
    "resnet18": build_resnet18,
    "mobilenet_v2": build_mobilenet_v2,
    "frozen": build_frozen,
    "two_io": build_two_io,
}


def build(name: str):
    """``MODELS[name]()``; KeyError names the known models."""
    try:
        return MODELS[name]()
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None
