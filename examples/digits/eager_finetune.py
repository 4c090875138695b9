"""The fine-tuning of run_demo.sh's step 6, in eager PyTorch: the reference for the C++ run.

`export-cli train digits.pt2 --data train.pt --eval-data test.pt --epochs 5 --batch-size 32
--optimizer adam --lr 0.001 --seed 0` starts from the archive's weights, shuffles each epoch
with torch.randperm from one torch.Generator seeded once, trains on every batch of 32 (the
last, partial one too: the archive has a dynamic batch), and evaluates in eval mode after
each epoch. This script does the same in Python, from the same archive.

Usage: /usr/bin/python3 examples/digits/eager_finetune.py DATA_DIR digits.pt2 [--epochs N]
Prints, per epoch, the training loss (the mean over the epoch's steps, as export-cli train
reports it) and the test accuracy (fraction of the
450 test images whose argmax logit is the label), then `final: eval_accuracy A`.
"""
import argparse
import os
import sys
from typing import List, Tuple

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model import build  # noqa: E402
from pretrain import accuracy, train_epoch  # noqa: E402

try:
    import pt2rt
except ImportError:  # running from a source checkout: use the exporter next to us
    sys.path.insert(0, os.path.join(HERE, "..", "..", "exporter"))
    import pt2rt


def finetune(archive: str, data_dir: str, epochs: int = 5, lr: float = 1e-3,
             seed: int = 0) -> Tuple[nn.Module, List[float], List[float]]:
    """The DigitsCNN with `archive`'s weights (parameters and BatchNorm buffers), fine-tuned
    as export-cli train does; returns (model, per-epoch mean step loss, per-epoch test
    accuracy)."""
    x, y = torch.load(os.path.join(data_dir, "train.pt"))
    x_test, y_test = torch.load(os.path.join(data_dir, "test.pt"))
    model, _ = build(seed)
    weights = pt2rt.load(archive).weights
    model.load_state_dict({name: weights[name] for name in model.state_dict()})
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    losses, accuracies = [], []
    for _ in range(epochs):
        steps = train_epoch(model, opt, x, y, gen)
        losses.append(sum(loss for loss, _ in steps) / len(steps))
        accuracies.append(accuracy(model, x_test, y_test))
    return model, losses, accuracies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir")
    parser.add_argument("archive", help="the pretrained archive, e.g. digits.pt2")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    _, losses, accuracies = finetune(args.archive, args.data_dir, args.epochs)
    for epoch, (loss, acc) in enumerate(zip(losses, accuracies)):
        print(f"epoch {epoch + 1}/{args.epochs}  loss {loss:.4f}  eval_accuracy {acc:.4f}")
    print(f"final: eval_accuracy {accuracies[-1]:.4f}")


if __name__ == "__main__":
    main()
