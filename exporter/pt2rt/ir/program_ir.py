"""Plain Python mirror of the FlatBuffer ``Program`` (schema/pt2rt.fbs; C++: pt2rt/program.h).

``lower.py`` builds it from FX graphs, ``serialize.py`` writes it to FlatBuffer bytes,
``deserialize.py`` reads it back, and ``executor.py`` runs its graphs with torch ops. Writing
then reading gives an equal object (a test checks the round trip).

Conventions (shared with the C++ runtime, see schema/README.md):
* value ids index ``Graph.values``; a ``GraphOutput.value`` of -1 means None;
* ``Node.outputs``: one value per returned element of the op's schema;
* ``Argument``s follow the op's schema at export: positional ones in order, then kwarg_only
  ones by name; trailing defaults may be absent.
* dtype / layout / memory format numbers are c10's (``dtypes.py``).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .descriptors import InputDescriptor, OutputDescriptor
from .graph_ir import GraphRole, WeightKind


class ValueKind(enum.IntEnum):
    Tensor = 0
    SymInt = 1
    SymFloat = 2
    SymBool = 3
    None_ = 4
    TensorList = 5
    OptionalTensorList = 6


class ArgKind(enum.IntEnum):
    """The ``ArgumentValue`` union's type tags (0 is NONE, never written)."""

    NoneArg = 1
    TensorRef = 2
    TensorListArg = 3
    OptionalTensorListArg = 4
    TensorListRef = 5
    IntArg = 6
    IntListArg = 7
    SymIntRef = 8
    SymIntListArg = 9
    FloatArg = 10
    FloatListArg = 11
    BoolArg = 12
    BoolListArg = 13
    StringArg = 14
    ScalarArg = 15
    ScalarTypeArg = 16
    LayoutArg = 17
    MemoryFormatArg = 18
    DeviceArg = 19
    SymFloatRef = 20
    SymBoolRef = 21


@dataclass(frozen=True)
class Device:
    """A device as torch spells it; ``index`` -1 = unspecified."""

    type: str
    index: int = -1

    def __str__(self) -> str:
        return self.type if self.index < 0 else f"{self.type}:{self.index}"


@dataclass
class Dim:
    """A size/stride/offset: static (``expr`` None) or symbolic with ``value`` the hint."""

    value: int
    expr: Optional["SymExpr"] = None


@dataclass
class SymExpr:
    op: int = 0  # schema SymOp
    value: int = 0
    symbol: int = 0
    operands: List["SymExpr"] = field(default_factory=list)


@dataclass
class TensorMeta:
    dtype: int                      # c10 ScalarType
    sizes: List[Dim]
    strides: List[Dim]
    storage_offset: Dim
    device: Device
    requires_grad: bool = False
    layout: int = 0                 # c10 Layout

    def static_sizes(self) -> List[int]:
        return [d.value for d in self.sizes]

    def static_strides(self) -> List[int]:
        return [d.value for d in self.strides]


@dataclass
class Value:
    name: str
    kind: ValueKind = ValueKind.Tensor
    meta: Optional[TensorMeta] = None
    sym: Optional[SymExpr] = None
    device_dependent_shape: bool = False  # schema 1.5 (portability.py)


@dataclass
class Argument:
    """One op argument. ``value`` by ``kind``: value id (TensorRef, TensorListRef, Sym*Ref);
    list of ids (TensorListArg; -1 = None in OptionalTensorListArg); int / float / bool / str;
    lists of those; ``(values, is_ref)`` (SymIntListArg); a Python int/float/bool/complex
    (ScalarArg); a c10 enum number (ScalarTypeArg, LayoutArg, MemoryFormatArg); ``Device``;
    None (NoneArg)."""

    name: str
    kind: ArgKind
    value: Any = None
    kwarg_only: bool = False


@dataclass
class Operator:
    name: str          # "aten::addmm", "prim::getitem"
    overload: str      # "" for FX's .default
    schema: str = ""

    def qualified(self) -> str:
        return self.name if not self.overload else f"{self.name}.{self.overload}"


