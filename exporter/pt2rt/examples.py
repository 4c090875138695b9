"""Bundled examples: the export's example inputs and eager PyTorch's answers on them.

``eager_example`` computes, without touching the model's own state (``functional_call`` on
copies of the weights):

* ``outputs``: eval-mode outputs under ``torch.no_grad()`` (what the inference graph gives);
* ``train_outputs``: training-mode forward outputs;
* ``grad_outputs``: ``ones_like`` of every differentiable output (floating, requires grad);
* ``grads``: ``torch.autograd.grad`` of those outputs w.r.t. every trainable parameter (by FQN)
  and every user input that requires grad (``"input:<i>"``); unused ones (None) are omitted;
* ``buffers``: every buffer's value after the training forward (BatchNorm running stats and
  num_batches_tracked updated).
"""
from __future__ import annotations

from typing import List, Sequence

import torch

from .graph_ir import ExportSignature, WeightKind, WeightSpec
from .model_call import call_model, flat_outputs, fresh, state_names, training_mode
from .program_ir import Example, ExampleReferences
from .serialize import tensor_data


def eager_example(model: torch.nn.Module, weights: Sequence[WeightSpec], sig: ExportSignature,
                  user_inputs: Sequence[torch.Tensor], *, train: bool, inference: bool,
                  name: str = "example0") -> Example:
    """The bundled Example for ``user_inputs``; see the module docstring."""
    weights = [w for w in weights if w.kind is not WeightKind.Constant]
    names = state_names(model, weights)
    refs = ExampleReferences()
    with torch.random.fork_rng(devices=[]):
        if inference:
            with training_mode(model, False), torch.no_grad():
                state = [fresh(w.tensor) for w in weights]
                outs, _ = flat_outputs(call_model(model, names, state, sig,
                                                  [fresh(x) for x in user_inputs]), "forward()")
            refs.outputs = [tensor_data(o) for o in outs]
        if train:
            with training_mode(model, True), torch.enable_grad():
                state = [fresh(w.tensor, w.kind is WeightKind.Parameter and w.requires_grad)
                         for w in weights]
                xs = [fresh(x, x.requires_grad) for x in user_inputs]
                outs, _ = flat_outputs(call_model(model, names, state, sig, xs), "forward()")
                diff = [o for o in outs if o.requires_grad and o.is_floating_point()]
                ones = [torch.ones_like(o) for o in diff]
                targets: List[torch.Tensor] = []
                keys: List[str] = []
                for w, t in zip(weights, state):
                    if w.kind is WeightKind.Parameter and w.requires_grad:
                        targets.append(t)
                        keys.append(w.fqn)
                for i, x in enumerate(xs):
                    if x.requires_grad:
                        targets.append(x)
                        keys.append(f"input:{i}")
                grads = torch.autograd.grad(diff, targets, ones, allow_unused=True) \
                    if diff and targets else [None] * len(targets)
            refs.train_outputs = [tensor_data(o) for o in outs]
            refs.grad_outputs = [tensor_data(g) for g in ones]
            refs.grads = [(k, tensor_data(g)) for k, g in zip(keys, grads) if g is not None]
            refs.buffers = [(w.fqn, tensor_data(t)) for w, t in zip(weights, state)
                            if w.kind is WeightKind.Buffer]
    return Example(name, [tensor_data(x) for x in user_inputs], refs)
