"""Wrong arguments to export and damaged archives raise typed errors naming the problem."""
from __future__ import annotations

import os
import shutil
import zipfile

import pytest
import torch
import torch.nn as nn

import models
import pt2rt
from pt2rt.ir import constants


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:  # data-dependent control flow: not capturable
            return y
        return -y


class ToNumpy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(torch.from_numpy(x.detach().numpy()))


class Failing(nn.Module):
    def forward(self, x):
        return x @ torch.ones(3, 3)  # shape mismatch for a [2, 4] input


class StringOutput(nn.Module):
    def forward(self, x):
        return x * 2, "label"


def test_not_a_module():
    with pytest.raises(pt2rt.ExportTypeError, match="torch.nn.Module") as e:
        pt2rt.export(lambda x: x, (torch.randn(2),))
    assert isinstance(e.value, TypeError) and isinstance(e.value, ValueError)


def test_non_tensor_input_named():
    model, (x, y) = models.build("two_io")
    with pytest.raises(pt2rt.ExportTypeError, match=r"input 'y' is a set"):
        pt2rt.export(model, (x, {3}))  # a Python scalar would be specialized (torch.export)


def test_args_must_be_a_tuple():
    model, args = models.build("mlp")
    with pytest.raises(pt2rt.ExportTypeError, match="args must be a tuple"):
        pt2rt.export(model, {"x": args[0]})


def test_signature_mismatch():
    model, args = models.build("mlp")
    with pytest.raises(pt2rt.ExportError, match="do not match"):
        pt2rt.export(model, args + args)


@pytest.mark.parametrize("kwargs", [{}, {"inference": False}], ids=["all", "train-only"])
def test_data_dependent_control_flow_is_untraceable(kwargs):
    # torch 1.13 names the method (__bool__), torch 2.x the value read (item(), bool())
    with pytest.raises(pt2rt.CaptureError, match=r"data-dependent.*(__bool__|bool\(\))") as e:
        pt2rt.export(DataDependent(), (torch.randn(2, 4),), **kwargs)
    assert "test_errors.py" in str(e.value) and "if y.sum() > 0" in str(e.value)


class ItemScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return y / y.abs().max().item()  # a tensor's value as a Python number


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_item_is_refused_with_and_without_dynamic_shapes(dynamic):
    """With a dynamic dim torch >= 2 traces .item() to an unbacked symbol instead of raising; the
    archive then failed at load (the runtime's meta check). Both are refused at export, naming
    the user's line."""
    kw = {"dynamic_shapes": {"x": {0: pt2rt.Dim("batch", min=1, max=8)}}} if dynamic else {}
    with pytest.raises((pt2rt.CaptureError, pt2rt.ExportError),
                       match=r"item\(\)|data-dependent|symbolic-shape rule") as e:
        pt2rt.export(ItemScale(), (torch.randn(3, 4),), **kw)
    assert "y.abs().max().item()" in str(e.value) or "symbolic-shape rule" in str(e.value)


class Reparametrized(nn.Module):
    """A VAE's sampling step through torch.distributions (rsample + kl_divergence)."""

    def __init__(self, validate_args=None):
        super().__init__()
        self.enc = nn.Linear(6, 8)
        self.validate_args = validate_args

    def forward(self, x):
        mu, log_var = self.enc(x).chunk(2, -1)
        q = torch.distributions.Normal(mu, (0.5 * log_var).exp(),
                                       validate_args=self.validate_args)
        prior = torch.distributions.Normal(torch.zeros_like(mu), torch.ones_like(mu),
                                           validate_args=self.validate_args)
        return q.rsample(), torch.distributions.kl_divergence(q, prior).sum(-1)


def test_distribution_argument_checks_are_refused_naming_validate_args():
    """torch.distributions checks ``scale > 0`` on the values (validate_args): refused on both
    lanes with the remedy; with validate_args=False the same model exports."""
    with pytest.raises(pt2rt.CaptureError, match=r"torch\.distributions checks its "
                       r"arguments' values .*validate_args=False"):
        pt2rt.export(Reparametrized(), (torch.randn(5, 6),))
    pt2rt.export(Reparametrized(validate_args=False), (torch.randn(5, 6),))


def test_numpy_round_trip_is_untraceable():
    with pytest.raises(pt2rt.CaptureError, match=r"numpy\(\)"):
        pt2rt.export(ToNumpy(), (torch.randn(2, 4),))


def test_failing_forward_names_model():
    with pytest.raises(pt2rt.CaptureError, match="Failing"):
        pt2rt.export(Failing(), (torch.randn(2, 4),))


def test_non_tensor_output():
    with pytest.raises(pt2rt.ExportError, match="output 1 is a str"):
        pt2rt.export(StringOutput(), (torch.randn(2, 4),))


def test_unknown_partitioner():
    model, args = models.build("mlp")
    with pytest.raises(pt2rt.ExportError, match="unknown partitioner 'fancy'"):
        pt2rt.export(model, args, partitioner="fancy")


