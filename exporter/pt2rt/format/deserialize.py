"""Read FlatBuffer ``program.fb`` bytes into a ``program_ir.Program`` (inverse of
``serialize.write_program``), with the generated Python bindings in ``pt2rt.fb``.

The Python bindings have no Verifier; ``read_program`` checks the identifier and schema major
version and wraps any decoding failure (out-of-range offsets raise inside flatbuffers) in
``FormatError`` naming program.fb. The C++ loader is the hardened reader.
"""
from __future__ import annotations

import importlib
import math
from typing import Any, Callable, List, Optional

from ..errors import FormatError
from ..ir import constants
from ..ir.descriptors import InputDescriptor, InputKind, OutputDescriptor, OutputKind
from ..ir.graph_ir import GraphRole, WeightKind
from ..ir.input_spec import InputSpec, SpecKind
from ..ir.program_ir import (ArgKind, Argument, DebugInfo, Device, Dim, Example, ExampleReferences,
                             GradSketch, Graph, GraphInput, GraphOutput, Node, Operator, Producer,
                             Program, RangeConstraint, SymExpr, Symbol, TensorData, TensorMeta,
                             Value, ValueKind, Weight)
from .fbs_gen import ensure_bindings

ensure_bindings()


def _cls(name: str):
    return getattr(importlib.import_module("pt2rt.fb." + name), name)


def _s(b: Optional[bytes]) -> str:
    return "" if b is None else b.decode("utf-8")


def _vec(obj: Any, field: str, conv: Callable = lambda x: x) -> List:
    n = getattr(obj, field + "Length")()
    get = getattr(obj, field)
    return [conv(get(j)) for j in range(n)]


def _input_spec(s, depth: int = 0) -> InputSpec:
    if s is None:
        return InputSpec()
    if depth > constants.MAX_INPUT_SPEC_DEPTH:
        raise FormatError(f"program.fb: an input's structure nests more than "
                          f"{constants.MAX_INPUT_SPEC_DEPTH} levels")
    return InputSpec(SpecKind(s.Kind()), tuple(_vec(s, "Keys", _s)),
                     tuple(_vec(s, "Children", lambda c: _input_spec(c, depth + 1))))


def _device(d) -> Device:
    return Device(_s(d.Type()), d.Index()) if d is not None else Device("cpu")


def _sym_expr(e) -> SymExpr:
    return SymExpr(e.Op(), e.Value(), e.Symbol(), _vec(e, "Operands", _sym_expr))


def _dim(d) -> Dim:
    if d is None:
        return Dim(0)
    expr = d.Expr()
    return Dim(d.Value(), _sym_expr(expr) if expr is not None else None)


def _meta(m) -> Optional[TensorMeta]:
    if m is None:
        return None
    return TensorMeta(dtype=m.Dtype(), sizes=_vec(m, "Sizes", _dim),
                      strides=_vec(m, "Strides", _dim), storage_offset=_dim(m.StorageOffset()),
                      device=_device(m.Device()), requires_grad=m.RequiresGrad(),
                      layout=m.Layout())


def _argument(a) -> Argument:
    kind_code = a.ValueType()
    try:
        kind = ArgKind(kind_code)
    except ValueError:
        raise FormatError(f"program.fb: argument {_s(a.Name())!r} has unknown kind {kind_code}")
    tab = a.Value()
    inner = _cls(kind.name)()
    inner.Init(tab.Bytes, tab.Pos)
    k = kind
    if k is ArgKind.NoneArg:
        v: Any = None
    elif k in (ArgKind.TensorRef, ArgKind.TensorListRef, ArgKind.SymIntRef, ArgKind.SymFloatRef,
               ArgKind.SymBoolRef, ArgKind.IntArg, ArgKind.FloatArg, ArgKind.BoolArg,
               ArgKind.ScalarTypeArg, ArgKind.LayoutArg, ArgKind.MemoryFormatArg):
        v = inner.Value()
    elif k in (ArgKind.TensorListArg, ArgKind.OptionalTensorListArg, ArgKind.IntListArg,
               ArgKind.FloatListArg, ArgKind.BoolListArg):
        v = _vec(inner, "Values")
        if k is ArgKind.BoolListArg:
            v = [bool(x) for x in v]
    elif k is ArgKind.SymIntListArg:
        v = (_vec(inner, "Values"), [bool(x) for x in _vec(inner, "IsRef")])
    elif k is ArgKind.StringArg:
        v = _s(inner.Value())
    elif k is ArgKind.ScalarArg:
        sk = inner.Kind()
        v = {0: lambda: inner.IntValue(), 1: lambda: inner.FloatValue(),
             2: lambda: inner.BoolValue(),
             3: lambda: complex(inner.FloatValue(), inner.ImagValue())}[sk]()
    elif k is ArgKind.DeviceArg:
        v = _device(inner.Value())
    else:  # pragma: no cover
        raise AssertionError(k)
    return Argument(_s(a.Name()), kind, v, a.KwargOnly())


def _input_desc(d) -> InputDescriptor:
    out = d.Output()
    base = d.Base()
    return InputDescriptor(InputKind(d.Kind()), fqn=_s(d.Fqn()), idx=d.Idx(),
                           output=_output_desc(out) if out is not None else None,
                           base=_input_desc(base) if base is not None else None,
                           attr=_s(d.Attr()))


