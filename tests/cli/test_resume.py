"""export-cli train --save / --resume (issue 12 item 3): the training state stored in the
archive (optimizer/state.fb + optimizer/<n>, schema/README.md "Training state") continues a run
exactly — 2 + 2 epochs give the losses and the bit-identical weights and optimizer state of 4
uninterrupted epochs — for SGD with momentum (and a step LR schedule) and Adam, on a model with
BatchNorm and Dropout(p=0.5); mismatched options are refused in one line; strip drops the
state; damaged states are refused naming what is wrong."""
import json
import re
import zipfile

import pytest
import torch
from torch import nn

import pt2rt
from pt2rt.ir import constants
from pt2rt.format.archive import _write_aligned
from conftest import save_tensors


class BnDropout(nn.Module):
    """Linear-BN-ReLU-Dropout(0.5)-Linear: running stats and random masks must both resume."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                 nn.Dropout(0.5), nn.Linear(32, 10))

    def forward(self, x):
        return self.net(x)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    work = tmp_path_factory.mktemp("resume")
    torch.manual_seed(0)
    path = work / "bn_dropout.pt2"
    pt2rt.export(BnDropout(), (torch.randn(4, 16),)).save(str(path))
    data = save_tensors(work / "train.pt", (torch.randn(24, 16), torch.randint(0, 10, (24,))))
    return path, data


@pytest.fixture(scope="module")
def sgd_state(cli, job, tmp_path_factory):
    """The job's model after one SGD epoch, saved with its training state."""
    model, data = job
    a = tmp_path_factory.mktemp("sgd_state") / "a.pt2"
    cli.ok("train", model, "--data", data, "--epochs", "1", *RUNS["sgd"], "--save", a)
    return a


def epoch_lines(out):
    return re.findall(r"^epoch (\d+/\d+)  loss (\S+)", out, re.M)


def weights(path):
    return pt2rt.load(str(path)).weights


def entries(path, prefix):
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist() if n.startswith(prefix)}


RUNS = {
    "sgd": ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--lr-schedule", "step",
            "--lr-step-size", "1", "--lr-gamma", "0.5"],
    "adam": ["--optimizer", "adam", "--lr", "0.01", "--weight-decay", "0.001"],
}


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_resume_equals_uninterrupted(cli, job, tmp_path, optimizer):
    model, data = job
    common = ["--data", data, "--seed", "3", *RUNS[optimizer]]
    full = cli.ok("train", model, "--epochs", "4", *common, "--save", tmp_path / "full.pt2")
    first = cli.ok("train", model, "--epochs", "2", *common, "--save", tmp_path / "a.pt2")
    # the stored settings apply: no option but --data repeated
    second = cli.ok("train", tmp_path / "a.pt2", "--data", data, "--epochs", "2", "--resume",
                    "--save", tmp_path / "b.pt2")
    assert "resuming after epoch 2" in second.out
    expected = epoch_lines(full.out)
    assert [e for _, e in expected] == [e for _, e in
                                        epoch_lines(first.out) + epoch_lines(second.out)]
    assert [n for n, _ in epoch_lines(second.out)] == ["3/4", "4/4"]
    got, want = weights(tmp_path / "b.pt2"), weights(tmp_path / "full.pt2")
    assert set(got) == set(want)
    for name in want:  # parameters and BatchNorm buffers, bit for bit
        assert torch.equal(got[name], want[name]), name
    # the stored optimizer tensors too (same entries, same bytes; state.fb differs in the
    # settings: lr-t-max is the first run's --epochs), and inspect names the state
    tensors = [entries(p, "optimizer/") for p in (tmp_path / "b.pt2", tmp_path / "full.pt2")]
    for t in tensors:
        del t[constants.TRAINING_STATE_ENTRY]
    assert tensors[0] == tensors[1] and len(tensors[0]) >= 6
    summary = cli.ok("inspect", tmp_path / "b.pt2").out
    line = [s for s in summary.splitlines() if s.startswith("training state: ")]
    # the size breakdown counts the state's entries (the stored tensors and state.fb)
    state_bytes = sum(len(v) for v in entries(tmp_path / "b.pt2", "optimizer/").values())
    j = json.loads(cli.ok("inspect", tmp_path / "b.pt2", "--json").out)
    assert {p["part"]: p["bytes"] for p in j["size"]}["optimizer/ (training state)"] == state_bytes
    assert "  optimizer/ (training state) " in summary
    assert len(line) == 1 and line[0].startswith(f"training state: {optimizer} (")
    assert "epochs 4, steps 24" in line[0]  # 6 batches of 4 per epoch


