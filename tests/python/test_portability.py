"""Device portability of exported archives (exporter/pt2rt/capture/portability.py), checked on the CPU:
no device-specific kernel family in any graph, results whose shape depends on the device
marked, kernel-choice guards that do not narrow a Dim, float64 references, and the capture
device recorded. The GPU side (archives captured on the CPU run on CUDA, archives captured on
CUDA run on the CPU) is scripts/gpu-check.sh's (scripts/device_sweep.py)."""
from __future__ import annotations

import contextlib
import copy

import pytest
import torch
from torch import nn

import pt2rt
from pt2rt.capture import portability
from pt2rt.ops import attention_ops, device_dependence
from pt2rt.errors import CaptureError
from pt2rt.ir.graph_ir import GraphRole

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def _op_names(exported):
    p = exported.program
    return {p.operators[n.op].name for g in p.graphs for n in g.nodes}


def _marked(exported, role):
    g = exported.program.graph(role)
    return {v.name for v in g.values if v.device_dependent_shape}


def test_attention_exports_without_device_specific_kernels(tmp_path):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    x = torch.randn(2, 5, 32)
    exported = pt2rt.export(model, (x,))
    names = _op_names(exported)
    assert not [n for n in names if device_dependence.device_specific(n)], names
    # torch >= 2.5: one pt2rt node, which the runtime runs on its device's fused kernel
    # (ops/attention_ops.py); no ATen attention kernel of one device family either way.
    assert not [n for n in names if "attention" in n and not n.startswith("pt2rt::")], names
    assert ("pt2rt::scaled_dot_product_attention" in names) == attention_ops.supported()
    path = tmp_path / "t.pt2"
    exported.save(str(path))
    loaded = pt2rt.load(str(path))
    want = copy.deepcopy(model).eval()(x)
    torch.testing.assert_close(loaded.run_inference(x)[0], want)


@pytest.mark.parametrize("name, portable", [
    ("aten::_scaled_dot_product_flash_attention_for_cpu", False),
    ("aten::_scaled_dot_product_efficient_attention_backward", False),
    ("aten::cudnn_batch_norm", False), ("aten::miopen_rnn", False),
    ("aten::mkldnn_rnn_layer", False), ("aten::_thnn_fused_lstm_cell", False),
    ("aten::_nnpack_spatial_convolution", False), ("aten::_fused_dropout", False),
    ("aten::convolution", True), ("aten::native_batch_norm", True), ("aten::_softmax", True),
    ("aten::_safe_softmax", True), ("aten::addmm", True), ("aten::lstm", True)])
def test_device_specific_families(name, portable):
    assert device_dependence.device_specific(name) is not portable


@pytest.mark.skipif(not TORCH2, reason="calls a torch 2.x CPU-only attention kernel")
def test_a_device_specific_op_is_refused_at_export_naming_it():
    class CpuOnlyAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 8)

        def forward(self, x):
            q = self.proj(x).unsqueeze(1)
            return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q)[0]

    with pytest.raises(CaptureError, match="_scaled_dot_product_flash_attention_for_cpu"):
        pt2rt.export(CpuOnlyAttention(), (torch.randn(2, 4, 8),))


def test_results_whose_shape_depends_on_the_device_are_marked(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    exported = pt2rt.export(model, (torch.randn(2, 1, 6, 6),))
    # eval-mode batch norm (inference graph): save_mean and save_invstd only
    assert _marked(exported, GraphRole.Inference) == {"native_batch_norm.1", "native_batch_norm.2"}
    assert _marked(exported, GraphRole.Forward) == set()  # training mode: [C] on every device
    path = tmp_path / "bn.pt2"
    exported.save(str(path))
    loaded = pt2rt.load(str(path))
    assert _marked(loaded, GraphRole.Inference) == {"native_batch_norm.1", "native_batch_norm.2"}

    class Bags(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(10, 3, mode="sum")

        def forward(self, idx, offsets):
            return self.bag(idx, offsets)
    bags = pt2rt.export(Bags(), (torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 2])))
    marked = set()
    for role in (GraphRole.Inference, GraphRole.Forward):
        g = bags.program.graph(role)
        for node in g.nodes:
            if bags.program.operators[node.op].name.startswith("aten::_embedding_bag"):
                marked |= {k for k, v in enumerate(node.outputs) if g.values[v].device_dependent_shape}
    assert marked == {1, 3}  # offset2bag, max_indices


