"""export-cli train on any model: several inputs, --output, --loss output, gradient
accumulation and LR schedules — each against the same loop in eager PyTorch."""
import copy
import re

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import pt2rt
from conftest import save_tensors


class _FeaturesAndLogits(torch.nn.Module):
    """Output 0 a feature map [4, 8, 6, 6], output 1 the logits [4, 5]."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        f = torch.relu(self.conv(x))
        return f, self.head(f.mean(dim=(2, 3)))


class _OwnLoss(torch.nn.Module):
    """forward(x, y) -> cross_entropy loss: the loss is computed in the model."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(torch.relu(self.fc1(x))), y)


def eager_train(model, inputs, y, epochs, batch, lr, seed, momentum=0.0, accumulate=1,
                loss_fn=None, schedule=None):
    """What `export-cli train` does, in eager PyTorch (SGD): per-epoch randperm from one
    generator seeded once, full batches, one optimizer step per `accumulate` batches (each
    batch's loss divided by its group's size), the scheduler stepped per epoch."""
    m = copy.deepcopy(model).train()
    opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=lr,
                          momentum=momentum)
    sched = schedule(opt) if schedule else None
    gen = torch.Generator().manual_seed(seed)
    loss_fn = loss_fn or (lambda m, xs, t: F.cross_entropy(m(*xs), t))
    losses, lrs = [], []
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=gen)
        steps = len(y) // batch
        total = 0.0
        lrs.append(opt.param_groups[0]["lr"])
        for s in range(steps):
            start = s // accumulate * accumulate
            group = min(steps, start + accumulate) - start
            if s == start:
                opt.zero_grad()
            idx = perm[s * batch:(s + 1) * batch]
            loss = loss_fn(m, [x[idx] for x in inputs], y[idx])
            (loss / group).backward()
            if s + 1 == start + group:
                opt.step()
            total += loss.item()
        losses.append(total / steps)
        if sched:
            sched.step()
    return m, losses, lrs


def epoch_losses(out):
    return [float(v) for v in re.findall(r"^epoch \d+/\d+  loss (\S+)", out, re.M)]


def epoch_lrs(out):
    return [float(v) for v in re.findall(r"^epoch \d+/\d+  loss \S+  lr (\S+)", out, re.M)]


@pytest.fixture(scope="module")
def two_io_data(tmp_path_factory):
    torch.manual_seed(11)
    x1, x2, y = torch.randn(16, 8), torch.randn(16, 3), torch.randint(0, 6, (16,))
    path = tmp_path_factory.mktemp("data") / "two_io.pt"
    return save_tensors(path, ((x1, x2), y)), (x1, x2), y


def test_multi_input_model_trains_like_eager(cli, archives, two_io_data, tmp_path):
    a = archives.get("two_io")  # forward(x, y) -> (logits float32[4, 6], argmax int64[4])
    data, xs, y = two_io_data
    tuned = tmp_path / "tuned.pt2"
    r = cli.ok("train", a.path, "--data", data, "--eval-data", data, "--epochs", "4", "--lr",
               "0.2", "--seed", "3", "--save", tuned)
    assert "16 samples float32[16, 8], float32[16, 3]" in r.out
    assert "loss cross_entropy on output 0" in r.out
    eager, losses, _ = eager_train(a.model, xs, y, 4, 4, 0.2, 3,
                                   loss_fn=lambda m, xs, t: F.cross_entropy(m(*xs)[0], t))
    got = epoch_losses(r.out)
    assert_close(torch.tensor(got), torch.tensor(losses), rtol=1e-3, atol=1e-4)
    assert got[-1] < got[0]
    loaded = pt2rt.load(str(tuned))
    for name, p in eager.named_parameters():
        assert_close(loaded.weights[name], p.detach(), rtol=1e-4, atol=1e-5, msg=name)


def test_multi_input_errors(cli, archives, two_io_data, tmp_path):
    a = archives.get("two_io")
    data, xs, y = two_io_data
    one = save_tensors(tmp_path / "one.pt", (xs[0], y))
    cli.usage_error("train", a.path, "--data", one,
                    mentions=["1 input tensor(s)", "takes 2 (x, y)", "((input_0, input_1"])
    # output 1 is the int64 argmax: refused in one line, not trained on
    cli.usage_error("train", a.path, "--data", data, "--output", "1",
                    mentions=["--loss cross_entropy cannot use output 1", "int64[4]",
                              "floating-point", "--output"])
    cli.usage_error("train", a.path, "--data", data, "--output", "7",
                    mentions=["--output 7 names no output", "output 0", "output 1"])
    bad = save_tensors(tmp_path / "bad.pt", ((xs[0], xs[1][:5]), y))
    cli.usage_error("train", a.path, "--data", bad, mentions=["input 1", "first (sample)"])


