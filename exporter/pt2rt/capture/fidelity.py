"""Checks that refuse an export which would silently train differently from eager PyTorch.

* ``check_no_aliased_constants``: a lifted tensor constant (``Constant`` input) that shares
  storage with a parameter or buffer means the capture read that weight through a reference it
  did not substitute (``nn.RNNBase._flat_weights`` before ``model_call.substituted`` swapped
  them, a user list of parameters, a view kept as an attribute): the graph would use the
  weight's export-time value forever and never produce its gradient. Always an error.
* ``check_gradient_paths``: from a plain eager run (``eager_run.eager_train_run``): if the model
  has trainable parameters but no output requires grad (``forward`` under
  ``@torch.no_grad()``), or no trainable parameter gets a gradient, eager's
  ``loss.backward()`` would fail or train nothing, so the export fails; trainable parameters
  that get no gradient are returned (the caller warns and records them in the archive's
  metadata, ``params_without_grad``).
* ``check_tangents``: every output that is differentiable in eager has a ``Tangent`` input in
  the joint graph; otherwise the backward would silently drop the gradient flowing through it.
* ``check_output_types``: every user output of the captured forward graph has eager's dtype
  and shape on the example inputs (a decomposition that changes an output's shape — torch
  2.11's LSTM final states, ``decompositions.lstm_final_state_fix`` — is refused, not
  exported).
* ``check_same_structure``: forward() returns the same structure (pytree spec) in training
  and in eval mode — an archive has one (``Program.output_names``); torchvision's GoogLeNet
  and Inception3 return their auxiliary logits in training only.
* ``check_output_values``: the captured graph, run on the example inputs, gives eager's values
  (the inference graph against an eval-mode forward, the forward graph against the training
  forward); ``check_buffer_values`` the same for every buffer after the training step (eager
  updates BatchNorm statistics a second time when the backward recomputes a checkpointed
  region; AOTAutograd's graphs once), and ``check_gradient_values`` for the backward graph's
  gradients of parameters and user inputs (ones as output gradients, as eager's run). A
  capture that took another path than eager did (``eager_paths.py``) is refused instead of
  exported. The bound is loose (``VALUE_RTOL``:
  the RMS of the difference within 1 % of the RMS of eager's output; integer outputs: at most
  1 % of the elements differ): the graphs may compute with other decompositions and kernels
  than eager, whose rounding (~1e-6 relative in float32) deep or iterative models amplify,
  and a near-tie (an argmax, a max-pool window) may go the other way in a few elements. A
  different computation (a branch eager took and the trace did not) moves the output by far
  more. ``export-cli verify`` checks the archive closely afterwards.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

import torch

from ..errors import CaptureError, ExportError
from ..ir.descriptors import InputDescriptor, InputKind, OutputKind
from ..ir.graph_ir import DescribedGraph, WeightKind, WeightSpec
from ..passes.annotate import META_KEY
from .eager_run import EagerTrainRun


def _storage_key(t: torch.Tensor):
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return (t.device, storage.data_ptr())


def _module_of(model: torch.nn.Module, fqn: str) -> str:
    path = fqn.rpartition(".")[0]
    mod = model.get_submodule(path) if path else model
    return f"{type(mod).__name__} {path!r}" if path else f"{type(mod).__name__} (the root)"


def _scripted_owner(model: torch.nn.Module, fqn: str):
    """The FQN of the outermost TorchScript submodule (``torch.jit.ScriptModule``) on the path
    to weight ``fqn``, or None (the root is never one: ``capture.check_model_type``)."""
    parts = fqn.split(".")[:-1]
    for i in range(1, len(parts) + 1):
        path = ".".join(parts[:i])
        if isinstance(model.get_submodule(path), torch.jit.ScriptModule):
            return path
    return None


def check_no_aliased_constants(model: torch.nn.Module, weights: Sequence[WeightSpec]) -> None:
    """Raises CaptureError naming the parameter/buffer FQN and its module if a ``Constant``
    weight shares storage with a parameter or buffer of ``model``."""
    owners: Dict[tuple, str] = {}
    for w in weights:
        if w.kind is not WeightKind.Constant and w.tensor.numel() > 0:
            owners.setdefault(_storage_key(w.tensor), w.fqn)
    for w in weights:
        if w.kind is WeightKind.Constant and w.tensor.numel() > 0:
            fqn = owners.get(_storage_key(w.tensor))
            if fqn is not None:
                kind = next(x.kind.name.lower() for x in weights if x.fqn == fqn)
                scripted = _scripted_owner(model, fqn)
                how = (f"the TorchScript module {scripted!r} (torch.jit.script / trace) runs "
                       "in TorchScript's interpreter, which reads its weights itself; export "
                       "the nn.Module it was scripted from"
                       if scripted is not None else
                       "the model reads it through a reference the capture cannot substitute "
                       "(a tensor attribute or list aliasing it, or a view of it)")
                remedy = "" if scripted is not None else \
                    ". Read the parameter through its module attribute in forward()"
                raise CaptureError(
                    f"pt2rt.export: {kind} {fqn!r} of {_module_of(model, fqn)} was captured "
                    f"as a constant ({w.fqn}): {how}; the exported graphs would never update "
                    f"it nor compute its gradient{remedy}")


def check_gradient_paths(model: torch.nn.Module, run: EagerTrainRun) -> List[str]:
    """The trainable parameters (FQNs) without a gradient path, see the module docstring.

    Raises:
        CaptureError: trainable parameters exist but no output requires grad, or none of them
            gets a gradient.
    """
    trainable = list(run.param_grads)
    if not trainable:
        return []
    name = type(model).__name__
    if not run.diff:
        raise CaptureError(
            f"pt2rt.export: no output of {name}.forward() requires grad although "
            f"{len(trainable)} parameters are trainable (is forward() decorated with "
            "@torch.no_grad() or run under torch.no_grad()/inference_mode, or are the outputs "
            "detached?); eager's loss.backward() would raise 'element 0 of tensors does not "
            "require grad'. Export with train=False for inference only")
    unused = [fqn for fqn, g in run.param_grads.items() if g is None]
    if len(unused) == len(trainable):
        raise CaptureError(
            f"pt2rt.export: no trainable parameter of {name} has a gradient path to the "
            f"outputs ({', '.join(unused)}); training would change nothing. Export with "
            "train=False, or freeze them (requires_grad_(False))")
    return unused


def check_tangents(model: torch.nn.Module, run: EagerTrainRun,
                   joint_inputs: Sequence[InputDescriptor]) -> None:
    """Raises CaptureError naming the outputs that require grad in eager but have no
    ``Tangent`` in the captured joint graph."""
    tangents = {d.output.idx for d in joint_inputs if d.kind is InputKind.Tangent}
    missing = [i for i in run.diff if i not in tangents]
    if missing:
        raise CaptureError(
            f"pt2rt.export: forward() outputs {missing} of {type(model).__name__} require grad "
            "in eager PyTorch but the captured backward takes no cotangent for them (the "
            "capture treated them as aliases); their gradient contribution would be lost")


def check_output_types(model: torch.nn.Module, run: EagerTrainRun,
                       forward: DescribedGraph) -> None:
    """Raises CaptureError naming the first user output whose dtype or shape in the captured
    forward graph (as run on the example inputs, ``annotate.py``) differs from eager's."""
    for node, d in zip(forward.output_values(), forward.outputs):
        if d.kind is not OutputKind.Plain or node is None or d.idx >= len(run.outputs):
            continue
        info = node.meta.get(META_KEY)
        want = run.outputs[d.idx]
        if info is None or not hasattr(info, "sizes"):
            continue
        if tuple(info.sizes) != tuple(want.shape) or info.dtype != want.dtype:
            raise CaptureError(
                f"pt2rt.export: forward() output {d.idx} of {type(model).__name__} is "
                f"{want.dtype} {list(want.shape)} in eager PyTorch but {info.dtype} "
                f"{list(info.sizes)} in the captured graph (torch {torch.__version__}): a "
                "decomposition changed the computation; the archive would not reproduce the "
                "model")


