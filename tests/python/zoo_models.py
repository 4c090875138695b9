"""The fidelity zoo (issue 9): tiny models, one construct each, that an exporter easily gets
silently wrong. ``models.py`` adds them to ``MODELS`` (both lanes), so every check of the model
set runs on them: ``test_models.py`` (reference executor vs eager: eval/train outputs,
gradients, buffers, bundled references), the C++ runtime's parity and 10-step SGD trajectory
(``test_parity.cpp``, ``test_training.cpp``) and the cross-version stage.

Each factory seeds ``torch.manual_seed(0)`` and returns ``(model, example_args)``; every model
is a few hundred parameters so the whole zoo adds seconds, not minutes, to CI.
"""
from __future__ import annotations

from typing import Dict, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Recurrent(nn.Module):
    """An ``nn.LSTM``/``nn.GRU``/``nn.RNN`` and a linear head on its output sequence (the RNN
    kernels read ``RNNBase._flat_weights``: the parameters-as-constants trap)."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.rnn = rnn
        width = rnn.hidden_size * (2 if rnn.bidirectional else 1)
        self.head = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(x)[0])


class LstmState(nn.Module):
    """``nn.LSTM`` with an explicit initial state (h0, c0 as inputs); returns the sequence and
    the final states: a tuple output with a nested tuple."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(4, 5, num_layers=2)

    def forward(self, x, h0, c0):
        y, (h, c) = self.rnn(x, (h0, c0))
        return y, (h, c)


class Checkpointed(nn.Module):
    """Two blocks under non-reentrant activation checkpointing (``torch.utils.checkpoint``):
    their recomputation runs during backward."""

    def __init__(self) -> None:
        super().__init__()
        self.block1 = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8))
        self.block2 = nn.Sequential(nn.Linear(8, 8), nn.GELU())
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = checkpoint(self.block1, x, use_reentrant=False)
        h = checkpoint(self.block2, h, use_reentrant=False)
        return self.head(h)


class TiedLM(nn.Module):
    """Embedding whose weight is also the output projection (weight tying); int64 tokens in."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 6)
        self.mix = nn.Linear(6, 6)
        self.out = nn.Linear(6, 11, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.mix(self.embed(tokens))))


class SharedTwice(nn.Module):
    """One submodule called twice (its gradient is the sum of both uses)."""

    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Linear(5, 5)
        self.head = nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(torch.relu(self.block(x))))


class InPlace(nn.Module):
    """In-place ops on activations: ``relu_``, ``mul_``, ``add_``, ``nn.ReLU(inplace=True)``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.act = nn.ReLU(inplace=True)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        h.mul_(2.0).add_(0.5)
        g = self.fc2(self.act(h))
        g.sigmoid_()
        return g


class UserBuffers(nn.Module):
    """Buffers mutated by user code in forward (training only): a step counter and an
    exponential moving average of the batch mean, used in the output."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("ema", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        if self.training:
            self.steps.add_(1)
            self.ema.mul_(0.9).add_(0.1 * y.detach().mean(0))
        return y - self.ema


class DictListOut(nn.Module):
    """A dict output holding a list of tensors and an int64 tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)

    def forward(self, x: torch.Tensor):
        y = self.fc(x)
        a, b = y.split(3, dim=1)
        return {"parts": [a, torch.tanh(b)], "label": y.argmax(1), "norm": y.norm()}