def test_output_chosen_by_name_or_index(cli, tmp_path):
    """The issue's case: output 0 is a feature map. It is refused, not silently used."""
    torch.manual_seed(12)
    model = _FeaturesAndLogits()
    path = tmp_path / "features.pt2"
    pt2rt.export(model, (torch.randn(4, 3, 8, 8),)).save(str(path))
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 5, (8,))
    data = save_tensors(tmp_path / "d.pt", (x, y))
    cli.usage_error("train", path, "--data", data,
                    mentions=["cannot use output 0", "float32[4, 8, 6, 6]", "need an output [N, C]",
                              "--output"])
    names = re.findall(r"output 1 \[1\] \((\w+)\)", cli("train", path, "--data", data,
                                                          "--output", "9").err)
    assert names, "the error lists the outputs by stored and value name"
    by_index = epoch_losses(cli.ok("train", path, "--data", data, "--output", "1",
                                   "--epochs", "2", "--lr", "0.1").out)
    by_name = epoch_losses(cli.ok("train", path, "--data", data, "--output", names[0],
                                  "--epochs", "2", "--lr", "0.1").out)
    _, losses, _ = eager_train(model, [x], y, 2, 4, 0.1, 0,
                               loss_fn=lambda m, xs, t: F.cross_entropy(m(*xs)[1], t))
    assert by_index == by_name
    assert_close(torch.tensor(by_index), torch.tensor(losses), rtol=1e-3, atol=1e-4)
    # mse does not broadcast: [4, 5] logits against [N, 3] targets are refused
    reg = save_tensors(tmp_path / "reg.pt", (x, torch.randn(8, 3)))
    cli.usage_error("train", path, "--data", reg, "--loss", "mse", "--output", "1",
                    mentions=["--loss mse cannot use output 1", "need an output [N, 3]"])


def test_loss_computed_in_forward(cli, tmp_path):
    torch.manual_seed(13)
    model = _OwnLoss()
    x, y = torch.randn(12, 16), torch.randint(0, 10, (12,))
    path = tmp_path / "own_loss.pt2"
    pt2rt.export(model, (x[:4], y[:4])).save(str(path))
    data = save_tensors(tmp_path / "d.pt", (x, y))
    r = cli.ok("train", path, "--data", data, "--eval-data", data, "--loss", "output",
               "--epochs", "3", "--lr", "0.1", "--seed", "4")
    assert "loss output on output 0" in r.out
    _, losses, _ = eager_train(model, [x], y, 3, 4, 0.1, 4,
                               loss_fn=lambda m, xs, t: m(*xs, t))
    got = epoch_losses(r.out)
    assert_close(torch.tensor(got), torch.tensor(losses), rtol=1e-3, atol=1e-4)
    assert got[-1] < got[0]
    evals = [float(v) for v in re.findall(r"eval_loss (\S+)", r.out)]
    assert evals[-1] < evals[0] and "eval_accuracy" not in r.out
    # without --loss output the model takes one input too many
    cli.usage_error("train", path, "--data", data, mentions=["takes 2 (x, y)"])


def test_a_ctc_loss_in_forward_trains_like_eager(cli, tmp_path):
    """A speech-style model computing F.ctc_loss in forward (pt2rt::ctc_loss, ctc_ops.py),
    trained by the C++ runtime for 16 SGD steps on batches whose longest target changes from
    batch to batch (ATen sizes the CTC's log_alpha by it): the epoch losses eager's."""
    from test_ctc_loss import FEATURES, LABELS, S, T, Acoustic
    model = Acoustic()
    g = torch.Generator().manual_seed(5)
    n = 12
    feats = torch.randn(n, T, FEATURES, generator=g)
    targets = torch.randint(1, LABELS, (n, S), generator=g)
    input_lengths = torch.randint(8, T + 1, (n,), generator=g)
    target_lengths = torch.randint(1, S + 1, (n,), generator=g)
    path = tmp_path / "ctc.pt2"
    pt2rt.export(model, (feats[:3], targets[:3], input_lengths[:3], target_lengths[:3])
                 ).save(str(path))
    data = save_tensors(tmp_path / "d.pt", ((feats, targets, input_lengths), target_lengths))
    r = cli.ok("train", path, "--data", data, "--loss", "output", "--batch-size", "3",
               "--epochs", "4", "--lr", "0.05", "--seed", "2")
    _, losses, _ = eager_train(model, [feats, targets, input_lengths], target_lengths, 4, 3,
                               0.05, 2, loss_fn=lambda m, xs, t: m(*xs, t))
    got = epoch_losses(r.out)   # (printed to 6 significant digits)
    assert_close(torch.tensor(got), torch.tensor(losses), rtol=1e-4, atol=1e-5)
    assert got[-1] < got[0]


