"""Plain eager PyTorch on a copy of the model: the ground truth an export is checked against.

``eager_train_run`` and ``eager_eval_outputs`` run ``copy.deepcopy(model)`` (or, where deepcopy
fails, the model itself with private copies of its tensors swapped in: ``_copy``) exactly as a
user would — ``model(*args, **kwargs)``, then ``torch.autograd.backward(outputs, ones)`` — never
through the capture's parameter substitution (``model_call.substituted``), so a capture bug
(a parameter traced as a constant, a recomputation reading the wrong weights) shows up as a
difference instead of being reproduced by the references. The user's model is not touched
(forward-time mutations such as ``nn.Embedding(max_norm=...)`` or BatchNorm statistics land
in the copy).

Used by ``capture.capture`` (gradient-path sanity, ``fidelity.check_gradient_paths``) and by
``examples.eager_example`` (the bundled references ``verify`` compares against).

Each run starts from ``torch.default_generator.manual_seed(REFERENCE_RNG_SEED)`` (inside
``torch.random.fork_rng``: the caller's generator state is untouched), recorded in the archive's
metadata as ``reference_rng_seed``: a model that draws random numbers (dropout in training)
draws them again in the same order when ``export-cli verify`` seeds the runtime's generator the
same way before each run (``pt2rt/randomness.h``).
"""
from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import torch

from ..errors import ExportError
from ..ir.graph_ir import ExportSignature
from .model_call import flat_outputs, fresh, private_state, training_mode


REFERENCE_RNG_SEED = 0