def test_nothing_to_export():
    model, args = models.build("mlp")
    with pytest.raises(pt2rt.ExportError, match="nothing to export"):
        pt2rt.export(model, args, train=False, inference=False)


# ---------------------------------------------------------------------------- reader

@pytest.fixture
def good_archive(exports):
    return exports.get("mlp").path


def _rewrite(src, dst, replace=None, compress=None):
    """Copies a zip entry by entry (STORED, 64-byte aligned, as pt2rt writes it), replacing
    contents or deflating the entries named in ``compress``."""
    from pt2rt.format.archive import _write_aligned
    replace = replace or {}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = replace.get(info.filename, zin.read(info))
            if compress and info.filename in compress:
                zout.writestr(info.filename, data, compress_type=zipfile.ZIP_DEFLATED)
            else:
                _write_aligned(zout, info.filename, data)


def test_load_not_a_zip(tmp_path):
    p = tmp_path / "x.pt2"
    p.write_bytes(b"definitely not a zip")
    with pytest.raises(pt2rt.FormatError, match="not a zip"):
        pt2rt.load(str(p))


def test_load_wrong_format(good_archive, tmp_path):
    p = str(tmp_path / "wrong.pt2")
    _rewrite(good_archive, p, {constants.ARCHIVE_FORMAT_ENTRY: b"pt2"})
    with pytest.raises(pt2rt.FormatError, match="archive_format"):
        pt2rt.load(p)


def test_load_future_version(good_archive, tmp_path):
    p = str(tmp_path / "future.pt2")
    _rewrite(good_archive, p, {constants.ARCHIVE_VERSION_ENTRY: b"2"})
    with pytest.raises(pt2rt.FormatError, match="archive_version '2'"):
        pt2rt.load(p)


def test_load_compressed_weight(good_archive, tmp_path):
    p = str(tmp_path / "deflated.pt2")
    _rewrite(good_archive, p, compress={"weights/0"})
    with pytest.raises(pt2rt.FormatError, match="weights/0.*compressed"):
        pt2rt.load(p)


def test_load_misaligned_entry(good_archive, tmp_path):
    p = str(tmp_path / "plainzip.pt2")
    with zipfile.ZipFile(good_archive) as zin, zipfile.ZipFile(p, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info))
    with pytest.raises(pt2rt.FormatError, match="not 64-byte aligned"):
        pt2rt.load(p)


def test_load_short_weight(good_archive, tmp_path):
    with zipfile.ZipFile(good_archive) as z:
        w0 = z.read("weights/0")
    p = str(tmp_path / "short.pt2")
    _rewrite(good_archive, p, {"weights/0": w0[:-4]})
    with pytest.raises(pt2rt.FormatError, match="weights/0"):
        pt2rt.load(p)


def test_load_missing_program(good_archive, tmp_path):
    p = str(tmp_path / "noprog.pt2")
    with zipfile.ZipFile(good_archive) as zin, zipfile.ZipFile(p, "w") as zout:
        for info in zin.infolist():
            if info.filename != constants.PROGRAM_ENTRY:
                zout.writestr(info, zin.read(info))
    with pytest.raises(pt2rt.FormatError, match="missing entry 'program.fb'"):
        pt2rt.load(p)


