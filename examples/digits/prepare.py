"""Writes the digits data set as torch.save files: a fixed, stratified train/test split.

Source: `sklearn.datasets.load_digits` (1,797 8x8 images of handwritten digits, pixel
values 0..16), shipped with Debian's python3-sklearn, so nothing is downloaded.

Usage: /usr/bin/python3 examples/digits/prepare.py DATA_DIR

Writes into DATA_DIR:
    train.pt   (inputs float32 [1347, 1, 8, 8], targets int64 [1347])
    test.pt    (inputs float32 [450, 1, 8, 8],  targets int64 [450])
    sample.pt  (inputs,) — the first BATCH_SIZE test images, as a tuple for `export-cli run`
    sample_labels.pt  int64 [BATCH_SIZE], their true labels
    test_inputs.pt  (inputs,) — all 450 test images, for one `export-cli run` call
    test_labels.pt  int64 [450], their true labels
Inputs are normalised with the training set's pixel mean and standard deviation.
"""
import argparse
import os
import sys

import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import BATCH_SIZE  # noqa: E402

TEST_FRACTION = 0.25
SPLIT_SEED = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", help="directory to write train.pt, test.pt, sample.pt into")
    args = parser.parse_args()

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1)  # [N, 1, 8, 8]
    labels = torch.tensor(digits.target, dtype=torch.int64)
    idx_train, idx_test = train_test_split(
        list(range(len(labels))), test_size=TEST_FRACTION, random_state=SPLIT_SEED,
        stratify=digits.target)
    idx_train, idx_test = torch.tensor(idx_train), torch.tensor(idx_test)

    x_train, y_train = images[idx_train], labels[idx_train]
    x_test, y_test = images[idx_test], labels[idx_test]
    mean, std = x_train.mean(), x_train.std()
    x_train = ((x_train - mean) / std).contiguous()
    x_test = ((x_test - mean) / std).contiguous()

    os.makedirs(args.data_dir, exist_ok=True)
    torch.save((x_train, y_train), os.path.join(args.data_dir, "train.pt"))
    torch.save((x_test, y_test), os.path.join(args.data_dir, "test.pt"))
    torch.save((x_test[:BATCH_SIZE].clone(),), os.path.join(args.data_dir, "sample.pt"))
    torch.save(y_test[:BATCH_SIZE].clone(), os.path.join(args.data_dir, "sample_labels.pt"))
    torch.save((x_test,), os.path.join(args.data_dir, "test_inputs.pt"))
    torch.save(y_test, os.path.join(args.data_dir, "test_labels.pt"))
    print(f"digits: {len(y_train)} train / {len(y_test)} test images (8x8, normalised: "
          f"mean {mean:.3f}, std {std:.3f}) -> {args.data_dir}")


if __name__ == "__main__":
    main()
