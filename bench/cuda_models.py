"""The Python half of ``pt2rt_bench_cuda`` (bench/cuda_side_by_side.cpp): the model set, the
export, and eager PyTorch as a contender on the same device — run inside the benchmark's own
process (the C++ program embeds this interpreter, so eager PyTorch and pt2rt share one
LibTorch, one CUDA context, one default stream and one CUDA caching allocator).

Models (``MODELS``; float32, seeded weights and inputs, static shapes; the row keys):

    digits_cnn     bench_models' digits CNN (examples/digits/model.py: conv-BN-ReLU-pool x2,
                   linear), x [32, 1, 8, 8]
    mlp            Linear(512, 1024)-ReLU-Linear(1024, 1024)-ReLU-Linear(1024, 10), x [256, 512]
    lstm           nn.LSTM(64, 128, num_layers=2) then Linear(128, 10) on every step's output,
                   x [50, 32, 64] (time, batch, features: nn.LSTM's batch_first=False)
                   -> [50, 32, 10]
    lstm_unrolled  the same model exported as T unrolled ATen LSTM cells (what torch 2 captures
                   did before static RNNs became one pt2rt::lstm node); not in the default set
    resnet18       torchvision resnet18 (1000 classes), x [32, 3, 224, 224]
    mobilenet_v2   torchvision mobilenet_v2 (1000 classes, dropout p=0), x [32, 3, 224, 224]
    transformer    nn.TransformerEncoder, 4 layers, d_model 256, 8 heads, dim_feedforward 1024,
                   dropout 0, batch_first, x [32, 128, 256]

A training step, for both contenders: ``zero_grad(set_to_none=True)``, forward, loss
``out.pow(2).mean()`` (``out``: the first output), ``backward``, ``torch.optim.SGD(lr=0.01,
momentum=0.9)``. Inference: eval mode under ``torch.inference_mode()``.

Entry points called from C++ (python_bridge.h; every result a str, or a list of tensors):

    header(device) -> json          torch/Python versions, device name, TF32 / cuDNN flags
    prepare(name, work_dir, capture_device) -> json
                                    pt2rt.export(model, args, train=True) of the model on
                                    ``capture_device``, saved to <work_dir>/<name>.pt2
    runner(name, device) -> EagerRunner
    memory_begin(device), memory_peak(device) -> str
                                    peak CUDA bytes above a start (torch.cuda.max_memory_allocated)
"""
from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn as nn

import bench_models  # same folder; puts exporter/ and examples/digits/ on sys.path

LR = 0.01
MOMENTUM = 0.9

Built = Tuple[nn.Module, Tuple[torch.Tensor, ...]]


def _no_dropout(model: nn.Module) -> nn.Module:
    """Sets every nn.Dropout's p to 0, so training steps draw no random numbers (pt2rt's and
    eager's RNG streams would differ) and both contenders compute the same step."""
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model


def _digits() -> Built:
    model, args, _, _ = bench_models.MODELS["digits_cnn"]()  # seeds itself (seed 0)
    return model, args


def _mlp() -> Built:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    return model, (torch.randn(256, 512),)


