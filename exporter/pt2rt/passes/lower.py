"""Lower FX graphs (``graph_ir.DescribedGraph``) to ``program_ir.Graph``.

Rules (schema/README.md "Compatibility rules", item 9):

* ``call_function`` nodes on ``torch._ops.OpOverload`` become nodes referring to the op table
  (name ``aten::convolution``, overload ``""`` for FX's ``.default``).
* Node outputs: one value per returned element of the op's schema. A tuple return is expanded;
  FX ``operator.getitem`` on it is folded away (the getitem's users refer to the element's
  value). A ``Tensor[]`` return gives one ``TensorList`` value, and getitem on it becomes a
  ``prim::getitem(TensorListRef, IntArg)`` node.
* Arguments follow the op's schema: positional arguments in order (FX kwargs naming a
  positional argument are moved into place; an interior gap takes the schema default), then
  kwarg_only ones by name. Trailing positional arguments FX omitted or that equal their schema
  default, and keyword-only ones equal to their default, are left out: readers fill them in
  from the *running* schema, so an archive names only what it needs and runs on a LibTorch
  whose schema lacks an argument the exporting one defaults (cross-version portability). The argument kind is
  chosen by the schema type and, where 1.13's JIT types conflate them (ScalarType, Layout,
  MemoryFormat are all ``int``), by the Python value FX recorded. A Python number given for a
  ``Tensor`` argument (``aten.add.Tensor(x, 1)``) is written as a ``ScalarArg``: readers turn
  it into a wrapped-number tensor (``at::scalar_to_tensor`` + ``set_wrapped_number(true)``),
  as ATen's Python binding does.
* Value metadata comes from ``node.meta["pt2rt_val"]`` (``annotate.py``), else
  ``meta["tensor_meta"]``. Results whose shape differs by device (``ops/device_dependence.py``) are
  marked ``device_dependent_shape``.

Raises ``ExportError`` for anything the format cannot hold, naming the node.
"""
from __future__ import annotations

import operator
from typing import Any, Dict, List, Sequence, Tuple, Union

import torch
import torch.fx as fx

from ..errors import ExportError
from ..ir import dtypes
from ..ir.descriptors import InputDescriptor, InputKind
from ..ir.graph_ir import DescribedGraph
from ..ir.program_ir import (ArgKind, Argument, DebugInfo, Device, Dim, Graph, GraphInput,
                             GraphOutput, Node, Operator, TensorMeta, Value, ValueKind)
from ..ir.symbols import is_symint
from ..ops.device_dependence import device_dependent_results
from .annotate import META_KEY, TensorInfo

GETITEM = ("prim::getitem", "", "prim::getitem(Tensor[] list, int idx) -> Tensor")
_MISSING = object()


def _is_default(sa: Any, v: Any) -> bool:
    """``v`` is the schema argument's default (same type and value: ``1`` is not ``True``)."""
    if not sa.has_default_value() or isinstance(v, (fx.Node, torch.Tensor)):
        return False
    d = sa.default_value
    if isinstance(v, (list, tuple)) and isinstance(d, (list, tuple)):
        return len(v) == len(d) and all(type(a) is type(b) and a == b for a, b in zip(v, d))
    return type(v) is type(d) and v == d


class OpTable:
    """The program's operator table; ``index`` adds an operator on first use."""

    def __init__(self) -> None:
        self.operators: List[Operator] = []
        self.by_key: Dict[Tuple[str, str], int] = {}

    def index(self, name: str, overload: str, schema: str) -> int:
        key = (name, overload)
        if key not in self.by_key:
            self.by_key[key] = len(self.operators)
            self.operators.append(Operator(name, overload, schema))
        return self.by_key[key]


def _device(d: torch.device) -> Device:
    return Device(d.type, -1 if d.index is None else d.index)


def _meta_from_info(info: TensorInfo) -> TensorMeta:
    return TensorMeta(dtype=dtypes.scalar_type(info.dtype),
                      sizes=[Dim(int(s)) for s in info.sizes],
                      strides=[Dim(int(s)) for s in info.strides],
                      storage_offset=Dim(int(info.storage_offset)),
                      device=_device(info.device), requires_grad=bool(info.requires_grad),
                      layout=dtypes.layout_code(info.layout))


