"""The Python half of ``pt2rt_bench`` (bench/side_by_side.cpp): the model set, the artifacts
every contender loads, and Python eager as a contender — run inside the benchmark's own
process (the C++ program embeds this interpreter, so eager PyTorch and the C++ contenders
share one LibTorch, one intra-op thread pool and one CPU allocator, and are timed in the
same interleaved rounds).

Models (``MODELS``; all float32, CPU):

    mlp_b1, mlp_b32     Linear(256, 512)-ReLU-Linear(512, 512)-ReLU-Linear(512, 10), batch 1 / 32
    digits_cnn          examples/digits/model.py (conv-BN-ReLU-pool x2, linear), [32, 1, 8, 8]
    resnet18_b1/_b8     torchvision resnet18 (1000 classes), [1|8, 3, 64, 64]
    mobilenet_v2        torchvision mobilenet_v2 (1000 classes, dropout p=0), [8, 3, 64, 64]
    transformer         nn.TransformerEncoder, 2 layers, d_model 64, 4 heads, ff 256,
                        dropout 0, batch_first, [8, 32, 64]
    resnet50_load       torchvision resnet50 (load time only: default vs memory-mapped load)
    resnet18_b8_fc      resnet18_b8 with only ``fc`` trainable (requires_grad_(False) on every
                        other parameter after load: partial fine-tuning; training step only)

Losses: cross entropy against fixed class targets (classifiers), ``out.pow(2).mean()``
(transformer). Training step everywhere: ``zero_grad`` (set_to_none=False unless the C++
side asks otherwise), forward, loss, ``backward``, SGD(lr=0.01).

``prepare(name, work_dir, options_json) -> json`` writes, for one model:

    <name>.pt2            pt2rt.export(model, args) — defaults (train + inference graphs,
                          bundled examples), then .save(); its time is the export time
    <name>_min_cut.pt2    partitioner="min_cut", no examples (training contender)
    <name>_fold.pt2       inference only, optimize_inference=True (BatchNorm folded)
    <name>_train.ts       torch.jit.trace in training mode + torch.jit.save
    <name>_eval.ts        torch.jit.trace in eval mode + torch.jit.save (its time is the
                          trace + save time the export is compared with)

and returns shapes, loss kind, the export / trace+save times (min over ``export_reps``) and
the reason where an artifact could not be made (the C++ side prints "n/a (reason)").
``EagerRunner`` runs the same inference call and training step in eager PyTorch.
"""
from __future__ import annotations

import copy
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (ROOT / "exporter", ROOT / "examples" / "digits"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

LR = 0.01


def _mlp(batch: int):
    def build():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10))
        return model, (torch.randn(batch, 256),), "ce", 10
    return build


def _digits():
    import model as digits_model  # examples/digits/model.py
    m, args = digits_model.build()
    return m, args, "ce", digits_model.NUM_CLASSES


def _resnet18(batch: int):
    def build():
        import torchvision
        torch.manual_seed(0)
        return torchvision.models.resnet18(), (torch.randn(batch, 3, 64, 64),), "ce", 1000
    return build


def _resnet50():
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet50(), (torch.randn(1, 3, 64, 64),), "ce", 1000


def _mobilenet_v2():
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model, (torch.randn(8, 3, 64, 64),), "ce", 1000


def _transformer():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=256, dropout=0.0,
                                       batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False) \
        if "enable_nested_tensor" in nn.TransformerEncoder.__init__.__code__.co_varnames \
        else nn.TransformerEncoder(layer, num_layers=2)
    return model, (torch.randn(8, 32, 64),), "mse", 0


MODELS: Dict[str, Callable] = {
    "mlp_b1": _mlp(1),
    "mlp_b32": _mlp(32),
    "digits_cnn": _digits,
    "resnet18_b1": _resnet18(1),
    "resnet18_b8": _resnet18(8),
    "mobilenet_v2": _mobilenet_v2,
    "transformer": _transformer,
    "resnet50_load": _resnet50,
}


#: Variants: (base model whose artifacts they share, prefix of the trainable parameters).
VARIANTS: Dict[str, Tuple[str, str]] = {"resnet18_b8_fc": ("resnet18_b8", "fc.")}


def build(name: str):
    """(model in training mode, example args, loss kind "ce"|"mse", number of classes)."""
    model, args, loss, classes = MODELS[VARIANTS.get(name, (name, ""))[0]]()
    return model.train(), args, loss, classes


def targets_for(args, loss: str, classes: int) -> torch.Tensor:
    """Fixed targets: class indices [N] for "ce" (seeded), nothing for "mse"."""
    if loss != "ce":
        return torch.empty(0)
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, classes, (args[0].shape[0],), generator=g)


def loss_of(out: torch.Tensor, target: torch.Tensor, loss: str) -> torch.Tensor:
    return F.cross_entropy(out, target) if loss == "ce" else out.pow(2).mean()


_clock = time.perf_counter


def _min_time(model: nn.Module, fn: Callable[[nn.Module], None], reps: int) -> float:
    """Minimum time of ``fn(copy of model)`` over ``reps`` runs (the copy is made outside the
    timed region), on the clock the C++ side chose (wall, or this thread's CPU time)."""
    best = float("inf")
    for _ in range(max(reps, 1)):
        m = copy.deepcopy(model)
        t0 = _clock()
        fn(m)
        best = min(best, _clock() - t0)
    return best


def _attempt(what: str, fn: Callable[[], None], errors: Dict[str, str]) -> None:
    try:
        fn()
    except Exception as e:  # report and go on: one failing contender must not stop the run
        errors[what] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        if os.environ.get("PT2RT_BENCH_DEBUG"):
            traceback.print_exc()