class AliasingOut(nn.Module):
    """Outputs that alias: the input itself, a view of the input, a view of an activation."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor):
        y = self.fc(x)
        return y, y.t(), x, x[:, :2]


class Float64(nn.Module):
    """A double-precision MLP with LayerNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(5, 8), nn.LayerNorm(8), nn.Tanh(), nn.Linear(8, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class LossInForward(nn.Module):
    """Returns the scalar loss (cross entropy against int64 targets) and the logits."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor, target: torch.Tensor):
        logits = self.fc2(torch.relu(self.fc1(x)))
        return F.cross_entropy(logits, target), logits


class LabelSmoothedLoss(nn.Module):
    """Cross entropy with label smoothing, class weights and an ignored class in forward
    (torch 1.13's ATen formula reaches masked_select: traceable_ops.cross_entropy). The ignored
    index is a class index, so random targets in the example's range hit it too."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.loss = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5, 1.5]),
                                        label_smoothing=0.1, ignore_index=1)

    def forward(self, x: torch.Tensor, target: torch.Tensor):
        logits = self.fc(x)
        smoothed = F.cross_entropy(logits, target, label_smoothing=0.2, reduction="sum")
        return self.loss(logits, target), smoothed, logits


class FrozenSubset(nn.Module):
    """Some parameters of one layer frozen (a bias, a whole layer in the middle)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 6)
        self.fc2 = nn.Linear(6, 6)
        self.fc3 = nn.Linear(6, 2)
        self.fc1.bias.requires_grad_(False)
        self.fc2.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class Conv1dPool(nn.Module):
    """Conv1d, BatchNorm1d, adaptive average pooling: a sequence classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm1d(6)
        self.head = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.adaptive_avg_pool1d(torch.relu(self.bn(self.conv(x))), 1).squeeze(-1)
        return self.head(h)


class PreluConv(nn.Module):
    """Conv2d and ``nn.PReLU`` with one slope per channel, a shared-slope ``nn.PReLU`` and a
    linear head (torch 2's ``_prelu_kernel``, which LibTorch 1.13 lacks)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.act = nn.PReLU(4, init=0.2)
        self.fc = nn.Linear(4 * 5 * 5, 3)
        self.act2 = nn.PReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act2(self.fc(self.act(self.conv(x)).flatten(1)))


class LstmCellLoop(nn.Module):
    """``nn.LSTMCell`` unrolled over time in Python (RNNCellBase: weights read directly)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(4, 5)
        self.head = nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = c = x.new_zeros(x.shape[1], 5)
        for t in range(x.shape[0]):
            h, c = self.cell(x[t], (h, c))
        return self.head(h)


class ParamOutput(nn.Module):
    """Returns a parameter itself next to the activations (an output aliasing a parameter)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor):
        return self.fc(x), self.fc.weight


class ComplexLayer(nn.Module):
    """A complex-valued layer: activations viewed as complex, times a complex (cfloat)
    parameter, magnitude out."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.w = nn.Parameter(torch.randn(4, dtype=torch.cfloat))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.view_as_complex(self.fc(x).reshape(-1, 4, 2))
        return (z * self.w).abs()


class Spectral(nn.Module):
    """Linear then the magnitude of a real FFT (complex intermediates)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(self.fc(x)).abs()


class EmbeddingMaxNorm(nn.Module):
    """``nn.Embedding(max_norm=1.0)``: forward renormalises the looked-up rows of its weight in
    place (``embedding_renorm_`` under no grad) — a parameter mutated by forward."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(12, 4, max_norm=1.0)
        self.head = nn.Linear(4, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(tokens).mean(1))


def _seeded(fn):
    def build():
        torch.manual_seed(0)
        return fn()
    build.__name__ = f"build_{fn.__name__}"
    return build


@_seeded
def lstm():
    return Recurrent(nn.LSTM(4, 6, batch_first=True)), (torch.randn(2, 5, 4),)


@_seeded
def lstm_bidir_2layer():
    return Recurrent(nn.LSTM(4, 5, num_layers=2, bidirectional=True)), (torch.randn(5, 2, 4),)


@_seeded
def lstm_state():
    return LstmState(), (torch.randn(4, 2, 4), torch.randn(2, 2, 5), torch.randn(2, 2, 5))


@_seeded
def gru():
    return Recurrent(nn.GRU(4, 5, num_layers=2, batch_first=True)), (torch.randn(2, 5, 4),)


@_seeded
def gru_bidir():
    return Recurrent(nn.GRU(4, 5, bidirectional=True)), (torch.randn(5, 2, 4),)


@_seeded
def rnn_relu():
    return Recurrent(nn.RNN(4, 5, nonlinearity="relu", batch_first=True)), (torch.randn(2, 5, 4),)


@_seeded
def checkpointed():
    return Checkpointed(), (torch.randn(4, 6),)


@_seeded
def tied_lm():
    return TiedLM(), (torch.tensor([[1, 5, 10, 2], [0, 3, 3, 7]]),)


@_seeded
def shared_twice():
    return SharedTwice(), (torch.randn(4, 5),)


@_seeded
def in_place():
    return InPlace(), (torch.randn(4, 6),)


@_seeded
def user_buffers():
    return UserBuffers(), (torch.randn(4, 4),)


@_seeded
def dict_list_out():
    return DictListOut(), (torch.randn(4, 4),)


@_seeded
def aliasing_out():
    return AliasingOut(), (torch.randn(3, 4),)


@_seeded
def float64():
    return Float64().double(), (torch.randn(4, 5, dtype=torch.float64),)


@_seeded
def loss_in_forward():
    return LossInForward(), (torch.randn(4, 6), torch.tensor([0, 3, 1, 1]))


@_seeded
def label_smoothed_loss():
    return LabelSmoothedLoss(), (torch.randn(5, 6), torch.tensor([0, 3, 1, 1, 2]))


@_seeded
def frozen_subset():
    return FrozenSubset(), (torch.randn(4, 4),)


@_seeded
def conv1d_pool():
    return Conv1dPool(), (torch.randn(4, 3, 7),)


@_seeded
def lstm_cell():
    return LstmCellLoop(), (torch.randn(3, 2, 4),)


@_seeded
def param_output():
    return ParamOutput(), (torch.randn(2, 4),)


@_seeded
def complex_layer():
    return ComplexLayer(), (torch.randn(3, 4),)


@_seeded
def spectral():
    return Spectral(), (torch.randn(2, 8),)


@_seeded
def prelu_conv():
    return PreluConv(), (torch.randn(2, 2, 5, 5),)


@_seeded
def embedding_max_norm():
    return EmbeddingMaxNorm(), (torch.tensor([[1, 5, 10, 2], [0, 3, 3, 7]]),)


ZOO = {f.__name__[len("build_"):]: f for f in (
    lstm, lstm_bidir_2layer, lstm_state, gru, gru_bidir, rnn_relu, checkpointed, tied_lm,
    shared_twice, in_place, user_buffers, dict_list_out, aliasing_out, float64,
    loss_in_forward, label_smoothed_loss, frozen_subset, conv1d_pool, lstm_cell, param_output, complex_layer,
    spectral, embedding_max_norm, prelu_conv)}