VALUE_RTOL = 1e-2   # RMS of the difference, relative to the RMS of eager's output
VALUE_ATOL = 1e-5   # RMS of the difference allowed for outputs near 0
VALUE_MISMATCH = 1e-2  # fraction of elements allowed to differ (integer outputs, non-finite)
# Gradients: a difference below this fraction of the RMS of all the model's gradients is
# rounding noise wherever it lands. A gradient that is 0 analytically (a BatchNorm bias whose
# output a later normalization removes) is float32 noise on both sides, ~1e-5 of the others
# (efficientnet_v2_s, batch 2: 1e2 against an RMS of 2e7 with ones as output gradients),
# uncorrelated between two computations that round differently.
GRAD_NOISE_FLOOR = 1e-4


def value_difference(got: torch.Tensor, want: torch.Tensor,
                     atol: float = VALUE_ATOL) -> Optional[str]:
    """None when ``got`` (the captured graph's output) is close enough to ``want`` (eager's),
    see the module docstring, the RMS of the difference within ``VALUE_RTOL`` of ``want``'s
    RMS + ``atol``; else what differs, e.g. "RMS difference 3.1e-01 against an RMS of
    9.2e-01"."""
    if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
        return (f"{want.dtype} {list(want.shape)} in eager PyTorch but {got.dtype} "
                f"{list(got.shape)} in the captured graph")
    got, want = got.detach().cpu(), want.detach().cpu()
    if not want.numel():
        return None
    if not (want.is_floating_point() or want.is_complex()):
        differ = int((got != want).sum())
        return None if differ <= VALUE_MISMATCH * want.numel() else \
            f"{differ} of {want.numel()} elements differ"
    wide = torch.complex128 if want.is_complex() else torch.float64
    got, want = got.to(wide), want.to(wide)
    finite = torch.isfinite(got) & torch.isfinite(want)
    one_sided = int((torch.isfinite(got) != torch.isfinite(want)).sum())
    if one_sided > VALUE_MISMATCH * want.numel():
        return f"{one_sided} of {want.numel()} elements are finite in one and not the other"
    n = int(finite.sum())
    if not n:
        return None
    diff = float(torch.linalg.vector_norm(torch.where(finite, got - want, 0))) / math.sqrt(n)
    scale = float(torch.linalg.vector_norm(torch.where(finite, want, 0))) / math.sqrt(n)
    if diff <= VALUE_RTOL * scale + atol:
        return None
    return f"RMS difference {diff:.1e} against an RMS of {scale:.1e}"