@contextlib.contextmanager
def _seeded() -> Iterator[None]:
    """The reference RNG seed, and full float32 precision: TF32 off for cuDNN and cuBLAS
    (``torch.backends.cudnn.allow_tf32``, ``torch.backends.cuda.matmul.allow_tf32``), so
    references computed on CUDA are what ``export-cli verify`` (TF32 off by default) checks
    against; no effect on the CPU."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    tf32 = matmul.allow_tf32
    with torch.random.fork_rng(devices=[]), cudnn.flags(
            enabled=cudnn.enabled, benchmark=cudnn.benchmark, deterministic=cudnn.deterministic,
            allow_tf32=False):
        torch.default_generator.manual_seed(REFERENCE_RNG_SEED)
        matmul.allow_tf32 = False
        try:
            yield
        finally:
            matmul.allow_tf32 = tf32


@dataclass
class EagerTrainRun:
    """One training-mode forward + backward of a model copy.

    ``outputs``: the flat forward outputs (detached). ``diff``: indices of the differentiable
    outputs (floating, requiring grad), whose cotangents are ``ones_like``. ``param_grads``:
    ``.grad`` by FQN (``named_parameters()``: tied weights once) for every trainable parameter,
    ``None`` where no gradient reached it (with a ``grad_sink``: what the sink returned).
    ``input_grads``: by flat input index, for inputs that require grad. ``buffers``:
    ``named_buffers()`` after the forward. ``out_spec``: the pytree spec of forward()'s return
    value (``model_call.flat_outputs``). ``seconds``: wall time of the forward + backward;
    ``autograd_nodes``: nodes of the autograd graph behind the differentiable outputs (the
    torch 1.13 capture weighs a fake-tensor trace against these).
    """

    outputs: List[torch.Tensor]
    diff: List[int]
    out_spec: Any = None
    seconds: float = 0.0
    autograd_nodes: int = 0
    param_grads: Dict[str, object] = field(default_factory=dict)
    input_grads: Dict[int, object] = field(default_factory=dict)
    buffers: Dict[str, torch.Tensor] = field(default_factory=dict)


@contextlib.contextmanager
def _copy(model: torch.nn.Module, dtype: Optional[torch.dtype] = None) -> Iterator[torch.nn.Module]:
    """A model to run the references on: a deep copy of ``model`` (with ``dtype``, its
    floating parameters and buffers cast), or — for a model deepcopy refuses, such as one
    using ``torch.nn.utils.weight_norm`` (its ``weight`` attribute is a non-leaf tensor) —
    ``model`` itself with private copies swapped in (``model_call.private_state``) and
    everything put back on exit."""
    try:
        m = copy.deepcopy(model, _cast_memo(model, dtype))
    except Exception:  # deepcopy raises whatever the model's attributes raise
        with private_state(model, dtype) as m:
            yield m
        return
    yield m if dtype is None else m.to(dtype)


def _cast_memo(model: torch.nn.Module, dtype: Optional[torch.dtype]) -> Dict[int, torch.Tensor]:
    """A ``copy.deepcopy`` memo that makes the copy take ``dtype`` casts of ``model``'s
    floating parameters (plain ``nn.Parameter``s, ``requires_grad`` kept, no ``.grad`` — as
    ``Parameter.__deepcopy__`` makes them) and buffers (plain tensors) instead of float32
    copies that ``.to(dtype)`` would then replace: the float64 copy never holds a float32 copy
    of the weights besides. Empty without ``dtype``; other tensor types are copied and cast as
    before."""
    memo: Dict[int, torch.Tensor] = {}
    if dtype is None:
        return memo
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) in memo or not t.is_floating_point():
            continue
        if type(t) is torch.nn.Parameter:
            memo[id(t)] = torch.nn.Parameter(t.detach().to(dtype, copy=True), t.requires_grad)
        elif type(t) is torch.Tensor:
            memo[id(t)] = t.detach().to(dtype, copy=True)
    return memo


def _inputs(user_inputs: Sequence[torch.Tensor], dtype: Optional[torch.dtype],
            grad: bool) -> List[torch.Tensor]:
    return [fresh(x if dtype is None or not x.is_floating_point() else x.to(dtype),
                  grad and x.requires_grad) for x in user_inputs]


GradSink = Callable[[str, torch.Tensor], object]


def eager_train_run(model: torch.nn.Module, sig: ExportSignature,
                    user_inputs: Sequence[torch.Tensor],
                    dtype: Optional[torch.dtype] = None,
                    grad_sink: Optional[GradSink] = None) -> EagerTrainRun:
    """Training forward + backward (ones as cotangents) on a copy of ``model``; with
    ``dtype`` (float64 references, ``examples.py``) the copy's floating parameters, buffers
    and inputs are cast to it first.

    ``grad_sink``: called as ``grad_sink(fqn, grad)`` with each trainable parameter's
    gradient as soon as autograd has accumulated it (``_sinking_grads``); ``param_grads``
    keeps what it returns and the gradient is freed at once, so the run never holds every
    gradient (float64 references keep a few numbers per parameter instead of a float64 copy
    of the weights).

    Raises:
        ExportError: the model cannot be copied.
        Whatever the model's forward raises.
    """
    xs = _inputs(user_inputs, dtype, True)
    args, kwargs = sig.split(xs)
    sunk: Dict[str, object] = {}
    with _copy(model, dtype) as m, _seeded(), training_mode(m, True), torch.enable_grad(), \
            _sinking_grads(m, grad_sink, sunk):
        start = time.perf_counter()
        outs, spec = flat_outputs(m(*args, **kwargs), "forward()")
        diff = [i for i, o in enumerate(outs) if o.requires_grad and o.is_floating_point()]
        nodes = _autograd_nodes([outs[i] for i in diff])
        if diff:
            torch.autograd.backward([outs[i] for i in diff],
                                    [torch.ones_like(outs[i]) for i in diff])
        return EagerTrainRun(
            outputs=[o.detach() for o in outs], diff=diff, out_spec=spec,
            seconds=time.perf_counter() - start, autograd_nodes=nodes,
            param_grads={n: sunk.get(n) if grad_sink else p.grad
                         for n, p in m.named_parameters() if p.requires_grad},
            input_grads={i: x.grad for i, x in enumerate(xs) if x.requires_grad},
            buffers={n: b.detach() for n, b in m.named_buffers()})


def _autograd_nodes(outputs: List[torch.Tensor]) -> int:
    """Nodes of the autograd graph reachable from ``outputs``' ``grad_fn``s."""
    seen = set()
    stack = [o.grad_fn for o in outputs if o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(n for n, _ in node.next_functions)
    return len(seen)


@contextlib.contextmanager
def _sinking_grads(m: torch.nn.Module, sink: Optional[GradSink],
                   sunk: Dict[str, object]) -> Iterator[None]:
    """With a ``sink``: a post-hook on each trainable parameter's gradient accumulator (the
    ``AccumulateGrad`` node, which runs once per backward with the parameter's whole
    gradient, however many uses it has) hands ``.grad`` to the sink, stores the result in
    ``sunk[fqn]`` and sets ``.grad`` to None — ``torch.Tensor.register_post_accumulate_grad_hook``
    (torch >= 2.1) spelled so that torch 1.13 has it too. The accumulator nodes are held for
    the block: autograd keeps only a weak reference to them."""
    if sink is None:
        yield
        return
    accumulators, handles = [], []

    def post_hook(fqn: str, p: torch.Tensor):
        def hook(grad_inputs, grad_outputs):
            if p.grad is not None:
                sunk[fqn] = sink(fqn, p.grad)
                p.grad = None
        return hook

    for fqn, p in m.named_parameters():
        if p.requires_grad:
            acc = p.view_as(p).grad_fn.next_functions[0][0]
            accumulators.append(acc)
            handles.append(acc.register_hook(post_hook(fqn, p)))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def eager_eval_outputs(model: torch.nn.Module, sig: ExportSignature,
                       user_inputs: Sequence[torch.Tensor],
                       dtype: Optional[torch.dtype] = None, with_spec: bool = False) -> Any:
    """Eval-mode outputs (flat) under ``torch.no_grad()`` of a copy of ``model`` (``dtype``:
    as for ``eager_train_run``); with ``with_spec``, ``(outputs, out_spec)``, the pytree spec
    of forward()'s return value."""
    args, kwargs = sig.split(_inputs(user_inputs, dtype, False))
    with _copy(model, dtype) as m, _seeded(), training_mode(m, False), torch.no_grad():
        outs, spec = flat_outputs(m(*args, **kwargs), "forward()")
    return (outs, spec) if with_spec else outs
