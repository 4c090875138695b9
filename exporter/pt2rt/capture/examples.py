"""Bundled examples: the export's example inputs and eager PyTorch's answers on them.

``eager_example`` computes them with plain eager PyTorch on a copy of the model
(``eager_run.py``: ``model(*args)``, ``.backward()``; never through the capture's parameter
substitution, so a capture bug cannot hide in its own references):

* ``outputs``: eval-mode outputs under ``torch.no_grad()`` (what the inference graph gives);
* ``train_outputs``: training-mode forward outputs;
* ``grad_outputs``: ``ones_like`` of every differentiable output (floating, requires grad);
* ``grads``: the ``.grad`` of every trainable parameter (by FQN) and every user input that
  requires grad (``"input:<i>"``) after backward with those cotangents; unused ones (None) are
  omitted. Stored in full only with ``full_references=True`` (or for a gradient that cannot be
  sketched: not real floating); otherwise as ``grad_sketches`` (``grad_sketch.py``, schema
  1.2), with ``grad_sketch_seed`` = ``grad_sketch.DEFAULT_SEED``;
* ``buffers``: every buffer's value after the training forward (BatchNorm running stats and
  num_batches_tracked updated).

Float64 references (schema 1.5, ``float64=True``): for a float32 model the same runs are made
once more on a float64 copy (parameters, buffers and inputs cast), and each float32 reference
records how far it is from that: ``TensorData.float64_rmse`` (root-mean-square difference;
None where not computed) for outputs, training outputs, full gradients and buffers;
``GradSketch.float64`` (the float64 gradient's sketch) and ``GradSketch.float64_rmse`` for
sketched gradients. ``verify`` passes a quantity that fails the plain tolerance when the
runtime's result is about as close to float64 as eager float32 is
(dynamo's ``same()`` rule with ``fp64_ref``; schema/README.md "The float64 rule"): how kernels
on another device, or another LibTorch, round is then judged against the rounding eager float32
itself has. A model that makes float32 tensors of its own runs with float64 in their place
(``float64_mode.py``); models with other floating dtypes, or whose float64 copy does not run
either way, get none.
References are computed with TF32 off (``eager_run._seeded``).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

import torch

from ..format.serialize import tensor_data
from ..ir import grad_sketch
from ..ir.graph_ir import ExportSignature, WeightKind, WeightSpec
from ..ir.program_ir import Example, ExampleReferences
from .eager_run import EagerTrainRun, eager_eval_outputs, eager_train_run
from .float64_mode import float64_everywhere


def eager_example(model: torch.nn.Module, weights: Sequence[WeightSpec], sig: ExportSignature,
                  user_inputs: Sequence[torch.Tensor], *, train: bool, inference: bool,
                  name: str = "example0", train_run: Optional[EagerTrainRun] = None,
                  eval_outputs: Optional[List[torch.Tensor]] = None,
                  full_references: bool = False, float64: bool = True) -> Example:
    """The bundled Example for ``user_inputs``; see the module docstring. ``train_run`` and
    ``eval_outputs``: an ``eager_train_run`` and ``eager_eval_outputs`` already made on these
    inputs (reused, not recomputed)."""
    refs = ExampleReferences()
    with torch.random.fork_rng(devices=[]):
        run, grads, sketched = None, [], set()
        if train:
            run = train_run or eager_train_run(model, sig, user_inputs)
            grads = [(w.fqn, run.param_grads.get(w.fqn)) for w in weights
                     if w.kind is WeightKind.Parameter and w.requires_grad]
            grads += [(f"input:{i}", g) for i, g in sorted(run.input_grads.items())]
            grads = [(k, g) for k, g in grads if g is not None]
            sketched = set() if full_references else {k for k, g in grads
                                                      if grad_sketch.sketchable(g)}
            if sketched:  # before the float64 run, whose sink sketches with the same signs
                refs.grad_sketch_seed = grad_sketch.DEFAULT_SEED
                refs.grad_sketches = grad_sketch.compute_all(
                    [(k, g) for k, g in grads if k in sketched], refs.grad_sketch_seed)
        eval64, run64 = (_float64_runs(model, sig, user_inputs, train=train, inference=inference,
                                       grad_sink=_Float64Grads(run, sketched))
                         if float64 else (None, None))
        if inference:
            outs = eval_outputs if eval_outputs is not None else \
                eager_eval_outputs(model, sig, user_inputs)
            refs.outputs = [_reference(o, eval64, i) for i, o in enumerate(outs)]
        if run is not None:
            refs.train_outputs = [_reference(o, run64 and run64.outputs, i)
                                  for i, o in enumerate(run.outputs)]
            refs.grad_outputs = [tensor_data(torch.ones_like(run.outputs[i])) for i in run.diff]
            grads64 = _grads64(run64, dict(grads), sketched) if run64 is not None else {}
            refs.grads = [(k, _reference(g, grads64, k)) for k, g in grads if k not in sketched]
            for s in refs.grad_sketches if sketched else ():
                g64 = grads64.get(s.name)
                if g64 is not None and g64.sketch is not None:
                    s.float64 = g64.sketch
                    s.float64.dtype = s.dtype
                    s.float64_rmse = g64.rmse
            buffers64 = run64.buffers if run64 is not None else {}
            refs.buffers = [(w.fqn, _reference(run.buffers[w.fqn], buffers64, w.fqn))
                            for w in weights if w.kind is WeightKind.Buffer]
    return Example(name, [tensor_data(x) for x in user_inputs], refs)


@dataclass
class _Float64Grad:
    """What the float64 run keeps of a parameter's gradient: its RMSE against the float32
    gradient, and its sketch where the float32 gradient is sketched."""

    rmse: Optional[float]
    sketch: Optional[object] = None


class _Float64Grads:
    """The float64 training run's ``grad_sink`` (``eager_run.eager_train_run``): each float64
    parameter gradient is reduced to a ``_Float64Grad`` as soon as autograd has it, so the run
    never holds a float64 copy of every gradient (twice the weights) at once."""

    def __init__(self, run: Optional[EagerTrainRun], sketched: Set[str]):
        self.run_, self.sketched_ = run, sketched

    def __call__(self, fqn: str, g64: torch.Tensor) -> Optional[_Float64Grad]:
        g32 = self.run_.param_grads.get(fqn) if self.run_ is not None else None
        return _float64_grad(fqn, g32, g64, fqn in self.sketched_)


def _float64_grad(name: str, g32: object, g64: torch.Tensor,
                  sketch: bool) -> Optional[_Float64Grad]:
    """``g64`` reduced against the float32 gradient ``g32`` (None unless both are real
    floating tensors of one shape); ``sketch``: with its sketch (``grad_sketch.DEFAULT_SEED``
    and projections)."""
    if not isinstance(g32, torch.Tensor) or not g32.is_floating_point() \
            or g32.shape != g64.shape:
        return None
    out = _Float64Grad(_rmse(g32, g64))
    if sketch:
        out.sketch = grad_sketch.compute(name, g64, grad_sketch.DEFAULT_SEED,
                                         grad_sketch.DEFAULT_PROJECTIONS)
    return out


def _float64_runs(model: torch.nn.Module, sig: ExportSignature,
                  user_inputs: Sequence[torch.Tensor], *, train: bool, inference: bool,
                  grad_sink: Optional[_Float64Grads] = None
                  ) -> Tuple[Optional[List[torch.Tensor]], Optional[EagerTrainRun]]:
    """(eval outputs, training run) of a float64 copy of a float32 model; (None, None) when
    the model holds another floating dtype or its float64 copy fails to run (module
    docstring). The training run's parameter gradients go through ``grad_sink``."""
    floating = [t for t in list(model.parameters()) + list(model.buffers()) + list(user_inputs)
                if t.is_floating_point()]
    if not floating or any(t.dtype != torch.float32 for t in floating):
        return None, None
    # First the plain float64 copy; when it fails (a model that makes float32 tensors of its
    # own mixes them with float64), again with float64 wherever its code asks for float32.
    for mode in (contextlib.nullcontext, float64_everywhere):
        try:
            with mode():
                outs = eager_eval_outputs(model, sig, user_inputs, torch.float64) \
                    if inference else None
                run = eager_train_run(model, sig, user_inputs, torch.float64,
                                      grad_sink=grad_sink) if train else None
            return outs, run
        except Exception:  # noqa: BLE001 - whatever a float64 copy raises: try the next
            continue
    return None, None