def _meta_from_tensor_meta(tm: Any) -> TensorMeta:
    return TensorMeta(dtype=dtypes.scalar_type(tm.dtype), sizes=[Dim(int(s)) for s in tm.shape],
                      strides=[Dim(int(s)) for s in tm.stride], storage_offset=Dim(0),
                      device=Device("cpu"), requires_grad=bool(tm.requires_grad))


def _returns_kind(schema: torch._C.FunctionSchema) -> str:
    """'none' | 'single' | 'tuple' | 'list' (one Tensor[] return)."""
    rets = schema.returns
    if not rets:
        return "none"
    if len(rets) > 1:
        return "tuple"
    t = rets[0].type
    if isinstance(t, torch._C.ListType):
        return "list"
    return "single"


# SymInt arithmetic FX targets of a symbolic trace -> pt2rt's native sym:: ops.
SYM_OPS = {operator.add: "sym::add", operator.sub: "sym::sub", operator.mul: "sym::mul",
           operator.floordiv: "sym::floordiv", operator.mod: "sym::mod",
           operator.neg: "sym::neg"}
if hasattr(torch, "sym_max"):  # torch >= 2.1
    SYM_OPS.update({torch.sym_max: "sym::max", torch.sym_min: "sym::min"})


# Size queries of a symbolic trace (aten::sym_size.int on torch 2.x, aten::sym_size on 1.13)
# -> pt2rt's native sym:: ops, the same on every LibTorch (runtime/kernels/native_ops.cpp).
SYM_QUERIES = {
    "aten::sym_size": ("sym::size", "sym::size(Tensor self, int dim) -> int"),
    "aten::sym_stride": ("sym::stride", "sym::stride(Tensor self, int dim) -> int"),
    "aten::sym_numel": ("sym::numel", "sym::numel(Tensor self) -> int"),
    "aten::sym_storage_offset": ("sym::storage_offset",
                                 "sym::storage_offset(Tensor self) -> int"),
}