@pytest.mark.skipif(not TORCH2, reason="the torch 2.x capture's fake convolution")
def test_a_kernel_choice_guard_does_not_narrow_a_dim(monkeypatch, tmp_path):
    """pip torch 2.11's fake convolution asks _select_conv_backend which CPU kernel eager would
    run; NNPACK's `batch >= 16` condition became a guard and `Dim("batch", 1, 1024)` was
    refused ("the model only works for batch in [16, 1024]"). The same kind of guard is
    injected here: the capture evaluates backend choices at the hints, so the Dim keeps its
    range and the archive matches eager at both ends of it."""
    calls = []
    original = torch._C._select_conv_backend

    def guarded(*args, **kwargs):
        calls.append(1)
        if args[0].shape[0] >= 16:  # a Python comparison of a SymInt: a guard when symbolic
            pass
        return original(*args, **kwargs)
    monkeypatch.setattr(torch._C, "_select_conv_backend", guarded)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Flatten(), nn.Linear(4 * 8 * 8, 10))
    batch = pt2rt.Dim("batch", min=1, max=1024)
    exported = pt2rt.export(model, (torch.randn(32, 1, 8, 8),), dynamic_shapes={"input": {0: batch}})
    assert calls, "the injected guard was never reached: the test no longer tests the capture"
    (rc,) = exported.program.range_constraints
    assert (rc.min, rc.max) == (1, 1024)
    exported.save(str(tmp_path / "m.pt2"))
    loaded = pt2rt.load(str(tmp_path / "m.pt2"))
    eager = copy.deepcopy(model).eval()
    with torch.no_grad():
        for n in (1, 1024):
            x = torch.randn(n, 1, 8, 8)
            torch.testing.assert_close(loaded.run_inference(x)[0], eager(x))


def test_references_record_their_distance_from_float64():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 4 * 4, 3))
    refs = pt2rt.export(model, (torch.randn(2, 1, 6, 6),)).program.examples[0].references
    rmse = [t.float64_rmse for t in refs.outputs + refs.train_outputs]
    assert all(0 <= e < 1e-5 for e in rmse), rmse
    buffers = dict(refs.buffers)
    assert 0 <= buffers["1.running_var"].float64_rmse < 1e-5
    assert buffers["1.num_batches_tracked"].float64_rmse is None  # an integer buffer
    for s in refs.grad_sketches:
        assert s.float64 is not None and s.float64.sizes == s.sizes
        assert len(s.float64.projections) == len(s.projections)
        assert abs(s.float64.norm - s.norm) <= 1e-5 * max(1.0, s.norm)
    off = pt2rt.export(model, (torch.randn(2, 1, 6, 6),), float64_references=False)
    refs = off.program.examples[0].references
    assert all(t.float64_rmse is None for t in refs.outputs)
    assert all(s.float64 is None for s in refs.grad_sketches)


