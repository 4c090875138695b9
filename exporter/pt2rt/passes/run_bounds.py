"""The C++ runtime's default run bound on memory, estimated at export at the range maxima.

An archive is untrusted input to the runtime: every graph runs on the meta device at load (at
the example's sizes) and, for a dynamic archive, again for each new call size (runtime/
call_bounds.cpp); a graph whose peak tensor bytes exceed ``LoadOptions::run.max_bytes`` — by
default ``max(32 MiB, 16 x archive size)`` — is refused unless the caller raises the bound
(``export-cli --max-run-bytes N``) or trusts the archive (``--trusted``,
``RunLimits::kUnlimited``). A user's own model exported with a large
range (a transformer with batch and sequence up to 64) can exceed it; ``warn_if_over_bounds``
says so at export, with the flags, instead of leaving the user to find out at ``run``.

The estimate is a lower bound of what the runtime counts: the bytes of the tensors a graph holds
at once — its inputs, and each node's results from the node to their last use (graph outputs to
the end) — with results that view an argument (an alias annotation ``Tensor(a)`` in the op's
schema) counted as free, and no kernel scratch. So a warning is never a false alarm for the
memory bound; a graph near the bound may still be refused at load.
"""
from __future__ import annotations

import re
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

from ..ir.dtypes import element_size, to_dtype
from ..ir.program_ir import ArgKind, Graph, Program
from ..ir.signature import eval_expr

DEFAULT_MAX_BYTES = 32 << 20   # runtime/model/load_options.cpp: max(32 MiB, 16 x archive size)
ARCHIVE_FACTOR = 16

_VIEW_RETURN = re.compile(r"->\s*\(?\s*Tensor\([a-z]+\)")


def default_max_bytes(archive_bytes: int) -> int:
    """``LoadOptions::run.max_bytes`` by default for an archive of ``archive_bytes``."""
    return max(DEFAULT_MAX_BYTES, ARCHIVE_FACTOR * archive_bytes)


def symbol_maxima(program: Program) -> Optional[List[int]]:
    """Each symbol's range maximum; None when a symbol is unbounded (the runtime then needs
    ``--trusted`` anyway, which ``dynamic.py`` warns about)."""
    maxima: List[Optional[int]] = [s.hint for s in program.symbols]
    for r in program.range_constraints:
        if r.symbol < len(maxima):
            if r.max >= 2 ** 62:
                return None
            maxima[r.symbol] = r.max
    return maxima


def _value_bytes(graph: Graph, v: int, symbols: Sequence[int]) -> int:
    meta = graph.values[v].meta if 0 <= v < len(graph.values) else None
    if meta is None:
        return 0
    n = 1
    for d in meta.sizes:
        size = d.value if d.expr is None else eval_expr(d.expr, list(symbols))
        n *= max(size if size is not None else d.value, 0)
    try:
        return n * element_size(to_dtype(meta.dtype))
    except (KeyError, TypeError, ValueError):
        return 0


def _read_ids(arg) -> List[int]:
    if arg.kind in (ArgKind.TensorRef, ArgKind.TensorListRef):
        return [arg.value]
    if arg.kind in (ArgKind.TensorListArg, ArgKind.OptionalTensorListArg):
        return [v for v in arg.value if v >= 0]
    return []


def peak_bytes(program: Program, graph: Graph, symbols: Sequence[int]) -> int:
    """The peak bytes of tensors ``graph`` holds at once, with ``symbols`` bound (module
    docstring: a lower bound of the runtime's figure)."""
    last_use: Dict[int, int] = {}
    for i, node in enumerate(graph.nodes):
        for arg in node.args:
            for v in _read_ids(arg):
                last_use[v] = i
    kept = {o.value for o in graph.outputs if o.value >= 0}
    freed_at: Dict[int, List[int]] = {}
    for v, i in last_use.items():
        if v not in kept:
            freed_at.setdefault(i, []).append(v)
    live: Dict[int, int] = {}
    for inp in graph.inputs:
        live[inp.value] = _value_bytes(graph, inp.value, symbols)
    total = sum(live.values())
    peak = total
    for i, node in enumerate(graph.nodes):
        schema = program.operators[node.op].schema if node.op < len(program.operators) else ""
        view = bool(_VIEW_RETURN.search(schema))
        for o in node.outputs:
            b = 0 if view else _value_bytes(graph, o, symbols)
            total += b - live.get(o, 0)
            live[o] = b
        peak = max(peak, total)
        dead = freed_at.get(i, []) + [o for o in node.outputs
                                      if o not in last_use and o not in kept]
        for v in dead:
            total -= live.pop(v, 0)
    return peak


def peaks_at_maxima(program: Program) -> List[Tuple[str, int]]:
    """(graph role, estimated peak bytes) per graph at the range maxima (at the hints for a
    static archive); empty when a symbol is unbounded."""
    maxima = symbol_maxima(program)
    if maxima is None:
        return []
    return [(g.role.name.lower(), peak_bytes(program, g, maxima)) for g in program.graphs]


def warn_if_over_bounds(program: Program, archive_bytes: int) -> None:
    """Warns (UserWarning) when a graph's estimated peak at the range maxima exceeds the
    runtime's default bytes bound for an archive of ``archive_bytes``, naming the flags."""
    bound = default_max_bytes(archive_bytes)
    over = [(role, b) for role, b in peaks_at_maxima(program) if b > bound]
    if not over:
        return
    role, need = max(over, key=lambda rb: rb[1])
    at = ", ".join(f"{s.name}={m}" for s, m in zip(program.symbols, symbol_maxima(program) or []))
    where = f"at the range maxima ({at})" if at else "at the example's shapes"
    warnings.warn(
        f"pt2rt.export: {where} graph '{role}' needs at least {need / 2**20:.1f} MiB of tensors "
        f"at its peak, more than the C++ runtime's default bound for an untrusted archive of "
        f"this size ({bound / 2**20:.0f} MiB = max(32 MiB, 16 x archive size)): the runtime will "
        f"refuse calls that large unless given export-cli --trusted (no bounds) or "
        f"--max-run-bytes above the figure its refusal names (LoadOptions::run.max_bytes; it "
        f"also counts kernel scratch); or export with a smaller max",
        stacklevel=3)