def _output_desc(d) -> OutputDescriptor:
    of = d.Of()
    base = d.Base()
    return OutputDescriptor(OutputKind(d.Kind()), idx=d.Idx(),
                            of=_input_desc(of) if of is not None else None,
                            base=_output_desc(base) if base is not None else None,
                            attr=_s(d.Attr()))


def _node(n) -> Node:
    d = n.Debug()
    debug = DebugInfo() if d is None else DebugInfo(
        fx_name=_s(d.FxName()), module_fqn=_s(d.ModuleFqn()),
        nn_module_stack=_vec(d, "NnModuleStack", _s), stack_trace=_s(d.StackTrace()))
    return Node(n.Op(), _vec(n, "Args", _argument), _vec(n, "Outputs"), debug)


def _graph(g) -> Graph:
    values = _vec(g, "Values", lambda v: Value(_s(v.Name()), ValueKind(v.Kind()), _meta(v.Meta()),
                                               _sym_expr(v.Sym()) if v.Sym() else None,
                                               bool(v.DeviceDependentShape())))
    inputs = _vec(g, "Inputs", lambda i: GraphInput(i.Value(), _input_desc(i.Descriptor())))
    outputs = _vec(g, "Outputs", lambda o: GraphOutput(o.Value(), _output_desc(o.Descriptor())))
    return Graph(GraphRole(g.Role()), values, _vec(g, "Nodes", _node), inputs, outputs)


def _optional(x: float) -> Optional[float]:
    """A double field whose default (absent) is NaN, as None."""
    return None if math.isnan(x) else x


def _tensor_data(t) -> TensorData:
    data = t.DataAsNumpy()
    raw = b"" if isinstance(data, int) else data.tobytes()
    return TensorData(t.Dtype(), _vec(t, "Sizes"), raw, _optional(t.Float64Rmse()))


def _named(n):
    return (_s(n.Name()), _tensor_data(n.Tensor()))


def _grad_sketch(s) -> GradSketch:
    f64 = s.Float64()
    return GradSketch(_s(s.Name()), s.Dtype(), _vec(s, "Sizes"), s.Norm(), s.Sum(), s.AbsSum(),
                      s.MaxAbs(), _vec(s, "Projections"),
                      _grad_sketch(f64) if f64 is not None else None,
                      _optional(s.Float64Rmse()))


def _example(e) -> Example:
    r = e.References()
    refs = None
    if r is not None:
        refs = ExampleReferences(outputs=_vec(r, "Outputs", _tensor_data),
                                 train_outputs=_vec(r, "TrainOutputs", _tensor_data),
                                 grad_outputs=_vec(r, "GradOutputs", _tensor_data),
                                 grads=_vec(r, "Grads", _named), buffers=_vec(r, "Buffers", _named),
                                 grad_sketch_seed=r.GradSketchSeed(),
                                 grad_sketches=_vec(r, "GradSketches", _grad_sketch))
    return Example(_s(e.Name()), _vec(e, "Inputs", _tensor_data), refs)


def _weight(w) -> Weight:
    return Weight(fqn=_s(w.Fqn()), kind=WeightKind(w.Kind()), dtype=w.Dtype(),
                  sizes=_vec(w, "Sizes"), strides=_vec(w, "Strides"),
                  storage_offset=w.StorageOffset(), requires_grad=w.RequiresGrad(),
                  entry=_s(w.Entry()), byte_length=w.ByteLength(), persistent=w.Persistent())


def read_program(buf: bytes) -> Program:
    """Decodes program.fb bytes.

    Raises:
        FormatError: wrong identifier, another schema major version, or undecodable bytes.
    """
    ident = constants.PROGRAM_IDENTIFIER.encode()
    if len(buf) < 8 or bytes(buf[4:8]) != ident:
        raise FormatError(f"program.fb: missing FlatBuffer identifier {ident!r}")
    try:
        p = _cls("Program").GetRootAs(buf, 0)
        sv = p.SchemaVersion()
        major, minor = (sv.Major(), sv.Minor()) if sv is not None else (0, 0)
        if major != constants.SCHEMA_MAJOR:
            raise FormatError(f"program.fb: schema version {major}.{minor}, this reader handles "
                              f"major {constants.SCHEMA_MAJOR}")
        pr = p.Producer()
        producer = Producer() if pr is None else Producer(
            _s(pr.ExporterVersion()), _s(pr.TorchVersion()), _s(pr.PythonVersion()),
            _s(pr.Capture()), _s(pr.CaptureDevice()) or "cpu")
        return Program(
            schema_major=major, schema_minor=minor, producer=producer,
            operators=_vec(p, "Operators",
                           lambda o: Operator(_s(o.Name()), _s(o.Overload()), _s(o.Schema()))),
            graphs=_vec(p, "Graphs", _graph), weights=_vec(p, "Weights", _weight),
            symbols=_vec(p, "Symbols", lambda s: Symbol(_s(s.Name()), s.Hint())),
            range_constraints=_vec(p, "RangeConstraints",
                                   lambda r: RangeConstraint(r.Symbol(), r.Min(), r.Max())),
            examples=_vec(p, "Examples", _example),
            metadata=dict(_vec(p, "Metadata", lambda kv: (_s(kv.Key()), _s(kv.Value())))),
            output_names=_vec(p, "OutputNames", _s),
            inputs=_vec(p, "Inputs", lambda i: (_s(i.Name()), _input_spec(i.Spec()))))
    except FormatError:
        raise
    except Exception as e:  # flatbuffers raises struct.error / IndexError / ValueError
        raise FormatError(f"program.fb: cannot decode: {type(e).__name__}: {e}") from e