@dataclass
class DebugInfo:
    fx_name: str = ""
    module_fqn: str = ""
    nn_module_stack: List[str] = field(default_factory=list)
    stack_trace: str = ""


@dataclass
class Node:
    op: int
    args: List[Argument]
    outputs: List[int]
    debug: DebugInfo = field(default_factory=DebugInfo)


@dataclass
class GraphInput:
    value: int
    descriptor: InputDescriptor


@dataclass
class GraphOutput:
    value: int  # -1: None
    descriptor: OutputDescriptor


@dataclass
class Graph:
    role: GraphRole
    values: List[Value]
    nodes: List[Node]
    inputs: List[GraphInput]
    outputs: List[GraphOutput]

    def input_index(self) -> Dict[InputDescriptor, int]:
        return {gi.descriptor: i for i, gi in enumerate(self.inputs)}

    def output_index(self) -> Dict[OutputDescriptor, int]:
        return {go.descriptor: i for i, go in enumerate(self.outputs)}


@dataclass
class Weight:
    fqn: str
    kind: WeightKind
    dtype: int
    sizes: List[int]
    strides: List[int]
    storage_offset: int
    requires_grad: bool
    entry: str
    byte_length: int
    persistent: bool = True


@dataclass
class TensorData:
    """A contiguous tensor stored inline (little-endian bytes)."""

    dtype: int
    sizes: List[int]
    data: bytes
    float64_rmse: Optional[float] = None  # schema 1.5, references: RMSE against eager float64


@dataclass
class GradSketch:
    """A gradient summarised in float64 (schema 1.2; definition and tolerance rule in
    ``grad_sketch.py``)."""

    name: str                     # FQN or "input:<i>"
    dtype: int                    # ScalarType number of the gradient
    sizes: List[int]
    norm: float
    sum: float
    abs_sum: float
    max_abs: float
    projections: List[float] = field(default_factory=list)
    float64: Optional["GradSketch"] = None  # schema 1.5: the eager float64 gradient's sketch
    float64_rmse: Optional[float] = None    # schema 1.5: RMSE(this gradient, float64's)


@dataclass
class ExampleReferences:
    outputs: List[TensorData] = field(default_factory=list)
    train_outputs: List[TensorData] = field(default_factory=list)
    grad_outputs: List[TensorData] = field(default_factory=list)
    grads: List[Tuple[str, TensorData]] = field(default_factory=list)
    buffers: List[Tuple[str, TensorData]] = field(default_factory=list)
    grad_sketch_seed: int = 0
    grad_sketches: List[GradSketch] = field(default_factory=list)  # schema 1.2 (grad_sketch.py)


@dataclass
class Example:
    name: str
    inputs: List[TensorData]
    references: Optional[ExampleReferences] = None


@dataclass
class Producer:
    exporter_version: str = ""
    torch_version: str = ""
    python_version: str = ""
    capture: str = ""
    capture_device: str = "cpu"  # schema 1.5


@dataclass
class Symbol:
    name: str
    hint: int


@dataclass
class RangeConstraint:
    symbol: int
    min: int
    max: int = 2 ** 63 - 1


@dataclass
class Program:
    schema_major: int
    schema_minor: int
    producer: Producer
    operators: List[Operator]
    graphs: List[Graph]
    weights: List[Weight]
    symbols: List[Symbol] = field(default_factory=list)
    range_constraints: List[RangeConstraint] = field(default_factory=list)
    examples: List[Example] = field(default_factory=list)
    metadata: Dict[str, str] = field(default_factory=dict)
    # schema 1.4: one name per user output (output_names.py); empty in older archives
    output_names: List[str] = field(default_factory=list)
    # schema 1.6: forward()'s parameters as passed at export, each (name, input_spec.InputSpec);
    # empty in older archives (every user input one tensor parameter)
    inputs: List[Tuple[str, Any]] = field(default_factory=list)

    def graph(self, role: GraphRole) -> Optional[Graph]:
        return next((g for g in self.graphs if g.role == role), None)
