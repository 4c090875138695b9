"""The capture seam: validate ``export``'s arguments, collect weights, pick a capture backend.

A backend turns (model, weights, signature, example inputs) into the intermediate form of
``graph_ir``: a joint ``CapturedJoint`` and an inference ``DescribedGraph``. Two exist, chosen
by ``select_backend`` from what the running torch provides:

* ``capture_torch1`` (torch 1.13): ``make_fx`` + ``functionalize``; descriptors assigned by the
  capture itself (it builds the joint function, so it knows what each input is);
* ``capture_torch2`` (torch >= 2.9): ``aot_export_joint_with_descriptors``; descriptors taken
  from AOTAutograd's ``meta['desc']``.

Each provides ``capture_joint``, ``capture_inference`` (both taking ``decompositions=``) and
``CAPTURE_NAME``; the partitioner, lowering and serializer are shared.
"""
from __future__ import annotations

import inspect
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from ..errors import CaptureError, ExportError, ExportTypeError
from ..ir.descriptors import InputDescriptor, InputKind, OutputDescriptor, OutputKind
from ..ir.graph_ir import (CapturedProgram, ConstantTable, ExportSignature, GraphRole, WeightKind,
                           WeightSpec)
from ..ir.input_spec import InputSpec, flatten as flatten_input
from ..passes import export_policy
from ..passes.annotate import annotate
from ..passes.graph_passes import (integral_sizes_without_floats, symint_operands_as_tensors,
                                   zero_tangents_of_parameter_mutations)
from ..passes.partition import PARTITIONERS, partition
from . import portability
from .dynamic import flatten_structured as flatten_structured_shapes
from .dynamic import normalize as normalize_dynamic_shapes
from .eager_paths import value_dependent_paths
from .eager_run import REFERENCE_RNG_SEED, EagerTrainRun, eager_eval_outputs, eager_train_run
from .fidelity import (check_buffer_values, check_eager_reproducible, check_gradient_paths,
                       check_gradient_values, check_no_aliased_constants, check_output_types,
                       check_output_values, check_same_structure, check_tangents)
from .model_call import restored_attributes


def select_backend() -> types.ModuleType:
    """The capture module for the running torch: ``capture_torch2`` where
    ``torch._functorch.aot_autograd.aot_export_joint_with_descriptors`` exists (torch >= 2.9),
    ``capture_torch1`` on torch 1.x.

    Raises:
        ExportError: torch 2.0 - 2.8 (neither path applies).
    """
    major = int(torch.__version__.split(".")[0])
    if major < 2:
        from .torch1 import capture_torch1
        return capture_torch1
    from torch._functorch import aot_autograd
    if hasattr(aot_autograd, "aot_export_joint_with_descriptors"):
        from .torch2 import capture_torch2
        return capture_torch2
    raise ExportError(f"pt2rt.export: torch {torch.__version__} is not supported: the torch 2 "
                      "capture needs torch >= 2.9 (aot_export_joint_with_descriptors); "
                      "torch 1.13 uses make_fx")


def check_decompositions(decompositions: Any) -> Optional[Dict[Any, Callable]]:
    """``decompositions=``: None, or a dict from ATen op (``torch._ops.OpOverload``, or an
    ``OpOverloadPacket`` standing for all its overloads) to a callable, as
    ``torch._decomp.get_decompositions`` returns it.

    Raises:
        ExportTypeError: anything else, naming the offending entry.
    """
    if decompositions is None:
        return None
    if not isinstance(decompositions, dict):
        raise ExportTypeError(f"pt2rt.export: decompositions must be a dict from ATen op to "
                              f"callable, got {type(decompositions).__name__}")
    table: Dict[Any, Callable] = {}
    for op, fn in decompositions.items():
        if not callable(fn):
            raise ExportTypeError(f"pt2rt.export: decompositions[{op}] is not callable")
        if isinstance(op, torch._ops.OpOverloadPacket):
            for name in op.overloads():
                table[getattr(op, name)] = fn
        elif isinstance(op, torch._ops.OpOverload):
            table[op] = fn
        else:
            raise ExportTypeError(f"pt2rt.export: decompositions key {op!r} is not an ATen op "
                                  "(torch.ops.aten.<name>.<overload>)")
    return table