class LstmHead(nn.Module):
    """nn.LSTM(64, 128, num_layers=2) and a Linear(128, 10) head on every step's output.
    x: float32 [T, N, 64] -> float32 [T, N, 10]."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(64, 128, num_layers=2)
        self.head = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out)


def _lstm() -> Built:
    torch.manual_seed(0)
    return LstmHead(), (torch.randn(50, 32, 64),)


def _torchvision(name: str) -> Callable[[], Built]:
    def build() -> Built:
        import torchvision
        torch.manual_seed(0)
        model = _no_dropout(getattr(torchvision.models, name)())
        return model, (torch.randn(32, 3, 224, 224),)
    return build


def _transformer() -> Built:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, dropout=0.0,
                                       batch_first=True)
    # enable_nested_tensor exists from torch 1.12 on; off: inputs are dense, no padding mask.
    if "enable_nested_tensor" in nn.TransformerEncoder.__init__.__code__.co_varnames:
        model = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)
    else:
        model = nn.TransformerEncoder(layer, num_layers=4)
    return model, (torch.randn(32, 128, 256),)


MODELS: Dict[str, Callable[[], Built]] = {
    "digits_cnn": _digits,
    "mlp": _mlp,
    "lstm": _lstm,
    "lstm_unrolled": _lstm,  # exported as unrolled ATen cells (prepare), as before one op
    "resnet18": _torchvision("resnet18"),
    "mobilenet_v2": _torchvision("mobilenet_v2"),
    "transformer": _transformer,
}


def build(name: str) -> Built:
    """(model in training mode, example args), both on the CPU, the same on every call.
    Raises KeyError naming the known models."""
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    model, args = MODELS[name]()
    return model.train(), args


def _first(out) -> torch.Tensor:
    """The first output (a tensor, or the first element of a tuple/list of outputs)."""
    return out if isinstance(out, torch.Tensor) else out[0]


def _one_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def header(device: str) -> str:
    """JSON: torch and Python versions, the device's name (torch.cuda.get_device_name), the
    TF32 flags (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) and
    torch.backends.cudnn.benchmark — the settings both contenders run under."""
    info = {"torch": torch.__version__, "python": sys.version.split()[0],
            "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)}
    if torch.device(device).type == "cuda":
        info["device_name"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
        info["cudnn"] = torch.backends.cudnn.version()
    else:
        n = torch.get_num_threads()
        info["device_name"] = f"{n} intra-op thread{'' if n == 1 else 's'}"
    return json.dumps(info)


def prepare(name: str, work_dir: str, capture_device: str) -> str:
    """Exports ``name`` with ``pt2rt.export(model, args, train=True, bundle_examples=False)``
    (the model and args moved to ``capture_device`` first; defaults otherwise) to
    <work_dir>/<name>.pt2. Returns JSON {"name", "inputs": shapes, "pt2": path, "export_s":
    wall seconds of export + save} or, when the export fails, {"name", "error": one line}."""
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    out: Dict[str, object] = {"name": name}
    try:
        import pt2rt
        model, args = build(name)
        out["inputs"] = [list(a.shape) for a in args]
        model = model.to(capture_device)
        args = tuple(a.to(capture_device) for a in args)
        path = str(work / f"{name}.pt2")
        from pt2rt.ops import rnn_ops
        one_op = rnn_ops._fits_one_op
        if name.endswith("_unrolled"):
            rnn_ops._fits_one_op = lambda args: False
        try:
            t0 = time.perf_counter()
            # No bundled examples: their eager (and float64) references cost most of an
            # export, and the benchmark's inputs come from the eager runner.
            pt2rt.export(model, args, train=True, bundle_examples=False).save(path)
            out["export_s"] = time.perf_counter() - t0
        finally:
            rnn_ops._fits_one_op = one_op
        out["pt2"] = path
    except Exception as e:  # reported on the model's row; the benchmark goes on
        out["error"] = _one_line(e)
    return json.dumps(out)


class EagerRunner:
    """Eager PyTorch on ``name`` on ``device``: a copy in eval mode for inference and one in
    training mode for the training step (the same initial weights as the exported archive:
    ``build`` is seeded), with torch.optim.SGD(lr=0.01, momentum=0.9)."""

    def __init__(self, name: str, device: str) -> None:
        model, args = build(name)
        self.args: Tuple[torch.Tensor, ...] = tuple(a.to(device) for a in args)
        self.eval_model = copy.deepcopy(model).to(device).eval()
        self.train_model = model.to(device).train()
        self.opt = torch.optim.SGD(self.train_model.parameters(), lr=LR, momentum=MOMENTUM)

    def inputs(self) -> List[torch.Tensor]:
        """The example inputs on the device; C++ runs pt2rt on these very tensors."""
        return list(self.args)

    def infer(self) -> None:
        with torch.inference_mode():
            self.eval_model(*self.args)

    def infer_output(self) -> List[torch.Tensor]:
        """[the first output of one inference call] (an inference tensor), for the check."""
        with torch.inference_mode():
            return [_first(self.eval_model(*self.args))]

    def train_step(self) -> None:
        self.opt.zero_grad(set_to_none=True)
        _first(self.train_model(*self.args)).pow(2).mean().backward()
        self.opt.step()


def runner(name: str, device: str) -> EagerRunner:
    return EagerRunner(name, device)


_memory_start = 0


def memory_begin(device: str) -> str:
    """Starts a peak-memory window on CUDA: torch.cuda.synchronize, then
    torch.cuda.reset_peak_memory_stats, and remembers torch.cuda.memory_allocated. The
    process's one CUDA caching allocator serves Python and C++ alike, so the window sees
    pt2rt's allocations too. No-op on other devices. Returns ""."""
    global _memory_start
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        _memory_start = torch.cuda.memory_allocated()
    return ""


def memory_peak(device: str) -> str:
    """Bytes (decimal str) of torch.cuda.max_memory_allocated above memory_begin's start,
    after torch.cuda.synchronize; "" on other devices (not measured)."""
    if torch.device(device).type != "cuda":
        return ""
    torch.cuda.synchronize()
    return str(torch.cuda.max_memory_allocated() - _memory_start)


_profiler = None


def profile_begin(device: str) -> str:
    """Starts torch.profiler.profile (CPU activity, + CUDA on a CUDA device). The profiler's
    callbacks are the calling thread's and those of the threads it hands work to (autograd's),
    so pt2rt's C++ calls on this thread are recorded too. Returns ""."""
    global _profiler
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU]
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        acts.append(ProfilerActivity.CUDA)
    _profiler = profile(activities=acts, profile_memory=True)
    _profiler.__enter__()
    return ""


def profile_end(label: str, device: str) -> str:
    """Stops the profiler; returns its key_averages tables headed by ``label``: the top 25 ops
    by self CPU time, and the top 15 by the memory they allocated themselves (self CUDA memory
    on a CUDA device, else self CPU memory; ``profile_memory=True``)."""
    global _profiler
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    _profiler.__exit__(None, None, None)
    averages = _profiler.key_averages()
    table = averages.table(sort_by="self_cpu_time_total", row_limit=25)
    memory = "self_cuda_memory_usage" if torch.device(device).type == "cuda" \
        else "self_cpu_memory_usage"
    by_memory = averages.table(sort_by=memory, row_limit=15)
    _profiler = None
    return (f"== profile: {label} (one training step + one inference call)\n{table}\n"
            f"== by memory ({memory}): {label}\n{by_memory}")


def names() -> List[str]:
    return list(MODELS)
