"""Inputs that are tuples, lists and dicts of tensors (issue 24 item 4; schema 1.6 input
structures): the export flattens them in torch.utils._pytree's order and names each tensor by
its path, the archive keeps the structure, and the Python reader takes the structure back —
matching eager PyTorch in eval and in a training step; anything else in an input is refused
with its path."""
import collections
import copy

import pytest
import torch
from torch.testing import assert_close

import pt2rt
from pt2rt.errors import ExportError, ExportTypeError, InputError
from pt2rt.ir.input_spec import InputSpec, SpecKind, flatten, unflatten

T = InputSpec()


class Detector(torch.nn.Module):
    """forward(images: List[Tensor], targets: Dict[str, Tuple[Tensor, Tensor]], *, scale)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, images, targets, scale):
        feats = [self.conv(im).mean((-1, -2)) for im in images]
        boxes, weights = targets["boxes"]
        out = self.head(torch.cat(feats)) * scale + boxes.sum(-1, keepdim=True) * weights
        return {"scores": out, "count": targets["count"] * 2}


def example(seed=0):
    g = torch.Generator().manual_seed(seed)
    images = [torch.randn(1, 3, 8, 8, generator=g), torch.randn(1, 3, 6, 10, generator=g)]
    targets = {"boxes": (torch.randn(2, 4, generator=g), torch.rand(2, 1, generator=g)),
               "count": torch.randn(2, generator=g)}
    return (images, targets), {"scale": torch.rand(2, 2, generator=g) + 0.5}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("tree") / "detector.pt2"
    args, kwargs = example()
    pt2rt.export(Detector(), args, kwargs).save(str(path))
    return str(path)


def test_structure_and_names_round_trip(archive):
    loaded = pt2rt.load(archive)
    assert [n for n, _ in loaded.program.inputs] == ["images", "targets", "scale"]
    images, targets, scale = (s for _, s in loaded.program.inputs)
    assert images == InputSpec(SpecKind.List, (), (T, T))
    assert targets == InputSpec(SpecKind.Dict, ("boxes", "count"),
                                (InputSpec(SpecKind.Tuple, (), (T, T)), T))
    assert scale == T
    assert loaded.input_names == ["images[0]", "images[1]", "targets['boxes'][0]",
                                  "targets['boxes'][1]", "targets['count']", "scale"]


def test_module_call_matches_eager_in_eval_and_training(archive):
    args, kwargs = example(seed=1)
    model = Detector()
    loaded = pt2rt.load(archive)
    with torch.no_grad():
        want = copy.deepcopy(model).eval()(*args, **kwargs)
    got = loaded.module()(*args, **kwargs)
    assert_close(got["scores"], want["scores"])
    assert_close(got["count"], want["count"])
    # a training step: outputs and parameter gradients as eager's
    eager = copy.deepcopy(model).train()
    out = eager(*args, **kwargs)
    g = torch.randn_like(out["scores"])
    out["scores"].backward(g)
    step = loaded.train_step(*args, grad_outputs=[g, torch.zeros(2)], **kwargs)
    assert_close(step.outputs[0], out["scores"].detach())
    for n, p in eager.named_parameters():
        assert_close(step.grads[n], p.grad, msg=n)


def test_a_call_of_another_structure_is_an_input_error_naming_the_path(archive):
    (images, targets), kwargs = example()
    run = pt2rt.load(archive).module()
    with pytest.raises(InputError, match=r"input 'images': expected a list of 2, got a list of 1"):
        run([images[0]], targets, **kwargs)
    with pytest.raises(InputError, match=r"input 'targets': expected a dict with keys"):
        run(images, {"boxes": targets["boxes"]}, **kwargs)
    with pytest.raises(InputError, match=r"input \"targets\['boxes'\]\": expected a tuple of 2"):
        run(images, {"boxes": targets["count"], "count": targets["count"]}, **kwargs)
    # a tuple for a list, keys in another order: the same call
    run(tuple(images), {"count": targets["count"], "boxes": targets["boxes"]}, **kwargs)


@pytest.mark.parametrize("value, message", [
    ([torch.ones(2), None], r"input 'x\[1\]' is a NoneType"),
    ({1: torch.ones(2)}, r"input 'x' is a dict with non-str keys"),
    (collections.namedtuple("P", "a b")(torch.ones(2), torch.ones(2)), r"input 'x' is a P"),
    ([[torch.ones(2), 3]], r"input 'x\[0\]\[1\]' is a int"),
])
def test_what_an_input_cannot_hold_is_refused_with_its_path(value, message):
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.zeros(1)
    with pytest.raises(ExportTypeError, match=message):
        pt2rt.export(M(), (value,))


def test_nesting_deeper_than_the_bound_is_refused():
    value = torch.ones(1)
    for _ in range(17):
        value = [value]
    with pytest.raises(ExportTypeError, match="more than 16 levels"):
        flatten(value, "x")
    spec, leaves = flatten(value[0], "x")   # 16 levels: taken
    assert len(leaves) == 1 and unflatten(spec, iter(leaves))[0][0][0] is not None


class Pair(torch.nn.Module):
    """forward(images: [x, y], batch: {"scale": s, "bias": b}) with a batch dim on x, y, s."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.enc = torch.nn.Linear(8, 4)

    def forward(self, images, batch):
        return self.enc(images[0] * batch["scale"] + images[1]) + batch["bias"]


def pair_example(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return ([torch.randn(n, 8, generator=g), torch.randn(n, 8, generator=g)],
            {"scale": torch.rand(n, 8, generator=g), "bias": torch.randn(4, generator=g)})


def test_dynamic_shapes_mirror_the_input_structure(tmp_path):
    """torch.export's convention: each argument's dynamic_shapes entry has its structure."""
    batch = pt2rt.Dim("batch", min=1, max=8)
    path = str(tmp_path / "pair.pt2")
    model = Pair()
    pt2rt.export(model, pair_example(2),
                 dynamic_shapes={"images": [{0: batch}, {0: batch}],
                                 "batch": {"scale": {0: batch}}}).save(path)
    loaded = pt2rt.load(path)
    assert [s.sizes[0].expr for s in loaded.signature.inputs] == ["batch", "batch", "batch", ""]
    for n in (1, 8):
        images, b = pair_example(n, seed=n)
        with torch.no_grad():
            want = copy.deepcopy(model).eval()(images, b)
        assert_close(loaded.module().eval()(images, b), want)
    with pytest.raises(ExportError, match=r"dynamic_shapes\['images'\] must be None or a "
                                          r"tuple/list of 2 entries"):
        pt2rt.export(model, pair_example(2), dynamic_shapes={"images": {0: batch}})
    with pytest.raises(ExportError, match=r"dynamic_shapes\['batch'\].*keys among"):
        pt2rt.export(model, pair_example(2), dynamic_shapes={"batch": {"mask": {0: batch}}})
