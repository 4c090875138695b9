"""Pretrains the digits CNN in Python on digits 0-6 only, then exports it with pt2rt.

This is the "deployed" model: it has never seen a 7, 8 or 9, so its accuracy on all ten
digits stays near 0.7 however well it learned the others. The C++ side (export-cli train,
finetune.cpp) later teaches it the missing digits without Python.

Usage: /usr/bin/python3 examples/digits/pretrain.py DATA_DIR OUT.pt2 [--epochs N] [--seed S]
Reads DATA_DIR/train.pt and DATA_DIR/test.pt (see prepare.py); writes OUT.pt2 with the
training and inference graphs (dynamic batch: any size in [1, MAX_BATCH]) and, as bundled
example, the first BATCH_SIZE training images.
"""
import argparse
import os
import sys
import time
from typing import List, Tuple

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model import BATCH_SIZE, MAX_BATCH, build  # noqa: E402

try:
    import pt2rt
except ImportError:  # running from a source checkout: use the exporter next to us
    sys.path.insert(0, os.path.join(HERE, "..", "..", "exporter"))
    import pt2rt

KNOWN_DIGITS = 7  # the deployed model learns digits 0..6


def train_epoch(model: nn.Module, opt: torch.optim.Optimizer, inputs: torch.Tensor,
                targets: torch.Tensor, gen: torch.Generator) -> List[Tuple[float, int]]:
    """One epoch in training mode: a torch.randperm shuffle from `gen`, then a cross-entropy
    step on every batch of BATCH_SIZE (the last one partial). Returns (loss, images) per step."""
    model.train()
    perm = torch.randperm(len(targets), generator=gen)
    steps = []
    for i in range(0, len(perm), BATCH_SIZE):
        batch = perm[i:i + BATCH_SIZE]
        loss = nn.functional.cross_entropy(model(inputs[batch]), targets[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps.append((loss.item(), len(batch)))
    return steps


@torch.no_grad()
def accuracy(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Fraction of `inputs` [N, 1, 8, 8] whose argmax logit equals `targets` [N] (eval mode)."""
    model.eval()
    return (model(inputs).argmax(1) == targets).float().mean().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir")
    parser.add_argument("out", help="archive to write, e.g. digits.pt2")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    x_train, y_train = torch.load(os.path.join(args.data_dir, "train.pt"))
    x_test, y_test = torch.load(os.path.join(args.data_dir, "test.pt"))
    known = y_train < KNOWN_DIGITS
    x_known, y_known = x_train[known], y_train[known]

    model, _ = build(args.seed)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    start = time.time()
    for epoch in range(args.epochs):
        steps = train_epoch(model, opt, x_known, y_known, gen)
        per_image = sum(loss * n for loss, n in steps) / sum(n for _, n in steps)
        print(f"pretrain epoch {epoch + 1}/{args.epochs}  loss {per_image:.4f}")
    print(f"pretrained on digits 0-{KNOWN_DIGITS - 1} ({len(y_known)} images) "
          f"in {time.time() - start:.1f} s")

    seen = y_test < KNOWN_DIGITS
    known_acc = accuracy(model, x_test[seen], y_test[seen])
    print(f"test accuracy, digits 0-{KNOWN_DIGITS - 1}: {known_acc:.4f}")
    print(f"test accuracy, all ten digits: {accuracy(model, x_test, y_test):.4f}")

    # Export in training mode: forward + backward graphs for fine-tuning in C++, and the
    # eval-mode inference graph. The example batch is bundled for `export-cli verify`.
    model.train()
    start = time.time()
    # The batch dim is dynamic (any size in [1, MAX_BATCH]): C++ trains on every batch of an
    # epoch, the last partial one included, and evaluates a whole split in one call.
    pt2rt.export(model, (x_train[:BATCH_SIZE].clone(),),
                 dynamic_shapes={"x": {0: pt2rt.Dim("batch", min=1, max=MAX_BATCH)}}
                 ).save(args.out)
    print(f"exported {args.out} ({os.path.getsize(args.out) / 1024:.0f} KiB) "
          f"in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