class GraphLowering:
    """Lowers one DescribedGraph; ``value_names`` maps input descriptors to value names."""

    def __init__(self, dg: DescribedGraph, ops: OpTable,
                 value_names: Dict[InputDescriptor, str], symbols: Any = None):
        self.dg_, self.ops_, self.value_names_ = dg, ops, value_names
        self.symbols_ = symbols  # symbols.SymbolTable (dynamic shapes) or None
        self.values_: List[Value] = []
        self.nodes_: List[Node] = []
        # fx node -> value id, or list of value ids for tuple-returning nodes
        self.vid_: Dict[fx.Node, Union[int, List[int]]] = {}

    # -- values -----------------------------------------------------------------------
    def _new_value(self, name: str, info: Any, fallback_meta: Any = None,
                   kind: ValueKind = ValueKind.Tensor, val: Any = None) -> int:
        """``val``: the node's ``meta['val']`` (fake tensor / SymInt) of a symbolic capture,
        whose sizes and strides become SymExpr dims (``symbols.SymbolTable``)."""
        meta, sym = None, None
        if self.symbols_ and is_symint(val):
            kind, sym = ValueKind.SymInt, self.symbols_.value_expr(val, f"value {name}")
        if kind is ValueKind.Tensor:
            if isinstance(info, TensorInfo):
                meta = _meta_from_info(info)
            elif fallback_meta is not None and hasattr(fallback_meta, "dtype"):
                meta = _meta_from_tensor_meta(fallback_meta)
            if meta is not None and self.symbols_ and isinstance(val, torch.Tensor):
                what = f"value {name}"
                meta.sizes = [self.symbols_.dim(d, what) for d in val.shape]
                if len(meta.strides) == len(meta.sizes):
                    meta.strides = [self.symbols_.dim(d, what) for d in val.stride()]
                meta.storage_offset = self.symbols_.dim(val.storage_offset(), what)
        self.values_.append(Value(name, kind, meta, sym))
        return len(self.values_) - 1

    def _single(self, node: fx.Node, what: str) -> int:
        v = self.vid_.get(node)
        if not isinstance(v, int):
            raise ExportError(f"pt2rt: node {node.name} ({node.format_node()}) is used as a "
                              f"{what} but produces {'a tuple' if v is not None else 'nothing'}")
        return v

    # -- arguments ----------------------------------------------------------------------
    def _encode(self, node: fx.Node, sa: Any, v: Any, kwarg_only: bool) -> Argument:
        name = sa.name
        t = sa.type
        if isinstance(t, torch._C.OptionalType):
            t = t.getElementType()
        if v is None:
            return Argument(name, ArgKind.NoneArg, None, kwarg_only)
        kind = t.kind()
        if kind == "TensorType":
            if isinstance(v, fx.Node):
                vid = self._single(v, "tensor")
                if self.values_[vid].kind is not ValueKind.Tensor:  # the loader refuses it
                    raise ExportError(
                        f"pt2rt: node {node.name} ({node.format_node()}): argument {name!r} is "
                        f"{v.name}, a {self.values_[vid].kind.name}, where the schema of "
                        f"{node.target} wants a Tensor; the archive could not be loaded")
                return Argument(name, ArgKind.TensorRef, vid, kwarg_only)
            if isinstance(v, (bool, int, float, complex)):
                # A Python number where the schema wants a Tensor (e.g. add.Tensor(x, 1)):
                # ATen wraps it as a 0-dim "wrapped number" tensor; so must the runtime.
                return Argument(name, ArgKind.ScalarArg, v, kwarg_only)
        elif kind == "ListType":
            return self._encode_list(node, name, t.getElementType(), v, kwarg_only)
        elif isinstance(v, torch.dtype):
            return Argument(name, ArgKind.ScalarTypeArg, dtypes.scalar_type(v), kwarg_only)
        elif isinstance(v, torch.layout):
            return Argument(name, ArgKind.LayoutArg, dtypes.layout_code(v), kwarg_only)
        elif isinstance(v, torch.memory_format):
            return Argument(name, ArgKind.MemoryFormatArg, dtypes.memory_format_code(v),
                            kwarg_only)
        elif isinstance(v, torch.device):
            return Argument(name, ArgKind.DeviceArg, _device(v), kwarg_only)
        elif kind in ("IntType", "SymIntType", "NumberType") and isinstance(v, fx.Node):
            return Argument(name, ArgKind.SymIntRef, self._single(v, "SymInt"), kwarg_only)
        elif kind in ("IntType", "SymIntType") and isinstance(v, int):
            return Argument(name, ArgKind.IntArg, int(v), kwarg_only)
        elif kind == "FloatType" and isinstance(v, (int, float)) and not isinstance(v, bool):
            return Argument(name, ArgKind.FloatArg, float(v), kwarg_only)
        elif kind == "BoolType" and isinstance(v, bool):
            return Argument(name, ArgKind.BoolArg, v, kwarg_only)
        elif kind == "StringType" and isinstance(v, str):
            return Argument(name, ArgKind.StringArg, v, kwarg_only)
        elif kind == "NumberType" and isinstance(v, (bool, int, float, complex)):
            return Argument(name, ArgKind.ScalarArg, v, kwarg_only)
        elif kind == "DeviceObjType" and isinstance(v, str):
            return Argument(name, ArgKind.DeviceArg, _device(torch.device(v)), kwarg_only)
        raise ExportError(f"pt2rt: node {node.name}: argument {name!r} of schema type {sa.type} "
                          f"has unsupported value {v!r} ({type(v).__name__})")

    def _encode_list(self, node, name, elem, v, kwarg_only) -> Argument:
        ek = elem.kind()
        if isinstance(v, fx.Node):
            if ek == "TensorType" and isinstance(self.vid_.get(v), int):
                vid = self.vid_[v]
                if self.values_[vid].kind is ValueKind.TensorList:
                    return Argument(name, ArgKind.TensorListRef, vid, kwarg_only)
            raise ExportError(f"pt2rt: node {node.name}: list argument {name!r} given as "
                              f"node {v.name}, which is not a TensorList")
        v = list(v)
        if ek == "TensorType":
            return Argument(name, ArgKind.TensorListArg,
                            [self._single(x, "tensor list element") for x in v], kwarg_only)
        if ek == "OptionalType":
            return Argument(name, ArgKind.OptionalTensorListArg,
                            [-1 if x is None else self._single(x, "tensor list element")
                             for x in v], kwarg_only)
        if ek in ("IntType", "SymIntType"):
            if any(isinstance(x, fx.Node) for x in v):
                return Argument(name, ArgKind.SymIntListArg,
                                ([self._single(x, "SymInt") if isinstance(x, fx.Node) else int(x)
                                  for x in v], [isinstance(x, fx.Node) for x in v]), kwarg_only)
            return Argument(name, ArgKind.IntListArg, [int(x) for x in v], kwarg_only)
        if ek == "FloatType":
            return Argument(name, ArgKind.FloatListArg, [float(x) for x in v], kwarg_only)
        if ek == "BoolType":
            return Argument(name, ArgKind.BoolListArg, [bool(x) for x in v], kwarg_only)
        raise ExportError(f"pt2rt: node {node.name}: unsupported list argument {name!r} of "
                          f"element type {elem}")

    def _arguments(self, node: fx.Node, schema: torch._C.FunctionSchema) -> List[Argument]:
        args, kwargs = list(node.args), dict(node.kwargs)
        positional = [a for a in schema.arguments if not a.kwarg_only]
        if len(args) > len(positional):
            raise ExportError(f"pt2rt: node {node.name}: {len(args)} positional arguments for "
                              f"{schema}")
        provided: List[Tuple[Any, Any]] = []
        for i, sa in enumerate(positional):
            if i < len(args):
                provided.append((sa, args[i]))
            else:
                provided.append((sa, kwargs.pop(sa.name, _MISSING)))
        while provided and (provided[-1][1] is _MISSING
                            or _is_default(provided[-1][0], provided[-1][1])):
            provided.pop()
        out = []
        for sa, v in provided:
            if v is _MISSING:
                if not sa.has_default_value():
                    raise ExportError(f"pt2rt: node {node.name}: missing argument {sa.name!r} "
                                      f"of {schema}")
                v = sa.default_value
            out.append(self._encode(node, sa, v, False))
        for sa in schema.arguments:
            if sa.kwarg_only and sa.name in kwargs:
                v = kwargs.pop(sa.name)
                if not _is_default(sa, v):
                    out.append(self._encode(node, sa, v, True))
        if kwargs:
            raise ExportError(f"pt2rt: node {node.name}: unknown keyword arguments "
                              f"{sorted(kwargs)} for {schema}")
        return out

    # -- nodes --------------------------------------------------------------------------
    @staticmethod
    def _debug(node: fx.Node) -> DebugInfo:
        stack = list(node.meta.get("nn_module_stack") or [])
        module_fqn = stack[-1].split(": ")[0] if stack else ""
        return DebugInfo(fx_name=node.name, module_fqn=module_fqn, nn_module_stack=stack,
                         stack_trace=node.meta.get("stack_trace") or "")

    def _lower_getitem(self, node: fx.Node) -> None:
        src, idx = node.args
        v = self.vid_.get(src)
        if isinstance(v, list):  # element of a tuple return: fold
            self.vid_[node] = v[idx]
            self.values_[v[idx]].name = node.name
            return
        if isinstance(v, int) and self.values_[v].kind is ValueKind.TensorList:
            op = self.ops_.index(*GETITEM)
            out = self._new_value(node.name, node.meta.get(META_KEY), node.meta.get("tensor_meta"),
                                  val=node.meta.get("val"))
            self.nodes_.append(Node(op, [Argument("list", ArgKind.TensorListRef, v),
                                         Argument("idx", ArgKind.IntArg, int(idx))],
                                    [out], self._debug(node)))
            self.vid_[node] = out
            return
        raise ExportError(f"pt2rt: node {node.name}: getitem on {src} which is neither a tuple "
                          "nor a Tensor[] result")

    def _lower_sym(self, node: fx.Node) -> None:
        """SymInt arithmetic (``operator.mul`` ... on SymInts) -> pt2rt's ``sym::`` ops."""
        name = SYM_OPS[node.target]
        arity = len(node.args)
        schema = f"{name}(Scalar a{', Scalar b' if arity == 2 else ''}) -> Scalar"
        op = self.ops_.index(name, "", schema)
        args = []
        for an, v in zip("ab", node.args):
            if isinstance(v, fx.Node):
                args.append(Argument(an, ArgKind.SymIntRef, self._single(v, "SymInt")))
            elif isinstance(v, int) and not isinstance(v, bool):
                args.append(Argument(an, ArgKind.ScalarArg, int(v)))
            else:
                raise ExportError(f"pt2rt: node {node.name}: {name} of {v!r} is not supported")
        out = self._new_value(node.name, None, kind=ValueKind.SymInt, val=node.meta.get("val"))
        self.nodes_.append(Node(op, args, [out], self._debug(node)))
        self.vid_[node] = out

    def _lower_op(self, node: fx.Node) -> None:
        target = node.target
        if not isinstance(target, torch._ops.OpOverload):
            floating = target in (getattr(torch, "sym_float", None), operator.truediv)
            raise ExportError(
                f"pt2rt: node {node.name}: unsupported FX target {target!r} "
                f"({node.format_node()}); only ATen op overloads are exported"
                + ("; this is size arithmetic in floating point (e.g. F.interpolate with a "
                   "scale_factor that is not a short binary fraction, such as 1/3, on a "
                   "dynamic dim: floor(size * scale)), which an archive's SymInt ops cannot "
                   "express: pass size= (e.g. size=(h // 3, w // 3)) or mark the dims that "
                   "reach it static" if floating else ""))
        schema = target._schema
        native = SYM_QUERIES.get(schema.name)
        if native is not None:  # portable: pt2rt's sym:: op, not the torch-version ATen name
            op = self.ops_.index(native[0], "", native[1])
        else:
            op = self.ops_.index(schema.name, schema.overload_name, str(schema))
        args = self._arguments(node, schema)
        info = node.meta.get(META_KEY)
        rk = _returns_kind(schema)
        outputs: List[int] = []
        if rk == "single":
            outputs = [self._new_value(node.name, info, node.meta.get("tensor_meta"),
                                       val=node.meta.get("val"))]
            self.vid_[node] = outputs[0]
        elif rk == "list":
            outputs = [self._new_value(node.name, None, kind=ValueKind.TensorList)]
            self.vid_[node] = outputs[0]
        elif rk == "tuple":
            infos = list(info) if isinstance(info, (list, tuple)) else [None] * len(schema.returns)
            vals = node.meta.get("val")
            vals = list(vals) if isinstance(vals, (list, tuple)) else [None] * len(infos)
            outputs = [self._new_value(f"{node.name}.{i}", infos[i], val=vals[i])
                       for i in range(len(schema.returns))]
            for i in device_dependent_results(target, node.args, node.kwargs):
                self.values_[outputs[i]].device_dependent_shape = True
            self.vid_[node] = outputs
        self.nodes_.append(Node(op, args, outputs, self._debug(node)))

    def lower(self) -> Graph:
        inputs: List[GraphInput] = []
        for ph, desc in zip(self.dg_.placeholders(), self.dg_.inputs):
            name = self.value_names_.get(desc, ph.name)
            vid = self._new_value(name, ph.meta.get(META_KEY), ph.meta.get("tensor_meta"),
                                  val=ph.meta.get("val"))
            self.vid_[ph] = vid
            inputs.append(GraphInput(vid, desc))
        for node in self.dg_.module.graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            if node.op != "call_function":
                raise ExportError(f"pt2rt: node {node.name}: unsupported FX op {node.op!r}")
            if node.target is operator.getitem:
                self._lower_getitem(node)
            elif node.target in SYM_OPS:
                self._lower_sym(node)
            else:
                self._lower_op(node)
        outputs = []
        for v, desc in zip(self.dg_.output_values(), self.dg_.outputs):
            if v is None:
                outputs.append(GraphOutput(-1, desc))
            elif isinstance(v, fx.Node):
                outputs.append(GraphOutput(self._single(v, "graph output"), desc))
            else:
                raise ExportError(f"pt2rt: graph output {desc} is a constant {v!r}, not a tensor")
        return Graph(self.dg_.role, self.values_, self.nodes_, inputs, outputs)


def input_value_names(input_names: Sequence[str]) -> Dict[InputDescriptor, str]:
    """User inputs are named after forward()'s parameters; Param/Buffer/Constant values are
    named by FQN when lowering (see ``lower_graph``)."""
    return {InputDescriptor.plain(i): n for i, n in enumerate(input_names)}


def lower_graph(dg: DescribedGraph, ops: OpTable, input_names: Sequence[str],
                symbols: Any = None) -> Graph:
    names = input_value_names(input_names)
    for d in dg.inputs:
        if d.kind in (InputKind.Param, InputKind.Buffer, InputKind.Constant):
            names[d] = d.fqn
    return GraphLowering(dg, ops, names, symbols).lower()
