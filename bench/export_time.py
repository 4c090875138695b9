"""Export time alone: ``pt2rt.export(...).save()`` ÷ (``torch.jit.trace`` + ``torch.jit.save``),
measured as ``pt2rt_bench`` measures its export column (``bench_models.prepare``: the same
model copies, the default export — train + inference graphs, bundled examples — against the
eval-mode trace + save, on this thread's CPU time, 1 intra-op thread), without the C++ program
(so it runs on any lane, e.g. inside the torch-2 root). Not a test: it prints figures.

    PYTHONPATH=exporter /usr/bin/python3 bench/export_time.py                  # resnet18 1x and 8x
    PYTHONPATH=exporter /usr/bin/python3 bench/export_time.py --models mlp_b32 --rounds 5
    scripts/torch2-root.sh run python3 bench/export_time.py                    # lane 2

Each round exports every model once, then traces and saves it once (interleaved). Round 0 is
the first export in the process (one-time costs, e.g. the gradient-sketch signs of the largest
gradient, included), as ``pt2rt_bench --models <one model>`` measures it; the later rounds'
minimum is what an export costs once those are paid, as the later models of a full
``pt2rt_bench`` run see it.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_models  # noqa: E402  (puts ../exporter on sys.path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18_b1,resnet18_b8",
                    help=f"comma-separated, among {', '.join(bench_models.MODELS)}")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--work-dir", default=None, help="where the artifacts go (default: a temp dir)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    names = [n for n in a.models.split(",") if n]
    times = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        work = a.work_dir or tmp
        opts = json.dumps({"export_reps": 1, "clock": a.clock, "artifacts": ["pt2", "ts"]})
        for r in range(a.rounds):
            for n in names:
                out = json.loads(bench_models.prepare(n, work, opts))
                if out["errors"]:
                    sys.exit(f"{n}: {out['errors']}")
                times[n].append((out["export_s"], out["trace_s"]))
                print(f"round {r} {n:14s} export {out['export_s']:7.3f} s   trace+save "
                      f"{out['trace_s']:6.3f} s   ratio {out['export_s'] / out['trace_s']:5.2f}",
                      flush=True)
    print(f"torch {torch.__version__}, clock {a.clock}")
    for n, t in times.items():
        line = f"{n:14s} first export {t[0][0] / t[0][1]:5.2f}x"
        if len(t) > 1:
            later = t[1:]
            line += (f"   later exports {min(e for e, _ in later) / min(s for _, s in later):5.2f}x"
                     f" (min export {min(e for e, _ in later):.3f} s, min trace+save "
                     f"{min(s for _, s in later):.3f} s)")
        print(line)


if __name__ == "__main__":
    main()