_warm = False


def _warm_up(work: Path) -> None:
    """One small export and trace first, so that one-time imports and initialisation
    (functorch, torch.fx, TorchScript's frontend) are not charged to the first model."""
    global _warm
    if _warm:
        return
    _warm = True
    import pt2rt
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU())
    x = torch.randn(2, 4)
    pt2rt.export(copy.deepcopy(model), (x,)).save(str(work / "_warm_up.pt2"))
    torch.jit.save(torch.jit.trace(copy.deepcopy(model).eval(), (x,)), str(work / "_warm_up.ts"))


def prepare(name: str, work_dir: str, options_json: str) -> str:
    """Builds the artifacts of ``name`` in ``work_dir``; see the module docstring.
    ``options_json``: {"export_reps": int, "clock": "cpu"|"wall", "artifacts": [kinds],
    "export_kwargs": {...}} with kinds among "pt2", "min_cut", "fold", "ts"; ``export_kwargs``:
    keyword arguments of the default export's ``pt2rt.export`` call (none by default)."""
    global _clock
    opts = json.loads(options_json)
    reps = int(opts.get("export_reps", 1))
    _clock = time.thread_time if opts.get("clock") == "cpu" else time.perf_counter
    kinds = set(opts.get("artifacts", ["pt2", "min_cut", "fold", "ts"]))
    export_kwargs = dict(opts.get("export_kwargs", {}))
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    _warm_up(work)
    model, args, loss, classes = build(name)
    base, trainable = VARIANTS.get(name, (name, ""))
    out: Dict[str, object] = {
        "name": name, "loss": loss, "classes": classes, "trainable_prefix": trainable,
        "inputs": [list(a.shape) for a in args], "errors": {}}
    reuse = name in VARIANTS  # a variant reuses its base model's artifacts when they exist
    name = base
    errors: Dict[str, str] = out["errors"]  # type: ignore[assignment]
    with torch.no_grad():
        probe = copy.deepcopy(model)(*args)
    out["output_shape"] = list(probe.shape)
    out["num_parameters"] = sum(p.numel() for p in model.parameters())

    import pt2rt

    def export_default():
        path = str(work / f"{name}.pt2")
        if reuse and os.path.exists(path):
            out["pt2"] = path
            return
        out["export_s"] = _min_time(
            model, lambda m: pt2rt.export(m, args, **export_kwargs).save(path), reps)
        out["pt2"] = path

    def export_min_cut():
        path = str(work / f"{name}_min_cut.pt2")
        pt2rt.export(copy.deepcopy(model), args, partitioner="min_cut",
                     bundle_examples=False, inference=False).save(path)
        out["pt2_min_cut"] = path

    def export_fold():
        path = str(work / f"{name}_fold.pt2")
        pt2rt.export(copy.deepcopy(model).eval(), args, train=False, bundle_examples=False,
                     optimize_inference=True).save(path)
        out["pt2_fold"] = path

    def trace_train():
        path = str(work / f"{name}_train.ts")
        if reuse and os.path.exists(path):
            out["ts_train"] = path
            return
        m = copy.deepcopy(model).train()
        torch.jit.save(torch.jit.trace(m, args, check_trace=False), path)
        out["ts_train"] = path

    def trace_eval():
        path = str(work / f"{name}_eval.ts")

        def trace_and_save(m: nn.Module) -> None:
            torch.jit.save(torch.jit.trace(m.eval(), args, check_trace=False), path)
        out["trace_s"] = _min_time(model, trace_and_save, reps)
        out["ts_eval"] = path

    if "pt2" in kinds:
        _attempt("pt2", export_default, errors)
    if "min_cut" in kinds:
        _attempt("pt2_min_cut", export_min_cut, errors)
    if "fold" in kinds:
        _attempt("pt2_fold", export_fold, errors)
    if "ts" in kinds:
        _attempt("ts_train", trace_train, errors)
        if not reuse:
            _attempt("ts_eval", trace_eval, errors)
    return json.dumps(out)


class EagerRunner:
    """Eager PyTorch on ``name``: one model copy in eval mode for ``infer`` (under
    ``torch.inference_mode``), one in training mode for ``train_step``; SGD(lr=0.01)."""

    def __init__(self, name: str, set_to_none: bool = False) -> None:
        model, args, loss, classes = build(name)
        prefix = VARIANTS.get(name, (name, ""))[1]
        for fqn, p in model.named_parameters():
            p.requires_grad_(fqn.startswith(prefix))
        self.args: Tuple[torch.Tensor, ...] = args
        self.loss = loss
        self.target = targets_for(args, loss, classes)
        self.eval_model = copy.deepcopy(model).eval()
        self.train_model = model.train()
        self.set_to_none = set_to_none
        self.opt = torch.optim.SGD([p for p in self.train_model.parameters() if p.requires_grad],
                                   lr=LR)

    def infer(self) -> None:
        with torch.inference_mode():
            self.eval_model(*self.args)

    def train_step(self) -> None:
        self.opt.zero_grad(set_to_none=self.set_to_none)
        loss = loss_of(self.train_model(*self.args), self.target, self.loss)
        loss.backward()
        self.opt.step()


def runner(name: str, set_to_none: bool) -> EagerRunner:
    return EagerRunner(name, bool(set_to_none))


def versions() -> str:
    return json.dumps({"torch": torch.__version__, "python": sys.version.split()[0]})


def names() -> List[str]:
    return list(MODELS) + list(VARIANTS)
