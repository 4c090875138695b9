"""Exports the archive pairs of pt2rt_bench_dynamic (both lanes): each model once with static
shapes and once with a dynamic batch (Dim("batch", 1, 64); example batch max(b, 2)), to be
timed at the same batch b: MLP batch 1 and resnet18 batch 8.

    /usr/bin/python3 bench/export_dynamic_pair.py OUT_DIR
    build/bench/pt2rt_bench_dynamic OUT_DIR/mlp_b1_static.pt2 OUT_DIR/mlp_b1_dynamic.pt2
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "exporter"), os.path.join(HERE, "..", "tests", "python")]
import models  # noqa: E402
import pt2rt  # noqa: E402


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    batch = pt2rt.Dim("batch", min=1, max=64)
    for name, b in (("mlp", 1), ("resnet18", 8)):
        model, args = models.build(name)
        x = torch.randn(b, *args[0].shape[1:])
        pt2rt.export(model, (x,)).save(os.path.join(out, f"{name}_b{b}_static.pt2"))
        # a dynamic dim's example size must be >= 2 (0/1 specialisation); run at b anyway
        hint = torch.randn(max(b, 2), *args[0].shape[1:])
        pt2rt.export(model, (hint,), dynamic_shapes=({0: batch},)).save(
            os.path.join(out, f"{name}_b{b}_dynamic.pt2"))
        print(f"wrote {name}_b{b}_static.pt2, {name}_b{b}_dynamic.pt2")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench_dynamic")