def collect_weights(model: torch.nn.Module) -> List[WeightSpec]:
    """Parameters (``named_parameters()`` order, frozen ones included), then buffers
    (``named_buffers()`` order, non-persistent ones flagged).

    Raises:
        ExportError: a parameter or buffer is still uninitialized (a lazy module such as
            ``nn.LazyLinear`` before its first call: ``torch.nn.parameter.is_lazy``).
    """
    from torch.nn.parameter import is_lazy
    for fqn, t in list(model.named_parameters()) + list(model.named_buffers()):
        if is_lazy(t):
            path = fqn.rpartition(".")[0]
            owner = type(model.get_submodule(path) if path else model).__name__
            raise ExportError(
                f"pt2rt.export: {fqn!r} of {owner} is uninitialized (a lazy module, whose "
                "shapes the first call fixes); call the model once on an example input, "
                "model(*args), before exporting it")
    weights = [WeightSpec(fqn, WeightKind.Parameter, p, True, p.requires_grad)
               for fqn, p in model.named_parameters()]
    non_persistent = set()
    for mod_fqn, mod in model.named_modules():
        for name in getattr(mod, "_non_persistent_buffers_set", ()):
            non_persistent.add(f"{mod_fqn}.{name}" if mod_fqn else name)
    weights += [WeightSpec(fqn, WeightKind.Buffer, b, fqn not in non_persistent, False)
                for fqn, b in model.named_buffers()]
    return weights


def make_signature(model: torch.nn.Module, args: Sequence[Any],
                   kwargs: Dict[str, Any]) -> Tuple[ExportSignature, List[torch.Tensor]]:
    """Binds ``args``/``kwargs`` to ``model.forward``'s parameters and flattens them.

    Raises:
        ExportTypeError: an input is not a tensor or a tuple, list or str-keyed dict of them
            (``input_spec.flatten``), or kwargs is not a dict of str.
        ExportError: the arguments do not match forward()'s signature.
    """
    try:
        sig = inspect.signature(model.forward)
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise ExportError(f"pt2rt.export: the example inputs do not match "
                          f"{type(model).__name__}.forward{inspect.signature(model.forward)}: {e}"
                          ) from e
    params: List[str] = []
    specs: List[InputSpec] = []
    names: List[str] = []
    flat: List[torch.Tensor] = []
    passed = [(_positional_name(sig, i), a) for i, a in enumerate(args)]
    order = list(sig.parameters)
    passed += [(n, kwargs[n]) for n in sorted(kwargs, key=lambda n: order.index(n)
                                              if n in order else len(order))]
    for param, value in passed:
        spec, leaves = flatten_input(value, param)
        params.append(param)
        specs.append(spec)
        names += list(spec.leaf_names(param))
        flat += leaves
    for name, x in zip(names, flat):
        if x.layout != torch.strided:
            raise ExportTypeError(f"pt2rt.export: input {name!r} has layout {x.layout}; only "
                                  "strided (dense) tensors are supported")
    del bound
    return ExportSignature(names, len(args), params=params, specs=specs), flat


def _positional_name(sig: inspect.Signature, i: int) -> str:
    params = list(sig.parameters.values())
    for j, p in enumerate(params):
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            return f"{p.name}_{i - j}"
        if j == i:
            return p.name
    return f"arg{i}"


def check_model_type(model: Any) -> None:
    """Raises ExportTypeError unless ``model`` is a Python ``torch.nn.Module``: not a
    TorchScript module (``torch.jit.script`` / ``trace``: its code runs in TorchScript's
    interpreter, which no Python-level capture sees into; torch.export refuses it too)."""
    if not isinstance(model, torch.nn.Module):
        raise ExportTypeError(f"pt2rt.export: model must be a torch.nn.Module, got "
                              f"{type(model).__name__}")
    if isinstance(model, torch.jit.ScriptModule):
        raise ExportTypeError(
            f"pt2rt.export: model is a TorchScript module ({type(model).__name__}, from "
            "torch.jit.script or torch.jit.trace), whose code runs in TorchScript's interpreter; "
            "export the Python nn.Module it was made from (its weights carry over: "
            "module.load_state_dict(scripted.state_dict()))")


