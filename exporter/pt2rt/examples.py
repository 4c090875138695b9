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
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from . import grad_sketch
from .eager_run import EagerTrainRun, eager_eval_outputs, eager_train_run
from .graph_ir import ExportSignature, WeightKind, WeightSpec
from .program_ir import Example, ExampleReferences
from .serialize import tensor_data


def eager_example(model: torch.nn.Module, weights: Sequence[WeightSpec], sig: ExportSignature,
                  user_inputs: Sequence[torch.Tensor], *, train: bool, inference: bool,
                  name: str = "example0", train_run: Optional[EagerTrainRun] = None,
                  full_references: bool = False) -> Example:
    """The bundled Example for ``user_inputs``; see the module docstring. ``train_run``: an
    ``eager_train_run`` already made on these inputs (it is reused, not recomputed)."""
    refs = ExampleReferences()
    with torch.random.fork_rng(devices=[]):
        if inference:
            refs.outputs = [tensor_data(o) for o in eager_eval_outputs(model, sig, user_inputs)]
        if train:
            run = train_run or eager_train_run(model, sig, user_inputs)
            refs.train_outputs = [tensor_data(o) for o in run.outputs]
            refs.grad_outputs = [tensor_data(torch.ones_like(run.outputs[i])) for i in run.diff]
            grads = [(w.fqn, run.param_grads.get(w.fqn)) for w in weights
                     if w.kind is WeightKind.Parameter and w.requires_grad]
            grads += [(f"input:{i}", g) for i, g in sorted(run.input_grads.items())]
            grads = [(k, g) for k, g in grads if g is not None]
            sketched = [] if full_references else [(k, g) for k, g in grads
                                                   if grad_sketch.sketchable(g)]
            names = {k for k, _ in sketched}
            refs.grads = [(k, tensor_data(g)) for k, g in grads if k not in names]
            if sketched:
                refs.grad_sketch_seed = grad_sketch.DEFAULT_SEED
                refs.grad_sketches = grad_sketch.compute_all(sketched, refs.grad_sketch_seed)
            refs.buffers = [(w.fqn, tensor_data(run.buffers[w.fqn])) for w in weights
                            if w.kind is WeightKind.Buffer]
    return Example(name, [tensor_data(x) for x in user_inputs], refs)
