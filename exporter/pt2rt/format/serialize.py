"""Write a ``program_ir.Program`` as FlatBuffer bytes (root table ``Program``, identifier
"PT2R") with the generated Python bindings in ``pt2rt.fb`` (schema/pt2rt.fbs).

The Python FlatBuffers builder ignores ``force_align``; ``TensorData.data`` vectors are
therefore started with an explicit 64-byte alignment here (``_aligned_bytes``), so the bytes of
bundled tensors are 64-byte aligned in program.fb (which itself starts 64-byte aligned in the
archive).

``serialize(captured, examples)`` is the exporter's entry point: lowering (``lower.py``) plus
weights metadata plus writing.
"""
from __future__ import annotations

import importlib
import platform
from typing import Any, Dict, List, Optional, Sequence, Tuple

import flatbuffers
import torch

from ..ir import constants, dtypes
from ..ir.descriptors import InputDescriptor, OutputDescriptor, OutputKind
from ..ir.graph_ir import CapturedProgram, GraphRole, WeightSpec
from ..ir.input_spec import InputSpec
from ..ir.output_names import output_names
from ..ir.program_ir import (ArgKind, Argument, DebugInfo, Device, Dim, Example, GradSketch, Graph,
                             Node, Producer, Program, SymExpr, TensorData, TensorMeta, Value,
                             Weight)
from ..passes.lower import OpTable, lower_graph
from ..version import __version__
from .fbs_gen import ensure_bindings

ensure_bindings()
_FB = "pt2rt.fb."
_SCALAR_KINDS = {bool: 2, int: 0, float: 1, complex: 3}  # schema ScalarKind
# Argument kinds whose union table holds the argument as is, in its field ``Value``.
_VALUE_ARGS = frozenset({
    ArgKind.TensorRef, ArgKind.TensorListRef, ArgKind.SymIntRef, ArgKind.SymFloatRef,
    ArgKind.SymBoolRef, ArgKind.IntArg, ArgKind.FloatArg, ArgKind.BoolArg,
    ArgKind.ScalarTypeArg, ArgKind.LayoutArg, ArgKind.MemoryFormatArg})
# Argument kinds whose union table holds a vector ``Values``, with its element type.
_LIST_ARGS = {
    ArgKind.TensorListArg: "uint32", ArgKind.OptionalTensorListArg: "int32",
    ArgKind.IntListArg: "int64", ArgKind.FloatListArg: "double", ArgKind.BoolListArg: "bool"}


def _fb(name: str):
    return importlib.import_module(_FB + name)


_TABLE_FNS: Dict[str, Tuple[Any, Dict[str, Any], Any]] = {}


def _exact_key(v: Any) -> Any:
    """A hashable key equal only for identical argument values (1, 1.0 and True differ;
    -0.0 and 0.0 differ)."""
    if isinstance(v, float):
        return ("f", v.hex())
    if isinstance(v, complex):
        return ("c", v.real.hex(), v.imag.hex())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__,) + tuple(_exact_key(x) for x in v)
    return (type(v).__name__, v)


def _table_fns(name: str) -> Tuple[Any, Dict[str, Any], Any]:
    """(Start, {field: Add}, End) of generated table ``name``, looked up once."""
    fns = _TABLE_FNS.get(name)
    if fns is None:
        mod = _fb(name)
        prefix = f"{name}Add"
        adders = {k[len(prefix):]: getattr(mod, k) for k in dir(mod) if k.startswith(prefix)}
        fns = (getattr(mod, f"{name}Start"), adders, getattr(mod, f"{name}End"))
        _TABLE_FNS[name] = fns
    return fns


