"""Gradient sketches (grad_sketch.py, schema 1.2): the hash and signs against a plain-integer
implementation, what the tolerance rule accepts and refuses, the archive forms (sketch by
default, full references on request) and the size they cost."""
import os

import pytest
import torch

import pt2rt
from pt2rt.ir import grad_sketch as gs

M32 = 0xFFFFFFFF


def lowbias32_int(x: int) -> int:
    """The reference hash on Python ints (C. Wellons' lowbias32)."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def sign_int(seed: int, k: int, j: int) -> int:
    key = lowbias32_int((seed + (k + 1) * 0x9E3779B9) & M32)
    return 1 if lowbias32_int(j ^ key) < 2 ** 31 else -1


# Also hard-coded in tests/cpp/runtime/test_grad_sketch.cpp (the C++ signs must be the same).
GOLDEN = {(gs.DEFAULT_SEED, 0): [1, 1, 1, -1, 1, -1, -1, -1, 1, -1, 1, -1, 1, 1, 1, -1],
          (gs.DEFAULT_SEED, 7): [1, 1, 1, 1, -1, -1, 1, 1, 1, -1, -1, -1, -1, 1, -1, -1],
          (12345, 3): [-1, 1, 1, -1, -1, 1, -1, -1, -1, -1, 1, -1, -1, 1, 1, -1]}


def test_vectorised_hash_equals_integer_hash():
    xs = [0, 1, 2, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, M32, 0x12345678, 0xDEADBEEF]
    got = gs.lowbias32(torch.tensor(xs, dtype=torch.int64)).tolist()
    assert got == [lowbias32_int(x) for x in xs]


@pytest.mark.parametrize("seed,k", list(GOLDEN))
def test_signs_equal_definition(seed, k):
    n = 1000
    expected = [sign_int(seed, k, j) for j in range(n)]
    assert gs.signs(seed, k, n).tolist() == expected
    assert expected[:16] == GOLDEN[(seed, k)]
    s = gs.signs(seed, k, 100000)
    assert abs(float(s.mean())) < 0.02  # balanced
    assert gs.signs(seed, k, 10).tolist() == expected[:10]  # prefix of the cached vector


def test_compute_all_equals_compute_each():
    grads = [("a", _grad((3, 5), 1)), ("b", _grad((70, 40), 2)), ("c", _grad((7,), 3))]
    seed = 4242  # not cached by other tests: compute_all hashes the signs for "b" first
    assert gs.compute_all(grads, seed) == [gs.compute(k, g, seed) for k, g in grads]
    assert gs.signs(seed, 2, 50).tolist() == [sign_int(seed, 2, j) for j in range(50)]
    assert gs.compute_all([], seed) == []


def _grad(n=(64, 32), seed=0):
    return torch.randn(*n, generator=torch.Generator().manual_seed(seed))


def test_close_gradient_passes():
    g = _grad()
    ref = gs.compute("w", g)
    assert gs.check_tensor(g, ref, gs.DEFAULT_SEED) is None
    # float32 rounding-level differences, and everything assert_close accepts elementwise
    assert gs.check_tensor(g * (1 + 1e-7), ref, gs.DEFAULT_SEED) is None
    assert gs.check_tensor(g + 0.9e-5 * torch.sign(g), ref, gs.DEFAULT_SEED) is None


@pytest.mark.parametrize("wrong,stat", [
    (lambda g: g * 1.01, "norm"),                          # scaled
    (lambda g: g + 1e-3, ""),                              # biased
    (lambda g: g.flatten().flip(0).view_as(g), "projection"),  # permuted: same norm/sum/max
    (lambda g: g.t().contiguous().view_as(g), "projection"),   # transposed layout
    (lambda g: torch.where(g.abs() == g.abs().max(), g * 2, g), ""),  # one large element
    (lambda g: g * torch.nan, "norm"),
])
def test_wrong_gradient_fails(wrong, stat):
    g = _grad()
    ref = gs.compute("w", g)
    why = gs.check_tensor(wrong(g), ref, gs.DEFAULT_SEED)
    assert why is not None and why.startswith(stat), why


def test_shape_and_dtype_mismatch_fail():
    g = _grad()
    ref = gs.compute("w", g)
    assert "sizes" in gs.check_tensor(g.view(-1), ref, gs.DEFAULT_SEED)
    assert "dtype" in gs.check_tensor(g.double(), ref, gs.DEFAULT_SEED)


def _mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    return model, (torch.randn(4, 64),)


def test_archive_forms_and_sizes(tmp_path):
    """Default: sketches only, the archive grows by <= 5 % of the weights over one without
    examples; full_references: every gradient in full (about the weights' size again)."""
    model, args = _mlp()
    sizes = {}
    for form, kw in {"none": dict(bundle_examples=False), "sketch": {},
                     "full": dict(full_references=True)}.items():
        path = str(tmp_path / f"{form}.pt2")
        pt2rt.export(model, args, **kw).save(path)
        sizes[form] = os.path.getsize(path)
        if form != "none":
            ex = pt2rt.load(path).examples()[0]
            names = sorted(n for n, p in model.named_parameters())
            assert sorted(ex.grads if form == "full" else ex.grad_sketches) == names
            assert not (ex.grad_sketches if form == "full" else ex.grads)
            step = pt2rt.load(path).train_step(*args)
            assert ex.check_grads(step.grads) == {}
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    grow = {f: sizes[f] - sizes["none"] for f in ("sketch", "full")}
    print(f"\nmlp archive: weights {weights} B; no examples {sizes['none']} B; "
          f"sketched references +{grow['sketch']} B ({100 * grow['sketch'] / weights:.2f} % "
          f"of the weights); full references +{grow['full']} B "
          f"({100 * grow['full'] / weights:.1f} %)")
    assert grow["sketch"] <= 0.05 * weights
    assert grow["full"] >= weights


def test_an_empty_gradient_sketches_to_zeros():
    """A zero-element parameter (or a zero-size dim) has a zero-element gradient: every
    statistic is 0 (torch.bincount of nothing is int64 zeros, which the float64 projection
    product refused: OpInfo's roll, unfold, svd, ... with empty samples)."""
    s = gs.compute("empty", torch.zeros(0, 3))
    assert (s.norm, s.sum, s.abs_sum, s.max_abs) == (0.0, 0.0, 0.0, 0.0)
    assert s.projections == [0.0] * gs.DEFAULT_PROJECTIONS
    assert gs.check_tensor(torch.zeros(0, 3), s, gs.DEFAULT_SEED) is None
