"""Export time alone: ``pt2rt.export(...).save()`` ÷ (``torch.jit.trace`` + ``torch.jit.save``),
measured as ``pt2rt_bench`` measures its export column (``bench_models.prepare``: the same
model copies, the default export — train + inference graphs, bundled examples — against the
eval-mode trace + save, on this thread's CPU time, 1 intra-op thread), without the C++ program
(so it runs on any lane, e.g. inside the torch-2 root). Not a test: it prints figures.

    PYTHONPATH=exporter /usr/bin/python3 bench/export_time.py                  # resnet18 1x and 8x
    PYTHONPATH=exporter /usr/bin/python3 bench/export_time.py --models mlp_b32 --rounds 5
    PYTHONPATH=exporter /usr/bin/python3 bench/export_time.py --export-kwargs '{"inference": false}'
    scripts/torch2-root.sh run python3 bench/export_time.py                    # lane 2

Each round exports every model once, then traces and saves it once (interleaved). Round 0 is
the first export in the process (one-time costs, e.g. the gradient-sketch signs of the largest
gradient, included), as ``pt2rt_bench --models <one model>`` measures it; the later rounds'
minimum is what an export costs once those are paid, as the later models of a full
``pt2rt_bench`` run see it.

Each round also times the capture API alone on a fresh copy of the model, joint graph only
(no inference graph, partitioner, references or archive): ``aot_export_joint_with_descriptors``
on torch >= 2.9 (the API the torch-2 capture is built on), on torch 1.13 ``make_fx`` of
forward + ``torch.autograd.grad`` over the parameters (what the 1.13 capture traces first) —
the floor any exporter built on that API pays, printed as its own ratio to trace + save.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_models  # noqa: E402  (puts ../exporter on sys.path)


def joint_capture_alone(name: str, clock: str) -> float:
    """Seconds of the bare joint-graph capture of ``name`` (see the module docstring)."""
    model, args, _, _ = bench_models.build(name)
    model = copy.deepcopy(model).train()
    now = time.thread_time if clock == "cpu" else time.perf_counter
    try:
        from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
    except ImportError:  # torch < 2.9
        aot_export_joint_with_descriptors = None
    if aot_export_joint_with_descriptors is not None:
        t = now()
        with contextlib.ExitStack() as stack:
            aot_export_joint_with_descriptors(stack, model, args)
        return now() - t
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.utils.stateless import functional_call
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    buffers = dict(model.named_buffers())

    def joint(params, *inputs):
        out = functional_call(model, {**dict(zip(names, params)), **buffers}, inputs)
        return torch.autograd.grad(out.float().sum(), params)

    params = [p.detach().requires_grad_() for n, p in model.named_parameters() if n in names]
    t = now()
    make_fx(joint)(params, *args)
    return now() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18_b1,resnet18_b8",
                    help=f"comma-separated, among {', '.join(bench_models.MODELS)}")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--work-dir", default=None, help="where the artifacts go (default: a temp dir)")
    ap.add_argument("--export-kwargs", default="{}", metavar="JSON",
                    help="keyword arguments of pt2rt.export as a JSON object, e.g. "
                         "'{\"bundle_examples\": false, \"inference\": false}' (default: none)")
    a = ap.parse_args()
    try:
        export_kwargs = json.loads(a.export_kwargs)
    except json.JSONDecodeError as e:
        sys.exit(f"export_time.py: --export-kwargs is not JSON ({e}); e.g. "
                 "'{\"bundle_examples\": false}'")
    if not isinstance(export_kwargs, dict):
        sys.exit("export_time.py: --export-kwargs must be a JSON object, e.g. "
                 "'{\"bundle_examples\": false}'")
    torch.set_num_threads(1)
    names = [n for n in a.models.split(",") if n]
    times = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        work = a.work_dir or tmp
        opts = json.dumps({"export_reps": 1, "clock": a.clock, "artifacts": ["pt2", "ts"],
                           "export_kwargs": export_kwargs})
        for r in range(a.rounds):
            for n in names:
                out = json.loads(bench_models.prepare(n, work, opts))
                if out["errors"]:
                    sys.exit(f"{n}: {out['errors']}")
                floor = joint_capture_alone(n, a.clock)
                times[n].append((out["export_s"], out["trace_s"], floor))
                print(f"round {r} {n:14s} export {out['export_s']:7.3f} s   trace+save "
                      f"{out['trace_s']:6.3f} s   ratio {out['export_s'] / out['trace_s']:5.2f}"
                      f"   capture API alone {floor:6.3f} s ({floor / out['trace_s']:4.2f}x)",
                      flush=True)
    print(f"torch {torch.__version__}, clock {a.clock}")
    for n, t in times.items():
        line = f"{n:14s} first export {t[0][0] / t[0][1]:5.2f}x"
        if len(t) > 1:
            later = t[1:]
            trace = min(s for _, s, _ in later)
            line += (f"   later exports {min(e for e, _, _ in later) / trace:5.2f}x"
                     f" (min export {min(e for e, _, _ in later):.3f} s, min trace+save "
                     f"{trace:.3f} s; capture API alone {min(f for _, _, f in later) / trace:4.2f}x)")
        print(line)


if __name__ == "__main__":
    main()