def _grads64(run64: EagerTrainRun, grads32: Dict[str, torch.Tensor],
             sketched: Set[str]) -> Dict[str, _Float64Grad]:
    """The float64 run's gradients by reference name, each a ``_Float64Grad``: the parameters'
    as its sink reduced them, the user inputs' (kept whole by the run) reduced here."""
    out = {k: g for k, g in run64.param_grads.items() if g is not None}
    for i, g64 in run64.input_grads.items():
        k = f"input:{i}"
        reduced = None if g64 is None else _float64_grad(k, grads32.get(k), g64, k in sketched)
        if reduced is not None:
            out[k] = reduced
    return out


def _rmse(t: torch.Tensor, ref: torch.Tensor) -> Optional[float]:
    """Root-mean-square difference of two tensors of one shape, in float64 on the CPU; None
    when not finite. One float64 temporary (the difference; the float32 side is promoted by
    the subtraction, not copied first): the float64 run's gradient sink calls this inside the
    backward, at the run's memory peak."""
    diff = (t.detach().cpu() - ref.detach().cpu()).to(torch.float64)
    if not diff.numel():
        return 0.0
    rmse = float(torch.linalg.vector_norm(diff)) / math.sqrt(diff.numel())
    return rmse if math.isfinite(rmse) else None


def _reference(t: torch.Tensor, float64: Optional[object], key: object):
    """``tensor_data(t)`` with its float64 RMSE when ``float64[key]`` (a list or dict of the
    float64 run's values) is a floating tensor of ``t``'s shape, or a ``_Float64Grad``."""
    data = tensor_data(t)
    ref = None
    if isinstance(float64, dict):
        ref = float64.get(key)
    elif isinstance(float64, list) and isinstance(key, int) and key < len(float64):
        ref = float64[key]
    if isinstance(ref, _Float64Grad):  # a parameter gradient the float64 run reduced
        data.float64_rmse = ref.rmse
    elif isinstance(ref, torch.Tensor) and t.is_floating_point() and ref.shape == t.shape:
        data.float64_rmse = _rmse(t, ref)
    return data
