"""A dynamic batch through losses computed in forward (a training step exported whole) and the
layers that stopped torch 1.13's symbolic capture (exporter/pt2rt/capture/torch1/
symbolic_losses_torch1.py, symbolic_meta_torch1.py): cross_entropy in each of its forms,
nll_loss over images, mse, smooth-L1, L1, Huber, multi-margin, triplet margin, BCE with
logits, cosine similarity, logsumexp, focal loss's gather, top-k routing, sort, cummax,
index_select, amax, a weight-normed convolution, unfold / fold, take_along_dim, GroupNorm,
3-D, 1-D and adaptive max pooling, a spatial transformer, circular padding, bicubic
upsampling, mean(), glu, reflection and replication padding, feature and alpha dropout, a
BiLSTM tagger's reshape(-1, C), a text CNN's max over time, max_pool1d over time. Both lanes: one archive per model, eval and a training step against
eager at both ends of the range. On torch 1.13 what its autograd cannot record on symbolic
sizes is refused by name — the backward's autograd node included — with train=False as the
way out, which then exports."""
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

import pt2rt
from dynamic_parity import check_parity_at

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
only_1_13 = pytest.mark.skipif(TORCH2, reason="torch 1.13's symbolic-shape capture")
BATCH = pt2rt.Dim("batch", min=2, max=12)
CLASSES = 5


class Classifier(nn.Module):
    """A linear classifier whose forward returns its loss (and the logits); ``loss(logits,
    target, class_weight)``, the class weights a buffer (as ``nn.CrossEntropyLoss`` keeps
    them)."""

    def __init__(self, loss):
        super().__init__()
        torch.manual_seed(0)
        self.head = nn.Linear(4, CLASSES)
        self.register_buffer("class_weight", torch.linspace(0.5, 2.0, CLASSES))
        self.loss = loss

    def forward(self, x, target):
        logits = self.head(x)
        return self.loss(logits, target, self.class_weight), logits


LOSSES = {
    "cross_entropy": lambda y, t, w: F.cross_entropy(y, t),
    "cross_entropy_weight_ignore": lambda y, t, w: F.cross_entropy(y, t, weight=w,
                                                                ignore_index=1),
    "label_smoothing_mean_ignore": lambda y, t, w: F.cross_entropy(y, t, label_smoothing=0.2,
                                                                ignore_index=1),
    "label_smoothing_none": lambda y, t, w: F.cross_entropy(y, t, label_smoothing=0.1,
                                                         reduction="none"),
    "label_smoothing_weight_sum": lambda y, t, w: F.cross_entropy(
        y, t, weight=w, label_smoothing=0.1, reduction="sum"),
    # 1.13's composite masked_selects the targets' weights here (a data-dependent size)
    "label_smoothing_weight_mean_ignore": lambda y, t, w: F.cross_entropy(
        y, t, weight=w, label_smoothing=0.1, ignore_index=2),
    "log_softmax_nll": lambda y, t, w: F.nll_loss(F.log_softmax(y, 1), t),
    "multi_margin": lambda y, t, w: F.multi_margin_loss(y, t, margin=0.5),
    # the same as cross_entropy, written out: logsumexp minus the picked logit
    "logsumexp_minus_picked": lambda y, t, w: (torch.logsumexp(y, dim=1) -
                                               y.gather(1, t[:, None])[:, 0]).mean(),
    # focal loss: each row's class log-probability picked with gather
    "focal": lambda y, t, w: (-(1 - F.log_softmax(y, 1).gather(1, t.unsqueeze(1)).exp()) ** 2
                              * F.log_softmax(y, 1).gather(dim=1, index=t[:, None])).mean(),
    "mean_of_all": lambda y, t, w: (y - t.unsqueeze(1)).pow(2).mean(),
}
# losses against a dense target [N, CLASSES] (class probabilities, regression targets)
DENSE_LOSSES = {
    "probabilities_smoothing_weight": lambda y, p, w: F.cross_entropy(y, p, weight=w,
                                                                      label_smoothing=0.1),
    "probabilities_none": lambda y, p, w: F.cross_entropy(y, p, reduction="none"),
    "mse": lambda y, p, w: F.mse_loss(y, p),
    "smooth_l1": lambda y, p, w: F.smooth_l1_loss(y, p, beta=0.5),
    "l1_huber": lambda y, p, w: F.l1_loss(y, p) + F.huber_loss(y, p, delta=0.3),
    "bce_with_logits": lambda y, p, w: F.binary_cross_entropy_with_logits(y, p),
    "bce_with_logits_weights_sum": lambda y, p, w: F.binary_cross_entropy_with_logits(
        y, p, weight=w, pos_weight=w.flip(0), reduction="sum"),
    "cosine_embedding": lambda y, p, w: (1 - F.cosine_similarity(y, p)).mean(),
    "triplet_swap": lambda y, p, w: F.triplet_margin_loss(y, p, p.flip(0) * 2, margin=0.5,
                                                          swap=True),
}


