"""export-cli train: the loop against the same loop in eager PyTorch, output, save, errors."""
import copy
import re

import pytest
import torch
from torch.testing import assert_close

import pt2rt
from conftest import save_tensors


@pytest.fixture()
def mlp_data(tmp_path):
    torch.manual_seed(5)
    x = torch.randn(12, 16)
    y = torch.randint(0, 10, (12,))
    return save_tensors(tmp_path / "train.pt", (x, y)), x, y


def eager_sgd(model, x, y, epochs, batch, lr, momentum, seed, optimizer="sgd"):
    """What `export-cli train` does, in eager PyTorch: per-epoch randperm from one generator
    seeded once, full batches only, cross_entropy on output 0."""
    m = copy.deepcopy(model).train()
    params = [p for p in m.parameters() if p.requires_grad]
    opt = (torch.optim.SGD(params, lr=lr, momentum=momentum) if optimizer == "sgd"
           else torch.optim.Adam(params, lr=lr))
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=gen)
        total = 0.0
        steps = len(y) // batch
        for s in range(steps):
            idx = perm[s * batch:(s + 1) * batch]
            loss = torch.nn.functional.cross_entropy(m(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        losses.append(total / steps)
    return m, losses


def epoch_losses(out):
    return [float(v) for v in re.findall(r"^epoch \d+/\d+  loss (\S+)", out, re.M)]


@pytest.mark.parametrize("optimizer,lr,momentum", [("sgd", 0.1, 0.9), ("adam", 0.01, 0.0)])
def test_matches_eager_training(cli, archives, mlp_data, tmp_path, optimizer, lr, momentum):
    a = archives.get("mlp")
    data, x, y = mlp_data
    tuned = tmp_path / "tuned.pt2"
    r = cli.ok("train", a.path, "--data", data, "--epochs", "3", "--lr", lr, "--optimizer",
               optimizer, "--momentum", momentum, "--seed", "7", "--save", tuned)
    eager, losses = eager_sgd(a.model, x, y, 3, 4, lr, momentum, 7, optimizer)
    got = epoch_losses(r.out)
    assert len(got) == 3
    assert_close(torch.tensor(got), torch.tensor(losses), rtol=1e-3, atol=1e-4)
    loaded = pt2rt.load(str(tuned))
    for name, p in eager.named_parameters():
        assert_close(loaded.weights[name], p.detach(), rtol=1e-4, atol=1e-5, msg=name)
    assert f"saved {tuned}" in r.out


def test_batch_norm_model_trains_like_eager_running_statistics_included(cli, archives, tmp_path):
    """A conv + BatchNorm net (train-mode running statistics updated every step by the batch
    norm kernel itself, runtime/plan/fuse_batch_norm_stats.h): losses, parameters and every buffer
    (running_mean, running_var, num_batches_tracked) after 3 epochs match eager PyTorch's."""
    a = archives.get("cnn_bn")
    torch.manual_seed(11)
    x = torch.randn(12, 1, 16, 16) * 2 + 0.5
    y = torch.randint(0, 10, (12,))
    data = save_tensors(tmp_path / "train.pt", (x, y))
    tuned = tmp_path / "tuned.pt2"
    r = cli.ok("train", a.path, "--data", data, "--epochs", "3", "--lr", "0.05", "--momentum",
               "0.9", "--seed", "7", "--save", tuned)
    eager, losses = eager_sgd(a.model, x, y, 3, 4, 0.05, 0.9, 7)
    assert_close(torch.tensor(epoch_losses(r.out)), torch.tensor(losses), rtol=1e-3, atol=1e-4)
    loaded = pt2rt.load(str(tuned))
    for name, t in [*eager.named_parameters(), *eager.named_buffers()]:
        assert_close(loaded.weights[name], t.detach(), rtol=1e-4, atol=1e-5, msg=name)
    assert int(loaded.weights["features.1.num_batches_tracked"]) == 9


def test_same_seed_same_run_other_seed_other_run(cli, archives, mlp_data):
    a = archives.get("mlp")
    data = mlp_data[0]
    args = ("train", a.path, "--data", data, "--epochs", "2", "--lr", "0.05")
    first = epoch_losses(cli.ok(*args, "--seed", "1").out)
    again = epoch_losses(cli.ok(*args, "--seed", "1").out)
    other = epoch_losses(cli.ok(*args, "--seed", "2").out)
    assert first == again
    assert first != other


def test_eval_data_and_output_lines(cli, archives, mlp_data, tmp_path):
    a = archives.get("mlp")
    data = mlp_data[0]
    r = cli.ok("train", a.path, "--data", data, "--eval-data", data, "--epochs", "2",
               "--optimizer", "adam", "--lr", "0.01")
    assert re.search(r"^before training: eval_loss \S+  eval_accuracy 0\.\d{4}", r.out, re.M)
    assert len(re.findall(r"^epoch \d/2  loss \S+  eval_loss \S+  eval_accuracy \S+  \(", r.out,
                          re.M)) == 2
    assert "samples/s" in r.out
    assert re.search(r"^final: train_loss \S+  eval_loss \S+  eval_accuracy \S+", r.out, re.M)
    assert "12 samples" in r.out and "3 batches of 4" in r.out
    # the original archive is untouched: it still verifies against its references
    assert "OK:" in cli.ok("verify", a.path).out


def test_eval_pads_the_last_batch(cli, archives, tmp_path):
    """10 eval samples with a static batch of 4: accuracy over exactly the 10."""
    a = archives.get("mlp")
    torch.manual_seed(6)
    x = torch.randn(10, 16)
    m = copy.deepcopy(a.model).eval()
    with torch.no_grad():
        pred = m(x).argmax(1)
    y = pred.clone()
    y[:3] = (y[:3] + 1) % 10  # exactly 7 of 10 right
    data = save_tensors(tmp_path / "eval.pt", (x, y))
    r = cli.ok("train", a.path, "--data", data, "--eval-data", data, "--epochs", "0")
    assert "before training: eval_loss" in r.out and "eval_accuracy 0.7000" in r.out
    want = torch.nn.functional.cross_entropy(m(x), y).item()
    got = float(re.search(r"before training: eval_loss (\S+)", r.out).group(1))
    assert abs(got - want) < 1e-4


def test_mse_loss(cli, archives, tmp_path):
    a = archives.get("mlp")
    torch.manual_seed(8)
    data = save_tensors(tmp_path / "reg.pt", (torch.randn(8, 16), torch.randn(8, 10)))
    r = cli.ok("train", a.path, "--data", data, "--loss", "mse", "--epochs", "3", "--lr", "0.05")
    losses = epoch_losses(r.out)
    assert len(losses) == 3 and losses[-1] < losses[0]


def test_errors(cli, archives, mlp_data, tmp_path):
    a = archives.get("mlp")
    data, x, y = mlp_data
    cli.usage_error("train", a.path, mentions=["--data"])
    cli.usage_error("train", a.path, "--data", tmp_path / "none.pt", mentions=["none.pt"])
    cli.usage_error("train", a.path, "--data", data, "--batch-size", "3",
                    mentions=["--batch-size 3", "static batch size 4"])
    cli.usage_error("train", a.path, "--data", data, "--optimizer", "lbfgs", mentions=["lbfgs"])
    cli.usage_error("train", a.path, "--data", data, "--loss", "hinge", mentions=["hinge"])
    cli.usage_error("train", a.path, "--data", data, "--lr", "-1", mentions=["--lr"])
    three = save_tensors(tmp_path / "three.pt", (x, y, y))
    cli.usage_error("train", a.path, "--data", three, mentions=["three.pt", "3 tensors"])
    uneven = save_tensors(tmp_path / "uneven.pt", (x, y[:5]))
    cli.usage_error("train", a.path, "--data", uneven, mentions=["first (sample) dimension"])
    wide = save_tensors(tmp_path / "wide.pt", (torch.randn(8, 20), y[:8]))
    cli.usage_error("train", a.path, "--data", wide, mentions=["input 0", "[4, 20]"])
    few = save_tensors(tmp_path / "few.pt", (x[:3], y[:3]))
    cli.usage_error("train", a.path, "--data", few, mentions=["fewer than one batch"])
    bad_targets = save_tensors(tmp_path / "t2d.pt", (x, torch.zeros(12, 2, dtype=torch.long)))
    cli.usage_error("train", a.path, "--data", bad_targets, mentions=["need an output [N, C, 2]"])
    cli.usage_error("train", a.path, "--data", data, "--save", tmp_path / "no" / "dir" / "t.pt2",
                    mentions=["t.pt2"])


def test_output_by_stored_name_index_or_value_name(cli, named_outputs, tmp_path):
    """--output takes an output's stored name with or without brackets and quotes, its index,
    or (as before) its graph value's name; an unknown name lists the outputs' names."""
    import json
    torch.manual_seed(9)
    x, scale, y = torch.randn(8, 8), torch.rand(8, 8) + 0.5, torch.randint(0, 4, (8,))
    data = save_tensors(tmp_path / "d.pt", ((x, scale), y))
    path = named_outputs.path
    run = ("train", path, "--data", data, "--epochs", "2", "--lr", "0.1", "--seed", "3")
    value_name = json.loads(cli.ok("inspect", path, "--json").out)["signature"]["outputs"][0][
        "name"]
    by = {spec: cli.ok(*run, "--output", spec).out
          for spec in ("0", "logits", "['logits']", '["logits"]', value_name)}
    for spec, out in by.items():
        assert "loss cross_entropy on output 0 ['logits'] (" in out, (spec, out)
        assert epoch_losses(out) == epoch_losses(by["0"]), spec
    hidden = cli.ok(*run, "--output", "['hidden'][0]").out
    assert "on output 1 ['hidden'][0] (" in hidden and "float32[4, 8]" in hidden, hidden
    # the same training in eager PyTorch: cross_entropy on out["hidden"][0]
    m = copy.deepcopy(named_outputs.model).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    gen, losses = torch.Generator().manual_seed(3), []
    for _ in range(2):
        perm, total = torch.randperm(8, generator=gen), 0.0
        for b in (perm[:4], perm[4:]):
            loss = torch.nn.functional.cross_entropy(m(x[b], scale=scale[b])["hidden"][0], y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        losses.append(total / 2)
    assert_close(torch.tensor(epoch_losses(hidden)), torch.tensor(losses), rtol=1e-3, atol=1e-4)
    # a nested name has no bare form; unknown names list every output by name
    r = cli.usage_error(*run, "--output", "hidden",
                        mentions=["--output hidden names no output", "output 0 ['logits'] (",
                                  "output 1 ['hidden'][0] (", "output 2 ['hidden'][1] ("])
    assert "float32[4, 8]" in r.err
    # before schema 1.4 the outputs are named [i]: "[1]" and "1" both pick output 1
    old = ("train", named_outputs.path_1_3, *run[2:])
    assert epoch_losses(cli.ok(*old, "--output", "[1]").out) == epoch_losses(hidden)
    cli.usage_error(*old, "--output", "logits", mentions=["output 0 [0] ("])


def test_inference_only_archive_cannot_train(cli, tmp_path, mlp_data):
    import models
    model, args = models.build("mlp")
    path = tmp_path / "infer.pt2"
    pt2rt.export(model, args, train=False).save(str(path))
    cli.usage_error("train", path, "--data", mlp_data[0], mentions=["forward/backward"])


class _DropoutNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.drop = torch.nn.Dropout(0.5)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def test_seed_drives_the_graphs_random_ops(cli, mlp_data, tmp_path):
    """Dropout active in training: --seed also seeds the generator the dropout masks come from
    (torch::manual_seed), so the same seed repeats the losses exactly."""
    torch.manual_seed(0)
    path = tmp_path / "dropout.pt2"
    pt2rt.export(_DropoutNet(), (torch.randn(4, 16),)).save(str(path))
    args = ("train", path, "--data", mlp_data[0], "--epochs", "3", "--lr", "0.05")
    first = epoch_losses(cli.ok(*args, "--seed", "3").out)
    again = epoch_losses(cli.ok(*args, "--seed", "3").out)
    other = epoch_losses(cli.ok(*args, "--seed", "4").out)
    assert len(first) == 3 and first == again
    assert first != other


def test_dropout_training_follows_eager_with_the_same_seed(cli, tmp_path):
    """`--seed S` seeds the graphs' generator as torch.manual_seed(S) does: a model with
    dropout draws the same masks as eager's loop, so losses and weights follow it (10 steps)."""
    import random_models
    model, args = random_models.build_dropout()
    path = tmp_path / "dropout.pt2"
    pt2rt.export(model, args).save(str(path))
    torch.manual_seed(3)
    x, y = torch.randn(60, 8), torch.randint(0, 3, (60,))
    data = save_tensors(tmp_path / "train.pt", (x, y))
    tuned = tmp_path / "tuned.pt2"
    r = cli.ok("train", path, "--data", data, "--epochs", "1", "--batch-size", "6", "--lr", "0.1",
               "--momentum", "0", "--seed", "7", "--save", tuned)
    torch.manual_seed(7)
    eager, losses = eager_sgd(model, x, y, 1, 6, 0.1, 0.0, 7)
    assert_close(torch.tensor(epoch_losses(r.out)), torch.tensor(losses), rtol=1e-4, atol=1e-5)
    loaded = pt2rt.load(str(tuned))
    for name, p in eager.named_parameters():
        assert_close(loaded.weights[name], p.detach(), rtol=1e-4, atol=1e-5, msg=name)


def test_class_targets_out_of_range_are_named(cli, archives, mlp_data, tmp_path):
    """A label >= the number of classes was LibTorch's raw 'Target 10 is out of bounds.' in
    the middle of an epoch; now refused before the first step, naming index and classes."""
    a = archives.get("mlp")
    _, x, y = mlp_data
    bad = y.clone()
    bad[3] = 10
    data = save_tensors(tmp_path / "bad.pt", (x, bad))
    cli.usage_error("train", a.path, "--data", data,
                    mentions=["class index 10", "10 classes (indices 0 to 9)"])
    cli.usage_error("train", a.path, "--data", mlp_data[0], "--eval-data", data,
                    mentions=["class index 10"])


def test_float_targets_of_another_shape_say_what_they_need(cli, archives, tmp_path):
    a = archives.get("mlp")
    data = save_tensors(tmp_path / "f.pt", (torch.randn(8, 16), torch.randn(8)))
    cli.usage_error("train", a.path, "--data", data,
                    mentions=["float32[8] need an output [N] of their shape",
                              "class indices are int64"])


def test_training_without_save_says_the_weights_are_discarded(cli, archives, mlp_data):
    r = cli.ok("train", archives.get("mlp").path, "--data", mlp_data[0], "--epochs", "1")
    assert "no --save, so the trained weights are discarded" in r.err.splitlines()[-1]