def capture(model: torch.nn.Module, args: Any, kwargs: Optional[Dict[str, Any]] = None, *,
            train: bool = True, inference: bool = True,
            partitioner: str = "default", decompositions: Any = None,
            optimize_inference: bool = False, dynamic_shapes: Any = None) -> CapturedProgram:
    """Validates the arguments and captures the inference graph (if ``inference``; optimized
    by ``inference_passes`` if ``optimize_inference``) and the forward/backward graphs (if
    ``train``) of ``model``. ``dynamic_shapes``: see ``dynamic.py`` (torch.export's
    conventions); the program then carries the symbols and range constraints.

    Raises:
        ExportTypeError: ``model`` is not a Module; ``args`` not a tuple/list of tensors.
        ExportError: nothing to export, unknown partitioner, bad signature.
        CaptureError: the model cannot be traced, or its graphs do not give eager PyTorch's
            dtypes, shapes or values on the example inputs (``fidelity.py``).
    """
    check_model_type(model)
    if isinstance(args, torch.Tensor):
        args = (args,)
    if not isinstance(args, (tuple, list)):
        raise ExportTypeError(f"pt2rt.export: args must be a tuple of tensors, got "
                              f"{type(args).__name__}")
    kwargs = {} if kwargs is None else kwargs
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise ExportTypeError("pt2rt.export: kwargs must be a dict from str to tensors")
    if not (train or inference):
        raise ExportError("pt2rt.export: nothing to export (train=False and inference=False)")
    if partitioner not in PARTITIONERS:
        raise ExportError(f"pt2rt.export: unknown partitioner {partitioner!r}; expected one of "
                          f"{', '.join(PARTITIONERS)}")

    table = check_decompositions(decompositions)
    sig, flat = make_signature(model, tuple(args), kwargs)
    weights = collect_weights(model)
    backend = select_backend()
    if dynamic_shapes is not None and sig.nested():  # mirrors the structure (torch.export)
        dynamic_shapes = flatten_structured_shapes(dynamic_shapes, sig.params, sig.specs)
    dims = normalize_dynamic_shapes(dynamic_shapes, sig.input_names, flat)
    dynamic = None
    if dims is not None:
        if not hasattr(backend, "symbolic_inputs"):
            raise ExportError(f"pt2rt.export: dynamic_shapes: the {backend.CAPTURE_NAME} capture "
                              "does not trace symbolic shapes yet (torch >= 2.9 does); the model "
                              "can still be exported with static shapes (dynamic_shapes=None)")
        dynamic = backend.symbolic_inputs(dims)
    extra = {} if dynamic is None else {"dynamic": dynamic}
    constants = ConstantTable()
    graphs = []
    with torch.random.fork_rng(devices=[]):  # tracing must not disturb the caller's RNG
        # The eager references' seed, and their intra-op thread count: ATen's CPU kernels
        # choose algorithms by it, so export-cli verify runs with the same count.
        metadata: Dict[str, str] = {"reference_rng_seed": str(REFERENCE_RNG_SEED),
                                    "reference_threads": str(torch.get_num_threads())}
        # The eager probe runs where the model lives; the capture always traces on the CPU
        # (portability.py: device-neutral graphs).
        eager = _eager_probe(model, sig, flat) if train else None
        eager_eval, eval_spec = _eager_probe(model, sig, flat, train=False) if inference \
            else (None, None)
        if eager is not None and eager_eval is not None:
            check_same_structure(model, eager.out_spec, eval_spec)
        with portability.on_cpu(model, flat) as (cpu_flat, device):
            with portability.portable_kernels(), restored_attributes(model):
                if inference:
                    graphs.append(backend.capture_inference(model, weights, sig, cpu_flat,
                                                            constants, decompositions=table,
                                                            probe=eager, **extra))
                    if optimize_inference:
                        from ..passes.inference_passes import optimize
                        applied = optimize(graphs[-1])
                        metadata["inference_passes"] = ",".join(f"{k}:{v}"
                                                                for k, v in applied.items())
                if train:
                    unused = check_gradient_paths(model, eager)
                    if unused:
                        warnings.warn(f"pt2rt.export: trainable parameters of "
                                      f"{type(model).__name__} without a gradient path (they "
                                      f"will not train): {', '.join(unused)}", stacklevel=3)
                        metadata["params_without_grad"] = ",".join(unused)
                    joint = backend.capture_joint(model, weights, sig, cpu_flat, constants,
                                                  decompositions=table, probe=eager, **extra)
                    check_tangents(model, eager, joint.graph.inputs)
                    export_policy.check_graphs([joint.graph])  # before the partitioner
                    fw_bw = partition(joint, partitioner)
                    zero_tangents_of_parameter_mutations(fw_bw[-1])
                    graphs.extend(fw_bw)
            for g in graphs:
                if integral_sizes_without_floats(g.module.graph) + \
                        symint_operands_as_tensors(g.module.graph):
                    g.module.recompile()
            portability.check_portable(graphs)
            export_policy.check_graphs(graphs)  # what the runtime would refuse at load
            custom = export_policy.outside_aten(graphs)
            if custom:
                warnings.warn(
                    f"pt2rt.export: {type(model).__name__}'s graphs call operators outside "
                    f"ATen: {', '.join(custom)}; pt2rt's C++ runtime runs them only in a "
                    "process that registers them (e.g. linked with torchvision's C++ library "
                    "for torchvision::) and only when the load allows each "
                    "(LoadOptions::allow_operators, export-cli --allow-op NAME); otherwise "
                    "loading fails with OpResolutionError", stacklevel=3)
            program = CapturedProgram(graphs=graphs, weights=weights + constants.specs,
                                      signature=sig, capture=backend.CAPTURE_NAME,
                                      partitioner=partitioner if train else "",
                                      metadata=metadata, example_inputs=flat, eager_train=eager,
                                      eager_eval=eager_eval,
                                      symbols=dynamic.finish() if dynamic is not None else None,
                                      capture_device=device)
            check_no_aliased_constants(model, program.weights)
            try:
                run = annotate_program(program, cpu_flat)
            except Exception as e:
                raise CaptureError(f"pt2rt.export: the graphs captured from "
                                   f"{type(model).__name__} do not run on its example inputs "
                                   f"({type(e).__name__}: {e}); the capture "
                                   f"({backend.CAPTURE_NAME}) cannot reproduce this model") from e
            hints = value_dependent_paths(model)
            inf = program.graph(GraphRole.Inference)
            if eager_eval is not None and not draws_random(inf):
                check_output_values(model, "inference graph", "eval-mode forward",
                                    run.inference_outputs, eager_eval, hints)
            if eager is not None:
                fwd = program.graph(GraphRole.Forward)
                check_output_types(model, eager, fwd)
                draws = reference_draws(fwd, eager, run.forward_outputs, device)
                if not draws_random(fwd):
                    check_output_values(model, "forward graph", "training-mode forward",
                                        run.forward_outputs, eager.outputs, hints)
                if not draws_random(fwd) or draws == "replayed":
                    check_buffer_values(model, run.buffers, eager.buffers)
                    _check_gradient_values(model, sig, flat, run, eager, hints)
                if draws:
                    metadata["reference_draws"] = draws
    return program