def test_resume_refuses_other_settings(cli, job, sgd_state):
    model, data = job
    a = sgd_state
    r = cli.usage_error("train", a, "--data", data, "--resume", "--optimizer", "adam",
                        mentions=["--optimizer adam differs from the stored sgd"])
    assert len(r.err.strip().splitlines()) == 1
    cli.usage_error("train", a, "--data", data, "--resume", "--momentum", "0.5",
                    mentions=["--momentum 0.5 differs from the stored 0.90000000000000002"])
    cli.ok("train", a, "--data", data, "--resume", "--lr", "0.05", "--epochs", "0")  # equal
    cli.usage_error("train", model, "--data", data, "--resume",
                    mentions=["holds no training state"])


def test_strip_and_save_drop_the_state(cli, job, sgd_state, tmp_path):
    model, data = job
    a = sgd_state
    assert constants.TRAINING_STATE_ENTRY in entries(a, "optimizer/")
    for mode in ("--inference-only", "--training-state"):
        out = tmp_path / f"s{mode}.pt2"
        cli.ok("strip", a, out, mode)
        assert entries(out, "optimizer/") == {}
        assert "training state: none" in cli.ok("inspect", out).out
    cli.usage_error("train", tmp_path / "s--training-state.pt2", "--data", data, "--resume",
                    mentions=["holds no training state"])
    # train without --resume starts afresh and stores a new state (epochs 1, not 2)
    b = tmp_path / "b.pt2"
    cli.ok("train", a, "--data", data, "--epochs", "1", "--save", b)
    # sgd without momentum keeps no tensors; the progress is stored all the same
    line = cli.ok("inspect", b).out.splitlines()[-1]
    assert line.startswith("training state: sgd (lr 0.01, momentum 0,"), line
    assert line.endswith("state for 0 parameters (0 tensors, 0 bytes), epochs 1, steps 6")


def rewrite(src, dst, change):
    """Copies archive `src` to `dst`, entry by entry through change(name, data) -> data or None
    (dropped), plus change(None, None) -> [(name, data)] appended."""
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        for name in z.namelist():
            data = change(name, z.read(name))
            if data is not None:
                _write_aligned(out, name, data)
        for name, data in change(None, None) or []:
            _write_aligned(out, name, data)
    return dst


@pytest.mark.parametrize("case,message", [
    ("short_tensor", "holds {short} bytes, {full} expected"),
    ("missing_tensor", "entry 'optimizer/0' is missing"),
    ("stray_entry", "entry 'optimizer/99' is not referenced"),
    ("bad_state_fb", "is not a valid TrainingState FlatBuffer"),
    ("orphan_tensor", "without optimizer/state.fb"),
])
def test_damaged_state_is_refused(cli, job, sgd_state, tmp_path, case, message):
    model, data = job
    a = sgd_state
    full = len(entries(a, "optimizer/")["optimizer/0"])  # net.0.weight's momentum buffer
    message = message.format(short=full - 4, full=full)

    def change(name, blob):
        if name is None:
            return [("optimizer/99", b"x")] if case == "stray_entry" else None
        if name == "optimizer/0" and case == "short_tensor":
            return blob[:-4]
        if name == "optimizer/0" and case == "missing_tensor":
            return None
        if name == constants.TRAINING_STATE_ENTRY and case in ("bad_state_fb", "orphan_tensor"):
            return None if case == "orphan_tensor" else blob[:40]
        return blob

    bad = rewrite(a, tmp_path / f"{case}.pt2", change)
    for args in (("inspect", bad), ("train", bad, "--data", data, "--resume")):
        r = cli(*args)
        assert r.rc != 0 and message in r.err, (args, r.err)
        assert "Traceback" not in r.err and "terminate called" not in r.err
