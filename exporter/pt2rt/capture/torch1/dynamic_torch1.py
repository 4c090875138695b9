"""Dynamic shapes on torch 1.13: fake inputs whose marked dims are sympy symbols, and what the
trace made of them.

torch 1.13's ``make_fx(tracing_mode="symbolic")`` makes *every* dim of every non-Parameter
input symbolic and duck-sizes equal values into one symbol (``ShapeEnv.create_symint`` in
torch/fx/experimental/symbolic_shapes.py). pt2rt instead traces with ``make_fx`` in real mode
over fake tensors it made itself, under its own ``FakeTensorMode`` and
``torch._dispatch.python.enable_python_dispatcher()`` (what the symbolic mode adds), with
``MarkedShapeEnv``: a ``ShapeEnv`` whose ``create_symint`` — called by
``torch._subclasses.meta_utils.MetaConverter`` for each size, stride and storage offset of a
converted tensor — returns

* a sympy symbol (``positive=True, integer=True``, named after the Dim) for a size the user
  marked with a ``Dim`` (one symbol per ``Dim`` object: reuse means equality; no duck sizing
  between different Dims), ``scale * root + offset`` for a ``DerivedDim``;
* the example int for every other size (parameters, buffers, unmarked dims: static by
  construction, nothing to specialise afterwards);
* the contiguous stride expression (product of the later sizes) for strides — user inputs are
  made contiguous before fakification; the storage offset 0.

Tangents are ``ones_like`` of the fake forward outputs, so they carry the outputs' symbolic
sizes. Every graph of one export (inference, joint) is traced in the same ShapeEnv.

After tracing, ``finish`` checks the ShapeEnv: a marked symbol replaced by a constant or by
another Dim's symbol (``ShapeEnv.replacements``), or a recorded guard (``ShapeEnv.guards``)
whose value changes over the Dim's range (evaluated at ``max(min, 2)``, the example size and
``max``; an unbounded max at a large value), means the model specialised the dim →
``ExportError`` naming input, dim and Dim, as torch.export's constraint violations do.
0/1: as torch.export, marked dims need example sizes >= 2 and the trace assumes sizes >= 2;
the user's range is kept.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence

import torch

from ...errors import ExportError
from ...ir.symbols import SymbolInfo, SymbolTable
from ..dynamic import INT64_MAX, DerivedDim, Dim, InputDims

_NAME = re.compile(r"^t\d+\.(size|stride|storage_offset)\((\d*)\)$")


def _shape_env_class():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    class MarkedShapeEnv(ShapeEnv):
        """A ShapeEnv that makes only the marked dims symbolic (see the module docstring)."""

        def __init__(self) -> None:
            super().__init__()
            self.plan_: Optional[Dict[int, Any]] = None
            self.sizes_: List[Any] = []
            self.roots_: Dict[int, Any] = {}   # id(Dim) -> sympy symbol

        def root_symbol(self, d: Dim, hint: int) -> Any:
            import sympy
            if id(d) not in self.roots_:
                s = sympy.Symbol(d.name, positive=True, integer=True)
                self.var_to_val[s] = sympy.Integer(hint)
                self.roots_[id(d)] = s
            return self.roots_[id(d)]

        def symint(self, expr: Any) -> Any:
            from torch.fx.experimental.symbolic_shapes import PySymInt
            return torch.SymIntNode.new_symint(PySymInt(expr, self))

        def create_symint(self, name: str, val: int) -> Any:
            m = _NAME.match(name)
            if self.plan_ is None or m is None:
                return val
            kind, index = m.group(1), m.group(2)
            if kind == "size":
                d = self.plan_.get(int(index))
                if d is None:
                    out: Any = val
                elif isinstance(d, DerivedDim):
                    root = self.root_symbol(d.root, (val - d.offset) // d.scale)
                    out = self.symint(d.scale * root + d.offset)
                else:
                    out = self.symint(self.root_symbol(d, val))
                self.sizes_.append(out)
                return out
            if kind == "stride":
                stride: Any = 1
                for s in self.sizes_[int(index) + 1:]:
                    stride = stride * s
                return stride
            return val

    return MarkedShapeEnv


class SymbolicInputs:
    """One export's ShapeEnv and fake mode; ``fakify`` converts tensors, ``finish`` checks the
    guards and returns the symbol table."""

    def __init__(self, spec: List[InputDims]):
        from torch._subclasses.fake_tensor import FakeTensorMode
        self.spec_ = spec
        self.shape_env = _shape_env_class()()
        self.fake_mode = FakeTensorMode(allow_fallback_kernels=False)
        self.fakes_: List[List[torch.Tensor]] = []

    def static(self, t: torch.Tensor) -> torch.Tensor:
        """A fake copy of ``t`` with its example shape (weights, constants)."""
        return self.fake_mode.from_tensor(t)

    def fakify(self, inputs: Sequence[torch.Tensor]) -> List[torch.Tensor]:
        """Fake copies of the flat user inputs (fresh tensors) with the marked dims symbolic.

        Raises:
            ExportError: a marked dim's example size is 0 or 1 (specialised, as torch.export).
        """
        out = []
        for entry, x in zip(self.spec_, inputs):
            for k, d in entry.dims.items():
                if int(x.shape[k]) < 2:
                    raise ExportError(f"pt2rt.export: input {entry.name!r} dim {k} ({d.name}): "
                                      f"the example size {int(x.shape[k])} is specialised (0/1 "
                                      "specialisation, as in torch.export); give an example "
                                      "size >= 2 (the range may still include 0 and 1)")
            env = self.shape_env
            env.plan_, env.sizes_ = (entry.dims or None), []
            try:
                c = x.detach().contiguous().requires_grad_(x.requires_grad) if entry.dims else x
                out.append(self.fake_mode.from_tensor(c, shape_env=env if entry.dims else None))
            finally:
                env.plan_, env.sizes_ = None, []
        self.fakes_.append(out)
        return out

    def tracing(self):
        """The context a symbolic trace runs in: this fake mode + the Python dispatcher (which
        routes SymInt-taking ops to their Python meta functions / decompositions)."""
        import contextlib
        from torch._dispatch.python import enable_python_dispatcher
        from ...ops.rnn_ops import sequence_ops
        from .symbolic_rules_torch1 import symbolic_rules
        stack = contextlib.ExitStack()
        stack.enter_context(symbolic_rules())
        stack.enter_context(sequence_ops())  # nn.LSTM on a dynamic length: one pt2rt::lstm
        stack.enter_context(self.fake_mode)
        stack.enter_context(enable_python_dispatcher())
        return stack

    def finish(self) -> SymbolTable:
        """Checks what the traces did with the marked dims; returns the symbol table.

        Raises:
            ExportError: a dim specialised, narrowed or merged with another Dim by the model.
        """
        env = self.shape_env
        table = SymbolTable(replace=env.replace)
        roots: Dict[Any, Any] = {}
        for entry in self.spec_:
            for k, d in entry.dims.items():
                if isinstance(d, DerivedDim):
                    continue
                where = f"input {entry.name!r} dim {k} ({d.name})"
                s = env.roots_.get(id(d))
                if s is None:
                    continue
                e = env.replace(s)
                if getattr(e, "is_Integer", False):
                    raise ExportError(f"pt2rt.export: {where}: the model specialises this dim to "
                                      f"the constant {int(e)} (e.g. a view or reshape to a fixed "
                                      "size, or a branch on the size); mark it static")
                if e != s:
                    raise ExportError(f"pt2rt.export: {where}: the model constrains this dim to "
                                      f"{e} (another Dim's size or a function of it); use one Dim "
                                      "or a derived Dim")
                if s not in roots:
                    roots[s] = d
                    table.add(s, SymbolInfo(d.name, int(env.var_to_val[s]), d.min, d.max))
        self._check_guards(roots)
        return table

    def _check_guards(self, roots: Dict[Any, Dim]) -> None:
        env = self.shape_env
        for guard, value, _ in env.guards:
            expr = env.replace(guard)
            for s in expr.free_symbols:
                d = roots.get(s)
                if d is None:
                    continue
                hint = int(env.var_to_val[s])
                hi = d.max if d.max < INT64_MAX else max(hint, 2) * 4099 + 4097
                for v in {max(d.min, 2), hint, hi}:
                    at = expr.xreplace({o: (v if o is s else env.var_to_val[o])
                                        for o in expr.free_symbols})
                    if _differs(at, value):
                        raise ExportError(
                            f"pt2rt.export: {_where(self.spec_, d)}: the model only works for "
                            f"some sizes of {d.name} in {d.range_text()}: it assumes "
                            f"{_guard_text(guard, value)} (false at {d.name} = {v}); narrow the "
                            "Dim or mark the dim static")


def _differs(at: Any, value: Any) -> bool:
    import sympy
    if isinstance(value, (bool, sympy.logic.boolalg.BooleanAtom)):
        return bool(at) != bool(value)
    return sympy.simplify(at - value) != 0


def _where(spec: List[InputDims], d: Dim) -> str:
    for entry in spec:
        for k, x in entry.dims.items():
            if x is d:
                return f"input {entry.name!r} dim {k} ({d.name})"
    return d.name


def _guard_text(guard: Any, value: Any) -> str:
    import sympy
    if value is sympy.true or value is True:
        return str(guard)
    if value is sympy.false or value is False:
        return f"not {guard}"
    return f"{guard} == {value}"
