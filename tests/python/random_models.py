"""Models whose training graphs draw random numbers (not in ``models.MODELS``: their eager
references only match a run that seeds the generator like the exporter did, which
``export-cli verify`` does and the fixed-reference parity tests do not).

``build_dropout() -> (model, example_args)``: Linear-ReLU-Dropout(0.5)-BatchNorm1d-Linear on
float32[6, 8] -> [6, 3]; the BatchNorm statistics depend on the dropout mask too. Also a
``python -m pt2rt save tests/python/random_models.py:build_dropout`` target (tests/cross).
"""
from __future__ import annotations

import torch
import torch.nn as nn


class DropoutNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.drop = nn.Dropout(0.5)
        self.bn = nn.BatchNorm1d(16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.bn(self.drop(torch.relu(self.fc1(x)))))


def build_dropout():
    torch.manual_seed(0)
    return DropoutNet(), (torch.randn(6, 8),)
