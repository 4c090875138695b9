"""``torch.export.Dim`` objects in ``dynamic_shapes`` (``capture/dynamic.py``), as torch.export
users write them: named dims (torch 2.14 makes them instances, which were refused before;
earlier 2.x makes classes), derived dims (``Dim + 1``, ``2 * Dim``), one object on several
inputs meaning equal sizes, and the hints ``Dim.AUTO`` / ``Dim.DYNAMIC`` (optionally with a
range) / ``Dim.STATIC``. torch 1.13 has no torch.export: skipped there."""
import warnings

import pytest
import torch
from torch.testing import assert_close

import pt2rt

export = pytest.importorskip("torch.export")
if not hasattr(export, "Dim"):
    pytest.skip("torch.export.Dim: torch >= 2.2", allow_module_level=True)
Dim = export.Dim


class Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return self.a(x) + self.a(y[1:])  # y has one row more than x


def _symbols(archive):
    return {s.name: (r.min, r.max) for s, r in zip(archive.program.symbols,
                                                   archive.program.range_constraints)}


def test_named_dim_shared_by_two_inputs_and_a_derived_one(tmp_path):
    batch = Dim("batch", min=2, max=16)
    archive = pt2rt.export(Pair(), (torch.randn(5, 4), torch.randn(6, 4)),
                           dynamic_shapes={"x": {0: batch}, "y": {0: batch + 1}})
    assert _symbols(archive) == {"batch": (2, 16)}
    path = str(tmp_path / "pair.pt2")
    archive.save(path)
    loaded = pt2rt.load(path)
    x, y = torch.randn(9, 4), torch.randn(10, 4)
    with torch.no_grad():
        assert_close(loaded.run_inference(x, y)[0], Pair().eval()(x, y))
    with pytest.raises(pt2rt.InputError):
        loaded.run_inference(torch.randn(9, 4), torch.randn(9, 4))  # y must be batch + 1


UNBOUNDED = 2 ** 63 - 1


@pytest.mark.parametrize("hint, expected", [
    ("AUTO", {"input_0": (1, UNBOUNDED)}), ("DYNAMIC", {"input_0": (1, UNBOUNDED)}),
    ("DYNAMIC_RANGE", {"input_0": (2, 8)}), ("STATIC", {})])
def test_hints(hint, expected):
    value = Dim.DYNAMIC(min=2, max=8) if hint == "DYNAMIC_RANGE" else getattr(Dim, hint)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        archive = pt2rt.export(torch.nn.Linear(4, 3), (torch.randn(5, 4),),
                               dynamic_shapes=({0: value},))
    assert _symbols(archive) == expected
    unbounded = [w for w in caught if "has no max" in str(w.message)]
    assert bool(unbounded) == (expected.get("input_0", (0, 0))[1] == UNBOUNDED)


def test_derived_dim_that_is_not_affine_is_refused():
    n = Dim("n", min=2, max=8)
    derived = n + 1
    derived.fn = lambda v: v * v  # not k * n + j
    with pytest.raises(pt2rt.ExportError, match=r"is not k \* dim \+ j"):
        pt2rt.export(Pair(), (torch.randn(3, 4), torch.randn(4, 4)),
                     dynamic_shapes={"x": {0: n}, "y": {0: derived}})
