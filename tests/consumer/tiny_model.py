"""A tiny MLP for the downstream-CMake test, exported with the installed export-cli save."""
import torch
from torch import nn


def build():
    """(model, example_args): Linear(8, 16) - ReLU - Linear(16, 4) on float32[4, 8]."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    return model, (torch.randn(4, 8),)