def test_loss_output_needs_a_scalar(cli, archives, two_io_data, tmp_path):
    a = archives.get("two_io")  # (x, y) -> logits float32[4, 6]: with the targets as y
    _, xs, _ = two_io_data
    data = save_tensors(tmp_path / "d.pt", (xs[0], xs[1]))
    cli.usage_error("train", a.path, "--data", data, "--loss", "output",
                    mentions=["--loss output cannot use output 0", "float32[4, 6]", "scalar"])
    cli.usage_error("train", a.path, "--data", save_tensors(tmp_path / "e.pt", (xs, xs[1])),
                    "--loss", "output", mentions=["2 input tensor(s) plus the targets"])


def test_grad_accumulation_equals_the_larger_batch(cli, archives, tmp_path):
    """3 batches of 4 per step (12 samples): the steps of one batch of 12 in eager."""
    a = archives.get("mlp")
    torch.manual_seed(14)
    x, y = torch.randn(12, 16), torch.randint(0, 10, (12,))
    data = save_tensors(tmp_path / "d.pt", (x, y))
    r = cli.ok("train", a.path, "--data", data, "--grad-accumulation", "3", "--epochs", "3",
               "--lr", "0.1", "--momentum", "0.9", "--seed", "5")
    assert "3 batches per optimizer step" in r.out
    _, losses, _ = eager_train(a.model, [x], y, 3, 12, 0.1, 5, momentum=0.9)
    assert_close(torch.tensor(epoch_losses(r.out)), torch.tensor(losses), rtol=1e-3, atol=1e-4)
    # 2 per step over 3 batches: groups of 2 and 1, as the eager loop does
    r2 = cli.ok("train", a.path, "--data", data, "--grad-accumulation", "2", "--epochs", "3",
                "--lr", "0.1", "--seed", "5")
    _, losses2, _ = eager_train(a.model, [x], y, 3, 4, 0.1, 5, accumulate=2)
    assert_close(torch.tensor(epoch_losses(r2.out)), torch.tensor(losses2), rtol=1e-3,
                 atol=1e-4)
    cli.usage_error("train", a.path, "--data", data, "--grad-accumulation", "0",
                    mentions=["--grad-accumulation"])


@pytest.mark.parametrize("schedule,args,factory", [
    ("step", ["--lr-step-size", "2", "--lr-gamma", "0.5"],
     lambda opt: torch.optim.lr_scheduler.StepLR(opt, 2, 0.5)),
    ("cosine", ["--lr-min", "0.01"],
     lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, 5, 0.01)),
])
def test_lr_schedules_match_torch_optim(cli, archives, tmp_path, schedule, args, factory):
    a = archives.get("mlp")
    torch.manual_seed(15)
    x, y = torch.randn(12, 16), torch.randint(0, 10, (12,))
    data = save_tensors(tmp_path / "d.pt", (x, y))
    r = cli.ok("train", a.path, "--data", data, "--epochs", "5", "--lr", "0.2",
               "--lr-schedule", schedule, *args, "--seed", "6")
    _, losses, lrs = eager_train(a.model, [x], y, 5, 4, 0.2, 6, schedule=factory)
    assert_close(torch.tensor(epoch_lrs(r.out), dtype=torch.float64),
                 torch.tensor(lrs, dtype=torch.float64), rtol=1e-5, atol=1e-6)
    assert_close(torch.tensor(epoch_losses(r.out)), torch.tensor(losses), rtol=1e-3, atol=1e-4)


def test_lr_schedule_errors(cli, archives, tmp_path):
    a = archives.get("mlp")
    data = save_tensors(tmp_path / "d.pt", (torch.randn(8, 16), torch.randint(0, 10, (8,))))
    cli.usage_error("train", a.path, "--data", data, "--lr-schedule", "poly",
                    mentions=["--lr-schedule", "poly"])
    cli.usage_error("train", a.path, "--data", data, "--lr-schedule", "step",
                    "--lr-step-size", "0", mentions=["--lr-step-size"])