def check_output_values(model: torch.nn.Module, graph: str, eager_run: str,
                        got: Sequence[Optional[torch.Tensor]], want: Sequence[torch.Tensor],
                        hints: Sequence[str] = ()) -> None:
    """Raises CaptureError naming the first user output (flat index) where ``got`` (the
    ``graph`` captured from ``model``, run on the example inputs) differs from ``want`` (eager
    PyTorch's ``eager_run`` on the same inputs) by more than ``value_difference`` allows;
    ``hints``: ``eager_paths.value_dependent_paths(model)``, appended as likely causes."""
    for i, (g, w) in enumerate(zip(got, want)):
        if g is None or not isinstance(w, torch.Tensor):
            continue
        what = value_difference(g, w)
        if what is not None:
            same_type = g.shape == w.shape and g.dtype == w.dtype
            cause = ("; " + "; ".join(hints)) if hints else (
                ": eager PyTorch took a path the trace did not (a branch on a tensor's values "
                "or on whether it is traced)" if same_type else
                ": a decomposition or a path eager did not take changed the computation")
            raise CaptureError(
                f"pt2rt.export: the {graph} captured from {type(model).__name__} (torch "
                f"{torch.__version__}) does not reproduce eager PyTorch's {eager_run} on the "
                f"example inputs: output {i} {'differs: ' if same_type else 'is '}{what}{cause}")


def check_buffer_values(model: torch.nn.Module, got: Dict[str, torch.Tensor],
                        want: Dict[str, torch.Tensor]) -> None:
    """Raises CaptureError naming the first buffer (FQN, module) whose value after the
    captured forward graph (``got``) differs from its value after eager PyTorch's training
    step (``want``: forward and backward, ``eager_run.EagerTrainRun.buffers``) by more than
    ``value_difference`` allows. The likely cause is named: a buffer-updating module
    (BatchNorm) inside ``torch.utils.checkpoint``, which eager updates again when the backward
    recomputes the checkpointed region, where the captured graphs update it once."""
    for fqn, w in want.items():
        g = got.get(fqn)
        if g is None or not isinstance(w, torch.Tensor):
            continue
        what = value_difference(g, w)
        if what is not None:
            raise CaptureError(
                f"pt2rt.export: buffer {fqn!r} of {_module_of(model, fqn)} after the captured "
                f"forward graph differs from its value after eager PyTorch's training step on "
                f"the example inputs (torch {torch.__version__}): {what}. Eager updated it "
                "where the graphs do not — e.g. BatchNorm inside torch.utils.checkpoint, whose "
                "running statistics eager updates again when the backward recomputes the "
                "checkpointed region (torchvision's DenseNet with memory_efficient=True); keep "
                "buffer-updating modules out of checkpointed regions to export")


def _gradient_difference(got: torch.Tensor, want: torch.Tensor, want_norm: float,
                         atol: float) -> Optional[str]:
    """``value_difference(got, want, atol)``, decided in ``want``'s own dtype where that is
    enough — one subtraction and one norm: resnet18's 11.7 M gradient elements in 0.01 s
    instead of 0.25 s in float64 — and in float64 (with its report) where the gradient is
    not finite or the bound does not plainly hold."""
    if got.shape == want.shape and got.dtype == want.dtype and math.isfinite(want_norm) \
            and want.numel():
        diff = float(torch.linalg.vector_norm(got - want.to(got.device)))
        bound = VALUE_RTOL * want_norm + atol * math.sqrt(want.numel())  # value_difference's
        if math.isfinite(diff) and diff <= bound:                          # bound, as norms
            return None
    return value_difference(got, want, atol=atol)


