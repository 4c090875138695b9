"""Capture on torch 1.13: ``make_fx`` + ``functorch.functionalize``, as functorch 1.13's
``aot_autograd`` does it (create_joint_forward_backward, create_aot_dispatcher_function).

Joint graph (``capture_joint``):

1. Trace ``joint(*primals, *tangents)`` with ``make_fx`` (real or fake tensors, see 2).
   ``joint`` calls the model inside ``model_call.substituted`` with every parameter and buffer
   passed in (lifted to graph inputs; their aliases such as ``nn.RNNBase._flat_weights``
   swapped too), then, still inside the substitution (so that ``torch.utils.checkpoint``'s
   recomputation reads the lifted parameters), ``torch.autograd.grad(differentiable outputs,
   trainable parameters + user inputs that require grad, grad_outputs=tangents,
   allow_unused=True)``. Frozen parameters are not differentiated, so the graph holds no work
   for them. The decomposition table of ``decompositions.py`` makes BatchNorm's running-stat
   update visible.
2. Re-trace ``Interpreter(g1).run`` under ``make_fx(functionalize(...))`` with FLAT tensor
   arguments: in-place ops become functional and each mutated input gets a trailing
   ``aten.copy_(placeholder, new_value)``. The replay runs over fake tensors
   (``_fake_trace``; on the real ones where fake propagation fails or costs more). Step 1 also
   runs over fake tensors where the model's kernels cost more than 1.13's fake dispatch
   (``_first_trace``, weighed against the eager run ``capture.py`` made).
3. ``finalize_graph``: each trailing copy_ becomes an ``InputMutation(of=<input>)`` output;
   ``get_attr`` tensor constants become ``Constant`` inputs; dead code is removed;
   placeholders are renamed ``primals_<n>`` / ``tangents_<n>``.

Inference graph (``capture_inference``): ``make_fx(forward)`` in eval mode under
``torch.no_grad()``, re-traced under ``functionalize`` as in step 2, finalized the same way.

Both record provenance (``provenance.py``): ``nn_module_stack`` and stack traces per node.

Dynamic shapes (``dynamic=``, from ``symbolic_inputs``): both traces run over fake tensors whose
marked dims are symbolic (``dynamic_torch1.py``), with pt2rt's symbolic-shape rules
(``symbolic_meta_torch1.py``); the joint's tangents are ones of the fake outputs' sizes.
"""
from __future__ import annotations

import collections
import contextlib
import operator
import re
import time
import traceback
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import get_proxy_slots, make_fx
from torch.overrides import TorchFunctionMode

from ...errors import CaptureError, ExportError
from ...ir.descriptors import InputDescriptor, InputKind, OutputDescriptor, OutputKind
from ...ir.graph_ir import (CapturedJoint, ConstantTable, DescribedGraph, ExportSignature,
                            GraphRole, WeightKind, WeightSpec)
from ...ops import autograd_cuts, rnn_ops
from ...ops.device_dependence import device_dependent_results
from ...ops.decompositions import training_decompositions
from ...ops.traceable_ops import TORCH1_OPS, replacement
from ...passes.graph_passes import (bernoulli_out_of_place, drop_unused_batch_norm_stats,
                                    slice_backward_sums_as_cat, upsample_backward_without_vec)
from ..call_names import api_name
from ..eager_paths import library_checks
from ..eager_run import EagerTrainRun
from ..model_call import call_model as _call_model, fresh as _fresh, state_names as _state_names
from ..model_call import flat_outputs as _flat_outputs, substituted as _substituted
from ..model_call import training_mode as _mode
from ..module_rewrites import capturable, one_hot_traceable
from ..provenance import Provenance, user_stack

CAPTURE_NAME = "make_fx+functionalize (torch 1.13)"
aten = torch.ops.aten


def _functionalize(fn: Callable) -> Callable:
    from functorch.experimental import functionalize
    return functionalize(fn)


_DATA_DEPENDENT = {torch.Tensor.item, torch.Tensor.__bool__, torch.Tensor.__int__,
                   torch.Tensor.__float__, torch.Tensor.__index__, torch.Tensor.tolist,
                   torch.Tensor.numpy, torch.Tensor.__complex__}


# torch API calls whose kernel reads a tensor argument's values without a dispatched read
# (make_fx would see nothing and bake them).
_READS_TENSOR_ARGUMENT = {torch.tensor_split, torch.Tensor.tensor_split}


