"""The digits CNN: a small conv net for 8x8 grey-scale digit images (sklearn's load_digits).

Architecture (input float32 [N, 1, 8, 8], output float32 logits [N, 10]):
    conv3x3(1->16) - BatchNorm2d - ReLU - MaxPool2d(2)     -> [N, 16, 4, 4]
    conv3x3(16->32) - BatchNorm2d - ReLU - MaxPool2d(2)    -> [N, 32, 2, 2]
    flatten - Linear(128 -> 10)                             -> [N, 10]

`build()` is the entry point for `export-cli save examples/digits/model.py:build out.pt2`:
it returns `(model, example_args)` with an example batch of BATCH_SIZE images. Exported with
static shapes every call of the archive takes exactly BATCH_SIZE images; pretrain.py exports
it with a dynamic batch (`pt2rt.Dim("batch", min=1, max=MAX_BATCH)`; on the command line
`export-cli save examples/digits/model.py:build out.pt2 --dynamic x:0=batch[1,1024]`).
"""
from typing import Tuple

import torch
from torch import nn

#: Images in the example batch (and the default training batch).
BATCH_SIZE = 32
#: Largest batch of the dynamic-batch archive pretrain.py exports.
# Up to 1024 images per call. With the default run bounds (LoadOptions::run: 32 MiB of tensors
# for an archive of this size) inference calls run up to 768 images and training steps up to
# 512 — the 450 test images in one call; a larger call is refused with pt2rt::InputError
# before it runs, naming the flag that raises the bound (export-cli --max-run-bytes).
MAX_BATCH = 1024
NUM_CLASSES = 10


class DigitsCNN(nn.Module):
    """conv-BN-ReLU-pool x2, then a linear layer to NUM_CLASSES logits."""

    def __init__(self, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(32 * 2 * 2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: float32 [N, 1, 8, 8] (normalised pixels) -> float32 logits [N, NUM_CLASSES]."""
        return self.classifier(torch.flatten(self.features(x), 1))


def build(seed: int = 0) -> Tuple[nn.Module, Tuple[torch.Tensor]]:
    """A freshly initialised DigitsCNN and an example batch float32 [BATCH_SIZE, 1, 8, 8]."""
    torch.manual_seed(seed)
    model = DigitsCNN()
    return model, (torch.randn(BATCH_SIZE, 1, 8, 8),)