def check_gradient_values(model: torch.nn.Module, run: Any, eager: Any,
                          hints: Sequence[str] = ()) -> None:
    """Raises CaptureError naming the first parameter (FQN, module) or user input whose
    gradient from the captured backward graph (``run``: ``capture.AnnotatedRun``, ones as
    tangents) differs from eager PyTorch's (``eager``: ``eager_run.EagerTrainRun``, the same
    cotangents) by more than ``value_difference`` allows: a backward that is not the model's
    trains it silently wrong. Each gradient is held to ``value_difference``'s bound plus
    ``GRAD_NOISE_FLOOR`` times the RMS of all of eager's floating gradients. Gradients that
    exist on one side only are ``check_gradient_paths``' concern; ``hints`` as for
    ``check_output_values``."""
    pairs = [(f"parameter {fqn!r} of {_module_of(model, fqn)}", g, eager.param_grads.get(fqn))
             for fqn, g in run.param_grads.items()]
    pairs += [(f"user input {i}", g, eager.input_grads.get(i))
              for i, g in run.input_grads.items()]
    pairs = [(what, got, want.detach()) for what, got, want in pairs
             if isinstance(want, torch.Tensor) and want.is_floating_point()]
    count = sum(want.numel() for _, _, want in pairs)
    if not count:
        return
    norms = [float(torch.linalg.vector_norm(want)) for _, _, want in pairs]
    squares = sum(n * n for n in norms if math.isfinite(n))
    floor = GRAD_NOISE_FLOOR * math.sqrt(squares / count)
    for (what, got, want), norm in zip(pairs, norms):
        differs = _gradient_difference(got.detach(), want, norm, VALUE_ATOL + floor)
        if differs is not None:
            cause = ("; " + "; ".join(hints)) if hints else (
                ": a custom autograd.Function, a hook or a decomposition's backward the "
                "capture did not reproduce")
            raise CaptureError(
                f"pt2rt.export: the backward graph captured from {type(model).__name__} (torch "
                f"{torch.__version__}) does not reproduce eager PyTorch's gradient of {what} on "
                f"the example inputs (ones as output gradients): {differs}{cause}")


def check_eager_reproducible(model: torch.nn.Module, first: Any, second: Any) -> None:
    """Raises CaptureError when two eager training steps (``eager_run.EagerTrainRun``, the same
    example inputs, seed and cotangents) give different gradients — what
    ``check_gradient_values``' failure then means is that eager PyTorch itself is not
    reproducible there (a nondeterministic kernel, or one reading memory it did not initialise:
    torch 1.13's CPU GroupNorm backward in torchaudio's wav2vec2 feature extractor), not that
    the capture lost a hook. Returns quietly when they agree."""
    for fqn, a in first.param_grads.items():
        b = second.param_grads.get(fqn)
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            continue
        what = value_difference(b.detach(), a.detach())
        if what is not None:
            raise CaptureError(
                f"pt2rt.export: eager PyTorch does not reproduce its own gradient of parameter "
                f"{fqn!r} of {_module_of(model, fqn)}: two training steps on the same example "
                f"inputs and seed differ ({what}) — a nondeterministic kernel, or one that reads "
                f"uninitialised memory, in torch {torch.__version__}'s backward of that module; "
                "the captured backward graph cannot be checked against it (export on another "
                "torch version, or replace the module)")


def _describe(spec: object) -> str:
    kind = getattr(spec, "type", None)
    if kind is None:
        return "a tensor"
    context = getattr(spec, "context", None)
    name = context.__name__ if isinstance(context, type) else kind.__name__  # namedtuple class
    return f"a {name} of {getattr(spec, 'num_leaves', '?')} tensors"


def check_same_structure(model: torch.nn.Module, train_spec: object, eval_spec: object) -> None:
    """Raises ExportError when forward()'s return value has another pytree structure in
    training mode (``train_spec``) than in eval mode (``eval_spec``), naming both and the
    remedy: export each mode on its own (``train=False`` / ``inference=False``)."""
    if train_spec is None or eval_spec is None or train_spec == eval_spec:
        return
    raise ExportError(
        f"pt2rt.export: {type(model).__name__}.forward returns {_describe(train_spec)} in "
        f"training mode but {_describe(eval_spec)} in eval mode; an archive has one output "
        "structure: export the two modes as two archives, pt2rt.export(..., inference=False) "
        "for training and pt2rt.export(..., train=False) for inference")