class CoordinateGrid(nn.Module):
    """Makes float32 tensors of its own, as RAFT's coordinate grid does: a float64 copy mixes
    them with float64 weights (grid_sample needs one dtype)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)
        self.norm = nn.InstanceNorm2d(2)

    def forward(self, x):
        n, _, h, w = x.shape
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack([xs, ys], -1).float() / torch.tensor([w - 1.0, h - 1.0]) * 1.8 - 0.85
        return nn.functional.grid_sample(self.norm(self.conv(x)), grid.expand(n, h, w, 2),
                                         align_corners=True)


def test_float64_references_of_a_model_making_float32_tensors():
    """The plain float64 copy fails (float32 grid, float64 input); the references are then
    made with float64 wherever the model asks for float32 (float64_mode.py), so verify has the
    float64 rule for the conv bias before the InstanceNorm, whose gradient is rounding noise."""
    torch.manual_seed(0)
    model = CoordinateGrid()
    refs = pt2rt.export(model, (torch.randn(2, 2, 5, 6),)).program.examples[0].references
    assert all(s.float64 is not None for s in refs.grad_sketches)
    assert all(t.float64_rmse is not None and t.float64_rmse < 1e-5
               for t in refs.outputs + refs.train_outputs)
    assert torch.get_default_dtype() is torch.float32  # put back
    assert model(torch.randn(1, 2, 3, 3)).dtype is torch.float32


def test_the_capture_device_is_recorded():
    exported = pt2rt.export(nn.Linear(3, 2), (torch.randn(4, 3),))
    assert exported.program.producer.capture_device == "cpu"


def test_an_unbounded_dim_is_warned_about_at_export():
    """torch.export users write Dim('batch') without a max; the runtime then refuses the
    archive unless trusted. The exporter says so, naming the flag and the field."""
    model = nn.Linear(3, 2)
    with pytest.warns(UserWarning, match=r"Dim 'batch' has no max.*export-cli --trusted"):
        pt2rt.export(model, (torch.randn(4, 3),), dynamic_shapes={"input": {0: pt2rt.Dim("batch")}})


def test_graphs_do_not_depend_on_the_onednn_and_nnpack_flags():
    """torch 1.13 traces with oneDNN and NNPACK as the caller set them (its make_fx records
    aten.convolution above the backend choice: ``portability.cpu_kernel_choice_recorded``);
    torch >= 2 turns them off for the trace. Either way, the flags the caller runs under must
    not change a captured graph."""
    def build():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, groups=2),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
        return model, (torch.randn(2, 3, 16, 16),)

    codes = []
    for enabled in (True, False):
        model, args = build()
        nnpack = getattr(torch.backends, "nnpack", None)
        with torch.backends.mkldnn.flags(enabled=enabled), \
                (nnpack.flags(enabled=enabled) if hasattr(nnpack, "flags")
                 else contextlib.nullcontext()):
            exported = pt2rt.export(model, args, bundle_examples=False)
        codes.append({g.role: g.module.code for g in exported.graphs})
    assert set(codes[0]) == {GraphRole.Inference, GraphRole.Forward, GraphRole.Backward}
    assert "convolution_backward" in codes[0][GraphRole.Backward]
    assert codes[0] == codes[1]


class _Interpolates(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(2, 3, 3, padding=1)

    def forward(self, x):
        y = self.c(x)
        return (nn.functional.interpolate(y, scale_factor=1.7, mode="bilinear", align_corners=True),
                nn.functional.interpolate(y, size=(9, 11), mode="nearest"),
                nn.functional.interpolate(y, scale_factor=2, mode="bicubic"),
                nn.functional.interpolate(y[:, :, 0], scale_factor=1.5, mode="linear"))


@pytest.mark.skipif(not hasattr(torch.ops.aten.upsample_bilinear2d_backward, "vec"),
                    reason="this torch traces no .vec backward overloads (torch >= 2)")
def test_interpolate_backward_uses_overloads_every_libtorch_has():
    """torch 1.13 differentiates F.interpolate into upsample_*_backward.vec, which LibTorch 2.x
    lacks; the capture writes the .default overloads with the sizes and scales the .vec kernel
    passes them (graph_passes.upsample_backward_without_vec), giving eager's gradients."""
    torch.manual_seed(0)
    model, x = _Interpolates(), torch.randn(2, 2, 6, 8)
    archive = pt2rt.export(model, (x,), bundle_examples=False)
    targets = {str(n.target) for n in archive.graph(GraphRole.Backward).module.graph.nodes
               if n.op == "call_function"}
    assert not [t for t in targets if "upsample" in t and t.endswith(".vec")], targets
    for op in ("upsample_bilinear2d_backward", "upsample_nearest2d_backward",
               "upsample_bicubic2d_backward", "upsample_linear1d_backward"):
        assert f"aten.{op}.default" in targets, targets
    from pt2rt.capture.capture import annotate_program
    run = annotate_program(archive.captured, [x])
    sum(o.sum() for o in model(x)).backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(run.param_grads[name], p.grad)
