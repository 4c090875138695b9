"""The device sweep: real models exported with this machine's torch, checked by export-cli on a
device — the GPU half of ``scripts/gpu-check.sh``, and runnable on the CPU too.

    python3 scripts/device_sweep.py export WORK [--models a,b] [--jobs N]
    python3 scripts/device_sweep.py check WORK --cli build/cli/export-cli --device cuda
                                          [--models a,b] [--jobs N]

``export`` writes, per model, ``<name>.pt2`` (``pt2rt.export(model, args)``: captured on the
CPU, eager references and float64 references bundled) and ``<name>.data.pt`` (two batches of
inputs with the eager outputs as regression targets, for ``export-cli train --loss mse``); for
the models marked ``on_cuda`` and when CUDA is available, also ``<name>_oncuda.pt2``, exported
with the model and its inputs on CUDA. ``check`` runs, per archive:

* ``verify``  ``export-cli verify --device D`` (outputs, gradients, buffers against the bundled
  references; the float64 rule for rounding; TF32 off);
* ``run``     ``export-cli run --device D`` (inference on the bundled example);
* ``train``   ``export-cli train --device D --epochs 1 --loss mse`` (optimizer steps on the GPU,
  finite losses);
* for ``<name>_oncuda.pt2``: ``verify`` on the CPU and on D (a CUDA capture runs everywhere);
* ``time``    for the models of ``TIMED`` on a GPU: ``export-cli profile --device D`` (median
  of 20 synchronized calls) against eager PyTorch in this process on the same model and
  inputs, inference and training step (forward + backward), as a ratio — a first look at speed,
  not the benchmark (TF32 at both sides' defaults).

It prints one table (model x check x result, with the largest error column of verify) and
writes ``WORK/results.jsonl``; exit status 1 when any check failed. Every archive is loaded
with ``--trusted`` (these are the sweep's own exports).
"""
from __future__ import annotations

import argparse
import concurrent.futures as futures
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------
# Models: name -> (builder, export the model captured on CUDA too)

# Vision models take 4 images of 96x96: their last BatchNorms then normalise over at least
# 4 x 3 x 3 values per channel. Over fewer (2 images of 32x32 reach 1x1 maps), training-mode
# BatchNorm is so ill-conditioned that two devices' roundings differ by O(1), eager against
# eager.
def _tv(name: str, size: int = 96, **kwargs):
    def build():
        import torch
        import torchvision
        return (getattr(torchvision.models, name)(weights=None, **kwargs),
                (torch.randn(4, 3, size, size),))
    return build


def _seg(name: str, size: int = 96):
    def build():
        import torch
        import torchvision
        return (getattr(torchvision.models.segmentation, name)(weights=None,
                                                                 weights_backbone=None,
                                                                 num_classes=5),
                (torch.randn(4, 3, size, size),))
    return build


def _mlp():
    import torch
    from torch import nn
    return (nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 10)), (torch.randn(8, 64),))


def _digits():
    sys.path.insert(0, str(ROOT / "examples" / "digits"))
    from model import build
    return build()


def _lstm():
    import torch
    from torch import nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
            self.head = nn.Linear(32, 5)

        def forward(self, x):
            return self.head(self.lstm(x)[0])
    return Tagger(), (torch.randn(4, 12, 16),)


def _gru():
    import torch
    from torch import nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(16, 32, batch_first=True)
            self.head = nn.Linear(32, 5)

        def forward(self, x):
            return self.head(self.gru(x)[0][:, -1])
    return Classifier(), (torch.randn(4, 10, 16),)


def _embedding_bag():
    import torch
    from torch import nn

    class Bags(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(100, 16, mode="sum")
            self.head = nn.Linear(16, 4)

        def forward(self, idx, offsets):
            return self.head(self.bag(idx, offsets))
    return Bags(), (torch.randint(0, 100, (20,)), torch.tensor([0, 5, 9, 14]))


def _transformer():
    import torch
    from torch import nn
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), (torch.randn(4, 16, 64),)


def _vit():
    import torch
    from torchvision.models import VisionTransformer
    return (VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                              hidden_dim=64, mlp_dim=128, num_classes=10),
            (torch.randn(2, 3, 32, 32),))


MODELS: Dict[str, Tuple[Callable, bool]] = {
    "mlp": (_mlp, False),
    "digits": (_digits, False),
    "lstm": (_lstm, True),
    "gru": (_gru, False),
    "embedding_bag": (_embedding_bag, True),
    "transformer": (_transformer, True),
    "vit": (_vit, True),
    "resnet18": (_tv("resnet18"), True),
    "mobilenet_v3_small": (_tv("mobilenet_v3_small"), False),
    "efficientnet_b0": (_tv("efficientnet_b0"), False),
    "regnet_y_400mf": (_tv("regnet_y_400mf"), False),
    "shufflenet_v2_x0_5": (_tv("shufflenet_v2_x0_5"), False),
    "mnasnet0_5": (_tv("mnasnet0_5"), False),
    "convnext_tiny": (_tv("convnext_tiny", 32), False),
    "squeezenet1_1": (_tv("squeezenet1_1"), False),
    "lraspp_mobilenet_v3_large": (_seg("lraspp_mobilenet_v3_large"), False),
}


