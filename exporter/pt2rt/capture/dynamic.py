"""Dynamic shapes: ``pt2rt.Dim`` and the ``dynamic_shapes=`` spec of ``pt2rt.export``.

The conventions are torch.export's ("Expressing Dynamism",
https://pytorch.org/docs/stable/export.html#expressing-dynamism):

* ``Dim(name, min=..., max=...)`` names one dynamic dimension with an inclusive range
  (``max=None``: unbounded above); the same ``Dim`` object used for several input dims means
  those sizes are equal; ``dim + k`` and ``k * dim`` (and ``k * dim + j``) are *derived* dims,
  whose size is always that function of the root dim's.
* ``dynamic_shapes`` is a dict keyed by ``forward()`` argument name, or a tuple/list in
  argument order (positional args, then keyword args in ``forward()``'s order); each entry is
  ``None`` (all dims static), a dict ``{dim_index: Dim}`` or a tuple/list with one
  ``Dim``/``None`` per dim. Every dim not marked is static (specialised to the example size).
* On torch >= 2.9 a ``torch.export.Dim`` is accepted wherever a ``Dim`` is (derived ones
  too), and ``Dim.AUTO`` / ``Dim.DYNAMIC`` (a dim of its own, named ``<input>_<dim>``; AUTO is
  taken as DYNAMIC: a dim the model specialises is refused, naming it) and ``Dim.STATIC``.

``normalize`` checks a spec against the example inputs and returns one ``InputDims`` per flat
user input; every problem is an ``ExportError`` naming the argument, the dim and the reason.
"""
from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ..errors import ExportError, ExportTypeError

INT64_MAX = 2 ** 63 - 1


class Dim:
    """A dynamic dimension: ``name`` (a Python identifier, shown in messages and by
    ``export-cli inspect``), inclusive range ``[min, max]`` (``max=None``: unbounded).

    Sizes are numbers of elements. ``min`` defaults to 1 (a size-0 dim is not a batch);
    ``min=0`` is allowed.

    Raises:
        ExportError: the name is not an identifier, min < 0, or min > max.
    """

    def __init__(self, name: str, min: Optional[int] = None, max: Optional[int] = None):
        if not isinstance(name, str) or not name.isidentifier():
            raise ExportError(f"pt2rt.Dim: name must be a Python identifier, got {name!r}")
        lo = 1 if min is None else int(min)
        hi = INT64_MAX if max is None or max == math.inf else int(max)
        if lo < 0:
            raise ExportError(f"pt2rt.Dim({name!r}): min = {lo} is negative")
        if lo > hi:
            raise ExportError(f"pt2rt.Dim({name!r}): min = {lo} > max = {hi}")
        self.name, self.min, self.max = name, lo, hi

    # Derived dims: k * dim + j (torch.export's _DerivedDim, restricted to affine functions).
    def __add__(self, j: int) -> "DerivedDim":
        return DerivedDim(self, 1, _int(j, "+"))

    __radd__ = __add__

    def __sub__(self, j: int) -> "DerivedDim":
        return DerivedDim(self, 1, -_int(j, "-"))

    def __mul__(self, k: int) -> "DerivedDim":
        return DerivedDim(self, _int(k, "*"), 0)

    __rmul__ = __mul__

    def range_text(self) -> str:
        return f"[{self.min}, {'inf' if self.max >= INT64_MAX else self.max}]"

    def __repr__(self) -> str:
        return f"Dim({self.name!r}, min={self.min}, max={self.max if self.max < INT64_MAX else None})"


@dataclass(frozen=True)
class DerivedDim:
    """``scale * root + offset``: a dim whose size is a fixed affine function of ``root``'s."""

    root: Dim
    scale: int
    offset: int

    def __add__(self, j: int) -> "DerivedDim":
        return DerivedDim(self.root, self.scale, self.offset + _int(j, "+"))

    __radd__ = __add__

    def __mul__(self, k: int) -> "DerivedDim":
        k = _int(k, "*")
        return DerivedDim(self.root, self.scale * k, self.offset * k)

    __rmul__ = __mul__

    @property
    def name(self) -> str:
        s = self.root.name if self.scale == 1 else f"{self.scale} * {self.root.name}"
        return s if self.offset == 0 else f"{s} {'+' if self.offset > 0 else '-'} {abs(self.offset)}"

    def value(self, root_size: int) -> int:
        return self.scale * root_size + self.offset