class _Writer:
    """Bottom-up FlatBuffer construction helpers (children before parents).

    Identical strings, devices, dims and tensor metas are written once and shared (a
    FlatBuffer may refer to one table from many places): most values of a graph repeat a
    few shapes, and this keeps writing time and program.fb size down."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.b = flatbuffers.Builder(capacity)
        self.strings_: Dict[str, int] = {}
        self.shared_: Dict[Any, int] = {}

    # -- primitives ---------------------------------------------------------------------
    def string(self, s: Optional[str]) -> Optional[int]:
        if s is None:
            return None
        off = self.strings_.get(s)
        if off is None:
            off = self.b.CreateString(s)
            self.strings_[s] = off
        return off

    def offsets(self, offs: Sequence[int]) -> int:
        self.b.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            self.b.PrependUOffsetTRelative(o)
        return self.b.EndVector()

    def scalars(self, values: Sequence[Any], kind: str) -> int:
        size, prepend = {"int64": (8, self.b.PrependInt64), "int32": (4, self.b.PrependInt32),
                         "uint32": (4, self.b.PrependUint32), "double": (8, self.b.PrependFloat64),
                         "bool": (1, self.b.PrependBool)}[kind]
        self.b.StartVector(size, len(values), size)
        for v in reversed(values):
            prepend(v)
        return self.b.EndVector()

    def aligned_bytes(self, data: bytes, alignment: int = constants.DATA_ALIGNMENT) -> int:
        b = self.b
        b.StartVector(1, len(data), alignment)
        b.head = b.Head() - len(data)
        b.Bytes[b.head:b.head + len(data)] = data
        return b.EndVector()

    def input_spec(self, spec: InputSpec) -> int:
        keys = self.offsets([self.string(k) for k in spec.keys]) if spec.keys else None
        children = self.offsets([self.input_spec(c) for c in spec.children]) \
            if spec.children else None
        return self.table("InputSpec", Kind=int(spec.kind), Keys=keys, Children=children)

    def table(self, name: str, **fields: Any) -> int:
        """Builds table ``name``; ``fields``: built offsets or scalars (None = absent)."""
        start, adders, end = _table_fns(name)
        start(self.b)
        for field, value in fields.items():
            if value is not None:
                adders[field](self.b, value)
        return end(self.b)

    def shared(self, key: Any, build) -> int:
        """The offset of an identical earlier table, or ``build()``'s."""
        off = self.shared_.get(key)
        if off is None:
            off = build()
            self.shared_[key] = off
        return off

    # -- schema pieces ------------------------------------------------------------------
    def device(self, d: Device) -> int:
        return self.shared(("Device", d.type, d.index), lambda: self.table(
            "Device", Type=self.string(d.type), Index=d.index))

    def sym_expr(self, e: SymExpr) -> int:
        ops = self.offsets([self.sym_expr(o) for o in e.operands]) if e.operands else None
        return self.table("SymExpr", Op=e.op, Value=e.value, Symbol=e.symbol, Operands=ops)

    def dim(self, d: Dim) -> int:
        if d.expr is not None:
            return self.table("Dim", Value=d.value, Expr=self.sym_expr(d.expr))
        return self.shared(("Dim", d.value), lambda: self.table("Dim", Value=d.value))

    def dims(self, ds: Sequence[Dim]) -> int:
        if any(d.expr is not None for d in ds):
            return self.offsets([self.dim(d) for d in ds])
        return self.shared(("Dims",) + tuple(d.value for d in ds),
                           lambda: self.offsets([self.dim(d) for d in ds]))

    def tensor_meta(self, m: TensorMeta) -> int:
        def build() -> int:
            sizes = self.dims(m.sizes)
            strides = self.dims(m.strides)
            off = self.dim(m.storage_offset)
            dev = self.device(m.device)
            return self.table("TensorMeta", Dtype=m.dtype, Sizes=sizes, Strides=strides,
                              StorageOffset=off, Device=dev, RequiresGrad=m.requires_grad,
                              Layout=m.layout)
        symbolic = any(d.expr is not None for d in (*m.sizes, *m.strides, m.storage_offset))
        if symbolic:
            return build()
        key = ("TensorMeta", m.dtype, tuple(d.value for d in m.sizes),
               tuple(d.value for d in m.strides), m.storage_offset.value, m.device.type,
               m.device.index, m.requires_grad, m.layout)
        return self.shared(key, build)

    def value(self, v: Value) -> int:
        name = self.string(v.name)
        meta = self.tensor_meta(v.meta) if v.meta is not None else None
        sym = self.sym_expr(v.sym) if v.sym is not None else None
        return self.table("Value", Name=name, Kind=int(v.kind), Meta=meta, Sym=sym,
                          DeviceDependentShape=True if v.device_dependent_shape else None)

    def argument(self, a: Argument) -> int:
        try:
            key = ("Argument", a.name, a.kind, a.kwarg_only, _exact_key(a.value))
            hash(key)
        except TypeError:  # an unhashable value (e.g. a Device): not shared
            return self.argument_table(a)
        return self.shared(key, lambda: self.argument_table(a))

    def argument_table(self, a: Argument) -> int:
        k, v = a.kind, a.value
        if k is ArgKind.NoneArg:
            inner = self.table("NoneArg")
        elif k in _VALUE_ARGS:
            inner = self.table(k.name, Value=v)
        elif k in _LIST_ARGS:
            inner = self.table(k.name, Values=self.scalars(v, _LIST_ARGS[k]))
        elif k is ArgKind.SymIntListArg:
            vals, refs = v
            inner = self.table(k.name, Values=self.scalars(vals, "int64"),
                               IsRef=self.scalars(refs, "bool"))
        elif k is ArgKind.StringArg:
            inner = self.table(k.name, Value=self.string(v))
        elif k is ArgKind.ScalarArg:
            sk = _SCALAR_KINDS[type(v)]
            inner = self.table(
                k.name, Kind=sk, IntValue=int(v) if sk == 0 else None,
                FloatValue=float(v.real if sk == 3 else v) if sk in (1, 3) else None,
                BoolValue=bool(v) if sk == 2 else None,
                ImagValue=float(v.imag) if sk == 3 else None)
        elif k is ArgKind.DeviceArg:
            inner = self.table(k.name, Value=self.device(v))
        else:  # pragma: no cover - ArgKind is closed
            raise AssertionError(k)
        return self.table("Argument", Name=self.string(a.name), ValueType=int(k), Value=inner,
                          KwargOnly=a.kwarg_only)

    def debug(self, d: DebugInfo) -> int:
        stack = self.offsets([self.string(s) for s in d.nn_module_stack])
        return self.table("DebugInfo", FxName=self.string(d.fx_name),
                          ModuleFqn=self.string(d.module_fqn), NnModuleStack=stack,
                          StackTrace=self.string(d.stack_trace) if d.stack_trace else None)

    def node(self, n: Node) -> int:
        args = self.offsets([self.argument(a) for a in n.args])
        outs = self.scalars(n.outputs, "uint32")
        return self.table("Node", Op=n.op, Args=args, Outputs=outs, Debug=self.debug(n.debug))

    def input_descriptor(self, d: InputDescriptor) -> int:
        out = self.output_descriptor(d.output) if d.output is not None else None
        base = self.input_descriptor(d.base) if d.base is not None else None
        return self.table("InputDescriptor", Kind=int(d.kind), Fqn=self.string(d.fqn or None),
                          Idx=d.idx, Output=out, Base=base, Attr=self.string(d.attr or None))

    def output_descriptor(self, d: OutputDescriptor) -> int:
        of = self.input_descriptor(d.of) if d.of is not None else None
        base = self.output_descriptor(d.base) if d.base is not None else None
        return self.table("OutputDescriptor", Kind=int(d.kind), Idx=d.idx, Of=of, Base=base,
                          Attr=self.string(d.attr or None))

    def graph(self, g: Graph) -> int:
        values = self.offsets([self.value(v) for v in g.values])
        nodes = self.offsets([self.node(n) for n in g.nodes])
        inputs = self.offsets([self.table("GraphInput", Value=i.value,
                                          Descriptor=self.input_descriptor(i.descriptor))
                               for i in g.inputs])
        outputs = self.offsets([self.table("GraphOutput", Value=o.value,
                                           Descriptor=self.output_descriptor(o.descriptor))
                                for o in g.outputs])
        return self.table("Graph", Role=int(g.role), Values=values, Nodes=nodes, Inputs=inputs,
                          Outputs=outputs)

    def weight(self, w: Weight) -> int:
        return self.table("Weight", Fqn=self.string(w.fqn), Kind=int(w.kind),
                          Persistent=w.persistent, Dtype=w.dtype,
                          Sizes=self.scalars(w.sizes, "int64"),
                          Strides=self.scalars(w.strides, "int64"),
                          StorageOffset=w.storage_offset, RequiresGrad=w.requires_grad,
                          Entry=self.string(w.entry), ByteLength=w.byte_length)

    def tensor_data(self, t: TensorData) -> int:
        data = self.aligned_bytes(t.data)
        return self.table("TensorData", Dtype=t.dtype, Sizes=self.scalars(t.sizes, "int64"),
                          Data=data, Float64Rmse=t.float64_rmse)

    def named(self, items: Sequence[Tuple[str, TensorData]]) -> int:
        return self.offsets([self.table("NamedTensor", Name=self.string(n),
                                        Tensor=self.tensor_data(t)) for n, t in items])

    def grad_sketch(self, s: GradSketch) -> int:
        f64 = self.grad_sketch(s.float64) if s.float64 is not None else None
        return self.table("GradSketch", Name=self.string(s.name), Dtype=s.dtype,
                          Sizes=self.scalars(s.sizes, "int64"), Norm=s.norm, Sum=s.sum,
                          AbsSum=s.abs_sum, MaxAbs=s.max_abs,
                          Projections=self.scalars(s.projections, "double"), Float64=f64,
                          Float64Rmse=s.float64_rmse)

    def example(self, e: Example) -> int:
        refs = None
        if e.references is not None:
            r = e.references
            refs = self.table(
                "ExampleReferences",
                Outputs=self.offsets([self.tensor_data(t) for t in r.outputs]),
                TrainOutputs=self.offsets([self.tensor_data(t) for t in r.train_outputs]),
                GradOutputs=self.offsets([self.tensor_data(t) for t in r.grad_outputs]),
                Grads=self.named(r.grads), Buffers=self.named(r.buffers),
                GradSketchSeed=r.grad_sketch_seed,
                GradSketches=self.offsets([self.grad_sketch(s) for s in r.grad_sketches]))
        return self.table("Example", Name=self.string(e.name),
                          Inputs=self.offsets([self.tensor_data(t) for t in e.inputs]),
                          References=refs)

    def program(self, p: Program) -> bytes:
        version = self.table("SchemaVersion", Major=p.schema_major, Minor=p.schema_minor)
        pr = p.producer
        producer = self.table("Producer", ExporterVersion=self.string(pr.exporter_version),
                              TorchVersion=self.string(pr.torch_version),
                              PythonVersion=self.string(pr.python_version),
                              Capture=self.string(pr.capture),
                              CaptureDevice=self.string(pr.capture_device))
        ops = self.offsets([self.table("Operator", Name=self.string(o.name),
                                       Overload=self.string(o.overload),
                                       Schema=self.string(o.schema)) for o in p.operators])
        graphs = self.offsets([self.graph(g) for g in p.graphs])
        weights = self.offsets([self.weight(w) for w in p.weights])
        symbols = self.offsets([self.table("Symbol", Name=self.string(s.name), Hint=s.hint)
                                for s in p.symbols])
        ranges = self.offsets([self.table("RangeConstraint", Symbol=r.symbol, Min=r.min,
                                          Max=r.max) for r in p.range_constraints])
        examples = self.offsets([self.example(e) for e in p.examples])
        # KeyValue.key is a (key) field: the vector must be sorted by key.
        metadata = self.offsets([self.table("KeyValue", Key=self.string(k),
                                            Value=self.string(v))
                                 for k, v in sorted(p.metadata.items())])
        names = (self.offsets([self.string(n) for n in p.output_names]) if p.output_names
                 else None)  # absent, as archives before 1.4 have it
        inputs = self.offsets([self.table("InputParam", Name=self.string(name),
                                          Spec=self.input_spec(spec))
                               for name, spec in p.inputs]) if p.inputs else None
        root = self.table("Program", SchemaVersion=version, Producer=producer, Operators=ops,
                          Graphs=graphs, Weights=weights, Symbols=symbols,
                          RangeConstraints=ranges, Examples=examples, Metadata=metadata,
                          OutputNames=names, Inputs=inputs)
        self.b.Finish(root, file_identifier=constants.PROGRAM_IDENTIFIER.encode())
        return bytes(self.b.Output())