TIMED = ("transformer", "vit", "resnet18", "lstm")


# ---------------------------------------------------------------------------
# export

def _flat_outputs(out):
    import torch.utils._pytree as pytree
    return pytree.tree_flatten(out)[0]


def _export_one(name: str, work: str, on_cuda: bool) -> List[dict]:
    """Runs in a worker process: exports ``name`` (and its CUDA capture); returns records."""
    import torch
    torch.set_num_threads(2)
    sys.path.insert(0, str(ROOT / "exporter"))
    import pt2rt
    records = []
    builder, _ = MODELS[name]
    variants = [("cpu", name)] + ([("cuda", f"{name}_oncuda")] if on_cuda else [])
    for device, archive in variants:
        t0 = time.time()
        rec = {"phase": "export", "archive": archive, "model": name, "capture": device}
        try:
            torch.manual_seed(0)
            model, args = builder()
            if device == "cuda":
                model, args = model.cuda(), tuple(a.cuda() for a in args)
            exported = pt2rt.export(model, args)
            exported.save(f"{work}/{archive}.pt2")
            if device == "cpu":
                with torch.no_grad():
                    model.eval()
                    target = _flat_outputs(model(*args))[0].detach()
                xs = tuple(torch.cat([a, a + 0.01 * torch.randn_like(a)])
                           if a.is_floating_point() else torch.cat([a, a]) for a in args)
                if len(args) == 1 and target.is_floating_point():
                    torch.save((xs[0], torch.cat([target, target])), f"{work}/{archive}.data.pt")
            rec.update(ok=True, seconds=round(time.time() - t0, 1),
                       bytes=os.path.getsize(f"{work}/{archive}.pt2"))
        except Exception as e:  # noqa: BLE001 - a sweep reports and goes on
            rec.update(ok=False, seconds=round(time.time() - t0, 1),
                       error=f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
        records.append(rec)
    return records


def cmd_export(work: Path, names: List[str], jobs: int) -> List[dict]:
    import torch
    cuda = torch.cuda.is_available()
    work.mkdir(parents=True, exist_ok=True)
    ctx = multiprocessing.get_context("spawn")
    records = []
    with futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        jobs_ = {pool.submit(_export_one, n, str(work), MODELS[n][1] and cuda): n for n in names}
        for f in futures.as_completed(jobs_):
            for rec in f.result():
                print(json.dumps(rec), flush=True)
                records.append(rec)
    return records


# ---------------------------------------------------------------------------
# check

def _verify_summary(out: str) -> Tuple[bool, str]:
    lines = [l for l in out.splitlines() if l.strip()]
    last = lines[-1] if lines else ""
    failed = [" ".join(l.split()) for l in lines if re.search(r"\sFAIL\b", l)]
    f64 = re.search(r"float64 rule: (\d+) check", out)
    worst = 0.0
    for l in lines:
        m = re.match(r"\S.*?\s+([0-9.e+-]+|-)\s+([0-9.e+-]+|-|inf)\s+(pass|FAIL)", l)
        if m and m.group(1) not in ("-",):
            try:
                worst = max(worst, float(m.group(1)))
            except ValueError:
                pass
    detail = last[:160] + (f"; {f64.group(1)} by float64 rule" if f64 else "")
    detail += f"; max |diff| {worst:.2e}"
    if failed:
        detail += " | first failures: " + " | ".join(f[:200] for f in failed[:3])
    return last.startswith("OK:"), detail


def _run(cmd: List[str], timeout: int) -> Tuple[int, str, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout} s"


def _check_one(cli: str, work: Path, archive: str, check: str, device: str) -> dict:
    path = str(work / f"{archive}.pt2")
    rec = {"phase": "check", "archive": archive, "check": check, "device": device}
    t0 = time.time()
    if check == "verify":
        rc, out, err = _run([cli, "verify", path, "--device", device, "--trusted"], 600)
        ok, detail = _verify_summary(out)
        rec.update(ok=ok and rc == 0, detail=detail if out else err.strip()[:300])
        if rc not in (0, 1):
            rec["detail"] = (err.strip() or out.strip())[:300]
    elif check == "run":
        rc, out, err = _run([cli, "run", path, "--device", device, "--trusted"], 300)
        rec.update(ok=rc == 0, detail=(out.strip().splitlines() or [""])[-1][:160] if rc == 0
                   else (err.strip() or out.strip())[:300])
    else:  # train
        data = work / f"{archive}.data.pt"
        import torch
        batch = int(torch.load(data)[0].shape[0]) // 2
        rc, out, err = _run([cli, "train", path, "--data", str(data), "--epochs", "1",
                             "--batch-size", str(batch), "--loss", "mse", "--lr", "0.001",
                             "--device", device, "--trusted", "--seed", "0"], 600)
        final = [l for l in out.splitlines() if l.startswith("final:")]
        finite = bool(final) and not re.search(r"\b(nan|inf)\b", final[0])
        rec.update(ok=rc == 0 and finite, detail=(final[0][:160] if final else
                                                  (err.strip() or out.strip())[:300]))
    rec["seconds"] = round(time.time() - t0, 1)
    return rec


def _eager_ms(name: str, device: str, train: bool) -> float:
    """Median milliseconds of 20 synchronized eager calls (after 3) of model ``name`` on
    ``device``: inference under no_grad, or forward + backward with ones as cotangents."""
    import torch
    torch.manual_seed(0)
    model, args = MODELS[name][0]()
    model, args = model.to(device).train(train), tuple(a.to(device) for a in args)
    times = []
    for i in range(23):
        torch.cuda.synchronize()
        t = time.perf_counter()
        if train:
            outs = _flat_outputs(model(*args))
            torch.autograd.backward([o for o in outs if o.requires_grad],
                                    [torch.ones_like(o) for o in outs if o.requires_grad])
        else:
            with torch.no_grad():
                model(*args)
        torch.cuda.synchronize()
        if i >= 3:
            times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2]


