"""Symbols of a dynamic-shape capture and their SymExpr trees (schema ``SymExpr``).

A capture with ``dynamic_shapes`` produces FX graphs whose ``meta['val']`` fake tensors have
sizes that are sympy expressions over the ShapeEnv's symbols (torch.fx.experimental.
symbolic_shapes). ``SymbolTable`` numbers the root symbols (one per root ``Dim``, named after
it), keeps their example value (hint) and range, and turns sympy expressions into
``program_ir.SymExpr`` trees (Const, Symbol, Add, Mul, FloorDiv, Mod, CeilDiv, Max, Min; a power
with a positive integer exponent, e.g. an attention matrix's ``seq**2`` elements, as a product).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ..errors import ExportError
from .program_ir import Dim, RangeConstraint, SymExpr, Symbol

# schema SymOp
CONST, SYMBOL, ADD, SUB, MUL, FLOORDIV, MOD, NEG, MAX, MIN, CEILDIV = range(11)


@dataclass
class SymbolInfo:
    name: str
    hint: int
    min: int
    max: int


class SymbolTable:
    """Root symbols of one export: sympy symbol -> index into Program.symbols.

    ``replace`` (the ShapeEnv's ``replace``, or identity) rewrites an expression with the
    ShapeEnv's replacements (a symbol found equal to another, or to an expression of it) before
    conversion, so a size always refers to the root symbols.
    """

    def __init__(self, replace=lambda e: e):
        self.index_: Dict[Any, int] = {}
        self.infos_: List[SymbolInfo] = []
        self.replace_ = replace

    def __bool__(self) -> bool:
        return bool(self.infos_)

    def add(self, sym: Any, info: SymbolInfo) -> int:
        if sym not in self.index_:
            self.index_[sym] = len(self.infos_)
            self.infos_.append(info)
        return self.index_[sym]

    def alias(self, sym: Any, index: int) -> None:
        """Another sympy symbol standing for archive symbol ``index`` (the same Dim traced by
        another capture)."""
        self.index_.setdefault(sym, index)

    def symbols(self) -> List[Symbol]:
        return [Symbol(i.name, i.hint) for i in self.infos_]

    def range_constraints(self) -> List[RangeConstraint]:
        return [RangeConstraint(k, i.min, i.max) for k, i in enumerate(self.infos_)]

    def expr(self, e: Any, what: str) -> SymExpr:
        """sympy expression -> SymExpr. Raises ExportError for a construct it cannot store."""
        import sympy
        e = self.replace_(e)
        if isinstance(e, (int, sympy.Integer)) or getattr(e, "is_Integer", False):
            return SymExpr(CONST, value=int(e))
        if isinstance(e, sympy.Symbol):
            if e not in self.index_:
                raise ExportError(f"pt2rt.export: {what} depends on the symbol {e}, which is no "
                                  "marked input dim (a data-dependent size?)")
            return SymExpr(SYMBOL, symbol=self.index_[e])
        name = type(e).__name__
        if name in _ROUNDINGS and len(e.args) == 1:
            whole = _without_whole_floats(e.args[0])
            if whole is not None:  # rounding a whole number: trunc(2.0 * s) is 2 * s
                return self.expr(whole, what)
            ratio = _dyadic_product(e.args[0])
            if ratio is not None and name != "RoundToInt":  # trunc(1.5 * s) is (3 * s) // 2
                x, num, den = ratio
                product = _fold(MUL, [SymExpr(CONST, value=num), self.expr(x, what)])
                return SymExpr(CEILDIV if name in ("CeilToInt", "ceiling") else FLOORDIV,
                               operands=[product, SymExpr(CONST, value=den)])
        if isinstance(e, sympy.Pow) and getattr(e.exp, "is_Integer", False) and int(e.exp) >= 1:
            return _fold(MUL, [self.expr(e.base, what)] * int(e.exp))   # seq**2 = seq * seq
        ops = [self.expr(a, what) for a in e.args]
        if isinstance(e, sympy.Add):
            return _fold(ADD, ops)
        if isinstance(e, sympy.Mul):
            return _fold(MUL, ops)
        table = {"FloorDiv": FLOORDIV, "Mod": MOD, "PythonMod": MOD, "CeilDiv": CEILDIV,
                 "Max": MAX, "Min": MIN}
        if name in table and len(ops) == 2:
            return SymExpr(table[name], operands=ops)
        if name in ("Max", "Min"):
            return _fold(table[name], ops)
        raise ExportError(f"pt2rt.export: {what} has the size expression {e} ({name}), which "
                          "the archive format cannot store; export with static shapes")

    def dim(self, v: Any, what: str) -> Dim:
        """A size/stride (int or symbolic int, see ``is_symint``) -> Dim (static, or symbolic
        with its hint)."""
        if is_symint(v):
            expr = self.expr(sym_expr(v), what)
            if expr.op == CONST:
                return Dim(expr.value)
            hint = sym_hint(v)
            return Dim(hint if hint is not None else 0, expr)
        return Dim(int(v))

    def value_expr(self, v: Any, what: str) -> Optional[SymExpr]:
        """The SymExpr of a SymInt graph value (None for a plain int)."""
        if is_symint(v):
            return self.expr(sym_expr(v), what)
        return None


# The symbolic ints of a trace: ``torch.SymInt`` (torch >= 2: ``.node.expr``, ``.node.hint``);
# on torch 1.13 ``torch.SymIntNode`` (a size of a fake tensor; ``get_pyobj()`` is the
# ``PySymInt``) or the ``PySymInt`` itself (``meta['val']`` of SymInt arithmetic nodes), whose
# ``expr`` is the sympy expression and whose ShapeEnv gives the hint
# (torch/fx/experimental/symbolic_shapes.py of each version).
# sympy's and torch's (torch.utils._sympy.functions) roundings to an integer
_ROUNDINGS = {"TruncToInt", "FloorToInt", "CeilToInt", "RoundToInt", "floor", "ceiling"}


def _without_whole_floats(e: Any) -> Any:
    """``e`` with its whole-number floats as integers and ``ToFloat(x)`` as ``x``, when that
    leaves an expression of integers and symbols only (no other float, no fraction): then it
    is integral and rounding it changes nothing (``F.interpolate(scale_factor=2)``'s output
    size, ``TruncToInt(2.0 * ToFloat(s0))``). None otherwise."""
    import sympy
    e = e.replace(lambda x: type(x).__name__ == "ToFloat" and len(x.args) == 1,
                  lambda x: x.args[0])
    floats = e.atoms(sympy.Float)
    if any(not float(f).is_integer() for f in floats):
        return None
    e = e.xreplace({f: sympy.Integer(int(f)) for f in floats})
    if any(not r.is_integer for r in e.atoms(sympy.Rational)) or e.atoms(sympy.Float):
        return None
    return e


# A float factor m / 2^k whose numerator and denominator stay below this: m * size is exact in
# float64 for any size below 2^31, so rounding the float product equals the integer division.
DYADIC_LIMIT = 1 << 22


def dyadic_ratio(c: float) -> Optional[tuple]:
    """(m, d) with ``c == m / d`` exactly, 0 < m, d < DYADIC_LIMIT (a float is m / 2^k), else
    None: ``floor(c * n) == (m * n) // d`` for every size n below 2^31."""
    from fractions import Fraction
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0 or c == float("inf"):
        return None
    f = Fraction(c)
    if f.numerator >= DYADIC_LIMIT or f.denominator >= DYADIC_LIMIT:
        return None
    return f.numerator, f.denominator


def _dyadic_product(e: Any) -> Any:
    """(x, m, d) when ``e`` is ``c * x`` with c = m / d a ``dyadic_ratio`` and x the product of
    the other factors (``ToFloat`` dropped; ``SymbolTable.expr`` converts x, nested roundings
    included, and refuses what is not integral): ``F.interpolate(scale_factor=1.5)``'s output
    size, ``TruncToInt(1.5 * ToFloat(s0))``. None otherwise."""
    import sympy
    if not isinstance(e, sympy.Mul):
        return None
    floats = [a for a in e.args if isinstance(a, sympy.Float)]
    ratio = dyadic_ratio(float(floats[0])) if len(floats) == 1 else None
    if ratio is None:
        return None
    rest = [a.args[0] if type(a).__name__ == "ToFloat" and len(a.args) == 1 else a
            for a in e.args if a is not floats[0]]
    return (sympy.Mul(*rest), *ratio)


def is_symint(v: Any) -> bool:
    import torch
    if isinstance(v, (bool, int)):
        return False
    if hasattr(torch, "SymInt") and isinstance(v, torch.SymInt):
        return True
    return _py_symint(v) is not None


def _py_symint(v: Any) -> Any:
    import torch
    if hasattr(torch, "SymIntNode") and isinstance(v, torch.SymIntNode):
        return v.get_pyobj()
    if type(v).__name__ == "PySymInt" and hasattr(v, "expr"):
        return v
    return None


def sym_expr(v: Any) -> Any:
    """The sympy expression of a symbolic int (``is_symint``)."""
    py = _py_symint(v)
    return py.expr if py is not None else v.node.expr


def sym_hint(v: Any) -> Optional[int]:
    """The example value of a symbolic int, or None when the trace has none."""
    py = _py_symint(v)
    if py is not None:
        h = py.shape_env.size_hint(py.shape_env.replace(py.expr))
        return int(h)
    return int(v.node.hint) if v.node.hint is not None else None


def _fold(op: int, ops: List[SymExpr]) -> SymExpr:
    out = ops[0]
    for o in ops[1:]:
        out = SymExpr(op, operands=[out, o])
    return out
