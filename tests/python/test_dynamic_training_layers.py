"""Training graphs with a dynamic batch through the constructs torchvision's models use that
torch 1.13's autograd could not record on symbolic sizes (exporter/pt2rt/capture/torch1/
symbolic_autograd_torch1.py, symbolic_replay_torch1.py): concatenations of pieces of different
widths (DenseNet's growing feature list, Inception's branches, a ViT's class token),
stochastic depth's in-place ``noise.div_`` and in-place ops on views (EfficientNet's
``Dropout(inplace=True)`` on the flattened features, ``x[:, :k] *= s``, ``narrow(...).add_``,
``__setitem__`` into a new tensor), whose backward or functionalization copies with ``copy_``. Both lanes: one archive per model, eval and a
training step against eager at both ends of the range; on torch 1.13 the forward graph holds
``cat`` itself, as eager's trace does."""
import collections

import pytest
import torch
from torch import nn

import pt2rt
from dynamic_parity import check_parity_at
from pt2rt.capture.capture import capture

torchvision = pytest.importorskip("torchvision")
BATCH = pt2rt.Dim("batch", min=2, max=6)


def _narrow_vit():
    from torchvision.models.vision_transformer import VisionTransformer
    torch.manual_seed(0)
    return VisionTransformer(image_size=16, patch_size=8, num_layers=1, num_heads=2,
                             hidden_dim=16, mlp_dim=32, num_classes=5)


def _small_densenet():
    torch.manual_seed(0)
    return torchvision.models.DenseNet(growth_rate=4, block_config=(3, 2), num_init_features=8,
                                       bn_size=2, num_classes=5)


class Branches(nn.Module):
    """Inception-style: four convolution branches of different widths concatenated, with
    stochastic depth (torchvision.ops.StochasticDepth, 'row') on the result."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.branches = nn.ModuleList(nn.Conv2d(3, c, k, padding=k // 2)
                                      for c, k in ((2, 1), (3, 3), (4, 5), (1, 1)))
        self.drop = torchvision.ops.StochasticDepth(0.4, "row")
        self.head = nn.Linear(10, 5)

    def forward(self, x):
        h = self.drop(torch.cat([b(x) for b in self.branches], 1))
        return self.head(h.mean((2, 3)))


class DropoutOnFlatFeatures(nn.Module):
    """EfficientNet's head: average pool, flatten (a view), ``Dropout(inplace=True)``, Linear."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 8, 3)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.3, inplace=True), nn.Linear(8, 5))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.conv(x)), 1))


class InPlaceOnViews(nn.Module):
    """In-place ops on slices of an activation and ``__setitem__`` into a new tensor."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 6, 3)
        self.a = nn.Linear(6, 3)
        self.b = nn.Linear(6, 3)

    def forward(self, x):
        h = self.conv(x).mean((2, 3)) * 1.0
        h[:, :2] *= 3
        h.narrow(1, 3, 2).add_(1.5)
        out = h.new_zeros(h.shape[0], 6)
        out[:, :3] = self.a(h)
        out[:, 3:] = self.b(h).relu()
        return out.tanh()


MODELS = {"vit": (_narrow_vit, 16), "densenet": (_small_densenet, 16), "branches": (Branches, 8),
          "dropout_on_flat_features": (DropoutOnFlatFeatures, 8),
          "in_place_on_views": (InPlaceOnViews, 8)}


def _images(n, size, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, 3, size, size, generator=g),)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_training_step_with_a_dynamic_batch_matches_eager(tmp_path, name):
    build, size = MODELS[name]
    check_parity_at(tmp_path, build(), _images(3, size, 0), ({0: BATCH},),
                    [_images(2, size, 1), _images(6, size, 2)], rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(int(torch.__version__.split(".")[0]) >= 2, reason="torch 1.13's capture")
@pytest.mark.parametrize("name", ["densenet", "branches"])
def test_the_training_graph_concatenates_with_cat_as_the_static_one(name):
    build, size = MODELS[name]
    forwards = []
    for dynamic in (({0: BATCH},), None):
        program = capture(build(), _images(3, size, 0), None, train=True, inference=False,
                          partitioner="default", decompositions=None, optimize_inference=False,
                          dynamic_shapes=dynamic)
        forwards.append(collections.Counter(str(n.target)
                                            for n in program.graphs[0].module.graph.nodes))
    dynamic, static = forwards
    # (pieces of one shape, DenseNet's one-element list included, are a stack viewed flat)
    assert dynamic["aten.cat.default"] + dynamic["aten.stack.default"] == \
        static["aten.cat.default"] > 0
    assert dynamic["aten.slice_backward.default"] == 0


class OverlappingCopy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        h = self.lin(x) * 1.0
        h[:, 1:3] = h[:, 0:2]   # eager copies element by element over the overlap
        return h


@pytest.mark.skipif(int(torch.__version__.split(".")[0]) >= 2, reason="torch 1.13's capture")
def test_a_copy_between_overlapping_views_is_refused_naming_copy():
    # copy_ is replayed as fill_ + add_ only where the source cannot alias the destination
    with pytest.raises(pt2rt.ExportError, match=r"aten\.copy_"):
        pt2rt.export(OverlappingCopy(), (torch.randn(3, 6),), bundle_examples=False,
                     dynamic_shapes=({0: BATCH},))
