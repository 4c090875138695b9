"""Archive sizes with bundled references: none, gradient sketches (the default), full gradients.

    PYTHONPATH=exporter /usr/bin/python3 bench/archive_sizes.py [--model resnet18] [--batch 8]
        [--size 64] [--out DIR]

Exports torchvision's ``<model>`` (random weights, float32, [batch, 3, size, size]) three
times — ``bundle_examples=False``, the default (sketched gradient references,
``grad_sketch.py``) and ``full_references=True`` — and prints each archive's size and what the
bundled examples add, in bytes and as a share of the weights' bytes. Also times the
exporter's sketching (the eager references are computed once per export either way).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "exporter"))
import pt2rt  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--out", default=None, help="directory for the archives (default: temp)")
    ns = ap.parse_args()
    import torchvision
    torch.manual_seed(0)
    model = getattr(torchvision.models, ns.model)()
    args = (torch.randn(ns.batch, 3, ns.size, ns.size),)
    out = ns.out or tempfile.mkdtemp(prefix="pt2rt-sizes-")
    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    forms = {"no examples": dict(bundle_examples=False), "sketched (default)": {},
             "full references": dict(full_references=True)}
    sizes = {}
    for form, kw in forms.items():
        path = os.path.join(out, f"{ns.model}_{form.split()[0]}.pt2")
        t0 = time.perf_counter()
        pt2rt.export(model, args, **kw).save(path)
        sizes[form] = os.path.getsize(path)
        print(f"{form:20s} {sizes[form]:>12,d} B  ({sizes[form] / 1e6:7.1f} MB)  "
              f"export+save {time.perf_counter() - t0:5.1f} s  {path}")
    base = sizes["no examples"]
    print(f"weights (state_dict)  {weights:>12,d} B  ({weights / 1e6:7.1f} MB)")
    for form in ("sketched (default)", "full references"):
        grow = sizes[form] - base
        print(f"bundled examples, {form}: +{grow:,d} B = {100 * grow / weights:.2f} % of the "
              f"weights")
    return 0


if __name__ == "__main__":
    sys.exit(main())