def _int(v: Any, op: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ExportError(f"pt2rt.Dim: a derived dim is dim {op} int; got {type(v).__name__}")
    if op == "*" and v <= 0:
        raise ExportError(f"pt2rt.Dim: a derived dim's scale must be positive, got {v}")
    return v


def _is_torch_dim(v: Any) -> bool:
    """A ``torch.export.Dim``: a class (``_Dim``, ``_DerivedDim``, ``_StaticDim``: earlier
    torch 2.x) or an instance of ``torch.export.dynamic_shapes.Dim`` (torch 2.14; derived dims
    ``_DerivedDim``)."""
    if isinstance(v, type):
        return type(v).__name__ in ("_Dim", "_DerivedDim", "_StaticDim")
    return type(v).__module__ == "torch.export.dynamic_shapes" and \
        type(v).__name__ in ("Dim", "_DerivedDim", "_StaticDim")


def _affine(d: Any) -> Tuple[int, int]:
    """(scale, offset) of a torch.export derived dim's ``fn`` (built by ``+``, ``-`` and ``*``
    with ints, so affine: evaluated at 0, 1 and 2 to check).

    Raises:
        ExportError: ``fn`` is not an affine function with a positive integer scale."""
    try:
        f0, f1, f2 = (d.fn(v) for v in (0, 1, 2))
    except Exception as e:  # noqa: BLE001 - a user's function: report it
        raise ExportError(f"pt2rt.export: derived torch.export.Dim {d.__name__!r}: its "
                          f"function cannot be evaluated on ints ({e})") from e
    ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (f0, f1, f2))
    if not ok or f1 - f0 <= 0 or f2 - f1 != f1 - f0:
        raise ExportError(f"pt2rt.export: derived torch.export.Dim {d.__name__!r} is not "
                          "k * dim + j with an int k > 0; use pt2rt.Dim arithmetic")
    return f1 - f0, f0


def _upper(hi: Any) -> Optional[int]:
    """A torch.export upper bound as ``Dim``'s ``max``: None for unbounded (None, inf, sympy's
    ``int_oo``, INT64_MAX)."""
    unbounded = hi is None or hi == math.inf or str(hi) == "int_oo" or hi >= INT64_MAX
    return None if unbounded else hi


def _from_torch_dim(d: Any, cache: Dict[int, Any]) -> Optional[Any]:
    """A ``torch.export.Dim`` as ours (None for a static one); one pt2rt Dim per torch Dim
    object (``cache``, by id), so reuse, and derivation from a root, still mean equality."""
    if id(d) in cache:
        return cache[id(d)]
    name = type(d).__name__
    if name == "_StaticDim":
        out = None
    elif name == "_DerivedDim":
        root = _from_torch_dim(d.root, cache)
        scale, offset = _affine(d)
        out = DerivedDim(root, scale, offset)
    else:
        out = Dim(d.__name__, min=d.min, max=_upper(d.max))
    cache[id(d)] = out
    return out


def _from_hint(hint: Any, name: str) -> Optional[Dim]:
    """``torch.export.Dim.AUTO`` / ``Dim.DYNAMIC`` (optionally called with min/max) as a Dim of
    its own named after the input and dim; ``Dim.STATIC``: None. AUTO is taken as DYNAMIC: a
    dim the model specialises is refused naming it (torch.export would make it static)."""
    kind = getattr(getattr(hint, "type", None), "name", "")
    if kind == "STATIC":
        return None
    return Dim(re.sub(r"\W", "_", name).strip("_") or "dim", min=getattr(hint, "min", None),
               max=_upper(getattr(hint, "max", None)))


@dataclass
class InputDims:
    """The marked dims of one flat user input: dim index -> Dim or DerivedDim."""

    name: str
    dims: Dict[int, Any]


def _as_dim(v: Any, where: str, cache: Dict[int, Dim], auto_name: str) -> Any:
    if v is None or isinstance(v, (Dim, DerivedDim)):
        return v
    if _is_torch_dim(v):
        return _from_torch_dim(v, cache)
    if type(v).__name__ == "_DimHint":
        return _from_hint(v, auto_name)
    raise ExportTypeError(f"pt2rt.export: dynamic_shapes{where}: expected a pt2rt.Dim (or "
                          f"torch.export.Dim) or None, got {type(v).__name__} {v!r}")