def write_program(p: Program) -> bytes:
    """FlatBuffer bytes of ``p``."""
    # The builder grows by doubling and copying; bundled tensors dominate the size, so start
    # with room for them.
    data = sum(len(t.data) + constants.DATA_ALIGNMENT for e in p.examples
               for t in _example_tensors(e))
    return _Writer(data + (1 << 20)).program(p)


def _example_tensors(e: Example):
    yield from e.inputs
    r = e.references
    if r is not None:
        yield from r.outputs
        yield from r.train_outputs
        yield from r.grad_outputs
        yield from (t for _, t in r.grads)
        yield from (t for _, t in r.buffers)


# ---------------------------------------------------------------------------

def tensor_data(t: torch.Tensor) -> TensorData:
    """A tensor as bundled TensorData (contiguous copy of its values)."""
    t = t.detach()
    return TensorData(dtypes.scalar_type(t.dtype), list(t.shape), dtypes.tensor_bytes(t))


def weight_table(weights: Sequence[WeightSpec]) -> Tuple[List[Weight], List[Tuple[str, bytes]]]:
    """Program.weights and the zip entries ``weights/<i>`` (contiguous little-endian bytes)."""
    table, blobs = [], []
    for i, w in enumerate(weights):
        t = w.tensor.detach()
        data = dtypes.tensor_bytes(t)
        entry = f"{constants.WEIGHTS_PREFIX}{i}"
        table.append(Weight(fqn=w.fqn, kind=w.kind, dtype=dtypes.scalar_type(t.dtype),
                            sizes=list(t.shape), strides=dtypes.contiguous_strides(list(t.shape)),
                            storage_offset=0, requires_grad=bool(w.requires_grad), entry=entry,
                            byte_length=len(data), persistent=w.persistent))
        blobs.append((entry, data))
    return table, blobs