def _inputs(n, seed, dense=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    if dense:
        return x, torch.rand(n, CLASSES, generator=g).softmax(1)
    return x, torch.randint(0, CLASSES, (n,), generator=g)


@pytest.mark.parametrize("name", sorted(LOSSES) + sorted(DENSE_LOSSES))
def test_a_loss_in_forward_with_a_dynamic_batch_matches_eager(tmp_path, name):
    dense = name in DENSE_LOSSES
    loss = DENSE_LOSSES[name] if dense else LOSSES[name]
    check_parity_at(tmp_path, Classifier(loss), _inputs(4, 0, dense), ({0: BATCH}, {0: BATCH}),
                    [_inputs(n, seed, dense) for seed, n in enumerate((2, 7, 12), 1)])


class Segmenter(nn.Module):
    """Per-pixel classes: nll_loss over [N, C, H, W] (nll_loss2d), reflection padding."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, CLASSES, 3)

    def forward(self, x, target):
        logits = self.conv(F.pad(x, (1, 1, 1, 1), mode="reflect"))
        return F.nll_loss(F.log_softmax(logits, 1), target), logits


def _images(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, 6, 6, generator=g), torch.randint(0, CLASSES, (n, 6, 6),
                                                               generator=g)


def test_per_pixel_nll_loss_with_a_dynamic_batch_matches_eager(tmp_path):
    check_parity_at(tmp_path, Segmenter(), _images(3, 0), ({0: BATCH}, {0: BATCH}),
                    [_images(2, 1), _images(12, 2)])


class Layers(nn.Module):
    """glu, replication padding and the dropouts whose ATen kernels read numel() on 1.13."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv1d(4, 8, 3)
        self.drop1d = nn.Dropout1d(0.3)
        self.drop2d = nn.Dropout2d(0.25)
        self.alpha = nn.AlphaDropout(0.2)
        self.feature_alpha = nn.FeatureAlphaDropout(0.2)

    def forward(self, x):
        h = F.glu(self.conv(F.pad(x, (1, 1), mode="replicate")), 1)   # [N, 4, L]
        h = self.drop1d(h)
        h = self.drop2d(h.unsqueeze(-1))[..., 0]
        return self.alpha(h) + self.feature_alpha(h)


def test_layers_and_dropouts_with_a_dynamic_batch_match_eager(tmp_path):
    sets = []
    for i, n in enumerate((2, 5, 12)):
        torch.manual_seed(10 + i)
        sets.append((torch.randn(n, 4, 9),))
    check_parity_at(tmp_path, Layers(), (torch.randn(3, 4, 9),), ({0: BATCH},), sets)


class Tagger(nn.Module):
    """A BiLSTM tagger: per-token logits flattened with reshape(-1, C) (ATen's reshape records
    ``sym_numel``) into cross_entropy."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(20, 6)
        self.lstm = nn.LSTM(6, 4, batch_first=True, bidirectional=True)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, tokens, tags):
        h, _ = self.lstm(self.embed(tokens))
        return F.cross_entropy(self.head(h).reshape(-1, CLASSES), tags.reshape(-1))


def _tokens(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 20, (n, 5), generator=g), torch.randint(0, CLASSES, (n, 5),
                                                                   generator=g)


def test_a_tagger_flattening_a_dynamic_batch_matches_eager(tmp_path):
    check_parity_at(tmp_path, Tagger(), _tokens(3, 0), ({0: BATCH}, {0: BATCH}),
                    [_tokens(2, 1), _tokens(12, 2)])


class TextCnn(nn.Module):
    """Embedding, convolution, max over time (``max(dim)``, whose 1.13 autograd node saves
    concrete sizes), an in-batch contrastive term (logits [N, N]: classes as dynamic as the
    batch) and a squeezed score."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(20, 6)
        self.conv = nn.Conv1d(6, 8, 3)
        self.head = nn.Linear(8, CLASSES)
        self.score = nn.Linear(8, 1)

    def forward(self, tokens, labels):
        h = F.relu(self.conv(self.embed(tokens).transpose(1, 2))).max(dim=2)[0]
        z = F.normalize(h, dim=1)
        pairs = F.cross_entropy(z @ z.t() / 0.5, torch.arange(labels.shape[0]))
        score = self.score(h).squeeze(1)
        low, where = torch.min(h, 1, True)
        return F.cross_entropy(self.head(h), labels) + pairs, score, low * where


def _sentences(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 20, (n, 7), generator=g), torch.randint(0, CLASSES, (n,),
                                                                   generator=g)


def test_a_text_cnn_with_max_over_time_matches_eager(tmp_path):
    check_parity_at(tmp_path, TextCnn(), _sentences(3, 0), ({0: BATCH}, {0: BATCH}),
                    [_sentences(2, 1), _sentences(12, 2)])


class PooledOverTime(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv1d(4, 6, 3)

    def forward(self, x):
        h = self.conv(x)
        return F.max_pool1d(h, h.shape[2]).squeeze(2)   # a constant SymInt as kernel_size


def test_max_pool_over_time_with_a_dynamic_batch_matches_eager(tmp_path):
    sets = []
    for i, n in enumerate((2, 12)):
        torch.manual_seed(20 + i)
        sets.append((torch.randn(n, 4, 9),))
    check_parity_at(tmp_path, PooledOverTime(), (torch.randn(3, 4, 9),), ({0: BATCH},), sets)


class Positions(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(12, 3)

    def forward(self, x):
        positions = torch.arange(x.shape[0])    # int64 in eager: bounds are ints
        return self.embed(positions) + x, positions // 2


def test_arange_over_a_dynamic_size_is_int64_as_in_eager(tmp_path):
    model, path = Positions(), str(tmp_path / "positions.pt2")
    pt2rt.export(model, (torch.randn(4, 3),), dynamic_shapes=({0: BATCH},),
                 bundle_examples=False).save(path)
    loaded = pt2rt.load(path)
    for n in (2, 12):
        x = torch.randn(n, 3)
        with torch.no_grad():
            for got, want in zip(loaded.run_inference(x), model.eval()(x)):
                assert_close(got, want)   # dtype included


class Router(nn.Module):
    """Mixture-of-experts routing (Switch / Mixtral style): the top-2 experts' softmax weights
    from ``topk`` (values differentiated), each token's experts mixed by ``gather`` of two
    outputs per row, plus a gather of the chosen logits (two picks, one repeated)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.router = nn.Linear(4, CLASSES)
        self.experts = nn.Linear(4, CLASSES)

    def forward(self, x):
        probs = F.softmax(self.router(x), -1)
        weights, chosen = torch.topk(probs, 2, dim=-1)
        mixed = (self.experts(x).gather(1, chosen) * weights).sum(1)
        again = self.router(x).gather(dim=1, index=torch.cat([chosen[:, :1], chosen[:, :1]], 1))
        return mixed, weights / weights.sum(-1, keepdim=True), again


def test_top_k_routing_with_a_dynamic_batch_matches_eager(tmp_path):
    check_parity_at(tmp_path, Router(), (torch.randn(4, 4),), ({0: BATCH},),
                    [(torch.randn(2, 4),), (torch.randn(12, 4),)])


class Picks(nn.Module):
    """Ops whose values are picks of their input: sort, cummax / cummin, index_select with a
    repeated index (symbolic_picks_torch1.py on torch 1.13); amax / amin with ties and an
    infinite maximum (symbolic_autograd_torch1.py)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.head = nn.Linear(4, CLASSES)

    def forward(self, x):
        h = self.head(x)
        ranked = torch.sort(h, dim=1, descending=True).values
        running = h.cummax(1)[0] + torch.cummin(h, dim=-1).values
        chosen = h.index_select(1, torch.tensor([3, 0, 3]))
        # amax / amin: ties (relu's zeros) share the gradient; a row whose maximum is +inf
        ties = h.relu().amax(1) + torch.amin(h.clamp(max=0.2), dim=(1,), keepdim=True).sum(1)
        peak = (h + torch.where(h.detach() > 0.9, float("inf"), 0.0)).amax(-1, keepdim=True)
        return ranked * 2, running, chosen, h.sort(stable=True)[0], ties, peak


def test_sort_cummax_index_select_and_amax_with_a_dynamic_batch_match_eager(tmp_path):
    torch.manual_seed(3)
    check_parity_at(tmp_path, Picks(), (torch.randn(4, 4),), ({0: BATCH},),
                    [(torch.randn(2, 4),), (torch.randn(12, 4) * 3,)])


class WeightNormed(nn.Module):
    """wav2vec2's positional convolution: a grouped Conv1d under nn.utils.weight_norm (on
    torch 1.13 its _weight_norm_interface had no Meta kernel)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # weight_norm's deprecation (torch 2.x)
            self.conv = nn.utils.weight_norm(nn.Conv1d(4, 4, 3, padding=1, groups=2), dim=2)
        self.head = nn.Linear(4, CLASSES)

    def forward(self, x):
        return self.head(F.gelu(self.conv(x)).mean(2))


def test_a_weight_normed_convolution_with_a_dynamic_batch_matches_eager(tmp_path):
    check_parity_at(tmp_path, WeightNormed(), (torch.randn(3, 4, 6),), ({0: BATCH},),
                    [(torch.randn(2, 4, 6),), (torch.randn(12, 4, 6),)])


class Unfolded(nn.Module):
    """F.unfold / F.fold (im2col / col2im) and take_along_dim with an index of batch 1."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        h = self.conv(x)
        cols = F.unfold(h, kernel_size=3, padding=1, stride=2)
        back = F.fold(cols, output_size=(8, 8), kernel_size=3, padding=1, stride=2)
        rows = torch.take_along_dim(h, torch.tensor([[[[2], [0]]]]), dim=2)
        return cols.mean(-1), back, rows


def test_unfold_fold_and_take_along_dim_with_a_dynamic_batch_match_eager(tmp_path):
    check_parity_at(tmp_path, Unfolded(), (torch.randn(3, 3, 8, 8),), ({0: BATCH},),
                    [(torch.randn(2, 3, 8, 8),), (torch.randn(12, 3, 8, 8),)])


class PoolsAndNorms(nn.Module):
    """nn.GroupNorm, 3-D pooling, adaptive max pooling, a spatial transformer (affine_grid +
    grid_sample), circular padding, bicubic upsampling and 1-D average pooling over a dynamic
    batch."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.norm = nn.GroupNorm(2, 4)
        self.conv3 = nn.Conv3d(1, 2, 3, padding=1)
        self.theta = nn.Linear(3, 6)

    def forward(self, x):
        h = self.norm(self.conv(x))
        v = self.conv3(x.unsqueeze(1))
        grid = F.affine_grid(self.theta(x.mean((2, 3))).view(-1, 2, 3), list(x.shape),
                             align_corners=False)
        seq = h.flatten(2)   # [N, C, 64]
        return (F.adaptive_max_pool2d(h, 3), F.avg_pool3d(v, 2),
                F.max_pool3d(v, (1, 2, 2), ceil_mode=True),
                F.grid_sample(x, grid, align_corners=False),
                F.pad(h, (1, 2, 2, 1), mode="circular"),
                F.interpolate(h, scale_factor=2, mode="bicubic", align_corners=False),
                F.avg_pool1d(seq, 4, 2, 1), F.adaptive_avg_pool1d(seq, 5))


def test_group_norm_pooling_and_a_spatial_transformer_with_a_dynamic_batch_match_eager(
        tmp_path):
    check_parity_at(tmp_path, PoolsAndNorms(), (torch.randn(3, 3, 8, 8),), ({0: BATCH},),
                    [(torch.randn(2, 3, 8, 8),), (torch.randn(12, 3, 8, 8),)],
                    rtol=1e-4, atol=1e-5)


class Cumulative(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.head = nn.Linear(4, CLASSES)

    def forward(self, x):
        return self.head(x).cumsum(1)


@only_1_13
def test_a_backward_without_a_symbolic_rule_is_refused_naming_its_node(tmp_path):
    model, x = Cumulative(), torch.randn(4, 4)
    with pytest.raises(pt2rt.ExportError, match=r"the backward of cumsum \(autograd node "
                       r"CumsumBackward0\).*train=False"):
        pt2rt.export(model, (x,), dynamic_shapes=({0: BATCH},), bundle_examples=False)
    # the way out the message names
    path = str(tmp_path / "cumulative.pt2")
    pt2rt.export(model, (x,), dynamic_shapes=({0: BATCH},), train=False,
                 bundle_examples=False).save(path)
    loaded = pt2rt.load(path)
    for n in (2, 12):
        x = torch.randn(n, 4)
        with torch.no_grad():
            assert_close(loaded.run_inference(x)[0], model.eval()(x))