def normalize(spec: Any, names: Sequence[str], inputs: Sequence[torch.Tensor]
              ) -> Optional[List[InputDims]]:
    """Checks ``dynamic_shapes`` against the flat user inputs (``names[i]`` is input i's
    forward() argument name); returns one InputDims per input, or None when nothing is dynamic.

    Raises:
        ExportTypeError: the spec or an entry has the wrong type.
        ExportError: unknown argument name, wrong number of entries, dim index out of range,
            an example size outside its Dim's range, a derived dim whose example size is not
            its function of the root's, one Dim with two different example sizes, two Dims with
            the same name.
    """
    if spec is None:
        return None
    entries = _per_argument(spec, names)
    cache: Dict[int, Dim] = {}
    result: List[InputDims] = []
    for name, entry, x in zip(names, entries, inputs):
        where = f"[{name!r}]"
        if entry is None:
            result.append(InputDims(name, {}))
            continue
        if isinstance(entry, (tuple, list)):
            if len(entry) != x.dim():
                raise ExportError(f"pt2rt.export: dynamic_shapes{where} has {len(entry)} "
                                  f"entries but input {name!r} has {x.dim()} dims")
            entry = dict(enumerate(entry))
        if not isinstance(entry, dict):
            raise ExportTypeError(f"pt2rt.export: dynamic_shapes{where} must be None, a dict "
                                  f"{{dim_index: Dim}} or a tuple/list, got {type(entry).__name__}")
        dims: Dict[int, Any] = {}
        for k, v in entry.items():
            if isinstance(k, bool) or not isinstance(k, int):
                raise ExportTypeError(f"pt2rt.export: dynamic_shapes{where}: dim index {k!r} is "
                                      "not an int")
            if not -x.dim() <= k < x.dim():
                raise ExportError(f"pt2rt.export: dynamic_shapes{where}: dim {k} is out of range "
                                  f"for input {name!r} of shape {list(x.shape)}")
            d = _as_dim(v, f"{where}[{k}]", cache, f"{name}_{k % x.dim()}")
            if d is not None:
                dims[k % x.dim()] = d
        result.append(InputDims(name, dims))
    _check_examples(result, inputs)
    unbounded = sorted({(d.root if isinstance(d, DerivedDim) else d).name
                        for r in result for d in r.dims.values()
                        if (d.root if isinstance(d, DerivedDim) else d).max >= INT64_MAX})
    if unbounded:
        warnings.warn(f"pt2rt.export: Dim {', '.join(map(repr, unbounded))} has no max: the "
                      "C++ runtime cannot bound a call's memory and time at load, so it loads "
                      "the archive only as trusted (LoadOptions::allow_symbolic_shapes, "
                      "export-cli --trusted); give it a max, e.g. pt2rt.Dim(name, max=1024), "
                      "to keep the untrusted-archive bounds", stacklevel=4)
    return result if any(r.dims for r in result) else None


def _check_examples(spec: List[InputDims], inputs: Sequence[torch.Tensor]) -> None:
    by_name: Dict[str, Dim] = {}
    root_size: Dict[int, Tuple[int, str]] = {}

    def root_of(d: Any) -> Dim:
        return d.root if isinstance(d, DerivedDim) else d

    for entry, x in zip(spec, inputs):           # roots first: their sizes fix derived ones
        for k, d in entry.dims.items():
            where = f"input {entry.name!r} dim {k}"
            root = root_of(d)
            other = by_name.setdefault(root.name, root)
            if other is not root and (other.min, other.max) != (root.min, root.max):
                raise ExportError(f"pt2rt.export: dynamic_shapes: two different Dims are named "
                                  f"{root.name!r}")
            if isinstance(d, Dim):
                size = int(x.shape[k])
                if not d.min <= size <= d.max:
                    raise ExportError(f"pt2rt.export: {where} ({d.name}): the example size "
                                      f"{size} is outside {d.name}'s range {d.range_text()}")
                seen = root_size.setdefault(id(d), (size, where))
                if seen[0] != size:
                    raise ExportError(f"pt2rt.export: {where} ({d.name}): the example size "
                                      f"{size} differs from {seen[1]}'s {seen[0]}, which uses the "
                                      "same Dim (the same Dim means equal sizes)")
    for entry, x in zip(spec, inputs):
        for k, d in entry.dims.items():
            if not isinstance(d, DerivedDim):
                continue
            where = f"input {entry.name!r} dim {k}"
            if id(d.root) not in root_size:
                raise ExportError(f"pt2rt.export: {where} ({d.name}): the derived dim's root "
                                  f"{d.root.name!r} marks no input dim")
            want = d.value(root_size[id(d.root)][0])
            if int(x.shape[k]) != want:
                raise ExportError(f"pt2rt.export: {where} ({d.name}): the example size "
                                  f"{int(x.shape[k])} is not {d.name} = {want}")


