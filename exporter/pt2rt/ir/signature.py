"""A program's calling convention for the Python reader: user inputs and outputs with names,
dtypes and shapes (symbolic dims with their ranges), binding of ``forward``-style positional
and keyword arguments, and the input checks the C++ runtime makes (``runtime/exec/input_check.cpp``).

The analogue of torch.export's ``ExportedProgram.graph_signature`` / ``module()`` call
checks and of C++ ``pt2rt::Model::signature()`` (``include/pt2rt/signature.h``): the same
names, dims and ranges, read from the same graph (inference, else forward) by descriptor.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from ..errors import InputError
from . import dtypes
from .descriptors import InputKind, OutputKind
from .graph_ir import GraphRole
from .input_spec import TENSOR, InputSpec, leaves_of
from .output_names import positional_names
from .program_ir import Graph, Program, SymExpr

INT64_MAX = 2 ** 63 - 1

# schema SymOp
_CONST, _SYMBOL, _ADD, _SUB, _MUL, _FLOORDIV, _MOD, _NEG, _MAX, _MIN, _CEILDIV = range(11)
_BINARY = {_ADD: "+", _SUB: "-", _MUL: "*", _FLOORDIV: "//", _MOD: "%"}


@dataclass
class DimSpec:
    """One dimension: ``size`` (static, or the hint seen at export), ``expr`` ("" when static;
    the symbol's name, or an expression over symbols for a derived dim) and the inclusive
    range ``[min, max]`` it may take (``max`` = 2**63-1: unbounded)."""

    size: int
    expr: str = ""
    min: int = 0
    max: int = INT64_MAX

    def __str__(self) -> str:
        return self.expr or str(self.size)


@dataclass
class TensorSpec:
    name: str
    dtype: Optional[torch.dtype]          # None: not a tensor (a None output)
    sizes: List[DimSpec] = field(default_factory=list)

    def __str__(self) -> str:
        d = str(self.dtype).replace("torch.", "") if self.dtype is not None else "None"
        return f"{d}[{', '.join(map(str, self.sizes))}]"


@dataclass
class Signature:
    inputs: List[TensorSpec]
    outputs: List[TensorSpec]
    program: Program = field(repr=False)

    def params(self) -> List[Tuple[str, InputSpec]]:
        """forward()'s parameters with their structures (``Program.inputs``; before schema 1.6
        every user input one tensor parameter)."""
        return list(self.program.inputs) or [(s.name, TENSOR) for s in self.inputs]

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> List[torch.Tensor]:
        """Positional then keyword arguments, as the original ``forward`` took them (tensors,
        or the tuples, lists and dicts of them it was exported with), -> the flat user inputs
        in ``Plain(i)`` order.

        Raises:
            InputError: too many positional inputs, unknown, missing or repeated names; a value
                whose structure is not the exported one (naming its path).
        """
        params = self.params()
        names = [n for n, _ in params]
        if len(args) > len(names):
            raise InputError(f"pt2rt: forward takes {len(names)} inputs ({', '.join(names)}), "
                             f"got {len(args)} positional")
        bound: Dict[str, Any] = dict(zip(names, args))
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise InputError(f"pt2rt: unknown input name(s) {', '.join(map(repr, unknown))}; "
                             f"forward takes {', '.join(names)}")
        twice = [k for k in kwargs if k in bound]
        if twice:
            raise InputError(f"pt2rt: input(s) {', '.join(map(repr, twice))} given both "
                             "positionally and by name")
        bound.update(kwargs)
        missing = [n for n in names if n not in bound]
        if missing:
            raise InputError(f"pt2rt: missing input(s) {', '.join(map(repr, missing))}")
        flat: List[Any] = []
        for name, spec in params:
            flat += leaves_of(spec, bound[name], name)
        return flat

    def check(self, inputs: Sequence[Any]) -> None:
        """Checks dtype, rank, static sizes, each symbol's range, equal sizes for one symbol
        and derived dims, before anything runs.

        Raises:
            InputError: e.g. ``input 0 (x) dim 0: batch = 65 is outside [1, 64]``.
        """
        if len(inputs) != len(self.inputs):
            raise InputError(f"pt2rt: expected {len(self.inputs)} inputs "
                             f"({', '.join(s.name for s in self.inputs)}), got {len(inputs)}")
        values: Dict[str, int] = {}
        derived = []
        for i, (spec, x) in enumerate(zip(self.inputs, inputs)):
            where = f"input {i} ({spec.name})"
            if not isinstance(x, torch.Tensor):
                raise InputError(f"pt2rt: {where}: expected a tensor {spec}, got "
                                 f"{type(x).__name__}")
            got = f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"
            if x.dtype != spec.dtype or x.dim() != len(spec.sizes):
                raise InputError(f"pt2rt: {where}: expected {spec}, got {got}")
            for d, (dim, size) in enumerate(zip(spec.sizes, x.shape)):
                if not dim.expr:
                    if size != dim.size:
                        raise InputError(f"pt2rt: {where}: expected {spec}, got {got}")
                elif dim.expr in self.symbol_names():
                    if dim.expr in values and values[dim.expr] != size:
                        raise InputError(f"pt2rt: {where} dim {d}: {dim.expr} = {size}, but an "
                                         f"earlier input gave {dim.expr} = {values[dim.expr]}")
                    if not dim.min <= size <= dim.max:
                        raise InputError(f"pt2rt: {where} dim {d}: {dim.expr} = {size} is "
                                         f"outside {_range(dim.min, dim.max)}")
                    values[dim.expr] = size
                else:
                    derived.append((where, d, i, size))
        for where, d, i, size in derived:
            e = self._input_meta(i).sizes[d].expr
            want = eval_expr(e, [values.get(s.name) for s in self.program.symbols])
            if want != size:
                raise InputError(f"pt2rt: {where} dim {d}: expected {self.inputs[i].sizes[d]}"
                                 f"{'' if want is None else f' = {want}'}, got {size}")

    def symbol_names(self) -> List[str]:
        return [s.name for s in self.program.symbols]

    def _input_meta(self, i: int):
        g = signature_graph(self.program)
        v = next(g.values[gi.value] for gi in g.inputs
                 if gi.descriptor.kind is InputKind.Plain and gi.descriptor.idx == i)
        return v.meta


def signature_graph(program: Program) -> Optional[Graph]:
    """The inference graph, else the forward graph (None: no runnable graph)."""
    return program.graph(GraphRole.Inference) or program.graph(GraphRole.Forward)


def signature(program: Program) -> Signature:
    """The user inputs (names: ``forward()``'s parameter names) and outputs (names:
    ``Program.output_names``, positional for archives before schema 1.4) of ``program``."""
    g = signature_graph(program)
    if g is None:
        return Signature([], [], program)
    inputs = sorted((gi.descriptor.idx, gi.value) for gi in g.inputs
                    if gi.descriptor.kind is InputKind.Plain)
    outputs = sorted((go.descriptor.idx, go.value) for go in g.outputs
                     if go.descriptor.kind is OutputKind.Plain)
    names = program.output_names or positional_names(len(outputs))
    return Signature([_spec(program, g, v, g.values[v].name) for _, v in inputs],
                     [_spec(program, g, v, n) for (_, v), n in zip(outputs, names)], program)


def _spec(program: Program, g: Graph, value: int, name: str) -> TensorSpec:
    meta = g.values[value].meta if value >= 0 else None
    if meta is None:
        return TensorSpec(name, None)
    ranges = {r.symbol: (r.min, r.max) for r in program.range_constraints}
    lo = [ranges.get(i, (0, INT64_MAX))[0] for i in range(len(program.symbols))]
    hi = [None if h == INT64_MAX else h  # unbounded: no maximum to evaluate at
          for h in (ranges.get(i, (0, INT64_MAX))[1] for i in range(len(program.symbols)))]
    dims = []
    for d in meta.sizes:
        if d.expr is None:
            dims.append(DimSpec(d.value, "", d.value, d.value))
            continue
        top = eval_expr(d.expr, hi)
        bottom = eval_expr(d.expr, lo)
        dims.append(DimSpec(d.value, _text(d.expr, program), 0 if bottom is None else bottom,
                            INT64_MAX if top is None else top))
    return TensorSpec(name, dtypes.to_dtype(meta.dtype), dims)


def _range(lo: int, hi: int) -> str:
    return f"[{lo}, {'inf' if hi == INT64_MAX else hi}]"


def _text(e: SymExpr, program: Program) -> str:
    """Written as the C++ runtime writes it (runtime/core/tensor_format.cpp): "(2 * batch)"."""
    if e.op == _CONST:
        return str(e.value)
    if e.op == _SYMBOL:
        return program.symbols[e.symbol].name if e.symbol < len(program.symbols) else f"s?{e.symbol}"
    parts = [_text(o, program) for o in e.operands]
    if e.op == _NEG:
        return f"-({parts[0] if parts else ''})"
    if e.op in _BINARY:
        return "(" + f" {_BINARY[e.op]} ".join(parts) + ")"
    fn = {_MAX: "max", _MIN: "min", _CEILDIV: "ceildiv"}.get(e.op, f"op{e.op}")
    return f"{fn}({', '.join(parts)})"


def eval_expr(e: SymExpr, symbols: List[Optional[int]]) -> Optional[int]:
    """The value of ``e`` (Python's floor semantics, as torch's sympy); None when a symbol is
    unbound, a division by zero, or an operator this does not evaluate."""
    if e.op == _CONST:
        return e.value
    if e.op == _SYMBOL:
        return symbols[e.symbol] if e.symbol < len(symbols) else None
    vals = [eval_expr(o, symbols) for o in e.operands]
    if not vals or any(v is None for v in vals):
        return None
    try:
        if e.op == _NEG:
            return -vals[0]
        a, b = vals[0], vals[-1]
        return {_ADD: lambda: a + b, _SUB: lambda: a - b, _MUL: lambda: a * b,
                _FLOORDIV: lambda: a // b, _MOD: lambda: a % b, _MAX: lambda: max(vals),
                _MIN: lambda: min(vals), _CEILDIV: lambda: -(-a // b)}[e.op]()
    except (KeyError, ZeroDivisionError):
        return None
