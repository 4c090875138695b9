"""Dynamic shapes on torch >= 2.9: fake inputs with symbolic sizes, and what tracing made of them.

``SymbolicInputs`` owns one ``ShapeEnv`` for the whole export (inference and joint captures
share it, so a Dim is the same sympy symbol in every graph). Each marked dim is fakified
``DimDynamic.DYNAMIC`` with a ``StrictMinMaxConstraint`` of its Dim's range (what
torch.export's ``_process_dynamic_shapes`` does); unmarked dims are ``STATIC``. Duck sizing is
on, as in torch.export: two dynamic dims with the same example size start as one symbol — so
uses of one Dim share a symbol, and two *different* Dims must be given different example sizes
(refused otherwise, naming both).

After tracing, ``finish`` reads the ShapeEnv (torch.fx.experimental.symbolic_shapes): a root
symbol replaced by a constant, or whose range the trace narrowed, means the model specialised
the dim (``ExportError`` naming input, dim, Dim and the narrowed range, as torch.export's
constraint violations do); a derived dim must have been found equal to its function of the root
by the trace (a relation the model itself establishes), else it is refused. 0/1: like
torch.export, the trace assumes dynamic sizes >= 2 (ShapeEnv's ``VR[2, max]``) and keeps the
user's range; the tests run every model at its range minimum.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import torch

from ...errors import ExportError
from ...ir.symbols import SymbolInfo, SymbolTable
from ..dynamic import INT64_MAX, DerivedDim, Dim, InputDims


class SymbolicInputs:
    def __init__(self, spec: List[InputDims]):
        from torch.fx.experimental.symbolic_shapes import ShapeEnv
        from torch._subclasses.fake_tensor import FakeTensorMode
        self.spec_ = spec
        self.shape_env = ShapeEnv()
        self.fake_mode = FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=True)
        self.fakes_: List[List[torch.Tensor]] = []

    def fakify(self, inputs: Sequence[torch.Tensor]) -> List[torch.Tensor]:
        """Fake copies of ``inputs`` (already fresh tensors) with the marked dims symbolic."""
        from torch.fx.experimental.symbolic_shapes import (DimDynamic, StatelessSymbolicContext,
                                                           StrictMinMaxConstraint)
        from torch.utils._sympy.value_ranges import ValueRanges
        out = []
        for entry, x in zip(self.spec_, inputs):
            dyn, cons = [], []
            for k in range(x.dim()):
                d = entry.dims.get(k)
                root = d.root if isinstance(d, DerivedDim) else d
                if d is None:
                    dyn.append(DimDynamic.STATIC)
                    cons.append(None)
                else:
                    dyn.append(DimDynamic.DYNAMIC)
                    lo, hi = (root.min, root.max) if isinstance(d, Dim) else (0, INT64_MAX)
                    hi_vr = int(hi) if hi < INT64_MAX else _int_oo()
                    cons.append(StrictMinMaxConstraint(vr=ValueRanges(lo, hi_vr), warn_only=False))
            ctx = StatelessSymbolicContext(dynamic_sizes=dyn, constraint_sizes=cons)
            out.append(self.fake_mode.from_tensor(x, symbolic_context=ctx))
        self.fakes_.append(out)
        return out

    def finish(self) -> SymbolTable:
        """Checks what the traces did with the marked dims; returns the symbol table.

        Raises:
            ExportError: a dim specialised or narrowed by the model; two Dims merged; a
                derived dim the model does not relate to its root.
        """
        se = self.shape_env
        table = SymbolTable(replace=se.replace)
        roots: Dict[Any, Dim] = {}
        for fakes in self.fakes_:
            for entry, x in zip(self.spec_, fakes):
                for k, d in entry.dims.items():
                    where = f"input {entry.name!r} dim {k} ({d.name})"
                    if not isinstance(x.shape[k], torch.SymInt):
                        raise ExportError(f"pt2rt.export: {where}: the example size "
                                          f"{int(x.shape[k])} is specialised (0/1 "
                                          "specialisation, as in torch.export); give an example "
                                          "size >= 2 (the range may still include 0 and 1)")
                    e = se.replace(_expr(x.shape[k]))
                    if isinstance(d, DerivedDim):
                        continue
                    if getattr(e, "is_Integer", False) or isinstance(e, int):
                        raise ExportError(f"pt2rt.export: {where}: the model specialises this dim "
                                          f"to the constant {int(e)} (e.g. a view or reshape to a "
                                          "fixed size, or a branch on the size); mark it static")
                    if not getattr(e, "is_Symbol", False):
                        raise ExportError(f"pt2rt.export: {where}: the model constrains this dim "
                                          f"to {e}; give it that derived Dim")
                    other = roots.setdefault(e, d)
                    if other is not d:
                        raise ExportError(f"pt2rt.export: {where}: {d.name} and {other.name} were "
                                          "traced as one size (equal example sizes, or the model "
                                          "makes them equal); give them different example sizes, "
                                          "or use one Dim")
                    vr = se.var_to_range.get(e)
                    lo = max(d.min, 2)
                    if vr is not None and (int(vr.lower) > lo or
                                           (d.max < INT64_MAX and _upper(vr.upper) < d.max)):
                        raise ExportError(f"pt2rt.export: {where}: the model only works for "
                                          f"{d.name} in [{vr.lower}, {vr.upper}], not the whole "
                                          f"range {d.range_text()}; narrow the Dim")
                    # each capture (inference, joint) fakifies its own inputs: one Dim, one
                    # archive symbol, whatever number of ShapeEnv symbols stand for it
                    first = next(s for s, r in roots.items() if r is d)
                    index = table.add(first, SymbolInfo(d.name, int(x.shape[k].node.hint),
                                                        d.min, d.max))
                    table.alias(e, index)
        for fakes in self.fakes_:
            for entry, x in zip(self.spec_, fakes):
                for k, d in entry.dims.items():
                    if not isinstance(d, DerivedDim):
                        continue
                    e = se.replace(_expr(x.shape[k]))
                    root = next((s for s, r in roots.items()
                                 if r is d.root and s in e.free_symbols), None)
                    if root is None or (e - (d.scale * root + d.offset)).expand() != 0:
                        raise ExportError(f"pt2rt.export: input {entry.name!r} dim {k} "
                                          f"({d.name}): the model does not make this dim "
                                          f"{d.name} (traced as {e}); derived dims must be "
                                          "related by the model's own computation")
        return table


def _expr(s: Any) -> Any:
    return s.node.expr if isinstance(s, torch.SymInt) else s


def _upper(u: Any) -> int:
    try:
        return int(u)
    except (TypeError, OverflowError):
        return INT64_MAX


def _int_oo() -> Any:
    from torch.utils._sympy.numbers import int_oo
    return int_oo