def parse_cli(items: Sequence[str]) -> Dict[str, Dict[int, Any]]:
    """``--dynamic`` values of ``python -m pt2rt save`` / ``export-cli save`` -> a
    ``dynamic_shapes`` dict. Each item is ``ARG:DIM=NAME[MIN,MAX]`` (a new Dim; ``MAX`` may be
    empty or ``inf`` for unbounded), ``ARG:DIM=NAME`` (a Dim declared by an earlier item: equal
    sizes) or ``ARG:DIM=NAME+K`` / ``K*NAME`` / ``K*NAME+K2`` (a derived dim), e.g.
    ``--dynamic x:0=batch[1,512] --dynamic y:0=batch+1``.

    Raises:
        ExportError: an item that does not parse, or names an undeclared Dim.
    """
    import re
    item_re = re.compile(r"^([A-Za-z_]\w*):(-?\d+)=(.+)$")
    new_re = re.compile(r"^([A-Za-z_]\w*)\[\s*(\d+)\s*,\s*(\d*|inf)\s*\]$")
    use_re = re.compile(r"^(?:(\d+)\s*\*\s*)?([A-Za-z_]\w*)\s*(?:([+-])\s*(\d+))?$")
    dims: Dict[str, Dim] = {}
    spec: Dict[str, Dict[int, Any]] = {}
    for item in items:
        m = item_re.match(item.strip())
        if not m:
            raise ExportError(f"--dynamic {item!r}: expected ARG:DIM=NAME[MIN,MAX], e.g. "
                              "x:0=batch[1,512]")
        arg, k, rhs = m.group(1), int(m.group(2)), m.group(3).strip()
        n = new_re.match(rhs)
        if n:
            name = n.group(1)
            if name in dims:
                raise ExportError(f"--dynamic {item!r}: Dim {name!r} is declared twice")
            hi = None if n.group(3) in ("", "inf") else int(n.group(3))
            dims[name] = Dim(name, min=int(n.group(2)), max=hi)
            d: Any = dims[name]
        else:
            u = use_re.match(rhs)
            if not u or u.group(2) not in dims:
                raise ExportError(f"--dynamic {item!r}: {rhs!r} is neither NAME[MIN,MAX] nor a "
                                  "Dim declared by an earlier --dynamic (NAME, NAME+K, K*NAME)")
            d = dims[u.group(2)]
            if u.group(1):
                d = int(u.group(1)) * d
            if u.group(4):
                d = d + (int(u.group(4)) if u.group(3) == "+" else -int(u.group(4)))
        spec.setdefault(arg, {})[k] = d
    return spec


def _per_argument(spec: Any, names: List[str]) -> List[Any]:
    """``dynamic_shapes``' entry for each of ``names``: from a dict keyed by name (absent:
    None) or a tuple/list in order.

    Raises:
        ExportError: an unknown name, or another number of entries.
        ExportTypeError: ``spec`` is neither.
    """
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in names]
        if unknown:
            raise ExportError(f"pt2rt.export: dynamic_shapes names unknown argument "
                              f"{unknown[0]!r}; forward() takes {', '.join(names)}")
        return [spec.get(n) for n in names]
    if isinstance(spec, (tuple, list)):
        if len(spec) != len(names):
            raise ExportError(f"pt2rt.export: dynamic_shapes has {len(spec)} entries but the "
                              f"model takes {len(names)} inputs ({', '.join(names)})")
        return list(spec)
    raise ExportTypeError(f"pt2rt.export: dynamic_shapes must be a dict keyed by argument "
                          f"name or a tuple/list in argument order, got {type(spec).__name__}")


def flatten_structured(spec: Any, params: List[str], structures: List[Any]) -> Any:
    """``dynamic_shapes`` for a forward() whose parameters are tuples, lists or dicts of
    tensors (``ir/input_spec.py``), as torch.export takes it — a dict by parameter name or a
    tuple/list by position, each entry None or mirroring its parameter's structure down to one
    tensor's ``{dim: Dim}`` / per-dim tuple — as one entry per flat user input, in their order
    (what ``normalize`` takes with the inputs' path names).

    Raises:
        ExportTypeError / ExportError: an entry whose structure is not its parameter's (named
            by path), an unknown parameter name, a wrong number of entries.
    """
    from ..ir.input_spec import SpecKind
    entries = _per_argument(spec, params)

    def leaves(structure: Any, entry: Any, path: str) -> List[Any]:
        if structure.kind is SpecKind.Tensor:
            return [entry]
        if entry is None:
            return [None] * structure.num_leaves()
        if structure.kind is SpecKind.Dict:
            if not isinstance(entry, dict) or not set(entry) <= set(structure.keys):
                raise ExportError(f"pt2rt.export: dynamic_shapes[{path!r}] must be None or a "
                                  f"dict with keys among {list(structure.keys)} (the input's), "
                                  f"got {entry!r}")
            items = [(f"{path}[{k!r}]", c, entry.get(k))
                     for k, c in zip(structure.keys, structure.children)]
        else:
            if not isinstance(entry, (tuple, list)) or len(entry) != len(structure.children):
                raise ExportError(f"pt2rt.export: dynamic_shapes[{path!r}] must be None or a "
                                  f"tuple/list of {len(structure.children)} entries (one per "
                                  f"element of the input), got {entry!r}")
            items = [(f"{path}[{i}]", c, e) for i, (c, e) in enumerate(zip(structure.children,
                                                                            entry))]
        return [leaf for p, c, e in items for leaf in leaves(c, e, p)]

    return [leaf for p, st, e in zip(params, structures, entries) for leaf in leaves(st, e, p)]
