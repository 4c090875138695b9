"""Export memory alone: the peak resident memory one default ``pt2rt.export(...).save()`` adds,
÷ (the model's weights + the activations its training step saves), per model, each in a fresh
process. Not a test: it prints figures (issue 24's target: ≤ 3×).

    PYTHONPATH=exporter /usr/bin/python3 bench/export_memory.py                  # lane 1.13
    scripts/torch2-root.sh run python3 bench/export_memory.py                    # lane 2
    PYTHONPATH=exporter /usr/bin/python3 bench/export_memory.py --models encoder_b32,vit_b_16

How it measures (Linux: ``/proc/self/status`` and ``/proc/self/clear_refs``): each model runs
in a child process that first exports a small MLP (so one-time imports and caches are not
counted), builds the model, resets the peak (``VmHWM``, by writing 5 to ``clear_refs``), then
exports with the defaults (train + inference graphs, bundled float32 and float64 references)
and saves to a temporary file. *peak* is ``VmHWM`` minus the resident size just before the
export: memory that glibc keeps after one phase and reuses in the next counts once, so the
figure moves by a few tens of MB between runs of a weight-heavy model.

Denominators: *weights* are the parameters and buffers; *saved* is
``ExportedArchive.saved_activations()["bytes"]`` (every saved output of the forward graph,
weights saved as they are included), *activations* its ``activation_bytes`` (the saved outputs
that are not graph inputs). ``peak ÷ (weights + saved)`` is the ratio docs/performance.md
reports; ``÷ (weights + activations)`` is stricter where weights dominate.

*eager saved* is the same quantity measured on eager PyTorch instead of on pt2rt's forward
graph: the bytes of the distinct storages autograd saves for the backward in one float32
training-mode forward of a copy of the model (``torch.autograd.graph.saved_tensors_hooks``,
weights saved as they are included, as in *saved*), measured after the export in the same
child. It is a property of the model, the same on both lanes, where *saved* depends on what
each lane's capture saves (lane 1.13 captures attention as ATen ops and saves more; lane 2's
fused attention op saves less); ``peak ÷ (weights + eager saved)`` is issue 24's "the model's
weights + activations" read that way; *eager activations* leaves out the weights and inputs
(the stricter ratio, as *activations* above).

Models: those of ``bench_models`` (the benchmark's sizes) and issue 24's two large cases,
``encoder_b32`` (``nn.TransformerEncoder``: 4 layers, d_model 256, 8 heads, batch 32 × 128) and
``vit_b_16`` (torchvision's at 64², batch 8).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, Tuple

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_models  # noqa: E402  (puts ../exporter on sys.path)


def _encoder_b32() -> Tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 8, batch_first=True)
    return nn.TransformerEncoder(layer, 4), (torch.randn(32, 128, 256),)


def _vit_b_16() -> Tuple[nn.Module, tuple]:
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.vit_b_16(image_size=64), (torch.randn(8, 3, 64, 64),)


EXTRA: Dict[str, Callable[[], Tuple[nn.Module, tuple]]] = {
    "encoder_b32": _encoder_b32, "vit_b_16": _vit_b_16}
DEFAULT = ["mlp_b32", "digits_cnn", "resnet18_b8", "mobilenet_v2", "transformer"]


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {key}")


def _storage_key(t: torch.Tensor) -> Tuple[int, int]:
    """(data pointer, bytes) of ``t``'s storage (torch 1.13: ``storage()``; 2.x: untyped)."""
    st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return st.data_ptr(), st.nbytes()


def eager_saved_bytes(model: nn.Module, args: tuple) -> Tuple[int, int]:
    """(all, not weights): bytes of the distinct storages autograd saves for the backward in
    one float32 training-mode forward of a copy of ``model`` on ``args`` (module docstring);
    *not weights* leaves out the storages of parameters, buffers and ``args`` (as
    ``activation_bytes`` leaves out the graph's inputs)."""
    import copy
    m = copy.deepcopy(model).train()
    weights = {_storage_key(t)[0]
               for t in list(m.parameters()) + list(m.buffers()) + list(args)}
    saved: Dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.device.type != "meta":
            ptr, nbytes = _storage_key(t)
            saved[ptr] = max(saved.get(ptr, 0), nbytes)
        return t

    torch.manual_seed(0)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = m(*args)
    del out
    return (sum(saved.values()),
            sum(b for ptr, b in saved.items() if ptr not in weights))


def measure_one(name: str) -> Dict[str, float]:
    """In this process: the figures of ``name`` (see the module docstring)."""
    import pt2rt
    torch.set_num_threads(1)
    warm = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    pt2rt.export(warm, (torch.randn(2, 8),))
    if name in EXTRA:
        model, args = EXTRA[name]()
    else:
        model, args, _, _ = bench_models.build(name)
    weights = sum(t.numel() * t.element_size()
                  for t in list(model.parameters()) + list(model.buffers())) / 2**20
    with tempfile.TemporaryDirectory() as tmp:
        start = _status_mb("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS
        archive = pt2rt.export(model, tuple(args))
        archive.save(str(Path(tmp) / "model.pt2"))
        peak = _status_mb("VmHWM") - start
    saved = archive.saved_activations()
    eager_all, eager_acts = eager_saved_bytes(model, tuple(args))
    return {"peak_mb": peak, "weights_mb": weights, "saved_mb": saved["bytes"] / 2**20,
            "activations_mb": saved["activation_bytes"] / 2**20,
            "eager_saved_mb": eager_all / 2**20, "eager_activations_mb": eager_acts / 2**20}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = list(bench_models.MODELS) + list(EXTRA)
    ap.add_argument("--models", default=",".join(DEFAULT),
                    help=f"comma-separated, among {', '.join(known)}")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # the child's model
    a = ap.parse_args()
    if not Path("/proc/self/clear_refs").exists():
        sys.exit("export_memory.py: needs Linux's /proc/self/clear_refs to reset the peak")
    if a.one is not None:
        print(json.dumps(measure_one(a.one)))
        return
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"export_memory.py: unknown model(s) {', '.join(unknown)}; known: "
                 f"{', '.join(known)}")
    print(f"torch {torch.__version__}; peak resident memory added by one default export")
    for n in names:
        child = subprocess.run([sys.executable, __file__, "--one", n], capture_output=True,
                               text=True)
        if child.returncode != 0:
            sys.exit(f"{n}: the measuring process failed:\n{child.stderr[-2000:]}")
        r = json.loads(child.stdout.strip().splitlines()[-1])
        w, peak = r["weights_mb"], r["peak_mb"]
        print(f"{n:14s} peak {peak:7.0f} MB   weights {w:6.1f} MB   "
              f"saved {r['saved_mb']:6.1f} MB (activations {r['activations_mb']:6.1f} MB)   "
              f"eager saved {r['eager_saved_mb']:6.1f} MB "
              f"(activations {r['eager_activations_mb']:6.1f} MB)\n{'':14s} "
              f"peak / (weights + saved) {peak / (w + r['saved_mb']):4.2f}x   "
              f"/ (weights + activations) {peak / (w + r['activations_mb']):4.2f}x   "
              f"/ (weights + eager saved) {peak / (w + r['eager_saved_mb']):4.2f}x   "
              f"/ (weights + eager activations) "
              f"{peak / (w + r['eager_activations_mb']):4.2f}x", flush=True)


if __name__ == "__main__":
    main()