def _check_gradient_values(model: torch.nn.Module, sig: ExportSignature,
                           flat: List[torch.Tensor], run: Any, eager: Any, hints: Any) -> None:
    """``fidelity.check_gradient_values``; when the graph's gradients differ from eager's, a
    second eager step tells whether eager reproduces itself (``check_eager_reproducible``
    names the module if not) before the mismatch is blamed on the capture."""
    try:
        check_gradient_values(model, run, eager, hints)
    except CaptureError:
        check_eager_reproducible(model, eager, _eager_probe(model, sig, flat))
        raise


def _eager_probe(model: torch.nn.Module, sig: ExportSignature, flat: List[torch.Tensor],
                 train: bool = True) -> Any:
    """``eager_train_run`` (``train``) or ``eager_eval_outputs`` (outputs, out_spec) of
    ``model`` on ``flat``; CaptureError when the user's forward raises."""
    try:
        return eager_train_run(model, sig, flat) if train else \
            eager_eval_outputs(model, sig, flat, with_spec=True)
    except ExportError:
        raise
    except Exception as e:  # whatever the user's forward raises
        raise CaptureError(f"pt2rt.export: {type(model).__name__}.forward failed on the "
                           f"example inputs in {'training' if train else 'eval'} mode: "
                           f"{type(e).__name__}: {e}") from e


def _user_outputs(outs: Dict[OutputDescriptor, Optional[torch.Tensor]]
                  ) -> List[Optional[torch.Tensor]]:
    return [t for d, t in sorted(((d, t) for d, t in outs.items() if d.kind is OutputKind.Plain),
                                 key=lambda dt: dt[0].idx)]


@dataclass
class AnnotatedRun:
    """What ``annotate_program``'s run of the graphs gave: the user outputs (``Plain(i)``
    order) of the inference and of the forward graph (None for a graph the program does not
    have), every buffer's value after the forward graph (its ``InputMutation`` output, or
    the buffer as it was; empty without a forward graph), and the backward graph's gradients
    (ones as tangents) of parameters by FQN and of user inputs by flat index."""

    inference_outputs: Optional[List[Optional[torch.Tensor]]] = None
    forward_outputs: Optional[List[Optional[torch.Tensor]]] = None
    buffers: Dict[str, torch.Tensor] = field(default_factory=dict)
    param_grads: Dict[str, torch.Tensor] = field(default_factory=dict)
    input_grads: Dict[int, torch.Tensor] = field(default_factory=dict)