def build_program(captured: CapturedProgram, examples: Sequence[Example] = ()
                  ) -> Tuple[Program, List[Tuple[str, bytes]]]:
    """Lowers every graph of ``captured`` and assembles the Program; returns it with the
    weight blobs."""
    ops = OpTable()
    graphs = [lower_graph(g, ops, captured.signature.input_names, captured.symbols)
              for g in captured.graphs]
    weights, blobs = weight_table(captured.weights)
    producer = Producer(exporter_version=__version__, torch_version=str(torch.__version__),
                        python_version=platform.python_version(), capture=captured.capture,
                        capture_device=captured.capture_device)
    metadata = dict(captured.metadata)
    if captured.partitioner:
        metadata.setdefault("partitioner", captured.partitioner)
    metadata.setdefault("input_names", ",".join(captured.signature.input_names))
    if captured.signature.out_spec is not None:  # torch.utils._pytree spec, for humans
        metadata.setdefault("output_spec", str(captured.signature.out_spec))
    program = Program(schema_major=constants.SCHEMA_MAJOR, schema_minor=constants.SCHEMA_MINOR,
                      producer=producer, operators=ops.operators, graphs=graphs, weights=weights,
                      examples=list(examples), metadata=metadata,
                      output_names=output_names(captured.signature.out_spec,
                                                _num_user_outputs(graphs)),
                      inputs=list(zip(captured.signature.params, captured.signature.specs)))
    if captured.symbols:
        program.symbols = captured.symbols.symbols()
        program.range_constraints = captured.symbols.range_constraints()
    return program, blobs


def _num_user_outputs(graphs: Sequence[Graph]) -> int:
    """Plain outputs of the graph that defines the signature (inference, else forward)."""
    by_role = {g.role: g for g in graphs}
    g = by_role.get(GraphRole.Inference, by_role.get(GraphRole.Forward))
    return 0 if g is None else sum(o.descriptor.kind is OutputKind.Plain for o in g.outputs)