def _time_one(cli: str, work: Path, name: str, device: str) -> dict:
    rec = {"phase": "check", "archive": name, "check": "time", "device": device}
    parts = []
    ok = True
    for train in (False, True):
        cmd = [cli, "profile", str(work / f"{name}.pt2"), "--device", device, "--trusted",
               "--iters", "20", "--warmup", "3", "--top", "1"] + (["--train"] if train else [])
        rc, out, err = _run(cmd, 300)
        m = re.search(r"median ([0-9.]+) ms per call", out)
        if rc != 0 or not m:
            ok = False
            parts.append((err.strip() or out.strip())[:160])
            continue
        ms, eager = float(m.group(1)), _eager_ms(name, device, train)
        parts.append(f"{'step' if train else 'infer'} {ms:.2f} ms, eager {eager:.2f} ms "
                     f"(x{ms / eager:.2f})")
    rec.update(ok=ok, detail="; ".join(parts))
    return rec


def cmd_check(work: Path, cli: str, device: str, names: List[str], jobs: int) -> List[dict]:
    tasks = []
    for n in names:
        if (work / f"{n}.pt2").exists():
            tasks += [(n, "verify", device), (n, "run", device)]
            if device != "cpu":
                tasks.append((n, "verify", "cpu"))
            if (work / f"{n}.data.pt").exists():
                tasks.append((n, "train", device))
        if (work / f"{n}_oncuda.pt2").exists():
            tasks += [(f"{n}_oncuda", "verify", "cpu"), (f"{n}_oncuda", "verify", device)]
    records = []
    with futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for rec in pool.map(lambda t: _check_one(cli, work, *t), tasks):
            print(json.dumps(rec), flush=True)
            records.append(rec)
    if device.startswith("cuda"):  # one at a time: timings on an otherwise idle GPU
        for n in names:
            if n in TIMED and (work / f"{n}.pt2").exists():
                rec = _time_one(cli, work, n, device)
                print(json.dumps(rec), flush=True)
                records.append(rec)
    return records


def table(records: List[dict]) -> str:
    rows = [("archive", "check", "device", "result", "detail")]
    for r in records:
        if r["phase"] == "export":
            rows.append((r["archive"], "export", f"capture {r['capture']}",
                         "ok" if r["ok"] else "FAIL",
                         f"{r['seconds']} s" if r["ok"] else r.get("error", "")))
        else:
            rows.append((r["archive"], r["check"], r["device"], "ok" if r["ok"] else "FAIL",
                         r.get("detail", "")))
    w = [max(len(str(row[i])) for row in rows) for i in range(4)]
    lines = ["  ".join(str(c).ljust(w[i]) if i < 4 else str(c) for i, c in enumerate(row))
             for row in rows]
    failed = sum(1 for r in records if not r["ok"])
    lines.append(f"{len(records) - failed} of {len(records)} checks ok")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["export", "check"])
    ap.add_argument("work", type=Path)
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    ap.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    ap.add_argument("--cli", help="export-cli (check)")
    ap.add_argument("--device", default="cuda", help="device of the checks (check)")
    a = ap.parse_args(argv)
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    if a.command == "export":
        records = cmd_export(a.work, names, a.jobs)
    else:
        if not a.cli:
            ap.error("check needs --cli")
        records = cmd_check(a.work, a.cli, a.device, names, a.jobs)
    with open(a.work / "results.jsonl", "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    print(table(records))
    return 0 if all(r["ok"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