def test_load_truncated_program(good_archive, tmp_path):
    with zipfile.ZipFile(good_archive) as z:
        prog = z.read(constants.PROGRAM_ENTRY)
    p = str(tmp_path / "trunc.pt2")
    _rewrite(good_archive, p, {constants.PROGRAM_ENTRY: prog[:len(prog) // 3]})
    with pytest.raises(pt2rt.FormatError, match="program.fb"):
        pt2rt.load(p)


def test_save_failure_keeps_original(exports, tmp_path, monkeypatch):
    e = exports.get("mlp").exported
    target = tmp_path / "model.pt2"
    shutil.copy(exports.get("mlp").path, target)
    before = target.read_bytes()

    import pt2rt.format.archive as archive

    def boom(*a, **k):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(archive, "_write_aligned", boom)
    with pytest.raises(OSError, match="simulated"):
        e.save(str(target))
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["model.pt2"]


def test_frames_of_packages_beside_torch_are_shown():
    """torchvision/ sits beside torch/ in site-packages: its frames are the user's (a prefix
    test once took them for torch internals, so a refusal inside torchvision named no line)."""
    from pt2rt.capture import provenance
    site = os.path.dirname(provenance._TORCH_DIR)
    assert provenance._classify(os.path.join(site, "torchvision", "ops", "x.py")) == (False, True)
    assert provenance._classify(os.path.join(provenance._TORCH_DIR, "_tensor.py")) == (False, False)
    assert provenance._classify(os.path.join(provenance._TORCH_DIR, "nn", "modules", "conv.py"))[1]
    assert provenance._classify(provenance._PKG_DIR + "_other" + os.sep + "x.py")[0] is False


@pytest.mark.skipif(int(torch.__version__.split(".")[0]) >= 2,
                    reason="the torch 1.13 capture's refusal")
def test_a_refusal_inside_torchvision_names_its_line():
    torchvision = pytest.importorskip("torchvision")
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=3).eval()
    with pytest.raises(pt2rt.CaptureError, match=r"item\(\)") as e:
        pt2rt.export(model, ([torch.rand(3, 64, 64)],), train=False)
    assert "torchvision/models/detection/transform.py" in str(e.value), str(e.value)


class RoiHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x, boxes):
        import torchvision
        return torchvision.ops.roi_align(self.c(x), boxes, output_size=(2, 2), aligned=True)


def test_custom_operators_are_named_at_export():
    """torchvision::roi_align exports, but only a process with torchvision's C++ operators,
    loading with --allow-op, runs it: the export says so instead of leaving it to the load."""
    pytest.importorskip("torchvision")
    boxes = torch.tensor([[0, 1.0, 1.0, 5.0, 6.0]])
    with pytest.warns(UserWarning, match=r"operators outside ATen: .*torchvision::roi_align.*"
                                         r"--allow-op"):
        pt2rt.export(RoiHead(), (torch.randn(1, 3, 8, 8), boxes), bundle_examples=False)


class Orthogonal(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.utils.parametrizations.orthogonal(nn.Linear(6, 6))

    def forward(self, x):
        return self.l(x)


@pytest.mark.skipif(int(torch.__version__.split(".")[0]) >= 2,
                    reason="torch >= 2 traces matrix_exp with symbolic shapes")
def test_dynamic_export_names_the_op_without_a_symbolic_rule():
    """torch 1.13's symbolic trace reports some missing kernels only as "could not find
    kernel": the refusal names the op (the orthogonal parametrization's matrix_exp)."""
    with pytest.raises(pt2rt.ExportError, match=r"aten.linalg_matrix_exp.default has no "
                                                r"symbolic-shape rule"):
        pt2rt.export(Orthogonal(), (torch.randn(3, 6),),
                     dynamic_shapes={"x": {0: pt2rt.Dim("batch", min=1, max=8)}})


def test_scripted_submodule_weights_named_on_torch_1_13_and_traced_on_torch_2():
    """A torch.jit.script'ed submodule (people leaving TorchScript): torch 1.13's capture sees
    its weights as constants (TorchScript's interpreter reads them itself) and refuses, naming
    the scripted module and the remedy; torch 2's capture traces its forward."""
    class WithScripted(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(6, 6)
            self.b = torch.jit.script(nn.Sequential(nn.Linear(6, 4), nn.ReLU()))

        def forward(self, x):
            return self.b(self.a(x))
    if int(torch.__version__.split(".")[0]) >= 2:
        pt2rt.export(WithScripted(), (torch.randn(3, 6),))
        return
    with pytest.raises(pt2rt.CaptureError, match=r"the TorchScript module 'b' .* export the "
                       r"nn.Module it was scripted from"):
        pt2rt.export(WithScripted(), (torch.randn(3, 6),))


def test_aten_ctc_loss_called_directly_is_refused_naming_the_way_out():
    """ATen's _ctc_loss returns log_alpha sized by max(target_lengths): torch 2 tags it
    dynamic_output_shape, and a direct call is refused naming F.ctc_loss, which pt2rt captures
    as pt2rt::ctc_loss (test_ctc_loss.py); torch 1.13 does not tag it."""
    class CTC(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(5, 6)

        def forward(self, x, targets):
            log_probs = self.proj(x).log_softmax(-1).transpose(0, 1)
            lengths = [x.shape[1]] * x.shape[0]
            return torch._ctc_loss(log_probs, targets, lengths, [targets.shape[1]] * x.shape[0]
                                   )[0].sum()
    args = (torch.randn(3, 12, 5), torch.randint(1, 6, (3, 4)))
    if int(torch.__version__.split(".")[0]) < 2:
        pt2rt.export(CTC(), args)
        return
    with pytest.raises(pt2rt.CaptureError, match=r"call F.ctc_loss or nn.CTCLoss, which pt2rt "
                       r"captures as pt2rt::ctc_loss"):
        pt2rt.export(CTC(), args)


@pytest.mark.parametrize("how", ["script", "trace"])
def test_torchscript_model_is_refused_naming_the_way_out(how):
    """A TorchScript module as the model (people leaving TorchScript): its code runs in
    TorchScript's interpreter. Refused up front, typed, with the remedy (was: a ValueError from
    inspect.signature, a misleading gradient-path error, or a hook error, by lane and kind)."""
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    x = torch.randn(2, 3)
    scripted = torch.jit.script(model) if how == "script" else torch.jit.trace(model, x)
    with pytest.raises(pt2rt.ExportTypeError, match=r"model is a TorchScript module .* export "
                       r"the Python nn.Module it was made from .*load_state_dict"):
        pt2rt.export(scripted, (x,))