def annotate_program(program: CapturedProgram, user_inputs: List[torch.Tensor]) -> AnnotatedRun:
    """Runs every graph once on the example inputs (ones as tangents) to record value
    metadata (``annotate.py``). The graphs run from the reference seed, as the eager
    references do; returns their results (``AnnotatedRun``)."""
    base: Dict[InputDescriptor, torch.Tensor] = {
        w.descriptor(): w.tensor.detach() for w in program.weights}
    base.update({InputDescriptor.plain(i): x.detach() for i, x in enumerate(user_inputs)})
    trainable = {w.descriptor() for w in program.weights if w.requires_grad}
    trainable |= {InputDescriptor.plain(i) for i, x in enumerate(user_inputs) if x.requires_grad}
    inf, inference_outputs = program.graph(GraphRole.Inference), None
    if inf is not None:
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(REFERENCE_RNG_SEED)
            inference_outputs = _user_outputs(annotate(inf, base))
    fwd, bwd = program.graph(GraphRole.Forward), program.graph(GraphRole.Backward)
    if fwd is None or bwd is None:
        return AnnotatedRun(inference_outputs)
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(REFERENCE_RNG_SEED)
        outs = annotate(fwd, base, lambda d: d in trainable)
    saved = {d.idx: t for d, t in outs.items() if d.is_saved()}
    bw_inputs: Dict[InputDescriptor, torch.Tensor] = {}
    for d in bwd.inputs:
        if d.kind is InputKind.Saved:
            bw_inputs[d] = saved[d.idx]
        elif d.kind is InputKind.Tangent:
            bw_inputs[d] = torch.ones_like(outs[d.output])
    grads = {d.of: t for d, t in annotate(bwd, bw_inputs).items()
             if d.kind is OutputKind.Grad and t is not None}
    buffers = {w.fqn: w.tensor for w in program.weights if w.kind is WeightKind.Buffer}
    buffers.update({d.of.fqn: t for d, t in outs.items()
                    if d.kind is OutputKind.InputMutation and d.of.kind is InputKind.Buffer
                    and t is not None})
    return AnnotatedRun(inference_outputs, _user_outputs(outs), buffers,
                        param_grads={d.fqn: t for d, t in grads.items()
                                     if d.kind is InputKind.Param},
                        input_grads={d.idx: t for d, t in grads.items()
                                     if d.kind is InputKind.Plain})


def draws_random(graph: Any) -> bool:
    """Whether ``graph`` (a DescribedGraph, or None) has an op tagged
    ``nondeterministic_seeded`` (dropout's bernoulli, rand, randn, ...)."""
    seeded = getattr(getattr(torch, "Tag", None), "nondeterministic_seeded", None)
    return graph is not None and seeded is not None and any(
        seeded in getattr(n.target, "tags", ()) for n in graph.module.graph.nodes
        if n.op == "call_function")


def reference_draws(forward: Any, eager: EagerTrainRun,
                    outputs: Optional[List[Optional[torch.Tensor]]], device: str) -> str:
    """Program metadata ``reference_draws`` for a forward graph that draws random numbers
    (ops tagged ``nondeterministic_seeded``): "replayed" when the graph, run on the CPU from
    the reference seed, gave eager's training outputs, "differ" when it draws in another order
    or amount (a functional ``bernoulli`` where eager filled a tensor in place; rrelu's
    noise), so that ``export-cli verify`` checks those results by dtype, shape and finiteness
    instead (pt2rt/randomness.h). "" when the graph draws nothing or the references come from
    another device."""
    if not draws_random(forward) or device != "cpu" or outputs is None:
        return ""
    for got, want in zip(outputs, eager.outputs):
        if got is None or got.shape != want.shape or got.dtype != want.dtype:
            return "differ"
        if got.is_floating_point() and not torch.allclose(got, want.to(got.device), rtol=1.3e-6,
                                                          atol=1e-5, equal_nan=True):
            return "differ"
        if not got.is_floating_point() and not torch.equal(got, want.to(got.device)):
            return "differ"
    return "replayed"

