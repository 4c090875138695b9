"""Prints predicted vs true labels for digits run through `export-cli run`.

Usage: /usr/bin/python3 examples/digits/show_predictions.py PRED.pt LABELS.pt [IMAGES.pt] [-n N]
PRED.pt: the list written by `export-cli run --outputs` (logits float32 [B, 10] first);
LABELS.pt: int64 [B]; IMAGES.pt: the `(inputs,)` given to run, to draw the first few digits.
"""
import argparse

import torch

SHADES = " .:-=+*#%@"


def ascii_digit(image: torch.Tensor) -> list:
    """8x8 normalised image -> 8 strings of 16 characters (darker = more ink)."""
    x = image.reshape(8, 8)
    x = (x - x.min()) / max(float(x.max() - x.min()), 1e-6)
    return ["".join(SHADES[min(int(v * len(SHADES)), len(SHADES) - 1)] * 2 for v in row)
            for row in x.tolist()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pred")
    parser.add_argument("labels")
    parser.add_argument("images", nargs="?")
    parser.add_argument("-n", type=int, default=12, help="how many digits to list")
    args = parser.parse_args()

    logits = torch.load(args.pred)[0]
    labels = torch.load(args.labels)
    pred = logits.argmax(1)
    n = min(args.n, len(labels))
    if args.images:
        images = torch.load(args.images)[0]
        drawn = [ascii_digit(images[i]) for i in range(min(4, n))]
        for row in range(8):
            print("    " + "   ".join(d[row] for d in drawn))
        print("    " + "   ".join(f"true {int(labels[i])} pred {int(pred[i])}".ljust(16)
                                  for i in range(len(drawn))))
        print()
    print("    true:      " + " ".join(str(int(v)) for v in labels[:n]))
    print("    predicted: " + " ".join(str(int(v)) for v in pred[:n]))
    right = int((pred == labels).sum())
    print(f"    {right} of {len(labels)} right in this batch")


if __name__ == "__main__":
    main()
