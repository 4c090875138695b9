"""Output sizes ``floor(size * c)`` for a float ``c`` on dynamic dims (``F.interpolate``'s
``scale_factor``): a short binary fraction is integer arithmetic, ``(size * m) // d``
(``symbols.dyadic_ratio``, ``graph_passes.integral_sizes_without_floats``); anything else is
refused by name. End to end through the C++ runtime: ``tests/cli/test_dynamic_models.py``
(``resample_fractional``)."""
import copy
import math

import pytest
import torch
from torch.testing import assert_close

import pt2rt
from pt2rt.ir.symbols import DYADIC_LIMIT, dyadic_ratio

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


@pytest.mark.parametrize("c, ratio", [(2.0, (2, 1)), (0.5, (1, 2)), (1.5, (3, 2)),
                                      (0.75, (3, 4)), (1.25, (5, 4)), (1 / 3, None),
                                      (0.1, None), (0.0, None), (-1.5, None),
                                      (float("inf"), None), (float("nan"), None), (True, None)])
def test_dyadic_ratio(c, ratio):
    assert dyadic_ratio(c) == ratio


def test_integer_division_equals_the_float_rounding_below_2_to_31():
    for c in (0.5, 1.5, 0.75, 1.25, 2.5, 7 / 8, (DYADIC_LIMIT - 1) / 2 ** 21):
        m, d = dyadic_ratio(c)
        for n in list(range(0, 300)) + [2 ** 31 - 1, 2 ** 31 - 2, 123456789]:
            assert math.trunc(float(n) * c) == (n * m) // d
            assert math.ceil(float(n) * c) == (n * m + d - 1) // d


class Resample(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.scale = scale

    def forward(self, x):
        return torch.nn.functional.interpolate(self.conv(x), scale_factor=self.scale,
                                               mode="nearest")


DIMS = ({2: pt2rt.Dim("h", min=4, max=64), 3: pt2rt.Dim("w", min=4, max=64)},)


@pytest.mark.skipif(not TORCH2, reason="torch 1.13 has no symbolic rule for a scale_factor")
@pytest.mark.parametrize("scale", [0.5, 1.5, (0.75, 1.25)])
def test_binary_fraction_scales_match_eager_across_the_range(scale, tmp_path):
    model = Resample(scale)
    path = str(tmp_path / "r.pt2")
    pt2rt.export(model, (torch.randn(2, 3, 16, 12),), dynamic_shapes=DIMS).save(path)
    loaded = pt2rt.load(path)
    for h, w in [(4, 4), (5, 7), (13, 11), (63, 64)]:
        x = torch.randn(2, 3, h, w)
        with torch.no_grad():
            want = copy.deepcopy(model).eval()(x)
        assert_close(loaded.run_inference(x)[0], want)


@pytest.mark.skipif(not TORCH2, reason="torch 1.13 has no symbolic rule for a scale_factor")
def test_other_scales_are_refused_naming_the_way_out():
    with pytest.raises(pt2rt.ExportError, match=r"floor\(size \* scale\).*pass size="):
        pt2rt.export(Resample(1 / 3), (torch.randn(2, 3, 16, 12),), dynamic_shapes=DIMS)
