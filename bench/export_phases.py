"""Where one default export's time goes: wall seconds per phase of ``pt2rt.export(...).save()``.
Not a test: it prints figures (the profile behind docs/performance.md's "Export" section).

    PYTHONPATH=exporter /usr/bin/python3 bench/export_phases.py                  # lane 1.13
    scripts/torch2-root.sh run python3 bench/export_phases.py --models resnet18_b8

Each phase is a function of the exporter, timed by wrapping it for the run (inclusive times:
``eager_example`` contains the float64 runs and the eval outputs, ``_float64_runs`` the float64
eval and training runs; the rest do not nest):

* ``_eager_probe``: the float32 eager training and eval-mode runs (fidelity checks, the
  graphs' value check, float32 references);
* ``capture_inference`` / ``capture_joint``: the backend's two captures (torch 1.13: make_fx
  + functionalization; torch >= 2.9: ``aot_export_joint_with_descriptors``);
* ``partition``: the joint graph into forward and backward (functorch's partitioner);
* ``annotate_program``: every graph run once on the example inputs (value metadata);
* ``eager_example`` / ``_float64_runs`` / ``eager_eval_outputs``: the bundled references
  (``eager_eval_outputs``: the float64 eval run's, and the float32 one's when the export
  made none);
* ``build_program`` / ``write_program``: the FlatBuffer program; ``save``: the zip archive.

Each model is exported ``--rounds`` times (fresh copies, 1 intra-op thread); the last round is
printed, so one-time costs of the first export (imports, caches) are left out.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterator

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_models  # noqa: E402  (puts ../exporter on sys.path)


@contextlib.contextmanager
def timed_phases(seconds: Dict[str, float]) -> Iterator[None]:
    """Within the block, the phases above add their wall seconds to ``seconds``."""
    import pt2rt
    from pt2rt.capture import capture, examples
    from pt2rt.format import serialize
    targets = [(capture.select_backend(), "capture_inference"),
               (capture.select_backend(), "capture_joint")]
    targets += [(capture, n) for n in ("_eager_probe", "partition", "annotate_program")]
    targets += [(examples, n) for n in ("_float64_runs", "eager_eval_outputs")]
    targets += [(serialize, n) for n in ("build_program", "write_program")]
    targets += [(examples, "eager_example"), (pt2rt.ExportedArchive, "save")]
    originals = [(owner, name, getattr(owner, name)) for owner, name in targets]

    def timed(name, fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - start
        return call

    try:
        for owner, name, fn in originals:
            setattr(owner, name, timed(name, fn))
        yield
    finally:
        for owner, name, fn in originals:
            setattr(owner, name, fn)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18_b8,mobilenet_v2,transformer",
                    help=f"comma-separated, among {', '.join(bench_models.MODELS)}")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    import tempfile
    import pt2rt
    torch.set_num_threads(1)
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in bench_models.MODELS]
    if unknown or a.rounds < 1:
        sys.exit(f"export_phases.py: unknown model(s) {', '.join(unknown)} (known: "
                 f"{', '.join(bench_models.MODELS)}), or --rounds < 1")
    print(f"torch {torch.__version__}; wall seconds per phase, last of {a.rounds} rounds")
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            for _ in range(a.rounds):
                seconds: Dict[str, float] = defaultdict(float)
                model, args, _, _ = bench_models.build(n)
                with timed_phases(seconds):
                    start = time.perf_counter()
                    pt2rt.export(model, tuple(args)).save(str(Path(tmp) / "model.pt2"))
                    total = time.perf_counter() - start
            phases = "  ".join(f"{k} {v:.3f}" for k, v in
                               sorted(seconds.items(), key=lambda kv: -kv[1]) if v >= 0.0005)
            print(f"{n:14s} total {total:.3f}  {phases}", flush=True)


if __name__ == "__main__":
    main()
