"""Symbols of a dynamic-shape capture and their SymExpr trees (schema ``SymExpr``).

A capture with ``dynamic_shapes`` produces FX graphs whose ``meta['val']`` fake tensors have
sizes that are sympy expressions over the ShapeEnv's symbols (torch.fx.experimental.
symbolic_shapes). ``SymbolTable`` numbers the root symbols (one per root ``Dim``, named after
it), keeps their example value (hint) and range, and turns sympy expressions into
``program_ir.SymExpr`` trees (Const, Symbol, Add, Mul, FloorDiv, Mod, CeilDiv, Max, Min).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .errors import ExportError
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
        """A size/stride (int or torch.SymInt) -> Dim (static, or symbolic with its hint)."""
        import torch
        if isinstance(v, torch.SymInt):
            node = v.node
            e = node.expr
            expr = self.expr(e, what)
            if expr.op == CONST:
                return Dim(expr.value)
            return Dim(int(node.hint) if node.hint is not None else 0, expr)
        return Dim(int(v))

    def value_expr(self, v: Any, what: str) -> Optional[SymExpr]:
        """The SymExpr of a SymInt graph value (None for a plain int)."""
        import torch
        if isinstance(v, torch.SymInt):
            return self.expr(v.node.expr, what)
        return None


def _fold(op: int, ops: List[SymExpr]) -> SymExpr:
    out = ops[0]
    for o in ops[1:]:
        out = SymExpr(op, operands=[out, o])
    return out
