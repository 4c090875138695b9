"""Capture on torch >= 2.9: ``torch._functorch.aot_autograd.aot_export_joint_with_descriptors``.

Joint graph (``capture_joint``): AOTAutograd traces ``model`` in training mode with fake
tensors, parameters and buffers lifted to graph inputs, functionalized, differentiated, at the
post-autograd ATen level (CompositeImplicitAutograd ops decomposed). Every placeholder carries
an ``AOTInput`` in ``meta['desc']`` and the output node a list of ``AOTOutput``; these are
mapped one to one onto pt2rt's descriptors (``aot_descriptors.py``). Outputs that are ``None``
and carry no descriptor (the gradients AOTAutograd leaves empty: buffers, frozen parameters,
user inputs that do not require grad) are dropped; anything else without a descriptor is a
CaptureError. The joint's forward outputs are the outputs whose descriptors are forward-side
(``Plain``, ``InputMutation``, ``IntermediateBase``, ...), which AOTAutograd puts before the
backward-side ones (``Grad``, backward tokens); that split is checked, not assumed.

Inference graph (``capture_inference``): the same entry point in eval mode under
``torch.no_grad()``. With no input requiring grad AOTAutograd takes its inference path: the
same fake-tensor trace, functionalization and decompositions, without a backward, and with
descriptors on every input and output. Choice: this instead of
``torch.export.export(...).run_decompositions()``, because it yields graphs at exactly the
ATen level of the training graphs (the same decomposition table applies to both) and the
inference graph's calling convention comes from the same ``meta['desc']`` as the joint's
(torch.export's graph signature would need a second mapping).

Both lift ``get_attr`` tensor constants into ``Constant`` inputs and record provenance
(``provenance.MetaProvenance``): ``nn_module_stack`` (turned into pt2rt's "fqn: Type" list) and
the user's ``stack_trace`` on forward and backward nodes.

Modules torch.nn implements with a data-dependent Python value but whose computation tensor
ops can express run with pt2rt's forward during the capture (``module_rewrites.py``: BatchNorm
with ``momentum=None``). ``nn.LSTM`` with a dynamic sequence length: one ``pt2rt::lstm`` node
(``rnn_ops.py``). ``F.scaled_dot_product_attention`` without dropout: one
``pt2rt::scaled_dot_product_attention`` node, which the runtime runs on the kernel eager picks on
its device (``attention_ops.py``); with dropout it takes the math path described next.

Backend choices (``portability.portable_kernels``, set by ``capture.py`` around both
captures): oneDNN, NNPACK and cuDNN are off while tracing and attention takes its math path, so
composite ops that choose a backend at trace time (``nn.LSTM``: ``mkldnn_rnn_layer``, whose
backward does not run from an exported graph; ``F.scaled_dot_product_attention``:
``_scaled_dot_product_flash_attention_for_cpu``, which has no CUDA kernel) take their plain
ATen path. Run-time kernels are unaffected: ``aten::convolution`` still dispatches to oneDNN
or cuDNN.

Decompositions: ``decompositions.portable_decompositions()`` (BatchNorm expressed with
``native_batch_norm``, which LibTorch 1.13 also has) plus the caller's table, which wins.
Static shapes: inputs are fakified with their concrete sizes (no ShapeEnv); with
``dynamic_shapes``, ``dynamic_torch2.SymbolicInputs`` fakifies the marked dims symbolically.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Dict, Iterator, List, Optional, Sequence

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from ...errors import CaptureError, ExportError
from ...ir import aot_descriptors
from ...ir.descriptors import InputDescriptor, InputKind, OutputDescriptor, OutputKind
from ...ir.graph_ir import (CapturedJoint, ConstantTable, DescribedGraph, ExportSignature,
                            GraphRole, WeightSpec)
from ...ops.decompositions import (linalg_checks_as_asserts, lstm_final_state_fix,
                                   portable_decompositions)
from ...ops.attention_ops import attention_ops
from ...ops.rnn_ops import has_lstm, sequence_modes
from ...ops.traceable_ops import TORCH2_OPS, TraceableOps
from ...ops.upsample_ops import upsample_as_kernels
from ...passes.export_policy import dynamic_shape_hint
from ...passes.graph_passes import drop_unused_batch_norm_stats
from ..call_names import FailingCall
from ..eager_paths import value_dependent_paths
from ..forward_modes import during_forward
from ..model_call import aliases_follow_substitution, fresh as _fresh, state_names
from ..model_call import training_mode as _mode
from ..module_rewrites import capturable
from ..provenance import MetaProvenance, user_stack_of

CAPTURE_NAME = "aot_export_joint_with_descriptors (torch 2.x)"

# Descriptor kinds of the joint's forward outputs; every other output belongs to backward.
_FORWARD_OUTPUT_KINDS = {OutputKind.Plain, OutputKind.InputMutation, OutputKind.IntermediateBase,
                         OutputKind.MetadataMutation, OutputKind.ForwardToken,
                         OutputKind.PhiloxUpdatedForwardOffset}


def _root_kind(d: OutputDescriptor) -> OutputKind:
    """The kind a (possibly subclass-piece) output descriptor belongs to."""
    while d.kind in (OutputKind.SubclassGetAttr, OutputKind.SubclassSize,
                     OutputKind.SubclassStride) and d.base is not None:
        d = d.base
    return d.kind


def _decomposition_table(user: Optional[Dict]) -> Dict:
    table = dict(portable_decompositions())
    table.update(user or {})
    return table


def _module_stack(meta: Dict[str, Any]) -> List[str]:
    """AOTAutograd's ``nn_module_stack`` ({key: (fqn, type)}) -> ["fqn: Type", ...], outermost
    first, the root module excluded (pt2rt's DebugInfo convention)."""
    stack = meta.get("nn_module_stack") or {}
    out = []
    for fqn, typ in stack.values():
        if not fqn:
            continue
        name = typ.__name__ if isinstance(typ, type) else str(typ).rsplit(".", 1)[-1]
        out.append(f"{fqn}: {name}")
    return out


@contextlib.contextmanager
def _views_as_copies(model: torch.nn.Module) -> Iterator[None]:
    """Outputs of forward() that alias something — views (of another output, an intermediate
    or an input), a parameter, a buffer or an input itself — are returned as copies while
    tracing. AOTAutograd regenerates such an output outside its graph and gives it no
    tangent, so the exported backward would drop the gradient flowing through it
    (``return y, y.t()``: only ``y``'s cotangent reached the parameters; ``return y,
    self.fc.weight``: the weight's own cotangent was lost). A copy has the same values and
    passes its cotangent on to what it aliases, as eager autograd does; the runtime's outputs
    never share storage anyway."""
    def hook(module, args, kwargs, out):
        inputs = {id(t) for t in pytree.tree_leaves((args, kwargs))}
        inputs |= {id(t) for t in module.parameters()} | {id(t) for t in module.buffers()}

        def unalias(t):
            if isinstance(t, torch.Tensor) and (t._is_view() or id(t) in inputs):
                return t.clone()
            return t
        return pytree.tree_map(unalias, out)
    handle = model.register_forward_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def _aot_export(model: torch.nn.Module, sig: ExportSignature, user_inputs: Sequence[torch.Tensor],
                train: bool, decompositions: Optional[Dict], what: str, dynamic=None):
    """Runs aot_export_joint_with_descriptors; returns (graph module, out_spec).

    The user inputs are passed as forward()'s (args, kwargs); kwargs in the signature's order,
    so AOTAutograd's ``PlainAOTInput(i)`` (its index into the flattened (args, kwargs)) is
    pt2rt's ``Plain(i)`` — checked below by identity, not assumed.
    """
    from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
    from torch._subclasses.fake_tensor import FakeTensorMode

    # Our own fake mode (AOTAutograd adopts the inputs' one): static shapes, and tensors the
    # model holds as plain attributes (not parameters or buffers) allowed in; they are traced
    # as get_attr constants.
    # With dynamic shapes, ``dynamic_torch2.SymbolicInputs`` fakifies them in its ShapeEnv.
    fresh = [_fresh(x, x.requires_grad and train) for x in user_inputs]
    if dynamic is not None:
        flat = dynamic.fakify(fresh)
    else:
        fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        flat = [fake_mode.from_tensor(x, static_shapes=True) for x in fresh]
    args, kwargs = sig.split(flat)
    leaves = pytree.tree_leaves((list(args), kwargs))
    if len(leaves) != len(flat) or any(a is not b for a, b in zip(leaves, flat)):
        raise ExportError("pt2rt.export: keyword inputs do not flatten in signature order")
    grad_mode = torch.enable_grad() if train else torch.no_grad()
    calls = FailingCall()  # names the user's op in a data-dependent refusal
    provenance = MetaProvenance(model)
    # RNNs as one pt2rt:: node each (rnn_ops.SequenceOps), SDPA as one node (attention_ops.py):
    # like the other modes, active only while the model's code runs (forward_modes.py).
    sequence = [sequence_modes(static=True)] if has_lstm(model) else []
    try:
        with _mode(model, train), grad_mode, capturable(model), _views_as_copies(model), \
                aliases_follow_substitution(model), lstm_final_state_fix(), \
                linalg_checks_as_asserts(), upsample_as_kernels(), provenance.recording(), \
                attention_ops() as attention, \
                during_forward(model, [*sequence, *attention, provenance.mode(), calls,
                                       TraceableOps(TORCH2_OPS)]), \
                contextlib.ExitStack() as stack:
            jd = aot_export_joint_with_descriptors(
                stack, model, tuple(args), kwargs,
                decompositions=_decomposition_table(decompositions))
            return jd.graph_module, jd.out_spec
    except ExportError:
        raise
    except Exception as e:  # torch raises many types while tracing; report them uniformly
        if "DataDependent" in type(e).__name__:
            call = calls.call_of(e)
            inside = f", inside {call}" if call else ""
            hints = "".join(f"; {h}" for h in value_dependent_paths(model, e.__traceback__))
            raise CaptureError(
                f"pt2rt.export: data-dependent Python value in {type(model).__name__} ({what}"
                f"{inside}): a traced tensor's value was read as a Python number or bool (item(), "
                "bool()/`if tensor`, int(), float(), tolist()); static-shape capture cannot "
                f"represent it ({type(e).__name__}: {str(e).splitlines()[0]}){hints}; at:\n"
                f"{user_stack_of(e.__traceback__)}") from e
        if type(e).__name__ == "DynamicOutputShapeException":
            op = getattr(e, "func", None)
            name = op._schema.name if hasattr(op, "_schema") else str(e)
            call = calls.call_of(e)
            raise CaptureError(
                f"pt2rt.export: {type(model).__name__} ({what}) calls {name}"
                + (f" (from {call})" if call else "")
                + ": its output sizes depend on tensor data (tag dynamic_output_shape), which a "
                f"program cannot declare and pt2rt cannot bound at load{dynamic_shape_hint(name)}"
                f"; at:\n{user_stack_of(e.__traceback__)}") from e
        hints = "".join(f"; {h}" for h in value_dependent_paths(model, e.__traceback__))
        raise CaptureError(f"pt2rt.export: cannot trace {type(model).__name__} ({what}) with "
                           f"aot_export_joint_with_descriptors: {type(e).__name__}: {e}"
                           f"{hints}") from e


def _merge_tied_weights(gm: fx.GraphModule, canonical: Dict[str, str]) -> None:
    """Tied weights: AOTAutograd lifts a parameter reachable by several FQNs once per FQN
    (``named_parameters(remove_duplicate=False)``: ``ParamAOTInput('enc.weight')`` and
    ``ParamAOTInput('dec.weight')`` for the same tensor) with one gradient each. pt2rt's weight
    table has the tensor once, under its first FQN (``named_parameters()``), so the alias
    placeholders are replaced by the canonical one and their gradients summed into the
    canonical ``Grad`` output — what eager autograd accumulates into the one ``.grad``. Works on
    the descriptors' FQNs, in place.

    Raises:
        CaptureError: two different new values for one tied buffer.
    """
    g = gm.graph
    by_fqn: Dict[str, fx.Node] = {}
    for p in [n for n in g.nodes if n.op == "placeholder"]:
        d = p.meta.get("desc")
        fqn = getattr(d, "target", None) if type(d).__name__ in ("ParamAOTInput",
                                                                "BufferAOTInput") else None
        if fqn is None:
            continue
        canon = canonical.get(fqn, fqn)
        if canon in by_fqn:
            p.replace_all_uses_with(by_fqn[canon])
            g.erase_node(p)
            continue
        if canon != fqn:
            p.meta["desc"] = dataclasses.replace(d, target=canon)
        by_fqn[canon] = p
    out = next(n for n in g.nodes if n.op == "output")
    values, descs = list(out.args[0]), list(out.meta["desc"])
    merged: Dict[Any, int] = {}
    keep = []
    for i, (v, d) in enumerate(zip(values, descs)):
        field = {"GradAOTOutput": "grad_of", "InputMutationAOTOutput": "mutated_input"}.get(
            type(d).__name__)
        inner = getattr(d, field) if field else None
        fqn = getattr(inner, "target", None)
        if fqn is None or type(inner).__name__ not in ("ParamAOTInput", "BufferAOTInput"):
            keep.append(i)
            continue
        canon = canonical.get(fqn, fqn)
        if canon != fqn:
            descs[i] = d = dataclasses.replace(d, **{field: dataclasses.replace(inner,
                                                                                target=canon)})
        j = merged.get(d)
        if j is None:
            merged[d] = i
            keep.append(i)
        elif field == "mutated_input":
            if values[j] is not v:
                raise CaptureError(f"pt2rt.export: tied buffer {canon} gets two new values")
        elif v is not None:
            if values[j] is None:
                values[j] = v
            else:
                with g.inserting_before(out):
                    total = g.call_function(torch.ops.aten.add.Tensor, (values[j], v))
                # same shape, dtype and backward tag as the gradients it sums (the min-cut
                # partitioner reads meta['val'])
                total.meta.update({k: values[j].meta[k] for k in
                                   ("val", "tensor_meta", "partitioner_tag", "seq_nr",
                                    "stack_trace") if k in values[j].meta})
                values[j] = total
    out.args = ([values[i] for i in keep],)
    out.meta["desc"] = [descs[i] for i in keep]
    g.lint()


def _describe(gm: fx.GraphModule, weights: Sequence[WeightSpec], constants: ConstantTable,
              role: GraphRole) -> DescribedGraph:
    """Builds the DescribedGraph from ``meta['desc']``: placeholders keep their names and
    descriptors, get_attr constants become Constant placeholders, descriptor-less None outputs
    are dropped.

    Raises:
        CaptureError: a placeholder or non-None output without a descriptor, a parameter or
            buffer FQN that is not one of the model's, a non-tensor attribute.
    """
    g = gm.graph
    fqns = {w.descriptor() for w in weights}
    new = fx.Graph()
    env: Dict[fx.Node, fx.Node] = {}
    inputs: List[InputDescriptor] = []
    by_desc: Dict[InputDescriptor, fx.Node] = {}
    placeholders = [n for n in g.nodes if n.op == "placeholder"]
    for p in placeholders:
        if "desc" not in p.meta:
            raise CaptureError(f"pt2rt.export: placeholder {p.name} of the {role.name} graph "
                               "has no AOTAutograd descriptor (meta['desc'])")
        d = aot_descriptors.input_descriptor(p.meta["desc"])
        if d.kind in (InputKind.Param, InputKind.Buffer) and d not in fqns:
            raise CaptureError(f"pt2rt.export: {p.meta['desc']} names no parameter or buffer "
                               "of the model")
        ph = new.placeholder(p.name)
        ph.meta = dict(p.meta)
        env[p] = ph
        inputs.append(d)
        by_desc[d] = ph
    for n in g.nodes:
        if n.op != "get_attr":
            continue
        tensor = getattr(gm, n.target)
        if not isinstance(tensor, torch.Tensor):
            raise CaptureError(f"pt2rt.export: unsupported non-tensor attribute {n.target} in "
                               f"the {role.name} graph")
        d = constants.add(tensor).descriptor()
        if d not in by_desc:
            ph = new.placeholder(f"primals_{d.fqn}")  # a primal for functorch's partitioners
            ph.meta = dict(n.meta)
            ph.meta.setdefault("tensor_meta",
                               torch.fx.passes.shape_prop._extract_tensor_metadata(tensor))
            inputs.append(d)
            by_desc[d] = ph
        env[n] = by_desc[d]
    out_node = next(n for n in g.nodes if n.op == "output")
    values = out_node.args[0]
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    descs = out_node.meta.get("desc")
    if descs is None or len(descs) != len(values):
        raise CaptureError(f"pt2rt.export: the {role.name} graph's output node carries "
                           f"{'no' if descs is None else len(descs)} descriptors for "
                           f"{len(values)} outputs")
    # Joint graphs: backward nodes inherit the stack trace of the forward node they
    # differentiate (same autograd seq_nr), not its module stack (they get whatever
    # torch.fx.traceback held last): take that from the first forward node of their seq_nr.
    stacks: Dict[int, Any] = {}
    for n in g.nodes:
        if n.meta.get("partitioner_tag") == "is_forward" and "nn_module_stack" in n.meta:
            stacks.setdefault(n.meta.get("seq_nr"), n.meta["nn_module_stack"])
    for node in g.nodes:
        if node.op in ("placeholder", "get_attr", "output"):
            continue
        env[node] = new.node_copy(node, lambda x: env[x])
        if node.meta.get("partitioner_tag") == "is_backward":
            node.meta["nn_module_stack"] = stacks.get(node.meta.get("seq_nr"), {})
        env[node].meta["nn_module_stack"] = _module_stack(node.meta)
        env[node].meta["stack_trace"] = node.meta.get("stack_trace") or ""
    kept_values, kept_descs = [], []
    for v, d in zip(values, descs):
        if d is None:
            if v is not None:
                raise CaptureError(f"pt2rt.export: output {v} of the {role.name} graph has no "
                                   "AOTAutograd descriptor")
            continue  # an empty gradient (buffer, frozen parameter, input without grad)
        if v is not None and not isinstance(v, fx.Node):
            raise ExportError(f"pt2rt.export: forward() output {getattr(d, 'idx', '?')} is a "
                              f"{type(v).__name__}, not a torch.Tensor; forward() must return "
                              "tensors (possibly nested in tuples/lists/dicts)")
        kept_values.append(env[v] if isinstance(v, fx.Node) else v)
        kept_descs.append(d)
    outputs = [aot_descriptors.output_descriptor(d) for d in kept_descs]
    # The partitioners carry meta['desc'] over to the forward/backward graphs they cut out.
    new.output(tuple(kept_values)).meta["desc"] = kept_descs
    drop_unused_batch_norm_stats(new)
    new.eliminate_dead_code()
    new.lint()
    dg = DescribedGraph(role, fx.GraphModule(torch.nn.Module(), new), inputs, outputs)
    dg.check()
    return dg


def _forward_outputs_first(dg: DescribedGraph) -> int:
    """Orders the joint's outputs forward-side first (by descriptor kind, stable), as the
    partitioners' ``num_fwd_outputs`` convention needs; AOTAutograd already returns them so.
    Returns the number of forward outputs."""
    forward = [_root_kind(d) in _FORWARD_OUTPUT_KINDS for d in dg.outputs]
    order = [i for i, f in enumerate(forward) if f] + [i for i, f in enumerate(forward) if not f]
    if order != list(range(len(order))):
        out = next(n for n in dg.module.graph.nodes if n.op == "output")
        values, descs = list(out.args[0]), list(out.meta["desc"])
        out.args = (tuple(values[i] for i in order),)
        out.meta["desc"] = [descs[i] for i in order]
        dg.outputs = [dg.outputs[i] for i in order]
        dg.module.recompile()
    return sum(forward)


def _canonical_fqns(model: torch.nn.Module, weights: Sequence[WeightSpec]) -> Dict[str, str]:
    """Every FQN of a weight -> the FQN pt2rt's weight table uses for it."""
    return {name: w.fqn for w, names in zip(weights, state_names(model, weights))
            for name in names}


def _set_outputs(sig: ExportSignature, out_spec: Any) -> None:
    if sig.out_spec is None:
        sig.out_spec, sig.num_outputs = out_spec, out_spec.num_leaves


# ---------------------------------------------------------------------------
# Entry points (called by capture.py)

def symbolic_inputs(spec):
    """Dynamic shapes: the shared symbolic fakification of the user inputs
    (``dynamic_torch2.SymbolicInputs``); its ``finish()`` gives the symbol table."""
    from .dynamic_torch2 import SymbolicInputs
    return SymbolicInputs(spec)


def capture_joint(model: torch.nn.Module, weights: List[WeightSpec], sig: ExportSignature,
                  user_inputs: List[torch.Tensor], constants: ConstantTable,
                  decompositions: Optional[Dict] = None, dynamic=None,
                  probe=None) -> CapturedJoint:
    """The joint forward+backward graph in training mode; see the module docstring.
    ``dynamic``: a ``dynamic_torch2.SymbolicInputs`` (dynamic shapes) or None. ``probe``: the
    eager run ``capture.py`` passes to both backends; unused here (AOTAutograd finds the
    differentiable outputs itself).

    Raises:
        CaptureError: the model cannot be traced, or the descriptors do not split into forward
            then backward outputs.
    """
    gm, out_spec = _aot_export(model, sig, user_inputs, True, decompositions,
                               "joint forward+backward", dynamic)
    _set_outputs(sig, out_spec)
    _merge_tied_weights(gm, _canonical_fqns(model, weights))
    dg = _describe(gm, weights, constants, GraphRole.Joint)
    _zero_non_floating_tangents(dg)
    num_fwd = _forward_outputs_first(dg)
    if not any(d.kind is InputKind.Tangent for d in dg.inputs):
        raise CaptureError(f"pt2rt.export: {type(model).__name__} has nothing to "
                           "differentiate (no trainable parameter or grad-requiring input "
                           "reaches a floating output); export with train=False")
    return CapturedJoint(dg, num_fwd)


def _zero_non_floating_tangents(joint: DescribedGraph) -> None:
    """pt2rt's convention (``eager_run``, the bundled references, lane 1.13's capture): the
    backward takes a cotangent for each floating output that requires grad. AOTAutograd also
    gives complex outputs (``torch.complex``, ``view_as_complex``, ``fft.rfft``, ``linalg.eig``)
    a tangent input; it is replaced by zeros of its static shape, so the archive's backward
    takes the cotangents the references and ``export-cli verify`` supply (lane 1.13: the same
    graph inputs). Left in place for a symbolic shape."""
    graph = joint.module.graph
    first_op = next((n for n in graph.nodes if n.op != "placeholder"), None)
    keep, changed = [], False
    for ph, desc in zip(joint.placeholders(), joint.inputs):
        val = ph.meta.get("val")
        if desc.kind is not InputKind.Tangent or not isinstance(val, torch.Tensor) \
                or val.is_floating_point() or first_op is None \
                or not all(isinstance(d, int) for d in val.shape):
            keep.append(desc)
            continue
        with graph.inserting_before(first_op):
            zeros = graph.call_function(torch.ops.aten.zeros.default,
                                        ([int(d) for d in val.shape],),
                                        {"dtype": val.dtype, "device": val.device})
        zeros.meta = dict(ph.meta)
        ph.replace_all_uses_with(zeros)
        graph.erase_node(ph)
        changed = True
    if changed:
        joint.inputs[:] = keep
        joint.module.recompile()
        joint.check()


def capture_inference(model: torch.nn.Module, weights: List[WeightSpec], sig: ExportSignature,
                      user_inputs: List[torch.Tensor], constants: ConstantTable,
                      decompositions: Optional[Dict] = None, dynamic=None,
                      probe=None) -> DescribedGraph:
    """The inference graph: eval mode, no grad (AOTAutograd's inference path). ``dynamic``:
    as for ``capture_joint``; ``probe``: unused here, as there.

    Raises:
        CaptureError: the model cannot be traced.
    """
    gm, out_spec = _aot_export(model, sig, user_inputs, False, decompositions, "inference",
                               dynamic)
    _set_outputs(sig, out_spec)
    _merge_tied_weights(gm, _canonical_fqns(model, weights))
    return _describe(gm, weights, constants, GraphRole.Inference)