class _DataDependenceGuard(TorchFunctionMode):
    """Real-tensor ``make_fx`` would silently bake a Python value read from a traced tensor
    (``if x.sum() > 0``, ``x.item()``, ``x.tolist()``, ``x.numpy()``) into the graph as a
    constant; this mode turns such reads into a CaptureError naming the call site, and an op
    whose implementation reads a value into one naming the op. It also runs ``F.one_hot`` as
    ``module_rewrites.one_hot_traceable`` (ATen's reads its indices' min/max as Python ints)
    and the ops of ``traceable_ops.TORCH1_OPS`` (quantile, cov, ...) in their traceable form."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.nn.functional.one_hot:
            return one_hot_traceable(*args, **(kwargs or {}))
        traceable = replacement(func, TORCH1_OPS)
        if traceable is not None:  # ops whose ATen kernel reads values (traceable_ops.py)
            return traceable(*args, **(kwargs or {}))
        if func in _READS_TENSOR_ARGUMENT and any(
                isinstance(a, torch.Tensor) and (get_proxy_slots(a) or
                                                 torch._is_functional_tensor(a))
                for a in list(args[1:]) + list((kwargs or {}).values())):
            # The kernel reads the index tensor's memory directly (no dispatched item()), so
            # real-tensor make_fx would bake the traced split points as constants.
            raise CaptureError(
                f"pt2rt.export: {api_name(func)} with a tensor of split indices reads their "
                "values in its kernel: the split sizes would be baked into the graph as "
                "constants (a data-dependent size is not capturable); pass the indices as a "
                f"list of ints; at:\n{user_stack(skip=2)}")
        if func in _DATA_DEPENDENT and args and isinstance(args[0], torch.Tensor) \
                and (get_proxy_slots(args[0]) or torch._is_functional_tensor(args[0])):
            hints = "".join(f"; {h}" for h in library_checks(
                f.filename for f in traceback.extract_stack()))
            raise CaptureError(
                f"pt2rt.export: data-dependent Python value: {func.__name__}() on a traced "
                f"tensor would be baked into the graph as a constant (data-dependent control "
                f"flow or conversion to Python/NumPy is not capturable){hints}; at:\n"
                f"{user_stack(skip=2)}")
        try:
            return func(*args, **(kwargs or {}))
        except ExportError:
            raise
        except Exception as e:
            # The mode sees the user's calls, not the ones inside them: this is the torch API
            # call (torch.quantile, F.gaussian_nll_loss, Tensor.index_reduce) whose
            # implementation read a traced value. The backward's reads are named in capture_joint.
            if reads_traced_value(e) and func not in (torch.autograd.grad,
                                                      torch.autograd.backward):
                raise CaptureError(
                    f"pt2rt.export: {api_name(func)} reads a traced tensor's value as a Python "
                    "number or bool inside its implementation (a data-dependent check or size), "
                    "which the static make_fx capture of torch 1.13 cannot represent "
                    f"({type(e).__name__}: {str(e).splitlines()[0]}); at:\n"
                    f"{user_stack(skip=2)}") from e
            raise


def reads_traced_value(e: BaseException) -> bool:
    """Whether ``e`` is make_fx's refusal of a value read from a traced tensor (an op's kernel
    calling ``item()`` / ``is_nonzero()`` on it)."""
    return "get value out of a tracing tensor" in str(e)


def _backward_name(node_name: str) -> str:
    """``ScatterReduceBackward0`` -> ``scatter_reduce``."""
    base = re.sub(r"Backward\d*$", "", node_name)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()


def _watch_backward(outputs: Sequence[torch.Tensor], current: List[str]) -> None:
    """Pre-hooks on the autograd graph behind ``outputs`` that record the name of each node as
    the backward runs it (``current[-1]``: the node running now), so that a backward formula
    reading a traced value can be named."""
    seen = set()
    queue = collections.deque(t.grad_fn for t in outputs if t.grad_fn is not None)
    while queue:
        node = queue.popleft()
        if node in seen:
            continue
        seen.add(node)
        node.register_prehook(lambda grads, name=node.name(): current.append(name))
        queue.extend(nxt for nxt, _ in node.next_functions if nxt is not None)


def _trace(fn: Callable, args: Sequence, what: str, model: torch.nn.Module,
           decompositions=None, dynamic=None) -> fx.GraphModule:
    """``make_fx(fn, decompositions)(*args)``; with ``dynamic`` (a
    ``dynamic_torch1.SymbolicInputs``) ``args`` are its fake tensors and the trace runs in its
    fake mode with the Python dispatcher (a symbolic trace)."""
    try:
        with _DataDependenceGuard(), (dynamic.tracing() if dynamic else contextlib.nullcontext()):
            return make_fx(fn, decompositions)(*args)
    except ExportError:
        raise
    except Exception as e:  # torch raises many types while tracing; report them uniformly
        if dynamic is not None:
            from .symbolic_meta_torch1 import no_symbolic_rule
            no_symbolic_rule(e, model, what)
        hint = _REENTRANT_HINT if "Checkpointing is not compatible with .grad()" in str(e) \
            else ""
        raise CaptureError(f"pt2rt.export: cannot trace {type(model).__name__} ({what}): "
                           f"{type(e).__name__}: {e}{hint}") from e


# torch.utils.checkpoint's reentrant variant (use_reentrant=True, torch 1.13's default) runs
# its own backward inside .backward() only; the joint capture differentiates with
# torch.autograd.grad, which it refuses.
_REENTRANT_HINT = (" (torch.utils.checkpoint with use_reentrant=True, torch 1.13's default: "
                   "pass use_reentrant=False, which the capture traces; torchvision's DenseNet: "
                   "memory_efficient=False)")


class _FakeReplayCost:
    """Seconds per graph node of the fake replays made so far in this process (the Python
    overhead of 1.13's fake-tensor dispatch, about 1 ms a node here), to choose a replay:
    over fake tensors it costs that per node whatever the sizes; on the real tensors it
    costs about what the real-tensor trace of the same graph took (the same kernels, a
    similar per-node overhead). A conv net at 8x3x64x64 replays faster for real (mobilenet_v2:
    0.9 s against 1.8 s), an nn.TransformerEncoder at batch 32x128 much faster fake (0.5 s
    against 14.5 s). Both give the same graph (byte-identical programs on the test model
    set; ``_fake_trace`` declines the graphs where they would not): the choice only moves
    time."""

    per_node: Optional[float] = None
    DEFAULT_PER_NODE = 1e-3  # before any fake trace has been timed (this 2-core machine's)

    @classmethod
    def choose_fake(cls, nodes: int, trace_s: float, unknown: float = 0.0) -> bool:
        """Whether a fake trace of ``nodes`` nodes is expected to cost less than ``trace_s``;
        ``unknown``: the per-node cost to assume before any was measured (0: try fake)."""
        per_node = unknown if cls.per_node is None else cls.per_node
        return per_node * nodes < trace_s

    @classmethod
    def record(cls, nodes: int, seconds: float) -> None:
        cls.per_node = seconds / max(nodes, 1)


def _replay_functionalized(g: fx.GraphModule, args: Sequence, prov: Provenance, what: str,
                           model, dynamic=None, trace_s: float = 0.0) -> fx.GraphModule:
    """make_fx(functionalize(Interpreter(g).run)) with flat args (needed for the copy-back).
    A static capture replays over fake tensors (``_fake_trace``) when ``_FakeReplayCost``
    expects that to be cheaper than the real-tensor trace of ``g`` was (``trace_s`` seconds),
    and on ``args`` themselves otherwise or where the fake replay fails."""
    if dynamic is not None:
        from .symbolic_replay_torch1 import prepare_symbolic_replay
        prepare_symbolic_replay(g)

    def replay(*flat):
        return torch.fx.Interpreter(g).run(*flat)
    what += ", functionalization"
    nodes = _op_nodes(g)
    with prov.recording(record_calls=False), torch.no_grad():
        gm = None
        if dynamic is None and _FakeReplayCost.choose_fake(nodes, trace_s):
            start = time.perf_counter()
            gm = _fake_trace(_functionalize(replay), args, what, model)
            if gm is not None:
                _FakeReplayCost.record(nodes, time.perf_counter() - start)
        if gm is None:
            gm = _trace(_functionalize(replay), args, what, model, dynamic=dynamic)
    prov.resolve(gm)
    return gm


def _fake_trace(fn: Callable, args: Sequence, what: str, model,
                decompositions=None) -> Optional[fx.GraphModule]:
    """``_trace(fn)`` over fake copies of ``args`` (``torch._subclasses.FakeTensorMode``): for
    a static capture, the trace only records ``fn``'s ATen ops, whose values it never reads
    (``_DataDependenceGuard`` refuses a read on the real tensors; fake ones raise), so running
    their kernels on the real tensors buys nothing where they cost more than 1.13's fake
    dispatch. Fake propagation adds ``meta["val"]``, which a static graph does not carry
    (lowering reads it as symbolic sizes): dropped, leaving ``tensor_meta`` as a real trace
    records it. None when the fake trace fails — a plain tensor attribute of the model reaches
    an op (fake mode refuses real inputs), an op without a fake implementation, a value read —
    or when it read a result whose shape depends on the device (``_reads_device_dependent``),
    and the caller then traces the real tensors, which gives the same graph or the error the
    real trace raises."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode()
    try:
        fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        with mode:
            gm = _trace(fn, fakes, what, model, decompositions)
    except Exception:  # noqa: BLE001 - whatever fake propagation raises: trace for real
        return None
    if _reads_device_dependent(gm):
        return None
    for node in gm.graph.nodes:
        node.meta.pop("val", None)
    return gm


def _reads_device_dependent(gm: fx.GraphModule) -> bool:
    """Whether a result whose shape differs by device (``ops/device_dependence.py``) is used
    in ``gm``. Fake tensors give it the CUDA/meta shape, the CPU kernels another, and code
    traced through it may branch on that shape: ``_embedding_bag``'s ``offset2bag`` is empty
    on the CPU in mode ``sum``, so ATen's ``_embedding_bag_backward`` rebuilds it there — ops
    a fake trace, seeing a full ``offset2bag``, never records, and the graph then fails on the
    CPU (IndexError in ``_embedding_bag_dense_backward``). Only a real trace records what the
    CPU does."""
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        varying = device_dependent_results(node.target, node.args, node.kwargs)
        if varying and any(user.target is operator.getitem and user.args[1] in varying
                           and user.users for user in node.users):
            return True
    return False


def _op_nodes(gm: fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")


def _is_factory(node: fx.Node) -> bool:
    """A call of an ATen op that takes no tensor (``zeros``, ``eye``, ``arange``, ``full``)."""
    schema = getattr(node.target, "_schema", None)
    return node.op == "call_function" and schema is not None and not any(
        "Tensor" in str(a.type) for a in schema.arguments)


def _drop_detaches_of_factories(gm: fx.GraphModule) -> None:
    """``aten.detach`` of a tensor a factory op made (or of such a detach) is an alias of a
    value that never requires grad: removed. 1.13's make_fx records one after every factory
    op when it traces fake tensors and none on real ones; without it both traces give the
    same graph."""
    factories = {n for n in gm.graph.nodes if _is_factory(n)}
    changed = False
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is aten.detach.default \
                and node.args and node.args[0] in factories:
            factories.add(node.args[0])
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
            changed = True
    if changed:
        gm.recompile()


def _static_rnns(model: torch.nn.Module, dynamic):
    """A static capture of a model with nn.LSTM / GRU / RNN: each call one ``pt2rt::`` node
    where it can be (``rnn_ops.SequenceOps(static=True)``, as torch 2's capture does), so that
    the runtime runs one fused kernel — cuDNN's on CUDA — instead of T unrolled cells. Only
    for such models: the mode would turn off other modules' fast paths (``rnn_ops.has_lstm``).
    A dynamic capture enters ``sequence_ops`` itself (``SymbolicInputs.tracing``)."""
    if dynamic is None and rnn_ops.has_lstm(model):
        return rnn_ops.sequence_ops(static=True)
    return contextlib.nullcontext()


def _first_trace(fn: Callable, args: Sequence, what: str, model: torch.nn.Module,
                 decompositions, dynamic, estimate: Optional[Tuple[int, float]]
                 ) -> Tuple[fx.GraphModule, float]:
    """The first trace of a capture (``_trace``), over fake copies of ``args``
    (``_fake_trace``) when ``estimate`` — (expected graph nodes, seconds the model's eager
    kernels take for it, from the eager run ``capture.py`` made) — says that is cheaper
    (``_FakeReplayCost``), else, or where the fake trace fails, on ``args``. Returns the graph
    and what a trace on the real tensors costs (measured, or the estimate), which
    ``_replay_functionalized`` weighs against a fake replay."""
    if dynamic is None and estimate is not None and _FakeReplayCost.choose_fake(
            estimate[0], estimate[1], unknown=_FakeReplayCost.DEFAULT_PER_NODE):
        start = time.perf_counter()
        gm = _fake_trace(fn, args, what, model, decompositions)
        if gm is not None:
            _FakeReplayCost.record(_op_nodes(gm), time.perf_counter() - start)
            _drop_detaches_of_factories(gm)
            return gm, estimate[1]
    start = time.perf_counter()
    gm = _trace(fn, args, what, model, decompositions, dynamic)
    trace_s = time.perf_counter() - start
    _drop_detaches_of_factories(gm)
    return gm, trace_s


# ---------------------------------------------------------------------------
# Graph cleanup shared by the joint and inference graphs

def finalize_graph(gm: fx.GraphModule, inputs: List[InputDescriptor],
                   outputs: List[Optional[OutputDescriptor]], constants: ConstantTable,
                   role: GraphRole, num_primals: int) -> Tuple[DescribedGraph, int]:
    """Turns a functionalized trace into a DescribedGraph.

    ``inputs`` describe ``gm``'s placeholders in order; ``outputs`` the elements of its output
    tuple (``None``: drop that element). Trailing ``aten.copy_(placeholder, value)`` become
    ``InputMutation`` outputs, placed after the outputs for which ``outputs[i]`` is a Plain
    (i.e. before the gradients), in input order. ``get_attr`` constants become Constant inputs
    appended to the primals (the first ``num_primals`` inputs). Returns the graph and the
    number of forward outputs (plain outputs + mutations).

    Raises:
        CaptureError: a mutation of something that is not a graph input.
    """
    g = gm.graph
    placeholders = [n for n in g.nodes if n.op == "placeholder"]
    assert len(placeholders) == len(inputs), (len(placeholders), len(inputs))
    desc_of = dict(zip(placeholders, inputs))

    mutations: Dict[fx.Node, fx.Node] = {}
    for node in list(g.nodes):
        if node.op == "call_function" and node.target is aten.copy_.default:
            dst, src = node.args[0], node.args[1]
            if not (isinstance(dst, fx.Node) and dst.op == "placeholder") or node.users:
                raise CaptureError(f"pt2rt.export: unsupported in-place copy into {dst} "
                                   f"({node.format_node()}) after functionalization")
            mutations[dst] = src
            g.erase_node(node)
    for d in (desc_of[p] for p in mutations):
        if d.kind is InputKind.Tangent:
            raise CaptureError("pt2rt.export: the graph mutates a tangent input")

    out_node = next(n for n in reversed(g.nodes) if n.op == "output")
    old_out = out_node.args[0]
    old_out = list(old_out) if isinstance(old_out, (list, tuple)) else [old_out]
    assert len(old_out) == len(outputs), (len(old_out), len(outputs))
    kept = [(v, d) for v, d in zip(old_out, outputs) if d is not None]
    n_plain = sum(1 for _, d in kept if d.kind is OutputKind.Plain)
    mut = [(mutations[p], OutputDescriptor.input_mutation(desc_of[p]))
           for p in placeholders if p in mutations]
    new_out = kept[:n_plain] + mut + kept[n_plain:]

    _tuple_vals(g)
    drop_unused_batch_norm_stats(g)
    bernoulli_out_of_place(g)
    upsample_backward_without_vec(g)
    _reshape_alias_as_reshape(g)

    # Rebuild with lifted constants and primals_/tangents_ placeholder names.
    new = fx.Graph()
    env: Dict[fx.Node, fx.Node] = {}
    new_inputs: List[InputDescriptor] = []
    by_desc: Dict[InputDescriptor, fx.Node] = {}
    primal_i = 0

    def add_placeholder(desc: InputDescriptor, meta: dict, is_tangent: bool) -> fx.Node:
        nonlocal primal_i
        if is_tangent:
            name = f"tangents_{sum(1 for d in new_inputs if d.kind is InputKind.Tangent) + 1}"
        else:
            primal_i += 1
            name = f"primals_{primal_i}"
        ph = new.placeholder(name)
        ph.meta = dict(meta)
        new_inputs.append(desc)
        by_desc[desc] = ph
        return ph

    getattrs = [n for n in g.nodes if n.op == "get_attr"]
    for i, p in enumerate(placeholders[:num_primals]):
        env[p] = add_placeholder(inputs[i], p.meta, False)
    for n in getattrs:
        tensor = getattr(gm, n.target)
        if not isinstance(tensor, torch.Tensor):
            raise CaptureError(f"pt2rt.export: unsupported non-tensor attribute {n.target}")
        spec = constants.add(tensor)
        desc = spec.descriptor()
        if desc in by_desc:  # the same constant used twice: one input
            env[n] = by_desc[desc]
            continue
        meta = dict(n.meta)
        meta.setdefault("tensor_meta", torch.fx.passes.shape_prop._extract_tensor_metadata(tensor))
        env[n] = add_placeholder(desc, meta, False)
    for i, p in enumerate(placeholders[num_primals:], start=num_primals):
        env[p] = add_placeholder(inputs[i], p.meta, inputs[i].kind is InputKind.Tangent)
    for node in g.nodes:
        if node.op in ("placeholder", "get_attr", "output"):
            continue
        env[node] = new.node_copy(node, lambda x: env[x])
        if node.target is aten.sym_size and len(node.args) == 2:
            env[node].target = aten.sym_size.int  # 1.13 records the packet
        elif node.target is aten.sym_stride and len(node.args) == 2:
            env[node].target = aten.sym_stride.int
    new.output(tuple(env[v] if isinstance(v, fx.Node) else v for v, _ in new_out))
    new.eliminate_dead_code()
    new.lint()
    result = fx.GraphModule(torch.nn.Module(), new)
    dg = DescribedGraph(role, result, new_inputs, [d for _, d in new_out])
    dg.check()
    return dg, n_plain + len(mut)


def _reshape_alias_as_reshape(g: fx.Graph) -> None:
    """torch 1.13 traces ``reshape`` / ``flatten`` of a tensor that is viewable at trace time
    as ``aten._reshape_alias(x, sizes, strides)``: a view with the strides computed from the
    traced tensor's. The traced user inputs are contiguous copies, so on an input with other
    strides at run time (a transposed or sliced tensor) the view read the wrong elements
    (OpInfo ``nn.functional.embedding_bag`` with non-contiguous indices). ``aten.reshape(x,
    sizes)`` is the same view where it exists and a copy where it does not."""
    for node in g.nodes:
        if node.op == "call_function" and node.target is aten._reshape_alias.default:
            node.target = aten.reshape.default
            node.args = (node.args[0], node.args[1])
            node.kwargs = {}


def _tuple_vals(g: fx.Graph) -> None:
    """1.13's make_fx records ``meta['val']`` (the fake value; symbolic sizes) only on nodes
    producing one tensor or SymInt; a tuple-returning op's elements are on the getitem nodes it
    creates for each of them. Gathered onto the op's node (as torch 2 has it) before dead
    getitems are removed, so lowering finds every element's symbolic sizes."""
    for node in g.nodes:
        if node.op != "call_function" or "val" in node.meta or not node.users:
            continue
        items = {u.args[1]: u.meta.get("val") for u in node.users
                 if u.target is operator.getitem and isinstance(u.args[1], int)}
        if items and len(items) == len(node.users):
            node.meta["val"] = tuple(items.get(i) for i in range(max(items) + 1))


# ---------------------------------------------------------------------------
# Entry points (called by capture.py)

def _probe(model: torch.nn.Module, state_names, state: List[torch.Tensor], sig: ExportSignature,
           user: List[torch.Tensor]) -> EagerTrainRun:
    """A training-mode forward (no backward) on ``state``: outputs, differentiable ones, spec."""
    try:
        out = _call_model(model, state_names, state, sig, user)
    except Exception as e:
        raise CaptureError(f"pt2rt.export: {type(model).__name__}.forward failed on the "
                           f"example inputs: {type(e).__name__}: {e}") from e
    leaves, spec = _flat_outputs(out, "forward()")
    diff = [i for i, t in enumerate(leaves) if t.requires_grad and t.is_floating_point()]
    return EagerTrainRun(outputs=[t.detach() for t in leaves], diff=diff, out_spec=spec)


def capture_joint(model: torch.nn.Module, weights: List[WeightSpec], sig: ExportSignature,
                  user_inputs: List[torch.Tensor], constants: ConstantTable,
                  decompositions: Optional[Dict] = None, dynamic=None,
                  probe: Optional[EagerTrainRun] = None) -> CapturedJoint:
    """The joint forward+backward graph in training mode; see the module docstring.

    ``weights``: parameters then buffers (Program order). ``user_inputs``: flat ``Plain``
    inputs; those with ``requires_grad`` get ``Grad`` outputs. ``decompositions``: the
    caller's table, applied on top of ``training_decompositions()`` (the caller's win).
    ``dynamic``: a ``dynamic_torch1.SymbolicInputs`` (dynamic shapes: a symbolic trace whose
    tangents have the fake outputs' symbolic sizes) or None. ``probe``: an
    ``eager_run.eager_train_run`` of the model on these inputs (``capture.py`` has one), whose
    output structure, differentiable outputs and output sizes (the tangents' sizes) are used
    instead of running a forward again.
    """
    state_names = _state_names(model, weights)
    n_w, n_in = len(weights), len(user_inputs)
    trainable = [i for i, w in enumerate(weights) if w.kind is WeightKind.Parameter
                 and w.requires_grad]
    input_grads = [i for i, x in enumerate(user_inputs) if x.requires_grad]

    def fresh_state():
        return [_fresh(w.tensor, w.kind is WeightKind.Parameter and w.requires_grad)
                for w in weights]

    def fresh_inputs():
        return [_fresh(x, x.requires_grad) for x in user_inputs]

    with _mode(model, True):
        # Which outputs are differentiable, and example tangents: from the eager run when the
        # caller has one, else from a forward of our own.
        if probe is None:
            probe = _probe(model, state_names, fresh_state(), sig, fresh_inputs())
        sig.out_spec, sig.num_outputs = probe.out_spec, len(probe.outputs)
        # A joint graph has about 4 nodes per autograd node (forward op, its backward ops):
        # resnet18 3.8, mobilenet_v2 3.5, a TransformerEncoder 2.7.
        estimate = (4 * probe.autograd_nodes, probe.seconds) if probe.seconds else None
        diff = list(probe.diff)
        # (the eager run ran where the model lives; the capture traces on the CPU)
        tangents = [torch.ones_like(probe.outputs[i], device="cpu").detach() for i in diff]
        del probe

        prov = Provenance(model)

        def joint(*flat):
            state, user = flat[:n_w], flat[n_w:n_w + n_in]
            tang = flat[n_w + n_in:]
            args, kwargs = sig.split(list(user))
            # autograd_cuts: pt2rt:: nodes on symbolic sizes (nn.LSTM/GRU/RNN, F.ctc_loss)
            # differentiate via their pt2rt::*_backward
            with _substituted(model, state_names, state), autograd_cuts.cuts() as cuts:
                outs, _ = _flat_outputs(model(*args, **kwargs), "forward()")
                targets = [state[i] for i in trainable] + [user[i] for i in input_grads]
                grads: Sequence[Optional[torch.Tensor]] = [None] * len(targets)
                if targets and diff:
                    prov.hook_backward([outs[i] for i in diff])
                    running: List[str] = []
                    _watch_backward([outs[i] for i in diff], running)
                    try:
                        with warnings.catch_warnings():
                            # anomaly mode's report of a failing node (provenance records
                            # with it on): the error below names the node instead
                            warnings.filterwarnings("ignore", message="Error detected in ")
                            grads = autograd_cuts.grad([outs[i] for i in diff], targets,
                                                       list(tang), cuts)
                    except ExportError:
                        raise
                    except Exception as e:
                        if dynamic is not None and running:
                            from .symbolic_meta_torch1 import no_symbolic_rule
                            no_symbolic_rule(e, model, "joint forward+backward",
                                             backward=(_backward_name(running[-1]),
                                                       running[-1]))
                        if reads_traced_value(e) and running:
                            raise CaptureError(
                                f"pt2rt.export: the backward of {_backward_name(running[-1])} "
                                f"(autograd node {running[-1]}) reads a traced tensor's value "
                                "as a Python number or bool (a data-dependent check or size in "
                                "its derivative), which the static make_fx capture of torch "
                                f"1.13 cannot represent ({type(e).__name__}: "
                                f"{str(e).splitlines()[0]})") from e
                        raise
            return tuple(outs) + tuple(grads)

        table = {**training_decompositions(), **(decompositions or {})}
        if dynamic is None:
            trace_args = fresh_state() + fresh_inputs() + tangents
        else:
            trace_args = _symbolic_joint_args(model, state_names, sig, dynamic, fresh_state(),
                                              fresh_inputs(), diff, table)
        with prov.recording(), capturable(model), _static_rnns(model, dynamic):
            g1, trace_s = _first_trace(joint, trace_args, "joint forward+backward", model,
                                       table, dynamic, estimate)
        if dynamic is None:
            replay_args = [_fresh(t) for t in [w.tensor for w in weights] + user_inputs + tangents]
        else:
            with dynamic.tracing():
                replay_args = [t.detach() for t in trace_args]
        del trace_args  # the trace's copies of the weights: not held during the replay
        g2 = _replay_functionalized(g1, replay_args, prov, "joint forward+backward", model,
                                    dynamic, trace_s)
        if dynamic is not None and slice_backward_sums_as_cat(g2.graph):
            g2.recompile()   # select/split/unbind ran as slices (symbolic_autograd_torch1)

    in_desc = [w.descriptor() for w in weights] + [InputDescriptor.plain(i) for i in range(n_in)]
    plain_out = [OutputDescriptor.plain(i) for i in range(sig.num_outputs)]
    in_desc += [InputDescriptor.tangent(plain_out[i]) for i in diff]
    out_desc = plain_out + [OutputDescriptor.grad(weights[i].descriptor()) for i in trainable]
    out_desc += [OutputDescriptor.grad(InputDescriptor.plain(i)) for i in input_grads]
    dg, num_fwd = finalize_graph(g2, in_desc, out_desc, constants, GraphRole.Joint, n_w + n_in)
    return CapturedJoint(dg, num_fwd)


def _symbolic_joint_args(model: torch.nn.Module, state_names, sig: ExportSignature, dynamic,
                         state: List[torch.Tensor], user: List[torch.Tensor], diff: List[int],
                         table: Dict) -> List[Any]:
    """Fake weights (static), fake user inputs (marked dims symbolic) and tangents: ones of the
    symbolic sizes of the differentiable outputs, from one fake forward."""
    fake_state = [dynamic.static(t) for t in state]
    fake_user = dynamic.fakify(user)
    try:
        with _DataDependenceGuard(), dynamic.tracing(), capturable(model), _decomposed(table):
            outs, _ = _flat_outputs(_call_model(model, state_names, fake_state, sig, fake_user),
                                    "forward()")
            tangents = [torch.ones_like(outs[i]).detach() for i in diff]
    except ExportError:
        raise
    except Exception as e:
        from .symbolic_meta_torch1 import no_symbolic_rule
        no_symbolic_rule(e, model, "forward")
        raise CaptureError(f"pt2rt.export: cannot run {type(model).__name__}.forward on "
                           f"symbolic shapes: {type(e).__name__}: {e}") from e
    return fake_state + fake_user + tangents


def _decomposed(table: Dict):
    from torch.fx.experimental.proxy_tensor import decompose
    return decompose(table)


def capture_inference(model: torch.nn.Module, weights: List[WeightSpec], sig: ExportSignature,
                      user_inputs: List[torch.Tensor], constants: ConstantTable,
                      decompositions: Optional[Dict] = None, dynamic=None,
                      probe: Optional[EagerTrainRun] = None) -> DescribedGraph:
    """The inference graph: eval mode, no grad, functionalized (``decompositions`` applied).
    ``dynamic``: as ``capture_joint``'s. ``probe``: the eager training run, when the export
    has one: it sizes the choice of a fake-tensor trace (``_first_trace``)."""
    # About one node per autograd node, and a forward's share (a third) of the step's time.
    estimate = (probe.autograd_nodes, probe.seconds / 3) if probe and probe.seconds else None
    state_names = _state_names(model, weights)
    n_w = len(weights)
    prov = Provenance(model)
    outputs: List[int] = []

    def forward(*flat):
        outs, spec = _flat_outputs(
            _call_model(model, state_names, flat[:n_w], sig, flat[n_w:]), "forward()")
        outputs.append(len(outs))
        if sig.out_spec is None:
            sig.out_spec, sig.num_outputs = spec, len(outs)
        return tuple(outs)

    with _mode(model, False), torch.no_grad():
        args = [_fresh(t) for t in [w.tensor for w in weights] + list(user_inputs)]
        if dynamic is not None:
            args = [dynamic.static(t) for t in args[:n_w]] + dynamic.fakify(args[n_w:])
        # Traced plainly first, then functionalized by replaying the graph (as the joint):
        # functorch 1.13's functionalize refuses saved-tensor hooks, which
        # torch.utils.checkpoint installs even under no_grad.
        with prov.recording(), capturable(model), _static_rnns(model, dynamic):
            g1, trace_s = _first_trace(forward, args, "inference", model,
                                       {**training_decompositions(), **(decompositions or {})},
                                       dynamic, estimate)
        if dynamic is None:
            replay_args = [_fresh(a) for a in args]
        else:
            with dynamic.tracing():
                replay_args = [a.detach() for a in args]
        del args  # the trace's copies of the weights: not held during the replay
        gm = _replay_functionalized(g1, replay_args, prov, "inference", model, dynamic,
                                    trace_s)
    in_desc = [w.descriptor() for w in weights]
    in_desc += [InputDescriptor.plain(i) for i in range(len(user_inputs))]
    out_desc = [OutputDescriptor.plain(i) for i in range(outputs[-1])]
    dg, _ = finalize_graph(gm, in_desc, out_desc, constants, GraphRole.Inference,
                           n_w + len(user_inputs))
    return dg


def symbolic_inputs(spec):
    """Dynamic shapes: the export's ShapeEnv with only the marked dims symbolic
    (``dynamic_torch1.SymbolicInputs``); its ``finish()`` gives the symbol table."""
    from .dynamic_torch1 import SymbolicInputs
    return SymbolicInputs(spec)
