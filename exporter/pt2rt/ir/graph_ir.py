"""The exporter's intermediate form: FX graphs with a descriptor on every input and output.

Every capture path (``capture_torch1`` today; a torch >= 2.9 path on
``aot_export_joint_with_descriptors`` later) produces these types, and the partitioner and
serializer consume only these, so a new capture path writes the same archive.

* ``DescribedGraph``: an ``fx.GraphModule`` of ATen ops whose placeholders carry
  ``InputDescriptor``s (``inputs[i]`` describes the i-th placeholder) and whose output node
  returns one flat tuple described by ``outputs`` (an element may be ``None``, e.g. an unused
  gradient).
* ``CapturedJoint``: the joint forward+backward graph (role ``Joint``); its first
  ``num_fwd_outputs`` outputs are the forward's (user outputs, then input mutations), the rest
  are gradients. Placeholders are named ``primals_<n>`` / ``tangents_<n>``, as functorch's
  partitioners require.
* ``ExportSignature``: the user-facing calling convention (forward() argument names, output
  pytree).
* ``WeightSpec``: one parameter / buffer / lifted constant and its tensor.

The FX-utility queries of AOTAutograd (``get_param_and_grad_nodes`` and friends, see
torch._functorch._aot_autograd.fx_utils) are provided for joint graphs.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.fx as fx

from .descriptors import InputDescriptor, InputKind, OutputDescriptor, OutputKind
from .input_spec import SpecKind, unflatten


class GraphRole(enum.IntEnum):
    """schema ``GraphRole``."""

    Inference = 0
    Forward = 1
    Backward = 2
    Joint = 3


class WeightKind(enum.IntEnum):
    """schema ``WeightKind``."""

    Parameter = 0
    Buffer = 1
    Constant = 2


@dataclass
class WeightSpec:
    """A parameter, buffer or lifted tensor constant. ``tensor`` is the module's own tensor
    object (not copied; identity is used to find tied names); readers must not mutate it."""

    fqn: str
    kind: WeightKind
    tensor: torch.Tensor
    persistent: bool = True
    requires_grad: bool = False

    def descriptor(self) -> InputDescriptor:
        if self.kind is WeightKind.Parameter:
            return InputDescriptor.param(self.fqn)
        if self.kind is WeightKind.Buffer:
            return InputDescriptor.buffer(self.fqn)
        return InputDescriptor.constant(self.fqn)


class ConstantTable:
    """Tensor constants lifted out of traced graphs (``get_attr`` nodes), shared by every graph
    of one export so equal constants get one FQN: ``_tensor_constant<n>``."""

    def __init__(self) -> None:
        self.specs: List[WeightSpec] = []

    def add(self, tensor: torch.Tensor) -> WeightSpec:
        t = tensor.detach()
        for spec in self.specs:
            s = spec.tensor
            if s is t or (s.dtype == t.dtype and s.shape == t.shape and s.device == t.device
                          and torch.equal(s, t)):
                return spec
        spec = WeightSpec(f"_tensor_constant{len(self.specs)}", WeightKind.Constant, t)
        self.specs.append(spec)
        return spec


@dataclass
class ExportSignature:
    """The model's calling convention at export.

    ``params[k]`` is the name of the k-th forward() parameter passed at export (positional
    ones first — ``num_args`` of them —, then keyword ones in forward()'s parameter order) and
    ``specs[k]`` its structure (``input_spec.py``: a tensor, or a tuple / list / dict of them);
    their tensors, in flatten order, are the flat user inputs ``Plain(i)``, and
    ``input_names[i]`` is input i's path (``x``, ``images[0]``, ``batch['mask']``).
    ``out_spec`` is the torch.utils._pytree spec of forward()'s return value, whose leaves are
    the ``Plain(i)`` outputs.
    """

    input_names: List[str]
    num_args: int
    out_spec: Any = None
    num_outputs: int = 0
    params: List[str] = field(default_factory=list)
    specs: List[Any] = field(default_factory=list)  # input_spec.InputSpec, one per param

    def split(self, flat: List[Any]) -> Tuple[tuple, Dict[str, Any]]:
        """Flat user inputs -> (args, kwargs) for ``model(*args, **kwargs)``."""
        if not self.specs:  # every parameter one tensor
            args = tuple(flat[: self.num_args])
            kwargs = dict(zip(self.input_names[self.num_args:], flat[self.num_args:]))
            return args, kwargs
        leaves = iter(flat)
        values = [unflatten(s, leaves) for s in self.specs]
        return tuple(values[: self.num_args]), dict(zip(self.params[self.num_args:],
                                                        values[self.num_args:]))

    def nested(self) -> bool:
        """Whether a parameter is not a single tensor."""
        return any(s.kind is not SpecKind.Tensor for s in self.specs)


@dataclass
class DescribedGraph:
    """An FX graph of ATen ops with a descriptor on every placeholder and output element."""

    role: GraphRole
    module: fx.GraphModule
    inputs: List[InputDescriptor]
    outputs: List[OutputDescriptor]

    def placeholders(self) -> List[fx.Node]:
        return [n for n in self.module.graph.nodes if n.op == "placeholder"]

    def output_values(self) -> List[Optional[fx.Node]]:
        """The output node's flat elements (``None`` where the output is None)."""
        out = next(n for n in reversed(self.module.graph.nodes) if n.op == "output")
        vals = out.args[0]
        return list(vals) if isinstance(vals, (list, tuple)) else [vals]

    def check(self) -> None:
        """Raises AssertionError when the descriptors do not cover the graph one to one."""
        phs = self.placeholders()
        assert len(phs) == len(self.inputs), (self.role, len(phs), len(self.inputs))
        outs = self.output_values()
        assert len(outs) == len(self.outputs), (self.role, len(outs), len(self.outputs))
        assert len(set(self.inputs)) == len(self.inputs), "duplicate input descriptor"
        assert len(set(self.outputs)) == len(self.outputs), "duplicate output descriptor"

    def input_node(self, desc: InputDescriptor) -> fx.Node:
        return self.placeholders()[self.inputs.index(desc)]

    def count_nodes(self) -> int:
        """Number of call_function nodes."""
        return sum(1 for n in self.module.graph.nodes if n.op == "call_function")


@dataclass
class CapturedJoint:
    """The joint forward+backward graph; see the module docstring."""

    graph: DescribedGraph
    num_fwd_outputs: int


@dataclass
class CapturedProgram:
    """Everything the serializer needs: graphs (inference / forward / backward), weights in
    Program order (parameters, buffers, constants), the signature, provenance."""

    graphs: List[DescribedGraph]
    weights: List[WeightSpec]
    signature: ExportSignature
    capture: str
    partitioner: str = ""
    metadata: Dict[str, str] = field(default_factory=dict)
    example_inputs: List[torch.Tensor] = field(default_factory=list)  # flat Plain(i) inputs
    symbols: Any = None  # symbols.SymbolTable of a dynamic-shape export, else None
    eager_train: Any = None  # eager_run.EagerTrainRun on example_inputs (train exports)
    eager_eval: Any = None  # eager_run.eager_eval_outputs on example_inputs (inference exports)
    capture_device: str = "cpu"  # device type the model and inputs were on (portability.py)

    def graph(self, role: GraphRole) -> Optional[DescribedGraph]:
        return next((g for g in self.graphs if g.role is role), None)


# ---------------------------------------------------------------------------
# AOTAutograd FX-utility queries (torch._functorch._aot_autograd.fx_utils), on a joint graph.

def get_all_input_and_grad_nodes(
        g: DescribedGraph) -> Dict[InputDescriptor, Tuple[fx.Node, Optional[fx.Node]]]:
    """Every Param/Buffer/Constant/Plain input -> (placeholder, its Grad output node or None)."""
    grads = {d.of: n for d, n in zip(g.outputs, g.output_values()) if d.kind is OutputKind.Grad}
    differentiable = (InputKind.Param, InputKind.Buffer, InputKind.Constant, InputKind.Plain)
    return {d: (n, grads.get(d)) for d, n in zip(g.inputs, g.placeholders())
            if d.kind in differentiable}


def get_param_and_grad_nodes(g: DescribedGraph):
    return {d: v for d, v in get_all_input_and_grad_nodes(g).items() if d.kind is InputKind.Param}


def get_plain_input_and_grad_nodes(g: DescribedGraph):
    return {d: v for d, v in get_all_input_and_grad_nodes(g).items() if d.kind is InputKind.Plain}


def get_named_param_nodes(g: DescribedGraph) -> Dict[str, fx.Node]:
    return {d.fqn: n for d, n in zip(g.inputs, g.placeholders()) if d.kind is InputKind.Param}


def get_named_buffer_nodes(g: DescribedGraph) -> Dict[str, fx.Node]:
    return {d.fqn: n for d, n in zip(g.inputs, g.placeholders()) if d.kind is InputKind.Buffer}


def get_all_output_and_tangent_nodes(
        g: DescribedGraph) -> Dict[OutputDescriptor, Tuple[Optional[fx.Node], Optional[fx.Node]]]:
    """Every forward output (Plain, InputMutation) -> (output node, its Tangent placeholder or
    None)."""
    tangents = {d.output: n for d, n in zip(g.inputs, g.placeholders())
                if d.kind is InputKind.Tangent}
    return {d: (n, tangents.get(d)) for d, n in zip(g.outputs, g.output_values())
            if d.kind in (OutputKind.Plain, OutputKind.InputMutation)}
